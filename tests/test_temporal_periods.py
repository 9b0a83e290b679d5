from __future__ import annotations

import dataclasses
from datetime import UTC, date, datetime, timedelta

import pytest

from hermes_trove.temporal.periods import MAX_PERIOD_CHARS, Period, PeriodError, parse_period


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC) if "+" not in text else datetime.fromisoformat(text)


def days(period: Period) -> tuple[date, date]:
    return period.start.date(), period.end.date()


@pytest.mark.parametrize(
    ("text", "now", "first", "end", "granularity"),
    [
        # midnight UTC belongs to the day it starts
        ("today", "2024-03-05T00:00:00", "2024-03-05", "2024-03-06", "day"),
        ("today", "2024-03-04T23:59:59", "2024-03-04", "2024-03-05", "day"),
        ("today", "2024-03-05T01:00:00+02:00", "2024-03-04", "2024-03-05", "day"),
        ("yesterday", "2024-03-05T00:00:00", "2024-03-04", "2024-03-05", "day"),
        ("yesterday", "2024-03-01T08:00:00", "2024-02-29", "2024-03-01", "day"),
        ("yesterday", "2024-01-01T00:30:00", "2023-12-31", "2024-01-01", "day"),
        # weeks start on Monday (ISO)
        ("this week", "2024-03-04T00:00:00", "2024-03-04", "2024-03-11", "week"),
        ("this week", "2024-03-10T23:59:59", "2024-03-04", "2024-03-11", "week"),
        ("last week", "2024-03-10T23:59:59", "2024-02-26", "2024-03-04", "week"),
        ("last week", "2024-03-11T00:00:00", "2024-03-04", "2024-03-11", "week"),
        # year boundary in January
        ("last week", "2024-01-03T10:00:00", "2023-12-25", "2024-01-01", "week"),
        ("last week", "2024-01-01T00:00:00", "2023-12-25", "2024-01-01", "week"),
        ("last month", "2024-01-15T12:00:00", "2023-12-01", "2024-01-01", "month"),
        ("last year", "2024-01-15T12:00:00", "2023-01-01", "2024-01-01", "year"),
        ("this week", "2021-01-01T12:00:00", "2020-12-28", "2021-01-04", "week"),
        # month ends and leap days
        ("this month", "2024-01-31T23:59:59", "2024-01-01", "2024-02-01", "month"),
        ("this month", "2024-02-29T12:00:00", "2024-02-01", "2024-03-01", "month"),
        ("last month", "2024-03-31T12:00:00", "2024-02-01", "2024-03-01", "month"),
        ("2024-02-29", "2030-01-01T00:00:00", "2024-02-29", "2024-03-01", "day"),
        ("date:2024-02-29", "2030-01-01T00:00:00", "2024-02-29", "2024-03-01", "day"),
        ("2024-02", "2030-01-01T00:00:00", "2024-02-01", "2024-03-01", "month"),
        ("2023-02", "2030-01-01T00:00:00", "2023-02-01", "2023-03-01", "month"),
        ("2023-12", "2030-01-01T00:00:00", "2023-12-01", "2024-01-01", "month"),
        ("2024", "2030-01-01T00:00:00", "2024-01-01", "2025-01-01", "year"),
        # ISO weeks 1 and 53
        ("2021-W01", "2030-01-01T00:00:00", "2021-01-04", "2021-01-11", "week"),
        ("2025-W01", "2030-01-01T00:00:00", "2024-12-30", "2025-01-06", "week"),
        ("2020-W53", "2030-01-01T00:00:00", "2020-12-28", "2021-01-04", "week"),
        ("2026-w53", "2030-01-01T00:00:00", "2026-12-28", "2027-01-04", "week"),
        # N days end with today
        ("7d", "2024-03-05T10:00:00", "2024-02-28", "2024-03-06", "day"),
        ("last 7d", "2024-03-05T10:00:00", "2024-02-28", "2024-03-06", "day"),
        ("last 3 days", "2024-03-01T10:00:00", "2024-02-28", "2024-03-02", "day"),
        ("1d", "2024-03-05T10:00:00", "2024-03-05", "2024-03-06", "day"),
        # ranges: date-like ends are inclusive
        ("2024-01-01..2024-01-07", "2030-01-01T00:00:00", "2024-01-01", "2024-01-08", "day"),
        ("2024-01-01/2024-01-07", "2030-01-01T00:00:00", "2024-01-01", "2024-01-08", "day"),
        ("2024-01..2024-02", "2030-01-01T00:00:00", "2024-01-01", "2024-03-01", "day"),
        ("2023-W52..2024-W01", "2030-01-01T00:00:00", "2023-12-25", "2024-01-08", "day"),
        ("2024-02-29..2024-02-29", "2030-01-01T00:00:00", "2024-02-29", "2024-03-01", "day"),
        ("  Last   WEEK ", "2024-03-06T10:00:00", "2024-02-26", "2024-03-04", "week"),
    ],
)
def test_parse_period_returns_utc_half_open_window(text, now, first, end, granularity):
    period = parse_period(text, at(now))
    assert days(period) == (date.fromisoformat(first), date.fromisoformat(end))
    assert period.granularity == granularity
    assert period.start.tzinfo == UTC and period.end.tzinfo == UTC
    if granularity != "hour":
        assert period.start.time() == period.end.time() == datetime.min.time()


@pytest.mark.parametrize(("text", "hours"), [("last 24h", 24), ("24h", 24), ("last 3 hours", 3), ("last 1h", 1)])
def test_hour_windows_roll_back_from_now(text, hours):
    now = at("2024-03-01T00:30:00")
    period = parse_period(text, now)
    assert period.end == now
    assert period.start == now - timedelta(hours=hours)
    assert period.granularity == "hour"


def test_now_may_be_epoch_seconds():
    moment = at("2024-02-29T23:00:00")
    assert parse_period("today", moment.timestamp()) == parse_period("today", moment)
    assert days(parse_period("today", int(moment.timestamp()))) == (date(2024, 2, 29), date(2024, 3, 1))


def test_naive_now_is_refused():
    with pytest.raises(ValueError, match="timezone-aware"):
        parse_period("today", datetime(2024, 3, 1))


def test_datetime_range_ends_are_exclusive_and_converted_to_utc():
    period = parse_period("2024-01-01T10:00:00+02:00/2024-01-02T12:00Z", at("2030-01-01T00:00:00"))
    assert period.start == at("2024-01-01T08:00:00")
    assert period.end == at("2024-01-02T12:00:00")
    assert period.granularity == "hour"


def test_period_is_frozen_and_serialises_with_utc_z():
    period = parse_period("2024-02", at("2030-01-01T00:00:00"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        period.label = "x"  # type: ignore[misc]
    assert period.to_dict() == {"start": "2024-02-01T00:00:00Z", "end": "2024-03-01T00:00:00Z",
                                "label": "2024-02", "granularity": "month"}


@pytest.mark.parametrize(
    "text",
    ["", "   ", "tomorrow", "last fortnight", "week", "2024-13", "2024-02-30", "2023-02-29", "2021-W53",
     "2024-W00", "0h", "0d", "99999h", "last 4000 days", "2024-01-07..2024-01-01", "2024-01-01..2024-01-02..2024-01-03",
     "2024-01-01..", "..2024-01-01", "2024-01-01..someday", "9999-W52", "x" * (MAX_PERIOD_CHARS + 1),
     "7" * 10_000, "last " + "1" * 195],
)
def test_bad_periods_raise_a_value_error_listing_the_accepted_forms(text):
    with pytest.raises(PeriodError) as caught:
        parse_period(text, at("2024-03-05T10:00:00"))
    assert isinstance(caught.value, ValueError)
    message = str(caught.value)
    assert "accepted forms" in message and "YYYY-Www" in message and "last Nh" in message
    assert len(message) < 1000


def test_non_string_period_is_a_period_error():
    with pytest.raises(PeriodError):
        parse_period(7, at("2024-03-05T10:00:00"))  # type: ignore[arg-type]
