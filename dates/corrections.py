"""Times the words withdraw from the calendar: ones the speaker takes back, and ones inside a story.

Taken back ("on Thursday, no wait, Friday", "it wasn't last week, it was two weeks ago"): a time followed
by its replacement with only words of a correction between them, or a negated one followed by it, is
withdrawn (unresolved with a reason) and the later time stands; a bare day or month as the replacement
takes the month (year) of the time it corrects. Any other word between them keeps both ("on Monday and
actually on Tuesday too").

A plot's ("in the book the hero leaves on the 3rd"): a sentence framed by "in (on) the book/novel/film/
movie/show/series/episode/story/play/game" followed by a comma or the start of a clause tells what happens
in that work, so the times after the frame in that sentence are the plot's, not the calendar's. "in the
book club", "in the movie theater" are places.
"""
from __future__ import annotations

import re
from dataclasses import replace

from . import intervals as iv
from . import lexicon as lx
from .expressions import Occurrence

TAKEN_BACK = "taken back by the time after it"
_MARKERS = frozenset({"no", "wait", "mean", "rather", "sorry", "scratch", "correction", "oops", "actually"})
_FILLERS = frozenset({",", "-", "i", "it", "was", "is", "it's", "or", "that", "make", "oh", "um", "uh", "on", "in",
                      "the", "at", "!", "."})
_BARE = re.compile(r"\bthe (\d{1,2})(?:st|nd|rd|th)\b|\b(" + "|".join(lx.MONTHS) + r")\b", re.IGNORECASE)
_BARE_REACH = 40  # characters after the corrected time
_NEGATIONS = frozenset({"wasn't", "isn't", "not", "weren't", "aren't"})
_REPLACING = frozenset({",", "it", "was", "is", "it's", "but", "rather", "on", "in", "the", "that", "that's"})
PLOT_TIME = "time inside a story (a book, film or show)"
REACH = 300  # characters before a time read for its fiction frame
_FRAME = re.compile(
    r"\b(?:in|on) (?:the|that|this) (?:book|novel|film|movie|show|series|episode|story|play|game|sequel)"
    r"(?:,| (?:the|a|an|he|she|they|it|his|her|their|everyone|nobody|someone)\b)", re.IGNORECASE)


def taken_back(text: str, found: list[Occurrence]) -> list[Occurrence]:
    """``found`` with each time its speaker corrects (see the module docstring) withdrawn, and a bare
    replacement the grammar reads as no time on its own put after it."""
    out: list[Occurrence] = []
    for at, here in enumerate(found):
        stop = found[at + 1].span[0] if at + 1 < len(found) else len(text)
        between = text[here.span[1]:stop]
        bare = None if at + 1 < len(found) and not lx.SENTENCE_BREAK.search(between) else _bare(text, here, stop)
        if here.resolved and (bare is not None or at + 1 < len(found) and _corrects(text, here, between)):
            here = replace(here, start=None, end=None, granularity=None, unresolved=TAKEN_BACK)
        out += [here] if bare is None else [here, bare]
    return out


def _bare(text: str, here: Occurrence, stop: int) -> Occurrence | None:
    """The bare day ("the 21st") or month name ("August") that corrects ``here`` in its sentence ("on the
    20th, or rather the 21st", "in July, no sorry, August"): read in the month (year) of ``here``."""
    if not here.resolved or here.start is None or here.granularity not in ("day", "month"):
        return None
    match = _BARE.search(text, here.span[1], min(stop, here.span[1] + _BARE_REACH))
    if match is None or lx.SENTENCE_BREAK.search(text, here.span[1], match.start()) or \
            not _corrects(text, here, text[here.span[1]:match.start()]):
        return None
    first, month = here.start.date(), lx.MONTHS.get(match.group(2).lower()) if match.group(2) else None
    try:
        if match.group(1) and here.granularity == "day":
            span = iv.day_span(first.replace(day=int(match.group(1))))
        elif month is not None and here.granularity == "month" and (match.group(2)[0].isupper() or
                                                                    match.group(2).lower() not in lx.VERB_MONTHS):
            span = iv.month_span(first.year, month)
        else:
            return None
    except (ValueError, OverflowError):  # "the 31st" of a shorter month, or a span past year 9999
        return None
    return Occurrence(match.group(0), match.span(), *iv.utc_bounds(*span), here.granularity)


def _corrects(text: str, here: Occurrence, between: str) -> bool:
    words = [t.low.replace("\u2019", "'") for t in lx.tokenize(between)]
    marker = next((at for at, w in enumerate(words) if w in _MARKERS), None)
    if marker is not None and (marker == 0 or words[marker - 1] in (",", "-") or
                               all(w in _FILLERS for w in words[:marker])) and \
            all(w in _MARKERS or w in _FILLERS for w in words[marker:]):  # "..., no wait, it was"
        return True
    before = [t.low.replace("\u2019", "'") for t in lx.tokenize(text[max(0, here.span[0] - 20):here.span[0]])][-2:]
    return bool(words) and bool(_NEGATIONS.intersection(before)) and all(w in _REPLACING for w in words)


def plot_times(text: str, found: list[Occurrence]) -> list[Occurrence]:
    """``found`` with each time that follows a fiction frame in its sentence (at most ``REACH``
    characters back) unresolved as the plot's. One pass over the text."""
    out, start, read = [], 0, 0
    for occ in found:
        start = max((m.end() for m in lx.SENTENCE_BREAK.finditer(text, read, occ.span[0])), default=start)
        read = max(read, occ.span[0])
        framed = _FRAME.search(text, max(start, occ.span[0] - REACH), occ.span[0]) is not None
        out.append(replace(occ, start=None, end=None, granularity=None, unresolved=PLOT_TIME) if framed else occ)
    return out
