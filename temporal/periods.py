"""Periods for tools: ``parse_period("last tuesday", now)`` -> a UTC ``[start, end)`` window.

Pure and deterministic: ``now`` is always passed in (aware datetime or epoch seconds), so
tests and tools agree on what "today" means. Calendar periods are UTC days, ISO weeks
(Monday first), months and years; hour windows (``last 24 hours``, ``Nh``) roll back from
``now``. Spoken periods ("last tuesday", "two weeks ago", "in march", "this morning") are read
by the one English time grammar (the kernel's dates/expressions.py, standalone: past by default);
this module adds only what a period needs beyond a date: ISO units, hour windows, the ``Nd``
shorthand, ranges and "since". A part of a day reads as that whole UTC day. Periods that
have not begun yet are refused. It knows nothing about rollups or storage.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from ..dates import counts
from ..dates import expressions as ex
from ..dates import intervals as iv
from ..dates import lexicon as lx

MAX_PERIOD_CHARS = 200
MAX_HOURS = counts.MAX_SECONDS // 3600
MAX_DAYS = ex.MAX_COUNT["day"]

ACCEPTED_FORMS = (
    "today, yesterday, this morning/afternoon/evening, tonight, last night, earlier today (whole UTC days)",
    "tuesday, last tuesday, on friday",
    "3 days ago, two weeks ago, a month ago",
    "this/last week, month, quarter, year, weekend",
    "last/past N days|weeks|months|years, last 24h / last Nh / Nh, Nd",
    "march, in march, last march, march 2026, q1 2026, the 1990s",
    "the week/weekend/day/friday before or after <day>, the week of <day>",
    "the friday before last, two fridays ago, the first week of <month>, last christmas",
    "early may, end of last month, tuesday last week",
    "since <period>",
    "YYYY-MM-DD (or date:YYYY-MM-DD), YYYY-Www (ISO week), YYYY-MM, YYYY",
    "START..END, START/END, from START to END, between START and END (each a period or ISO datetime)",
)

# Each pattern is anchored and free of nested quantifiers, so matching is linear.
_HOURS = re.compile(r"(?:the )?(?:(last|past) )?(?:(\d{1,5}|[a-z]+) ?)?(h|hrs?|hours?)")
_DAYS = re.compile(r"(?:(?:last|past) )?(\d{1,5}) ?d")
_DATE = re.compile(r"(?:date:)?(\d{4})-(\d{2})-(\d{2})")
_WEEK = re.compile(r"(\d{4})-w(\d{2})")
_MONTH = re.compile(r"(\d{4})-(\d{2})")
_YEAR = re.compile(r"(\d{4})")
_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}t[0-9:.,]{2,18}(?:z|[+-][0-9:]{2,5})?")
_ISO_UNITS = ((_DATE, "day", lambda y, m, d: iv.day_span(date(y, m, d))), (_WEEK, "week", iv.iso_week_span),
              (_MONTH, "month", iv.month_span), (_YEAR, "year", iv.year_span))
_COUNTED = re.compile(r"(\d{1,5}|[a-z]+) (days?|weeks?|months?|years?)")  # "3 days": the last 3 days
_LEAD = frozenset({"in", "on", "during", "over", "at", "earlier"})  # words a spoken period may open with
_OPEN_ENDED = frozenset({"until", "till", "by", "before", "after", "prior"})
_HINTS = {
    ex.VAGUE: "it names no time; give one, e.g. 'last 7 days'",
    ex.VAGUE_QUANTITY: "give a number, e.g. 'last 3 days'",
    ex.APPROXIMATE: "give an exact count, e.g. '2 weeks ago'",
    ex.SEASON: "give months, e.g. 2024-06..2024-08",
    ex.NO_REFERENCE: "it is relative to an unstated time; give a date",
    ex.DAY_MONTH_ORDER: "write the date as YYYY-MM-DD",
}


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
    (hour windows and datetime ranges)."""

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
    norm = " ".join(text.strip().lower().split()).rstrip("?!,; ")
    norm = norm[:-1].rstrip() if norm.endswith(".") and not norm.endswith("..") else norm
    if not norm:
        raise PeriodError(text, "empty")
    current = iv.as_utc(now)
    try:
        period = _range(norm, text, current) or _single(norm, text, current)
    except (OverflowError, ValueError) as exc:
        if isinstance(exc, PeriodError):
            raise
        raise PeriodError(text, "outside the supported calendar") from exc
    if period is None:
        raise PeriodError(text, "not a recognised form")
    return period


def _single(norm: str, original: str, now: datetime) -> Period | None:
    """One period, not a range: an hour window, ``Nd``, an ISO unit or a spoken period."""
    return _hours(norm, now) or _shorthand_days(norm, now) or _calendar(norm, original) or _spoken(norm, original, now)


# -- hour windows and the Nd shorthand ------------------------------------------
def _hours(norm: str, now: datetime) -> Period | None:
    """``last 24 hours``, ``past hour``, ``the last three hours``, ``24h``: back from ``now``."""
    match = _HOURS.fullmatch(norm)
    if match is None:
        return None
    anchor, count_text, unit = match.groups()
    if count_text is None and (anchor is None or unit not in ("h", "hr", "hour")):
        return None  # "hours" alone, or "h" with no count and no "last"
    count = 1 if count_text is None else int(count_text) if count_text.isdigit() else lx.NUMBER_WORDS.get(count_text)
    if count is None:
        return None
    hours = _bounded(count, MAX_HOURS, norm)
    return Period(now - timedelta(hours=hours), now, f"last {hours}h", "hour")


def _shorthand_days(norm: str, now: datetime) -> Period | None:
    """``7d`` / ``last 7d``: N whole UTC days ending with today."""
    match = _DAYS.fullmatch(norm)
    if match is None:
        return None
    today = now.date()
    count = _bounded(int(match.group(1)), MAX_DAYS, norm)
    first = today - timedelta(days=count - 1)
    return _days(first, today + iv.DAY, f"last {count}d ({first.isoformat()}..{today.isoformat()})", "day")


# -- spoken periods, through the time grammar ----------------------------------------
def _spoken(norm: str, original: str, now: datetime) -> Period | None:
    """A spoken period: exactly one expression of the grammar covering the text (after an
    optional opening word such as "in" or "earlier"); a bare count of units ("3 days") reads
    as the last N units."""
    words = norm.split()
    if words[0] in _OPEN_ENDED:
        raise PeriodError(original, f"an open-ended '{words[0]} ...' window is not a period; give START..END "
                          "or 'since <period>'")
    today = now.date()
    found = _one_expression(norm, today)
    if found is None and _COUNTED.fullmatch(norm):
        found = _one_expression(f"last {norm}", today)
    if found is None:
        return None
    if found.start is None or found.end is None or found.granularity is None:
        reason = found.unresolved or ex.VAGUE
        raise PeriodError(original, f"{reason}: {_HINTS.get(reason, 'give a date')}")
    first = found.start.date()
    if first > today:
        raise PeriodError(original, f"it begins on {first.isoformat()}, after today ({today.isoformat()}); "
                          "a period reads what already happened")
    label = _span_label(first, found.end.date(), found.granularity)
    return Period(found.start, found.end, f"{norm} ({label})", found.granularity)


def _one_expression(norm: str, today: date) -> ex.Occurrence | None:
    matches = ex.find_expressions(norm, today, standalone=True)
    if len(matches) != 1:
        return None
    begin, finish = matches[0].span
    if norm[finish:].strip() or not set(norm[:begin].split()) <= _LEAD:
        return None
    return matches[0]


# -- ISO calendar units ---------------------------------------------------------------
def _calendar(norm: str, original: str) -> Period | None:
    """A single calendar unit written in ISO style: a day, an ISO week, a month or a year."""
    for pattern, granularity, span in _ISO_UNITS:
        if match := pattern.fullmatch(norm):
            try:
                start, end = span(*map(int, match.groups()))
            except (ValueError, OverflowError) as exc:
                raise PeriodError(original, f"no such calendar date or week ({exc})") from exc
            return _days(start, end, unit_label(start, granularity), granularity)
    return None


# -- ranges --------------------------------------------------------------------------------
def _range(norm: str, original: str, now: datetime) -> Period | None:
    """``A..B``, ``A/B``, ``from A to B``, ``between A and B``: from the start of A to the end
    of B (period ends are inclusive, datetime ends exclusive); ``since A`` / ``from A`` runs
    from the start of A to the end of today (to ``now`` after a non-day-aligned A)."""
    parts = _range_parts(norm, original)
    if parts is None:
        return None
    left, right = parts
    start, start_unit = _edge(left, original, now, is_end=False)
    if right is None:
        aligned = start_unit != "hour"
        end = iv.midnight(now.date() + iv.DAY) if aligned else now
        if end <= start:
            raise PeriodError(original, "it begins after now")
        return Period(start, end, f"{norm} ({_edge_label(start)}..{_edge_label(end, True)})",
                      "day" if aligned else "hour")
    end, end_unit = _edge(right, original, now, is_end=True)
    if end <= start:  # "from monday to friday last week": the ends name days of one week, read whole
        whole = _single(norm, original, now)
        if whole is not None:
            return whole
        raise PeriodError(original, "the range ends before it starts")
    aligned = start_unit != "hour" and end_unit != "hour"
    label = f"{left}..{right}"
    resolved = f"{_edge_label(start)}..{_edge_label(end, True)}"
    return Period(start, end, label if label == resolved else f"{label} ({resolved})", "day" if aligned else "hour")


def _range_parts(norm: str, original: str) -> tuple[str, str | None] | None:
    """(START, END) of a range, (START, None) of an open ``since``, None when ``norm`` is no range."""
    for opener, joiner in (("from ", " to "), ("from ", " until "), ("between ", " and ")):
        if norm.startswith(opener) and joiner in norm:
            left, _, right = norm[len(opener):].partition(joiner)
            return _ends(left, right, joiner, original)
    if norm.startswith(("since ", "from ")):
        return norm.split(" ", 1)[1].strip(), None
    sep = ".." if ".." in norm else "/" if norm.count("/") == 1 else None
    if sep is None:
        return None
    left, _, right = norm.partition(sep)
    return _ends(left, right, sep, original)


def _ends(left: str, right: str, sep: str, original: str) -> tuple[str, str]:
    left, right = left.strip(), right.strip()
    if not left or not right or sep in f" {right} ":
        raise PeriodError(original, "a range needs exactly one START and one END")
    return left, right


def _edge(part: str, original: str, now: datetime, *, is_end: bool) -> tuple[datetime, str]:
    if _DATETIME.fullmatch(part):
        try:
            moment = datetime.fromisoformat(part.upper())
        except ValueError as exc:
            raise PeriodError(original, f"bad datetime {part!r}") from exc
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC), "hour"
    try:
        found = _single(part, original, now)
    except PeriodError as exc:
        raise PeriodError(original, f"range end {part!r}: {exc.reason}") from None
    if found is None:
        raise PeriodError(original, f"range end {part!r} is not a period or an ISO datetime")
    return (found.end if is_end else found.start), found.granularity


# -- building and labels ---------------------------------------------------------------------
def _days(first: date, end: date, label: str, granularity: str) -> Period:
    return Period(*iv.utc_bounds(first, end), label, granularity)


def _bounded(value: int, limit: int, norm: str) -> int:
    if not 1 <= value <= limit:
        raise PeriodError(norm, f"the count must be between 1 and {limit}")
    return value


def unit_label(start: date, granularity: str) -> str:
    """The ISO label of the unit starting ``start``: 2024-05-03, 2024-W18, 2024-05 or 2024."""
    if granularity == "week":
        year, week, _ = start.isocalendar()
        return f"{year}-W{week:02d}"
    if granularity == "month":
        return start.strftime("%Y-%m")
    if granularity == "year":
        return str(start.year)
    return start.isoformat()


def _span_label(first: date, end: date, granularity: str) -> str:
    """One unit's ISO label, or ``first..last`` in that unit for a run of them ("2023-09..2023-12")."""
    one, other = unit_label(first, granularity), unit_label(end - iv.DAY, granularity)
    return one if one == other else f"{one}..{other}"


def _edge_label(moment: datetime, is_end: bool = False) -> str:
    if moment.time() == datetime.min.time():
        return (moment.date() - iv.DAY if is_end else moment.date()).isoformat()
    return iv.iso_z(moment)
