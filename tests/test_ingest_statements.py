"""What one quiet turn's ingest asks of SQLite, and that its shortcuts store what the long way stored."""
from __future__ import annotations

import itertools

from conftest import assistant, user

from hermes_trove import ingestrows
from hermes_trove.db import Database, fts_integrity
from hermes_trove.ingest import IdentityCache, message_identity
from hermes_trove.store import MessageStore, SessionKey


def statements(runtime, action) -> list[str]:
    """The top-level statements ``action`` runs on this thread's connection (FTS5's own left out)."""
    seen: list[str] = []
    conn = runtime.db.connect()
    conn.set_trace_callback(seen.append)
    try:
        action()
    finally:
        conn.set_trace_callback(None)
    return [" ".join(s.split()) for s in seen if not s.startswith("--")]


def test_a_quiet_turn_is_one_transaction_with_one_read_and_one_session_write(runtime):
    key = SessionKey("s1", platform="cli")
    msgs = [user("first question"), assistant("first answer")]
    runtime.store.ingest(key, msgs)
    msgs = msgs + [user("second question"), assistant("second answer")]
    ran = statements(runtime, lambda: runtime.store.ingest(key, msgs))
    heads = [s.split(" (")[0].split(" VALUES")[0][:40] for s in ran]
    assert ran[0] == "BEGIN IMMEDIATE" and ran[-1] == "COMMIT"  # no read before the lock: the store wrote the cursor
    assert sum(s.startswith("SELECT") for s in ran) == 1  # the cursor, under the lock
    inserts = [s for s in ran if s.startswith("INSERT INTO messages(")]
    assert len(inserts) == 2 and not any("RETURNING" in s for s in inserts)  # the cursor names the new id
    assert sum(s.startswith("INSERT INTO sessions") for s in ran) == 0  # the row exists: no upsert
    assert sum(s.startswith("UPDATE sessions") for s in ran) == 1  # its refresh and the new cursor together
    fts = [s for s in ran if s.startswith("INSERT INTO messages_fts")]
    assert len(fts) == 2 and all("FROM messages" not in s for s in fts), heads  # written from memory, not read back
    row = runtime.store.session("s1")
    assert (row.ingest_len, row.platform, row.scope, row.ended_at) == (4, "cli", "local", None)
    assert [r.content for r in runtime.store.page("s1", 0, 10)] == [m["content"] for m in msgs]


def test_a_list_grown_by_two_is_read_only_from_where_it_grew(runtime):
    """Per-turn work follows the new messages: the 500 already stored are not walked again."""

    class Counted(list):
        touched = 0

        def __iter__(self):
            for m in super().__iter__():
                Counted.touched += 1
                yield m

        def __getitem__(self, index):
            got = super().__getitem__(index)
            Counted.touched += len(got) if isinstance(index, slice) else 1
            return got

    key = SessionKey("s1", platform="cli")
    msgs = [user(f"question {i}") if i % 2 == 0 else assistant(f"answer {i}") for i in range(500)]
    runtime.store.ingest(key, msgs)
    grown = Counted(msgs + [user("one more"), assistant("and its answer")])
    Counted.touched = 0
    result = runtime.store.ingest(key, grown)
    assert len(result.store_ids) == 2
    assert Counted.touched <= 12  # the cursor's message and the two new ones, a few times each; not 502


def test_another_writer_storing_the_list_first_leaves_nothing_to_write(runtime, tmp_path):
    """A store plans from the cursor it wrote last; when another writer (a second store on the file, as
    another process would be) stored the grown list meanwhile, the lock's read says so and nothing is
    written, as the read before the lock said when it was made every time."""
    key = SessionKey("s1", platform="cli")
    other = MessageStore(type(runtime.db)(runtime.db.path), transform=runtime.store.transform)
    msgs = [user("question"), assistant("answer")]
    runtime.store.ingest(key, msgs)
    grown = msgs + [user("next"), assistant("next answer")]
    assert len(other.ingest(key, grown).store_ids) == 2
    before = runtime.store.session("s1")
    result = runtime.store.ingest(key, grown)
    assert (result.store_ids, result.reason) == ((), "up to date")
    assert runtime.store.session("s1") == before  # not even the row's time moved
    assert runtime.store.count("s1") == 4
    third = grown + [user("third")]  # and the stale cursor it remembers still stores the rest once
    assert len(runtime.store.ingest(key, third).store_ids) == 1
    assert [r.content for r in runtime.store.page("s1", 0, 10)] == [m["content"] for m in third]


def test_a_list_another_writer_stored_takes_the_write_lock_once(runtime):
    """The lock's read found the list stored by another writer: the store keeps that cursor, so the
    host showing the same list again (preflight, hook, retries) is a read, not a write transaction."""
    key = SessionKey("s1", platform="cli")
    other = MessageStore(type(runtime.db)(runtime.db.path), transform=runtime.store.transform)
    msgs = [user("question"), assistant("answer")]
    runtime.store.ingest(key, msgs)
    grown = msgs + [user("next"), assistant("next answer")]
    other.ingest(key, grown)
    first = statements(runtime, lambda: runtime.store.ingest(key, grown))
    again = statements(runtime, lambda: runtime.store.ingest(key, grown))
    assert first[0] == "BEGIN IMMEDIATE" and len(first) == 3  # planned from the cursor it wrote: locked, read
    assert len(again) == 1 and again[0].startswith("SELECT ingest_len")  # one read, no lock
    assert runtime.store.ingest(key, grown + [user("third")]).store_ids  # and the next message is stored
    assert runtime.store.count("s1") == 5


def test_full_text_entries_written_from_memory_match_the_stored_rows(runtime):
    """Long text is stored deflated, unencodable text as a placeholder; the index holds what the rows hold."""
    key = SessionKey("s1", platform="cli")
    long_text = "ledger reconciliation for invoice 4417 " * 200  # past packing's threshold
    msgs = [user(long_text), assistant("broken \ud800 text"),
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": '{"q": "zanzibar"}'}}]}]
    runtime.store.ingest(key, msgs[:1])
    runtime.store.ingest(key, msgs)
    conn = runtime.db.connect()
    assert isinstance(conn.execute("SELECT content FROM messages ORDER BY store_id LIMIT 1").fetchone()[0], bytes)
    assert fts_integrity(conn, "messages_fts") is None
    words = ("reconciliation", "broken", "externalized", "zanzibar")
    found = {w: conn.execute("SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH ?", (w,)).fetchone()[0]
             for w in words}
    assert found == {"reconciliation": 1, "broken": 0, "externalized": 1, "zanzibar": 1}


def test_the_session_refresh_does_what_the_upsert_did_to_an_existing_row(tmp_path):
    """``touch_session`` against the session upsert (``ensure_session``) over every kind of stored row and key."""
    rows = list(itertools.product(("", "c1"), ("", "cli", "telegram"), ("", "kept"), (None, 5.0)))
    keys = list(itertools.product(("", "c2"), ("", "cli", "discord"), ("", "given")))

    def rows_after(name, write) -> list[tuple]:
        db = Database(tmp_path / f"{name}.db")
        out = []
        for i, ((conv, plat, scope, ended), (kconv, kplat, kscope)) in enumerate(itertools.product(rows, keys)):
            sid = f"s{i}"
            with db.transaction() as conn:
                conn.execute("INSERT INTO sessions(session_id, conversation_id, platform, scope, created_at,"
                             " updated_at, ended_at) VALUES (?,?,?,?,1,1,?)", (sid, conv, plat, scope, ended))
            write(db, SessionKey(sid, kconv, kplat, scope=kscope))
            out.append(tuple(db.read().execute("SELECT session_id, conversation_id, platform, previous_session_id,"
                                               " scope, ended_at, ingest_len, ingest_identity, updated_at > 1"
                                               " FROM sessions WHERE session_id=?", (sid,)).fetchone()))
        return out

    def touch(db, key, cursor=None):
        with db.transaction() as conn:
            ingestrows.touch_session(conn, key, 2.0, cursor)

    upserted = rows_after("upsert", lambda db, key: MessageStore(db).ensure_session(key))
    assert rows_after("touch", touch) == upserted
    moved = rows_after("moved", lambda db, key: touch(db, key, (7, "abc")))
    assert [r[6:8] for r in moved] == [(7, "abc")] * len(moved)
    assert len({r[4] for r in upserted}) > 2  # the cases reach every branch of the scope rule


def test_a_kept_digest_is_reused_only_for_the_same_text_role_and_call_id(monkeypatch):
    from hermes_trove import ingest

    cache = IdentityCache()
    text = "the tool printed this"
    msg = {"role": "tool", "content": text, "tool_call_id": "c1"}
    first = cache.memo()(msg)
    digested: list[dict] = []
    monkeypatch.setattr(ingest, "message_identity", lambda m: digested.append(m) or message_identity(m))
    memo, copy = cache.memo(), dict(msg)  # one call's messages stay alive through it, as a host list's do
    assert memo(copy) == first == message_identity(msg) and digested == []  # a copy holds the same string
    changes = ({**msg, "role": "user"}, {**msg, "tool_call_id": "c2"}, {**msg, "content": text + "!"},
               {**msg, "tool_calls": [{"id": "x", "type": "function", "function": {"name": "f"}}]})
    for changed in changes:
        assert memo(changed) == message_identity(changed) != first
    assert digested == list(changes)  # each change digested anew
    msg["content"] = "replaced in place"
    assert cache.memo()(msg) == message_identity(msg) != first


def test_a_kept_digest_is_not_reused_for_a_role_or_call_id_of_another_type():
    """1 and True are equal in Python but digest apart: the cache answers only for plain strings."""
    text = "the same string object"
    for first, second in (({"role": 1}, {"role": True}), ({"role": "tool", "tool_call_id": 1},
                                                         {"role": "tool", "tool_call_id": 1.0})):
        cache = IdentityCache()
        one, two = {**first, "content": text}, {**second, "content": text}
        assert cache.memo()(one) == message_identity(one)
        assert cache.memo()(two) == message_identity(two) != message_identity(one)


def test_a_string_longer_than_the_cache_bound_is_not_held():
    import sys

    cache = IdentityCache()
    cache.memo()(user("kept"))
    huge = "x" * (IdentityCache.CHARS + 1)
    held = sys.getrefcount(huge)
    assert cache.memo()(user(huge)) == message_identity(user(huge))
    assert sys.getrefcount(huge) == held  # the host may drop it: the cache does not keep it alive
    kept = user("kept")
    assert cache.memo()(kept) == message_identity(kept)
