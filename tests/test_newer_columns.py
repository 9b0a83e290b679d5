"""A store a newer build migrated while this build runs: a column this build does not know is not read.

Processes of two builds share a store during an upgrade (a fleet on one server, a CLI and a
gateway on one home); the newer one adds its columns on start, and the older one must keep
reading sessions and messages until it restarts.
"""
from __future__ import annotations

import sqlite3

import pytest
from conftest import assistant, make_engine, user

from hermes_trove.rows import SessionKey

pytestmark = pytest.mark.both_backends


def add_columns(runtime, backend: str) -> None:
    """What a newer build's migration does: one more column on sessions and on messages."""
    statements = ("ALTER TABLE sessions ADD COLUMN newer_build_note TEXT DEFAULT 'n'",
                  "ALTER TABLE messages ADD COLUMN newer_build_flag INTEGER DEFAULT 1")
    if backend == "postgresql":
        import psycopg
        with psycopg.connect(runtime.config.database_url, autocommit=True) as conn:
            for sql in statements:
                conn.execute(sql)
        return
    conn = sqlite3.connect(runtime.config.database_path)
    with conn:
        for sql in statements:
            conn.execute(sql)
    conn.close()


def test_sessions_and_messages_still_read_after_a_newer_build_adds_columns(runtime, backend):
    engine = make_engine(runtime)
    history = [user("the kiwi harvest starts in May"), assistant("noted: kiwi harvest in May")]
    engine.ingest(history)
    runtime.store.settle()
    add_columns(runtime, backend)
    runtime.store.ensure_session(SessionKey("s2"))
    assert runtime.store.session("s1").session_id == "s1"
    assert {row.session_id for row in runtime.store.sessions()} == {"s1", "s2"}
    assert [row.content for row in runtime.store.page("s1")] == [m["content"] for m in history]
    hits = runtime.store.search('"kiwi"', limit=5)
    assert sorted(row.role for row, _, _ in hits) == ["assistant", "user"]
    engine.ingest([*history, user("and the apples?"), assistant("in October")])
    runtime.store.settle()
    assert runtime.store.count("s1") == 4


def test_a_remembered_assertion_still_reads_after_a_newer_build_adds_a_column(runtime, backend):
    import json

    from hermes_trove.state import contract
    from hermes_trove.state.assertion_store import AssertionStore

    [store_id] = runtime.store.append(SessionKey("s1"), [user("I live in Lisbon")])
    item = {"store_id": store_id, "quote": "I live in Lisbon", "subject": "user:self", "predicate": "lives_in",
            "value": "Lisbon", "kind": "fact", "confidence": 0.9}
    [candidate] = contract.parse_answer(json.dumps({"assertions": [item]}),
                                        {store_id: runtime.store.get(store_id)}).candidates
    store = AssertionStore(runtime.db)
    store.ensure()
    assert store.add([candidate]) == 1
    runtime.store.settle()
    sql = "ALTER TABLE assertions ADD COLUMN newer_build_score REAL"
    if backend == "postgresql":
        import psycopg
        with psycopg.connect(runtime.config.database_url, autocommit=True) as conn:
            conn.execute(sql)
    else:
        conn = sqlite3.connect(runtime.config.database_path)
        with conn:
            conn.execute(sql)
        conn.close()
    row = store.get(candidate.assertion_id)
    assert row is not None and row.value_text == "Lisbon"
