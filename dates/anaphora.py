"""Offsets from a time the message stated before them: "on June 1st ... the next day", "a week later".

English lets a sentence count from a time said earlier ("We married on June 1st. The next day we
flew": 2 June), and lets a month, a day or a weekday alone take its year, month or week from one.
This pass gives such an expression the resolved expression just before it (at most ``REACH``
characters back) as its reference, unless the tense or a topic ("a documentary about July 20, 1969")
shows that time is not the story's. The forms and their limits are in occurrence.RULES.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date, timedelta

from . import intervals as iv
from . import lexicon as lx
from .cursor import Hit, TokenCursor
from .expressions import MAX_COUNT, NO_REFERENCE, Occurrence
from .tense import sentence_tense

REACH = 500  # characters between the reference's end and the expression
_AFTER = {"next": 1, "following": 1, "later": 1, "after": 1, "previous": -1, "prior": -1, "earlier": -1, "before": -1}
_FROM = {"day": ("day",), "weekend": ("day",), "week": ("day", "week"), "month": ("day", "week", "month"),
         "year": ("day", "week", "month", "year")}
_CLOSED = re.compile(r"\s*(?:[,.;:!?)]|$)")
_SIDE = 120  # characters of the sentence before an offset read for its tense
_TOPIC = frozenset({"about", "regarding", "concerning"})
_TIME_OF = lx.PARTS_OF_DAY | {"day", "week", "weekend", "month", "year", "summer", "winter", "spring", "fall", "autumn",
                              "end", "beginning", "start", "middle", "rest", "the", "first", "second", "third",
                              "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth"}
_PRESENT = frozenset({"is", "are", "am", "isn't", "aren't"})
_BARE_LEADS = lx.MONTH_CONTEXT | {"on", "back", "the", "in"}
_CLAUSE_ENDS = frozenset({",", ";", ":", "and", "but", "so", "then"})
_NOW_FORMS = frozenset({"am", "is", "are", "i'm", "we're", "you're", "they're", "will", "won't", "shall", "gonna"})
_IS_OR_HAS = frozenset({"he's", "she's", "it's", "that's", "there's"})
_RUN_WORDS = lx.PARTS_OF_DAY | {"on", "from", "to", "until", "till", "through", "-", "between", "and"}
_PLAN = re.compile(r"\b(?:to|for|planned|agreed|promised|booked|scheduled)\b", re.IGNORECASE)


def resolve(text: str, found: Sequence[Occurrence], today: date) -> list[Occurrence]:
    """``found`` with each offset from an unstated reference counted from the time just before it."""
    out: list[Occurrence] = []
    guessed = False  # the expression just before holds an ``_alone`` reading: it is no reference
    for occ in found:
        near = out[-1] if out and not guessed and occ.span[0] - out[-1].span[1] <= REACH else None
        guessed = False
        if occ.unresolved == NO_REFERENCE and near is not None:
            occ = (_counted(text, occ, near, today) if near.resolved and not _topic(text, near, occ, today) else None) \
                or occ
        elif occ.unresolved == NO_REFERENCE and (alone := _alone(text, occ, today)) is not None:
            occ, guessed = alone, True
        elif near is not None and near.start is not None and near.end is not None and (bare := _bare(occ)):
            occ = _in_context(text, occ, bare, near.start.date(), near.end.date() - iv.DAY, today) or occ
        elif (days := _weekdays(occ)) and (monday := _week_before(text, out, occ)) is not None and days[0] <= days[-1]:
            occ = _placed(text, occ, monday + timedelta(days[0]), monday + timedelta(days[-1] + 1), "day", today) or occ
        out.append(occ)
    return out


def _counted(text: str, occ: Occurrence, reference: Occurrence, today: date) -> Occurrence | None:
    form = _form(lx.tokenize(occ.expression), bool(_CLOSED.match(text, occ.span[1])))
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
        hit = TokenCursor([], today).around(0, unit, count, Hit(0, first, end, "day"))
    if hit is None or hit.first is None or hit.end is None or hit.granularity is None:
        return None
    # A day after the observation day needs a sentence about the future or one reporting a plan ("we
    # agreed to meet the following Saturday"); a future event counted into the past had the wrong reference.
    if hit.first > today or hit.end <= today:
        left, right = _sentence_around(text, occ.span)
        tense = _tense(text, occ)
        planned = bool(_PLAN.search(left) or _PLAN.search(right))
        if (hit.first > today and tense != "future" and not planned) or (tense == "future" and hit.end <= today):
            return None
    return Occurrence(occ.expression, occ.span, *iv.utc_bounds(hit.first, hit.end), hit.granularity)


def _bare(occ: Occurrence) -> tuple[str, int] | None:
    """``("month", m)`` for a month alone ("in March"), ``("day", d)`` for a day of the month alone ("on the
    10th", resolved or left to an unclear tense), else None."""
    if not occ.resolved and occ.unresolved != lx.UNCLEAR_TENSE:
        return None
    words = [t for t in lx.tokenize(occ.expression) if t.low not in _BARE_LEADS]
    low = words[0].low if len(words) == 1 else ""
    if low in lx.MONTHS and occ.resolved:
        return "month", lx.MONTHS[low]
    day = lx.ordinal_day(words[0]) if low else None
    return ("day", day) if day is not None else None


def _in_context(text: str, occ: Occurrence, bare: tuple[str, int], first: date, last: date,
                today: date) -> Occurrence | None:
    """``occ`` read in the year (month) of the time ``first..last`` just before it: a month alone takes the
    year of a time within one year, a day alone the month of a time within one month (a single day only
    when it comes before that day: "on April 3 ... on the 5th"). Not against its sentence's tense."""
    kind, number = bare
    one_month = (first.year, first.month) == (last.year, last.month)
    try:
        if kind == "month" and first.year == last.year:  # after a month's own time, an earlier month is the next year's
            start, end = iv.month_span(first.year + (one_month and number < first.month), number)
        elif kind == "day" and one_month and (first != last or number > first.day):
            start, end = iv.day_span(first.replace(day=number))
        elif kind == "day" and first == last:  # "arrive on 28 June and leave on the 5th": the month after
            start, end = iv.day_span(iv.add_months(first.replace(day=1), 1).replace(day=number))
        else:
            return None
    except (ValueError, OverflowError):  # "the 31st" of a shorter month, or a span past year 9999
        return None
    return _placed(text, occ, start, end, "month" if kind == "month" else "day", today)


def _placed(text: str, occ: Occurrence, start: date, end: date, granularity: str, today: date) -> Occurrence | None:
    """``occ`` moved to ``start..end`` by the time before it, unless that is where it was or goes against its
    sentence's tense."""
    if (start, end) == (occ.start and occ.start.date(), occ.end and occ.end.date()):
        return None
    left, right = _sentence_around(text, occ.span)
    tense = _tense(text, occ)
    # ahead only in a sentence about the future; behind only in one with a past cue ("in October they're
    # closing it" after "built in 1890" is no October of 1890)
    behind = start <= today and (tense != "past" or _now_in_clause(left, right))
    if (end > today + iv.DAY and tense != "future") or behind:
        return None
    return Occurrence(occ.expression, occ.span, *iv.utc_bounds(start, end), granularity)


def _weekdays(occ: Occurrence) -> list[int]:
    """The weekday of a weekday alone ("on Monday"), the two of a run ("from Monday to Wednesday"), else []."""
    if not occ.resolved and occ.unresolved != lx.UNCLEAR_TENSE:
        return []
    days = [lx.WEEKDAYS.get(t.low) for t in lx.tokenize(occ.expression) if t.low not in _RUN_WORDS]
    return [day for day in days if day is not None] if 0 < len(days) <= 2 and None not in days else []


def _week_before(text: str, out: Sequence[Occurrence], occ: Occurrence) -> date | None:
    """The Monday of a week named earlier in ``occ``'s sentence ("Last week I saw her on Monday"), with
    only weekdays alone between them, else None."""
    for before in reversed(out):
        if lx.SENTENCE_BREAK.search(text, before.span[1], occ.span[0]) or before.start is None:
            return None
        first = before.start.date()
        if before.granularity == "week" and before.end is not None and before.end.date() - first == iv.WEEK \
                and iv.week_start(first) == first:
            return first
        if not _weekdays(before):
            return None
    return None


def _now_in_clause(left: str, right: str) -> bool:
    """The clause around a time (between the nearest ``_CLAUSE_ENDS``) has a present "be" or a future
    word: "..., and on the 20th we're celebrating" tells no past, whatever an earlier clause did."""
    before, after = [t.low.replace("\u2019", "'") for t in lx.tokenize(left)], \
        [t.low.replace("\u2019", "'") for t in lx.tokenize(right)]
    start = max((at + 1 for at, word in enumerate(before) if word in _CLAUSE_ENDS), default=0)
    stop = next((at for at, word in enumerate(after) if word in _CLAUSE_ENDS), len(after))
    words = before[start:] + after[:stop]
    return any(word in _NOW_FORMS or word.endswith("'ll") or  # "he's proposing", not "he's moved", "it's been"
               (word in _IS_OR_HAS and words[at + 1:at + 2] and words[at + 1].endswith("ing"))
               for at, word in enumerate(words))


def _topic(text: str, reference: Occurrence, occ: Occurrence, today: date) -> bool:
    """``reference`` is what something is about, not when the story happens: the object of "about",
    "regarding" or "concerning" ("a documentary about July 20, 1969"), of "of" after a word that is no
    part of a day ("the events of September 11, 2001"; not "the morning of May 3"), or a date of a past
    year in a sentence in the present with no past cue ("the film is set on December 25, 1914") when the
    offset's sentence is past ("... The next day we went to see it"; a plot told in the present, "The
    story is set in 1920. The following year the hero returns", counts from its setting)."""
    words = [t.low for t in lx.tokenize(text[max(0, reference.span[0] - 40):reference.span[0]])]
    words += [t.low for t in lx.tokenize(reference.expression)[:1] if t.low == "of"]
    if words and words[-1] in _TOPIC:
        return True
    if len(words) >= 2 and words[-1] == "of" and words[-2] not in _TIME_OF and not words[-2][:1].isdigit():
        return True
    if reference.start is None or reference.start.year >= today.year:  # "our wedding is on June 1, 2025": a plan
        return False
    left, right = _sentence_around(text, reference.span)
    present = any(t.low in _PRESENT for t in lx.tokenize(left + " " + right))
    return present and _tense(text, reference) == "unclear" and _tense(text, occ) == "past"


def _alone(text: str, occ: Occurrence, today: date) -> Occurrence | None:
    """"the previous Monday" with no time before it (a summary's "he started the previous Monday"):
    the last Monday before the observation day; not in a sentence about the future."""
    words = [t.low for t in lx.tokenize(occ.expression)]
    if len(words) != 3 or words[:2] != ["the", "previous"] or words[2] not in lx.WEEKDAYS:
        return None
    if _tense(text, occ) == "future":
        return None
    try:
        day = iv.weekday_before(today, lx.WEEKDAYS[words[2]])
        return Occurrence(occ.expression, occ.span, *iv.utc_bounds(*iv.day_span(day)), "day")
    except (ValueError, OverflowError):  # before year 1
        return None


def _sentence_around(text: str, span: tuple[int, int]) -> tuple[str, str]:
    """The words of ``span``'s sentence before and after it, at most ``_SIDE`` characters each."""
    return (lx.SENTENCE_BREAK.split(text[max(0, span[0] - _SIDE):span[0]])[-1],
            lx.SENTENCE_BREAK.split(text[span[1]:span[1] + _SIDE])[0])


def _tense(text: str, occ: Occurrence) -> str:
    """The tense of ``occ``'s sentence at ``occ`` (its nearest cue)."""
    left, right = _sentence_around(text, occ.span)
    before, inside = lx.tokenize(left), lx.tokenize(occ.expression)
    tokens = before + inside + lx.tokenize(right)
    return sentence_tense(tokens, 0, len(tokens), len(before), len(before) + len(inside))


def _form(tokens: list[lx.Token], closed: bool) -> tuple[str, int, int | None] | None:
    """``(unit, signed count, weekday)`` of an offset expression's tokens, else None."""
    words = [t.low for t in tokens]
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
        count, unit = lx.number_value(tokens[0]), lx.UNITS.get(words[1])
        if count is None or unit is None or not 0 < count <= MAX_COUNT[unit] or \
                (words[2] in ("before", "after", "prior") and not closed):
            return None
        return unit, count * _AFTER[words[2]], None
    return None
