"""Words for the moment of speaking: "right now", "at the moment", "currently", "I've just moved".

Each names the observation day, the way "today" does, unless a word beside it makes it something
else: an adjective's "right" ("you're right now I see"), a bound's "now" ("by now"), "just" meaning
"simply" ("I just wanted to say"); none claims in a question, which reports no event. A "just"
claim yields to a past or vague time its sentence names (``recent_past``, applied by occurrence.py).
"""
from __future__ import annotations

from . import lexicon as lx
from .cursor import Hit, TokenCursor

_PHRASES = {"right": (("right", "now"),), "just": (("just", "now"),), "currently": (("currently",),),
            "at": (("at", "the", "moment"), ("at", "this", "moment"), ("at", "present"))}
_ADJECTIVE_RIGHT = frozenset({"you're", "you", "are", "is", "was", "were", "be", "that's", "it's", "all", "i'm", "am",
                              "he's", "she's", "we're", "they're", "quite", "exactly", "so", "not"})
_OTHER_MOMENT = frozenset({"of", "when", "that", "where", "before", "after", "the", "a", "an", "my", "your", "his",
                           "her", "our", "their", "i", "you", "he", "she", "we", "they", "it", "-"})
# "for three hours now", "for a while now": the tail of a duration, which says how long, not when
_DURATION_TAIL = frozenset({"second", "sec", "minute", "min", "hour", "hr", "day", "week", "weekend", "fortnight",
                            "month", "year", "yr", "decade", "while", "age", "long", "time", "forever",
                            "half"})
_BOUNDS = frozenset({"by", "until", "till", "from", "to", "than", "for", "since"})
# "okay now", "come on now", "and now, the weather": "now" after one of these opening its sentence
_OPENERS = frozenset({"okay", "ok", "on", "and", "then", "well", "so", "right", "oh", "now", "yes", "no", "yeah",
                      "alright", "but"})
_CLAUSE_OPENERS = frozenset({",", ";", ":", "but", "and", "so", "yet", "though", "although"})
_PAST_AUX = frozenset({"was", "were", "wasn't", "weren't", "had", "hadn't", "did", "didn't"})
_CLOSERS = frozenset({".", "!", ",", ";", ":", ")"})
_PERFECT = frozenset({"have", "has", "i've", "we've", "you've", "they've", "haven't", "hasn't"})
# Verbs whose past names an event that "just" places a moment ago (not a state or a thought)
_EVENTS = frozenset({
    "got", "came", "arrived", "returned", "finished", "completed", "started", "began", "moved", "signed", "bought",
    "left", "won", "adopted", "graduated", "booked", "landed", "joined", "launched", "opened", "quit", "married",
    "published", "released", "received", "sold", "ran", "reached", "passed", "submitted", "sent", "paid", "ordered",
    "picked", "woke", "met", "found", "lost", "broke", "became", "celebrated", "visited", "watched", "wrote",
    "built", "painted", "baked", "cooked", "checked", "applied", "accepted", "announced", "enrolled", "registered",
    "uploaded", "installed", "updated", "upgraded", "fixed", "repaired", "renewed", "retired", "resigned", "hired",
    "fired", "promoted", "engaged", "divorced", "delivered", "flew", "drove",
    # communication and perception: "I just saw your message", "I just heard the news"
    "saw", "heard", "told", "texted", "called", "emailed", "messaged", "contacted", "replied", "posted", "noticed",
    "realized", "realised", "discovered", "learned", "learnt", "achieved", "reorganized", "organized", "performed",
    "competed", "participated", "skyped", "talked", "played",
})
_BEEN_EVENT = frozenset({"to", "invited", "diagnosed", "offered", "awarded", "selected", "chosen", "told", "asked",
                         "named", "elected", "admitted", "approved", "given", "shown", "sent"})
_HAD_EVENT = frozenset({"a", "an", "my", "our", "twins", "surgery", "lunch", "dinner", "breakfast", "news"})
# "I've just got back" is an event, "I've just got one question" a possession
_GOT_EVENT = frozenset({"back", "home", "in", "off", "out", "up", "here", "there", "engaged", "married", "promoted",
                        "hired", "fired", "divorced"})
TRIGGERS = frozenset({*_PHRASES, "now"})
_WORDS = frozenset(" ".join(p) for phrases in _PHRASES.values() for p in phrases) | {"now"}


def now(c: TokenCursor, index: int) -> Hit | None:
    """The observation day for a word of the moment of speaking at ``index``, else None."""
    low = c.low(index)
    stop = next((index + len(p) for p in _PHRASES.get(low, ()) if all(c.low(index + i) == w for i, w in enumerate(p))),
                None)
    if stop is not None and not _fits(c, index, stop):
        stop = None
    if stop is None and low == "now" and _closes(c, index):
        stop = index + 1
    if stop is None and low == "just" and not c.standalone and _recent_past(c, index):
        stop = index + 2
    if stop is None or (not c.standalone and c.in_question(index)):
        return None
    return c.day(stop, 0)


def speaks_of_now(expression: str) -> bool:
    """True for an expression this module claims ("currently", "right now", "just moved")."""
    words = expression.casefold().split()
    return " ".join(words) in _WORDS or recent_past(expression)


def recent_past(expression: str) -> bool:
    """True for a "just" claim ("just moved"), which gives way to any other time its sentence names."""
    words = expression.casefold().split()
    return len(words) == 2 and words[0] == "just" and words[1] != "now"


def _fits(c: TokenCursor, index: int, stop: int) -> bool:
    """A fixed phrase means the moment of speaking here (see the module docstring)."""
    first, after, before = c.low(index), c.low(stop), c.low(index - 1)
    if first == "right":  # not "you're right\nnow let's go": a line break parts them
        token, nxt = c.tok(index), c.tok(index + 1)
        return before not in _ADJECTIVE_RIGHT and token is not None and nxt is not None \
            and token.sentence == nxt.sentence
    if first == "at":
        return after not in _OTHER_MOMENT and not (c.low(stop - 1) == "moment" and lx.past_form(c.low(stop + 1)))
    if first == "currently":
        return before not in _PAST_AUX
    return True


def _closes(c: TokenCursor, index: int) -> bool:
    """``now`` ends its sentence or clause and does not open it ("Now, listen" is no time)."""
    before, token, after = c.tok(index - 1), c.tok(index), c.tok(index + 1)
    if token is None or before is None or before.sentence != token.sentence or not before.low[:1].isalpha():
        return False
    if before.low in _BOUNDS or before.low.rstrip("s") in _DURATION_TAIL:
        return False
    if not (after is None or after.sentence != token.sentence or after.low in _CLOSERS):
        return False
    first, _ = c.sentences[token.sentence]
    if (before.low in _OPENERS and first == index - 1) or (first == index - 2 and c.low(first) in ("come", "all")) \
            or (before.low == "and" and c.low(index - 2) == "then"):
        return False  # "Okay now, listen", "Come on now", "All right now", "then and now"
    return not _past_in_clause(c, index, first)


def _past_in_clause(c: TokenCursor, index: int, first: int) -> bool:
    """A past "was"/"had"/"did" in the clause before token ``index``: "it was late now" is told in the
    past, "I was sick but I'm fine now" is not (other past forms are often adjectives)."""
    for at in range(index - 1, max(first, index - lx.CUE_REACH) - 1, -1):
        low = c.low(at).replace("\u2019", "'")
        if low in _CLAUSE_OPENERS:
            return False
        if low in _PAST_AUX:
            return True
    return False


def _recent_past(c: TokenCursor, index: int) -> bool:
    verb = c.low(index + 1)
    if not lx.past_form(verb) or verb == "ago":
        return False
    near = [c.low(index - 1), c.low(index - 2)]
    if any(w in ("had", "hadn't") or w.replace("\u2019", "'").endswith("'d") for w in near):
        return False  # "she had (only) just left": the past of another past
    if near[0] in _PERFECT or (near[1] in _PERFECT and near[0] in ("only", "really", "finally", "also")):
        after = c.low(index + 2)
        if verb == "been":  # "I've just been promoted", "just been to Paris"; not "have just been crazy"
            return after in _EVENTS or after in _BEEN_EVENT
        if verb == "had":  # "we've just had a baby", not "I've just had enough"
            return after in _HAD_EVENT
        return verb != "got" or after in _GOT_EVENT
    if verb not in _EVENTS or (verb == "got" and c.low(index + 2) == "to"):  # "you just got to try it"
        return False
    first, _ = c.sentences[c.tokens[index].sentence]
    if c.low(first) in ("when", "back", "as", "while", "once"):  # "When I was a kid, I just found it boring"
        return not any(c.low(at) in _PAST_AUX for at in range(first, index))
    return not _past_in_clause(c, index, first)  # "I had a long day, I just got home" claims
