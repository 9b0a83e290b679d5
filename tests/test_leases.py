"""Work leases on a real database file: one owner at a time, expiry, release, processes."""
from __future__ import annotations

import multiprocessing
import multiprocessing.synchronize
import os
import signal
from typing import Any

import pytest

from hermes_trove import leases
from hermes_trove.db import Database

BACKENDS = ("sqlite", "postgresql")  # every test here runs on the file and on a server


def test_one_owner_holds_a_lease_until_it_expires(tmp_path):
    db = Database(tmp_path / "t.db")
    first = leases.acquire(db, "rollups", 30, owner="a", now=100.0)
    assert first is not None and first.expires_at == 130.0
    assert leases.acquire(db, "rollups", 30, owner="b", now=110.0) is None
    assert leases.acquire(db, "other", 30, owner="b", now=110.0) is not None
    renewed = leases.acquire(db, "rollups", 30, owner="a", now=120.0)
    assert renewed is not None and renewed.expires_at == 150.0
    taken = leases.acquire(db, "rollups", 30, owner="b", now=151.0)
    assert taken is not None and leases.holder(db, "rollups", now=152.0) == taken


def test_release_frees_the_lease_only_for_its_owner(tmp_path):
    db = Database(tmp_path / "t.db")
    lease = leases.acquire(db, "embed", 30, owner="a")
    assert lease is not None
    assert not leases.release(db, leases.Lease("embed", "b", lease.expires_at))
    assert leases.release(db, lease)
    assert leases.holder(db, "embed") is None and leases.acquire(db, "embed", 30, owner="b") is not None


def _try(path: str, queue: multiprocessing.Queue, done: multiprocessing.synchronize.Event) -> None:
    lease = leases.acquire(Database(path), "contended", 60)
    queue.put(lease is not None)
    done.wait(30)  # stay alive: a holder that exits is taken over at once


def test_exactly_one_of_several_processes_gets_a_contended_lease(tmp_path):
    path = str(tmp_path / "t.db")
    Database(path).connect()
    ctx = multiprocessing.get_context("fork")
    queue: multiprocessing.Queue = ctx.Queue()
    done = ctx.Event()
    procs = [ctx.Process(target=_try, args=(path, queue, done)) for _ in range(4)]
    for p in procs:
        p.start()
    got = sorted(queue.get(timeout=30) for _ in procs)
    done.set()
    for p in procs:
        p.join(30)
    assert got == [False, False, False, True]


def _hold(path: str, pipe: Any) -> None:
    lease = leases.acquire(Database(path), "rollups", 600)
    pipe.send(lease.owner if lease else "")  # synchronous, unlike a queue's feeder thread
    os.kill(os.getpid(), signal.SIGKILL)  # dies holding the lease


def test_a_lease_whose_holder_died_on_this_host_is_taken_over_at_once(tmp_path):
    path = str(tmp_path / "t.db")
    db = Database(path)
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_hold, args=(path, child))
    proc.start()
    assert parent.poll(30)
    dead = parent.recv()
    proc.join(30)
    assert dead and proc.exitcode == -signal.SIGKILL
    assert leases.holder(db, "rollups") is None and [s.owner for s in leases.stale(db)] == [dead]
    taken = leases.acquire(db, "rollups", 600)
    assert taken is not None and taken.owner != dead and leases.stale(db) == []


def test_a_live_holder_on_another_host_or_of_the_old_owner_format_is_not_taken_over(tmp_path):
    db = Database(tmp_path / "t.db")
    assert leases.acquire(db, "a", 600, owner=f"{os.getpid() + 999999}:1:abc@elsewhere") is not None
    assert leases.acquire(db, "a", 600) is None
    assert leases.acquire(db, "b", 600, owner="1:2:abc") is not None  # no host: only expiry frees it
    assert leases.acquire(db, "b", 600) is None
    assert leases.stale(db) == []


def test_stale_leases_are_cleared_only_while_unchanged(tmp_path):
    db = Database(tmp_path / "t.db")
    leases.acquire(db, "x", 10, owner="a", now=100.0)
    found = leases.stale(db, now=200.0)
    assert [s.name for s in found] == ["x"]
    leases.acquire(db, "x", 10, owner="b", now=300.0)  # taken again meanwhile
    assert leases.clear_stale(db, found) == 0
    assert leases.clear_stale(db, leases.stale(db, now=400.0)) == 1


# -- bounded_pass: the shared prologue and loop of the leased background passes -------------------

class Script:
    """A step function that plays one action per call on a fake clock (one second per step):
    "ok" (more work), "done" (nothing left), "steal" (another owner takes the lease, then ok), "raise"."""

    def __init__(self, db: Database, actions: list[str]):
        self.db, self.actions, self.now, self.calls = db, list(actions), 0.0, 0

    def clock(self) -> float:
        return self.now

    def __call__(self) -> bool:
        action = self.actions[self.calls]
        self.calls += 1
        self.now += 1.0
        if action == "raise":
            raise RuntimeError("the step failed")
        if action == "steal":  # the lease expired under this pass and another process took it (far in the future)
            assert leases.acquire(self.db, "pass", 30, owner="thief", now=4_000_000_000.0) is not None
        return action != "done"


@pytest.mark.parametrize("actions, budget_s, max_steps, held_by, steps, lost, holder_after", [
    (["ok", "ok", "done"], 100.0, None, None, 2, False, None),        # runs until the step says done
    (["ok"] * 10, 100.0, 3, None, 3, False, None),                     # stops at its step count
    (["ok"] * 10, 2.5, None, None, 3, False, None),                    # stops once the budget is spent
    (["ok", "steal", "ok"], 100.0, None, None, 2, True, "thief"),     # stops when the lease was taken over
    (["ok"], 100.0, None, "other", 0, False, "other"),                 # busy: nothing runs, the holder is named
    (["ok"], 100.0, 0, None, 0, False, None),                          # no steps allowed: none run
], ids=["done", "max-steps", "budget", "lease-lost", "busy", "zero-steps"])
def test_a_bounded_pass_loops_while_it_may_and_always_gives_the_lease_back(
        tmp_path, actions, budget_s, max_steps, held_by, steps, lost, holder_after):
    db = Database(tmp_path / "t.db")
    if held_by:
        assert leases.acquire(db, "pass", 30, owner=held_by) is not None
    step = Script(db, actions)
    with leases.bounded_pass(db, "pass", 30, budget_s=budget_s, max_steps=max_steps, clock=step.clock) as run:
        assert run.held is (held_by is None)
        assert run.loop(step) == steps and run.steps == steps and run.lost is lost
        if held_by:
            assert run.busy() == {"status": "busy", "holder": held_by} and step.calls == 0
    held = leases.holder(db, "pass")
    assert (held.owner if held else None) == holder_after


def test_a_step_that_raises_ends_the_pass_and_frees_the_lease(tmp_path):
    db = Database(tmp_path / "t.db")
    step = Script(db, ["ok", "raise", "ok"])
    with pytest.raises(RuntimeError, match="the step failed"):
        with leases.bounded_pass(db, "pass", 30, budget_s=100.0, clock=step.clock) as run:
            run.loop(step)
    assert step.calls == 2 and run.steps == 1 and leases.holder(db, "pass") is None


def test_a_release_that_fails_is_logged_and_the_lease_left_to_expire(tmp_path, monkeypatch, caplog):
    db = Database(tmp_path / "t.db")

    def broken(db: Database, lease: leases.Lease) -> bool:
        raise OSError("disk gone")

    monkeypatch.setattr(leases, "release", broken)
    with leases.bounded_pass(db, "pass", 30, budget_s=100.0) as run:
        run.loop(lambda: False)
    assert "releasing the lease pass failed" in caplog.text and leases.holder(db, "pass") is not None


def test_a_pass_takes_over_the_lease_of_a_holder_that_died(tmp_path):
    db = Database(tmp_path / "t.db")
    host = leases.owner_id().rpartition("@")[2]
    gone = f"{2 ** 22 + 12345}:1:deadbeef0000@{host}"  # a pid above the kernel's limit: never alive
    assert leases.acquire(db, "pass", 300, owner=gone) is not None
    with leases.bounded_pass(db, "pass", 30, budget_s=100.0) as run:
        assert run.held and run.loop(Script(db, ["ok", "done"])) == 1
    assert leases.holder(db, "pass") is None
