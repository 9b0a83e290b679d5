"""Which session ends count, and what the bookkeeping of delegated children keeps (HOST.md §10)."""
from __future__ import annotations

import contextlib
import copy
import logging
import os
import shutil
import sqlite3
import threading
from collections.abc import Iterator

from conftest import assistant, make_config, make_engine, user
from pg_proxy import PgProxy

from hermes_trove import runtime as runtime_module
from hermes_trove.hooks import make_hooks
from hermes_trove.runtime import build_runtime

BACKENDS = ("sqlite", "postgresql")  # every test here runs on the file and on a server

CRON = "cron_abc_20260301_090000"
CHILD = "20260301_090001_c0ffee"


def chat(n: int) -> list[dict]:
    return [user(f"question {i} about the kiln") if i % 2 == 0 else assistant(f"answer {i}") for i in range(n)]


def cron_child(rt, hooks, child: str = CHILD):
    """A delegated child of a cron job, bound as the host binds it: as an ordinary session first, then
    told by ``subagent_start`` whose child it is."""
    job = make_engine(rt, session=CRON, platform="cron")
    kid = copy.deepcopy(job)
    kid.state.key = None
    kid.on_session_start(child, platform="subagent", conversation_id=None)
    hooks["subagent_start"](parent_session_id=CRON, child_session_id=child)
    return kid


def test_the_end_of_a_session_stateless_by_pattern_marks_and_stores_nothing(tmp_path):
    before = build_runtime(make_config(tmp_path))  # the pattern came later: the session has a row and turns
    make_engine(before, session="batch-7").ingest(chat(2))
    rt = build_runtime(make_config(tmp_path, stateless_session_patterns=("batch-*",)))
    eng = make_engine(rt, session="batch-7")
    assert eng.state.mode == "stateless"
    eng.on_session_end("batch-7", chat(6))
    row = rt.store.session("batch-7")
    assert row.ended_at is None and rt.store.count("batch-7") == 2
    ignored = build_runtime(make_config(tmp_path, ignore_session_patterns=("batch-*",)))
    make_engine(ignored, session="batch-7").on_session_end("batch-7", chat(8))
    assert ignored.store.session("batch-7").ended_at is None and ignored.store.count("batch-7") == 2


def test_the_end_of_a_cron_jobs_child_that_kept_its_row_marks_nothing(tmp_path):
    rt = build_runtime(make_config(tmp_path))
    hooks = make_hooks(rt)
    job = make_engine(rt, session=CRON, platform="cron")
    kid = copy.deepcopy(job)
    kid.state.key = None
    kid.on_session_start(CHILD, platform="subagent", conversation_id=None)
    rt.health.fail("database is locked")  # the store is out of reach when the child is announced...
    hooks["subagent_start"](parent_session_id=CRON, child_session_id=CHILD)
    rt.health.recover()  # ...so the row its first, ordinary bind made stays
    assert rt.store.session(CHILD) is not None
    kid.on_session_end(CHILD, chat(4))
    assert rt.store.session(CHILD).ended_at is None and rt.store.count(CHILD) == 0


def test_a_failing_subagent_start_names_the_child_and_the_parent_in_its_log(tmp_path, caplog):
    rt = build_runtime(make_config(tmp_path, database_url=""))  # a file store, made unusable below
    hooks = make_hooks(rt)
    parent = make_engine(rt, session="p-1")
    kid = copy.deepcopy(parent)
    kid.state.key = None
    kid.on_session_start("kid-1", platform="subagent", conversation_id=None)
    path = rt.db.path
    rt.db.close()  # the store becomes unusable underneath: a directory where the file was
    (tmp_path / "moved").mkdir()
    for leftover in (path, path + "-wal", path + "-shm"):
        if os.path.exists(leftover):
            shutil.move(leftover, tmp_path / "moved")
    os.mkdir(path)
    with caplog.at_level(logging.ERROR, logger="hermes_trove"):
        assert hooks["subagent_start"](parent_session_id="p-1", child_session_id="kid-1") is None
    failed = [r.getMessage() for r in caplog.records if "subagent_start" in r.getMessage()]
    assert failed and "kid-1" in failed[0] and "p-1" in failed[0] and "session None" not in failed[0]


def test_a_childs_end_drops_what_it_inherited_and_a_compaction_end_keeps_it(tmp_path):
    rt = build_runtime(make_config(tmp_path))
    hooks = make_hooks(rt)
    kid = cron_child(rt, hooks)
    assert rt.inherited_modes == {CHILD: "stateless"}
    # The host ends a session it compacts before it announces the boundary (commit_memory_session):
    # in place first, then rotated to a new id. The child stays stateless across both.
    kid.on_session_end(CHILD, chat(4))
    kid.on_session_start(CHILD, boundary_reason="compression", old_session_id=CHILD, platform="subagent")
    assert kid.state.mode == "stateless" and kid.ingest(chat(6)) == 0
    kid.on_session_end(CHILD, chat(6))
    kid.on_session_start("20260301_090502_beef00", boundary_reason="compression", old_session_id=CHILD,
                         platform="subagent")
    assert kid.state.mode == "stateless" and kid.ingest(chat(8)) == 0
    assert rt.store.count(CHILD) == 0 and rt.store.count("20260301_090502_beef00") == 0
    kid.on_session_end("20260301_090502_beef00", chat(8))  # its real end
    assert rt.inherited_modes == {}
    assert rt.store.session("20260301_090502_beef00") is None


def test_the_inherited_modes_of_a_long_running_process_are_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(runtime_module, "MAX_INHERITED", 8)
    rt = build_runtime(make_config(tmp_path))
    hooks = make_hooks(rt)
    kids = [cron_child(rt, hooks, f"kid-{i:02d}") for i in range(20)]  # children that never end
    assert list(rt.inherited_modes) == [f"kid-{i:02d}" for i in range(12, 20)]
    assert all(k.ingest(chat(2)) == 0 for k in kids)  # each live child is still stateless


def test_a_sessions_binding_goes_at_its_end_and_stays_through_a_compaction_or_a_side_agents_end(tmp_path):
    rt = build_runtime(make_config(tmp_path))
    hooks = make_hooks(rt)
    key = "agent:main:telegram:dm:7"
    live = make_engine(rt, session="chat-1", platform="telegram")
    live.on_session_start("chat-1", platform="telegram", conversation_id=key)
    live.ingest(chat(4))
    live.on_session_end("chat-1", chat(4))  # the host ends a session it compacts, then announces the boundary
    live.on_session_start("chat-1", boundary_reason="compression", old_session_id="chat-1", platform="telegram",
                          conversation_id=key)
    assert rt.bound_sessions.get("chat-1") == "active"
    helper = copy.deepcopy(live)  # the gateway's /compress agent: its clean-up ends nothing, the chat goes on
    helper.on_session_start("chat-1", boundary_reason="compression", old_session_id="chat-1", platform="telegram",
                            conversation_id=key)
    helper.on_session_end("chat-1", [])
    fork = copy.deepcopy(live)  # a copy serving another session ends this one (the review fork does)
    fork.state.key = None
    fork.on_session_start("20260301_100000_ffffff", platform="cli", conversation_id=None)
    fork.on_session_end("chat-1", [])
    assert rt.bound_sessions.get("chat-1") == "active"
    hooks["post_llm_call"](session_id="chat-1", platform="telegram", conversation_history=chat(6))
    assert rt.store.count("chat-1") == 6  # the live chat's hooks still store its turns
    live.on_session_end("chat-1", chat(6))  # its real end
    assert "chat-1" not in rt.bound_sessions and rt.store.session("chat-1").ended_at is not None
    other = make_engine(rt, session="chat-2", platform="telegram")
    other.on_session_start("chat-2", platform="telegram", conversation_id=key)
    hooks["on_session_finalize"](session_id="chat-2", platform="telegram", reason="new_session")
    assert "chat-2" not in rt.bound_sessions  # the gateway ended it; its agent may be gone
    stateless = make_engine(rt, session=CRON, platform="cron")
    stateless.on_session_end(CRON, chat(2))
    assert CRON not in rt.bound_sessions


def test_the_bindings_of_a_long_running_process_are_bounded_and_a_live_stateless_child_stays_so(tmp_path,
                                                                                               monkeypatch):
    monkeypatch.setattr(runtime_module, "MAX_INHERITED", 2)
    monkeypatch.setattr(runtime_module, "MAX_BOUND", 8)
    rt = build_runtime(make_config(tmp_path))
    hooks = make_hooks(rt)
    kids = [cron_child(rt, hooks, f"kid-{i:02d}") for i in range(4)]  # kid-00's inherited entry is evicted
    chats = [make_engine(rt, session=f"chat-{i:02d}") for i in range(20)]  # sessions that never end
    assert len(rt.bound_sessions) == 8 and "kid-00" not in rt.inherited_modes
    assert [rt.bound_sessions.get(f"kid-{i:02d}") for i in range(4)] == ["stateless"] * 4  # actives went first
    assert all(k.ingest(chat(2)) == 0 for k in kids) and rt.store.count("kid-00") == 0
    assert rt.bound_sessions.get("chat-19") == "active" and "chat-00" not in rt.bound_sessions
    # an evicted live session reads as served by no engine here: its hooks store nothing, its engine still does
    hooks["post_llm_call"](session_id="chat-00", platform="cli", conversation_history=chat(2))
    assert rt.store.count("chat-00") == 0 and chats[0].ingest(chat(2)) == 2


# -- an end held while the store is unusable is replayed by the rule a normal end follows --------------------
class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def down(rt) -> Clock:
    """The store turns unusable (as after a failed write); its retry is not due until the clock moves on."""
    clock = Clock()
    rt.health.clock = clock
    rt.health.fail("database or disk is full")
    return clock


def test_an_exit_after_new_held_while_the_store_was_down_stores_nothing_more_when_replayed(tmp_path):
    rt = build_runtime(make_config(tmp_path, database_url=""))  # a file store: the held copy spills too
    eng = make_engine(rt, session="s-old")
    history = chat(6)
    eng.ingest(history[:4])
    clock = down(rt)
    eng.on_session_end("s-old", history)  # /new: the old session's end, then the new one's exit with the same list
    eng.on_session_reset()
    eng.bind_session_state(None, "s-new")
    eng.on_session_end("s-new", history)
    clock.now = rt.health.retry_at + 1
    assert rt.store_usable()
    assert rt.store.count("s-old") == 6 and rt.store.count("s-new") == 0
    assert rt.unstored.sessions == {} and rt.unstored.spill.pending() == 0


def test_an_exit_after_resume_held_while_the_store_was_down_is_replayed_by_the_next_process(tmp_path):
    config = make_config(tmp_path, database_url="")
    rt = build_runtime(config)
    eng = make_engine(rt, session="a")
    eng.ingest(chat(4))
    eng.on_session_reset()
    eng.bind_session_state(None, "b")
    b_history = [user("the kiln runs at 1240 degrees"), assistant("noted")]
    eng.ingest(b_history)
    down(rt)
    eng.on_session_reset()
    eng.bind_session_state(None, "a")  # /resume a, then the exit hands b's list
    eng.on_session_end("a", b_history)
    later = build_runtime(config)  # Hermes exited with the store still down; the next start writes the files
    later.restore_spilled()
    assert later.store.count("a") == 4 and later.store.count("b") == 2
    assert later.unstored.spill.pending() == 0


def test_a_failed_turn_after_new_held_while_the_store_was_down_is_still_replayed(tmp_path):
    rt = build_runtime(make_config(tmp_path, database_url=""))
    eng = make_engine(rt, session="t-old")
    history = chat(4)
    eng.ingest(history)
    clock = down(rt)
    eng.on_session_end("t-old", history)
    eng.on_session_reset()
    eng.bind_session_state(None, "t-new")
    eng.on_session_end("t-new", [*history, user("and one more thing")])  # a turn whose answer failed
    clock.now = rt.health.retry_at + 1
    assert rt.store_usable()
    assert rt.store.count("t-old") == 4 and rt.store.count("t-new") == 5


def test_the_gateways_finalize_hook_ends_a_chat_session_whose_agent_is_gone(tmp_path):
    # /compress evicts the chat's agent, so /new right after cleans no agent up: only the hook says so
    rt = build_runtime(make_config(tmp_path, stateless_session_patterns=("telegram:quiet-*",)))
    hooks = make_hooks(rt)
    key = "agent:main:telegram:dm:5151"
    live = make_engine(rt, session="chat-1", platform="telegram")
    live.on_session_start("chat-1", platform="telegram", conversation_id=key)
    live.ingest(chat(4))
    for reason in ("shutdown", "session_boundary", None):  # a restart resumes the chat: no end
        hooks["on_session_finalize"](session_id="chat-1", platform="telegram", reason=reason)
        assert rt.store.session("chat-1").ended_at is None, reason
    hooks["on_session_finalize"](session_id="chat-1", platform="telegram", reason="new_session",
                                 old_session_id="chat-1", new_session_id="chat-2")
    assert rt.store.session("chat-1").ended_at is not None and rt.store.count("chat-1") == 4
    before = build_runtime(make_config(tmp_path))  # a row made before the pattern named the session
    make_engine(before, session="quiet-1", platform="telegram")
    hooks["on_session_finalize"](session_id="quiet-1", platform="telegram", reason="session_expired")
    assert rt.store.session("quiet-1").ended_at is None
    for kw in ({}, {"session_id": None, "reason": "new_session"}, {"session_id": "no-such", "reason": "new_session"}):
        assert hooks["on_session_finalize"](**kw) is None


def test_a_live_child_past_the_inherited_bound_stays_stateless_across_its_compaction(tmp_path, monkeypatch):
    monkeypatch.setattr(runtime_module, "MAX_INHERITED", 2)
    rt = build_runtime(make_config(tmp_path))
    hooks = make_hooks(rt)
    kid = cron_child(rt, hooks, "kid-00")
    for i in range(1, 4):  # later children, still running: the first one's entry is evicted
        cron_child(rt, hooks, f"kid-{i:02d}")
    assert "kid-00" not in rt.inherited_modes
    kid.on_session_end("kid-00", chat(4))  # the host compacts the first child: its end, then the boundary
    kid.on_session_start("kid-00-b", boundary_reason="compression", old_session_id="kid-00", platform="subagent")
    assert kid.state.mode == "stateless" and kid.ingest(chat(6)) == 0
    assert rt.store.session("kid-00-b") is None


def test_the_finalize_hook_on_postgresql_marks_the_end_in_the_outbox_while_the_server_is_away(tmp_path,
                                                                                             pg_database_url):
    # as an engine's end does: the outbox takes the mark with no network, and ships it when the server is back
    proxy = PgProxy(pg_database_url).start()
    try:
        rt = build_runtime(make_config(tmp_path, database_url=proxy.url))
        hooks = make_hooks(rt)
        live = make_engine(rt, session="chat-1", platform="telegram")
        live.ingest(chat(4))
        rt.store.settle()
        proxy.down()
        rt.health.fail("server closed the connection unexpectedly")  # as a failed read in the chat marks it
        hooks["on_session_finalize"](session_id="chat-1", platform="telegram", reason="new_session")
        proxy.up()
        rt.health.recover()
        rt.store.shipper.state.last_error_at = 0.0
        rt.store.settle()
        assert rt.store.session("chat-1").ended_at is not None
    finally:
        proxy.down()


def test_the_finalize_hook_fired_outside_any_profile_scope_ends_a_served_profiles_chat(tmp_path, monkeypatch):
    # a gateway serving several profiles fires session_expired from its expiry watcher, in no profile's scope
    monkeypatch.setattr(runtime_module, "_PROFILES", {})  # this process serves these two profiles only
    base = build_runtime(make_config(tmp_path / "default"))
    work = tmp_path / "profiles" / "work"
    work.mkdir(parents=True)
    served = base.for_home(str(work))
    chat_engine = make_engine(served, session="work-chat", platform="telegram")
    chat_engine.ingest(chat(4))
    make_hooks(base)["on_session_finalize"](session_id="work-chat", platform="telegram", reason="session_expired")
    assert served.store.session("work-chat").ended_at is not None and served.store.count("work-chat") == 4
    assert base.store.session("work-chat") is None


def test_the_finalize_hook_on_postgresql_ends_a_chat_this_machines_outbox_never_held(tmp_path, pg_database_url):
    # the chat was stored through another machine's outbox (or this one's before it was replaced)
    other = build_runtime(make_config(tmp_path / "other", database_url=pg_database_url))
    make_engine(other, session="chat-9", platform="telegram").ingest(chat(4))
    other.store.settle()
    here = build_runtime(make_config(tmp_path / "here", database_url=pg_database_url))
    make_hooks(here)["on_session_finalize"](session_id="chat-9", platform="telegram", reason="new_session")
    here.store.settle()
    row = other.store.session("chat-9")
    assert row.ended_at is not None and row.platform == "telegram" and other.store.count("chat-9") == 4


def test_the_finalize_hook_waits_for_no_server_known_to_be_away(tmp_path, pg_database_url, monkeypatch):
    # A chat only the server holds (stored through another outbox) while this machine's store is marked
    # unusable: the hook runs on the gateway's event loop, so it reads this machine's rows only and asks
    # no server (a hung one would hold the loop for the connect timeout); the end is left for the agent's
    # own clean-up, as it was before the outbox could take an end.
    from hermes_trove.outbox import ShippingStore
    from hermes_trove.store import MessageStore

    other = build_runtime(make_config(tmp_path / "other", database_url=pg_database_url))
    make_engine(other, session="chat-9", platform="telegram").ingest(chat(4))
    other.store.settle()
    proxy = PgProxy(pg_database_url).start()
    try:
        here = build_runtime(make_config(tmp_path / "here", database_url=proxy.url))
        make_engine(here, session="chat-1", platform="telegram").ingest(chat(4))
        here.store.settle()
        proxy.down()
        here.health.fail("server closed the connection unexpectedly")
        asked, read = [], MessageStore.session

        def server_read(self, session_id):  # the server's row (the outbox's own store is a MessageStore too)
            if isinstance(self, ShippingStore):
                asked.append(session_id)
            return read(self, session_id)

        monkeypatch.setattr(MessageStore, "session", server_read)
        hooks = make_hooks(here)
        hooks["on_session_finalize"](session_id="chat-9", platform="telegram", reason="new_session")
        hooks["on_session_finalize"](session_id="chat-1", platform="telegram", reason="new_session")
        assert asked == []  # neither end asked the server
        assert here.store.outbox.store.session("chat-1").ended_at is not None  # this machine's row took its end
        assert here.store.outbox.store.session("chat-9") is None
        proxy.up()  # the server returns: the end kept here ships, and no pass is left retrying into the next test
        here.store.shipper.state.last_error_at = 0.0  # the grace period is over
        here.store.settle()
        assert other.store.session("chat-1").ended_at is not None
    finally:
        proxy.down()


@contextlib.contextmanager
def another_process_writing(rt) -> Iterator[None]:
    """trove.db's write lock held by another connection (another Hermes process, mid-write) for the block."""
    holder = sqlite3.connect(rt.db.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        holder.execute("COMMIT")
        holder.close()


def finalize_chats(hooks, n: int, reason: str) -> list[threading.Thread]:
    """End chats chat-0 .. chat-(n-1) through the gateway's finalize hook; the trove-finalize threads alive after."""
    for i in range(n):
        hooks["on_session_finalize"](session_id=f"chat-{i}", platform="telegram", reason=reason)
    return [t for t in threading.enumerate() if t.name == "trove-finalize"]


def test_the_finalize_hook_waits_briefly_for_a_store_another_process_holds_and_the_end_still_lands(tmp_path):
    # the hook runs on the gateway's event loop: a write lock held elsewhere must not stall it for the busy timeout
    rt = build_runtime(make_config(tmp_path, database_url=""))
    hooks = make_hooks(rt)
    make_engine(rt, session="chat-1", platform="telegram").ingest(chat(4))
    with another_process_writing(rt):
        assert hooks["on_session_finalize"](session_id="chat-1", platform="telegram", reason="new_session") is None
        assert rt.store.session("chat-1").ended_at is None  # the hook returned while the lock was still held
        workers = [t for t in threading.enumerate() if t.name == "trove-finalize"]
    assert len(workers) == 1
    workers[0].join()
    assert rt.store.session("chat-1").ended_at is not None and rt.health.usable and rt.store.count("chat-1") == 4


def test_a_held_end_marks_the_session_ended_when_it_is_replayed_as_a_live_end_would(tmp_path):
    rt = build_runtime(make_config(tmp_path, database_url=""))
    eng = make_engine(rt, session="s-old")
    eng.ingest(chat(4))
    clock = down(rt)
    eng.on_session_end("s-old", chat(6))  # /new while the store is down: the old session's end is held
    eng.on_session_reset()
    eng.bind_session_state(None, "s-new")
    marks = []
    mark = rt.store.mark_ended
    rt.store.mark_ended = lambda sid, *rest: (marks.append(sid), mark(sid, *rest))  # counts the writes
    clock.now = rt.health.retry_at + 1
    assert rt.store_usable()
    assert rt.store.count("s-old") == 6 and rt.store.session("s-old").ended_at is not None
    assert marks == ["s-old"]  # replayed from its file and from memory: marked once
    assert rt.store.session("s-new") is None or rt.store.session("s-new").ended_at is None


def test_a_held_end_the_session_binds_again_after_marks_nothing_when_replayed(tmp_path):
    config = make_config(tmp_path, database_url="")
    rt = build_runtime(config)
    key = "agent:main:telegram:dm:7"
    eng = make_engine(rt, session="chat-1", platform="telegram")
    eng.on_session_start("chat-1", platform="telegram", conversation_id=key)
    eng.ingest(chat(4))
    eng.update_from_response({"prompt_tokens": 10})
    clock = down(rt)
    eng.on_session_end("chat-1", chat(6))  # an in-place compaction: the end, then the boundary binds it anew
    eng.on_session_start("chat-1", boundary_reason="compression", old_session_id="chat-1", platform="telegram",
                         conversation_id=key)
    helper = copy.deepcopy(eng)  # and the clean-up of the gateway's /compress agent ends nothing
    helper.on_session_end("chat-1", [])
    later = build_runtime(config)  # the next process writes what this one held on disk
    later.restore_spilled()
    assert later.store.count("chat-1") == 6 and later.store.session("chat-1").ended_at is None
    clock.now = rt.health.retry_at + 1
    assert rt.store_usable() and rt.store.session("chat-1").ended_at is None


def test_an_end_held_on_disk_marks_the_session_ended_in_the_next_process(tmp_path):
    config = make_config(tmp_path, database_url="")
    rt = build_runtime(config)
    hooks = make_hooks(rt)
    eng = make_engine(rt, session="s-1")
    eng.ingest(chat(4))
    make_engine(rt, session="chat-9", platform="telegram").ingest(chat(2))
    down(rt)
    eng.on_session_end("s-1", [])  # an end with nothing new to store still ends the session
    hooks["on_session_finalize"](session_id="chat-9", platform="telegram", reason="session_expired")
    assert rt.store.session("s-1").ended_at is None and rt.store.session("chat-9").ended_at is None
    later = build_runtime(config)  # Hermes exited with the store still down
    later.restore_spilled()
    assert later.store.session("s-1").ended_at is not None and later.store.session("chat-9").ended_at is not None
    assert later.store.count("s-1") == 4 and later.unstored.spill.pending() == 0


def test_an_unstored_sessions_end_while_the_store_is_down_is_neither_held_nor_marked_later(tmp_path):
    before = build_runtime(make_config(tmp_path, database_url=""))  # rows made before the patterns named them
    make_engine(before, session="batch-7").ingest(chat(2))
    make_engine(before, session="quiet-1", platform="telegram").ingest(chat(2))
    rt = build_runtime(make_config(tmp_path, database_url="", stateless_session_patterns=("batch-*", "quiet-*")))
    eng = make_engine(rt, session="batch-7")
    clock = down(rt)
    eng.on_session_end("batch-7", chat(6))
    make_hooks(rt)["on_session_finalize"](session_id="quiet-1", platform="telegram", reason="session_expired")
    assert rt.unstored.sessions == {} and rt.unstored.spill.pending() == 0
    clock.now = rt.health.retry_at + 1
    assert rt.store_usable()
    for sid in ("batch-7", "quiet-1"):
        assert rt.store.session(sid).ended_at is None and rt.store.count(sid) == 2


def test_the_finalize_hook_waits_briefly_for_a_write_another_thread_of_the_gateway_holds(tmp_path):
    # a background pass of this process mid-transaction holds the file's lock in-process first
    rt = build_runtime(make_config(tmp_path, database_url=""))
    hooks = make_hooks(rt)
    make_engine(rt, session="chat-1", platform="telegram").ingest(chat(4))
    holding, done, released = threading.Event(), threading.Event(), threading.Event()

    def writer() -> None:
        with rt.db.transaction():
            holding.set()
            done.wait(60)  # until the hook has returned (bounded, should it never return)
            released.set()

    t = threading.Thread(target=writer)
    t.start()
    holding.wait(60)
    hooks["on_session_finalize"](session_id="chat-1", platform="telegram", reason="new_session")
    returned_first = not released.is_set()
    done.set()
    t.join()
    assert returned_first  # the hook did not wait for the other thread's transaction to end
    for worker in [w for w in threading.enumerate() if w.name == "trove-finalize"]:
        worker.join()
    assert rt.store.session("chat-1").ended_at is not None


def stored_chats(tmp_path, n: int):
    """A runtime on a SQLite file holding ``n`` gateway chats of one stored turn each (``chat-0`` ...); its hooks."""
    rt = build_runtime(make_config(tmp_path, database_url=""))
    for i in range(n):
        make_engine(rt, session=f"chat-{i}", platform="telegram").ingest(chat(2))
    return rt, make_hooks(rt)


def test_ends_the_finalize_hook_finds_busy_share_one_thread_that_marks_them_all(tmp_path):
    # an idle expiry of several chats while another process holds the lock: one thread, not one per chat, so the
    # ends wait for the lock in turn on it (and an exit waits for one busy timeout at most, not one per chat)
    rt, hooks = stored_chats(tmp_path, 3)
    with another_process_writing(rt):
        workers = finalize_chats(hooks, 3, "session_expired")
        assert all(rt.store.session(f"chat-{n}").ended_at is None for n in range(3))
    assert len(workers) == 1
    workers[0].join()
    assert all(rt.store.session(f"chat-{n}").ended_at is not None for n in range(3)) and rt.health.usable


def test_a_late_end_of_a_session_resumed_while_it_waited_marks_nothing(tmp_path):
    # chat-1's end waits in the queue behind chat-0's while another process holds the lock; the chat is resumed
    # meanwhile (bound again): when the lock comes back, chat-0 is marked and the live chat-1 is not
    rt, hooks = stored_chats(tmp_path, 2)
    with another_process_writing(rt):
        workers = finalize_chats(hooks, 2, "new_session")
        rt.bind("chat-1", "active")  # /resume of chat-1 before its queued end ran
    assert len(workers) == 1
    workers[0].join()
    assert rt.store.session("chat-0").ended_at is not None and rt.store.session("chat-1").ended_at is None


def test_a_session_binding_past_the_bound_is_never_the_one_evicted(tmp_path, monkeypatch):
    # a long-running gateway full of unstored sessions that never ended: the new chat keeps its binding
    monkeypatch.setattr(runtime_module, "MAX_BOUND", 4)
    rt = build_runtime(make_config(tmp_path))
    hooks = make_hooks(rt)
    for i in range(4):
        rt.bind(f"job-{i}", "stateless")
    make_engine(rt, session="chat-new")
    assert rt.bound_sessions.get("chat-new") == "active" and len(rt.bound_sessions) == 4
    assert "job-0" not in rt.bound_sessions  # no other active entry: the oldest goes
    hooks["post_llm_call"](session_id="chat-new", platform="cli", conversation_history=chat(2))
    assert rt.store.count("chat-new") == 2  # its hooks store its turns


def test_a_late_end_found_after_the_store_turned_unusable_is_held_without_another_wait(tmp_path):
    # the finalize thread's first end waited out the busy timeout and marked the store unusable: the ends queued
    # behind it are held at once (each further wait would keep the gateway's exit another busy timeout)
    from hermes_trove.hooks import end_later

    rt = build_runtime(make_config(tmp_path, database_url=""))
    make_engine(rt, session="chat-1", platform="telegram").ingest(chat(2))
    rt.unbind("chat-1")  # as the finalize hook does before it queues the end
    clock = down(rt)
    end_later(rt, "chat-1", "telegram")
    assert rt.store.session("chat-1").ended_at is None and "chat-1" in rt.unstored.closed
    clock.now = rt.health.retry_at + 1
    assert rt.store_usable() and rt.store.session("chat-1").ended_at is not None
