"""Counts of hours and minutes ("3 hours ago", "in ten minutes"): the day of the instant they name.

Expressions resolve to days, so "an hour ago" said at 00:30 is yesterday. Without the observation's
instant (a day alone, as a tool period gives) such a count claims nothing; vague and approximate
counts say why they are unresolved, as counts of days do.
"""
from __future__ import annotations

from datetime import timedelta

from . import lexicon as lx
from .cursor import Hit, TokenCursor

MAX_SECONDS = 8784 * 3600  # a leap year of hours, the bound tool periods use for hour windows


def ago(c: TokenCursor, at: int, count: int | None, reason: str | None, *, future: bool) -> Hit | None:
    """The day of the instant ``count`` clock units (at ``at``) before the observation ("N hours ago",
    "N minutes back") or, with ``future`` ("in N hours", a future sentence), after it."""
    if future:
        stop, sign = at + 1, 1
    elif c.low(at + 1) in ("ago", "back"):
        stop, sign = at + 2, -1
    else:
        return None
    if reason is not None:
        return Hit(stop, reason=reason)
    seconds = lx.CLOCK_UNITS[c.low(at)] * (count or 0)
    if c.now is None or not 1 <= seconds <= MAX_SECONDS:
        return None
    return c.day_hit(stop, (c.now + timedelta(seconds=sign * seconds)).date())
