from __future__ import annotations

import copy
import json
import sqlite3

import pytest
from conftest import assistant, make_engine, tool_call, tool_result, user

from hermes_trove.db import Database, SchemaTooNewError
from hermes_trove.store import SessionKey
from hermes_trove.tools import dispatch

BACKENDS = ("sqlite", "postgresql")  # every test here runs on the file and on a server


def transcript(n: int) -> list[dict]:
    out = []
    for i in range(n):
        out.append(user(f"question {i}") if i % 2 == 0 else assistant(f"answer {i}"))
    return out


def contents(runtime, session_id="s1"):
    return [r.content for r in runtime.store.page(session_id, 0, 10000)]


def test_ingest_stores_each_message_once_when_transcript_is_shown_again(runtime):
    key = SessionKey("s1", platform="cli")
    msgs = transcript(6)
    runtime.store.ingest(key, msgs)
    runtime.store.ingest(key, msgs)
    runtime.store.ingest(key, copy.deepcopy(msgs) + [user("next")])
    runtime.store.ingest(key, msgs + [user("next")])
    assert contents(runtime) == [m["content"] for m in msgs] + ["next"]


def test_ingest_digests_each_message_once_across_calls(runtime, monkeypatch):
    from hermes_trove import ingest

    digested: list[int] = []
    real = ingest.message_identity
    monkeypatch.setattr(ingest, "message_identity", lambda m: digested.append(id(m)) or real(m))
    key = SessionKey("s1", platform="cli")
    msgs = transcript(6)
    runtime.store.ingest(key, msgs)
    assert sorted(digested) == sorted(id(m) for m in msgs)
    digested.clear()
    rewritten = [user("a summary the host wrote")] + [dict(m) for m in msgs[3:]] + [user("next")]  # host copies
    runtime.store.ingest(key, rewritten)  # aligns on the stored tail: the kept messages are not digested again
    assert sorted(digested) == sorted([id(rewritten[0]), id(rewritten[-1])])
    assert contents(runtime) == [m["content"] for m in msgs] + ["next"]


def test_the_store_s_digests_are_the_ones_its_ingest_kept(runtime, monkeypatch):
    """A compaction reads ``store.identities``: on a server store too it holds what the turn's ingest
    (written to the outbox) digested, so the compaction does not digest the same messages again."""
    from hermes_trove import ingest

    key = SessionKey("s1", platform="cli")
    msgs = [user(f"question {i}") if i % 2 == 0 else assistant(f"answer {i}") for i in range(6)]
    runtime.store.ingest(key, msgs)
    digested: list[dict] = []
    real = ingest.message_identity
    monkeypatch.setattr(ingest, "message_identity", lambda m: digested.append(m) or real(m))
    copies = [dict(m) for m in msgs]  # the list a compaction hands back holds copies
    memo = runtime.store.identities.memo()
    assert [memo(m) for m in copies] == [real(m) for m in msgs]
    assert digested == []


def test_ingest_keeps_repeated_identical_messages_that_are_new(runtime):
    key = SessionKey("s1")
    msgs = [user("continue"), assistant("ok")]
    runtime.store.ingest(key, msgs)
    msgs = msgs + [user("continue"), assistant("ok")]
    runtime.store.ingest(key, msgs)
    assert contents(runtime) == ["continue", "ok", "continue", "ok"]


def test_ingest_after_rewrite_aligns_on_stored_tail(runtime):
    key = SessionKey("s1")
    msgs = transcript(10)
    runtime.store.ingest(key, msgs)
    rewritten = [{"role": "user", "content": "[trove summary] ...", "_trove_summary": True}] + msgs[-4:]
    runtime.store.ingest(key, rewritten + [user("fresh")])
    assert contents(runtime)[-2:] == ["answer 9", "fresh"]
    assert runtime.store.count("s1") == 11


def test_ingest_survives_a_new_runtime_on_the_same_file(config):
    from hermes_trove.runtime import build_runtime

    key = SessionKey("s1")
    msgs = transcript(4)
    build_runtime(config).store.ingest(key, msgs)
    fresh = build_runtime(config)
    fresh.store.ingest(key, msgs + [user("after restart")])
    assert fresh.store.count("s1") == 5


def test_host_internal_keys_are_not_stored(runtime):
    key = SessionKey("s1")
    msg = {"role": "user", "content": "hi", "api_content": "hi + injected", "_db_persisted": True,
           "reasoning": "kept as extra"}
    runtime.store.ingest(key, [msg])
    row = runtime.store.page("s1")[0]
    assert row.content == "hi"
    assert "api_content" not in (row.extra or "") and "_db_persisted" not in (row.extra or "")
    assert row.to_message()["reasoning"] == "kept as extra"


@pytest.mark.parametrize("timestamp", [float("nan"), float("inf"), -float("inf"), 1.7e12, 1e20, -1e12],
                         ids=["nan", "inf", "-inf", "milliseconds", "1e20", "-1e12"])
def test_a_message_timestamp_no_calendar_holds_gives_the_row_its_ingest_time(runtime, timestamp):
    engine = make_engine(runtime)
    engine.ingest([user("before"), {"role": "user", "content": "stamped oddly", "timestamp": timestamp}, user("after")])
    assert runtime.health.usable
    rows = runtime.store.page("s1")
    assert [r.content for r in rows] == ["before", "stamped oddly", "after"]
    assert rows[1].created_at == pytest.approx(rows[1].ingested_at)
    out = json.loads(dispatch(engine.tool_context(), "trove_recent", {"period": "today", "mode": "messages"}))
    assert "error" not in out, out


@pytest.mark.parametrize("fields", [{"tool_call_id": ["c1"]}, {"tool_call_id": {"id": "c1"}}, {"tool_call_id": 7},
                                    {"tool_call_id": "c1", "name": ["read_file"]},
                                    {"tool_call_id": "c1", "tool_name": {"name": "read_file"}}],
                         ids=["id-list", "id-object", "id-number", "name-list", "tool_name-object"])
def test_a_tool_message_with_a_non_text_id_or_name_is_stored_with_it_as_json(runtime, fields):
    engine = make_engine(runtime)
    engine.ingest([user("run it"), {"role": "tool", "content": "done", **fields}, user("thanks")])
    assert runtime.health.usable
    row = runtime.store.page("s1")[1]
    assert row.content == "done"
    for field, value in fields.items():
        stored = row.tool_call_id if field == "tool_call_id" else row.tool_name
        assert stored == (value if isinstance(value, str) else json.dumps(value))


@pytest.mark.parametrize("timestamp", [float("inf"), 1e20, -1e12], ids=["inf", "1e20", "-1e12"])
def test_a_row_an_older_build_stored_with_such_a_timestamp_reads_with_its_ingest_time(runtime, timestamp):
    engine = make_engine(runtime)
    engine.ingest([user("before"), user("stamped oddly"), user("after")])
    odd = runtime.store.page("s1")[1]
    with runtime.db.transaction() as conn:
        conn.execute("UPDATE messages SET created_at=? WHERE store_id=?", (timestamp, odd.store_id))
    row = runtime.store.get(odd.store_id)
    assert row is not None and row.created_at == pytest.approx(row.ingested_at)
    for name, args in (("trove_recent", {"period": "today", "mode": "messages"}), ("trove_grep", {"query": "oddly"}),
                       ("trove_expand", {"store_id": odd.store_id}), ("trove_load_session", {"session_id": "s1"})):
        out = json.loads(dispatch(engine.tool_context(), name, args))
        assert "error" not in out, (name, out)


def test_tool_calls_and_results_round_trip(runtime):
    key = SessionKey("s1")
    call = tool_call("c1", "read_file", '{"path": "/etc/hosts"}')
    msgs = [user("read it"), assistant("", [call]), tool_result("c1", "127.0.0.1 localhost", "read_file")]
    runtime.store.ingest(key, msgs)
    rows = runtime.store.page("s1")
    assert rows[1].to_message()["tool_calls"] == [call]
    assert rows[2].tool_call_id == "c1" and rows[2].tool_name == "read_file"


def test_multimodal_content_is_stored_as_json_and_restored(runtime):
    parts = [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]
    runtime.store.ingest(SessionKey("s1"), [{"role": "user", "content": parts}])
    row = runtime.store.page("s1")[0]
    assert row.content_is_json and row.content_value() == parts


def test_blank_source_reads_as_unknown(runtime):
    runtime.store.ingest(SessionKey("s1"), [user("x")])
    with runtime.db.transaction() as conn:
        conn.execute("UPDATE messages SET source=''")
    assert runtime.store.page("s1")[0].source == "unknown"


def test_fts_index_follows_inserts_and_searches_tool_arguments(runtime):
    from hermes_trove.retrieval.query import build_match

    call = tool_call("c1", "terminal", '{"command": "grep -r zebrafish /srv/data"}')
    runtime.store.ingest(SessionKey("s1"), [user("find it"), assistant("", [call])])
    hits = runtime.store.search(build_match("zebrafish").expression, ["s1"])
    assert [h[0].role for h in hits] == ["assistant"]


def test_database_refuses_a_ledger_naming_a_migration_this_build_does_not_know(tmp_path):
    path = tmp_path / "t.db"
    db = Database(path)
    db.connect()
    db.close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_migrations VALUES ('9999_from_the_future', 0)")
    conn.commit()
    conn.close()
    with pytest.raises(SchemaTooNewError, match="newer.*9999_from_the_future"):
        Database(path).connect()


def test_migrations_are_recorded_by_name(runtime, backend):
    runtime.db.connect()
    from hermes_trove.migrations import MIGRATIONS
    from hermes_trove.pgschema import migrations

    known = migrations() if backend == "postgresql" else MIGRATIONS
    assert runtime.db.applied_migrations() == sorted(name for name, _ in known)
    assert ("pg0001_core" if backend == "postgresql" else "0001_core") in runtime.db.applied_migrations()


def test_page_is_cursor_ordered(runtime):
    runtime.store.ingest(SessionKey("s1"), transcript(7))
    first = runtime.store.page("s1", 0, 3)
    second = runtime.store.page("s1", first[-1].store_id, 3)
    assert [r.content for r in first + second] == [m["content"] for m in transcript(6)]


def test_text_that_utf8_cannot_hold_is_stored_escaped_not_lost(runtime):
    runtime.store.transform = None  # the raw store path, without the payload guard
    runtime.store.ingest(SessionKey("s1"), [user("broken \udcff surrogate")])
    row = runtime.store.page("s1")[0]
    assert "\\udcff" in row.content and "_trove_escaped_surrogates" in row.extra


def test_tail_and_count_after_read_only_the_newest_rows(runtime):
    runtime.store.ingest(SessionKey("s1"), transcript(10))
    rows = runtime.store.page("s1", 0, 100)
    assert [r.content for r in runtime.store.tail("s1", 3)] == [r.content for r in rows[-3:]]
    assert runtime.store.count_after("s1", rows[5].store_id) == 4
    assert runtime.store.tail("s1", 50, rows[7].store_id) == rows[8:]


def test_a_stale_prefix_shown_later_does_not_rewind_the_cursor(runtime):
    key = SessionKey("s1")
    msgs = transcript(10)
    runtime.store.ingest(key, msgs)
    runtime.store.ingest(key, msgs[:4])  # e.g. a gateway /compress head or a lagging engine copy
    runtime.store.ingest(key, msgs + [user("new")])
    assert [r.content for r in runtime.store.page("s1", 0, 100)] == [m["content"] for m in msgs] + ["new"]


def test_an_existing_import_ledger_keeps_its_rows_when_stored_by_key(tmp_path):
    from hermes_trove import db as dbmod
    from hermes_trove.migrations import MIGRATIONS

    path = tmp_path / "old.db"
    old = [(n, s) for n, s in MIGRATIONS if n < "0005"]
    conn = sqlite3.connect(path, isolation_level=None)
    for _name, script in old:
        for statement in dbmod.split_sql(script):
            conn.execute(statement)
    conn.execute("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    conn.executemany("INSERT INTO schema_migrations VALUES (?, 0)", [(n,) for n, _ in old])
    conn.execute("INSERT INTO meta VALUES ('schema_version', '1')")  # older builds stamped this; it is ignored
    conn.executemany("INSERT INTO imported_messages VALUES ('imp', ?, ?, ?, 1.0)",
                     [(f"sqlite:message:{i}", i, f'{{"seq":{i}}}') for i in range(1, 4)])
    conn.close()
    conn = Database(path).connect()
    rows = conn.execute("SELECT source_key, store_id, meta FROM imported_messages ORDER BY store_id")
    assert [tuple(r) for r in rows] == [(f"sqlite:message:{i}", i, f'{{"seq":{i}}}') for i in range(1, 4)]
    ddl = conn.execute("SELECT sql FROM sqlite_master WHERE name='imported_messages'").fetchone()[0]
    assert "WITHOUT ROWID" in ddl
    assert conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE tbl_name='imported_messages' AND type='index'"
                        " AND sql IS NOT NULL").fetchone()[0] == 0
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("INSERT INTO imported_messages VALUES ('imp', 'sqlite:message:1', 9, NULL, 2.0)")


def test_entries_that_are_not_messages_neither_align_nor_stop_a_rewritten_list(runtime):
    key = SessionKey("s1")
    first, reply = user("hello"), assistant("hi")
    runtime.store.ingest(key, [first, reply])
    # the list rewritten (a cursor that no longer matches), an entry that is not a dict at its front
    assert runtime.store.ingest(key, ["junk", user("other"), first, reply, user("next")]).reason == \
        "aligned on stored tail"
    # the cursor's place now holds a non-dict, and nothing in the list aligns: known identities decide
    result = runtime.store.ingest(key, [first, 7, reply, user("after")])
    assert (len(result.store_ids), result.skipped) == (1, 1)
    assert contents(runtime) == ["hello", "hi", "next", "after"]
    # a non-dict where the cursor's message stood (the cursor is at 4 messages)
    runtime.store.ingest(key, [first, reply, user("next"), None, user("last")])
    assert contents(runtime) == ["hello", "hi", "next", "after", "last"]
