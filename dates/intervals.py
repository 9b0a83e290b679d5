"""Calendar arithmetic on UTC days, ISO weeks, months and years.

Everything here is pure and works on ``date`` values; ``utc_bounds`` turns a half-open
``[first_day, end_day)`` pair into aware UTC datetimes. Weeks are ISO weeks (Monday first).
It does not parse text; expressions.py and the tools' periods do.
"""
from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta

DAY = timedelta(days=1)
WEEK = timedelta(days=7)


def as_utc(moment: datetime | int | float) -> datetime:
    """An aware datetime or epoch seconds -> aware UTC datetime; naive datetimes are refused."""
    if isinstance(moment, bool):
        raise TypeError("a time must be an aware datetime or epoch seconds, not a bool")
    if isinstance(moment, int | float):
        return datetime.fromtimestamp(float(moment), tz=UTC)
    if not isinstance(moment, datetime):
        raise TypeError(f"a time must be an aware datetime or epoch seconds, not {type(moment).__name__}")
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("a time must be timezone-aware (or epoch seconds)")
    return moment.astimezone(UTC)


def iso_z(moment: datetime) -> str:
    """``moment`` in UTC as ISO 8601 with a ``Z`` suffix."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def midnight(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


def utc_bounds(first_day: date, end_day: date) -> tuple[datetime, datetime]:
    """``[first_day, end_day)`` as aware UTC datetimes at midnight."""
    return midnight(first_day), midnight(end_day)


def week_start(day: date) -> date:
    """Monday of the ISO week holding ``day``."""
    return day - timedelta(days=day.weekday())


def month_start(day: date) -> date:
    return day.replace(day=1)


def add_months(first_of_month: date, count: int) -> date:
    """First day of the month ``count`` months after (or before) ``first_of_month``'s month."""
    index = first_of_month.year * 12 + (first_of_month.month - 1) + count
    return date(index // 12, index % 12 + 1, 1)


def day_span(day: date, days: int = 1) -> tuple[date, date]:
    return day, day + timedelta(days=days)


def week_span(day: date, weeks_offset: int = 0) -> tuple[date, date]:
    """The ISO week holding ``day``, shifted by ``weeks_offset`` weeks."""
    start = week_start(day) + WEEK * weeks_offset
    return start, start + WEEK


def month_span(year: int, month: int) -> tuple[date, date]:
    start = date(year, month, 1)
    return start, add_months(start, 1)


def year_span(year: int) -> tuple[date, date]:
    return date(year, 1, 1), date(year + 1, 1, 1)


def weekend_span(day: date, weeks_offset: int = 0) -> tuple[date, date]:
    """Saturday and Sunday of the ISO week holding ``day`` (shifted by ``weeks_offset``)."""
    saturday = week_start(day) + WEEK * weeks_offset + timedelta(days=5)
    return saturday, saturday + timedelta(days=2)


def iso_week_span(year: int, week: int) -> tuple[date, date]:
    """ISO week ``week`` of ISO year ``year``; ValueError when that week does not exist."""
    start = date.fromisocalendar(year, week, 1)
    return start, start + WEEK


def weekday_before(day: date, weekday: int) -> date:
    """The latest ``weekday`` (0 = Monday) strictly before ``day``."""
    return day - timedelta(days=(day.weekday() - weekday - 1) % 7 + 1)


def weekday_after(day: date, weekday: int) -> date:
    """The earliest ``weekday`` (0 = Monday) strictly after ``day``."""
    return day + timedelta(days=(weekday - day.weekday() - 1) % 7 + 1)


def shift_months(day: date, count: int) -> date:
    """``day`` moved by ``count`` months, clamped to the target month's last day."""
    first = add_months(month_start(day), count)
    last_day = (add_months(first, 1) - DAY).day
    return first.replace(day=min(day.day, last_day))


def month_year(today: date, month: int, *, forward: bool, strict: bool) -> int:
    """Year of the nearest ``month`` looking back from (or, ``forward``, ahead of) today's month;
    ``strict`` skips today's own month."""
    if forward:
        return today.year if (month > today.month or (month == today.month and not strict)) else today.year + 1
    return today.year if (month < today.month or (month == today.month and not strict)) else today.year - 1


def day_month_date(today: date, month: int, day: int, *, forward: bool) -> date | None:
    """Nearest valid ``day``/``month`` on or before today (on or after, ``forward``); None if it never exists."""
    step = 1 if forward else -1
    for offset in range(9):  # 29 February recurs within eight years
        year = today.year + step * offset
        try:
            candidate = date(year, month, day)
        except ValueError:
            continue
        if (candidate >= today) if forward else (candidate <= today):
            return candidate
    return None


def _days_of_month(today: date, day: int, *, forward: bool, months: int) -> Iterator[date]:
    """Day ``day`` of today's month and of the ``months - 1`` after it (before it), where it exists."""
    first = month_start(today)
    for offset in range(months):
        try:
            yield add_months(first, offset if forward else -offset).replace(day=day)
        except ValueError:
            continue


def day_of_month_date(today: date, day: int, *, forward: bool) -> date | None:
    """Nearest date with day-of-month ``day`` strictly before today (strictly after, ``forward``)."""
    return next((d for d in _days_of_month(today, day, forward=forward, months=13)
                 if (d > today if forward else d < today)), None)


def weekday_month_day(today: date, weekday: int, day: int, *, forward: bool) -> date | None:
    """Nearest date that is day ``day`` of its month and falls on ``weekday``, on or before today (on or
    after, ``forward``), at most two years away: "Tuesday the 7th"."""
    return next((d for d in _days_of_month(today, day, forward=forward, months=25)
                 if d.weekday() == weekday and (d >= today if forward else d <= today)), None)


def nearest_weekend(day: date, *, forward: bool = False) -> tuple[date, date]:
    """The Saturday and Sunday nearest ``day``: its own on a weekend; from Monday or Tuesday the one
    before, from Wednesday to Friday the one after; ``forward`` (a sentence about the future): never
    one that ended before ``day``."""
    saturday = weekday_before(day + timedelta(days=1), 5)  # the Saturday on or before ``day``
    back = (day - saturday).days - 1  # days since that weekend's Sunday
    if back > 0 and ((saturday + WEEK - day).days <= back or forward):
        saturday += WEEK
    return saturday, saturday + timedelta(days=2)
