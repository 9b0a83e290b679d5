"""Quarters, decades, years by two digits, ISO and numeric dates, and days written with dots or without a year.

Dotted dates are day-first (no English writer puts the month first with dots) and a two-digit year
needs two-digit days and months, since "4.12.10" is more often a version; a slash pair needs a lead
word because "5/13 passed" is a count; two digits naming a decade need "the" ("in my 30s" is an
age); a year ending in 00 may name a century, so it is refused unless that century is under way.
"""
from __future__ import annotations

from datetime import date

from . import intervals as iv
from . import lexicon as lx
from .counts import TENS
from .cursor import Hit, TokenCursor
from .written import STEP, relative_year

DECADE_OR_CENTURY = "decade or century (a year ending in 00)"
_QUARTER_ORDINALS = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4,
                     "last": 4}
_DECADE_WORDS = {tens[:-1] + "ies": value for tens, value in TENS.items()}  # "twenties": 20 ... "nineties": 90
_DECADE_PARTS = {"early": (0, 4), "mid": (4, 7), "late": (7, 10)}
_SLASH_LEADS = frozenset({"on", "by", "since", "until", "till", "before", "after", "from"})
_YEAR_LEADS = frozenset({"in", "since", "from", "until", "till", "by", "of"})
_APOSTROPHES = ("'", "\u2019")
# a quantity measured in tens ("temperatures were in the 90s", "highs in the 80s"): no decade
_MEASURES = frozenset({"temperature", "temperatures", "highs", "lows", "thermometer", "mercury"})
TRIGGERS = frozenset({"q", *_DECADE_WORDS, *_SLASH_LEADS, *_YEAR_LEADS, "early", "mid", "late"})


def _quarter_hit(stop: int, year: int, quarter: int) -> Hit:
    first = date(year, 3 * quarter - 2, 1)
    return Hit(stop, first, iv.add_months(first, 3), "month")


def _quarter_year(c: TokenCursor, at: int, index: int, quarter: int) -> tuple[int, int] | None:
    """``(stop, year)`` of the year written at ``at`` ("2023", "of 2023", "of last year"), else the
    one the tense picks; None for "of" something that is no year."""
    of = c.low(at) == "of"
    year_at = at + 1 if of else at
    year = lx.year_number(c.tok(year_at))
    if year is not None:
        return year_at + 1, year
    year = relative_year(c, year_at)  # "of last year"
    if year is not None:
        return year_at + 2, year
    if of:
        return None
    forward = c.tense(index, at) == "future"
    return at, iv.month_year(c.today, 3 * quarter - 2, forward=forward, strict=False)


def quarter(c: TokenCursor, index: int) -> Hit | None:
    """"Q3 (of) 2023", "the second quarter (of last year)", "last/this/next quarter" at ``index``."""
    low = c.low(index)
    if low == "q" and c.touching(index) and c.low(index + 1) in ("1", "2", "3", "4"):
        number, at = int(c.low(index + 1)), index + 2
    elif low in STEP and c.low(index + 1) == "quarter":
        current = (c.today.month - 1) // 3 + STEP[low]
        return _quarter_hit(index + 2, c.today.year + current // 4, current % 4 + 1)
    elif low == "the" and c.low(index + 1) in _QUARTER_ORDINALS and c.low(index + 2) == "quarter":
        number, at = _QUARTER_ORDINALS[c.low(index + 1)], index + 3
        if c.low(index + 1) == "last" and c.low(at) != "of":
            return quarter(c, index + 1)  # "the last quarter": the one before this
    else:
        return None
    found = _quarter_year(c, at, index, number)
    return _quarter_hit(found[0], found[1], number) if found is not None else None


def decade(c: TokenCursor, index: int) -> Hit | None:
    """"(the) 1990s", "the '90s", "the nineties", with "early/mid(-)/late" before the number."""
    first = c.low(index)
    if first != "the" and first not in _DECADE_PARTS and first not in _DECADE_WORDS and not first[:1].isdigit():
        return None
    at = index + 1 if first == "the" else index
    part = _DECADE_PARTS.get(c.low(at))
    if part is not None:
        at += 2 if c.low(at + 1) == "-" else 1
    # two digits or a word alone may be an age ("my 30s"); "'90s" is read from its digits (an
    # apostrophe is no trigger: code is full of them)
    named = (at > index and first == "the") or (c.low(at - 1) in _APOSTROPHES and c.touching(at - 1))
    if c.low(at) in _APOSTROPHES:
        named, at = True, at + 1
    low = c.low(at)
    if low in _DECADE_WORDS:
        digits, stop = low, at + 1
    elif low.isdigit() and c.low(at + 1) == "s" and c.touching(at):
        digits, stop = low, at + 2
    else:
        return None
    if len(digits) == 4 and digits.endswith("0") and 1000 <= int(digits) <= 2990:
        start = int(digits)
        if digits.endswith("00") and start + 100 <= c.today.year:  # "the 2000s" while that century runs: its decade
            return Hit(stop, reason=DECADE_OR_CENTURY)
    elif named and (digits in _DECADE_WORDS or (len(digits) == 2 and digits.endswith("0"))) and not any(
            c.low(at) in _MEASURES and c.tokens[at].sentence == c.tokens[index].sentence
            for at in range(max(0, index - 5), index)):
        tens = _DECADE_WORDS.get(digits, 0) or int(digits)
        start = 2000 + tens if 2000 + tens <= c.today.year else 1900 + tens
    else:
        return None
    lo, hi = part or (0, 10)
    return Hit(stop, date(start + lo, 1, 1), date(start + hi, 1, 1), "year")


def short_year(c: TokenCursor, index: int) -> Hit | None:
    """"in '22", "class of '98": a year by its last two digits after a lead word, the latest such
    year not after the observation year."""
    at = index + 1
    if c.low(at) not in _APOSTROPHES:
        return None
    digits = c.low(at + 1)
    if c.low(index) not in _YEAR_LEADS or not c.touching(at) \
            or len(digits) != 2 or not digits.isdigit() or (c.touching(at + 1) and c.low(at + 2) == "s"):
        return None
    year = 2000 + int(digits)
    year -= 100 if year > c.today.year else 0
    return Hit(at + 2, *iv.year_span(year), "year")


def dotted(c: TokenCursor, index: int) -> Hit | None:
    """"13.05.2024" or "3.5.24": day, month and year joined by dots, nothing else attached."""
    if c.low(index + 1) != "." or c.low(index + 3) != ".":
        return None
    if not all(c.touching(i) for i in range(index, index + 4)) or (index > 0 and c.touching(index - 1)) \
            or (c.low(index + 5) == "." and c.touching(index + 4)):
        return None
    parts = (c.low(index), c.low(index + 2), c.low(index + 4))
    if not all(p.isdigit() for p in parts) or len(parts[0]) > 2 or len(parts[1]) > 2 or len(parts[2]) not in (2, 4) \
            or (len(parts[2]) == 2 and min(len(parts[0]), len(parts[1])) < 2):  # "4.12.10" is a version
        return None
    year = int(parts[2]) + (2000 if len(parts[2]) == 2 else 0)
    return c.day_hit(index + 5, date(year, int(parts[1]), int(parts[0])))


def slash_day(c: TokenCursor, index: int, ambiguous: str) -> Hit | None:
    """"on 5/13", "since 13/5": a day and month with a lead word, the year by tense (``ambiguous`` is
    the reason when either part could be the month)."""
    at = index + 1
    if c.low(at + 1) != "/" or c.low(index) not in _SLASH_LEADS or not (c.touching(at) and c.touching(at + 1)) \
            or (c.low(at + 3) == "/" and c.touching(at + 2)):
        return None
    if c.low(at + 3) == "." and c.touching(at + 2) and c.touching(at + 3) and c.low(at + 4)[:1].isdigit():
        return None  # "5/13.2" is no date; "on 5/13." closing a sentence is
    first, second = lx.day_number(c.tok(at)), lx.day_number(c.tok(at + 2))
    if first is None or second is None or not c.low(at).isdigit() or not c.low(at + 2).isdigit():
        return None
    if first <= 12 and second <= 12 and first != second:
        return Hit(at + 3, reason=ambiguous)
    month, day = (second, first) if first > 12 else (first, second)
    if month > 12:
        return None
    found = iv.day_month_date(c.today, month, day, forward=c.tense(at, at + 3) == "future")
    return c.day_hit(at + 3, found) if found else None


def numeric(c: TokenCursor, index: int, ambiguous: str) -> Hit | None:
    """ISO dates and months ("2024-05-13", "2024-05"), and d/m/y or m/d/y dates when one part is over 12
    (``ambiguous`` is the reason when both could be the month)."""
    low = c.low(index)
    if len(low) == 10 and low[4] == "-" and low[7] == "-":
        return c.day_hit(index + 1, date(int(low[:4]), int(low[5:7]), int(low[8:])))
    if len(low) == 7 and low[4] == "-":
        return Hit(index + 1, *iv.month_span(int(low[:4]), int(low[5:])), "month")
    if low.count("/") != 2:
        return None
    first, second, year_text = (int(part) for part in low.split("/"))
    year = year_text + 2000 if year_text < 100 else year_text
    if year < 1000:
        return None
    if first <= 12 and second <= 12 and first != second:
        return Hit(index + 1, reason=ambiguous)
    month, day = (second, first) if first > 12 else (first, second)
    return c.day_hit(index + 1, date(year, month, day))
