"""The schema and its ledger: a blank file migrated to the latest, a file migrated in stages
with rows in it, refusal of a file a newer build migrated, and re-opening without re-applying."""
from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from pathlib import Path

import pytest

from hermes_trove.dag import SummaryDAG
from hermes_trove.db import Database, SchemaTooNewError, migrate, open_trove_readonly
from hermes_trove.migrations import MIGRATIONS
from hermes_trove.refs import make_ref, parse_claim, verify
from hermes_trove.store import MessageStore, SessionKey

NAMES = [name for name, _ in MIGRATIONS]

# ---- the latest schema -----------------------------------------------------------------

TABLES = {
    "meta": {"key": "TEXT", "value": "TEXT"},
    "schema_migrations": {"name": "TEXT", "applied_at": "REAL"},
    "messages": {
        "store_id": "INTEGER", "session_id": "TEXT", "conversation_id": "TEXT", "platform": "TEXT",
        "source": "TEXT", "role": "TEXT", "content": "TEXT", "content_is_json": "INTEGER", "tool_calls": "TEXT",
        "tool_call_id": "TEXT", "tool_name": "TEXT", "extra": "TEXT", "token_count": "INTEGER",
        "identity": "TEXT", "pinned": "INTEGER", "created_at": "REAL", "ingested_at": "REAL"},
    "summary_nodes": {
        "node_id": "INTEGER", "session_id": "TEXT", "depth": "INTEGER", "summary": "TEXT",
        "token_count": "INTEGER", "source_token_count": "INTEGER", "earliest_at": "REAL", "latest_at": "REAL",
        "level": "TEXT", "model": "TEXT", "expand_hint": "TEXT", "created_at": "REAL"},
    "node_messages": {"node_id": "INTEGER", "ordinal": "INTEGER", "store_id": "INTEGER"},
    "node_children": {"node_id": "INTEGER", "ordinal": "INTEGER", "child_id": "INTEGER"},
    "carried_nodes": {"session_id": "TEXT", "node_id": "INTEGER", "from_session_id": "TEXT", "carried_at": "REAL"},
    "session_frontier": {"session_id": "TEXT", "node_id": "INTEGER"},
    "sessions": {
        "session_id": "TEXT", "conversation_id": "TEXT", "platform": "TEXT", "ingest_len": "INTEGER",
        "ingest_identity": "TEXT", "frontier_store_id": "INTEGER", "last_rotate_at": "REAL",
        "last_rotate_backup": "TEXT", "previous_session_id": "TEXT", "created_at": "REAL", "updated_at": "REAL",
        "ended_at": "REAL", "scope": "TEXT", "rotated_frontier": "INTEGER"},
    "imports": {"import_id": "TEXT", "kind": "TEXT", "sources": "TEXT", "options": "TEXT", "first_at": "REAL",
                "last_at": "REAL"},
    "imported_messages": {"import_id": "TEXT", "source_key": "TEXT", "store_id": "INTEGER", "meta": "TEXT",
                          "imported_at": "REAL"},
    "imported_nodes": {"import_id": "TEXT", "source_key": "TEXT", "node_id": "INTEGER", "imported_at": "REAL"},
    "work_leases": {"name": "TEXT", "owner": "TEXT", "acquired_at": "REAL", "expires_at": "REAL"},
    "embedding_generations": {
        "generation_id": "INTEGER", "provider": "TEXT", "model": "TEXT", "dim": "INTEGER", "base_url": "TEXT",
        "state": "TEXT", "message_cursor": "INTEGER", "node_cursor": "INTEGER", "removed": "INTEGER",
        "last_error": "TEXT", "last_error_at": "REAL", "created_at": "REAL", "activated_at": "REAL",
        "recipe": "TEXT"},
    "embedding_vectors": {
        "vector_id": "INTEGER", "generation_id": "INTEGER", "kind": "TEXT", "item_id": "INTEGER",
        "span_start": "INTEGER", "span_end": "INTEGER", "session_id": "TEXT", "at": "REAL", "vector": "BLOB",
        "scale": "REAL", "created_at": "REAL"},
    "temporal_rollups": {
        "rollup_id": "INTEGER", "period_kind": "TEXT", "period_start": "REAL", "period_end": "REAL",
        "scope": "TEXT", "status": "TEXT", "summary": "TEXT", "token_count": "INTEGER", "source_count": "INTEGER",
        "source_token_count": "INTEGER", "level": "TEXT", "model": "TEXT", "model_calls": "INTEGER",
        "input_tokens": "INTEGER", "generation": "INTEGER", "attempts": "INTEGER", "error": "TEXT",
        "created_at": "REAL", "updated_at": "REAL", "claimed_at": "REAL", "built_at": "REAL", "failed_at": "REAL"},
    "temporal_rollup_sources": {"rollup_id": "INTEGER", "ordinal": "INTEGER", "node_id": "INTEGER"},
}
# messages_fts reads rows through a view that unpacks deflated text (packed.py)
FTS = {"messages_fts": ("messages_text", ["content", "tool_calls"]), "nodes_fts": ("summary_nodes", ["summary"])}
# Messages are indexed by the store in batches, so messages_fts has no insert trigger.
TRIGGERS = {"messages_fts_delete": "messages", "messages_fts_update": "messages",
            "nodes_fts_insert": "summary_nodes", "nodes_fts_delete": "summary_nodes",
            "nodes_fts_update": "summary_nodes",
            "embedding_vectors_removed": "embedding_vectors", "embedding_vectors_message_gone": "messages",
            "embedding_vectors_node_gone": "summary_nodes",
            "temporal_rollups_leaf_added": "summary_nodes", "temporal_rollups_leaf_changed": "summary_nodes",
            "temporal_rollups_leaf_removed": "summary_nodes"}
INDEXES = {
    "messages_session": ("messages", ["session_id", "store_id"]),
    "messages_session_time": ("messages", ["session_id", "created_at"]),
    "messages_identity": ("messages", ["session_id", "identity"]),
    "summary_nodes_session": ("summary_nodes", ["session_id", "depth", "node_id"]),
    "node_messages_store": ("node_messages", ["store_id"]),
    "node_children_child": ("node_children", ["child_id"]),
    "session_frontier_node": ("session_frontier", ["node_id"]),
    "sessions_scope": ("sessions", ["scope", "session_id"]),
    "sessions_conversation": ("sessions", ["conversation_id", "updated_at"]),
    "sessions_previous": ("sessions", ["previous_session_id"]),
    "embedding_vectors_scan": ("embedding_vectors", ["generation_id", "vector_id"]),
    "embedding_vectors_item": ("embedding_vectors", ["kind", "item_id"]),
    "temporal_rollups_window": ("temporal_rollups", ["scope", "period_start"]),
    "temporal_rollups_status": ("temporal_rollups", ["status", "period_kind", "period_start"]),
    "temporal_rollup_sources_node": ("temporal_rollup_sources", ["node_id"]),
    "summary_nodes_leaf_time": ("summary_nodes", ["depth", "latest_at"]),
    "messages_time": ("messages", ["created_at"]),
}


def raw(path: Path) -> sqlite3.Connection:
    """A plain autocommit connection, the kind ``migrate`` expects, with no migration run."""
    return sqlite3.connect(path, isolation_level=None)


def master(conn: sqlite3.Connection, kind: str) -> dict[str, str]:
    rows = conn.execute("SELECT name, tbl_name FROM sqlite_master WHERE type=? AND sql IS NOT NULL", (kind,))
    return {str(r[0]): str(r[1]) for r in rows}


def columns(conn: sqlite3.Connection, table: str) -> dict[str, str]:
    return {str(r[1]): str(r[2]) for r in conn.execute(f"PRAGMA table_info({table})")}


def ledger(conn: sqlite3.Connection) -> list[tuple[str, float]]:
    return [(str(r[0]), float(r[1])) for r in conn.execute("SELECT name, applied_at FROM schema_migrations"
                                                            " ORDER BY rowid")]


def digest(path: Path) -> str:
    """The file's bytes plus whatever its WAL holds (opening in WAL mode leaves an empty one)."""
    wal = Path(f"{path}-wal")
    return hashlib.sha256(path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")).hexdigest()


def test_migrate_blank(tmp_path):
    conn = raw(tmp_path / "t.db")
    assert migrate(conn) == NAMES
    shadows = {f"{fts}_{s}" for fts in FTS for s in ("data", "idx", "docsize", "config")}
    tables = {n for n in master(conn, "table") if n not in shadows and n != "sqlite_sequence"}
    assert tables == set(TABLES) | set(FTS)
    for table, cols in TABLES.items():
        assert columns(conn, table) == cols, table
    for fts, (content, cols) in FTS.items():
        ddl = conn.execute("SELECT sql FROM sqlite_master WHERE name=?", (fts,)).fetchone()[0]
        assert ddl.startswith(f"CREATE VIRTUAL TABLE {fts} USING fts5(") and f"content='{content}'" in ddl
        assert list(columns(conn, fts)) == cols
    assert master(conn, "trigger") == TRIGGERS
    assert master(conn, "view") == {"messages_text": "messages_text"}
    assert master(conn, "index") == {name: table for name, (table, _) in INDEXES.items()}
    for name, (_, cols) in INDEXES.items():
        assert [str(r[2]) for r in conn.execute(f"PRAGMA index_info({name})")] == cols, name
    ddl = conn.execute("SELECT sql FROM sqlite_master WHERE name='imported_messages'").fetchone()[0]
    assert ddl.rstrip().endswith("WITHOUT ROWID")  # keyed lookups only, clustered on the key
    assert [name for name, _ in ledger(conn)] == NAMES


def test_migration_names_are_unique():
    assert len(set(NAMES)) == len(NAMES)


def test_a_new_file_carries_no_numeric_schema_stamp(tmp_path):
    conn = Database(tmp_path / "t.db").connect()
    assert conn.execute("SELECT COUNT(*) FROM meta").fetchone()[0] == 0


# ---- migrating a file that already holds rows --------------------------------------------

def add_node(conn: sqlite3.Connection, session: str, depth: int, sources: list[int]) -> int:
    cur = conn.execute("INSERT INTO summary_nodes(session_id, depth, summary, created_at) VALUES (?, ?, ?, 0)",
                       (session, depth, f"{session} depth {depth} over {sources}"))
    node = int(cur.lastrowid or 0)
    table, column = ("node_messages", "store_id") if depth == 0 else ("node_children", "child_id")
    conn.executemany(f"INSERT INTO {table}(node_id, ordinal, {column}) VALUES (?, ?, ?)",
                     [(node, i, s) for i, s in enumerate(sources)])
    return node


def test_the_frontier_backfill_sees_own_carried_and_condensed_nodes(tmp_path):
    path = tmp_path / "t.db"
    conn = raw(path)
    assert migrate(conn, stop_before="0003_session_frontier") == ["0001_core", "0002_imports"]
    assert "session_frontier" not in master(conn, "table")

    for sid in "abcd":
        conn.execute("INSERT INTO sessions(session_id, created_at, updated_at) VALUES (?, 0, 0)", (sid,))
    ids = [int(conn.execute("INSERT INTO messages(session_id, role, content, created_at, ingested_at)"
                            " VALUES ('a', 'user', ?, 0, 0)", (f"pelican {i}",)).lastrowid or 0)
           for i in range(6)]
    leaf1, leaf2, leaf3 = (add_node(conn, "a", 0, ids[i:i + 2]) for i in (0, 2, 4))
    top = add_node(conn, "a", 1, [leaf1, leaf2])
    b_leaf = add_node(conn, "b", 0, ids[:1])
    c_leaf = add_node(conn, "c", 0, ids[1:2])
    c_top = add_node(conn, "c", 1, [leaf3, c_leaf])  # condenses a node carried into c
    conn.executemany("INSERT INTO carried_nodes(session_id, node_id, from_session_id, carried_at)"
                     " VALUES (?, ?, 'a', 0)", [("b", top), ("c", leaf3), ("d", top), ("d", leaf1)])
    conn.close()

    db = Database(path)
    conn = db.connect()  # finishes the ladder
    assert [name for name, _ in ledger(conn)] == NAMES
    frontier = {sid: sorted(n.node_id for n in SummaryDAG(db).frontier(sid)) for sid in "abcd"}
    assert frontier == {
        "a": sorted([top, leaf3]),      # c's parent of leaf3 is not visible to a
        "b": sorted([top, b_leaf]),     # a carried node joins the owner's own
        "c": [c_top],                   # a carried node condensed by c's own parent leaves
        "d": [top],                     # a carried child under a carried parent leaves
    }
    hits = conn.execute("SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH 'pelican'").fetchone()[0]
    assert hits == 6  # rows indexed by the insert trigger the ladder later retired


def test_stop_before_names_a_known_migration(tmp_path):
    with pytest.raises(ValueError, match="0099_nothing"):
        migrate(raw(tmp_path / "t.db"), stop_before="0099_nothing")


# ---- the ledger ----------------------------------------------------------------------------

def test_reopening_applies_nothing_twice(tmp_path):
    path = tmp_path / "t.db"
    db = Database(path)
    first = ledger(db.connect())
    db.close()
    assert migrate(raw(path)) == []
    conn = Database(path).connect()
    assert ledger(conn) == first and len(first) == len(NAMES)


def test_two_connections_migrating_at_once_leave_one_ledger(tmp_path):
    path = tmp_path / "t.db"
    results: list[list[str]] = []

    def run() -> None:
        conn = sqlite3.connect(path, isolation_level=None, timeout=30)
        results.append(migrate(conn))
        conn.close()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results, key=len) == [[], NAMES]
    assert [name for name, _ in ledger(raw(path))] == NAMES


def from_the_future(path: Path) -> None:
    db = Database(path)
    db.connect()
    db.close()
    conn = raw(path)
    conn.execute("INSERT INTO schema_migrations(name, applied_at) VALUES ('0099_from_a_newer_build', 0)")
    conn.close()


def test_a_ledger_naming_an_unknown_migration_is_refused_with_what_to_do(tmp_path):
    path = tmp_path / "t.db"
    from_the_future(path)
    before = digest(path)
    with pytest.raises(SchemaTooNewError) as refused:
        Database(path).connect()
    message = str(refused.value)
    assert str(path) in message and "0099_from_a_newer_build" in message and "upgrade hermes-trove" in message.lower()
    with pytest.raises(SchemaTooNewError):
        migrate(raw(path))
    assert digest(path) == before


def test_a_stamp_row_left_by_older_builds_is_ignored(tmp_path):
    path = tmp_path / "t.db"
    Database(path).connect()
    Database(path).close()
    conn = raw(path)
    conn.execute("INSERT INTO meta(key, value) VALUES ('schema_version', '999')")
    conn.close()
    conn = Database(path).connect()
    assert [name for name, _ in ledger(conn)] == NAMES
    assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "999"


def test_a_read_only_open_is_refused_too(tmp_path):
    path = tmp_path / "t.db"
    from_the_future(path)
    with pytest.raises(SchemaTooNewError, match="0099_from_a_newer_build"):
        open_trove_readonly(path)
    current = tmp_path / "current.db"
    Database(current).connect()
    conn = open_trove_readonly(current)
    assert conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0
    conn.close()


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts open descriptors through /proc")
def test_a_refused_file_leaves_no_connection_open(tmp_path):
    path = tmp_path / "t.db"
    from_the_future(path)
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(50):
        with pytest.raises(SchemaTooNewError):
            Database(path).connect()
        with pytest.raises(SchemaTooNewError):
            open_trove_readonly(path)
    assert len(os.listdir("/proc/self/fd")) <= before + 2


def test_a_generation_made_before_the_recipe_column_is_marked_as_the_old_chunk_recipe(tmp_path):
    path = tmp_path / "t.db"
    conn = raw(path)
    migrate(conn, stop_before="0011_embedding_recipe")
    conn.execute("INSERT INTO embedding_generations(provider, model, dim, state, created_at)"
                 " VALUES ('local', 'm', 384, 'active', 0)")
    conn.close()
    conn = Database(path).connect()
    assert [name for name, _ in ledger(conn)] == NAMES
    assert conn.execute("SELECT recipe, state FROM embedding_generations").fetchone()[:] == ("chunk", "active")


@pytest.mark.parametrize(("before", "columns", "rows", "scopes"), [
    # sessions written before scopes: local, their gateway key, or none for a keyless gateway row
    ("0012_session_scope", "session_id, conversation_id, platform",
     [("cli1", "", "cli"), ("api1", "", ""), ("tg1", "agent:main:telegram:dm:1", "telegram"), ("tg2", "", "telegram")],
     {"cli1": "local", "api1": "local", "tg1": "telegram:agent:main:telegram:dm:1", "tg2": ""}),
    # imported OpenClaw sessions stored without a scope become the owner's local history
    ("0016_imported_sessions_local", "session_id, conversation_id, platform, scope",
     [("openclaw-trove:agent:main:s1", "", "openclaw", ""), ("tg2", "", "telegram", ""),
      ("tg1", "k", "telegram", "telegram:k")],
     {"openclaw-trove:agent:main:s1": "local", "tg2": "", "tg1": "telegram:k"}),
], ids=["written-before-scopes", "imported-without-a-scope"])
def test_an_upgrade_gives_the_sessions_of_an_older_file_their_owner_scope(tmp_path, before, columns, rows, scopes):
    path = tmp_path / "t.db"
    conn = raw(path)
    migrate(conn, stop_before=before)
    marks = ",".join("?" * len(rows[0]))
    conn.executemany(f"INSERT INTO sessions({columns}, created_at, updated_at) VALUES ({marks},0,0)", rows)
    conn.close()
    conn = Database(path).connect()
    assert [name for name, _ in ledger(conn)] == NAMES
    assert dict(conn.execute("SELECT session_id, scope FROM sessions").fetchall()) == scopes


def test_an_older_file_gets_the_chat_index_and_the_chat_look_up_uses_it(tmp_path):
    path = tmp_path / "t.db"
    conn = raw(path)
    migrate(conn, stop_before="0017_sessions_by_conversation")
    conn.executemany("INSERT INTO sessions(session_id, conversation_id, platform, created_at, updated_at)"
                     " VALUES (?,?,?,0,?)", [(f"s{i}", f"chat-{i % 7}", "telegram", i) for i in range(50)])
    conn.close()
    db = Database(path)
    assert [name for name, _ in ledger(db.connect())] == NAMES
    plan = " ".join(str(r[3]) for r in db.connect().execute(
        "EXPLAIN QUERY PLAN SELECT * FROM sessions WHERE conversation_id=? ORDER BY updated_at DESC LIMIT ?",
        ("chat-3", 20)))
    assert "USING INDEX sessions_conversation" in plan and "TEMP B-TREE" not in plan, plan
    assert [s.session_id for s in MessageStore(db).sessions(3, "chat-3")] == ["s45", "s38", "s31"]


def test_an_older_file_gets_the_index_of_the_sessions_that_follow_a_session(tmp_path):
    path = tmp_path / "t.db"
    conn = raw(path)
    migrate(conn, stop_before="0019_sessions_by_previous")
    conn.executemany("INSERT INTO sessions(session_id, previous_session_id, created_at, updated_at) VALUES (?,?,0,0)",
                     [("a", None), ("b", "a"), ("c", "b")])
    conn.close()
    db = Database(path)
    assert [name for name, _ in ledger(db.connect())] == NAMES
    ddl = db.connect().execute("SELECT sql FROM sqlite_master WHERE name='sessions_previous'").fetchone()[0]
    assert ddl.rstrip().endswith("WHERE previous_session_id IS NOT NULL"), ddl  # rows naming none take no entry
    plan = " ".join(str(r[3]) for r in db.connect().execute(
        "EXPLAIN QUERY PLAN SELECT session_id FROM sessions WHERE previous_session_id = ?", ("a",)))
    assert "USING INDEX sessions_previous" in plan, plan
    follow = db.connect().execute("SELECT session_id FROM sessions WHERE previous_session_id = 'a'")
    assert [r[0] for r in follow] == ["b"]


def test_rollups_built_over_every_scope_before_owner_scopes_are_dropped_and_the_leaf_cursor_reset(tmp_path):
    path = tmp_path / "t.db"
    conn = raw(path)
    migrate(conn, stop_before="0013_rollup_owner_scope")
    conn.execute("INSERT INTO temporal_rollups(period_kind, period_start, period_end, scope, status, summary,"
                 " created_at, updated_at) VALUES ('day', 0, 86400, 'all', 'ready', 'mixed text', 0, 0)")
    conn.execute("INSERT INTO temporal_rollup_sources(rollup_id, ordinal, node_id) VALUES (1, 0, 1)")
    conn.execute("INSERT INTO meta(key, value) VALUES ('temporal_rollups.leaf_cursor', '7')")
    conn.close()
    conn = Database(path).connect()
    assert [name for name, _ in ledger(conn)] == NAMES
    assert conn.execute("SELECT COUNT(*) FROM temporal_rollups").fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM temporal_rollup_sources").fetchone()[0] == 0
    assert conn.execute("SELECT value FROM meta WHERE key = 'temporal_rollups.leaf_cursor'").fetchone() is None
    assert master(conn, "trigger") == TRIGGERS
    for name in ("temporal_rollups_leaf_added", "temporal_rollups_leaf_changed", "temporal_rollups_leaf_removed"):
        ddl = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (name,)).fetchone()[0]
        assert "SELECT scope FROM sessions" in ddl, name  # a leaf marks only its own scope's rollups stale


def test_dropping_the_source_index_keeps_every_message_searchable_expandable_and_citable(tmp_path):
    path = tmp_path / "t.db"
    store = MessageStore(Database(path))
    texts = [f"turn {i}: the invoice INV-{i} for src/billing/tax.py was reconciled" for i in range(30)]
    ids = store.append(SessionKey("s1", platform="cli"), [{"role": "user", "content": t} for t in texts])
    before = [(row.store_id, snippet) for row, _, snippet in store.search('"inv 7" OR reconciled', limit=50)]
    refs = [make_ref(row, 0, 4).to_dict() for row in store.get_many(ids)]
    store.db.close()
    conn = raw(path)  # the file as a build before the drop left it
    conn.execute("CREATE INDEX messages_source ON messages(source, session_id, store_id)")
    conn.execute("DELETE FROM schema_migrations WHERE name = '0014_drop_source_index'")
    conn.close()
    store = MessageStore(Database(path))
    conn = store.db.connect()
    assert sorted(name for name, _ in ledger(conn)) == sorted(NAMES)  # 0014 again, after the later ones
    assert "messages_source" not in master(conn, "index")
    assert [(row.store_id, snippet) for row, _, snippet in store.search('"inv 7" OR reconciled', limit=50)] == before
    assert len(before) == 30 and before[0][1].count(">>>") >= 1
    assert [row.content for row in store.page("s1", 0, 100)] == texts
    assert [verify(parse_claim(ref), store.get(ref["store_id"])).quote for ref in refs] == ["turn"] * 30
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)")


def test_a_write_lock_held_past_the_busy_timeout_is_waited_for_once_not_once_per_retry(tmp_path, monkeypatch):
    """Another process holds the write lock longer than the busy timeout (a long import, a shell with
    an open transaction): a write waits that timeout once and fails, and the engine delegates. It
    must not wait it again for each retry: five 30 s waits froze Hermes for 2.5 minutes at start."""
    import hermes_trove.db as db_module

    monkeypatch.setattr(db_module, "BUSY_TIMEOUT_MS", 100)
    path = tmp_path / "t.db"
    db = Database(path)
    conn = db.connect()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            MessageStore(db).ensure_session(SessionKey("s1"))
    finally:
        conn.set_trace_callback(None)
        holder.execute("ROLLBACK")
        holder.close()
    assert [s for s in seen if s.startswith("BEGIN")] == ["BEGIN IMMEDIATE"]
    MessageStore(db).ensure_session(SessionKey("s1"))  # the lock gone, the same connection writes
    db.close()
