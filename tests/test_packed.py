"""Long message text stored deflated: every reader still sees the exact text.

A SQLite file stores a message's content of PACK_MIN_CHARS characters or more as zlib-deflated
UTF-8 (a BLOB) when that saves a quarter. Search, snippets, the substring scan, refs, payload
upkeep, the assertion quote guard, deletes and the migration of an older file must all behave as
they did when the column held the text.
"""
from __future__ import annotations

import random
import sqlite3
import string
import zlib

import pytest
from conftest import make_config, tool_result, user

from hermes_trove import packed
from hermes_trove.db import Database, fts_integrity, fts_sync, migrate
from hermes_trove.migrations import OPTIONAL_MIGRATIONS
from hermes_trove.ops.migrate_store import migrate as copy_store
from hermes_trove.ops.queries import delete_sessions
from hermes_trove.outbox import Outbox
from hermes_trove.refs import content_sha256, make_ref
from hermes_trove.runtime import build_runtime
from hermes_trove.store import MessageStore, SessionKey

KEY = SessionKey("packed-chat", platform="cli")
LOG = "".join(f"2026-12-01T10:{i % 60:02d}:00 worker-{i % 7} processed batch {i} in {i % 13} ms\n"
              for i in range(120)) + "FATAL quokkaslide: the rollout stopped at shard 42\n"
WIDE = "Zürich café naïve résumé — 東京 データ 🚀 " * 60 + "the lighthouse keeper"
MID = "deploys " + "y " * 700  # packed (over PACK_MIN_CHARS) but short enough for the scratch snippet table


def stored_type(db: Database, store_id: int) -> str:
    return str(db.read().execute("SELECT typeof(content) FROM messages WHERE store_id=?", (store_id,)).fetchone()[0])


@pytest.fixture
def store(tmp_path):
    return MessageStore(Database(tmp_path / "trove.db"))


# -- pack / unpack ------------------------------------------------------------------------

@pytest.mark.parametrize("text, packs", [
    ("", False),
    ("short text", False),
    ("a" * (packed.PACK_MIN_CHARS - 1), False),   # under the bound: text, however compressible
    ("a" * packed.PACK_MIN_CHARS, True),
    (LOG, True),
    (WIDE, True),
    ("".join(random.Random(3).choices(string.printable[:94], k=4000)), False),  # saves too little
])
def test_pack_keeps_short_or_incompressible_text_and_round_trips_the_rest(text, packs):
    value = packed.pack(text)
    assert isinstance(value, bytes) is packs
    assert packed.unpack(value) == text
    if packs:
        assert 4 * len(value) <= 3 * len(text.encode("utf-8"))


@pytest.mark.parametrize("value", [None, 7, 2.5, "", "plain"])
def test_unpack_leaves_other_values_alone(value):
    assert packed.unpack(value) == value


@pytest.mark.parametrize("damaged", [b"not deflate at all", zlib.compress(b"\xff\xfe broken utf-8 " * 100)])
def test_a_damaged_packed_value_reads_as_a_marker_not_a_crash(damaged):
    assert "damaged" in packed.unpack(damaged)


def test_a_value_that_would_unpack_past_the_bound_is_refused_not_read(monkeypatch):
    monkeypatch.setattr(packed, "MAX_BYTES", 4096)
    monkeypatch.setattr(packed, "DEFLATE_MAX_RATIO", 4096)  # every value takes the bounded path
    assert "past" in packed.unpack(zlib.compress(b"a" * 5000))
    assert packed.unpack(zlib.compress(b"a" * 4096)) == "a" * 4096
    assert packed.unpack(zlib.compress(b"a" * 5000)[:-4]).startswith("[trove:")  # a stream cut short
    assert packed.pack("a" * 5000) == "a" * 5000  # text past the bound is stored as it is


def test_a_lone_surrogate_raises_as_a_plain_insert_would():
    with pytest.raises(UnicodeEncodeError):
        packed.pack("\ud800" + "x" * packed.PACK_MIN_CHARS)


# -- the store ------------------------------------------------------------------------------

def test_long_text_is_stored_packed_and_read_back_exactly(store):
    texts = ["hello", LOG, WIDE, MID]
    ids = store.append(KEY, [user(t) for t in texts])
    assert [stored_type(store.db, i) for i in ids] == ["text", "blob", "blob", "blob"]
    assert [row.content for row in store.get_many(ids)] == texts
    assert [row.content for row in store.page(KEY.session_id, 0, 10)] == texts
    row = store.get(ids[1])
    ref = make_ref(row, 0, 10)
    assert ref.content_sha256 == content_sha256(LOG) and ref.quote == LOG[:10]


def test_a_surrogate_in_long_text_is_escaped_like_any_other(store):
    text = "\ud800" + "z" * 2000
    (sid,) = store.append(KEY, [user(text)])
    assert store.get(sid).content.endswith("z" * 2000)


def test_search_and_snippets_read_the_packed_text(store):
    ids = store.append(KEY, [user("quokkaslide was mentioned once"), tool_result("c1", LOG), user(WIDE), user(MID)])
    hits = store.search("quokkaslide", limit=10)
    assert sorted(row.store_id for row, _, _ in hits) == ids[:2]
    snippet = next(s for row, _, s in hits if row.store_id == ids[1])
    assert ">>>quokkaslide<<<" in snippet and "shard 42" in snippet
    (hit,) = store.search("lighthouse", limit=10)
    assert hit[0].content == WIDE and ">>>lighthouse<<<" in hit[2]
    (hit,) = store.search("deploy", limit=10)   # the scratch-table route (under 2,000 characters)
    assert hit[0].store_id == ids[3] and ">>>deploys<<<" in hit[2]
    conn = store.db.read()
    assert fts_integrity(conn, "messages_fts") is None and fts_sync(conn, "messages_fts").ok


def test_the_substring_scan_sees_inside_packed_text(store):
    (sid,) = store.append(KEY, [user(WIDE)])
    ((row, _, snippet),) = store.search("", literal="東京 データ", limit=5)
    assert row.store_id == sid and row.content == WIDE and ">>>東京 データ<<<" in snippet


def test_payload_upkeep_reads_text_not_bytes(store):
    placeholder = "[trove:tool_output ref=trove-abc123 chars=9000] " + "preview line\n" * 120
    (sid, big) = store.append(KEY, [tool_result("c1", placeholder), tool_result("c2", LOG)])
    assert stored_type(store.db, sid) == "blob"
    assert list(store.contents_with_payload_refs()) == [placeholder]
    assert {r.store_id for r in store.rows_maybe_holding_payloads(len(LOG))} == {big}
    sizes = {s.store_id: s.content_chars for s in store.largest_rows(5)}
    assert sizes[sid] == len(placeholder) and sizes[big] == len(LOG)


def test_compare_and_set_rewrites_a_packed_row_and_keeps_the_index(store):
    (sid,) = store.append(KEY, [tool_result("c1", LOG)])
    assert store.replace_contents([(sid, "not what is stored", "x")]) == 0
    new = LOG.replace("quokkaslide", "wallabyfall")
    assert store.replace_contents([(sid, LOG, new)]) == 1
    assert stored_type(store.db, sid) == "blob" and store.get(sid).content == new
    assert not store.search("quokkaslide", limit=5) and store.search("wallabyfall", limit=5)
    assert fts_integrity(store.db.read(), "messages_fts") is None


def test_deleting_packed_rows_removes_them_from_the_index(store):
    store.append(KEY, [tool_result("c1", LOG), user(WIDE)])
    store.append(SessionKey("other"), [user("quokkaslide elsewhere")])
    delete_sessions(store.db, lambda conn: [KEY.session_id])
    assert [row.session_id for row, _, _ in store.search("quokkaslide", limit=5)] == ["other"]
    conn = store.db.read()
    assert fts_integrity(conn, "messages_fts") is None and fts_sync(conn, "messages_fts").ok


def test_the_assertion_quote_guard_compares_against_the_text(store):
    store.db.ensure_optional("state")
    (sid,) = store.append(KEY, [user(LOG)])
    conn = store.db.connect()
    start = LOG.index("quokkaslide")
    row = ("a1", sid, start, start + 11, "quokkaslide", content_sha256(LOG), KEY.session_id, "s", "p", "v", "v",
           "fact", "positive", "user", 1.0, 0.9, 1.0)
    insert = ("INSERT INTO assertions(assertion_id, store_id, span_start, span_end, quote, content_sha256, session_id,"
              " subject_key, predicate_key, value_text, value_norm, kind, polarity, speaker_role, observed_at,"
              " confidence, created_at) VALUES (" + ",".join("?" * 17) + ")")
    conn.execute(insert, row)
    with pytest.raises(sqlite3.IntegrityError, match="not the stored text"):
        conn.execute(insert, ("a2", *row[1:4], "wallabyfall", *row[5:]))


def test_the_outbox_ships_text(tmp_path):
    box = Outbox(tmp_path / "trove-outbox.db")
    box.store.append(KEY, [user(LOG)])
    rows, _, _, _, _ = box.batch()
    content = list(rows[0].keys()).index("trove_text(content)")
    assert rows[0][content] == LOG


def test_a_sqlite_copy_packs_and_verifies(tmp_path):
    runtime = build_runtime(make_config(tmp_path / "a"))
    ids = runtime.store.append(KEY, [user("hi"), tool_result("c1", LOG), user(WIDE)])
    report = copy_store(runtime, str(tmp_path / "copy.db"))
    assert report["status"] == "ok", report
    copy = MessageStore(Database(tmp_path / "copy.db"))
    assert [stored_type(copy.db, i) for i in ids] == ["text", "blob", "blob"]
    assert [r.content for r in copy.get_many(ids)] == ["hi", LOG, WIDE]
    assert report["verify"]["messages"]["source_chars"] == 2 + len(LOG) + len(WIDE)
    assert fts_integrity(copy.db.read(), "messages_fts") is None


# -- an older file --------------------------------------------------------------------------

def test_an_older_file_keeps_its_text_rows_and_gets_a_rebuilt_index(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, stop_before="0015_packed_text")
    for name, script in OPTIONAL_MIGRATIONS["state"]:
        if name != "0016_quote_guard_reads_text":
            conn.executescript(script)
            conn.execute("INSERT INTO schema_migrations(name, applied_at) VALUES (?, 1.0)", (name,))
    rows = [(KEY.session_id, "cli", "user", t, 0, f"id{i}", 1.0 + i, 1.0) for i, t in enumerate([LOG, "short"])]
    conn.executemany("INSERT INTO messages(session_id, platform, role, content, content_is_json, identity, created_at,"
                     " ingested_at) VALUES (?,?,?,?,?,?,?,?)", rows)
    conn.execute("INSERT INTO messages_fts(rowid, content, tool_calls)"
                 " SELECT store_id, content, tool_calls FROM messages")
    conn.close()
    store = MessageStore(Database(path))
    assert [stored_type(store.db, i) for i in (1, 2)] == ["text", "text"]   # never rewritten
    (new,) = store.append(KEY, [user(WIDE)])
    assert stored_type(store.db, new) == "blob"
    assert sorted(row.store_id for row, _, _ in store.search("quokkaslide OR lighthouse", limit=5)) == [1, new]
    assert fts_integrity(store.db.read(), "messages_fts") is None
    store.db.ensure_optional("state")
    sql = store.db.read().execute("SELECT sql FROM sqlite_master WHERE name='assertions_quote_guard'").fetchone()[0]
    assert "trove_text(m.content)" in sql


def test_the_doctor_finds_and_recreates_a_dropped_text_view(tmp_path):
    from hermes_trove.ops import maintenance

    runtime = build_runtime(make_config(tmp_path))
    (sid,) = runtime.store.append(KEY, [tool_result("c1", LOG)])
    with runtime.db.transaction() as c:
        c.execute("DROP VIEW messages_text")
    report = maintenance.diagnose_fts(runtime.db.read())
    assert report["missing_views"] == ["messages_text"] and report["needs_repair"]
    assert report["fts"]["messages_fts"]["integrity"] != "ok"
    result = maintenance.repair_fts(runtime)
    assert "created view messages_text" in result["actions"] and result["status"] == "repaired"
    ((row, _, snippet),) = runtime.store.search("quokkaslide", limit=5)
    assert row.store_id == sid and ">>>quokkaslide<<<" in snippet


@pytest.mark.both_backends
def test_the_shared_sql_reads_text_on_either_backend(runtime, backend):
    """``trove_text`` is SQLite's unpacking function and the server's identity function."""
    placeholder = "[trove:tool_output ref=trove-abc123 chars=9000] " + "preview line\n" * 120
    ids = runtime.store.append(KEY, [tool_result("c1", placeholder), tool_result("c2", LOG), user(WIDE)])
    assert list(runtime.store.contents_with_payload_refs()) == [placeholder]
    assert {s.store_id: s.content_chars for s in runtime.store.largest_rows(3)} == \
        {ids[0]: len(placeholder), ids[1]: len(LOG), ids[2]: len(WIDE)}
    assert runtime.store.replace_contents([(ids[1], LOG, "short now")]) == 1
    assert [r.content for r in runtime.store.get_many(ids)] == [placeholder, "short now", WIDE]
    ((row, _, _),) = runtime.store.search("", literal="東京 データ", limit=5)
    assert row.store_id == ids[2]


@pytest.mark.parametrize("damage", [
    "DELETE FROM messages_fts_config WHERE k = 'version'",  # FTS5 cannot even load the table to drop it
    "DROP TABLE messages_fts; CREATE TABLE messages_fts_data(id INTEGER PRIMARY KEY, block BLOB)",  # a leftover
])
def test_an_older_file_with_a_damaged_index_still_opens_and_is_searchable(tmp_path, damage):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, stop_before="0015_packed_text")
    conn.execute("INSERT INTO messages(session_id, role, content, identity, created_at, ingested_at)"
                 " VALUES (?, 'user', ?, 'i1', 1.0, 1.0)", (KEY.session_id, LOG))
    conn.execute("INSERT INTO messages_fts(rowid, content, tool_calls) SELECT store_id, content, tool_calls"
                 " FROM messages")
    conn.executescript(damage)
    conn.close()
    store = MessageStore(Database(path))
    assert [row.store_id for row, _, _ in store.search("quokkaslide", limit=5)] == [1]
    assert fts_integrity(store.db.read(), "messages_fts") is None


def test_a_file_holding_remembered_state_gets_the_new_quote_guard_when_opened(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, stop_before="0015_packed_text")
    for name, script in OPTIONAL_MIGRATIONS["state"][:2]:  # the set as a build before 0016 left it
        conn.executescript(script)
        conn.execute("INSERT INTO schema_migrations(name, applied_at) VALUES (?, 1.0)", (name,))
    conn.close()
    db = Database(path)
    assert db.has_optional("state")  # not read as absent while its tables exist
    sql = db.read().execute("SELECT sql FROM sqlite_master WHERE name='assertions_quote_guard'").fetchone()[0]
    assert "trove_text(m.content)" in sql
