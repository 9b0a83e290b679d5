"""Days written with a month name: the year they belong to, and runs of days ("May 13-15").

A day and month take the year written after them ("3 May 2023", "May 3rd, 2023"), or the one
"last/this/next year" names ("3 May last year"), else the one the sentence's tense picks: the
latest such day not after the observation day, or the next one in a sentence about the future;
a birth ("I was born on July 4th") is in a year its words do not give, so unresolved.
A run of days of one month ("May 13-15", "13 to 15 May") runs from its first to its last day.
"""
from __future__ import annotations

from datetime import date

from . import intervals as iv
from . import lexicon as lx
from .cursor import Hit, TokenCursor

DISAGREE = "weekday and day of the month disagree"
STEP = {"last": -1, "this": 0, "next": 1}  # units from the observation's own: "last year", "this month"
_RUN = frozenset({"-", "–", "to", "through", "until", "till"})
_CLOCK = frozenset({"am", "pm", "a.m", "p.m", ":", "o'clock"})  # "May 3 - 5 pm" is a day and an hour


def week_named(c: TokenCursor, at: int) -> tuple[int, int] | None:
    """``(step, stop)`` for "(of) last/this/next week" at ``at``, else None."""
    at += c.low(at) == "of"
    step = STEP.get(c.low(at))
    return (step, at + 2) if step is not None and c.low(at + 1) == "week" else None


def nth_after(c: TokenCursor, at: int) -> int | None:
    """The day of "the 7th" at ``at`` closing "Tuesday the 7th" (followed by the end of the clause or a
    word in ``lx.AFTER_NTH``, not by a number: "the 1st, 2nd and 3rd place"), else None."""
    closed = c.low(at + 2) in lx.AFTER_NTH and not c.low(at + 3)[:1].isdigit()
    return lx.ordinal_day(c.tok(at + 1)) if c.low(at) == "the" and closed else None


def qualified_nth(c: TokenCursor, at: int, weekday: int, step: int) -> Hit | None:
    """"last Tuesday the 7th" (``step`` -1) or "next Friday the 24th" (+1), "the 7th" at ``at``: the day
    of the month names which Tuesday, the nearest such before (after) the observation day, even when
    it is not the very last one ("last Tuesday the 7th" said on Wednesday the 15th is the 7th). One
    more than a month away means the weekday and the day disagree: unresolved."""
    nth = nth_after(c, at)
    if nth is None:
        return None
    dated = iv.weekday_month_day(c.today + iv.DAY * step, weekday, nth, forward=step > 0)
    if dated is None or abs((dated - c.today).days) > 31:
        return Hit(at + 2, reason=DISAGREE)
    return c.day_hit(at + 2, dated)


def relative_year(c: TokenCursor, at: int) -> int | None:
    """The year "last/this/next year" at ``at`` names (two tokens), else None."""
    step = STEP.get(c.low(at))
    return c.today.year + step if step is not None and c.low(at + 1) == "year" else None


def day_run(c: TokenCursor, at: int, first_day: int) -> tuple[int, int] | None:
    """``(index after it, last day)`` for "-15", "–15" or "to 15" at ``at`` closing a run of days of one
    month that opens on ``first_day``; None otherwise."""
    if c.low(at) not in _RUN or c.low(at + 2) in _CLOCK:
        return None
    last = lx.day_number(c.tok(at + 1))
    return (at + 2, last) if last is not None and last > first_day else None


def day_month(c: TokenCursor, after: int, month: int, day: int, last_day: int | None = None) -> Hit | None:
    """The day (or the run of days up to ``last_day``) of ``month``, its year read at ``after``."""
    hit = _one_day(c, after, month, day)
    if hit is None or hit.first is None or last_day is None or last_day == day:
        return hit
    return Hit(hit.stop, hit.first, hit.first.replace(day=last_day) + iv.DAY, "day")  # "April 29-31" raises


def _one_day(c: TokenCursor, after: int, month: int, day: int) -> Hit | None:
    year_at = after + 1 if c.low(after) == "," else after
    year = lx.year_number(c.tok(year_at))
    if year is None and (year := relative_year(c, after)) is not None:
        year_at = after + 1  # "3 May last year": the year the two words name, ending at ``after + 2``
    if year is not None:
        return c.day_hit(year_at + 1, date(year, month, day))
    date(2000, month, day)  # 2000 is a leap year: rejects only days that never exist
    if c.born(after):
        return Hit(after, reason=lx.BIRTH)
    found = iv.day_month_date(c.today, month, day, forward=c.tense(after - 1) == "future")
    return c.day_hit(after, found) if found else None
