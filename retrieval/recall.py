"""``trove_recall``: search the whole memory (every session, all time) and return bounded hits.

The handler parses the arguments, asks ``recall_search.recall`` for the ranked hits,
has ``recall_hydrate`` shape them (handles, snippets, answer_ready windows with exact refs)
and fits the response under its cap. It says which arms ran, with which weights and
coverage, and whether the search degraded and why.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

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
from .recall_hydrate import shape_hits
from .recall_search import DETAILS, INCLUDES, Key, RecallRequest, RecallResult, recall

DEFAULT_LIMIT, LIMIT_CAP = 8, 25
SNIPPETS_CAP = 32000  # answer_ready may use the tool's whole cap (64,000)
SEEN_REFS_MAX = 100
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

    payload, _ = fit_items(build, len(hits), cap)
    return payload
