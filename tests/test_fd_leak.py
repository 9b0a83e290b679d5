"""File descriptors do not pile up: engines that are closed and threads that end give theirs back.

``Database`` caches one connection per (process, thread, file). An engine's runtime is closed
with ``runtime.db.close()`` (the calling thread's connection); a thread's connections close when
the thread ends. Counts come from ``/proc/self/fd``, so the module skips where it is missing.
"""
from __future__ import annotations

import gc
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import assistant, make_config, user

from hermes_trove.engine import TroveEngine
from hermes_trove.runtime import Runtime, build_runtime
from hermes_trove.store import SessionKey

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")

ROUNDS = 200
SLACK = 5  # descriptors other code in the process may open meanwhile (logging, the tmp dir)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def gc_off() -> Iterator[None]:
    """Without the cyclic GC only a real close frees a connection, so a leak cannot hide."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def growth(step: Callable[[int], None], rounds: int = ROUNDS) -> int:
    step(-1)  # first use: imports, loggers and caches open what they keep for good
    before = open_fds()
    for i in range(rounds):
        step(i)
    return open_fds() - before


def run_in_thread(fn: Callable[[], object]) -> None:
    errors: list[BaseException] = []

    def body() -> None:
        try:
            fn()
        except BaseException as exc:  # surfaced in the test thread below
            errors.append(exc)

    worker = threading.Thread(target=body)
    worker.start()
    worker.join()
    assert not errors, errors


class TestEngines:
    def test_opening_and_closing_many_engines_leaves_no_descriptor_behind(self, tmp_path, gc_off):
        def engine_life(i: int) -> None:
            runtime = build_runtime(make_config(tmp_path / f"home{i}"))
            engine = TroveEngine(runtime)
            engine.update_model("fake-model", 128000)
            engine.on_session_start(f"s{i}", platform="cli")
            engine.ingest([user(f"hello {i}"), assistant("hi")])
            engine.on_session_end(f"s{i}", [])
            assert runtime.store.count(f"s{i}") == 2
            runtime.db.close()

        assert growth(engine_life) <= SLACK

    def test_engines_reopening_one_database_leave_no_descriptor_behind(self, tmp_path, gc_off):
        def engine_life(i: int) -> None:
            runtime = build_runtime(make_config(tmp_path))
            engine = TroveEngine(runtime)
            engine.on_session_start(f"s{i}", platform="cli")
            engine.ingest([user(f"hello {i}")])
            runtime.db.close()

        assert growth(engine_life) <= SLACK


class TestThreads:
    @pytest.fixture
    def shared(self, runtime: Runtime) -> Runtime:
        runtime.store.count()  # the test thread keeps its own connection open throughout
        return runtime

    def test_a_thread_that_ends_without_closing_gives_its_connection_back(self, shared, gc_off):
        assert growth(lambda i: run_in_thread(shared.store.count)) <= SLACK

    def test_a_thread_that_closes_its_connection_gives_it_back(self, shared, gc_off):
        def read_then_close() -> None:
            shared.store.count()
            shared.db.close()

        assert growth(lambda i: run_in_thread(read_then_close)) <= SLACK

    def test_threads_writing_and_ending_leave_no_descriptor_behind(self, shared, gc_off):
        def write(i: int) -> None:
            run_in_thread(lambda: shared.store.ingest(SessionKey(f"t{i}", platform="cli"), [user(f"m{i}")]))

        assert growth(write) <= SLACK
        assert shared.store.count() == ROUNDS + 1


def test_the_count_comes_from_this_process(tmp_path: Path):
    before = open_fds()
    with open(tmp_path / "f", "w"):
        assert open_fds() == before + 1
    assert open_fds() == before


def test_deep_copies_serving_sessions_that_never_end_hold_no_descriptor_or_thread(tmp_path, gc_off):
    """A gateway deep-copies the engine for every agent, and many agents go without an end call (a crash,
    an eviction): copies bound to sessions, each storing a turn on a thread of its own, add nothing to
    hold open, and the runtime they share keeps no more than its bounds."""
    import copy

    from hermes_trove.runtime import MAX_BOUND

    runtime = build_runtime(make_config(tmp_path))
    registered = TroveEngine(runtime)
    threads = threading.active_count()

    def step(i: int) -> None:
        clone = copy.deepcopy(registered)
        clone.update_model("fake-model", 128000)
        clone.on_session_start(f"gw{i}", platform="telegram", conversation_id=f"chat{i % 7}")
        run_in_thread(lambda: clone.ingest([user(f"turn of gw{i}"), assistant("done")]))

    assert growth(step) <= SLACK
    assert threading.active_count() == threads
    assert len(runtime.bound_sessions) == ROUNDS + 1 <= MAX_BOUND
    assert runtime.store.count("gw7") == 2
