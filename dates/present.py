"""Words for the moment of speaking: "right now", "at the moment", "currently", "just got back".

Each names the observation day (granularity "day"), the way "today" does:
- "right now", "just now", "at the moment", "at present", "at this moment", "as we speak",
  "currently", "as of now"; "at the moment of his birth" or "when" is some other moment;
- "now" closing a sentence ("I'm in Porto now."), unless a word before it makes it a bound
  ("by now", "until now", "from now", "up to now") or the tail of a duration ("for hours now");
- "just" before a past form ("I just got back", "we've just moved"): the recent past. After
  "had" it is the past of another past ("she had just left") and claims nothing, as it does
  before an auxiliary ("it's just been busy") or an adjective ("just tired").

None of them claims anything in a sentence that says when in other words ("I just got back last
week", "I'm currently reading the book I bought on May 3"): the other words say it.

A question's "currently" asks about the present state, not about a day: ``speaks_of_now`` tells
a caller that reads a question's time window which expressions these are.
"""
from __future__ import annotations

from . import lexicon as lx
from .cursor import Hit, TokenCursor

_PHRASES = (("right", "now"), ("just", "now"), ("at", "the", "moment"), ("at", "present"),
            ("at", "this", "moment"), ("as", "we", "speak"), ("currently",), ("as", "of", "now"))
_NOT_EVENTS = frozenset({"was", "were", "did", "had", "been", "ago", "yesterday", "didn't", "wasn't", "weren't",
                         "hadn't"})
_OTHER_MOMENT = frozenset({"of", "when", "that", "where", "before", "after"})
# "for three hours now", "for a while now": the tail of a duration, which says how long, not when
_DURATION_TAIL = frozenset({"second", "minute", "hour", "day", "week", "weekend", "month", "year", "decade", "while",
                            "age", "long", "time"})
_BOUNDS = frozenset({"by", "until", "till", "from", "to", "than", "for", "since"})
_PAST_PERFECT = frozenset({"had", "hadn't"})
_TIME_WORDS = frozenset({"yesterday", "today", "tonight", "tomorrow", "ago", "last", "week", "weekend", "month",
                        "year", "morning", "afternoon", "evening", "night"})
TRIGGERS = frozenset({"right", "just", "at", "as", "currently", "now"})
_WORDS = frozenset({" ".join(p) for p in _PHRASES}) | {"now"}


def now(c: TokenCursor, index: int) -> Hit | None:
    """The observation day for a word of the moment of speaking at ``index``, else None."""
    stop = next((index + len(phrase) for phrase in _PHRASES
                 if all(c.low(index + offset) == word for offset, word in enumerate(phrase))), None)
    if stop is not None and c.low(stop - 1) == "moment" and c.low(stop) in _OTHER_MOMENT:
        return None
    low = c.low(index)
    if stop is None and low == "now" and c.low(index - 1) not in _BOUNDS \
            and c.low(index - 1).rstrip("s") not in _DURATION_TAIL and _closes_sentence(c, index):
        stop = index + 1
    if stop is None and low == "just" and not c.standalone and _recent_past(c, index):
        stop = index + 2
    return c.day(stop, 0) if stop is not None and (c.standalone or not _said_otherwise(c, index, stop)) else None


def speaks_of_now(expression: str) -> bool:
    """True for an expression this module claims without a past form ("currently", "right now")."""
    return " ".join(expression.casefold().split()) in _WORDS


def _closes_sentence(c: TokenCursor, index: int) -> bool:
    """``now`` ends its sentence or clause and does not open it ("Now, listen" is no time)."""
    before, token, after = c.tok(index - 1), c.tok(index), c.tok(index + 1)
    if token is None or before is None or before.sentence != token.sentence or not before.low[:1].isalpha():
        return False
    return after is None or after.sentence != token.sentence or after.low in (".", "!", ",")


def _recent_past(c: TokenCursor, index: int) -> bool:
    verb, before = c.low(index + 1), c.low(index - 1)
    return lx.past_form(verb) and verb not in _NOT_EVENTS and before not in _PAST_PERFECT \
        and not before.replace("\u2019", "'").endswith("'d")  # "I'd just left": had


def _said_otherwise(c: TokenCursor, begin: int, stop: int) -> bool:
    """The sentence says when in other words: "I just got back last week" is last week, not today.
    Only ``CUE_REACH`` tokens on each side are read, so a long sentence stays a linear scan."""
    token = c.tok(begin)
    assert token is not None
    first, last = c.sentences[token.sentence]
    return any(_names_time(c, at) for at in (*range(max(first, begin - lx.CUE_REACH), begin),
                                             *range(stop, min(last, stop + lx.CUE_REACH))))


def _names_time(c: TokenCursor, at: int) -> bool:
    """A word that says when on its own (a day word, a unit, a year, a month or weekday name)."""
    low = c.low(at)
    return low in _TIME_WORDS or lx.year_number(c.tok(at)) is not None or c.month_at(at) is not None \
        or c.weekday_at(at, abbreviations=False) is not None
