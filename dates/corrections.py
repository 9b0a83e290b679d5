"""Times the speaker takes back: "on Thursday, no wait, Friday", "it wasn't last week, it was two weeks ago".

A time followed in its sentence by another, with only words of a correction between them ("no wait,
it was", "sorry, I mean", "or rather", "scratch that"; after the first time's own clause too: "on
Sunday we went hiking, no wait, it was Saturday"), or one negated ("wasn't", "isn't", "not" just
before it) and followed by its replacement ("..., it was", "but"), is withdrawn: unresolved with a
reason, and the later time stands. Any other word between them keeps both ("on Monday and actually
on Tuesday too").
"""
from __future__ import annotations

from dataclasses import replace

from . import lexicon as lx
from .expressions import Occurrence

TAKEN_BACK = "taken back by the time after it"
_MARKERS = frozenset({"no", "wait", "mean", "rather", "sorry", "scratch", "correction", "oops", "actually"})
_FILLERS = frozenset({",", "-", "i", "it", "was", "is", "it's", "or", "that", "make", "oh", "um", "uh", "on", "in",
                      "the", "at", "!", "."})
_NEGATIONS = frozenset({"wasn't", "isn't", "not", "weren't", "aren't"})
_REPLACING = frozenset({",", "it", "was", "is", "it's", "but", "rather", "on", "in", "the", "that", "that's"})


def taken_back(text: str, found: list[Occurrence]) -> list[Occurrence]:
    """``found`` with each time its speaker corrects (see the module docstring) withdrawn."""
    out = list(found)
    for at in range(len(found) - 1):
        here, then = found[at], found[at + 1]
        between = text[here.span[1]:then.span[0]]
        if here.resolved and not lx.SENTENCE_BREAK.search(between) and _corrects(text, here, between):
            out[at] = replace(here, start=None, end=None, granularity=None, unresolved=TAKEN_BACK)
    return out


def _corrects(text: str, here: Occurrence, between: str) -> bool:
    words = [t.low.replace("\u2019", "'") for t in lx.tokenize(between)]
    marker = next((at for at, w in enumerate(words) if w in _MARKERS), None)
    if marker is not None and (marker == 0 or words[marker - 1] in (",", "-") or
                               all(w in _FILLERS for w in words[:marker])) and \
            all(w in _MARKERS or w in _FILLERS for w in words[marker:]):  # "..., no wait, it was"
        return True
    before = [t.low.replace("\u2019", "'") for t in lx.tokenize(text[max(0, here.span[0] - 20):here.span[0]])][-2:]
    return bool(words) and bool(_NEGATIONS.intersection(before)) and all(w in _REPLACING for w in words)
