"""Work leases: a named claim on background work, held by one owner until it expires.

Several Hermes processes share one trove.db; rollup builds, embedding passes and extraction
batches each take a lease by name before working, renew it while they work and release it
when done. An owner names its pid and host: a lease whose holder no longer runs on this host
is taken over at once; any other crashed owner's lease expires. Every write is one
conditional statement in a short transaction.
"""
from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass

from .db import Database

_PROCESS = uuid.uuid4().hex[:12]
_HOST = socket.gethostname()


def owner_id() -> str:
    """This process and thread on this host, unique across processes sharing the file."""
    return f"{os.getpid()}:{threading.get_ident()}:{_PROCESS}@{_HOST}"


def holder_gone(owner: str) -> bool:
    """True when ``owner`` was a process on this host that no longer exists.

    Owners from another host, or written before owners named their host, count as alive:
    only their expiry frees them. A pid reused by this very process (a container restart)
    is told apart by the per-process token.
    """
    head, sep, host = owner.rpartition("@")
    parts = head.split(":")
    if not sep or host != _HOST or len(parts) != 3 or not parts[0].isdigit():
        return False
    pid = int(parts[0])
    if pid == os.getpid():
        return parts[2] != _PROCESS
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OSError):
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
    removed = 0
    with db.transaction() as conn:
        for lease in leases:
            cur = conn.execute("DELETE FROM work_leases WHERE name=? AND owner=? AND expires_at=?",
                               (lease.name, lease.owner, lease.expires_at))
            removed += cur.rowcount
    return removed
