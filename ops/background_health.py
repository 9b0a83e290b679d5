"""Background work left behind by a crashed process: stale leases and rollups stuck 'building'.

``diagnose`` reads; ``repair`` (behind ``/trove doctor repair apply``, after its backup) deletes
the stale lease rows and marks orphaned 'building' rollups stale so the next pass rebuilds them.
A 'building' row is orphaned when no live process holds the rollup lease.
"""
from __future__ import annotations

import time
from typing import Any

from .. import leases
from ..db import Database
from ..temporal.rollup_store import RollupStore
from ..temporal.rollups import LEASE as ROLLUP_LEASE


def _stuck(db: Database) -> list[int]:
    if leases.holder(db, ROLLUP_LEASE) is not None:  # a live builder owns its 'building' rows
        return []
    return [s.rollup_id for s in RollupStore(db).states() if s.status == "building"]


def diagnose(db: Database) -> dict[str, Any]:
    """Stale lease rows (expired, or their holder is gone from this host) and orphaned 'building' rollups."""
    now = time.time()
    stale = leases.stale(db, now)
    return {"stale_leases": [{"name": s.name, "owner": s.owner, "expired": s.expires_at <= now,
                              "expires_in_s": round(s.expires_at - now, 1)} for s in stale],
            "stuck_building_rollups": _stuck(db)}


def repair(db: Database) -> list[str]:
    """Clear what ``diagnose`` finds; each step is conditional on the rows being unchanged."""
    actions = []
    cleared = leases.clear_stale(db, leases.stale(db))
    if cleared:
        actions.append(f"cleared {cleared} stale lease(s)")
    reset = RollupStore(db).abandon_building(_stuck(db), time.time())
    if reset:
        actions.append(f"marked {reset} orphaned 'building' rollup(s) stale for rebuild")
    return actions
