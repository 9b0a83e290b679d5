"""Runs between two times: "between A and B", "from A to/until/through B".

A run goes from the start of A to the end of B, each end any resolved expression. A bare weekday
B is the first such day on or after A ("from Monday to Friday"); two bare weekdays followed by
"last/this/next week" are both days of that week ("from Monday to Friday last week"). A run that
ends before it starts is no run (its parts are read on their own).
"""
from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from . import intervals as iv
from .cursor import Hit, TokenCursor
from .written import week_named

_JOINERS = {"between": ("and",), "from": ("to", "until", "till", "through")}


def run(c: TokenCursor, index: int, anchor: Callable[[int], Hit | None]) -> Hit | None:
    """The run opening at ``index``; ``anchor(at)`` reads the resolved time at ``at`` (an end)."""
    joiners = _JOINERS.get(c.low(index))
    if joiners is None:
        return None
    named = _weekdays_of_week(c, index, joiners)
    if named is not None:
        return named
    start = anchor(index + 1)
    if start is None or c.low(start.stop) not in joiners or start.first is None:
        return None
    at, first = start.stop + 1, start.days[0]
    weekday = c.weekday_at(at, abbreviations=False)
    end = anchor(at) if weekday is None else c.day_hit(c.skip_part_of_day(at + 1), iv.weekday_after(first - iv.DAY,
                                                                                                      weekday))
    if end is None or end.first is None or end.days[1] < first:
        return None
    granularity = start.granularity if start.granularity == end.granularity else "day"
    return Hit(end.stop, first, end.days[1] + iv.DAY, granularity)


def _weekdays_of_week(c: TokenCursor, index: int, joiners: tuple[str, ...]) -> Hit | None:
    """"from Monday (morning) to Friday (evening) last week": both days of that week, in order."""
    opening = c.weekday_at(index + 1, abbreviations=False)
    joiner = c.skip_part_of_day(index + 2)
    closing = c.weekday_at(joiner + 1, abbreviations=False)
    week = week_named(c, c.skip_part_of_day(joiner + 2)) if closing is not None else None
    if opening is None or closing is None or week is None or c.low(joiner) not in joiners or closing < opening:
        return None
    monday = iv.week_start(c.today) + iv.WEEK * week[0]
    return Hit(week[1], monday + timedelta(days=opening), monday + timedelta(days=closing + 1), "day")
