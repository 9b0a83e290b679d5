"""Times inside a work of fiction: "in the book the hero leaves on the 3rd" is a day of the plot.

A sentence framed by "in (on) the book/novel/film/movie/show/series/episode/story/play/game"
followed by a comma or the start of a clause ("in the movie, she...", "in the book the hero...")
tells what happens in that work, so the times after the frame in that sentence are the plot's, not
the calendar's: unresolved with a reason. "in the book club", "in the movie theater" are places.
"""
from __future__ import annotations

import re
from dataclasses import replace

from . import lexicon as lx
from .expressions import Occurrence

PLOT_TIME = "time inside a story (a book, film or show)"
REACH = 300  # characters before a time read for its frame
_FRAME = re.compile(
    r"\b(?:in|on) (?:the|that|this) (?:book|novel|film|movie|show|series|episode|story|play|game|sequel)"
    r"(?:,| (?:the|a|an|he|she|they|it|his|her|their|everyone|nobody|someone)\b)", re.IGNORECASE)


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
