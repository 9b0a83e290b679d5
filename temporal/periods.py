"""Periods for tools: ``parse_period("last week", now)`` -> a UTC ``[start, end)`` window.

Pure and deterministic: ``now`` is always passed in (aware datetime or epoch seconds), so
tests and tools agree on what "today" means. Calendar periods are UTC days, ISO weeks
(Monday first), months and years; ``Nh`` windows roll back from ``now``. It does not read
message text (occurrence.py does) and knows nothing about rollups or storage.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from . import intervals as iv

MAX_PERIOD_CHARS = 200
MAX_HOURS = 24 * 366
MAX_DAYS = 3660

ACCEPTED_FORMS = (
    "today", "yesterday", "last 24h / last Nh / Nh", "Nd / last Nd / last N days",
    "this week", "last week", "this month", "last month", "this year", "last year",
    "YYYY-MM-DD (or date:YYYY-MM-DD)", "YYYY-Www (ISO week)", "YYYY-MM", "YYYY",
    "START..END or START/END (each a date, ISO week, month, year or ISO datetime)",
)

# Each pattern is anchored and free of nested quantifiers, so matching is linear.
_HOURS = re.compile(r"(?:last )?(\d{1,5}) ?(?:h|hrs?|hours?)")
_DAYS = re.compile(r"(?:last )?(\d{1,5}) ?(?:d|days?)")
_DATE = re.compile(r"(?:date:)?(\d{4})-(\d{2})-(\d{2})")
_WEEK = re.compile(r"(\d{4})-w(\d{2})")
_MONTH = re.compile(r"(\d{4})-(\d{2})")
_YEAR = re.compile(r"(\d{4})")
_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}t[0-9:.,]{2,18}(?:z|[+-][0-9:]{2,5})?")


class PeriodError(ValueError):
    """A period string that is not one of ACCEPTED_FORMS; the message lists them."""

    def __init__(self, text: str, reason: str) -> None:
        self.text = text
        self.reason = reason
        super().__init__(f"unrecognised period {text!r}: {reason}; accepted forms: " + "; ".join(ACCEPTED_FORMS))


@dataclass(frozen=True)
class Period:
    """A UTC window ``[start, end)``. ``granularity`` is the calendar unit the window is
    aligned to: day, week, month or year; "hour" when its edges are not day-aligned
    (``last Nh`` and datetime ranges)."""

    start: datetime
    end: datetime
    label: str
    granularity: str

    def to_dict(self) -> dict[str, str]:
        return {"start": iv.iso_z(self.start), "end": iv.iso_z(self.end), "label": self.label,
                "granularity": self.granularity}


def parse_period(text: str, now: datetime | int | float) -> Period:
    """Parse ``text`` (see ACCEPTED_FORMS) against ``now``; raise PeriodError when it is not one."""
    if not isinstance(text, str):
        raise PeriodError(repr(text), "a period must be a string")
    if len(text) > MAX_PERIOD_CHARS:
        raise PeriodError(text[:40] + "...", f"longer than {MAX_PERIOD_CHARS} characters")
    norm = " ".join(text.strip().lower().split())
    if not norm:
        raise PeriodError(text, "empty")
    current = iv.as_utc(now)
    try:
        period = _relative(norm, current) or _range(norm, text) or _calendar(norm, text)
    except OverflowError as exc:
        raise PeriodError(text, "outside the supported calendar") from exc
    if period is None:
        raise PeriodError(text, "not a recognised form")
    return period


def _relative(norm: str, now: datetime) -> Period | None:
    today = now.date()
    if norm == "today":
        return _days(today, today + iv.DAY, f"today ({today.isoformat()})", "day")
    if norm == "yesterday":
        day = today - iv.DAY
        return _days(day, today, f"yesterday ({day.isoformat()})", "day")
    if norm in ("this week", "last week"):
        start, end = iv.week_span(today, 0 if norm == "this week" else -1)
        return _days(start, end, f"{norm} ({_week_label(start)})", "week")
    if norm in ("this month", "last month"):
        start = iv.add_months(iv.month_start(today), 0 if norm == "this month" else -1)
        return _days(start, iv.add_months(start, 1), f"{norm} ({start.strftime('%Y-%m')})", "month")
    if norm in ("this year", "last year"):
        year = today.year - (norm == "last year")
        start, end = iv.year_span(year)
        return _days(start, end, f"{norm} ({year})", "year")
    if match := _HOURS.fullmatch(norm):
        hours = _bounded(int(match.group(1)), MAX_HOURS, norm)
        return Period(now - timedelta(hours=hours), now, f"last {hours}h", "hour")
    if match := _DAYS.fullmatch(norm):
        days = _bounded(int(match.group(1)), MAX_DAYS, norm)
        first = today - timedelta(days=days - 1)
        return _days(first, today + iv.DAY, f"last {days}d ({first.isoformat()}..{today.isoformat()})", "day")
    return None


def _calendar(norm: str, original: str) -> Period | None:
    found = _unit(norm, original)
    if found is None:
        return None
    start, end, granularity = found
    return _days(start, end, _unit_label(start, granularity), granularity)


def _range(norm: str, original: str) -> Period | None:
    """``A..B`` or ``A/B``: from the start of A to the end of B (date-like ends are inclusive,
    datetime ends exclusive)."""
    sep = ".." if ".." in norm else "/" if "/" in norm else None
    if sep is None:
        return None
    left, _, right = norm.partition(sep)
    left, right = left.strip(), right.strip()
    if not left or not right or sep in right:
        raise PeriodError(original, "a range needs exactly one START and one END")
    start, start_unit = _edge(left, original, is_end=False)
    end, end_unit = _edge(right, original, is_end=True)
    if end <= start:
        raise PeriodError(original, "the range ends before it starts")
    aligned = start_unit != "hour" and end_unit != "hour"
    return Period(start, end, f"{left}..{right}", "day" if aligned else "hour")


def _edge(part: str, original: str, *, is_end: bool) -> tuple[datetime, str]:
    if _DATETIME.fullmatch(part):
        try:
            moment = datetime.fromisoformat(part.upper())
        except ValueError as exc:
            raise PeriodError(original, f"bad datetime {part!r}") from exc
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC), "hour"
    found = _unit(part, original)
    if found is None:
        raise PeriodError(original, f"range end {part!r} is not a date, ISO week, month, year or datetime")
    start, end, granularity = found
    return iv.midnight(end if is_end else start), granularity


def _unit(norm: str, original: str) -> tuple[date, date, str] | None:
    """A single calendar unit written in ISO style, as ``(first_day, end_day, granularity)``."""
    try:
        if match := _DATE.fullmatch(norm):
            day = date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
            return day, day + iv.DAY, "day"
        if match := _WEEK.fullmatch(norm):
            start, end = iv.iso_week_span(int(match.group(1)), int(match.group(2)))
            return start, end, "week"
        if match := _MONTH.fullmatch(norm):
            start, end = iv.month_span(int(match.group(1)), int(match.group(2)))
            return start, end, "month"
        if match := _YEAR.fullmatch(norm):
            start, end = iv.year_span(int(match.group(1)))
            return start, end, "year"
    except (ValueError, OverflowError) as exc:
        raise PeriodError(original, f"no such calendar date or week ({exc})") from exc
    return None


def _days(first: date, end: date, label: str, granularity: str) -> Period:
    start_at, end_at = iv.utc_bounds(first, end)
    return Period(start_at, end_at, label, granularity)


def _bounded(value: int, limit: int, norm: str) -> int:
    if not 1 <= value <= limit:
        raise PeriodError(norm, f"the count must be between 1 and {limit}")
    return value


def _week_label(monday: date) -> str:
    year, week, _ = monday.isocalendar()
    return f"{year}-W{week:02d}"


def _unit_label(start: date, granularity: str) -> str:
    if granularity == "week":
        return _week_label(start)
    if granularity == "month":
        return start.strftime("%Y-%m")
    if granularity == "year":
        return str(start.year)
    return start.isoformat()
