"""PassScheduler: one background thread per database path, throttled, with one rerun on demand."""
from __future__ import annotations

import threading
from collections.abc import Callable

from hermes_trove.background import PassScheduler


def blocking_work() -> tuple[threading.Event, list[int], Callable[[], None]]:
    """A pass that records each run and holds until the gate opens."""
    gate, runs = threading.Event(), []

    def work() -> None:
        runs.append(1)
        gate.wait(10)

    return gate, runs, work


def test_one_pass_per_path_at_a_time_and_unforced_starts_wait_for_the_interval():
    gate, runs, work = blocking_work()
    passes = PassScheduler("test-passes")

    first = passes.start("a.db", lambda: work, interval_s=3600)
    assert first is not None and passes.threads["a.db"] is first
    assert passes.start("a.db", lambda: work, interval_s=0) is None  # one is running
    other = passes.start("b.db", lambda: lambda: None, interval_s=3600)  # another database
    assert other is not None
    gate.set()
    first.join(10)
    other.join(10)
    assert passes.start("a.db", lambda: work, interval_s=3600) is None  # within the interval
    again = passes.start("a.db", lambda: work, interval_s=0)
    assert again is not None
    again.join(10)
    assert len(runs) == 2


def test_a_forced_start_skips_the_interval_and_during_a_pass_asks_for_exactly_one_more():
    gate, runs, work = blocking_work()
    passes = PassScheduler("test-passes")

    thread = passes.start("a.db", lambda: work, interval_s=3600)
    assert passes.start("a.db", lambda: work, interval_s=3600, force=True) is None
    assert passes.start("a.db", lambda: work, interval_s=3600, force=True) is None  # still one rerun
    gate.set()
    thread.join(10)
    assert len(runs) == 2  # the pass, then one rerun in the same thread
    forced = passes.start("a.db", lambda: work, interval_s=3600, force=True)
    assert forced is not None
    forced.join(10)
    assert len(runs) == 3


def test_prepare_runs_only_when_a_pass_starts_and_none_means_nothing_to_run():
    asked = []
    passes = PassScheduler("test-passes")
    assert passes.start("a.db", lambda: asked.append(1) or None, interval_s=0) is None
    assert asked == [1] and "a.db" not in passes.threads
    assert passes.start("a.db", lambda: asked.append(2) or None, interval_s=3600) is None
    assert asked == [1]  # throttled: prepare was not called
