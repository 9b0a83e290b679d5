"""Work leases: a named claim on background work, held by one owner until it expires.

Processes sharing one trove.db take a lease by name before background work, renew it while they
work and release it when done (``bounded_pass``). A lease whose owner (pid and host) no longer runs
on this host is taken over at once; any other crashed owner's expires. Every write is one statement.
"""
from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from .db import HOST, Database

log = logging.getLogger("hermes_trove.leases")

_PROCESS = uuid.uuid4().hex[:12]


def owner_id() -> str:
    """This process and thread on this host, unique across processes sharing the file."""
    return f"{os.getpid()}:{threading.get_ident()}:{_PROCESS}@{HOST}"


def holder_gone(owner: str) -> bool:
    """True when ``owner`` was a process on this host that no longer exists.

    Owners from another host, or written before owners named their host, count as alive:
    only their expiry frees them. A pid reused by this very process (a container restart)
    is told apart by the per-process token.
    """
    head, sep, host = owner.rpartition("@")
    parts = head.split(":")
    if not sep or host != HOST or len(parts) != 3 or not parts[0].isdigit():
        return False
    pid = int(parts[0])
    if pid == os.getpid():
        return parts[2] != _PROCESS
    return process_gone(pid)


def process_gone(pid: int, host: str = HOST) -> bool:
    """True when no process ``pid`` runs on ``host``, this host; this very process never counts as
    gone, nor does one of another host or container (its pids are not this host's)."""
    if pid == os.getpid() or host != HOST:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):  # it runs, as another user (or the number is no pid at all)
        return False
    return False


@dataclass(frozen=True)
class Lease:
    name: str
    owner: str
    expires_at: float


def acquire(db: Database, name: str, ttl_s: float, owner: str | None = None, now: float | None = None) -> Lease | None:
    """Take (or renew, for the same owner) the lease ``name``; None while another owner holds it."""
    owner = owner or owner_id()
    now = time.time() if now is None else now
    expires = now + max(0.001, float(ttl_s))
    # Liveness is checked outside the write lock; the write takes over only that dead owner.
    row = db.read().execute("SELECT owner, expires_at FROM work_leases WHERE name=?", (name,)).fetchone()
    dead = str(row[0]) if row is not None and row[0] != owner and float(row[1]) > now \
        and holder_gone(str(row[0])) else ""
    with db.transaction() as conn:
        cur = conn.execute(
            "INSERT INTO work_leases(name, owner, acquired_at, expires_at) VALUES (?,?,?,?)"
            " ON CONFLICT(name) DO UPDATE SET owner=excluded.owner, acquired_at=excluded.acquired_at,"
            " expires_at=excluded.expires_at WHERE work_leases.owner = excluded.owner"
            " OR work_leases.expires_at <= ? OR work_leases.owner = ?", (name, owner, now, expires, now, dead))
        if cur.rowcount != 1:
            return None
    return Lease(name, owner, expires)


def release(db: Database, lease: Lease) -> bool:
    """Give the lease back; False when it had expired and another owner took it."""
    with db.transaction() as conn:
        cur = conn.execute("DELETE FROM work_leases WHERE name=? AND owner=?", (lease.name, lease.owner))
        return cur.rowcount == 1


def holder(db: Database, name: str, now: float | None = None) -> Lease | None:
    """Who holds ``name`` now (None when free, expired or held by a process gone from this host)."""
    now = time.time() if now is None else now
    row = db.read().execute("SELECT owner, expires_at FROM work_leases WHERE name=?", (name,)).fetchone()
    if row is None or float(row[1]) <= now or holder_gone(str(row[0])):
        return None
    return Lease(name, str(row[0]), float(row[1]))


def stale(db: Database, now: float | None = None) -> list[Lease]:
    """Lease rows no live owner holds: expired, or held by a process gone from this host."""
    now = time.time() if now is None else now
    rows = db.read().execute("SELECT name, owner, expires_at FROM work_leases ORDER BY name").fetchall()
    return [Lease(str(r[0]), str(r[1]), float(r[2])) for r in rows
            if float(r[2]) <= now or holder_gone(str(r[1]))]


def clear_stale(db: Database, leases: list[Lease]) -> int:
    """Delete the given stale lease rows, each only if it is still exactly that row."""
    with db.transaction() as conn:
        return sum(conn.execute("DELETE FROM work_leases WHERE name=? AND owner=? AND expires_at=?",
                                (lease.name, lease.owner, lease.expires_at)).rowcount for lease in leases)


class BoundedPass:
    """One pass of background work under a lease: ``held`` is False when another owner has it
    (``busy()`` then answers who); ``loop`` runs steps while the budget lasts."""

    def __init__(self, db: Database, name: str, ttl_s: float, budget_s: float, max_steps: int | None,
                 owner: str | None, clock: Callable[[], float]):
        self.db, self.name, self.ttl_s, self.budget_s, self.max_steps = db, name, ttl_s, budget_s, max_steps
        self.clock, self.started = clock, clock()
        self.lease = acquire(db, name, ttl_s, owner=owner)
        found = holder(db, name) if self.lease is None else None
        self.holder = found.owner if found is not None else None
        self.held, self.steps, self.lost = self.lease is not None, 0, False

    def loop(self, step: Callable[[], bool]) -> int:
        """Run ``step`` until it answers False, the step count or the time budget runs out, or the
        lease, renewed after each step, was taken over. Returns the steps that answered True."""
        while self.lease is not None and not self.lost and self.clock() - self.started < self.budget_s \
                and (self.max_steps is None or self.steps < self.max_steps):
            if not step():
                break
            self.steps += 1
            self.lost = acquire(self.db, self.name, self.ttl_s, owner=self.lease.owner) is None
        return self.steps

    def busy(self) -> dict[str, str | None]:
        return {"status": "busy", "holder": self.holder}

    def seconds(self) -> float:
        return round(self.clock() - self.started, 3)


@contextmanager
def bounded_pass(db: Database, name: str, ttl_s: float, *, budget_s: float, max_steps: int | None = None,
                 owner: str | None = None, clock: Callable[[], float] = time.monotonic) -> Iterator[BoundedPass]:
    """Take the lease ``name`` for one pass and give it back when the block ends, however it ends.
    A release that fails is logged: the lease then expires after ``ttl_s``."""
    run = BoundedPass(db, name, ttl_s, budget_s, max_steps, owner, clock)
    try:
        yield run
    finally:
        if run.lease is not None:
            try:
                release(db, run.lease)
            except Exception:
                log.warning("trove: releasing the lease %s failed; it expires by itself", name, exc_info=True)
