"""Changed facts: for a question about the present, the current statement of a fact comes
before the statements it replaced.

Two signals say which statement replaced which. With assertions on, the optional ``state``
tables record supersession (``superseded_turns`` reads it: one indexed query over the rows
being ranked). Without them, two statements speak of one subject when they share nearly all
their content words apart from the changed value (``same_subject``), and the later one is the
current one. ``current_first`` moves a current statement just ahead of the one it replaced and
an orphaned superseded one to the end; every other item keeps the caller's order. A question
with a past tense or a past-time word or year (``asks_present`` false) keeps its order whole:
"where did I live in 2023?" wants the old statement.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .db import Database

SAME_SUBJECT = 0.6  # shared content words / (the smaller statement's words - its changed value)
_WORD = re.compile(r"[^\W\d_]{3,}", re.U)
_PAST = re.compile(r"\b(?:did|was|were|had|used|ago|before|earlier|previous(?:ly)?|former(?:ly)?|originally|"
                   r"last|past|(?:19|20)\d\d)\b", re.I)
_FUNCTION = frozenset("""the and for are but not you your yours our ours his her hers its they them their theirs
this that these those what which who whom whose when where why how with from into onto about than then there here
has have having does doing been being will would could should shall may might must can cannot just also very
now currently still anymore nowadays today any some all both each much many more most such only own same
""".split())


def asks_present(question: str) -> bool:
    """True unless the question speaks of the past (a past auxiliary, a past-time word, a year)."""
    return _PAST.search(question or "") is None


def content_words(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall((text or "").lower()) if w not in _FUNCTION)


def same_subject(a: frozenset[str], b: frozenset[str], question: frozenset[str]) -> bool:
    """Two statements of one fact with a changed value: each holds a word the other lacks, they
    share a word of the question, and they share most of the smaller one's other words."""
    shared = a & b
    small = min(len(a), len(b))
    return (small >= 2 and len(shared) >= SAME_SUBJECT * (small - 1) and len(shared) < len(a)
            and len(shared) < len(b) and not shared.isdisjoint(question))


def current_first(question: str, items: Sequence[tuple[int, str, float]], db: Database | None = None) -> list[int]:
    """The store ids of ``items`` (store id, text, unix time; best first) with each current
    statement just ahead of the one it replaced; with ``db`` (assertions on) supersession counts
    too, and a superseded row whose successor is not among ``items`` goes to the end. The input
    order when the question is not about the present."""
    keys = [key for key, _, _ in items]
    if not asks_present(question):
        return keys
    replaced = superseded_turns(db, keys) if db is not None else {}
    return _reorder(keys, question, items, replaced)


def _reorder(keys: list[int], question: str, items: Sequence[tuple[int, str, float]],
             replaced: Mapping[int, int]) -> list[int]:
    asked = content_words(question)
    words = {key: content_words(text) for key, text, _ in items}
    at = {key: when for key, _, when in items}
    present = set(keys)
    order: list[int] = []
    for key in keys:
        older = next((i for i, k in enumerate(order) if replaced.get(k) == key
                      or (at[k] < at[key] and same_subject(words[k], words[key], asked))), len(order))
        order.insert(older, key)
    stale = [k for k in order if k in replaced and replaced[k] not in present]
    return [k for k in order if k not in stale] + stale


def superseded_turns(db: Database, store_ids: Sequence[int]) -> dict[int, int]:
    """``{store id: store id}``: the source row of a superseded assertion among ``store_ids`` and
    the source row of the newest assertion that superseded it; {} without the assertion tables."""
    if not store_ids or not db.has_optional("state"):
        return {}
    marks = ", ".join("?" for _ in store_ids)
    rows = db.read().execute(
        "SELECT old.store_id, new.store_id FROM assertions old JOIN assertion_relations r ON r.to_id ="
        " old.assertion_id AND r.relation = 'supersedes' JOIN assertions new ON new.assertion_id = r.from_id"
        f" WHERE old.store_id IN ({marks}) AND new.store_id <> old.store_id ORDER BY new.observed_at",
        [int(i) for i in store_ids])
    return {int(old): int(new) for old, new in rows}
