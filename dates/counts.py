"""Counts of time units as people write them, read for the "N units ago" and "the past N units" matchers.

A count is digits or a number word ("3", "three", "a"), a compound of tens ("twenty-one", "forty
five"), hundreds ("a hundred", "two hundred"), "N and a half" (the half kept apart: half a year is
six months, half of other units names no calendar unit), and a range of counts ("2-3", "two or
three", "5 to 10"), which is approximate. Units that are multiples of another ("a fortnight", "a
decade", "a century") are read as that many of the other. Counts of hours and minutes ("3 hours
ago", "in ten minutes", ``ago``) name the day of the instant they point to, so "an hour ago" said at
00:30 is yesterday; without the observation's instant (a tool period's day alone) they claim nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from . import lexicon as lx
from .cursor import Hit, TokenCursor

TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
        "ninety": 90}
_AGE_LEADS = frozenset({"turned", "turn", "turning", "turns", "was", "is", "am", "i'm", "aged", "age", "be", "been",
                        "at", "he's", "she's", "were", "are"})
_RANGE_WORDS = frozenset({"-", "or", "to", "\u2013"})  # "2-3 days", "two or three days", "5 to 10 years"
# units made of another: (that unit, how many of it)
MULTIPLES = {"fortnight": ("week", 2), "fortnights": ("week", 2), "decade": ("year", 10),
             "decades": ("year", 10), "century": ("year", 100), "centuries": ("year", 100)}

LAST_MULTIPLE = "the one before this one, or the past one up to now"  # "last decade", "last fortnight"
MAX_SECONDS = 8784 * 3600  # a leap year of hours, the bound tool periods use for hour windows


@dataclass(frozen=True, slots=True)
class Count:
    value: int
    stop: int  # index one past the count's tokens
    half: bool = False  # "two and a half"
    ranged: bool = False  # "2-3", "two or three": an approximate count


def word_value(c: TokenCursor, at: int, *, article: bool) -> tuple[int, int] | None:
    """One number at ``at`` with the index after it: "3", "three", "a" (when ``article``), "twenty-one",
    "twenty one", "a hundred", "two hundred"; none for the "one" of "twenty-one", read from its tens."""
    low = c.low(at)
    value = TENS.get(low) or lx.number_value(c.tok(at), allow_article=article)
    if value is None or joined_to_tens(c, at):
        return None
    stop = at + 1
    if low in TENS and (ones_at := _ones_after(c, at)) is not None:
        value, stop = value + lx.NUMBER_WORDS[c.low(ones_at)], ones_at + 1
    if c.low(stop) == "hundred" and value < 10 and not low.isdigit():  # "a hundred", "two hundred"
        value, stop = 100 * value, stop + 1
    return value, stop


def _ones_after(c: TokenCursor, at: int) -> int | None:
    """Where the ones word of a compound with the tens word at ``at`` stands ("twenty-one", "forty five"),
    else None. Without a hyphen an age may end at the tens ("I turned thirty two years ago": 30, two
    years back), so after a word of age the two are no compound."""
    hyphen = c.low(at + 1) == "-" and c.touching(at) and c.touching(at + 1)
    ones_at = at + 2 if hyphen else at + 1
    if not 1 <= lx.NUMBER_WORDS.get(c.low(ones_at), 0) <= 9 or not hyphen and c.low(at - 1) in _AGE_LEADS:
        return None
    return ones_at


def joined_to_tens(c: TokenCursor, at: int) -> bool:
    """The number word at ``at`` ends a compound with a tens word before it ("twenty-one", "forty five")."""
    for tens_at in (at - 1, at - 2):
        if c.low(tens_at) in TENS and _ones_after(c, tens_at) == at:
            return True
    return False


def read(c: TokenCursor, at: int, *, article: bool = True) -> Count | None:
    """The count at ``at``: a number, "N and a half", or a range of two numbers (approximate)."""
    first = word_value(c, at, article=article)
    if first is None:
        return None
    value, stop = first
    if c.low(stop) == "and" and c.low(stop + 1) == "a" and c.low(stop + 2) == "half" and c.low(at) not in lx.ARTICLES:
        return Count(value, stop + 3, half=True)  # "two and a half years"
    if c.low(stop) in _RANGE_WORDS and c.low(at) not in lx.ARTICLES and \
            (second := word_value(c, stop + 1, article=False)) is not None and second[0] > value:
        return Count(second[0], second[1], ranged=True)  # "2-3 days ago": somewhere between
    return Count(value, stop)


def unit_at(c: TokenCursor, at: int, count: int | None) -> tuple[str | None, int | None]:
    """The calendar unit named at ``at`` and the count in it: "weeks" -> week, "a decade" -> ten years."""
    low = c.low(at)
    if low in MULTIPLES:
        unit, times = MULTIPLES[low]
        return unit, None if count is None else times * count
    return lx.UNITS.get(low), count


def unit_or_count(c: TokenCursor, at: int) -> bool:
    """After a unit, "or two" / "or so" before "ago": the count is approximate ("a year or two ago")."""
    if c.low(at) != "or":
        return False
    return c.low(at + 1) == "so" or word_value(c, at + 1, article=False) is not None


ORDINAL_WORDS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8,
                 "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12, "thirteenth": 13, "fourteenth": 14,
                 "fifteenth": 15, "sixteenth": 16, "seventeenth": 17, "eighteenth": 18, "nineteenth": 19,
                 "twentieth": 20, "thirtieth": 30}


def spelled_ordinal_day(c: TokenCursor, at: int) -> tuple[int, int] | None:
    """A day of a month spelled as an ordinal word at ``at`` and the index after it: "first", "twenty-first",
    "thirty first" (1..31); ``lexicon.ordinal_day`` reads a digit one ("3rd"). Only read beside a month
    name: alone, "the first" is any first thing."""
    low = c.low(at)
    if low in ("twenty", "thirty"):
        ones_at = at + 2 if c.low(at + 1) == "-" and c.touching(at) and c.touching(at + 1) else at + 1
        ones = ORDINAL_WORDS.get(c.low(ones_at), 0)
        value = TENS[low] + ones
        return (value, ones_at + 1) if 1 <= ones <= 9 and value <= 31 else None
    return (ORDINAL_WORDS[low], at + 1) if low in ORDINAL_WORDS else None


def clock_ago(c: TokenCursor, at: int, count: int | None, reason: str | None, *, future: bool) -> Hit | None:
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
