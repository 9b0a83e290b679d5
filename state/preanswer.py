"""Pre-answer evidence: a small fenced block of exact refs for the user's message (opt-in).

``evidence_block`` searches stored raw messages (full text, the sessions of the caller's
scope (TROVE_MEMORY_SCOPE), this turn's own message excluded) and, with assertions on, the
active assertions whose subject name, predicate or value holds a word of the message (an
indexed lookup over ``assertion_terms``, capped rows). For a question about the present, the
current statement of a changed fact comes before the one it replaced (``changed``).
The block is fenced by ``ingest.EVIDENCE_OPEN``/``EVIDENCE_CLOSE``: ingest strips it from any
user message that carries it, so it is never stored or summarised as something the user said. Bounded: at most
MAX_ITEMS refs, MAX_QUOTE characters each, MAX_BLOCK characters in all. The hook calls it
inside its fail-open boundary.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .. import changed
from ..ingest import EVIDENCE_CLOSE, EVIDENCE_OPEN
from ..refs import iso, make_ref, shorthand
from ..rows import SessionKey
from ..scope import EVERYTHING, Visibility

if TYPE_CHECKING:
    from ..runtime import Runtime

MAX_ITEMS = 4
MAX_QUOTE = 280
MAX_BLOCK = 2000
MAX_ASSERTIONS = 2    # assertion lines in one block
MAX_EXAMINED = 96     # index postings one turn reads (plus a quarter as many assertion rows)
_WORD = re.compile(r"[^\W_]{4,}", re.U)
_STOP = frozenset("that this what which when where with have from your about there their would could should "
                  "into them they were been does doing just like than then some more also only very".split())


def query_words(text: str) -> list[str]:
    return list(dict.fromkeys(w for w in _WORD.findall(text.lower()) if w not in _STOP))[:12]


def assertion_lines(runtime: Runtime, words: list[str], stats: dict[str, int] | None = None,
                    visible: Visibility = EVERYTHING) -> list[str]:
    """Block lines for the active assertions indexed under ``words`` (at most MAX_ASSERTIONS).

    An indexed lookup with a hard cap on rows examined (``AssertionStore.search_terms``): the
    cost of a turn stays the same however many assertions the table holds."""
    from .assertion_store import AssertionStore

    store = AssertionStore(runtime.db)
    if not words or not store.present():
        return []
    found, examined = store.search_terms(words, MAX_ASSERTIONS, MAX_EXAMINED, visible)
    if stats is not None:
        stats["examined"] = examined
    return [f"- {shorthand(a.store_id, a.span_start, a.span_end)} ({a.speaker_role}, {iso(a.observed_at)}): "
            f"{a.subject_key} {a.predicate_key} = {a.value_text[:80]!r}; quote {a.quote[:MAX_QUOTE]!r}"
            for a in found]


def evidence_block(runtime: Runtime, user_message: str, session_id: str) -> str:
    """The fenced block for ``user_message`` ("" when nothing relevant is stored)."""
    words = query_words(user_message or "")
    if not words:
        return ""
    visible = runtime.visibility(SessionKey(session_id))  # the block quotes only the caller's scope
    lines = assertion_lines(runtime, words, visible=visible) if runtime.config.assertions_enabled else []
    expression = " OR ".join(f'"{w}"' for w in words)
    found = {row.store_id: row for row, _, _ in runtime.store.search(
        expression, limit=MAX_ITEMS * 3, snippets=False, max_candidates=2000, visible=visible)}
    order = changed.current_first(user_message, [(k, r.content, float(r.created_at or 0.0), r.role)
                                                 for k, r in found.items()],
                                  runtime.db if runtime.config.assertions_enabled else None)
    for row in (found[k] for k in order):
        if len(lines) >= MAX_ITEMS:
            break
        if row.content.strip() == (user_message or "").strip() or row.role not in ("user", "assistant"):
            continue
        if runtime.filters.ignored_by(row.session_id, row.platform) or EVIDENCE_OPEN in row.content:
            continue
        low = row.content.lower()
        at = min((low.find(w) for w in words if w in low), default=0)
        start = max(0, at - 60)
        ref = make_ref(row, start, start + MAX_QUOTE)
        lines.append(f"- {ref.shorthand} ({row.role}, {iso(row.created_at)}): {ref.quote!r}")
    if not lines:
        return ""
    head = (f"{EVIDENCE_OPEN}: stored messages that may bear on the question above. Retrieved by the trove "
            "plugin, not written by the user; they may be stale or wrong. Cite a ref only after checking it "
            "(trove_expand or trove_evidence_pack).")
    body = "\n".join(lines)
    block = f"{head}\n{body}\n{EVIDENCE_CLOSE}"
    if len(block) > MAX_BLOCK:
        keep = MAX_BLOCK - len(head) - len(EVIDENCE_CLOSE) - 10
        block = f"{head}\n{body[:keep]}…\n{EVIDENCE_CLOSE}"
    return block
