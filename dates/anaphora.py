"""Offsets from a time the message stated before them: "on June 1st ... the next day", "a week later".

English lets a sentence count from a time said earlier: "We married on June 1st. The next day we
flew to Rome" is 2 June. An expression the grammar leaves relative to an unstated reference takes
the nearest resolved time before it in the same message (at most ``REACH`` characters back) as
that reference, when it has one of these forms:

- "the next/following/previous/prior day|week|weekend|month|year", a part of a day counting as a
  day ("the next morning");
- "the following/previous <weekday>": the first such day after (before) the reference;
- "N days/weeks/... later/earlier/after/before" ("a week later", "two days earlier");
- "the day/week/... before/after" closing its clause ("..., and the day after, we rested"): one
  followed by more words may have its own reference ("the day before my birthday", "the day
  before I left"), so it stays unresolved.

Units count as "the week before May 3" does (``TokenCursor.around``). A day, weekday or weekend
counts from a reference of whole days; a week from days or a week; a month from days, a week
or a month; a year from any. Any other case keeps its reason.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

from . import intervals as iv
from . import lexicon as lx
from .cursor import Hit, TokenCursor
from .expressions import MAX_COUNT, NO_REFERENCE, Occurrence

REACH = 500  # characters between the reference's end and the expression
_AFTER = {"next": 1, "following": 1, "later": 1, "after": 1, "previous": -1, "prior": -1, "earlier": -1, "before": -1}
_FROM = {"day": ("day",), "weekend": ("day",), "week": ("day", "week"), "month": ("day", "week", "month"),
         "year": ("day", "week", "month", "year")}
_CLOSED = re.compile(r"\s*(?:[,.;:!?)]|$)")


def resolve(text: str, found: Sequence[Occurrence]) -> list[Occurrence]:
    """``found`` with each offset from an unstated reference counted from the nearest earlier time."""
    out: list[Occurrence] = []
    reference: Occurrence | None = None
    for occ in found:
        if occ.unresolved == NO_REFERENCE and reference is not None and occ.span[0] - reference.span[1] <= REACH:
            occ = _counted(text, occ, reference) or occ
        reference = occ if occ.resolved else reference
        out.append(occ)
    return out


def _counted(text: str, occ: Occurrence, reference: Occurrence) -> Occurrence | None:
    form = _form([t.low for t in lx.tokenize(occ.expression)], bool(_CLOSED.match(text, occ.span[1])))
    if form is None or reference.start is None or reference.end is None or reference.granularity is None:
        return None
    unit, count, weekday = form
    if reference.granularity not in _FROM["day" if weekday is not None else unit]:
        return None
    first, end = reference.start.date(), reference.end.date()
    if weekday is not None:
        day = iv.weekday_after(end - iv.DAY, weekday) if count > 0 else iv.weekday_before(first, weekday)
        hit: Hit | None = Hit(0, *iv.day_span(day), "day")
    else:
        hit = TokenCursor([], first).around(0, unit, count, Hit(0, first, end, "day"))
    if hit is None or hit.first is None or hit.end is None or hit.granularity is None:
        return None
    return Occurrence(occ.expression, occ.span, *iv.utc_bounds(hit.first, hit.end), hit.granularity)


def _form(words: list[str], closed: bool) -> tuple[str, int, int | None] | None:
    """``(unit, signed count, weekday)`` of an offset expression's words, else None."""
    if len(words) == 3 and words[0] == "the" and words[1] in ("next", "following", "previous", "prior"):
        unit = "day" if words[2] in lx.PARTS_OF_DAY else lx.UNITS.get(words[2])
        weekday = lx.WEEKDAYS.get(words[2]) if words[1] in ("following", "previous") else None
        if unit is None and weekday is None:
            return None
        return unit or "day", _AFTER[words[1]], weekday
    if len(words) == 3 and words[0] == "the" and words[2] in ("before", "after") and closed:
        unit = "day" if words[1] in lx.PARTS_OF_DAY else lx.UNITS.get(words[1])
        return (unit, _AFTER[words[2]], None) if unit is not None else None
    if len(words) == 3 and words[2] in _AFTER and words[2] not in ("next", "following", "previous"):
        count = 1 if words[0] in lx.ARTICLES else int(words[0]) if words[0].isdigit() else lx.NUMBER_WORDS.get(words[0])
        unit = lx.UNITS.get(words[1])
        if count is None or unit is None or not 0 < count <= MAX_COUNT[unit] or \
                (words[2] in ("before", "after", "prior") and not closed):
            return None
        return unit, count * _AFTER[words[2]], None
    return None
