"""Rollup planning (temporal/rollup_plan.py), table-driven: the periods an instant or a leaf
belongs to, what a week or month is built from, which rollups a pass builds and in what order,
and how ready rollups cover a window."""
from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from hermes_trove.temporal import rollup_plan as plan


def ts(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def key(kind: str, first: str) -> plan.PeriodKey:
    return plan.period_of(kind, ts(first))


@pytest.mark.parametrize(("kind", "instant", "label", "first", "end"), [
    ("day", "2024-05-15T23:59:59", "2024-05-15", "2024-05-15", "2024-05-16"),
    ("day", "2024-02-29T00:00:00", "2024-02-29", "2024-02-29", "2024-03-01"),
    ("week", "2024-05-15T12:00:00", "2024-W20", "2024-05-13", "2024-05-20"),
    ("week", "2024-12-31T12:00:00", "2025-W01", "2024-12-30", "2025-01-06"),
    ("week", "2021-01-03T12:00:00", "2020-W53", "2020-12-28", "2021-01-04"),
    ("month", "2024-02-10T08:00:00", "2024-02", "2024-02-01", "2024-03-01"),
    ("month", "2023-12-31T23:00:00", "2023-12", "2023-12-01", "2024-01-01"),
])
def test_period_of_an_instant(kind, instant, label, first, end):
    period = plan.period_of(kind, ts(instant))
    assert (period.kind, period.label, period.start, period.end) == (kind, label, ts(first), ts(end))


def test_an_unknown_period_kind_is_refused():
    with pytest.raises(ValueError, match="unknown period kind 'year'"):
        plan.period_of("year", ts("2024-05-15T00:00:00"))


@pytest.mark.parametrize(("kind", "first", "description"), [
    ("day", "2024-05-03", "Friday 3 May 2024"),
    ("week", "2024-04-29", "ISO week 2024-W18 (Monday 29 April 2024 to Sunday 5 May 2024)"),
    ("week", "2024-12-30", "ISO week 2025-W01 (Monday 30 December 2024 to Sunday 5 January 2025)"),
    ("month", "2024-05-01", "May 2024"),
])
def test_period_descriptions_read_as_words(kind, first, description):
    assert key(kind, first).description == description


@pytest.mark.parametrize(("earliest", "latest", "days"), [
    ("2024-05-15T10:00:00", "2024-05-15T11:00:00", ["2024-05-15"]),
    ("2024-05-15T23:00:00", "2024-05-16T01:00:00", ["2024-05-15", "2024-05-16"]),
    ("2024-05-15T10:00:00", "2024-05-14T10:00:00", ["2024-05-15"]),  # latest before earliest: one day
    ("2024-05-01T10:00:00", "2024-05-31T10:00:00", [f"2024-05-{n:02d}" for n in range(1, 32)]),
    ("2024-05-01T10:00:00", "2024-06-01T10:00:00", ["2024-05-01", "2024-06-01"]),  # over 31 days: the ends only
])
def test_leaf_days_are_the_days_a_leaf_spans(earliest, latest, days):
    assert plan.leaf_days(ts(earliest), ts(latest)) == [ts(f"{day}T00:00:00") for day in days]


def test_periods_for_leaves_are_each_days_week_and_month():
    found = plan.periods_for_leaves([(ts("2024-05-31T22:00:00"), ts("2024-06-01T01:00:00")),
                                     (ts("2024-05-31T09:00:00"), ts("2024-05-31T09:30:00"))])
    assert sorted((k.kind, k.label) for k in found) == [
        ("day", "2024-05-31"), ("day", "2024-06-01"), ("month", "2024-05"), ("month", "2024-06"), ("week", "2024-W22")]


@pytest.mark.parametrize(("kind", "first", "parts"), [
    ("day", "2024-05-15", []),
    ("week", "2024-05-13", [("day", f"2024-05-{n}") for n in range(13, 20)]),
    # February 2024 starts on a Thursday and ends on a Thursday
    ("month", "2024-02-01", [("day", "2024-02-01"), ("day", "2024-02-02"), ("day", "2024-02-03"),
                             ("day", "2024-02-04"), ("week", "2024-W06"), ("week", "2024-W07"),
                             ("week", "2024-W08"), ("day", "2024-02-26"), ("day", "2024-02-27"),
                             ("day", "2024-02-28"), ("day", "2024-02-29")]),
    # April 2024 starts on a Monday: four whole weeks and two edge days
    ("month", "2024-04-01", [("week", "2024-W14"), ("week", "2024-W15"), ("week", "2024-W16"),
                             ("week", "2024-W17"), ("day", "2024-04-29"), ("day", "2024-04-30")]),
])
def test_parts_of_a_period_tile_it_exactly(kind, first, parts):
    period = key(kind, first)
    found = plan.parts_of(period)
    assert [(p.kind, p.label) for p in found] == parts
    if found:
        assert found[0].start == period.start and found[-1].end == period.end
        assert all(a.end == b.start for a, b in zip(found, found[1:], strict=False))


NOW = ts("2024-05-20T12:00:00")
DAY = key("day", "2024-05-15")


def row(status: str, *, rollup_id: int = 1, kind: str = "day", first: str = "2024-05-15", scope: str = "",
        claimed_at: float | None = None, failed_at: float | None = None) -> plan.RollupState:
    period = key(kind, first)
    return plan.RollupState(rollup_id, kind, period.start, period.end, status, claimed_at=claimed_at,
                            failed_at=failed_at, scope=scope)


@pytest.mark.parametrize(("state", "build"), [
    (row("pending"), True),
    (row("stale"), True),
    (row("ready"), False),
    (row("building", claimed_at=NOW - 30), False),  # a live builder holds it
    (row("building", claimed_at=NOW - 120), True),  # abandoned: the claim is older than the ttl
    (row("building"), True),
    (row("failed", failed_at=NOW - 30), False),  # failed too recently to retry
    (row("failed", failed_at=NOW - 120), True),
    (row("failed"), True),
    (row("pending", first="2024-05-20"), False),  # the period is still open
    (row("pending", kind="week", first="2024-05-20"), False),
    (row("unknown"), False),
])
def test_needs_build_only_closed_periods_that_are_due(state, build):
    assert plan.needs_build(state, NOW, claim_ttl=60, retry_after=60) is build


def test_plan_builds_days_before_weeks_before_months_newest_first_within_limit():
    rows = [row("pending", rollup_id=1, first="2024-05-13"), row("pending", rollup_id=2, first="2024-05-15"),
            row("pending", rollup_id=3, kind="week", first="2024-05-06"),
            row("pending", rollup_id=4, kind="month", first="2024-04-01"),
            row("ready", rollup_id=5, first="2024-05-14")]
    picked = plan.plan_builds(rows, NOW, limit=10, claim_ttl=60, retry_after=60)
    assert [r.rollup_id for r in picked] == [2, 1, 3, 4]
    assert [r.rollup_id for r in plan.plan_builds(rows, NOW, limit=2, claim_ttl=60, retry_after=60)] == [2, 1]
    assert plan.plan_builds(rows, NOW, limit=-1, claim_ttl=60, retry_after=60) == []


def test_a_week_waits_for_its_days_in_its_own_scope_only():
    week = row("pending", rollup_id=10, kind="week", first="2024-05-06", scope="alice")
    others_day = row("pending", rollup_id=11, first="2024-05-08", scope="bob")
    own_day = row("building", rollup_id=12, first="2024-05-08", scope="alice", claimed_at=NOW)
    assert [r.rollup_id for r in plan.plan_builds([week, others_day], NOW, limit=9, claim_ttl=60,
                                                  retry_after=60)] == [11, 10]
    assert [r.rollup_id for r in plan.plan_builds([week, own_day], NOW, limit=9, claim_ttl=60,
                                                  retry_after=60)] == []


def ready_rows(*specs: tuple[str, str]) -> dict[tuple[str, float], plan.RollupState]:
    out = {}
    for number, (kind, first) in enumerate(specs):
        state = row("ready", rollup_id=number, kind=kind, first=first)
        out[(kind, state.start)] = state
    return out


def day_starts(*days: str) -> list[float]:
    return [ts(f"{day}T00:00:00") for day in days]


@pytest.mark.parametrize(("window", "rows", "leaves", "sections", "missing"), [
    # a ready month covers the whole window
    (("2024-04-01", "2024-05-01"), [("month", "2024-04-01")], ["2024-04-03"], ["2024-04"], []),
    # a window smaller than the month takes its weeks and days
    (("2024-04-01", "2024-04-10"), [("month", "2024-04-01"), ("week", "2024-04-01"), ("day", "2024-04-08")],
     ["2024-04-08"], ["2024-W14", "2024-04-08"], []),
    # a day with leaves and no rollup is missing; a day without leaves is not
    (("2024-05-13", "2024-05-16"), [("day", "2024-05-13")], ["2024-05-13", "2024-05-15"],
     ["2024-05-13"], [("2024-05-15", "not built")]),
    # nothing ready, nothing to cover
    (("2024-05-13", "2024-05-16"), [], [], [], []),
])
def test_plan_coverage_takes_the_largest_ready_rollups(window, rows, leaves, sections, missing):
    start, end = (ts(f"{day}T00:00:00") for day in window)
    coverage = plan.plan_coverage(start, end, ready_rows(*rows), day_starts(*leaves))
    assert [s.key.label for s in coverage.sections] == sections
    assert [(k.label, status) for k, status in coverage.missing] == missing
    assert coverage.leaf_days == len(leaves)
    assert coverage.covered_days == len(leaves) - len(missing)


def test_plan_coverage_reports_the_status_of_a_days_unready_rollup():
    rows = {("day", DAY.start): row("failed", failed_at=NOW)}
    coverage = plan.plan_coverage(DAY.start, DAY.end, rows, [DAY.start, DAY.start - 86400])
    assert [(k.label, status) for k, status in coverage.missing] == [("2024-05-15", "failed")]
    assert coverage.leaf_days == 1 and coverage.covered_days == 0


def test_period_keys_order_by_kind_then_start():
    keys = [key("week", "2024-05-13"), key("day", "2024-05-15"), key("day", "2024-05-14")]
    assert [k.label for k in sorted(keys)] == ["2024-05-14", "2024-05-15", "2024-W20"]
    assert key("day", "2024-05-15") == plan.PeriodKey("day", ts("2024-05-15T00:00:00"), ts("2024-05-16T00:00:00"))
    assert datetime.fromtimestamp(key("month", "2024-05-09").start, tz=UTC).date() == date(2024, 5, 1)
