"""``hermes trove migrate --to``: a SQLite store copied to a real PostgreSQL server and back, ids kept."""
from __future__ import annotations

import dataclasses
import io
import json
import socket
import sqlite3
from pathlib import Path

import pytest
from conftest import make_config, make_engine
from pg_proxy import PgProxy
from simulate import HostLoop, build_conversation

from hermes_trove import command
from hermes_trove.config import database_path
from hermes_trove.ops import migrate_store
from hermes_trove.ops.migrate_store import TABLES, TargetError, migrate
from hermes_trove.outbox import outbox_path
from hermes_trove.packed import register, unpack
from hermes_trove.pgdb import PgDatabase
from hermes_trove.runtime import build_runtime
from hermes_trove.store import SessionKey

JSONL = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "openclaw-jsonl"


def summarizer(messages, model, timeout_s, max_tokens):
    """The fake model: a short summary that quotes the end of the prompt."""
    return f"Summary: {messages[0]['content'][-160:]}\nExpand for details about: the segment"


@pytest.fixture(scope="module")
def source_file(tmp_path_factory) -> Path:
    """One SQLite store built by the product: two compacted sessions (leaves and condensed nodes),
    a carry-over, an OpenClaw import when the fixtures are there, and meta of both kinds."""
    home = tmp_path_factory.mktemp("source")
    cfg = make_config(home, leaf_chunk_tokens=3000, condensation_fanin=2)
    if JSONL.is_dir():
        from hermes_trove.importer import ImportOptions, run_import

        run_import(ImportOptions(target_db=str(home / "trove.db"), source_jsonl_dirs=(str(JSONL),), agent="main",
                                 apply=True), env={})
    rt = build_runtime(cfg)
    for session, turns, seed in (("s1", 70, 3), ("s2", 30, 5)):
        loop = HostLoop(make_engine(rt, summarizer, session=session, context_length=24000))
        for turn in build_conversation(turns, seed=seed, big_output_chars=3000):
            loop.run_turn(turn)
    rt.dag.carry_over("s1", "s3", 0)
    rt.db.set_meta({"fts_integrity_checked_at": "1.0", "custom.kept": "yes"})
    rt.db.checkpoint()
    assert max(rt.dag.depth_stats("s1")) >= 1, "the source needs condensed nodes"
    return home / "trove.db"


@pytest.fixture
def source(source_file, tmp_path):
    """A fresh copy of the built store, and a runtime on it."""
    path = tmp_path / "source.db"
    with sqlite3.connect(source_file) as a, sqlite3.connect(path) as b:
        a.backup(b)
    return build_runtime(make_config(tmp_path, database_path=str(path)))


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    """A few hundred rows make several chunks."""
    monkeypatch.setattr(migrate_store, "CHUNK_ROWS", 97)


def on_pg(tmp_path, url):
    return build_runtime(dataclasses.replace(make_config(tmp_path), database_url=url))


def rows(conn, table: str) -> dict[tuple, dict]:
    """Every row of ``table`` by its key, the columns both backends have."""
    spec = next(t for t in TABLES if t.name == table)
    out = {}
    for r in conn.execute(f"SELECT * FROM {table}"):
        values = dict(zip(r.keys(), tuple(r), strict=True))
        if table == "messages":  # a SQLite file stores long text deflated, the server as text
            values["content"] = unpack(values["content"])
        if table == "meta" and not migrate_store._meta_copied(values["key"]):
            continue
        out[tuple(values[k] for k in spec.key)] = values
    return out


def tables_of(runtime) -> set[str]:
    return set(migrate_store._tables(runtime.db.read()))


def assert_same_store(a, b) -> None:
    for table in (t.name for t in TABLES if t.name in tables_of(a) & tables_of(b)):
        left, right = rows(a.db.read(), table), rows(b.db.read(), table)
        assert left.keys() == right.keys(), table
        for key, row in left.items():
            shared = row.keys() & right[key].keys()
            assert {c: row[c] for c in shared} == {c: right[key][c] for c in shared}, (table, key)
    for session in ("s1", "s2", "s3"):
        assert [n.node_id for n in a.dag.frontier(session)] == [n.node_id for n in b.dag.frontier(session)]
        for node in a.dag.frontier(session):
            assert a.dag.descendant_store_ids(node.node_id) == b.dag.descendant_store_ids(node.node_id)


def test_copy_to_postgresql_keeps_every_row_id_and_lineage(source, tmp_path, pg_database_url):
    seen = []
    report = migrate(source, pg_database_url, progress=lambda *p: seen.append(p))
    assert report["status"] == "ok", report
    assert all(line["equal"] for line in report["verify"].values())
    assert report["tables"]["messages"]["copied"] == report["tables"]["messages"]["total"] > 200
    assert {p[0] for p in seen} == {t.name for t in TABLES if t.name in tables_of(source)}
    target = on_pg(tmp_path, pg_database_url)
    assert_same_store(source, target)
    first = source.db.read().execute("SELECT content FROM messages WHERE role = 'user' ORDER BY store_id").fetchone()
    word = next(w for w in first[0].split() if w.isalpha() and len(w) >= 6)
    assert {r.store_id for r, _, _ in target.store.search(word, limit=500)} == \
        {r.store_id for r, _, _ in source.store.search(word, limit=500)} != set()
    assert {n.node_id for n, _, _ in target.dag.search_all("segment", limit=500)} == \
        {n.node_id for n, _, _ in source.dag.search_all("segment", limit=500)} != set()
    meta = dict(target.db.read().execute("SELECT key, value FROM meta").fetchall())
    assert meta["custom.kept"] == "yes" and "fts_integrity_checked_at" not in meta
    assert report["target"] == PgDatabase(pg_database_url).path


def test_a_second_run_adds_nothing(source, pg_database_url):
    first = migrate(source, pg_database_url)
    again = migrate(source, pg_database_url)
    assert (first["status"], again["status"]) == ("ok", "ok")
    assert again["copied"] == 0 and first["copied"] > 0
    assert again["tables"]["messages"]["already"] == again["tables"]["messages"]["total"]
    assert all(line["equal"] for line in again["verify"].values())


def test_a_stopped_run_continues_where_it_stopped(source, tmp_path, pg_database_url):
    stopped = migrate(source, pg_database_url, max_rows=250)
    assert stopped["status"] == "incomplete"
    assert 0 < stopped["tables"]["messages"]["copied"] < stopped["tables"]["messages"]["total"]
    rest = migrate(source, pg_database_url)
    assert rest["status"] == "ok", rest
    assert rest["tables"]["messages"]["copied"] + stopped["tables"]["messages"]["copied"] == \
        rest["tables"]["messages"]["total"]
    assert_same_store(source, on_pg(tmp_path, pg_database_url))


def test_a_server_lost_mid_copy_names_the_target_and_the_next_run_completes_it(source, tmp_path, pg_database_url):
    proxy = PgProxy(pg_database_url).start()

    def drop_after_first_chunk(table: str, done: int, total: int, seconds: float) -> None:
        if table == "messages" and 0 < done < total:
            proxy.down()  # the server goes away between two chunks of the copy

    cut = migrate(source, proxy.url, progress=drop_after_first_chunk)
    assert cut["status"] == "error", cut
    assert cut["error"].startswith("the target cannot be written: OperationalError"), cut["error"]
    assert "stopped in the messages table" in cut["error"] and "run the same command again" in cut["error"]
    proxy.up()
    rest = migrate(source, proxy.url)
    assert rest["status"] == "ok", rest
    assert 0 < rest["tables"]["messages"]["already"] < rest["tables"]["messages"]["total"]  # it continued
    assert_same_store(source, on_pg(tmp_path, pg_database_url))
    proxy.down()


def test_a_server_lost_after_a_tables_last_chunk_is_named_as_the_target_not_the_source(source, tmp_path,
                                                                                       pg_database_url):
    """A sync table's last step after its chunks (removing the target's stale rows) runs on the target: a
    server lost then is the target that cannot be written, not a source that cannot be read."""
    proxy = PgProxy(pg_database_url).start()

    def drop_after_the_last_chunk(table: str, done: int, total: int, seconds: float) -> None:
        if table == "session_frontier" and 0 < done == total:
            proxy.down()  # the source (a local file) still answers its next read: no rows left

    cut = migrate(source, proxy.url, progress=drop_after_the_last_chunk)
    assert cut["status"] == "error", cut
    assert cut["error"].startswith("the target cannot be written: "), cut["error"]
    assert "stopped in the session_frontier table" in cut["error"]
    proxy.up()
    assert migrate(source, proxy.url)["status"] == "ok"
    assert_same_store(source, on_pg(tmp_path, pg_database_url))
    proxy.down()


def test_copy_back_to_a_new_sqlite_file_equals_the_original(source, tmp_path, pg_database_url):
    assert migrate(source, pg_database_url)["status"] == "ok"
    server = on_pg(tmp_path, pg_database_url)
    back_path = tmp_path / "back" / "trove.db"
    report = migrate(server, str(back_path))
    assert report["status"] == "ok", report
    back = build_runtime(make_config(tmp_path, database_path=str(back_path)))
    assert_same_store(source, back)
    conn = back.db.read()
    for fts, table in (("messages_fts", "messages"), ("nodes_fts", "summary_nodes")):
        assert conn.execute(f"SELECT COUNT(*) FROM {fts}").fetchone()[0] == \
            conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    assert conn.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)") is not None
    assert back.store.search("summary OR the", limit=3)


def test_sqlite_to_sqlite_copies_and_indexes(source, tmp_path):
    report = migrate(source, str(tmp_path / "copy.db"))
    assert report["status"] == "ok", report
    copy = build_runtime(make_config(tmp_path, database_path=str(tmp_path / "copy.db")))
    assert_same_store(source, copy)
    copy.db.read().execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)")
    copy.db.read().execute("INSERT INTO nodes_fts(nodes_fts, rank) VALUES ('integrity-check', 1)")


def test_new_messages_on_postgresql_follow_the_copied_ids(source, tmp_path, pg_database_url):
    report = migrate(source, pg_database_url)
    top = source.db.read().execute("SELECT MAX(store_id) FROM messages").fetchone()[0]
    top_node = source.db.read().execute("SELECT MAX(node_id) FROM summary_nodes").fetchone()[0]
    nexts = report["sequences_next"]
    assert (nexts["messages"], nexts["summary_nodes"]) == (top + 1, top_node + 1)
    assert nexts["embedding_vectors"] == 1  # every identity the target has moves past what it holds
    target = on_pg(tmp_path, pg_database_url)
    target.store.ingest(SessionKey("s1", platform="cli"), [{"role": "user", "content": "after the move"}])
    target.store.settle()  # the outbox ships to the server, which draws the ids
    ids = [r[0] for r in target.db.read().execute("SELECT store_id FROM messages WHERE content = 'after the move'")]
    assert len(ids) == 1 and ids[0] > top
    node = target.dag.add_leaf("s1", "a new leaf", ids, token_count=3, source_token_count=1, earliest_at=None,
                               latest_at=None)
    assert node > top_node
    again = migrate(source, pg_database_url)
    assert again["status"] == "refused" and "empty" in again["error"]


@pytest.mark.parametrize("bad, words", [
    ("", "empty"), ("mysql://h/db", "postgresql://"), ("postgresql://h:port/db", "malformed"),
    ("{dir}", "directory"), ("{source}", "source store itself")])
def test_bad_targets_are_refused_with_a_clear_error(source, tmp_path, bad, words):
    with pytest.raises(TargetError, match=words) as err:
        migrate(source, bad.format(dir=tmp_path, source=source.db.path))
    assert "TROVE_DATABASE_URL" not in str(err.value)


def test_a_postgresql_source_is_not_its_own_target(tmp_path, pg_database_url):
    with pytest.raises(TargetError, match="source store itself"):
        migrate(on_pg(tmp_path, pg_database_url), pg_database_url)


@pytest.mark.parametrize("name", ["trove-outbox.db", "trove-outbox.db-wal", "trove-payloads/copy.db"])
def test_a_postgresql_source_refuses_its_outbox_and_payload_folder_as_the_target(tmp_path, pg_database_url, name):
    # the outbox is this machine's queue of rows for the server: a copy into it would be shipped or
    # truncated; nothing is written and the outbox keeps what it held
    source = on_pg(tmp_path, pg_database_url)
    outbox = outbox_path(database_path(source.config).parent)
    before = outbox.read_bytes() if outbox.exists() else None
    with pytest.raises(TargetError, match="nothing was written"):
        migrate(source, str(database_path(source.config).parent / name))
    assert (outbox.read_bytes() if outbox.exists() else None) == before
    assert not (database_path(source.config).parent / "trove-payloads" / "copy.db").exists()


def test_rollups_vectors_and_remembered_state_come_along_both_ways(source, pg_database_url, tmp_path):
    source.db.ensure_optional("state")
    vector = bytes(range(256)) * 3
    with source.db.transaction() as conn:
        store_id, content, session = conn.execute(
            "SELECT store_id, content, session_id FROM messages WHERE role = 'user' AND length(content) > 10"
            " ORDER BY store_id LIMIT 1").fetchone()
        node_id = conn.execute("SELECT MIN(node_id) FROM summary_nodes WHERE depth = 0").fetchone()[0]
        rollup = conn.execute("INSERT INTO temporal_rollups(period_kind, period_start, period_end, scope, status,"
                              " summary, created_at, updated_at) VALUES ('day', 0, 86400, 'local', 'ready', 'a day',"
                              " 1, 2) RETURNING rollup_id").fetchone()[0]
        conn.execute("INSERT INTO temporal_rollup_sources(rollup_id, ordinal, node_id) VALUES (?, 0, ?)",
                     (rollup, node_id))
        gen = conn.execute("INSERT INTO embedding_generations(provider, model, dim, state, message_cursor,"
                           " created_at) VALUES ('local', 'm', 768, 'active', ?, 1) RETURNING generation_id",
                           (store_id,)).fetchone()[0]
        conn.execute("INSERT INTO embedding_vectors(generation_id, kind, item_id, span_start, session_id, vector,"
                     " scale, created_at) VALUES (?, 'message', ?, 0, ?, ?, 0.5, 1)", (gen, store_id, session, vector))
        conn.execute("INSERT INTO assertions(assertion_id, store_id, span_start, span_end, quote, content_sha256,"
                     " session_id, subject_key, predicate_key, value_text, value_norm, kind, polarity, speaker_role,"
                     " observed_at, confidence, created_at) VALUES ('a1', ?, 0, 5, ?, 'x', ?, 'user:self', 'says',"
                     " 'v', 'v', 'fact', 'positive', 'user', 1, 0.9, 1)", (store_id, content[:5], session))
        conn.execute("INSERT INTO assertion_terms(term, observed_at, assertion_id) VALUES ('says', 1, 'a1')")
    report = migrate(source, pg_database_url)
    assert report["status"] == "ok", report
    assert all(line["equal"] for line in report["verify"].values()), report["verify"]
    for table in ("temporal_rollups", "temporal_rollup_sources", "embedding_generations", "embedding_vectors",
                  "assertions", "assertion_terms"):
        assert report["verify"][table]["target"] == report["verify"][table]["source"] >= 1, table
    server = on_pg(tmp_path / "pg", pg_database_url)
    conn = server.db.read()
    assert bytes(conn.execute("SELECT vector FROM embedding_vectors").fetchone()[0]) == vector
    assert conn.execute("SELECT status, summary FROM temporal_rollups").fetchone()[:] == ("ready", "a day")
    back = migrate(server, str(tmp_path / "back.db"))
    assert back["status"] == "ok" and all(line["equal"] for line in back["verify"].values())
    copy = sqlite3.connect(tmp_path / "back.db")
    assert copy.execute("SELECT vector FROM embedding_vectors").fetchone()[0] == vector
    assert copy.execute("SELECT quote FROM assertions").fetchone()[0] == content[:5]


def test_cli_migrate_needs_to(source, capsys):
    assert command.main(["migrate", "--db", source.db.path]) == command.EXIT_USAGE
    assert "--to" in capsys.readouterr().err
    assert command.main(["status", "--db", source.db.path, "--to", "x.db"]) == command.EXIT_USAGE


def test_cli_migrate_copies_and_reports(source, tmp_path, pg_database_url, capsys):
    out = io.StringIO()
    code = command.main(["migrate", "--db", source.db.path, "--to", pg_database_url, "--json"], out=out)
    assert code == command.EXIT_OK, out.getvalue()
    assert '"status": "ok"' in out.getvalue()
    assert "trove migrate: ok:" in capsys.readouterr().err  # not a terminal: only the final line
    assert command.main(["migrate", "--db", source.db.path, "--to", "mysql://x/y"]) == command.EXIT_USAGE


def test_a_target_server_that_cannot_be_reached_is_an_error_report_not_a_traceback(source, caplog):
    with socket.socket() as sock:  # a port on this machine nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    out = io.StringIO()
    url = f"postgresql://trove:secret@127.0.0.1:{port}/trove_test"
    code = command.main(["migrate", "--db", source.db.path, "--to", url, "--json"], out=out)
    assert code == command.EXIT_PROBLEM
    report = json.loads(out.getvalue())
    assert report["status"] == "error" and report["error"].startswith("the target cannot be opened")
    assert report["target"] == f"postgresql://trove:***@127.0.0.1:{port}/trove_test"
    assert not [r for r in caplog.records if r.exc_info]


@pytest.mark.parametrize("broken", ["server", "file"])
def test_a_source_that_cannot_be_read_says_why_exits_1_and_writes_nothing(source, tmp_path, broken, capsys, caplog):
    db = "postgresql://trove@127.0.0.1:1/nowhere?connect_timeout=2"
    if broken == "file":
        db = source.db.path
        with sqlite3.connect(db) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        Path(db).write_bytes(b"not a database" * 100)
    before = Path(source.db.path).read_bytes()
    out = io.StringIO()
    code = command.main(["migrate", "--db", db, "--to", str(tmp_path / "copy.db"), "--json"], out=out)
    report = json.loads(out.getvalue())
    assert code == command.EXIT_PROBLEM and report["status"] == "error", report
    assert report["error"].startswith("the source cannot be read:"), report
    err = capsys.readouterr().err
    assert "trove migrate: error: the source cannot be read:" in err and "None" not in err, err
    assert not (tmp_path / "copy.db").exists() and Path(source.db.path).read_bytes() == before
    assert not [r for r in caplog.records if r.exc_info]


def test_slash_trove_migrate_points_to_the_cli(source):
    text = command.make_handler(source)("migrate")
    assert "hermes trove migrate --to" in text


def test_terminal_progress_draws_one_line_per_table():
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Tty()
    bar = migrate_store.TerminalProgress(out)
    bar("messages", 1000, 2000, 0.5)
    bar("messages", 2000, 2000, 1.0)
    bar.finish({"status": "ok", "copied": 2000, "already": 0, "elapsed_s": 1.0, "target": "t"})
    text = out.getvalue()
    assert text.count("\r") == 2 and "2000/2000 rows" in text and text.endswith("-> t\n")


def test_messages_still_in_the_outbox_make_the_copy_back_partial(source, tmp_path, pg_database_url):
    assert migrate(source, pg_database_url)["status"] == "ok"
    server = on_pg(tmp_path, pg_database_url)
    server.store.ingest(SessionKey("s9", platform="cli"), [{"role": "user", "content": "not shipped yet"}])
    report = migrate(server, str(tmp_path / "back.db"))
    if server.store.outbox.pending():  # the shipper may have sent it already
        assert report["status"] == "partial" and report["outbox_pending"] >= 1
    else:
        assert report["status"] == "ok"


def test_a_set_aside_outbox_message_makes_the_copy_back_partial(tmp_path, pg_database_url):
    server = on_pg(tmp_path, pg_database_url)
    ids = server.store.outbox.store.ingest(SessionKey("s9", platform="cli"), [
        {"role": "user", "content": "refused"}, {"role": "assistant", "content": "shipped"}]).store_ids
    with server.store.outbox.db.transaction() as c:
        c.execute("UPDATE messages SET token_count = 'many' WHERE store_id = ?", (ids[0],))
    server.store.shipper.drain()
    assert server.store.outbox.pending() == 0  # shipped or set aside: nothing waits in order
    report = migrate(server, str(tmp_path / "back.db"))
    assert report["status"] == "partial" and report["outbox_pending"] == 1


def test_a_sqlite_store_holding_a_nul_copies_to_postgresql(tmp_path, pg_database_url):
    rt = build_runtime(make_config(tmp_path))
    rt.store.ingest(SessionKey("s1", platform="cli"), [{"role": "user", "content": "a \x00 b"}, {"role": "assistant",
                                                                                            "content": "ok"}])
    report = migrate(rt, pg_database_url)
    assert report["status"] == "ok", report
    assert PgDatabase(pg_database_url).read().execute("SELECT content FROM messages ORDER BY store_id").fetchall() \
        == [("a \ufffd b",), ("ok",)]


def test_text_whose_bytes_are_no_utf8_is_never_copied_as_replacement_characters(source, tmp_path):
    # Reads lenient everywhere else (a damaged row reads with U+FFFD); a copy must not quietly
    # write those U+FFFD in place of the stored bytes and call itself ok.
    with sqlite3.connect(source.config.database_path) as conn:
        register(conn)  # the schema's triggers read content through trove_text
        conn.execute("UPDATE messages SET tool_calls = CAST(X'5BFF5D' AS TEXT) WHERE store_id ="
                     " (SELECT MAX(store_id) FROM messages WHERE tool_calls IS NOT NULL)")
    report = migrate(source, str(tmp_path / "copy.db"))
    assert report["status"] == "error", report
    assert all(said in report["error"] for said in ("no UTF-8", "messages", "doctor")), report
    with sqlite3.connect(tmp_path / "copy.db") as copy:
        held = {r[0] for r in copy.execute("SELECT hex(CAST(tool_calls AS BLOB)) FROM messages")}
    assert "5BEFBFBD5D" not in held
    reply = json.loads(make_engine(source).handle_tool_call("trove_grep", {"query": "summary", "session_scope": "all"}))
    assert "failed" not in str(reply.get("error", "")), reply  # the store's own reads stay lenient afterwards
