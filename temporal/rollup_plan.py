"""Rollup planning, pure: which UTC periods a leaf summary touches, which rollups a pass
should build next, and whether ready rollups cover a window.

Periods are UTC days, ISO weeks (Monday first) and calendar months, as epoch seconds
``[start, end)``. A day rollup is built from leaf summaries, a week from its days, a month
from the whole ISO weeks inside it plus its edge days. No storage and no model here.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from ..dates import intervals as iv
from .periods import unit_label

KINDS = ("day", "week", "month")
_SPANS = {"day": iv.day_span, "week": iv.week_span, "month": lambda day: iv.month_span(day.year, day.month)}
DAY_S = 86400.0
# A leaf whose messages spread over more days than this (an idle session compacted weeks
# later) belongs to the days of its first and last message only, not to every day between.
MAX_LEAF_SPAN_DAYS = 31


@dataclass(frozen=True, order=True)
class PeriodKey:
    kind: str
    start: float
    end: float

    @property
    def label(self) -> str:
        return unit_label(_day(self.start), self.kind)

    @property
    def description(self) -> str:
        """Human words for prompts: 'Friday 3 May 2024', 'ISO week 2024-W18 (...)', 'May 2024'."""
        first, last = _day(self.start), _day(self.end) - timedelta(days=1)
        if self.kind == "day":
            return f"{first.strftime('%A')} {first.day} {first.strftime('%B %Y')}"
        if self.kind == "week":
            return (f"ISO week {self.label} (Monday {first.day} {first.strftime('%B %Y')} to "
                    f"Sunday {last.day} {last.strftime('%B %Y')})")
        return first.strftime("%B %Y")


@dataclass(frozen=True)
class RollupState:
    """What planning needs to know of one stored rollup (no summary text)."""

    rollup_id: int
    kind: str
    start: float
    end: float
    status: str
    generation: int = 0
    attempts: int = 0
    claimed_at: float | None = None
    failed_at: float | None = None
    scope: str = ""  # the owner scope whose sessions' leaves the rollup summarises

    @property
    def key(self) -> PeriodKey:
        return PeriodKey(self.kind, self.start, self.end)


@dataclass(frozen=True)
class Coverage:
    """How ready rollups cover a window: ``sections`` in time order, and the days that hold
    leaf summaries no ready rollup covers, each with the state of its rollup."""

    sections: tuple[RollupState, ...]
    missing: tuple[tuple[PeriodKey, str], ...]
    leaf_days: int

    @property
    def covered_days(self) -> int:
        return self.leaf_days - len(self.missing)


def _day(ts: float) -> date:
    return datetime.fromtimestamp(float(ts), tz=UTC).date()


def _at(day: date) -> float:
    return iv.midnight(day).timestamp()


def period_of(kind: str, ts: float) -> PeriodKey:
    """The ``kind`` period holding the instant ``ts``."""
    day = _day(ts)
    if kind not in _SPANS:
        raise ValueError(f"unknown period kind {kind!r}; one of {', '.join(KINDS)}")
    first, end = _SPANS[kind](day)
    return PeriodKey(kind, _at(first), _at(end))


def leaf_days(earliest: float, latest: float) -> list[float]:
    """Day starts a leaf summary with messages from ``earliest`` to ``latest`` belongs to."""
    first, last = _day(earliest), _day(max(earliest, latest))
    span = (last - first).days + 1
    if span > MAX_LEAF_SPAN_DAYS:
        return [_at(first), _at(last)]
    return [_at(first + timedelta(days=i)) for i in range(span)]


def periods_for_leaves(spans: Iterable[tuple[float, float]]) -> set[PeriodKey]:
    """Every day, week and month the leaves with these ``(earliest, latest)`` spans touch."""
    out: set[PeriodKey] = set()
    for earliest, latest in spans:
        for day in leaf_days(earliest, latest):
            out.update(period_of(kind, day) for kind in KINDS)
    return out


def parts_of(key: PeriodKey) -> list[PeriodKey]:
    """The rollups a week or month is built from (days; whole inner weeks plus edge days)."""
    if key.kind == "day":
        return []
    if key.kind == "week":
        return [PeriodKey("day", key.start + i * DAY_S, key.start + (i + 1) * DAY_S) for i in range(7)]
    out: list[PeriodKey] = []
    cursor = key.start
    while cursor < key.end:
        week = period_of("week", cursor)
        if week.start == cursor and week.end <= key.end:
            out.append(week)
            cursor = week.end
        else:
            out.append(period_of("day", cursor))
            cursor += DAY_S
    return out


def needs_build(row: RollupState, now: float, *, claim_ttl: float, retry_after: float) -> bool:
    """A closed period whose rollup is new, stale, abandoned mid-build, or failed long enough ago."""
    if row.end > now:
        return False
    if row.status in ("pending", "stale"):
        return True
    if row.status == "building":
        return row.claimed_at is None or now - row.claimed_at > claim_ttl
    if row.status == "failed":
        return row.failed_at is None or now - row.failed_at > retry_after
    return False


def plan_builds(rows: Sequence[RollupState], now: float, *, limit: int, claim_ttl: float,
                retry_after: float) -> list[RollupState]:
    """The next rollups to build: days before weeks before months, newest first; a week or
    month waits until every part of it (in its own scope) that has a rollup is ready."""
    by_key = {(r.scope, r.kind, r.start): r for r in rows}

    def parts_ready(row: RollupState) -> bool:
        found = (by_key.get((row.scope, part.kind, part.start)) for part in parts_of(row.key))
        return all(part is None or part.status == "ready" for part in found)

    todo = [r for r in rows if needs_build(r, now, claim_ttl=claim_ttl, retry_after=retry_after)
            and parts_ready(r)]
    todo.sort(key=lambda r: (KINDS.index(r.kind), -r.start))
    return todo[:max(0, limit)]


def plan_coverage(start: float, end: float, rows: Mapping[tuple[str, float], RollupState],
                  days_with_leaves: Iterable[float]) -> Coverage:
    """Cover the day-aligned window ``[start, end)`` with the largest ready rollups.

    At each day the walk takes a ready month starting there and ending inside the window,
    else such a week, else the day's own rollup. A day holding leaf summaries that none of
    these covers is reported missing with its rollup's status ("not built" without a row).
    """
    leaf_set = {d for d in days_with_leaves if start <= d < end}
    sections: list[RollupState] = []
    missing: list[tuple[PeriodKey, str]] = []
    cursor = start
    while cursor < end:
        taken = None
        for kind in ("month", "week"):
            key = period_of(kind, cursor)
            row = rows.get((kind, key.start))
            if key.start == cursor and key.end <= end and row is not None and row.status == "ready":
                taken = row
                break
        if taken is not None:
            sections.append(taken)
            cursor = taken.end
            continue
        day = period_of("day", cursor)
        row = rows.get(("day", day.start))
        if row is not None and row.status == "ready":
            sections.append(row)
        elif day.start in leaf_set:
            missing.append((day, row.status if row is not None else "not built"))
        cursor = day.end
    return Coverage(tuple(sections), tuple(missing), len(leaf_set))
