"""``trove_recall``: search the whole memory (every session, all time) and return bounded hits.

The handler parses the arguments, asks ``recall_search.recall`` for the ranked hits, shapes them
(snippets, handles that work from the calling session, and for ``answer_ready`` citable windows
with exact refs) and fits the response under its cap, saying which arms ran and why it degraded.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..dates import occurrences_for
from ..refs import make_ref
from ..toolkit import (
    ToolContext,
    ToolError,
    bool_arg,
    current_session,
    enum_arg,
    fit_items,
    int_arg,
    iso,
    number,
    parse_time,
    str_arg,
    str_list_arg,
    turn_start,
)
from .query import rough_stem
from .recall_search import DETAILS, INCLUDES, Key, RecallHit, RecallRequest, RecallResult, recall
from .search import snippets_for

if TYPE_CHECKING:
    from ..rows import MessageRow
    from ..runtime import Runtime

DEFAULT_LIMIT, LIMIT_CAP = 8, 25
SNIPPETS_CAP = 32000  # answer_ready may use the tool's whole cap (64,000)
SEEN_REFS_MAX = 100
SNIPPET_CHARS = 300
ANSWER_READY_HITS = 8        # hits hydrated to windows
WINDOW_CHARS = 2400          # characters of evidence per hydrated hit
NEIGHBOR_CHARS = 400         # of that, at most this much per adjacent turn
SUMMARY_SOURCES = 2          # source rows shown for a summary hit
OCCURRENCES_PER_HIT = 8
OCCURRENCE_SCAN_CHARS = 4000  # characters of a hit read for its occurrence time (a tool output can be far longer)
LOAD_SESSION_BEFORE = 3      # rows of context before a hit when paging its session
_SEEN = re.compile(r"(?:(store|node)(?:_id)?[:=]|trove:)(\d{1,18})(?::\d+-\d+)?")


def trove_recall(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    clamped: dict[str, Any] = {}
    req = _request(ctx, args, clamped)
    occurrence = bool_arg(args, "include_occurrence_time")
    result = recall(ctx.runtime, req)
    hits = shape_hits(ctx.runtime, result.hits, result.match.expression, result.match.terms, req.current,
                      answer_ready=req.detail == "answer_ready", occurrence_time=occurrence)
    cap = ctx.response_cap if req.detail == "answer_ready" else min(ctx.response_cap, SNIPPETS_CAP)
    return _response(req, result, hits, clamped, cap)


def _request(ctx: ToolContext, args: Mapping[str, Any], clamped: dict[str, Any]) -> RecallRequest:
    query = (str_arg(args, "query", required=True, allow_empty=False) or "").strip()
    limit = int_arg(args, "limit", DEFAULT_LIMIT, minimum=1, cap=LIMIT_CAP, clamped=clamped) or DEFAULT_LIMIT
    bias = _unit_float(args, "scope_bias", 0.5, clamped)
    include = enum_arg(args, "include", INCLUDES, "all") or "all"
    detail = enum_arg(args, "detail", DETAILS, "snippets") or "snippets"
    since = parse_time(args.get("since"), "since")
    before = parse_time(args.get("before"), "before")
    if since is not None and before is not None and since >= before:
        raise ToolError("since must be earlier than before; swap them or widen the window")
    seen = _seen(str_list_arg(args, "seen_refs", max_items=SEEN_REFS_MAX) or [])
    key = ctx.session
    return RecallRequest(query=query, limit=limit, scope_bias=bias, include=include, detail=detail,
                         seen=seen, since=since, before=before, current=current_session(ctx),
                         current_conversation=(key.conversation_id or None) if key is not None else None,
                         visible=ctx.visible, turn_start=turn_start(ctx))


def _unit_float(args: Mapping[str, Any], name: str, default: float, clamped: dict[str, Any]) -> float:
    raw = args.get(name)
    if raw is None or raw == "":
        return default
    value = float(number(raw, name, "a number between 0 and 1"))
    if not 0.0 <= value <= 1.0:
        clamped[f"{name}_clamped_from"] = value
        value = min(1.0, max(0.0, value))
    return value


def _seen(refs: list[str]) -> frozenset[Key]:
    """Handles already shown: ``store:<id>``, ``node:<id>`` or an exact-ref ``trove:<id>:<a>-<b>``."""
    out: set[Key] = set()
    for ref in refs:
        m = _SEEN.fullmatch(ref.strip())
        if not m:
            raise ToolError(f"seen_refs item {ref[:60]!r} is not a recall handle; "
                            "use the 'ref' of a hit (store:<id> or node:<id>) or trove:<id>:<start>-<end>")
        out.add(("summary" if m.group(1) == "node" else "message", int(m.group(2))))
    return frozenset(out)


def _response(req: RecallRequest, result: RecallResult, hits: list[dict[str, Any]], clamped: dict[str, Any],
              cap: int) -> dict[str, Any]:
    provenance = {"arms_run": [name for name, arm in result.arms.items() if arm.ran],
                  "arm_weights": {name: arm.weight for name, arm in result.arms.items()},
                  "fusion": result.fusion,
                  "coverage": {name: arm.to_dict() for name, arm in result.arms.items()},
                  "ordering": "fused score x (1 + scope_bias if current conversation) x recency prior;"
                              " a changed fact's current statement first for a question about the present"}
    excluded = {k: v for k, v in result.excluded.items() if v}

    def build(n: int) -> dict[str, Any]:
        truncated = n < len(hits)
        out: dict[str, Any] = {
            "query": req.query if len(req.query) <= 500 else req.query[:500] + "…",
            "fts_query": result.match.expression[:1000], "limit": req.limit, "include": req.include,
            "detail": req.detail, "scope_bias": req.scope_bias, "total_hits": n, "hits": hits[:n],
            "has_more": result.more or truncated, "truncated": truncated,
            "degraded": result.degraded, "degraded_reason": result.degraded_reason, "provenance": provenance}
        if req.since is not None:
            out["since"] = iso(req.since)
        if req.before is not None:
            out["before"] = iso(req.before)
        if excluded:
            out["excluded"] = excluded
        if not hits and not result.match.expression:
            out["note"] = "the query has no searchable words; use words, \"phrases\" or prefix* terms"
        if n:
            out["next"] = ("open a hit with its 'expand' call (exact text) or 'load_session' (surrounding turns); "
                           "pass seen hits' 'ref' values as seen_refs to get further hits")
        out.update(clamped)
        return out

    return fit_items(build, len(hits), cap)[0]


def shape_hits(runtime: Runtime, hits: list[RecallHit], expression: str, terms: tuple[str, ...],
               current: str | None, *, answer_ready: bool, occurrence_time: bool) -> list[dict[str, Any]]:
    """Result dicts for the hits shown, best first. ``trove_expand(store_id=...)`` reaches any session's
    row; a node's expand is offered only when the current session reaches it, other sessions'
    summaries point at their best source row and at ``trove_load_session``."""
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
