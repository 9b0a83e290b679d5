"""An unusable store never lets the prompt grow: the engine delegates compaction to the host's
built-in compressor (the real class, its model call answered locally), says so in status and
the doctor, retries after a bounded backoff, resumes, and writes what it held meanwhile.

Every store here is a real SQLite path made unusable for real: a path under a regular file, a
read-only directory, or a file whose connection may not grow (``PRAGMA max_page_count``, which
makes writes fail with SQLITE_FULL). Time is a fake clock; nothing waits.
"""
from __future__ import annotations

import json
import os
import sqlite3
from types import SimpleNamespace

import pytest
from conftest import assistant, make_config, no_model, user

from hermes_trove import command, tokens
from hermes_trove.engine import TroveEngine
from hermes_trove.ops import doctor, status
from hermes_trove.runtime import RETRY_FIRST_S, RETRY_MAX_S, StoreHealth, build_runtime

WINDOW = 64000
TURN_CHARS = 12000  # about 3,000 tokens a turn


@pytest.fixture
def host_compressor(monkeypatch):
    """The host's real ContextCompressor with its summary model answered locally."""
    compressor = pytest.importorskip("agent.context_compressor")
    aux = pytest.importorskip("agent.auxiliary_client")
    calls: list[dict] = []

    def fake_model(*args, **kwargs):
        calls.append(kwargs)
        return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content="NATIVE SUMMARY"))],
                               usage=None)

    monkeypatch.setattr(aux, "call_llm", fake_model)
    monkeypatch.setattr(compressor, "call_llm", fake_model)
    return calls


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def pass_backoff(self, health: StoreHealth) -> None:
        self.now = health.retry_at + 1


def boot(tmp_path, db_path, session="20261201_101010_abcdef", **overrides):
    rt = build_runtime(make_config(tmp_path, database_path=str(db_path), **overrides))
    clock = Clock()
    rt.health.clock = clock
    eng = TroveEngine(rt, complete=no_model)
    eng.update_model("fake-model", WINDOW, base_url="http://127.0.0.1:9/v1", api_key="k", provider="custom")
    eng.bind_session_state(session_db=None, session_id=session)
    eng.get_tool_schemas()  # the host's order: bind, the tools, then the session start
    eng.on_session_start(session, platform="cli", context_length=WINDOW, conversation_id=None)
    return rt, eng, clock


def turn_text(i: int) -> str:
    return (f"turn {i:02d} marker-{i} " + f"word{i} " * (TURN_CHARS // 7))[:TURN_CHARS]


class Host:
    """The host's calls around each turn (HOST.md §4): preflight, the request, the usage update,
    and what it writes on the engine after a compaction."""

    def __init__(self, engine: TroveEngine) -> None:
        self.engine = engine
        self.messages: list[dict] = []
        self.sent: list[int] = []
        self.compactions = 0

    def turn(self, i: int) -> None:
        eng = self.engine
        self.messages.append(user(turn_text(i)))
        rough = tokens.count_messages(self.messages)
        if not eng.should_defer_preflight_to_real_usage(rough) and eng.should_compress(rough):
            out = eng.compress(self.messages, current_tokens=rough)
            if out != self.messages:
                self.messages, self.compactions = out, self.compactions + 1
                eng.last_prompt_tokens, eng.last_completion_tokens = -1, 0
                eng.awaiting_real_usage_after_compression = True
                eng._verify_compaction_cleared_threshold = True
        sent = tokens.count_messages(self.messages)
        self.sent.append(sent)
        eng.update_from_response({"prompt_tokens": sent, "completion_tokens": 5, "total_tokens": sent + 5})
        self.messages.append(assistant(f"ack {i}"))


def stored_turns(rt, session_id: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in rt.store.page(session_id, limit=10_000):
        if row.role == "user":
            marker = row.content.split(" ")[2]
            counts[marker] = counts.get(marker, 0) + 1
    return counts


def blocked_path(tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("a regular file where a directory should be", encoding="utf-8")
    return blocker, blocker / "trove.db"


# -- a path under a regular file ---------------------------------------------------------------

def test_a_path_under_a_file_delegates_and_keeps_every_request_under_the_window(tmp_path, host_compressor):
    blocker, db_path = blocked_path(tmp_path)
    rt, eng, _ = boot(tmp_path, db_path)
    host = Host(eng)
    for i in range(30):
        host.turn(i)
    assert host.compactions >= 1 and host_compressor, "the built-in compressor never ran"
    assert max(host.sent) < WINDOW, host.sent
    assert eng.compression_count == host.compactions
    snap = eng.snapshot()
    assert snap["store_state"].startswith(f"degraded: store unusable: its parent {blocker} is not a directory;"
                                          " compaction delegated to the built-in compressor; retry in ")
    assert snap["compaction_route"] == "built-in compressor (store unusable)"
    assert snap["last_compression_status"] == "delegated"
    assert not db_path.exists() and blocker.is_file()


def test_status_doctor_and_the_cli_say_so_and_exit_1(tmp_path, host_compressor, capsys):
    blocker, db_path = blocked_path(tmp_path)
    rt, eng, _ = boot(tmp_path, db_path)
    report = status.build_status(rt, eng.snapshot())
    assert report["overall"] == "unhealthy" and report["store_health"]["usable"] is False
    assert report["store_health"]["state"].startswith("degraded: store unusable: its parent")
    assert "retry in" in report["engine"]["store_state"]
    assert "a file sits where a directory" in report["store_health"]["fix"]
    found = doctor.run_doctor(rt, eng.snapshot())
    checks = {c["check"]: c for c in found["checks"]}
    assert found["overall"] == "unhealthy" and checks["store_usable"]["status"] == "fail"
    assert "compaction delegated to the built-in compressor" in checks["store_usable"]["detail"]
    assert any("TROVE_DATABASE_PATH" in g for g in found["guidance"])
    # the in-host `hermes trove status` (the plugin's runtime) and a separate CLI process alike
    handler = command.cli_handler(rt)
    parser = command.argparse.ArgumentParser()
    command.setup_parser(parser)
    with pytest.raises(SystemExit) as done:
        handler(parser.parse_args(["status"]))
    assert done.value.code == 1
    text = capsys.readouterr().out
    assert text.startswith("trove status: UNHEALTHY: degraded: store unusable: its parent") and str(blocker) in text
    code = command.main(["status", "--db", str(db_path), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["overall"] == "unhealthy"
    assert data["store_health"]["reason"] == f"its parent {blocker} is not a directory"
    assert command.main(["doctor", "--db", str(db_path)]) == 1
    assert not db_path.exists()


def test_the_store_is_retried_after_the_backoff_and_trove_resumes_losing_nothing(tmp_path, host_compressor):
    blocker, db_path = blocked_path(tmp_path)
    rt, eng, clock = boot(tmp_path, db_path, leaf_chunk_tokens=4000)
    host = Host(eng)
    for i in range(24):
        host.turn(i)
    assert host.compactions >= 1 and not rt.health.usable
    dropped_by_host = [i for i in range(24) if not any(f"marker-{i} " in str(m.get("content"))
                                                       for m in host.messages)]
    assert dropped_by_host, "the built-in compressor should have dropped some turns from the transcript"
    assert rt.unstored.count >= 24
    blocker.unlink()
    blocker.mkdir()  # the operator fixed it
    assert eng.should_compress(1) is False  # still inside the backoff: no retry yet
    assert not db_path.exists()
    clock.pass_backoff(rt.health)
    for i in range(24, 40):
        host.turn(i)
    assert rt.health.usable and eng.snapshot()["store_state"] == "ok"
    assert eng.snapshot()["compaction_route"] == "trove"
    assert eng.snapshot()["last_compression_status"] == "compacted"
    eng.on_session_end(eng.session_id, host.messages)
    counts = stored_turns(rt, eng.session_id)
    assert counts == {f"marker-{i}": 1 for i in range(40)}, counts
    assert max(host.sent) < WINDOW


def test_the_backoff_doubles_and_is_bounded():
    clock = Clock()
    health = StoreHealth(clock=clock)
    waits = []
    for _ in range(6):
        health.fail("database or disk is full")
        waits.append(health.retry_at - clock.now)
    assert waits[0] == RETRY_FIRST_S and waits[1] == 2 * RETRY_FIRST_S
    assert max(waits) == RETRY_MAX_S and waits[-1] == RETRY_MAX_S
    assert health.state() == ("degraded: store unusable: database or disk is full; compaction delegated to the"
                              f" built-in compressor; retry in {int(RETRY_MAX_S)}s")
    health.recover()
    assert health.usable and health.state() == "ok"


# -- a full disk (SQLITE_FULL from a connection that may not grow) ------------------------------

def test_a_full_disk_delegates_and_the_held_messages_are_written_once_there_is_room(tmp_path, host_compressor):
    db_path = tmp_path / "trove.db"
    rt, eng, clock = boot(tmp_path, db_path)
    conn = rt.db.connect()
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count={pages}")  # every growth now fails: SQLITE_FULL
    host = Host(eng)
    for i in range(30):
        host.turn(i)
    assert host.compactions >= 1 and max(host.sent) < WINDOW
    assert "full" in rt.health.reason and not rt.health.usable
    assert status.build_status(rt, eng.snapshot())["overall"] == "unhealthy"
    # a tool still answers from what is stored, and says the newest turns are not in it
    reply = json.loads(eng.handle_tool_call("trove_grep", {"query": "marker-29"}, messages=host.messages))
    assert "error" not in reply
    assert reply["store_state"].startswith("degraded: store unusable: OperationalError: database or disk is full")
    conn.execute("PRAGMA max_page_count=1073741823")  # space freed
    clock.pass_backoff(rt.health)
    assert eng.should_compress(10) is False and rt.health.usable  # the retry ran and wrote the held turns
    assert rt.unstored.count == 0
    eng.on_session_end(eng.session_id, host.messages)
    assert stored_turns(rt, eng.session_id) == {f"marker-{i}": 1 for i in range(30)}


def test_a_retry_that_fails_again_keeps_delegating_and_waits_longer(tmp_path, host_compressor):
    db_path = tmp_path / "trove.db"
    rt, eng, clock = boot(tmp_path, db_path)
    conn = rt.db.connect()
    conn.execute(f"PRAGMA max_page_count={conn.execute('PRAGMA page_count').fetchone()[0]}")
    host = Host(eng)
    for i in range(20):
        host.turn(i)
    first_wait = rt.health.retry_at - clock.now
    clock.pass_backoff(rt.health)
    host.turn(20)
    assert not rt.health.usable and rt.health.failures >= 2
    assert rt.health.retry_at - clock.now > first_wait - 1
    assert max(host.sent) < WINDOW


# -- a read-only directory -----------------------------------------------------------------------

def test_a_read_only_directory_is_unusable_and_bounded(tmp_path, host_compressor):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("running as a user who may write anywhere (root): a 0555 directory is writable")
        rt, eng, _ = boot(tmp_path, folder / "trove.db")
        host = Host(eng)
        for i in range(30):
            host.turn(i)
        assert host.compactions >= 1 and max(host.sent) < WINDOW
        assert not rt.health.usable
        assert "writable" in status.build_status(rt)["store_health"]["fix"]
    finally:
        folder.chmod(0o755)


# -- loading with a broken file, and never raising -----------------------------------------------

class Ctx:
    def __init__(self) -> None:
        self.engine = None
        self.cli: dict = {}

    def register_context_engine(self, engine) -> None:
        self.engine = engine

    def register_cli_command(self, name, help, setup_fn, handler_fn=None) -> None:
        self.cli[name] = (setup_fn, handler_fn)


def test_a_broken_database_file_at_load_starts_the_engine_degraded(tmp_path, monkeypatch, host_compressor):
    import hermes_trove

    db_path = tmp_path / "trove.db"
    db_path.write_bytes(b"this is not a SQLite database, just bytes " * 100)
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    monkeypatch.setenv("TROVE_DATABASE_PATH", str(db_path))
    ctx = Ctx()
    hermes_trove.register(ctx)
    assert hermes_trove.LOAD_STATE["registered"] is True and ctx.engine is not None
    eng = ctx.engine
    assert not eng.runtime.health.usable and "not a SQLite database" in eng.runtime.health.reason
    eng.update_model("fake-model", WINDOW)
    eng.on_session_start("s-broken", platform="cli")
    host = Host(eng)
    for i in range(30):
        host.turn(i)
    assert host.compactions >= 1 and max(host.sent) < WINDOW
    assert db_path.read_bytes().startswith(b"this is not a SQLite database")  # nothing overwrote it


def test_no_entry_point_raises_when_storage_breaks_underneath(tmp_path, monkeypatch):
    rt = build_runtime(make_config(tmp_path))
    eng = TroveEngine(rt, complete=no_model)

    def broken(*args, **kwargs):
        raise sqlite3.OperationalError("disk I/O error")

    for name in ("ensure_session", "ingest", "session", "mark_ended", "count", "frontier_store_id"):
        monkeypatch.setattr(rt.store, name, broken)
    monkeypatch.setattr(rt.dag, "carry_over", broken)
    eng.update_model("m", WINDOW)
    eng.bind_session_state(None, "s1")
    eng.on_session_start("s1", platform="cli", boundary_reason="compression", old_session_id="s0")
    assert not rt.health.usable and "disk I/O error" in rt.health.reason
    msgs = [user("x" * 4000), assistant("y"), user("z" * 4000)]
    assert eng.should_compress(10 ** 6) in (True, False)
    assert isinstance(eng.compress(msgs, current_tokens=10 ** 6), list)
    eng.update_from_response({"prompt_tokens": 10})
    eng.should_defer_preflight_to_real_usage(10)
    eng.has_content_to_compress(msgs)
    json.loads(eng.handle_tool_call("trove_status", {}, messages=msgs))
    eng.on_session_end("s1", msgs)
    eng.on_session_reset()
    eng.bind_session_state(None, "s2")
    assert isinstance(eng.get_status(), dict) and eng.get_tool_schemas()


def test_the_host_flags_are_mirrored_both_ways_while_delegating(tmp_path, host_compressor):
    _, db_path = blocked_path(tmp_path)
    rt, eng, _ = boot(tmp_path, db_path)
    native = eng._native_compressor()
    eng.awaiting_real_usage_after_compression = True  # the host's write after a compaction
    assert eng.should_defer_preflight_to_real_usage(native.threshold_tokens + 1) is True
    assert native.awaiting_real_usage_after_compression is True
    eng.update_from_response({"prompt_tokens": 100, "completion_tokens": 1, "total_tokens": 101})
    assert eng.awaiting_real_usage_after_compression is False  # consumed by the compressor, mirrored back
    msgs = [user(turn_text(i)) if i % 2 == 0 else assistant(f"a{i}") for i in range(40)]
    out = eng.compress(msgs, current_tokens=tokens.count_messages(msgs))
    assert out != msgs and eng._last_compression_made_progress is native._last_compression_made_progress is True
    assert eng._last_compress_aborted is False and eng._last_summary_error == native._last_summary_error


def test_the_turn_hooks_hold_the_turn_quietly_while_the_store_is_unusable(tmp_path, host_compressor, caplog):
    from hermes_trove.hooks import make_hooks

    blocker, db_path = blocked_path(tmp_path)
    rt, eng, clock = boot(tmp_path, db_path)
    hooks = make_hooks(rt)
    history: list[dict] = []
    with caplog.at_level("INFO", logger="hermes_trove"):
        for i in range(5):
            history += [user(f"hook turn marker-{i} "), assistant(f"ok {i}")]
            hooks["post_llm_call"](session_id=eng.session_id, conversation_history=list(history), platform="cli")
            injected = hooks["pre_llm_call"](session_id=eng.session_id, conversation_history=list(history),
                                             user_message="next", platform="cli")
            assert injected and "trove_recent" in injected["context"]  # the policy still rides along
    assert not any(r.exc_info for r in caplog.records), "no traceback per turn while degraded"
    assert sum(r.levelname == "ERROR" for r in caplog.records) <= 1
    assert rt.unstored.count >= 10
    blocker.unlink()
    blocker.mkdir()
    clock.pass_backoff(rt.health)
    hooks["post_llm_call"](session_id=eng.session_id, conversation_history=list(history), platform="cli")
    assert rt.health.usable
    assert stored_turns(rt, eng.session_id) == {f"marker-{i}": 1 for i in range(5)}


def test_a_database_path_that_is_a_directory_answers_a_degraded_status(tmp_path, host_compressor):
    rt, eng, _ = boot(tmp_path, "/")
    reply = json.loads(eng.handle_tool_call("trove_status", {}))
    assert "error" not in reply and reply["store_health"]["usable"] is False, reply
    assert reply["overall"] == "unhealthy" and reply["store_health"]["reason"] == "it is a directory"
