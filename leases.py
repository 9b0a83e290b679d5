"""Work leases: a named claim on background work, held by one owner until it expires.

Several Hermes processes share one trove.db; rollup builds, embedding passes and extraction
batches each take a lease by name before working, renew it while they work and release it
when done. A crashed owner's lease simply expires. Every call is one short transaction.
"""
from __future__ import annotations

import os
import threading
import time
import uuid
from dataclasses import dataclass

from .db import Database

_PROCESS = uuid.uuid4().hex[:12]


def owner_id() -> str:
    """This process and thread, unique across processes sharing the file."""
    return f"{os.getpid()}:{threading.get_ident()}:{_PROCESS}"


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
    with db.transaction() as conn:
        row = conn.execute("SELECT owner, expires_at FROM work_leases WHERE name=?", (name,)).fetchone()
        if row is not None and row[0] != owner and float(row[1]) > now:
            return None
        conn.execute("INSERT INTO work_leases(name, owner, acquired_at, expires_at) VALUES (?,?,?,?)"
                     " ON CONFLICT(name) DO UPDATE SET owner=excluded.owner, acquired_at=excluded.acquired_at,"
                     " expires_at=excluded.expires_at", (name, owner, now, expires))
    return Lease(name, owner, expires)


def release(db: Database, lease: Lease) -> bool:
    """Give the lease back; False when it had expired and another owner took it."""
    with db.transaction() as conn:
        cur = conn.execute("DELETE FROM work_leases WHERE name=? AND owner=?", (lease.name, lease.owner))
        return cur.rowcount == 1


def holder(db: Database, name: str, now: float | None = None) -> Lease | None:
    """Who holds ``name`` now (None when free or expired)."""
    now = time.time() if now is None else now
    row = db.read().execute("SELECT owner, expires_at FROM work_leases WHERE name=?", (name,)).fetchone()
    if row is None or float(row[1]) <= now:
        return None
    return Lease(name, str(row[0]), float(row[1]))
