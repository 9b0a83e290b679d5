"""Parts of a named month or year, and the rest of this week, month or year on either side of today.

A month splits in three (days 1-10, 11-20, 21 to its end), a year in three runs of four months; a
week has no agreed thirds, so "the end of the week" claims nothing. Also the nth week (weekend,
weekday) of a month and a wished weekend ("Have a nice weekend!", by the tense of its sentence).
"""
from __future__ import annotations

from collections.abc import Callable
from datetime import date

from . import intervals as iv
from . import lexicon as lx
from .cursor import Hit, TokenCursor

PARTS = {"early": 0, "beginning": 0, "start": 0, "mid": 1, "middle": 1, "late": 2, "end": 2}
_ADJECTIVES = frozenset({"early", "mid", "late"})   # "early May"
_NOUNS = frozenset({"beginning", "start", "middle", "end"})  # "the end of May"


def third(first: date, end: date, granularity: str | None, which: int) -> tuple[date, date, str] | None:
    """The ``which``-th third (0, 1, 2) of the month or year ``[first, end)``, with its granularity. Pure."""
    if granularity == "month":
        cuts, grain = (first, first.replace(day=11), first.replace(day=21), end), "day"
    elif granularity == "year" and end.year == first.year + 1:  # a decade has parts of its own (spans)
        cuts, grain = (first, first.replace(month=5), first.replace(month=9), end), "month"
    else:
        return None
    return cuts[which], cuts[which + 1], grain


def part_of(c: TokenCursor, index: int, anchor: Callable[[int], Hit | None]) -> Hit | None:
    """"early/mid/late <month or year>" or "(the) beginning/middle/end of <month or year>" at ``index``;
    ``anchor(at)`` reads the month or year expression at ``at`` (any granularity)."""
    at = index + 1 if c.low(index) == "the" else index
    word = c.low(at)
    if word in _ADJECTIVES and at == index:
        at += 2 if c.low(at + 1) == "-" else 1
    elif word in _NOUNS and at > index and c.low(at + 1) == "of":
        at += 2
        unit = c.low(at + 1)
        if c.low(at) == "the" and unit in ("month", "year"):  # "the end of the month": this one
            this = c.offset(at + 2, unit, 0)
            return _third_hit(this.stop, this.first, this.end, unit, PARTS[word]) \
                if this is not None and this.first is not None and this.end is not None else None
    else:
        return None
    named = anchor(at)
    if named is None or named.first is None or named.end is None:
        return None
    first, end = named.first, named.end
    if named.stop == at + 1 and c.month_at(at) is not None and c.tense(index, named.stop) != "future":
        part = third(first, end, "month", PARTS[word])
        if part is not None and part[0] > c.today:  # a bare month's part still ahead: last year's
            first = first.replace(year=first.year - 1)
            end = iv.add_months(first, 1)
    return _third_hit(named.stop, first, end, named.granularity, PARTS[word])


def _third_hit(stop: int, first: date, end: date, granularity: str | None, which: int) -> Hit | None:
    found = third(first, end, granularity, which)
    return Hit(stop, found[0], found[1], found[2]) if found is not None else None


def rest_of(c: TokenCursor, index: int) -> Hit | None:
    """"earlier/later this week|month|year" and "earlier/later today": the part before or after today."""
    word = c.low(index)
    if word not in ("earlier", "later"):
        return None
    if c.base(index + 1) == "today":
        return c.day(index + 2, 0)
    unit = c.low(index + 2)
    if c.low(index + 1) != "this" or unit not in ("week", "month", "year"):
        return None
    whole = c.offset(index + 3, unit, 0)
    if whole is None or whole.first is None or whole.end is None:
        return None
    first, end = (whole.first, c.today + iv.DAY) if word == "earlier" else (c.today, whole.end)
    return Hit(index + 3, first, end, "day")


def nth_of_month(c: TokenCursor, index: int, anchor: Callable[[int], Hit | None]) -> Hit | None:
    """"(the) first/second/third/fourth/last week|weekend|<weekday> of (or in) <month>": days 1-7,
    8-14, 15-21, 22-28 or the month's last seven; the month's first (nth, last) Saturday and the
    Sunday after; the month's nth or last Monday, Tuesday..."""
    at = index + 1 if c.low(index) == "the" else index
    low, unit = c.low(at), c.low(at + 1)
    nth = lx.ORDINALS.get(low) or lx.ordinal_day(c.tok(at))
    weekday = c.weekday_at(at + 1, abbreviations=False)
    if nth is None or nth > 4 or (unit not in ("week", "weekend") and weekday is None) or \
            c.low(at + 2) not in ("of", "in"):
        return None
    month = anchor(at + 3)
    if month is None or month.granularity != "month" or month.first is None or month.end is None:
        return None
    if weekday is None and unit == "week":
        start = month.end - iv.WEEK if nth < 0 else month.first + iv.WEEK * (nth - 1)
        return Hit(month.stop, start, start + iv.WEEK, "day")
    named = 5 if weekday is None else weekday  # a weekend is its Saturday and the Sunday after
    day = iv.weekday_before(month.end, named) if nth < 0 else (  # the 4th is at most the 28th
        iv.weekday_after(month.first - iv.DAY, named) + iv.WEEK * (nth - 1))
    return c.day_hit(month.stop, day) if weekday is not None else Hit(month.stop, day, day + 2 * iv.DAY, "day")


_WISHES = frozenset({"good", "nice", "great", "lovely", "relaxing", "fun", "wonderful", "restful", "fab", "fantastic"})
_WISHED = frozenset({"have", "had", "enjoy", "enjoyed", "having", "enjoying"})


def wished_weekend(c: TokenCursor, index: int) -> Hit | None:
    """"(have, had, enjoy) a nice weekend": the weekend the sentence's tense points to."""
    if c.low(index) != "a" or c.low(index + 1) not in _WISHES or c.low(index + 2) != "weekend" or \
            c.low(index - 1) not in _WISHED:
        return None
    return c.tensed_weekend(index, index + 3)
