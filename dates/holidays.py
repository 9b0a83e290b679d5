"""Holidays by name: the ones on one date every year resolve like a day and month, the others are refused.

A one-word name needs a lead word ("at Christmas") or a year, since "a Christmas tree" is no date; a
holiday whose date moves with the year or differs by country (Easter, Thanksgiving) is named with
the reason, not guessed. The names and the words that make one no day are in occurrence.RULES.
"""
from __future__ import annotations

from datetime import date

from . import intervals as iv
from . import lexicon as lx
from .cursor import Hit, TokenCursor

MOVABLE = "holiday whose date moves with the year or the country"
_NAMES: dict[str, list[tuple[str, ...]]] = {}  # first word -> the names it opens, longest first
for _name in sorted((*lx.FIXED_HOLIDAYS, *lx.MOVABLE_HOLIDAYS), key=len, reverse=True):
    _NAMES.setdefault(_name[0], []).append(_name)
TRIGGERS = frozenset(_NAMES)
_NEW_YEAR = ("new", "year")


def holiday(c: TokenCursor, index: int, *, nested: bool = False) -> Hit | None:
    """The holiday named at ``index`` (after a lead word, if any); ``nested``: read as a relation's day."""
    lead = c.low(index)
    at = index + 1 if lead in lx.HOLIDAY_LEADS else index
    if lead == "this" and c.low(at) in ("past", "coming"):  # "this past Christmas"
        lead, at = ("last" if c.low(at) == "past" else "next"), at + 1
    name = next((n for n in _NAMES.get(c.base(at), ()) if all(c.base(at + i) == word for i, word in enumerate(n))),
                None)
    if name is None:
        return None
    stop, fixed = at + len(name), lx.FIXED_HOLIDAYS.get(name)
    if at == index and c.greeting(index - 1):  # "Happy Halloween!": a greeting on the day itself
        return c.day_hit(stop, c.today) if fixed == (c.today.month, c.today.day) else None
    year = lx.year_number(c.tok(stop))
    if at == index and (len(name) == 1 or name in lx.LEAD_ONLY_HOLIDAYS) and year is None and \
            not (c.standalone or nested):
        return None  # a bare one-word name is a date alone, after a relation ("the day after") or with a year
    after = c.tok(stop)
    if at == index and fixed is None and after is not None and after.text.isalpha() and after.text.islower() and \
            after.low not in lx.AFTER_NTH and after.low not in lx.PARTS_OF_DAY and not nested:
        return None  # a movable name with no lead word qualifying a noun: "Black Friday deals", "Mother's Day cards"
    if at == index and fixed is not None and after is not None and after.text.isalpha() and lx.s_form(after.low) and \
            after.low not in lx.PARTS_OF_DAY and not nested and not (c.low(stop + 1) == "were" or lx.past_form(
                c.low(stop + 1))):  # a fixed one qualifying a plural noun, no past verb after it:
        return None  # "Valentine's Day cards are a scam" (not "the Christmas Day celebrations were lovely")
    if fixed is None:
        return Hit(stop + (year is not None), reason=MOVABLE)
    month, day = fixed
    if year is not None:
        found: date | None = date(year, month, day)
        stop += 1
    elif lead == "this":
        found = date(c.today.year, month, day)
    elif lead in ("last", "next"):
        forward = lead == "next"
        found = iv.day_month_date(c.today + (iv.DAY if forward else -iv.DAY), month, day, forward=forward)
    elif c.born(at):
        return Hit(stop, reason=lx.BIRTH)  # "born on Christmas Day": in some year
    else:
        found = iv.day_month_date(c.today, month, day, forward=c.tense(at, stop) == "future")
    if found is not None and name == _NEW_YEAR:  # the night it begins and its first day
        return Hit(c.skip_part_of_day(stop), found - iv.DAY, found + iv.DAY, "day")
    return c.day_hit(c.skip_part_of_day(stop), found) if found is not None else None
