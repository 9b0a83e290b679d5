"""Operator tools: ``trove_status``, ``trove_doctor`` and ``trove_inspect``.

Each calls one report builder and shapes the answer; when the status or doctor report fails, a
minimal honest fallback still answers. Inspect returns metadata only, never content.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..toolkit import ToolContext, current_session, int_arg, require_session
from . import doctor, status

TEXT_FIELD_CHARS = 1000


def _store_facts(ctx: ToolContext) -> dict[str, Any]:
    store, sid = ctx.runtime.store, current_session(ctx)
    out: dict[str, Any] = {"store": {"messages": store.count()}}
    if sid:
        stats = store.stats(sid)
        out["store"].update({"session_messages": stats["messages"], "session_estimated_tokens": stats["tokens"]})
        out["dag"] = {f"d{d}": s for d, s in ctx.runtime.dag.depth_stats(sid).items()}
    return out


def _delegate(ctx: ToolContext, build: Callable[..., Mapping[str, Any]], what: str, key: str) -> dict[str, Any]:
    try:
        return dict(build(runtime=ctx.runtime, snapshot=ctx.snapshot))
    except Exception as exc:  # a broken report must not hide the basic facts
        out: dict[str, Any] = {"fallback": True, "note": f"{what} failed; minimal engine facts shown"}
        out.update(dict(ctx.snapshot or {}))
        out.update(_store_facts(ctx))
        out[f"{key}_error"] = f"{type(exc).__name__}: {exc}"[:TEXT_FIELD_CHARS]
        return out


def trove_status(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    return _delegate(ctx, status.build_status, "the full status report", "status")


def trove_doctor(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    out = _delegate(ctx, doctor.run_doctor, "the doctor", "doctor")
    if out.get("fallback"):
        out.setdefault("overall", "unknown")
        out.setdefault("checks", [])
    return out


def trove_inspect(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    limit = int_arg(args, "limit", 20, minimum=1, cap=200, clamped=extra) or 20
    sid = require_session(ctx, "trove_inspect")
    return {**status.build_inspect(ctx.runtime, ctx.snapshot, sid, limit=limit), **extra}
