"""Operator tools: ``trove_status``, ``trove_doctor`` and ``trove_inspect``.

Status and doctor are thin wrappers over ``status.build_status`` and ``doctor.run_doctor``;
when those modules are absent or fail, a minimal honest fallback still answers. Inspect
is a read-only metadata inventory of the current session: it never returns content.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from . import doctor, status
from ..toolkit import ToolContext, int_arg, iso, require_session

TEXT_FIELD_CHARS = 1000


def _store_facts(ctx: ToolContext) -> dict[str, Any]:
    store, dag = ctx.runtime.store, ctx.runtime.dag
    key = ctx.session
    out: dict[str, Any] = {"store": {"messages": store.count()}}
    if key is not None and key.session_id:
        stats = store.stats(key.session_id)
        out["store"].update({"session_messages": stats["messages"], "session_estimated_tokens": stats["tokens"]})
        out["dag"] = {f"d{d}": s for d, s in dag.depth_stats(key.session_id).items()}
    return out


def _delegate(ctx: ToolContext, build: Callable[..., Any], what: str, key: str) -> dict[str, Any]:
    try:
        result = build(runtime=ctx.runtime, snapshot=ctx.snapshot)
    except Exception as exc:  # a broken report must not hide the basic facts
        out: dict[str, Any] = {"fallback": True, "note": f"{what} failed; minimal engine facts shown"}
        out.update(dict(ctx.snapshot))
        out.update(_store_facts(ctx))
        out[f"{key}_error"] = f"{type(exc).__name__}: {exc}"[:TEXT_FIELD_CHARS]
        return out
    return dict(result) if isinstance(result, Mapping) else {"result": result}


def trove_status(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    return _delegate(ctx, status.build_status, "the full status report", "status")


def trove_doctor(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    out = _delegate(ctx, doctor.run_doctor, "the doctor", "doctor")
    if out.get("fallback"):
        out.setdefault("overall", "unknown")
        out.setdefault("checks", [])
    return out


# -- trove_inspect ------------------------------------------------------------------
def trove_inspect(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    runtime = ctx.runtime
    store, dag, cfg = runtime.store, runtime.dag, runtime.config
    extra: dict[str, Any] = {}
    limit = int_arg(args, "limit", 20, minimum=1, cap=200, clamped=extra) or 20
    sid = require_session(ctx, "trove_inspect")
    snap = dict(ctx.snapshot)
    session = store.session(sid)
    stats = store.stats(sid)
    frontier_store_id = session.frontier_store_id if session is not None else 0
    uncompacted = store.count_after(sid, frontier_store_id)
    tail_count = int(cfg.fresh_tail_count)
    tail = store.tail(sid, tail_count, frontier_store_id) if tail_count > 0 else []
    visible = dag.visible(sid)
    carried_from: dict[str, int] = {}
    for n in visible:
        if n.session_id != sid:
            carried_from[n.session_id] = carried_from.get(n.session_id, 0) + 1
    depth_stats = dag.depth_stats(sid)
    frontier = dag.frontier(sid)
    latest = sorted(visible, key=lambda n: n.node_id, reverse=True)[:limit]
    out: dict[str, Any] = {
        "read_only": True,
        "session_id": sid,
        "conversation_id": snap.get("conversation_id", ""),
        "platform": snap.get("platform", ""),
        "session_mode": snap.get("session_mode", ""),
        "limit": limit,
        "lineage": {
            "previous_session_id": session.previous_session_id if session is not None else None,
            "own_nodes": len(visible) - sum(carried_from.values()),
            "carried_nodes": sum(carried_from.values()),
            "carried_from": [{"session_id": s, "nodes": c} for s, c in sorted(carried_from.items())][:limit],
            "session_created_at": iso(session.created_at) if session is not None else None,
            "session_ended_at": iso(session.ended_at) if session is not None and session.ended_at else None,
        },
        "messages": {
            "total": stats["messages"], "estimated_tokens": stats["tokens"],
            "min_store_id": stats["min_store_id"], "max_store_id": stats["max_store_id"],
            "frontier_store_id": frontier_store_id,
            "uncompacted_count": uncompacted,
            "fresh_tail_count": tail_count, "fresh_tail_max_tokens": int(cfg.fresh_tail_max_tokens),
            "pre_tail_message_count": max(0, uncompacted - len(tail)),
            "fresh_tail": {"messages": len(tail), "tokens": sum(r.token_count for r in tail),
                           "items": [{"store_id": r.store_id, "role": r.role, "token_count": r.token_count,
                                      "content_chars": len(r.content), "timestamp": iso(r.created_at),
                                      **({"tool_name": r.tool_name} if r.tool_name else {})}
                                     for r in tail[-limit:]],
                           "items_truncated": len(tail) > limit},
        },
        "compaction": {
            "last_status": snap.get("last_compression_status"),
            "last_reason": str(snap.get("last_compression_reason") or "")[:TEXT_FIELD_CHARS],
            "compression_count": snap.get("compression_count"),
            "last_prompt_tokens": snap.get("last_prompt_tokens"),
            "threshold_tokens": snap.get("threshold_tokens"),
            "frontier": {"session_frontier_store_id": frontier_store_id,
                         "highest_summarized_store_id": dag.highest_covered_store_id(sid)},
        },
        "dag": {
            "total_nodes": len(visible),
            "total_tokens": sum(s["tokens"] for s in depth_stats.values()),
            "depths": {f"d{d}": s for d, s in depth_stats.items()},
            "frontier_node_ids": [n.node_id for n in frontier][:limit],
            "frontier_size": len(frontier),
            "latest_nodes": [{"node_id": n.node_id, "depth": n.depth, "token_count": n.token_count,
                              "source_token_count": n.source_token_count, "level": n.level,
                              "earliest_at": iso(n.earliest_at), "latest_at": iso(n.latest_at),
                              "carried": n.session_id != sid} for n in latest],
        },
        "filters": _filters(runtime, snap),
    }
    out.update(extra)
    return out


def _filters(runtime: Any, snap: Mapping[str, Any]) -> dict[str, Any]:
    filters = runtime.filters
    return {"matched_pattern": snap.get("matched_pattern") or None,
            "session_mode": snap.get("session_mode"),
            "ignore_session_patterns": list(filters.ignore),
            "stateless_session_patterns": list(filters.stateless),
            "ignore_message_patterns": len(filters.message_patterns),
            "message_filter_state": filters.message_filter_state,
            "invalid_message_patterns": list(filters.invalid_patterns),
            "ignored_message_count": int(runtime.counters.get("ignored_message_count", 0))}

