"""Held transcripts on disk: what a Hermes held while its store took no writes reaches the store at
the next start or recovery, in any process, even when that Hermes exited first; it is written once,
and a line torn by a kill is skipped.

Every store is a real SQLite file made unusable for real (its path under a regular file); the
host is the engine's and the hooks' own calls in the order Hermes makes them.
"""
from __future__ import annotations

import errno
import gc
import json
import multiprocessing
import os
import weakref
from pathlib import Path

import pytest
from conftest import assistant, make_config, no_model, user

import hermes_trove
from hermes_trove import runtime
from hermes_trove import spill as spill_module
from hermes_trove.engine import TroveEngine
from hermes_trove.hooks import make_hooks
from hermes_trove.ingest import message_identity
from hermes_trove.ops import status
from hermes_trove.runtime import build_runtime
from hermes_trove.spill import SPILL_DIR, Spill, read_held
from hermes_trove.store import SessionKey

SESSION = "20261203_101010_abcdef"


def read_runs(data: bytes) -> list:
    """Each run's transcript in a spill file (``read_held`` without the end marks)."""
    return [run for run, _, _ in read_held(data)]


def blocked(tmp_path: Path) -> tuple[Path, Path]:
    blocker = tmp_path / "afile"
    blocker.write_text("a regular file where the database directory should be", encoding="utf-8")
    return blocker, blocker / "trove.db"


def unblock(blocker: Path) -> None:
    blocker.unlink()
    blocker.mkdir()


def exchange(i: int) -> list[dict]:
    return [user(f"turn marker-{i} the parcel number is {4400 + i}"), assistant(f"noted {i}")]


def hermes_run(tmp_path: Path, db_path: Path, turns: range, history: list[dict] | None = None, **overrides):
    """One Hermes process: bind the session, store each turn through the hook, end the session.
    Returns its runtime and the transcript it showed."""
    rt = build_runtime(make_config(tmp_path, database_path=str(db_path), **overrides))
    eng = TroveEngine(rt, complete=no_model)
    eng.update_model("fake-model", 128000)
    eng.bind_session_state(session_db=None, session_id=SESSION)
    eng.on_session_start(SESSION, platform="cli", context_length=128000, conversation_id=None)
    hooks = make_hooks(rt)
    history = list(history or [])
    for i in turns:
        history += exchange(i)
        hooks["post_llm_call"](session_id=SESSION, conversation_history=list(history), platform="cli")
    eng.on_session_end(SESSION, history)
    return rt, history


def stored(db_path: Path, tmp_path: Path) -> dict[str, int]:
    rt = build_runtime(make_config(tmp_path, database_path=str(db_path)))
    counts: dict[str, int] = {}
    for row in rt.store.page(SESSION, limit=10_000):
        counts[row.content] = counts.get(row.content, 0) + 1
    return counts


def expected(turns: range) -> dict[str, int]:
    return {m["content"]: 1 for i in turns for m in exchange(i)}


class Ctx:
    def __init__(self) -> None:
        self.engine = None

    def register_context_engine(self, engine) -> None:
        self.engine = engine


def start_hermes(monkeypatch, tmp_path: Path, db_path: Path):
    """A new Hermes process loading the plugin (``register``) on ``db_path``."""
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    monkeypatch.setenv("TROVE_DATABASE_PATH", str(db_path))
    ctx = Ctx()
    hermes_trove.register(ctx)
    assert hermes_trove.LOAD_STATE["registered"] is True
    return ctx.engine.runtime


def test_turns_held_by_a_hermes_that_exited_are_stored_at_the_next_start(tmp_path, monkeypatch):
    blocker, db_path = blocked(tmp_path)
    rt, _ = hermes_run(tmp_path, db_path, range(6))
    assert not rt.health.usable and rt.unstored.count == 12
    assert status.health_section(rt)["held_sessions_on_disk"] == 1
    files = list((tmp_path / SPILL_DIR).glob("*.jsonl"))
    assert len(files) == 1 and oct(files[0].stat().st_mode & 0o777) == "0o600"
    del rt  # Hermes exits before the store is usable again
    unblock(blocker)
    start_hermes(monkeypatch, tmp_path, db_path)
    assert stored(db_path, tmp_path) == expected(range(6))
    assert not list((tmp_path / SPILL_DIR).glob("*"))  # removed once committed


@pytest.mark.parametrize(("db_arg", "in_dotenv"), [([], False), (["--db", "other.db"], False), ([], True)],
                         ids=["home store", "--db another file", "path set in the home's .env"])
def test_python_dash_m_writes_held_transcripts_into_the_homes_store_as_hermes_trove_does(tmp_path, monkeypatch,
                                                                                         db_arg, in_dotenv):
    from hermes_trove.command import main

    blocker, db_path = blocked(tmp_path)
    hermes_run(tmp_path, db_path, range(4))
    unblock(blocker)
    for path in (db_path, tmp_path / "other.db", tmp_path / "trove.db"):  # the last: a stale default store
        build_runtime(make_config(tmp_path, database_path=str(path))).store.ensure_session(SessionKey("other"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    if in_dotenv:  # Hermes reads its home's .env at start, so `hermes trove` uses this path
        monkeypatch.delenv("TROVE_DATABASE_PATH", raising=False)
        (tmp_path / ".env").write_text(f"TROVE_DATABASE_PATH={db_path}\n", encoding="utf-8")
    else:
        monkeypatch.setenv("TROVE_DATABASE_PATH", str(db_path))
    assert main(["status", *db_arg, "--json"]) == 0
    assert stored(db_path, tmp_path) == expected(range(4))
    assert not list((tmp_path / SPILL_DIR).glob("*"))
    assert stored(tmp_path / "other.db", tmp_path) == {} and stored(tmp_path / "trove.db", tmp_path) == {}


@pytest.mark.parametrize("db_arg", [[], ["--db", "other.db"]], ids=["home store", "--db another file"])
def test_python_dash_m_writes_held_transcripts_into_a_home_store_not_created_yet(tmp_path, monkeypatch, db_arg):
    from hermes_trove.command import main

    blocker, db_path = blocked(tmp_path)
    hermes_run(tmp_path, db_path, range(4))
    unblock(blocker)
    assert not db_path.exists()  # the store never took a write: the transcripts are only held
    if db_arg:
        build_runtime(make_config(tmp_path, database_path=str(tmp_path / "other.db"))).store.ensure_session(
            SessionKey("other"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    monkeypatch.setenv("TROVE_DATABASE_PATH", str(db_path))
    assert main(["status", *db_arg, "--json"]) == 0
    assert stored(db_path, tmp_path) == expected(range(4))
    assert not list((tmp_path / SPILL_DIR).glob("*"))
    if db_arg:
        assert stored(tmp_path / "other.db", tmp_path) == {}


def test_python_dash_m_with_nothing_held_still_creates_no_store(tmp_path, monkeypatch):
    from hermes_trove.command import main

    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    monkeypatch.delenv("TROVE_DATABASE_PATH", raising=False)
    assert main(["status", "--json"]) == 2
    assert not (tmp_path / "trove.db").exists()


def test_a_hermes_that_starts_while_the_store_is_still_unusable_writes_them_at_its_recovery(tmp_path, monkeypatch):
    blocker, db_path = blocked(tmp_path)
    hermes_run(tmp_path, db_path, range(3))
    rt = start_hermes(monkeypatch, tmp_path, db_path)  # the spill stays: nothing could take it
    assert len(list((tmp_path / SPILL_DIR).glob("*.jsonl"))) == 1
    unblock(blocker)
    rt.health.retry_at = 0.0  # the backoff has passed
    assert rt.store_usable() is True
    assert stored(db_path, tmp_path) == expected(range(3))
    assert not list((tmp_path / SPILL_DIR).glob("*.jsonl"))


def test_a_transcript_spilled_again_after_a_resume_adds_nothing_twice(tmp_path, monkeypatch):
    blocker, db_path = blocked(tmp_path)
    _, first = hermes_run(tmp_path, db_path, range(4))
    # a resumed session in a second Hermes, the store still unusable: the host shows the whole
    # transcript again, and the same file now holds two runs that overlap
    hermes_run(tmp_path, db_path, range(4, 7), history=first)
    path = next((tmp_path / SPILL_DIR).glob("*.jsonl"))
    copy = path.read_bytes()
    assert [len(messages) for _, messages, _ in read_runs(copy)] == [8, 14]
    unblock(blocker)
    start_hermes(monkeypatch, tmp_path, db_path)
    assert stored(db_path, tmp_path) == expected(range(7))
    path.write_bytes(copy)  # a second process restoring the same file: nothing new
    start_hermes(monkeypatch, tmp_path, db_path)
    assert stored(db_path, tmp_path) == expected(range(7)) and not path.exists()
    rt, _ = hermes_run(tmp_path, db_path, range(7, 8), history=first + [m for i in range(4, 7) for m in exchange(i)])
    assert rt.health.usable and stored(db_path, tmp_path) == expected(range(8))  # the live transcript aligns


def test_a_line_torn_by_a_kill_is_skipped_and_the_next_append_starts_a_whole_new_run(tmp_path):
    folder = tmp_path / SPILL_DIR
    key = SessionKey(SESSION, platform="cli")
    held = exchange(0)
    Spill(folder).append(key, held, held)
    path = next(folder.glob("*.jsonl"))
    whole = path.stat().st_size
    killed = Spill(folder)
    killed.append(key, held + exchange(1), held + exchange(1))
    with open(path, "r+b") as f:
        f.truncate(whole + 40)  # the second writer died mid-line
    assert read_runs(path.read_bytes()) == [(key, held, [message_identity(m) for m in held])]
    later = Spill(folder)  # the next process: a new run with all it holds, on a line of its own
    later.append(key, exchange(2), held + exchange(2))
    assert [m for _, m, _ in read_runs(path.read_bytes())] == [held, held + exchange(2)]


def _append_many(folder: str, writer: int, count: int) -> None:
    spill = Spill(Path(folder))
    key = SessionKey(SESSION, platform="cli")
    held: list[dict] = []
    for i in range(count):
        new = [user(f"writer {writer} message {i} " + "x" * 3000)]
        held += new
        spill.append(key, new, held)
    os._exit(0)


def test_two_processes_appending_to_one_session_file_never_interleave_lines(tmp_path):
    folder = tmp_path / SPILL_DIR
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_append_many, args=(str(folder), w, 150)) for w in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    data = next(folder.glob("*.jsonl")).read_bytes()
    assert all(json.loads(line) for line in data.splitlines())  # every line whole
    runs = read_runs(data)
    assert sorted(len(m) for _, m, _ in runs) == [150, 150]
    for _, messages, _ in runs:
        writer = messages[0]["content"].split()[1]
        assert [m["content"].split()[3] for m in messages] == [str(i) for i in range(150)]
        assert {m["content"].split()[1] for m in messages} == {writer}


def test_a_file_another_process_appended_to_during_the_restore_is_kept(tmp_path):
    rt = build_runtime(make_config(tmp_path))
    folder = tmp_path / SPILL_DIR
    key = SessionKey(SESSION, platform="cli")
    first = exchange(0)
    Spill(folder).append(key, first, first)
    other = Spill(folder)  # another Hermes still holding the session
    ingest = rt.store.ingest

    def ingest_while_the_other_appends(*args, **kwargs):
        result = ingest(*args, **kwargs)
        other.append(key, exchange(1), first + exchange(1))
        return result

    rt.store.ingest = ingest_while_the_other_appends
    assert rt.unstored.spill.restore(rt.store) == 2
    assert len(list(folder.glob("*.jsonl"))) == 1  # grew meanwhile: not removed
    rt.store.ingest = ingest
    assert rt.unstored.spill.restore(rt.store) == 2 and not list(folder.glob("*.jsonl"))
    assert [r.content for r in rt.store.page(SESSION, limit=10)] == [m["content"] for m in first + exchange(1)]


def test_each_held_line_is_synced_to_disk_and_a_new_files_folder_too(tmp_path, monkeypatch):
    synced: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(spill_module.os, "fsync", fsync)
    folder, key = tmp_path / SPILL_DIR, SessionKey(SESSION, platform="cli")
    spill = Spill(folder)
    spill.append(key, exchange(0), exchange(0))
    path = str(spill.path(SESSION))
    assert synced == [path, str(folder), str(tmp_path)]
    synced.clear()
    spill.append(key, exchange(1), exchange(0) + exchange(1))
    assert synced == [path]  # an append to a file that exists costs one fsync
    monkeypatch.setattr(spill_module, "MAX_SPILL_BYTES", 10)
    synced.clear()
    spill.append(key, exchange(2), exchange(0) + exchange(1) + exchange(2))
    assert synced == [f"{path}.tmp", str(folder)]  # a rewrite: the new file, then its name


def test_a_file_system_that_cannot_sync_a_file_still_holds_every_turn(tmp_path, monkeypatch):
    def fsync(fd: int) -> None:  # some network and FUSE mounts: the data is written, the sync refused
        raise OSError(errno.EINVAL, "Invalid argument")

    monkeypatch.setattr(spill_module.os, "fsync", fsync)
    spill, key, held = Spill(tmp_path / SPILL_DIR), SessionKey(SESSION, platform="cli"), []
    for i in range(3):
        if i == 2:
            monkeypatch.setattr(spill_module, "MAX_SPILL_BYTES", 10)  # the held copy replaces the file
        held += exchange(i)
        spill.append(key, exchange(i), held)
        assert [(k.session_id, m) for k, m, _ in read_runs(spill.path(SESSION).read_bytes())] == [(SESSION, held)]
    assert not spill.failed and [p.name for p in spill.folder.iterdir()] == [spill.path(SESSION).name]


def test_a_spill_that_cannot_be_written_keeps_the_messages_in_memory_and_warns_once(tmp_path, caplog):
    blocker, db_path = blocked(tmp_path)
    (tmp_path / SPILL_DIR).write_text("a file where the spill folder should be", encoding="utf-8")
    with caplog.at_level("WARNING", logger="hermes_trove"):
        rt, _ = hermes_run(tmp_path, db_path, range(5))
    assert rt.unstored.count == 10 and not rt.health.usable
    warnings = [r for r in caplog.records if "cannot be saved" in r.getMessage()]
    assert len(warnings) == 1 and "kept in memory only" in warnings[0].getMessage()
    assert not any(r.exc_info for r in caplog.records)


def test_a_spill_file_is_bounded_by_rewriting_it_from_the_held_copy(tmp_path, monkeypatch):
    monkeypatch.setattr(spill_module, "MAX_SPILL_BYTES", 4000)
    monkeypatch.setattr(runtime, "MAX_HELD_MESSAGES", 20)  # what memory keeps of a session
    blocker, db_path = blocked(tmp_path)
    rt, history = hermes_run(tmp_path, db_path, range(40))
    path = next((tmp_path / SPILL_DIR).glob("*.jsonl"))
    assert path.stat().st_size <= 4000
    messages = [m for _, run, _ in read_runs(path.read_bytes()) for m in run]
    assert 20 <= len(messages) < 80 and messages[-20:] == history[-20:]  # the newest are kept, in order
    assert rt.unstored.dropped == 60


def test_with_redaction_on_no_secret_reaches_the_spill_and_the_stored_rows_still_align(tmp_path, monkeypatch):
    secret = "sk-proj-" + "Q7x" * 12
    blocker, db_path = blocked(tmp_path)
    rt = build_runtime(make_config(tmp_path, database_path=str(db_path), sensitive_patterns_enabled=True))
    history = [user(f"my key is {secret}"), assistant("noted")]
    rt.unstored.hold(SessionKey(SESSION, platform="cli"), history)
    data = next((tmp_path / SPILL_DIR).glob("*.jsonl")).read_bytes()
    assert secret.encode() not in data and b"REDACTED" in data
    unblock(blocker)
    rt2 = build_runtime(make_config(tmp_path, database_path=str(db_path), sensitive_patterns_enabled=True))
    rt2.restore_spilled()
    rows = rt2.store.page(SESSION, limit=10)
    assert [r.identity for r in rows] == [message_identity(m) for m in history]
    assert all(secret not in r.content for r in rows)
    assert rt2.store.ingest(SessionKey(SESSION, platform="cli"), history).store_ids == ()  # the live copy adds nothing


def test_a_postgresql_store_spills_nothing_its_outbox_is_on_disk_already(tmp_path):
    pytest.importorskip("psycopg")
    rt = build_runtime(make_config(tmp_path, database_url="postgresql://trove@127.0.0.1:9/none"))
    assert rt.unstored.spill is None
    rt.unstored.hold(SessionKey(SESSION, platform="cli"), exchange(0))
    assert not (tmp_path / SPILL_DIR).exists()


def test_turns_a_sqlite_store_held_on_disk_reach_the_postgresql_store_the_home_moved_to(tmp_path, pg_database_url):
    """A home whose file store was unusable (its turns held in the spill folder) that then moves to a
    server (``migrate --to``, ``TROVE_DATABASE_URL``): the held turns go into the outbox at the next start,
    and so to the server; status counts them until then."""
    blocker, db_path = blocked(tmp_path)
    rt, _ = hermes_run(tmp_path, db_path, range(3))
    assert not rt.health.usable and len(list((tmp_path / SPILL_DIR).glob("*.jsonl"))) == 1
    del rt
    unblock(blocker)
    moved = build_runtime(make_config(tmp_path, database_url=pg_database_url))
    assert status.health_section(moved)["usable"] is True
    moved.restore_spilled()  # as the plugin's load does
    moved.store.settle()
    assert {r.content: 1 for r in moved.store.page(SESSION, limit=100)} == expected(range(3))
    assert not list((tmp_path / SPILL_DIR).glob("*.jsonl"))  # removed once in the outbox


def test_a_spill_with_only_a_torn_line_is_removed_without_writing(tmp_path):
    rt = build_runtime(make_config(tmp_path))
    folder = tmp_path / SPILL_DIR
    folder.mkdir()
    (folder / "x-0011.jsonl").write_bytes(b'{"run": "r1", "key": {"session_id": "s"}, "ids": ["a"], "mess')
    assert rt.unstored.spill.restore(rt.store) == 0 and not list(folder.iterdir())


def test_a_file_the_store_refuses_for_a_bug_is_kept_and_does_not_block_the_others(tmp_path, caplog):
    rt = build_runtime(make_config(tmp_path))
    folder = tmp_path / SPILL_DIR
    for sid in ("poison", SESSION):
        Spill(folder).append(SessionKey(sid, platform="cli"), exchange(0), exchange(0))
    ingest = rt.store.ingest

    def refuse_poison(key, *args, **kwargs):
        if key.session_id == "poison":
            raise ValueError("a bug, not storage")
        return ingest(key, *args, **kwargs)

    rt.store.ingest = refuse_poison
    with caplog.at_level("ERROR", logger="hermes_trove"):
        assert rt.unstored.flush(rt.store) == 2
    assert [p.name.split("-")[0] for p in folder.glob("*.jsonl")] == ["poison"]
    assert any("cannot be stored; the file stays" in r.getMessage() for r in caplog.records)


def test_an_entry_of_the_held_folder_that_cannot_be_read_leaves_the_store_usable(tmp_path, monkeypatch):
    # what cannot be opened there (a file of another user; root is never refused, so the refusal is
    # staged) is that entry's fault, not the store's: trove must not turn degraded for it
    db_path = tmp_path / "trove.db"
    folder = tmp_path / SPILL_DIR
    Spill(folder).append(SessionKey(SESSION, platform="cli"), exchange(0), exchange(0))
    Spill(folder).append(SessionKey("stray", platform="cli"), exchange(1), exchange(1))
    stray = next(folder.glob("stray-*.jsonl"))
    real_open = os.open

    def refused(path, *args, **kwargs):
        if Path(path) == stray:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", refused)
    rt = start_hermes(monkeypatch, tmp_path, db_path)
    assert rt.health.usable, rt.health
    assert stored(db_path, tmp_path) == expected(range(1))
    assert [p.name for p in folder.iterdir()] == [stray.name]


def test_a_recovery_stores_what_only_the_file_kept_past_the_memory_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(runtime, "MAX_HELD_MESSAGES", 20)  # memory keeps the newest 20, the file all 80
    blocker, db_path = blocked(tmp_path)
    rt, _ = hermes_run(tmp_path, db_path, range(40))
    assert rt.unstored.count == 20 and rt.unstored.dropped == 60
    unblock(blocker)
    rt.health.retry_at = 0.0  # the backoff has passed: the same Hermes recovers
    assert rt.store_usable() is True
    assert stored(db_path, tmp_path) == expected(range(40))
    assert not list((tmp_path / SPILL_DIR).glob("*.jsonl"))


def test_a_held_copy_larger_than_the_file_bound_is_not_rewritten_at_every_turn(tmp_path, monkeypatch):
    # JSON writes "é" as 6 bytes: 20 held messages of 300 of them pass a 4,000-byte bound on their own
    monkeypatch.setattr(spill_module, "MAX_SPILL_BYTES", 4000)
    monkeypatch.setattr(runtime, "MAX_HELD_MESSAGES", 20)
    folder = tmp_path / SPILL_DIR
    unstored = runtime.Unstored(spill=Spill(folder))
    key = SessionKey(SESSION, platform="cli")
    history: list[dict] = []
    inodes = []
    for i in range(30):
        history.append(user(f"{i} " + "é" * 300))
        unstored.hold(key, history)
        inodes.append(next(folder.glob("*.jsonl")).stat().st_ino)
    rewrites = sum(1 for a, b in zip(inodes, inodes[1:], strict=False) if a != b)
    assert rewrites <= 5, rewrites  # each rewrite copies the whole held copy: not once per turn
    messages = [m for _, run, _ in read_runs(next(folder.glob("*.jsonl")).read_bytes()) for m in run]
    assert messages[-20:] == history[-20:]


def test_a_whole_line_that_names_no_session_is_skipped_and_keeps_nothing_else_from_being_stored(tmp_path):
    rt = build_runtime(make_config(tmp_path))
    folder = tmp_path / SPILL_DIR
    Spill(folder).append(SessionKey(SESSION, platform="cli"), exchange(0), exchange(0))
    path = next(folder.glob("*.jsonl"))
    with path.open("ab") as f:  # parses, but names no session and has one id too many
        f.write(b'{"run": "x", "key": {"session_id": ""}, "ids": ["a", "b"], "messages": [{"role": "user"}]}\n')
    assert [key.session_id for key, _, _ in read_runs(path.read_bytes())] == [SESSION]
    assert rt.unstored.spill.restore(rt.store) == 2
    assert stored(tmp_path / "trove.db", tmp_path) == expected(range(1))


def test_a_held_file_that_cannot_be_removed_leaves_the_store_usable(tmp_path, monkeypatch):
    # a folder the user may read but not change (root is never refused, so the refusal is staged)
    db_path = tmp_path / "trove.db"
    folder = tmp_path / SPILL_DIR
    Spill(folder).append(SessionKey(SESSION, platform="cli"), exchange(0), exchange(0))
    unlink = Path.unlink

    def refused(self, *args, **kwargs):
        if self.parent == folder:
            raise PermissionError(13, "Permission denied", str(self))
        return unlink(self, *args, **kwargs)

    monkeypatch.setattr(Path, "unlink", refused)
    rt = start_hermes(monkeypatch, tmp_path, db_path)
    assert rt.health.usable, rt.health
    assert stored(db_path, tmp_path) == expected(range(1))
    assert len(list(folder.glob("*.jsonl"))) == 1  # kept; the next restore adds nothing from it


def test_a_fifo_named_like_a_held_file_does_not_block_the_start(tmp_path):
    import contextlib
    import threading

    rt = build_runtime(make_config(tmp_path))
    folder = tmp_path / SPILL_DIR
    Spill(folder).append(SessionKey(SESSION, platform="cli"), exchange(0), exchange(0))
    fifo = folder / "a-pipe.jsonl"
    os.mkfifo(fifo)
    done: list[int] = []
    worker = threading.Thread(target=lambda: done.append(rt.unstored.spill.restore(rt.store)), daemon=True)
    worker.start()
    worker.join(60)  # a guard against a hang, not a measure: restoring one small file takes milliseconds
    hung = worker.is_alive()
    while worker.is_alive():  # release each blocked open so the thread ends
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(1)
    assert not hung and done == [2] and fifo.exists()


@pytest.mark.parametrize("end", ['"a cursor"', "7", "[3]", '[3, "id", null]', '{"0": 1}', '[1e999, "id", []]',
                                 '["x", "id", []]'])
def test_a_run_whose_end_mark_is_damaged_is_replayed_whole_and_keeps_the_next_run(tmp_path, end):
    rt = build_runtime(make_config(tmp_path))
    folder = tmp_path / SPILL_DIR
    key = SessionKey(SESSION, platform="cli")
    first, second = spill_module.spill_line("a", key, exchange(0)), spill_module.spill_line("b", key, exchange(1))
    damaged = first[:-2] + b', "end": ' + end.encode() + b"}\n"  # a line that parses, with an end no run can have
    folder.mkdir()
    (folder / "held.jsonl").write_bytes(damaged + second)
    assert len(read_held(damaged + second)) == 2
    assert rt.unstored.spill.restore(rt.store) == 4
    assert stored(tmp_path / "trove.db", tmp_path) == expected(range(2))
    assert not list(folder.glob("*.jsonl"))


def test_held_ends_are_read_one_file_at_a_time_when_they_are_replayed(tmp_path, monkeypatch):
    # each file held from an end may be a whole transcript: they wait for their turn on disk, not in memory
    rt = build_runtime(make_config(tmp_path))
    folder = tmp_path / SPILL_DIR
    folder.mkdir()
    for i in range(4):
        key = SessionKey(f"ended-{i}", platform="cli")
        (folder / f"ended-{i}.jsonl").write_bytes(spill_module.spill_line("r", key, exchange(i), end=((2, "x"), ())))
    read = weakref.WeakSet()
    alive: list[int] = []
    read_held, restore_file = spill_module.read_held, Spill._restore_file

    class Runs(list):  # what one file reads as; the set forgets it once nothing holds it
        __hash__ = object.__hash__

    def tracked(data: bytes):
        runs = Runs(read_held(data))
        read.add(runs)
        return runs

    def restored(self, store, skip, path, data, runs):
        gc.collect()
        alive.append(len(read))
        return restore_file(self, store, skip, path, data, runs)

    monkeypatch.setattr(spill_module, "read_held", tracked)
    monkeypatch.setattr(Spill, "_restore_file", restored)
    assert rt.unstored.spill.restore(rt.store) == 8
    assert alive == [1, 1, 1, 1] and not list(folder.glob("*.jsonl"))
