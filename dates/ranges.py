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
    start = anchor(index + 1) if joiners else None
    if start is None or joiners is None or c.low(start.stop) not in joiners or start.first is None:
        return None
    at, first = start.stop + 1, start.days[0]
    weekday = c.weekday_at(at, abbreviations=False)
    end = anchor(at) if weekday is None else c.day_hit(c.skip_part_of_day(at + 1), iv.weekday_after(first - iv.DAY,
                                                                                                      weekday))
    week = week_named(c, c.skip_part_of_day(at + 1)) if weekday is not None else None
    opening = c.weekday_at(index + 1, abbreviations=False) if start.stop == index + 2 else None
    if week is not None and opening is not None and weekday is not None:  # "from Monday to Friday last week"
        monday = iv.week_start(c.today) + iv.WEEK * week[0]
        first, end = monday + timedelta(days=opening), c.day_hit(week[1], monday + timedelta(days=weekday))
    if end is None or end.first is None or end.days[1] < first:
        return None
    granularity = start.granularity if start.granularity == end.granularity else "day"
    return Hit(end.stop, first, end.days[1] + iv.DAY, granularity)
