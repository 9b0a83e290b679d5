"""Rotate: compact a long session in place by advancing its lifecycle frontier past the pre-tail.

The live tail (``TROVE_FRESH_TAIL_COUNT`` newest rows, never starting inside a tool-call group)
stays; nothing is deleted, no model is called, no id changes. Apply writes a rolling
``<dbstem>-rotate-latest.sqlite3`` backup first (a PostgreSQL store: the answer names the statement
that restores the frontier); a rotate that would not move the frontier is a ``noop``.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..backups import backup_dir, backup_to
from . import queries

if TYPE_CHECKING:
    from ..runtime import Runtime


@dataclass(frozen=True)
class RotatePlan:
    session_id: str
    status: str  # ready | noop | refused
    reason: str
    current_frontier: int
    target_frontier: int
    tail_count: int
    tail_first_store_id: int
    pre_tail_messages: int  # raw rows the frontier moves past (after the current frontier)


def plan_rotate(session_id: str, newest_first: Sequence[tuple[int, str]], frontier: int, tail_count: int,
                total_messages: int) -> RotatePlan:
    """Pure: ``newest_first`` holds ``(store_id, role)`` of the newest raw rows, newest first.

    The tail is the ``tail_count`` newest rows; while its oldest row is a tool result it
    grows back to the assistant turn that made the call.
    """
    rows = list(newest_first)
    if not rows:
        return RotatePlan(session_id, "noop", "the session has no stored messages", frontier, frontier, 0, 0, 0)
    if total_messages <= tail_count:
        return RotatePlan(session_id, "noop", f"only {total_messages} messages; all are inside the live tail",
                          frontier, frontier, total_messages, rows[-1][0], 0)
    n = min(tail_count, len(rows))
    while n < len(rows) and rows[n - 1][1] == "tool":
        n += 1
    first = rows[n - 1][0]
    target = first - 1
    if frontier >= target:
        return RotatePlan(session_id, "noop", f"frontier {frontier} is already at or past the target {target}",
                          frontier, frontier, n, first, 0)
    return RotatePlan(session_id, "ready", "", frontier, target, n, first, -1)


def _refusal(runtime: Runtime, session_id: str, mode: str) -> str:
    if not session_id:
        return "no session is bound yet (send a message first, or pass --session)"
    if mode in ("ignored", "stateless"):
        return f"session {session_id} is {mode}; trove does not own its history"
    row = runtime.store.session(session_id)
    platform = row.platform if row else ""
    for kind, match in (("ignore", runtime.filters.ignored_by), ("stateless", runtime.filters.stateless_by)):
        if (p := match(session_id, platform)):
            return f"session {session_id} matches {kind} pattern {p!r}"
    return f"session {session_id} has no lifecycle row in this database" if row is None else ""


def preview(runtime: Runtime, session_id: str, mode: str = "active") -> RotatePlan:
    """Read-only: what ``apply`` would do for ``session_id`` right now."""
    reason = _refusal(runtime, session_id, mode)
    if reason:
        return RotatePlan(session_id or "(unbound)", "refused", reason, 0, 0, 0, 0, 0)
    conn = queries.settled(runtime)
    tail = int(runtime.config.fresh_tail_count)
    frontier = runtime.store.frontier_store_id(session_id)
    limit = tail + 1
    newest = queries.newest_roles(conn, session_id, limit)
    # A tail that would start inside a long run of tool results needs a wider window.
    while len(newest) == limit and all(role == "tool" for _, role in newest[tail - 1:]):
        limit *= 2
        newest = queries.newest_roles(conn, session_id, limit)
    total = runtime.store.count(session_id)
    plan = plan_rotate(session_id, newest, frontier, tail, total)
    if plan.status == "ready":
        moved = queries.count_between(conn, session_id, frontier, plan.target_frontier)
        plan = replace(plan, pre_tail_messages=moved)
        if not moved:
            plan = replace(plan, status="noop", target_frontier=frontier,
                           reason="no raw messages lie between the frontier and the live tail")
    return plan


# Why rotate needs no copy of a server store: it deletes nothing and changes one row.
SERVER_NOTE = ("no file backup: a PostgreSQL store is not copied by trove, and rotate deletes nothing: it only moved"
               " this session's frontier (every raw message stays); `undo` puts the frontier back")


def apply(runtime: Runtime, session_id: str, mode: str = "active") -> dict[str, Any]:
    """Backup to the rolling slot, then advance the frontier (never back, never deleting)."""
    plan = preview(runtime, session_id, mode)
    if plan.status != "ready":
        return {**asdict(plan), "applied": False}
    if runtime.db.kind == "sqlite":
        backup = backup_to(runtime, backup_dir(runtime.config) / f"{Path(runtime.db.path).stem}-rotate-latest.sqlite3")
        saved: dict[str, Any] = {"backup": backup.path, "backup_bytes": backup.bytes}
    else:
        before = runtime.store.session(session_id)
        rotated = before.rotated_frontier if before and before.rotated_frontier is not None else "NULL"
        saved = {"backup": None, "backup_bytes": None, "backup_note": SERVER_NOTE,
                 "undo": f"UPDATE sessions SET frontier_store_id = {plan.current_frontier}, rotated_frontier ="
                         f" {rotated} WHERE session_id = '{session_id.replace(chr(39), chr(39) * 2)}'"}
    runtime.store.record_rotate(session_id, plan.target_frontier, saved["backup"] or
                                f"none: PostgreSQL store, the frontier was {plan.current_frontier}")
    row = runtime.store.session(session_id)
    return {**asdict(plan), "status": "rotated", "applied": True, **saved,
            "frontier": runtime.store.frontier_store_id(session_id) if row else plan.target_frontier,
            "last_rotate_at": row.last_rotate_at if row else None}
