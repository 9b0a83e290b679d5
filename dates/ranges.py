"""Runs between two times: "between A and B", "from A to/until/through B", "Mon-Wed".

A run goes from the start of A to the end of B; bare weekdays and ordinals take their week or month
from A or the sentence's tense. A run that ends before it starts is no run (its parts are read on
their own), and after a verb that moves a date only the new date B counts.
"""
from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from . import intervals as iv
from . import lexicon as lx
from .cursor import Hit, TokenCursor
from .written import week_named

_JOINERS = {"between": ("and",), "from": ("to", "until", "till", "through", "thru")}
_DASHES = ("-", "\u2013")  # between two weekdays, months or years with no "from": "Mon-Wed", "Jan–Mar", "2019-2021"


# words after a bare run of years that close its phrase ("we lived there 2019-2021 and loved it", "2019-2021 was hard")
_AFTER_YEARS = frozenset({"and", "but", "so", "because", "when", "then", "was", "were", "i", "we"})


def _years_alone(c: TokenCursor, index: int) -> bool:
    """The bare run of years at ``index`` closes its phrase and counts no noun, as a bare year must: "we lived
    there 2019-2021", not "a 2019-2021 Honda", "the 2019-2021 season" or "pages 2019-2021"."""
    after, before = c.low(index + 3), c.low(index - 1)
    return (not after[:1].isalnum() or after in _AFTER_YEARS) and before.removesuffix("s") not in lx.NTH_NOUNS


def run(c: TokenCursor, index: int, anchor: Callable[[int], Hit | None]) -> Hit | None:
    """The run opening at ``index``; ``anchor(at)`` reads the resolved time at ``at`` (an end)."""
    joiners = _JOINERS.get(c.low(index))
    if joiners is None and (c.weekday_at(index, abbreviations=True) is not None or c.month_at(index) is not None) \
            and c.low(c.skip_part_of_day(index + 1)) in _DASHES + _JOINERS["from"] and not c.habitual(index):
        # "Mon-Wed", "Jan–Mar"; not in a habit ("Jan-Feb is always slow at work")
        joiners, index = _JOINERS["from"] + _DASHES, index - 1
    elif joiners is None and lx.year_number(c.tok(index)) and c.low(index + 1) in _DASHES and \
            (lx.year_number(c.tok(index + 2)) or 0) > (lx.year_number(c.tok(index)) or 0) and _years_alone(c, index):
        joiners, index = _DASHES, index - 1  # "2019-2021": only a later year after the dash
    if joiners is None:
        return None
    named = _days_of_one_month(c, index, joiners) or (None if changes(c, index) else _weekdays(c, index, joiners))
    if named is not None:
        return named
    start = anchor(index + 1)
    if start is None or c.low(start.stop) not in joiners or start.first is None:
        return None
    at, first = start.stop + 1, start.days[0]
    if changes(c, index):  # "the meeting moved from Thursday to Friday": the new date, not a run
        end = anchor(at)
        return None if end is None else Hit(end.stop, end.first, end.end, end.granularity)
    weekday = c.weekday_at(at, abbreviations=False)
    end = anchor(at) if weekday is None else c.day_hit(c.skip_part_of_day(at + 1), iv.weekday_after(first - iv.DAY,
                                                                                                      weekday))
    closing = lx.ordinal_day(c.tok(at + (c.low(at) == "the")))
    if start.granularity == "day" and closing is not None and closing > first.day and \
            (end is None or end.first is None) and c.low(at + (c.low(at) == "the") + 1) not in lx.NTH_NOUNS | {"of"}:
        try:  # "from March 3rd to the 7th": a bare ordinal ends the run in its start's month
            end = c.day_hit(at + 1 + (c.low(at) == "the"), first.replace(day=closing))
        except ValueError:
            return None
    if end is None or end.first is None or end.days[1] < first:
        return None
    granularity = start.granularity if start.granularity == end.granularity else "day"
    return Hit(end.stop, first, end.days[1] + iv.DAY, granularity)


def _weekdays(c: TokenCursor, index: int, joiners: tuple[str, ...]) -> Hit | None:
    """"(from) Monday to Wednesday": its first day by the sentence's tense, as a bare weekday is (the
    run's opening word begins the time), its last the first such day on or after it; "from Monday
    (morning) to Friday (evening) last week": both days of that week, in order."""
    opening = c.weekday_at(index + 1, abbreviations=True)
    joiner = c.skip_part_of_day(index + 2)
    closing = c.weekday_at(joiner + 1, abbreviations=True)
    if opening is None or closing is None or c.low(joiner) not in joiners:
        return None
    stop = c.skip_part_of_day(joiner + 2)
    week = week_named(c, stop)
    if week is not None and closing >= opening:
        monday = iv.week_start(c.today) + iv.WEEK * week[0]
        return Hit(week[1], monday + timedelta(days=opening), monday + timedelta(days=closing + 1), "day")
    tense = c.tense(index + (c.low(index) not in _JOINERS), stop)
    if tense == "unclear":
        return Hit(stop, reason=lx.UNCLEAR_TENSE)
    first = (iv.weekday_after if tense == "future" else iv.weekday_before)(c.today, opening)
    return Hit(stop, first, iv.weekday_after(first - iv.DAY, closing) + iv.DAY, "day")


def changes(c: TokenCursor, index: int, reach: int = 4) -> bool:
    """A past or -ing verb of moving a date ("moved", "pushed back", "rescheduling") at most ``reach`` tokens
    before "from" (or "to") at ``index`` in its clause; not a noun ("my shift from Monday to Wednesday")."""
    for at in range(index - 1, max(-1, index - reach - 1), -1):
        if c.low(at) in (",", ";", "and", "but"):
            return False
        if c.low(at).startswith(lx.CHANGE_STEMS) and (lx.past_form(c.low(at)) or c.low(at).endswith("ing")):
            return True
    return False


def _days_of_one_month(c: TokenCursor, index: int, joiners: tuple[str, ...]) -> Hit | None:
    """"from the 2nd to the 5th", "between the 10th and the 20th" (no month after them): days of one
    month, in a past sentence the latest such run ending on or before the observation day, in one about
    the future the first beginning after it; unclear tense leaves them unresolved."""
    opening = lx.ordinal_day(c.tok(index + 2)) if c.low(index + 1) == "the" else None
    if opening is None or c.low(index + 3) not in joiners:
        return None
    at = index + 4 + (c.low(index + 4) == "the")
    closing, stop = lx.ordinal_day(c.tok(at)), at + 1
    if closing is None or closing <= opening or c.low(stop) == "of" or c.month_at(stop) is not None:
        return None
    moved = iv.day_of_month_date(c.today, closing, forward=True) if changes(c, index) else None
    if moved is not None:  # "changed my flight from the 20th to the 22nd": the next 22nd
        return c.day_hit(stop, moved)
    tense = c.tense(index, stop)
    if tense == "unclear":
        return Hit(stop, reason=lx.UNCLEAR_TENSE)
    if tense == "future":
        first = iv.day_of_month_date(c.today, opening, forward=True)
        last = first.replace(day=closing) if first else None
    else:
        last = iv.day_of_month_date(c.today + iv.DAY, closing, forward=False)
        first = last.replace(day=opening) if last else None
    return Hit(stop, first, last + iv.DAY, "day") if first and last else None

