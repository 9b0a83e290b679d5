"""Changed facts: for a question about the present, a fact's current statement before those it replaced.

Replacement is read from the ``state`` tables' supersession when assertions are on, else from two
statements of one speaker sharing a question word and all their content words but at most
CHANGED_WORDS each (``same_subject``). A question about the past ("where did I live in 2023?")
keeps its order whole.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from . import idlist

if TYPE_CHECKING:
    from .db import Database

CHANGED_WORDS = 2  # content words of one statement the other lacks: at most this many (the changed value)
STATEMENT_MAX_CHARS = 2000  # a longer row (a tool output, a pasted file) states no one fact: never read for it
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
    """Two statements of one fact with a changed value: each holds one to CHANGED_WORDS words the
    other lacks, and every other word is shared, a word of the question among them."""
    shared = a & b
    return (0 < len(a) - len(shared) <= CHANGED_WORDS and 0 < len(b) - len(shared) <= CHANGED_WORDS
            and not shared.isdisjoint(question))


Item = tuple[int, str, float, str]  # store id, text, unix time, speaker (role)


def current_first(question: str, items: Sequence[Item], db: Database | None = None) -> list[int]:
    """The store ids of ``items`` (best first) with each current
    statement just ahead of the one it replaced; with ``db`` (assertions on) supersession counts
    too, and a superseded row whose successor is not among ``items`` goes to the end. The input
    order when the question is not about the present."""
    keys = [item[0] for item in items]
    if not asks_present(question):
        return keys
    replaced = superseded_turns(db, keys) if db is not None else {}
    return _reorder(keys, question, items, replaced)


def _reorder(keys: list[int], question: str, items: Sequence[Item], replaced: Mapping[int, int]) -> list[int]:
    asked = content_words(question)
    words = {key: content_words(text) for key, text, _, _ in items if len(text) <= STATEMENT_MAX_CHARS}
    at = {key: (when, speaker) for key, _, when, speaker in items}
    present = set(keys)
    order: list[int] = []
    for key in keys:
        older = next((i for i, k in enumerate(order) if replaced.get(k) == key
                      or (at[k][1] == at[key][1] and at[k][0] < at[key][0] and k in words and key in words
                          and same_subject(words[k], words[key], asked))), len(order))
        order.insert(older, key)
    stale = [k for k in order if k in replaced and replaced[k] not in present]
    return [k for k in order if k not in stale] + stale


def superseded_turns(db: Database, store_ids: Sequence[int]) -> dict[int, int]:
    """``{store id: store id}``: the source row of a superseded assertion among ``store_ids`` and
    the source row of the newest assertion that superseded it; {} without the assertion tables."""
    if not store_ids or not db.has_optional("state"):
        return {}
    conn, out = db.read(), {}
    for run in idlist.chunks(conn, [int(i) for i in store_ids]):  # each old row's successors in one run
        out.update({int(old): int(new) for old, new in conn.execute(
            "SELECT old.store_id, new.store_id FROM assertions old JOIN assertion_relations r ON r.to_id ="
            " old.assertion_id AND r.relation = 'supersedes' JOIN assertions new ON new.assertion_id = r.from_id"
            f" WHERE old.store_id IN ({', '.join('?' * len(run))}) AND new.store_id <> old.store_id"
            " ORDER BY new.observed_at", run)})
    return out
