"""Calendar arithmetic on UTC days, ISO weeks, months and years (dates/intervals.py), table-driven.

Days in the tables are ISO strings; a span is written ``first..last`` with the last day included
(the functions return half-open ``[first, end)`` pairs).
"""
from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from hermes_trove.dates import intervals as iv


def d(text: str) -> date:
    return date.fromisoformat(text)


def span(text: str) -> tuple[date, date]:
    first, _, last = text.partition("..")
    return d(first), d(last or first) + timedelta(days=1)


@pytest.mark.parametrize(("day", "monday"), [
    ("2024-05-15", "2024-05-13"), ("2024-05-13", "2024-05-13"), ("2024-05-19", "2024-05-13"),
    ("2024-01-01", "2024-01-01"), ("2023-01-01", "2022-12-26"), ("2021-01-03", "2020-12-28"),
    ("2024-03-01", "2024-02-26"), ("2000-02-29", "2000-02-28"),
])
def test_week_start_is_the_monday_of_the_iso_week(day, monday):
    assert iv.week_start(d(day)) == d(monday)


@pytest.mark.parametrize(("day", "offset", "expected"), [
    ("2024-05-15", 0, "2024-05-13..2024-05-19"),
    ("2024-05-15", -1, "2024-05-06..2024-05-12"),
    ("2024-05-15", 1, "2024-05-20..2024-05-26"),
    ("2024-01-03", -1, "2023-12-25..2023-12-31"),
    ("2020-12-31", 0, "2020-12-28..2021-01-03"),
    ("2024-05-15", -52, "2023-05-15..2023-05-21"),
])
def test_week_span_shifts_whole_iso_weeks(day, offset, expected):
    assert iv.week_span(d(day), offset) == span(expected)


@pytest.mark.parametrize(("day", "offset", "expected"), [
    ("2024-05-15", 0, "2024-05-18..2024-05-19"),
    ("2024-05-15", -1, "2024-05-11..2024-05-12"),
    ("2024-05-18", 0, "2024-05-18..2024-05-19"),
    ("2024-05-19", -1, "2024-05-11..2024-05-12"),
    ("2024-05-13", -2, "2024-05-04..2024-05-05"),
    ("2024-12-30", 0, "2025-01-04..2025-01-05"),
])
def test_weekend_span_is_saturday_and_sunday_of_the_week(day, offset, expected):
    assert iv.weekend_span(d(day), offset) == span(expected)


@pytest.mark.parametrize(("first", "count", "expected"), [
    ("2024-01-01", 1, "2024-02-01"), ("2024-01-01", -1, "2023-12-01"), ("2024-12-01", 1, "2025-01-01"),
    ("2024-03-01", -14, "2023-01-01"), ("2024-05-01", 0, "2024-05-01"), ("2024-05-01", 24, "2026-05-01"),
    ("2024-01-01", -12, "2023-01-01"),
])
def test_add_months_moves_first_days_of_months(first, count, expected):
    assert iv.add_months(d(first), count) == d(expected)


@pytest.mark.parametrize(("day", "count", "expected"), [
    ("2024-03-31", -1, "2024-02-29"), ("2023-03-31", -1, "2023-02-28"), ("2024-01-31", 1, "2024-02-29"),
    ("2024-05-15", -12, "2023-05-15"), ("2024-02-29", -12, "2023-02-28"), ("2024-02-29", 48, "2028-02-29"),
    ("2024-08-31", 1, "2024-09-30"),
])
def test_shift_months_clamps_to_the_target_months_last_day(day, count, expected):
    assert iv.shift_months(d(day), count) == d(expected)


@pytest.mark.parametrize(("year", "month", "expected"), [
    (2024, 2, "2024-02-01..2024-02-29"), (2023, 2, "2023-02-01..2023-02-28"), (2024, 12, "2024-12-01..2024-12-31"),
    (1900, 2, "1900-02-01..1900-02-28"), (2000, 2, "2000-02-01..2000-02-29"),
])
def test_month_span_covers_the_whole_month(year, month, expected):
    assert iv.month_span(year, month) == span(expected)


@pytest.mark.parametrize(("year", "week", "expected"), [
    (2024, 1, "2024-01-01..2024-01-07"), (2020, 53, "2020-12-28..2021-01-03"), (2025, 1, "2024-12-30..2025-01-05"),
    (2026, 53, "2026-12-28..2027-01-03"), (2021, 1, "2021-01-04..2021-01-10"),
])
def test_iso_week_span_of_a_year_and_week(year, week, expected):
    assert iv.iso_week_span(year, week) == span(expected)


@pytest.mark.parametrize(("year", "week"), [(2021, 53), (2024, 0), (2024, 54)])
def test_iso_week_span_refuses_weeks_that_do_not_exist(year, week):
    with pytest.raises(ValueError):
        iv.iso_week_span(year, week)


@pytest.mark.parametrize(("day", "weekday", "before", "after"), [
    ("2024-05-15", 4, "2024-05-10", "2024-05-17"),  # Wednesday -> Friday
    ("2024-05-15", 2, "2024-05-08", "2024-05-22"),  # Wednesday -> Wednesday: strictly, a week away
    ("2024-05-15", 1, "2024-05-14", "2024-05-21"),
    ("2024-05-15", 3, "2024-05-09", "2024-05-16"),
    ("2024-01-01", 6, "2023-12-31", "2024-01-07"),  # Monday -> Sunday across a year
    ("2024-03-01", 3, "2024-02-29", "2024-03-07"),
])
def test_weekday_before_and_after_are_strict(day, weekday, before, after):
    assert iv.weekday_before(d(day), weekday) == d(before)
    assert iv.weekday_after(d(day), weekday) == d(after)


@pytest.mark.parametrize(("today", "month", "forward", "strict", "year"), [
    ("2024-05-15", 3, False, False, 2024), ("2024-05-15", 6, False, False, 2023),
    ("2024-05-15", 5, False, False, 2024), ("2024-05-15", 5, False, True, 2023),
    ("2024-05-15", 6, True, False, 2024), ("2024-05-15", 3, True, False, 2025),
    ("2024-05-15", 5, True, False, 2024), ("2024-05-15", 5, True, True, 2025),
    ("2024-01-01", 12, False, True, 2023), ("2024-12-31", 1, True, True, 2025),
])
def test_month_year_is_the_nearest_such_month_back_or_ahead(today, month, forward, strict, year):
    assert iv.month_year(d(today), month, forward=forward, strict=strict) == year


@pytest.mark.parametrize(("today", "month", "day", "forward", "expected"), [
    ("2024-05-15", 5, 15, False, "2024-05-15"), ("2024-05-15", 5, 16, False, "2023-05-16"),
    ("2024-05-15", 5, 16, True, "2024-05-16"), ("2024-05-15", 5, 14, True, "2025-05-14"),
    ("2023-06-01", 2, 29, False, "2020-02-29"), ("2023-06-01", 2, 29, True, "2024-02-29"),
    ("2024-01-01", 12, 31, False, "2023-12-31"),
])
def test_day_month_date_finds_the_nearest_existing_date(today, month, day, forward, expected):
    assert iv.day_month_date(d(today), month, day, forward=forward) == d(expected)


@pytest.mark.parametrize(("today", "day", "forward", "expected"), [
    ("2024-05-15", 5, False, "2024-05-05"), ("2024-05-15", 15, False, "2024-04-15"),
    ("2024-05-15", 20, False, "2024-04-20"), ("2024-05-15", 20, True, "2024-05-20"),
    ("2024-05-15", 15, True, "2024-06-15"), ("2024-03-01", 31, False, "2024-01-31"),
    ("2024-03-01", 30, False, "2024-01-30"), ("2024-01-31", 31, True, "2024-03-31"),
])
def test_day_of_month_date_is_strictly_before_or_after_today(today, day, forward, expected):
    assert iv.day_of_month_date(d(today), day, forward=forward) == d(expected)


def test_year_and_day_spans():
    assert iv.year_span(2024) == span("2024-01-01..2024-12-31")
    assert iv.day_span(d("2024-02-28"), 2) == span("2024-02-28..2024-02-29")
    assert iv.utc_bounds(d("2024-02-29"), d("2024-03-01")) == (datetime(2024, 2, 29, tzinfo=UTC),
                                                                 datetime(2024, 3, 1, tzinfo=UTC))


@pytest.mark.parametrize(("moment", "expected"), [
    (datetime(2024, 1, 1, 1, tzinfo=timezone(timedelta(hours=3))), datetime(2023, 12, 31, 22, tzinfo=UTC)),
    (0, datetime(1970, 1, 1, tzinfo=UTC)),
    (1704067200.5, datetime(2024, 1, 1, 0, 0, 0, 500000, tzinfo=UTC)),
])
def test_as_utc_takes_aware_datetimes_and_epoch_seconds(moment, expected):
    assert iv.as_utc(moment) == expected


@pytest.mark.parametrize(("moment", "error"), [
    (datetime(2024, 1, 1), ValueError), (True, TypeError), ("2024-01-01", TypeError), (None, TypeError),
])
def test_as_utc_refuses_naive_times_bools_and_other_types(moment, error):
    with pytest.raises(error):
        iv.as_utc(moment)


def test_iso_z_writes_utc_with_a_z_suffix():
    assert iv.iso_z(datetime(2024, 1, 1, 1, tzinfo=timezone(timedelta(hours=1)))) == "2024-01-01T00:00:00Z"
