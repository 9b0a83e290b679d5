"""Work leases on a real database file: one owner at a time, expiry, release, processes."""
from __future__ import annotations

import multiprocessing

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


def _try(path: str, queue: multiprocessing.Queue) -> None:
    lease = leases.acquire(Database(path), "contended", 60)
    queue.put(lease is not None)


def test_exactly_one_of_several_processes_gets_a_contended_lease(tmp_path):
    path = str(tmp_path / "t.db")
    Database(path).connect()
    ctx = multiprocessing.get_context("fork")
    queue: multiprocessing.Queue = ctx.Queue()
    procs = [ctx.Process(target=_try, args=(path, queue)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    assert sorted(queue.get(timeout=5) for _ in procs) == [False, False, False, True]
