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


# -- spoken periods: read by the message grammar (expressions.py) in its standalone mode -----
WED = "2026-06-10T14:00:00"  # a Wednesday
SUN = "2026-06-14T09:00:00"
MON = "2026-06-15T09:00:00"


@pytest.mark.parametrize(
    ("text", "now", "first", "end", "granularity"),
    [
        # weekdays: the nearest one strictly before today, with or without "last"/"on"
        ("last tuesday", WED, "2026-06-09", "2026-06-10", "day"),
        ("tuesday", WED, "2026-06-09", "2026-06-10", "day"),
        ("Tuesday", WED, "2026-06-09", "2026-06-10", "day"),
        ("on friday", WED, "2026-06-05", "2026-06-06", "day"),
        ("wednesday", WED, "2026-06-03", "2026-06-04", "day"),
        ("last sat", WED, "2026-06-06", "2026-06-07", "day"),
        ("this monday", WED, "2026-06-08", "2026-06-09", "day"),
        # N units ago: number words or digits; weeks and months are calendar units
        ("two weeks ago", WED, "2026-05-25", "2026-06-01", "week"),
        ("2 weeks ago", WED, "2026-05-25", "2026-06-01", "week"),
        ("three days ago", WED, "2026-06-07", "2026-06-08", "day"),
        ("a week ago", WED, "2026-06-01", "2026-06-08", "week"),
        ("a month ago", WED, "2026-05-01", "2026-06-01", "month"),
        ("two weekends ago", WED, "2026-05-30", "2026-06-01", "day"),
        ("twenty-one days ago", WED, "2026-05-20", "2026-05-21", "day"),  # a compound count, not "one days ago"
        ("last yr", WED, "2025-01-01", "2026-01-01", "year"),  # a short form: last year, not the past twelve months
        ("mon-wed", WED, "2026-06-08", "2026-06-11", "day"),  # a dash joins two weekdays or months
        ("jan-mar", WED, "2026-01-01", "2026-04-01", "month"),
        # parts of a day: the whole UTC day
        ("this morning", WED, "2026-06-10", "2026-06-11", "day"),
        ("this afternoon", WED, "2026-06-10", "2026-06-11", "day"),
        ("tonight", WED, "2026-06-10", "2026-06-11", "day"),
        ("right now", WED, "2026-06-10", "2026-06-11", "day"),
        ("currently", WED, "2026-06-10", "2026-06-11", "day"),
        ("earlier today", WED, "2026-06-10", "2026-06-11", "day"),
        ("yesterday evening", WED, "2026-06-09", "2026-06-10", "day"),
        ("yesterday morning", WED, "2026-06-09", "2026-06-10", "day"),
        ("last night", WED, "2026-06-09", "2026-06-10", "day"),
        ("the day before yesterday", WED, "2026-06-08", "2026-06-09", "day"),
        # weekends: Saturday and Sunday; "this weekend" is the one already begun
        ("last weekend", WED, "2026-06-06", "2026-06-08", "day"),
        ("this weekend", WED, "2026-06-06", "2026-06-08", "day"),
        ("this weekend", SUN, "2026-06-13", "2026-06-15", "day"),
        ("this weekend", MON, "2026-06-13", "2026-06-15", "day"),
        ("last weekend", SUN, "2026-06-06", "2026-06-08", "day"),
        ("the weekend", MON, "2026-06-13", "2026-06-15", "day"),
        # rolling windows of whole days ending today
        ("past 3 days", WED, "2026-06-08", "2026-06-11", "day"),
        ("last 3 days", WED, "2026-06-08", "2026-06-11", "day"),
        ("last three days", WED, "2026-06-08", "2026-06-11", "day"),
        ("the past two weeks", WED, "2026-05-28", "2026-06-11", "day"),
        ("past week", WED, "2026-06-04", "2026-06-11", "day"),
        ("3 days", WED, "2026-06-08", "2026-06-11", "day"),
        ("past 6 months", WED, "2025-12-11", "2026-06-11", "day"),
        # months: the most recent one not after this month; with a year, that one
        ("in march", WED, "2026-03-01", "2026-04-01", "month"),
        ("march", WED, "2026-03-01", "2026-04-01", "month"),
        ("in july", WED, "2025-07-01", "2025-08-01", "month"),
        ("in june", WED, "2026-06-01", "2026-07-01", "month"),
        ("last june", WED, "2025-06-01", "2025-07-01", "month"),
        ("march 2026", WED, "2026-03-01", "2026-04-01", "month"),
        ("Mar 2025", WED, "2025-03-01", "2025-04-01", "month"),
        ("in may", WED, "2026-05-01", "2026-06-01", "month"),
        ("in 2025", WED, "2025-01-01", "2026-01-01", "year"),
        ("3 march 2026", WED, "2026-03-03", "2026-03-04", "day"),
        ("13/4/2026", WED, "2026-04-13", "2026-04-14", "day"),
        # this/last units, with trailing punctuation and an opening word
        ("this week", WED, "2026-06-08", "2026-06-15", "week"),
        ("earlier this week", WED, "2026-06-08", "2026-06-11", "day"),  # up to today
        ("during last week", WED, "2026-06-01", "2026-06-08", "week"),
        ("last month?", WED, "2026-05-01", "2026-06-01", "month"),
        # units before, after or holding a stated day
        ("the week before 2026-06-01", WED, "2026-05-25", "2026-06-01", "week"),
        ("the friday before last sunday", WED, "2026-06-05", "2026-06-06", "day"),
        ("two days after 3 may", WED, "2026-05-05", "2026-05-06", "day"),
        ("the week of 2026-05-04", WED, "2026-05-04", "2026-05-11", "week"),
        ("the weekend before 2026-06-01", WED, "2026-05-30", "2026-06-01", "day"),
        ("the week before last", WED, "2026-05-25", "2026-06-01", "week"),
        # since / from ... to / between ... and: each end any period
        ("since monday", WED, "2026-06-08", "2026-06-11", "day"),
        ("since last week", WED, "2026-06-01", "2026-06-11", "day"),
        ("since 2026-05-30", WED, "2026-05-30", "2026-06-11", "day"),
        ("from monday to yesterday", WED, "2026-06-08", "2026-06-10", "day"),
        ("from monday to friday last week", WED, "2026-06-01", "2026-06-06", "day"),  # read whole
        ("between 2026-05-01 and 2026-05-03", WED, "2026-05-01", "2026-05-04", "day"),
        ("last monday..yesterday", WED, "2026-06-08", "2026-06-10", "day"),
        ("2026-05..last week", WED, "2026-05-01", "2026-06-08", "day"),
        # quarters and decades; a day written with dots
        ("q1 2026", WED, "2026-01-01", "2026-04-01", "month"),
        ("last quarter", WED, "2026-01-01", "2026-04-01", "month"),
        ("q3", WED, "2025-07-01", "2025-10-01", "month"),  # not begun yet: the last one
        ("the 1990s", WED, "1990-01-01", "2000-01-01", "year"),
        ("since q2", WED, "2026-04-01", "2026-06-11", "day"),
        ("13.05.2026", WED, "2026-05-13", "2026-05-14", "day"),
    ],
)
def test_spoken_periods_resolve_against_the_callers_clock(text, now, first, end, granularity):
    period = parse_period(text, at(now))
    assert days(period) == (date.fromisoformat(first), date.fromisoformat(end)), period
    assert period.granularity == granularity
    assert period.start.tzinfo == UTC


@pytest.mark.parametrize(("text", "hours"), [("last 24 hours", 24), ("past 24 hours", 24), ("the last 24 hours", 24),
                                             ("last hour", 1), ("past hour", 1), ("the last three hours", 3),
                                             ("last 2 hrs", 2), ("48 hours", 48)])
def test_spoken_hour_windows_roll_back_from_now(text, hours):
    now = at(WED)
    period = parse_period(text, now)
    assert (period.start, period.end, period.granularity) == (now - timedelta(hours=hours), now, "hour")


def test_a_spoken_period_labels_the_resolved_dates():
    now = at(WED)
    assert parse_period("last tuesday", now).label == "last tuesday (2026-06-09)"
    assert parse_period("two weeks ago", now).label == "two weeks ago (2026-W22)"
    assert parse_period("last weekend", now).label == "last weekend (2026-06-06..2026-06-07)"
    assert parse_period("from monday to yesterday", now).label == "monday..yesterday (2026-06-08..2026-06-09)"
    assert parse_period("2026-01-01..2026-01-07", now).label == "2026-01-01..2026-01-07"


@pytest.mark.parametrize(("text", "reason"), [
    ("next week", "after today"),
    ("tomorrow", "after today"),
    ("next tuesday", "after today"),
    ("this friday", "after today"),
    ("last few days", "give a number"),
    ("recently", "names no time"),
    ("a while ago", "names no time"),
    ("about two weeks ago", "exact count"),
    ("in the summer", "give months"),
    ("3/4/2026", "YYYY-MM-DD"),
    ("until march", "open-ended"),
    ("before yesterday", "open-ended"),
    ("last 4000 days", "more than 3660 days"),
    ("9999 weeks ago", "more than 520 weeks"),
    ("tuesday and friday", "not a recognised form"),
    ("what did we do last tuesday", "not a recognised form"),
    ("since someday", "not a period"),
    ("from monday to someday", "not a period"),
    ("between monday and", "not a recognised form"),
    ("last 0 hours", "between 1 and"),
])
def test_unknown_spoken_forms_say_why_and_list_the_accepted_forms(text, reason):
    with pytest.raises(PeriodError) as caught:
        parse_period(text, at(WED))
    assert reason in caught.value.reason, caught.value.reason
    message = str(caught.value)
    assert "accepted forms" in message and "last tuesday" in message and "YYYY-Www" in message
    assert len(message) < 1000


def test_the_grammar_periods_use_is_the_one_messages_use():
    """Standalone mode only lifts the sentence rules (capitals, tense cues, a preposition before a
    bare month); the same words in a message resolve the same way when the sentence says past."""
    from hermes_trove.dates.occurrence import resolve_occurrences

    now = at(WED)
    for phrase, sentence in (("last tuesday", "We met last Tuesday."), ("two weeks ago", "I went two weeks ago."),
                             ("in march", "I moved in March."), ("tuesday", "I went there on Tuesday."),
                             ("past 3 days", "It rained the past 3 days."), ("this weekend", "We hiked this weekend.")):
        [found] = [o for o in resolve_occurrences(sentence, now) if o.resolved]
        period = parse_period(phrase, now)
        assert (found.start, found.end) == (period.start, period.end), (phrase, sentence)


# -- the strict ISO forms, table-driven: accepted forms with their labels, then refusals -------
ISO_NOW = "2026-06-10T14:00:00"  # a Wednesday

ISO_FORMS = [
    # (text, first..last inclusive, granularity, label)
    ("2024", "2024-01-01..2024-12-31", "year", "2024"),
    ("1999", "1999-01-01..1999-12-31", "year", "1999"),
    ("2024-01", "2024-01-01..2024-01-31", "month", "2024-01"),
    ("2024-02", "2024-02-01..2024-02-29", "month", "2024-02"),
    ("2024-05.", "2024-05-01..2024-05-31", "month", "2024-05"),
    ("2024-05?", "2024-05-01..2024-05-31", "month", "2024-05"),
    (" 2024-05 ", "2024-05-01..2024-05-31", "month", "2024-05"),
    ("2024-W01", "2024-01-01..2024-01-07", "week", "2024-W01"),
    ("2024-w01", "2024-01-01..2024-01-07", "week", "2024-W01"),
    ("2020-W53", "2020-12-28..2021-01-03", "week", "2020-W53"),
    ("2026-W01", "2025-12-29..2026-01-04", "week", "2026-W01"),
    ("2024-02-29", "2024-02-29..2024-02-29", "day", "2024-02-29"),
    ("date:2024-02-29", "2024-02-29..2024-02-29", "day", "2024-02-29"),
    ("DATE:2024-02-29", "2024-02-29..2024-02-29", "day", "2024-02-29"),
    ("2023-12-31", "2023-12-31..2023-12-31", "day", "2023-12-31"),
    # ranges: from the start of one unit to the end of the other
    ("2024-01-01..2024-01-07", "2024-01-01..2024-01-07", "day", "2024-01-01..2024-01-07"),
    ("2024-01-01 .. 2024-01-07", "2024-01-01..2024-01-07", "day", "2024-01-01..2024-01-07"),
    ("2024-01-01/2024-01-07", "2024-01-01..2024-01-07", "day", "2024-01-01..2024-01-07"),
    ("from 2024-01-01 to 2024-01-07", "2024-01-01..2024-01-07", "day", "2024-01-01..2024-01-07"),
    ("from 2024-01-01 until 2024-01-03", "2024-01-01..2024-01-03", "day", "2024-01-01..2024-01-03"),
    ("1999-12-31..2000-01-01", "1999-12-31..2000-01-01", "day", "1999-12-31..2000-01-01"),
    ("2024-01..2024-03", "2024-01-01..2024-03-31", "day", "2024-01..2024-03 (2024-01-01..2024-03-31)"),
    ("between 2024 and 2025", "2024-01-01..2025-12-31", "day", "2024..2025 (2024-01-01..2025-12-31)"),
    ("2023..2024", "2023-01-01..2024-12-31", "day", "2023..2024 (2023-01-01..2024-12-31)"),
    ("2024-W01..2024-W02", "2024-01-01..2024-01-14", "day", "2024-w01..2024-w02 (2024-01-01..2024-01-14)"),
    ("2024-02-29..2024-02-29", "2024-02-29..2024-02-29", "day", "2024-02-29..2024-02-29"),
    # open ranges run to the end of today
    ("since 2026-06-01", "2026-06-01..2026-06-10", "day", "since 2026-06-01 (2026-06-01..2026-06-10)"),
    ("from 2026-06-01", "2026-06-01..2026-06-10", "day", "from 2026-06-01 (2026-06-01..2026-06-10)"),
    ("since 2026-W23", "2026-06-01..2026-06-10", "day", "since 2026-w23 (2026-06-01..2026-06-10)"),
    ("since 2026-06", "2026-06-01..2026-06-10", "day", "since 2026-06 (2026-06-01..2026-06-10)"),
]


@pytest.mark.parametrize(("text", "expected", "granularity", "label"), ISO_FORMS)
def test_iso_forms_resolve_to_their_calendar_units(text, expected, granularity, label):
    period = parse_period(text, at(ISO_NOW))
    first, _, last = expected.partition("..")
    assert days(period) == (date.fromisoformat(first), date.fromisoformat(last) + timedelta(days=1))
    assert (period.granularity, period.label) == (granularity, label)


@pytest.mark.parametrize(("text", "start", "end"), [
    ("2024-01-01T10:00Z..2024-01-01T12:00Z", "2024-01-01T10:00:00", "2024-01-01T12:00:00"),
    ("2024-01-01t10:00z/2024-01-01t11:00z", "2024-01-01T10:00:00", "2024-01-01T11:00:00"),
    ("2024-01-01T10:00:00+02:00..2024-01-02", "2024-01-01T08:00:00", "2024-01-03T00:00:00"),
    ("2024-01-01..2024-01-01T12:00Z", "2024-01-01T00:00:00", "2024-01-01T12:00:00"),
    ("2024-01-01T23:30:00-01:00..2024-01-03", "2024-01-02T00:30:00", "2024-01-04T00:00:00"),
    ("since 2026-06-10T13:00Z", "2026-06-10T13:00:00", ISO_NOW),
])
def test_a_datetime_end_makes_an_hour_aligned_range(text, start, end):
    period = parse_period(text, at(ISO_NOW))
    assert (period.start, period.end, period.granularity) == (at(start), at(end), "hour")


@pytest.mark.parametrize(("text", "reason"), [
    ("2024-13", "no such calendar date or week"),
    ("2024-00", "no such calendar date or week"),
    ("2024-02-30", "no such calendar date or week"),
    ("2023-02-29", "no such calendar date or week"),
    ("2021-W53", "no such calendar date or week"),
    ("2024-W00", "no such calendar date or week"),
    ("2024-W54", "no such calendar date or week"),
    ("0000", "no such calendar date or week"),
    ("9999-W52", "no such calendar date or week"),
    ("2024-1-5", "not a recognised form"),
    ("24-01-05", "not a recognised form"),
    ("2024/01/05", "not a recognised form"),
    ("20240105", "not a recognised form"),
    ("2024-W1", "not a recognised form"),
    ("10000", "not a recognised form"),
    ("date:2024-1-01", "not a recognised form"),
    ("2024-01-01-02", "not a recognised form"),
    ("2024-02-29T10:00Z", "not a recognised form"),
    ("2024-01-01/2024-01-02/2024-01-03", "not a recognised form"),
    ("between 2024-01 and", "not a recognised form"),
    ("2024-01-07..2024-01-01", "the range ends before it starts"),
    ("2024-12..2024-01", "the range ends before it starts"),
    ("2024-06-01T10:00..2024-06-01T09:00", "the range ends before it starts"),
    ("2024-01-01..2024-01-02..2024-01-03", "exactly one START and one END"),
    ("2024-01-01..", "exactly one START and one END"),
    ("..2024-01-01", "exactly one START and one END"),
    ("2024-01-01..someday", "range end 'someday' is not a period or an ISO datetime"),
    ("from 2024-01-01 to", "is not a period or an ISO datetime"),
    ("2024-01-01T25:00Z..2024-01-02", "bad datetime"),
    ("2024-13..2024-14", "range end '2024-13': no such calendar date or week"),
    ("since 2030-01-01", "it begins after now"),
    ("since 2026-06-10T15:00Z", "it begins after now"),
    ("", "empty"),
    ("   ", "empty"),
    ("x" * (MAX_PERIOD_CHARS + 1), f"longer than {MAX_PERIOD_CHARS} characters"),
    ("0d", "the count must be between 1 and 3660"),
    ("3661d", "the count must be between 1 and 3660"),
    ("0h", "the count must be between 1 and 8784"),
    ("8785h", "the count must be between 1 and 8784"),
])
def test_bad_iso_forms_say_why(text, reason):
    with pytest.raises(PeriodError) as caught:
        parse_period(text, at(ISO_NOW))
    assert reason in caught.value.reason, caught.value.reason
