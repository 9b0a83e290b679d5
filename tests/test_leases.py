"""Work leases on a real database file: one owner at a time, expiry, release, processes."""
from __future__ import annotations

import multiprocessing
import multiprocessing.synchronize
import os
import signal
from typing import Any

from hermes_trove import leases
from hermes_trove.db import Database


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
