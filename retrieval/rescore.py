"""Pure re-scoring of the best fused recall candidates by signals that read the question.

Each signal is in [0, 1] (``names`` may go below 0): ``coverage`` (the question's content words,
weighted by rarity in the pool), ``proximity``, ``names`` (``written_as_names``, ``addressed``),
``date`` (the month or year asked about) and ``neighbours`` (adjacent turns hold the words the hit
lacks). A hit's new score is its fused score over the pool's best plus ``rescore`` times the mean of
the signals; the weights were chosen by leaving one LoCoMo dev conversation out. Reads no storage.
"""
from __future__ import annotations

import functools
import math
import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from ..fulltext import STOPWORDS
from .query import rough_stem

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_MONTHS = {m: i + 1 for i, m in enumerate(("january", "february", "march", "april", "may", "june", "july",
                                            "august", "september", "october", "november", "december"))}
_YEAR = re.compile(r"\b(19\d\d|20\d\d)\b")
TEXT_CAP = 2000  # characters of one candidate (or of its neighbours) the signals read


@dataclass(frozen=True)
class Weights:
    """How far the signals move a fused score (0 turns the stage off)."""

    rescore: float = 4.0          # added at most when every signal is 1 (fused scores span [0, 1])
    neighbours: float = 1.0       # the neighbour signal's share against the others' 1 each
    pool: int = 100               # fused candidates re-scored
    addressed: float = 0.0        # what a name counts when the hit only addresses it (1: as any other)


# Leave-one-conversation-out (bench_recall.py --rescore-sweep, --address-sweep): every fold chose these
# weights; an addressed name counts 0 over full text and -0.5 with vectors in four folds of five.
DEFAULT = Weights()
# the vector arm ran: the fused order already knows more, and an addressed name counts against a hit
WITH_VECTORS = Weights(rescore=2.0, addressed=-0.5)


@dataclass(frozen=True)
class Item:
    """One fused candidate: its key, text, time and fused score."""

    key: Hashable
    text: str
    at: float
    score: float


@dataclass(frozen=True)
class Question:
    stems: tuple[str, ...]
    names: tuple[str, ...]
    months: frozenset[int]
    years: frozenset[int]
    plain: tuple[str, ...] = ()  # lower-case content words that may still be names


def question(text: str, terms: Sequence[str], phrases: Sequence[str]) -> Question:
    """The parts of a question the signals look for; ``terms`` are its full-text terms."""
    stems = tuple(s for s in dict.fromkeys(rough_stem(t) for t in terms) if s)
    names = [p.lower() for p in phrases]
    names += [t.lower() for t in terms if t[:1].isupper() and t.lower() not in STOPWORDS
              and t.lower() not in _MONTHS]
    words = [w.lower() for w in _WORD.findall(text)]
    plain = [t for t in terms if t.isalpha() and t.islower() and t not in STOPWORDS and t not in _MONTHS]
    return Question(stems, tuple(dict.fromkeys(names)), frozenset(_MONTHS[w] for w in words if w in _MONTHS),
                    frozenset(int(y) for y in _YEAR.findall(text)), tuple(dict.fromkeys(plain)))


def written_as_names(words: Sequence[str], texts: Sequence[str]) -> tuple[str, ...]:
    """The ``words`` that ``texts`` write with a capital letter at least twice and in lower case at
    most once in ten: names, though the question typed them in lower case."""
    if not words:
        return ()
    find = re.compile(r"\b(?:" + "|".join(map(re.escape, words)) + r")\b", re.IGNORECASE).finditer
    upper: dict[str, int] = dict.fromkeys(words, 0)
    lower = dict(upper)
    for text in texts:  # one pass over each text for all the words
        for m in find(text):
            seen = m.group(0)
            key = seen.lower()
            if key in upper:  # case-insensitive matching also takes letters that lower to others ("ſ")
                (upper if seen[:1].isupper() else lower)[key] += 1
    return tuple(w for w in words if upper[w] >= 2 and 9 * lower[w] <= upper[w])


_GREETING = ("hi|hey|hello|yo|dear|thanks|thank you|bye|goodbye|congrats|congratulations|welcome|morning|"
             "evening|cheers|sorry|oh|wow|ok|okay|yes|yeah|yep|no|aw+")
# before an address: the start of the text or of a sentence, a comma, or a greeting
_BEFORE_ADDRESS = re.compile(r"(?:^|[.!?]|,|\b(?:" + _GREETING + r")[,!]?)\s*$", re.IGNORECASE)
_AFTER_ADDRESS = re.compile(r"\s*(?:[,!?.]|$)")
# ...but a comma that goes on with a list of names ("Jon, Mary and I", "Jon, Mary, and Sue", "Mary,
# and Sue"), a relative clause ("Jon, who lives next door") or a relation ("Jon, my brother, is")
# speaks of the name, as does a title ("Dr. Smith, ...": not a sentence's end) or a relation before
# it ("with my brother, Jon."); a relation is a word such as brother or friend, not any noun
# ("I appreciate our friendship too, Caroline." addresses her)
_RELATION = (r"(?:my|his|her|our|their)\s+(?:\w+\s+)?(?:brother|sister|friend|mom|mother|dad|father|son|daughter|"
             r"husband|wife|partner|boss|coach|neighbou?r|cousin|aunt|uncle|colleague|coworker|teacher|kid|child|"
             r"boyfriend|girlfriend|fianc[eé]e?|roommate|buddy|grandma|grandmother|grandpa|grandfather|niece|"
             r"nephew|mentor|dog|cat|pet)s?\s*,")
_SPOKEN_OF_AFTER = re.compile(r"\s*,\s*(?:(?i:who|whose)\b|[A-Z][\w'’-]*(?:\s*,|\s+(?i:and|or)\b)|(?i:and|or)\s+[A-Z]|"
                              r"(?i:" + _RELATION + r"))")
_SPOKEN_OF_BEFORE = re.compile(r"(?:\b(?:mr|mrs|ms|dr|prof|st|sr|jr)\.|\b" + _RELATION + r")\s*$", re.IGNORECASE)


@functools.lru_cache(maxsize=256)
def _name_pattern(name: str) -> re.Pattern[str] | None:
    words = name.split()
    return re.compile(r"\b" + r"\W+".join(map(re.escape, words)) + r"\b", re.IGNORECASE) if words else None


def addressed(text: str, name: str) -> bool:
    """Whether every place ``text`` writes ``name`` (its words, case aside) addresses someone: set off
    by a comma, "!", "?" or "." after the start of a sentence, a comma or a greeting ("Wow, Jon!",
    "Hey Jon, look", "Thanks so much, Jon."), unless the words around it speak of the name ("Jon, Mary
    and I went", "Jon, who", "Jon, my brother,", "Dr. Smith,", "my brother, Jon."). False when the
    name is not there at all."""
    pattern = _name_pattern(name)
    if pattern is None:
        return False
    found = list(pattern.finditer(text))
    return bool(found) and all(_AFTER_ADDRESS.match(text, m.end())  # the cheaper test first
                               and not _SPOKEN_OF_AFTER.match(text, m.end())
                               and _BEFORE_ADDRESS.search(text, max(0, m.start() - 40), m.start())
                               and not _SPOKEN_OF_BEFORE.search(text, max(0, m.start() - 40), m.start())
                               for m in found)


def _tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _matched(tokens: Sequence[str], stems: Sequence[str],
             memo: dict[str, int | None] | None = None) -> list[int | None]:
    """Per token, the index of the question stem it starts with (None: no stem)."""
    memo = {} if memo is None else memo
    out: list[int | None] = []
    for tok in tokens:
        if tok not in memo:
            memo[tok] = next((i for i, s in enumerate(stems) if tok.startswith(s)), None)
        out.append(memo[tok])
    return out


def proximity(marks: Sequence[int | None], wanted: int) -> float:
    """``(m / wanted) * (m - 1) / (w - 1)``: m distinct stems matched, w the tightest token
    window holding one of each; 0 when fewer than two matched."""
    seen = {m for m in marks if m is not None}
    if len(seen) < 2 or wanted <= 0:
        return 0.0
    counts: dict[int, int] = {}
    best = len(marks)
    lo = 0
    for hi, m in enumerate(marks):
        if m is None:
            continue
        counts[m] = counts.get(m, 0) + 1
        while len(counts) == len(seen):
            if marks[lo] is not None:
                best = min(best, hi - lo + 1)
                mark = marks[lo]
                counts[mark] -= 1  # type: ignore[index]
                if not counts[mark]:  # type: ignore[index]
                    del counts[mark]  # type: ignore[arg-type]
            lo += 1
    return (len(seen) / wanted) * (len(seen) - 1) / max(1, best - 1)


def _share(found: set[int], among: Sequence[int], idf: Sequence[float]) -> float:
    total = sum(idf[i] for i in among)
    return sum(idf[i] for i in among if i in found) / total if total > 0 else 0.0


def excerpt(text: str, stems: Sequence[str], cap: int = TEXT_CAP) -> str:
    """``text`` itself when it is at most ``cap`` characters; else windows around the first place
    each stem occurs, in text order and about ``cap`` characters in all (the text's head when no
    stem occurs)."""
    if len(text) <= cap:
        return text
    lowered, half = text.lower(), cap // (2 * max(1, len(stems)))
    spans = sorted((max(0, i - half), i + len(stem) + half) for stem in stems if (i := lowered.find(stem)) >= 0)
    if not spans:
        return text[:cap]
    merged = [list(spans[0])]
    for start, end in spans[1:]:
        if start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return " … ".join(text[start:end] for start, end in merged)


def signals(q: Question, items: Sequence[Item], neighbours: Mapping[Hashable, str],
            address_credit: float = 1.0) -> list[dict[str, float]]:
    """The five signals of every item, in order; a name the item only addresses counts
    ``address_credit`` in ``names`` (which then spans [min(0, credit), 1])."""
    memo: dict[str, int | None] = {}
    texts = [excerpt(it.text, q.stems) for it in items]
    tokens = [_tokens(text) for text in texts]
    marks = [_matched(t, q.stems, memo) for t in tokens]
    found = [{m for m in mk if m is not None} for mk in marks]
    near = [{m for m in _matched(_tokens(excerpt(neighbours.get(it.key, ""), q.stems)), q.stems, memo)
             if m is not None} for it in items]
    n = len(items)
    idf = [math.log(1 + n / (1 + sum(1 for f in found if i in f))) for i in range(len(q.stems))]
    every = range(len(q.stems))
    names = [" ".join(_tokens(nm)) for nm in (*q.names, *written_as_names(q.plain, texts))]
    out = []
    for it, text, toks, mk, have, close in zip(items, texts, tokens, marks, found, near, strict=True):
        lowered = " ".join(toks)
        named = sum(address_credit if address_credit != 1.0 and addressed(text, nm) else 1.0
                    for nm in names if nm in lowered) / len(names) if names else 0.0
        missing = [i for i in every if i not in have]
        out.append({"coverage": _share(have, every, idf), "proximity": proximity(mk, len(q.stems)),
                    "names": named, "date": _date(q, it.at), "neighbours": _share(close, missing, idf)})
    return out


def _date(q: Question, at: float) -> float:
    if not (q.months or q.years) or at <= 0:
        return 0.0
    day = datetime.fromtimestamp(at, UTC)
    return float((not q.months or day.month in q.months) and (not q.years or day.year in q.years))


def rescore(q: Question, items: Sequence[Item], neighbours: Mapping[Hashable, str],
            weights: Weights = DEFAULT) -> list[Item]:
    """The first ``weights.pool`` items re-scored and re-sorted; the rest follow in their order."""
    head, tail = list(items[:weights.pool]), list(items[weights.pool:])
    if weights.rescore <= 0 or not head or not q.stems:
        return list(items)
    top = max(it.score for it in head) or 1.0
    share = {"coverage": 1.0, "proximity": 1.0, "names": 1.0, "date": 1.0, "neighbours": weights.neighbours}
    total = sum(share.values())
    moved = []
    for it, sig in zip(head, signals(q, head, neighbours, weights.addressed), strict=True):
        bonus = sum(share[k] * v for k, v in sig.items()) / total
        moved.append(Item(it.key, it.text, it.at, it.score / top + weights.rescore * bonus))
    floor = min((it.score for it in moved), default=0.0)
    tail = [Item(it.key, it.text, it.at, min(it.score / top, floor)) for it in tail]
    return sorted(moved, key=lambda it: -it.score) + tail
