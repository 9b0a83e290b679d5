"""Turn ranked recall hits into what the model reads: snippets, working handles, and for
``answer_ready`` citable windows with exact refs (and occurrence times when asked).

Handles always work from the calling session: ``trove_expand(store_id=...)`` reaches any
session's raw row; ``trove_expand(node_id=...)`` is offered only for nodes the current
session can reach, other sessions' summaries point at their best source row and at
``trove_load_session``. Reads only the rows of the hits being shown.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..dates import occurrences_for
from ..refs import make_ref
from ..toolkit import iso
from .query import rough_stem
from .recall_search import RecallHit
from .search import snippets_for

if TYPE_CHECKING:
    from ..rows import MessageRow
    from ..runtime import Runtime

SNIPPET_CHARS = 300
ANSWER_READY_HITS = 8        # hits hydrated to windows
WINDOW_CHARS = 2400          # characters of evidence per hydrated hit
NEIGHBOR_CHARS = 400         # of that, at most this much per adjacent turn
SUMMARY_SOURCES = 2          # source rows shown for a summary hit
OCCURRENCES_PER_HIT = 8
OCCURRENCE_SCAN_CHARS = 4000  # characters of a hit read for its occurrence time (a tool output can be far longer)
LOAD_SESSION_BEFORE = 3      # rows of context before a hit when paging its session


def shape_hits(runtime: Runtime, hits: list[RecallHit], expression: str, terms: tuple[str, ...],
               current: str | None, *, answer_ready: bool, occurrence_time: bool) -> list[dict[str, Any]]:
    """Result dicts for the hits shown, best first."""
    snippets = snippets_for(runtime, expression, [h.item_id for h in hits if h.kind == "message" and not h.snippet])
    out = []
    for n, hit in enumerate(hits):
        sources = _summary_sources(runtime, hit, expression) if hit.kind == "summary" else []
        item = _base(hit, snippets, current, sources, runtime)
        if answer_ready and n < ANSWER_READY_HITS:
            item["evidence"] = _evidence(runtime, hit, sources, terms, occurrence_time)
        elif occurrence_time:
            item["occurrence_time"] = occurrences_for(hit.row or hit.node, limit=OCCURRENCES_PER_HIT,
                                                      max_chars=OCCURRENCE_SCAN_CHARS)
        out.append(item)
    return out


def hit_ref(hit: RecallHit) -> str:
    """The handle ``seen_refs`` accepts back: ``store:<id>`` or ``node:<id>``."""
    return f"{'store' if hit.kind == 'message' else 'node'}:{hit.item_id}"


def _base(hit: RecallHit, snippets: dict[int, str], current: str | None, sources: list[MessageRow],
          runtime: Runtime) -> dict[str, Any]:
    other = not current or hit.session_id != current
    item: dict[str, Any] = {
        "kind": "message_excerpt" if hit.kind == "message" else "summary", "ref": hit_ref(hit),
        "session_id": hit.session_id, "timestamp": iso(hit.at), "score": round(hit.score, 6),
        "arms": list(hit.arms), "from_current_session": not other}
    if hit.row is not None:
        row = hit.row
        item.update({"store_id": row.store_id, "role": row.role,
                     "snippet": _clip(hit.snippet or snippets.get(row.store_id) or row.content),
                     "expand": {"tool": "trove_expand", "args": {"store_id": row.store_id}}})
        if other:
            item["load_session"] = _load_args(row.session_id, row.store_id)
        return item
    node = hit.node
    assert node is not None
    item.update({"node_id": node.node_id, "depth": node.depth, "earliest_at": iso(node.earliest_at),
                 "latest_at": iso(node.latest_at), "snippet": _clip(hit.snippet or node.summary)})
    if current and runtime.dag.is_reachable(current, node.node_id):
        item["expand"] = {"tool": "trove_expand", "args": {"node_id": node.node_id}}
    elif sources:
        item["expand"] = {"tool": "trove_expand", "args": {"store_id": sources[0].store_id}}
        item["source_store_ids"] = [r.store_id for r in sources]
    if other:
        first = sources[0].store_id if sources else 0
        item["load_session"] = _load_args(node.session_id, first)
    return item


def _clip(text: str) -> str:
    """Snippets stay short even when one token is huge (a base64 run, a long id)."""
    return text if len(text) <= SNIPPET_CHARS else text[:SNIPPET_CHARS - 1] + "…"


def _load_args(session_id: str, store_id: int) -> dict[str, Any]:
    return {"tool": "trove_load_session",
            "args": {"session_id": session_id, "after_store_id": max(0, store_id - 1 - LOAD_SESSION_BEFORE),
                     "limit": 2 * LOAD_SESSION_BEFORE + 1}}


def _summary_sources(runtime: Runtime, hit: RecallHit, expression: str) -> list[MessageRow]:
    """The source rows of a summary that best match the query (else its first rows)."""
    below = runtime.dag.descendant_store_ids(hit.item_id)
    if not below:
        return []
    found = runtime.store.search(expression, store_ids=below[:500], limit=SUMMARY_SOURCES, snippets=False) \
        if expression else []
    rows = [row for row, _, _ in found] or runtime.store.get_many(below[:SUMMARY_SOURCES])
    return rows[:SUMMARY_SOURCES]


def _evidence(runtime: Runtime, hit: RecallHit, sources: list[MessageRow], terms: tuple[str, ...],
              occurrence_time: bool) -> list[dict[str, Any]]:
    """Citable windows: the hit row and its adjacent turns, or a summary's best source rows."""
    if hit.row is None:
        share = WINDOW_CHARS // max(1, len(sources))
        return [_window(r, terms, share, occurrence_time, "source") for r in sources]
    row = hit.row
    around = {r.store_id: r for r in runtime.store.get_many([row.store_id - 1, row.store_id + 1])
              if r.session_id == row.session_id}
    windows = ((around.get(row.store_id - 1), NEIGHBOR_CHARS, "before"),
               (row, WINDOW_CHARS - NEIGHBOR_CHARS * len(around), "hit"),
               (around.get(row.store_id + 1), NEIGHBOR_CHARS, "after"))
    return [_window(r, terms, budget, occurrence_time, position) for r, budget, position in windows if r is not None]


def _window(row: MessageRow, terms: tuple[str, ...], budget: int, occurrence_time: bool,
            position: str) -> dict[str, Any]:
    """``[start, end)`` of at most ``budget`` characters around the first query term."""
    text = row.content
    start, end = 0, len(text)
    if len(text) > budget:
        low = text.lower()
        hits = [p for p in (low.find(s) for s in (rough_stem(t) for t in terms) if s) if p >= 0]
        pos = min(hits) if hits else 0
        start = max(0, min(pos - budget // 3, len(text) - budget))
        end = start + budget
    ref = make_ref(row, start, end)
    out = {"position": position, "role": row.role, **ref.to_dict(), "content_chars": len(text),
           "window_truncated": start > 0 or end < len(text)}
    if occurrence_time:
        out["occurrence_time"] = occurrences_for({"content": ref.quote, "created_at": row.created_at},
                                                 limit=OCCURRENCES_PER_HIT)
    return out
