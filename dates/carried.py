"""A month named without a year after a time in a stated past year: "In 2019 we went to Peru. In June
we hiked the Inca Trail" is June 2019, not the last June before the message.

A story told about a past year keeps that year until it names another: a bare "in June" / "during
June" in a sentence not about the future, following (at most ``REACH`` characters after) a resolved
time of a past year that writes its year ("in 2019", "March 2023", "on 5 May 2021"), or a month
already carried this way, is the first such month from the start of that time on ("In December 2022
we met, and in March we got engaged": March 2023), if that lies before the observation month.
A year of birth ("I was born in 1990. In March I turned 34") dates a person, not a story: no carry.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import date

from . import intervals as iv
from . import lexicon as lx
from .expressions import Occurrence

REACH = 300  # characters between the time that states the year and the month
_SIDE = 120  # characters of the month's sentence on each side read for its tense
_LEADS = frozenset({"in", "during"})


def carry(text: str, found: Sequence[Occurrence], today: date) -> list[Occurrence]:
    """``found`` with each bare month after a time of a stated past year moved into that story's year."""
    out: list[Occurrence] = []
    carried = False  # the expression just before is a month carried this way: its year is stated too
    for occ in found:
        before = out[-1] if out else None
        carried_now = False
        if before is not None and occ.granularity == "month" and occ.span[0] - before.span[1] <= REACH \
                and (carried or _states_year(before)):
            moved = _moved(text, occ, before, today)
            if moved is not None:
                occ, carried_now = moved, True
        carried = carried_now
        out.append(occ)
    return out


def _states_year(occ: Occurrence) -> bool:
    return occ.resolved and any(lx.year_number(t) is not None for t in lx.tokenize(occ.expression))


def _moved(text: str, occ: Occurrence, before: Occurrence, today: date) -> Occurrence | None:
    tokens = lx.tokenize(occ.expression)
    month = lx.MONTHS.get(tokens[-1].low) if len(tokens) == 2 and tokens[0].low in _LEADS else None
    if month is None or occ.granularity != "month" or before.start is None or before.start.year >= today.year:
        return None
    if "born" in text[max(0, before.span[0] - 60):before.span[0]].lower():  # a birth year dates a person
        return None
    start = before.start.date()
    year = start.year + (month < start.month)
    if (year, month) >= (today.year, today.month) or (occ.start is not None and occ.start.year == year):
        return None
    left = lx.tokenize(lx.SENTENCE_BREAK.split(text[max(0, occ.span[0] - _SIDE):occ.span[0]])[-1])
    right = lx.tokenize(lx.SENTENCE_BREAK.split(text[occ.span[1]:occ.span[1] + _SIDE])[0])
    if lx.sentence_tense(left + tokens + right, 0, len(left) + 2 + len(right), len(left), len(left) + 2) != "past":
        return None
    first, end = iv.month_span(year, month)
    return replace(occ, start=iv.midnight(first), end=iv.midnight(end))
