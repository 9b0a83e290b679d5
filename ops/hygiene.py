"""Session hygiene for operators: junk-session clean-up, legacy source normalization, retention.

Scans are read-only; ``apply_clean`` and ``apply_source`` take a backup first (a PostgreSQL store:
the operator confirms their own) and change only the rows the scan named, in one transaction.
What is junk is decided by the pure ``plan_clean`` over per-session footprints.
"""
from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ..backups import FileBackupUnavailable, backup_fields, backup_first
from . import queries
from .queries import Footprint

if TYPE_CHECKING:
    from ..filters import SessionFilters
    from ..runtime import Runtime

DAY = 86400.0
LIST_LIMIT = 50


@dataclass(frozen=True)
class CleanCandidate:
    session_id: str
    reason: str
    messages: int
    tokens: int
    nodes: int


@dataclass(frozen=True)
class CleanPlan:
    candidates: tuple[CleanCandidate, ...]
    kept: tuple[tuple[str, str], ...]  # (session_id, why it is kept although it matched)


def plan_clean(prints: Iterable[Footprint], filters: SessionFilters, protected: Iterable[str],
               carried_out: dict[str, set[str]], empty_min_age_s: float, now: float,
               continued_by: Mapping[str, set[str]] | None = None) -> CleanPlan:
    """Pure: which sessions are junk (pattern-matched, or empty and old) and safe to delete.

    ``carried_out`` maps a session to the sessions its summaries were carried into; a
    candidate whose summaries live on in a kept session is kept, so nothing loses lineage.
    ``continued_by`` maps a session to the sessions naming it as their previous one: an empty
    candidate a kept session continues is kept too (the link from that session runs through it).
    """
    protected = set(protected)
    matched: list[tuple[Footprint, str]] = []
    for fp in prints:
        pattern = filters.ignored_by(fp.session_id, fp.platform)
        reason = f"matches ignore pattern {pattern!r}" if pattern else ""
        if not reason:
            pattern = filters.stateless_by(fp.session_id, fp.platform)
            reason = f"matches stateless pattern {pattern!r}" if pattern else ""
        if not reason and fp.empty and fp.last_at is not None and now - fp.last_at >= empty_min_age_s:
            reason = "empty lifecycle row (no messages, no summaries)"
        if reason:
            matched.append((fp, reason))
    kept: list[tuple[str, str]] = []
    continued_by = continued_by or {}
    names = _deletable({fp.session_id for fp, _ in matched} - protected,
                       {fp.session_id for fp, _ in matched if fp.empty}, carried_out, continued_by)
    candidates = []
    for fp, reason in matched:
        if fp.session_id in protected:
            kept.append((fp.session_id, "bound to a live engine"))
            continue
        outside = sorted(carried_out.get(fp.session_id, set()) - names)
        if outside:
            kept.append((fp.session_id, f"its summaries are carried into {', '.join(outside[:3])}"))
            continue
        later = sorted(continued_by.get(fp.session_id, set()) - names) if fp.empty else []
        if later:
            kept.append((fp.session_id, f"empty, but {', '.join(later[:3])} continues it (previous_session_id)"))
            continue
        candidates.append(CleanCandidate(fp.session_id, reason, fp.messages, fp.tokens, fp.nodes))
    return CleanPlan(tuple(candidates), tuple(kept))


def _deletable(names: set[str], empty: set[str], carried_out: Mapping[str, set[str]],
               continued_by: Mapping[str, set[str]]) -> set[str]:
    """Pure: of the matched sessions ``names``, those no kept session needs, through any number of links: one
    whose summaries a kept session carries, or an ``empty`` one a kept session continues, is kept too (so a
    kept session's own previous one stays, and the one before it; linear in the links)."""
    needs: dict[str, set[str]] = {}  # kept session -> the matched sessions that must stay with it
    links = [(target, source) for source, targets in carried_out.items() for target in targets]
    links += [(session_id, previous) for previous, later in continued_by.items() if previous in empty
              for session_id in later]
    for session_id, needed in links:
        needs.setdefault(session_id, set()).add(needed)
    deletable = set(names)
    stack = [s for s in needs if s not in deletable]
    while stack:
        for needed in needs.get(stack.pop(), ()):
            if needed in deletable:
                deletable.discard(needed)
                stack.append(needed)
    return deletable


def _plan_clean(runtime: Runtime, conn: sqlite3.Connection, protected: Iterable[str], now: float) -> CleanPlan:
    age = float(runtime.config.empty_lifecycle_gc_max_age_hours) * 3600
    return plan_clean(queries.footprints(conn), runtime.filters, protected, queries.carried_into(conn), age, now,
                      queries.continued_by(conn))


def scan_clean(runtime: Runtime, protected: Iterable[str] = (), now: float | None = None) -> dict[str, Any]:
    """Read-only: the junk/noise sessions ``apply_clean`` would delete."""
    plan = _plan_clean(runtime, queries.settled(runtime), _protect(runtime, protected),
                       time.time() if now is None else now)
    return {"read_only": True, "candidate_count": len(plan.candidates),
            "candidate_messages": sum(c.messages for c in plan.candidates),
            "candidates": [asdict(c) for c in plan.candidates[:LIST_LIMIT]],
            "listed": min(len(plan.candidates), LIST_LIMIT),
            "kept": [{"session_id": s, "reason": r} for s, r in plan.kept[:LIST_LIMIT]],
            "apply_enabled": bool(runtime.config.doctor_clean_apply_enabled)}


def apply_clean(runtime: Runtime, protected: Iterable[str] = (), now: float | None = None,
                have_backup: bool = False) -> dict[str, Any]:
    """Backup first, then delete the candidate sessions' rows in one transaction."""
    if not runtime.config.doctor_clean_apply_enabled:
        return {"status": "refused", "reason": "set TROVE_DOCTOR_CLEAN_APPLY_ENABLED=true to allow clean apply"}
    now = time.time() if now is None else now
    guard = _protect(runtime, protected)
    preview = _plan_clean(runtime, queries.settled(runtime), guard, now)
    if not preview.candidates:
        return {"status": "noop", "reason": "no junk sessions found", "deleted_sessions": 0}
    try:
        backup = backup_first(runtime, have_backup)
    except FileBackupUnavailable as exc:
        return exc.refusal()
    allowed = {c.session_id for c in preview.candidates}

    def still_junk(conn: sqlite3.Connection) -> list[str]:  # re-decided under the write lock
        return [c.session_id for c in _plan_clean(runtime, conn, guard, now).candidates if c.session_id in allowed]

    deleted = queries.delete_sessions(runtime.db, still_junk)
    return {"status": "applied", **backup_fields(backup), "deleted_sessions": len(deleted.sessions),
            "sessions": list(deleted.sessions[:LIST_LIMIT]), "deleted_rows": deleted.rows_by_table}


def _protect(runtime: Runtime, extra: Iterable[str]) -> set[str]:
    return {s for s in set(runtime.bound_sessions) | set(extra) if s}


# -- legacy blank source -------------------------------------------------------------------

def scan_source(runtime: Runtime) -> dict[str, Any]:
    rows = queries.blank_source_counts(queries.settled(runtime))
    return {"read_only": True, "blank_source_rows": sum(n for _, n in rows), "sessions": len(rows),
            "by_session": [{"session_id": sid, "rows": n} for sid, n in rows[:LIST_LIMIT]]}


def apply_source(runtime: Runtime, have_backup: bool = False) -> dict[str, Any]:
    """Backup first, then set blank ``messages.source`` to ``unknown`` (content and FTS untouched)."""
    if not scan_source(runtime)["blank_source_rows"]:
        return {"status": "noop", "reason": "no blank-source rows", "updated_rows": 0}
    try:
        backup = backup_first(runtime, have_backup)
    except FileBackupUnavailable as exc:
        return exc.refusal()
    n = queries.fill_blank_source(runtime.db, "unknown")
    return {"status": "applied", **backup_fields(backup), "updated_rows": n}


# -- retention ---------------------------------------------------------------------------------

def retention_report(runtime: Runtime, now: float | None = None, limit: int = 20) -> dict[str, Any]:
    """Read-only per-session footprint and age, with stale (≥30 d, ≥90 d) token totals."""
    now = time.time() if now is None else now
    prints = queries.footprints(queries.settled(runtime))

    def age_days(fp: Footprint) -> float | None:
        return None if fp.last_at is None else max(0.0, (now - fp.last_at) / DAY)

    def stale(days: float) -> dict[str, int]:
        hit = [fp for fp in prints if (a := age_days(fp)) is not None and a >= days]
        return {"sessions": len(hit), "messages": sum(f.messages for f in hit), "tokens": sum(f.tokens for f in hit)}

    biggest = sorted(prints, key=lambda f: (-f.tokens, f.session_id))[:limit]
    return {"read_only": True, "sessions": len(prints), "messages": sum(f.messages for f in prints),
            "tokens": sum(f.tokens for f in prints), "stale_30d": stale(30), "stale_90d": stale(90),
            "largest_sessions": [{"session_id": f.session_id, "platform": f.platform, "messages": f.messages,
                                  "tokens": f.tokens, "nodes": f.nodes,
                                  "age_days": None if (a := age_days(f)) is None else round(a, 1)}
                                 for f in biggest]}
