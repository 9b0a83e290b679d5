"""``/trove rotate`` and ``rotate apply``: tail kept, frontier advanced, nothing deleted, rolling backup."""
from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest
from conftest import assistant, make_config, tool_call, tool_result, user
from test_command import shippers_finish, store_dump  # noqa: F401  (shippers_finish: autouse)

from hermes_trove import command
from hermes_trove.engine import TroveEngine
from hermes_trove.ops import rotate
from hermes_trove.ops.status import build_status
from hermes_trove.runtime import build_runtime

BACKENDS = ("sqlite", "postgresql")


def chat(n: int) -> list[dict]:
    return [user(f"user turn {i}") if i % 2 == 0 else assistant(f"assistant turn {i}") for i in range(n)]


@pytest.fixture
def small_tail(tmp_path):
    rt = build_runtime(make_config(tmp_path, fresh_tail_count=4))
    eng = TroveEngine(rt)
    eng.update_model("fake-model", 128000)
    eng.on_session_start("s1", platform="cli", conversation_id="conv-1")
    return rt, eng


def store_ids(rt, sid: str = "s1") -> list[int]:
    rt.store.settle()  # PostgreSQL: the engine's turns wait in the local outbox until they ship
    rows = rt.db.read().execute("SELECT store_id FROM messages WHERE session_id=? ORDER BY store_id", (sid,))
    return [r[0] for r in rows]


def test_preview_reports_the_plan_and_writes_nothing(small_tail):
    rt, eng = small_tail
    eng.ingest(chat(10))
    before = store_dump(rt)
    name, result = command.run(rt, ["rotate"])
    assert name == "rotate" and result["read_only"] is True
    ids = store_ids(rt)
    assert result["status"] == "ready" and result["tail_count"] == 4
    assert result["target_frontier"] == ids[-4] - 1 and result["pre_tail_messages"] == 6
    assert store_dump(rt) == before
    assert not (Path(rt.config.hermes_home) / "backups").exists()


def sqlite_only(backend: str) -> None:
    if backend == "postgresql":
        pytest.skip("about the rolling SQLite backup file; a server store's rotate is tested below")


def test_apply_keeps_the_tail_advances_the_frontier_and_deletes_nothing(small_tail, backend):
    rt, eng = small_tail
    eng.ingest(chat(10))
    ids = store_ids(rt)
    name, result = command.run(rt, ["ROTATE", "Apply"])
    assert name == "rotate apply" and result["status"] == "rotated"
    row = rt.store.session("s1")
    assert row.frontier_store_id == ids[-4] - 1 == result["frontier"]
    recorded = result["backup"] if backend == "sqlite" else "none: PostgreSQL store, the frontier was 0"
    assert row.last_rotate_at and row.last_rotate_backup == recorded
    assert row.conversation_id == "conv-1" and eng.session_id == "s1"
    assert store_ids(rt) == ids  # every raw row is still there
    assert [m.store_id for m in rt.store.backlog("s1", row.frontier_store_id)] == ids[-4:]
    if backend == "postgresql":  # nothing copied: the answer says why none is needed and how to undo
        assert result["backup"] is None and "deletes nothing" in result["backup_note"]
        assert result["undo"] == ("UPDATE sessions SET frontier_store_id = 0, rotated_frontier = NULL"
                                  " WHERE session_id = 's1'")
        assert not (Path(rt.config.hermes_home) / "backups").exists()
        return
    backup = Path(result["backup"])
    assert backup.name == "trove-rotate-latest.sqlite3" and backup.exists()


def test_second_apply_is_a_noop_that_leaves_the_rolling_backup_untouched(small_tail, backend):
    sqlite_only(backend)
    rt, eng = small_tail
    eng.ingest(chat(10))
    first = command.run(rt, ["rotate", "apply"])[1]
    backup = Path(first["backup"])
    stat, digest = backup.stat(), hashlib.sha256(backup.read_bytes()).hexdigest()
    time.sleep(0.05)
    second = command.run(rt, ["rotate", "apply"])[1]
    assert second["status"] == "noop" and second["applied"] is False
    assert backup.stat().st_mtime_ns == stat.st_mtime_ns
    assert hashlib.sha256(backup.read_bytes()).hexdigest() == digest
    assert rt.store.session("s1").last_rotate_at == first["last_rotate_at"]


def test_a_later_rotate_overwrites_the_single_rolling_slot(small_tail, backend):
    sqlite_only(backend)
    rt, eng = small_tail
    eng.ingest(chat(10))
    first = command.run(rt, ["rotate", "apply"])[1]
    eng.ingest(chat(16))  # the same transcript, grown by six messages
    second = command.run(rt, ["rotate", "apply"])[1]
    assert second["status"] == "rotated" and second["backup"] == first["backup"]
    slot = Path(first["backup"]).parent
    assert sorted(p.name for p in slot.iterdir()) == ["trove-rotate-latest.sqlite3"]


def test_the_tail_never_starts_inside_a_tool_call_group(small_tail):
    rt, eng = small_tail
    calls = [tool_call(f"c{i}", "terminal") for i in range(4)]
    msgs = chat(6) + [assistant("", calls)] + [tool_result(f"c{i}", f"output {i}") for i in range(4)] \
        + [assistant("done")]
    eng.ingest(msgs)
    ids = store_ids(rt)
    plan = rotate.preview(rt, "s1")
    # The four newest rows would start with a tool result; the tail widens to the assistant call.
    assert plan.tail_count == 6 and plan.tail_first_store_id == ids[6]
    assert plan.target_frontier == ids[6] - 1


def test_apply_refuses_unbound_ignored_and_stateless_sessions(tmp_path):
    rt = build_runtime(make_config(tmp_path, ignore_session_patterns=("cron_*",),
                                   stateless_session_patterns=("probe_*",)))
    assert command.run(rt, ["rotate", "apply"])[1]["status"] == "refused"
    for sid, word in (("cron_1", "ignore"), ("probe_1", "stateless")):
        eng = TroveEngine(rt)
        eng.on_session_start(sid, platform="cli")
        result = command.run(rt, ["rotate", "apply"])[1]
        assert result["status"] == "refused" and sid in result["reason"] and word in result["reason"]
    assert not (Path(rt.config.hermes_home) / "backups").exists()
    cli = command.run(rt, ["rotate", "apply"], session_id="cron_9")[1]
    assert cli["status"] == "refused" and "ignore pattern" in cli["reason"]


def test_a_session_shorter_than_the_tail_is_a_noop(small_tail):
    rt, eng = small_tail
    eng.ingest(chat(3))
    result = command.run(rt, ["rotate", "apply"])[1]
    assert result["status"] == "noop" and "inside the live tail" in result["reason"]


def test_status_shows_when_the_last_rotate_ran_and_where_its_backup_is(small_tail, backend):
    rt, eng = small_tail
    eng.ingest(chat(10))
    result = command.run(rt, ["rotate", "apply"])[1]
    life = build_status(eng.runtime, eng.snapshot())["lifecycle"]
    assert life["last_rotate_at"] == result["last_rotate_at"]
    backup = result["backup"] or f"none: PostgreSQL store, the frontier was {result['current_frontier']}"
    assert life["last_rotate_backup"] == backup
    assert life["last_rotate_backup_bytes"] == (os.path.getsize(backup) if backend == "sqlite" else None)
    text = command.make_handler(rt)("status")
    assert "last_rotate_backup: " + backup in text


def test_a_server_rotate_is_a_second_noop_and_its_undo_restores_the_frontier(small_tail, backend):
    if backend == "sqlite":
        pytest.skip("about a PostgreSQL store's rotate (no file backup; undo statement)")
    rt, eng = small_tail
    eng.ingest(chat(10))
    first = command.run(rt, ["rotate", "apply"])[1]
    assert first["status"] == "rotated" and command.run(rt, ["rotate", "apply"])[1]["status"] == "noop"
    with rt.db.transaction() as c:
        c.execute(first["undo"])
    assert rt.store.session("s1").frontier_store_id == first["current_frontier"]
    assert rt.store.session("s1").rotated_frontier is None  # a frontier damaged later does not redo it
    assert command.run(rt, ["rotate"])[1]["status"] == "ready"


def damage_frontier(rt, backend: str) -> None:
    """The session row's frontier made no count: text in a file, a negative number on a server."""
    if backend == "sqlite":
        import sqlite3

        conn = sqlite3.connect(rt.config.database_path)
        with conn:
            conn.execute("UPDATE sessions SET frontier_store_id = 'x' WHERE session_id = 's1'")
        conn.close()
    else:
        with rt.db.transaction() as c:
            c.execute("UPDATE sessions SET frontier_store_id = -7 WHERE session_id = 's1'")


def test_a_rotate_past_the_last_summary_outlives_a_damaged_frontier(small_tail, backend):
    rt, eng = small_tail
    history = chat(30)
    eng.compress(history[:16], current_tokens=10**6, force=True)  # a summary over the oldest messages
    eng.ingest(history)
    covered = rt.dag.highest_covered_store_id("s1")
    assert covered > 0
    result = command.run(rt, ["rotate", "apply"])[1]
    assert result["status"] == "rotated" and result["frontier"] > covered  # past what any summary covers
    damage_frontier(rt, backend)
    assert rt.store.frontier_store_id("s1") == result["frontier"]  # the rotate stands
    assert rt.dag.highest_covered_store_id("s1") == covered  # status still reports the summaries' own reach
    assert command.run(rt, ["rotate"])[1]["status"] == "noop"
    assert [m.store_id for m in rt.store.backlog("s1", rt.store.frontier_store_id("s1"))] == store_ids(rt)[-4:]


@pytest.mark.parametrize("rows,frontier,tail,total,expected", [
    ([], 0, 4, 0, ("noop", 0)),
    ([(10, "user"), (9, "assistant")], 0, 4, 2, ("noop", 0)),
    ([(10, "user"), (9, "assistant"), (8, "user"), (7, "assistant"), (6, "user")], 0, 4, 9, ("ready", 6)),
    ([(10, "user"), (9, "assistant"), (8, "user"), (7, "assistant"), (6, "user")], 6, 4, 9, ("noop", 6)),
    ([(10, "assistant"), (9, "tool"), (8, "tool"), (7, "assistant"), (6, "user")], 0, 2, 9, ("ready", 6)),
])
def test_plan_rotate_is_a_pure_table(rows, frontier, tail, total, expected):
    plan = rotate.plan_rotate("s", rows, frontier, tail, total)
    assert (plan.status, plan.target_frontier) == expected
