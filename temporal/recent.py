"""``trove_recent``: what happened in a natural UTC period, from the cheapest faithful source.

Auto mode serves ready day/week/month rollups when together they cover every day of the
window that holds leaf summaries; otherwise the leaf summaries overlapping the window; and
for a window nothing summarises yet, its raw messages. The response names the mode and the
reason, pages with a cursor, keeps handles for ``trove_expand`` / ``trove_load_session``, and
fits its cap by dropping trailing items and cutting long texts, flagging both.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..toolkit import (
    MAX_SAFE_INTEGER,
    ToolContext,
    ToolError,
    current_session,
    enum_arg,
    fit_items,
    int_arg,
    iso,
    message_item,
    require_session,
    str_arg,
)
from . import queries
from . import rollup_plan as plan
from .periods import ACCEPTED_FORMS, Period, PeriodError, parse_period
from .rollup_store import RollupStore

clock: Callable[[], float] = time.time  # "now" for relative periods; tests replace it
MODES = ("auto", "summaries", "messages")
ENVELOPE_CHARS = 3000
MIN_ITEM_CHARS = 300
MAX_ITEM_CHARS = 16000
NODE_IDS_LISTED = 20
MISSING_LISTED = 5


def _text(text: str, max_chars: int) -> dict[str, Any]:
    cut = len(text) > max_chars
    return {"content": text[:max_chars], "content_chars": len(text), "content_truncated": cut}


def _cursor(mode: str, at: float, ident: int) -> str:
    return f"{mode}:{at!r}:{ident}"


def _parse_cursor(raw: str) -> tuple[str, float, int]:
    try:
        mode, at, ident = raw.split(":")
        when, number = float(at), int(ident)
        # what _cursor writes: a finite time and an id SQLite holds (a forged one must not reach a query)
        if mode not in ("rollups", "summaries", "messages") or not math.isfinite(when) \
                or not 0 <= number <= MAX_SAFE_INTEGER:
            raise ValueError(raw)
        return mode, when, number
    except ValueError:
        raise ToolError("cursor is not one this tool returned; pass next_cursor from the previous page "
                        "unchanged, or leave it out to start again") from None


def _period(text: str) -> Period:
    try:
        return parse_period(text, clock())
    except PeriodError as exc:
        raise ToolError(f"period {text[:60]!r} is not understood ({exc.reason}). Accepted forms: "
                        + "; ".join(ACCEPTED_FORMS)) from None


def trove_recent(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    text = (str_arg(args, "period", required=True, allow_empty=False) or "").strip()
    period = _period(text)
    scope = enum_arg(args, "scope", ("all", "current"), "all") or "all"
    wanted = enum_arg(args, "mode", MODES, "auto") or "auto"
    clamped: dict[str, Any] = {}
    limit = int_arg(args, "limit", 10, minimum=1, cap=200, clamped=clamped) or 10
    raw_cursor = (str_arg(args, "cursor") or "").strip()
    after = _parse_cursor(raw_cursor) if raw_cursor else None
    sid = require_session(ctx, "trove_recent(scope='current')") if scope == "current" else current_session(ctx)
    view = sid if scope == "current" else None
    start, end = period.start.timestamp(), period.end.timestamp()

    decided = _decide(ctx, period, start, end, view, wanted, after)
    mode = decided["mode"]
    if mode == "rollups":
        page = _rollup_page(ctx, decided["sections"], after, limit)
    elif mode == "summaries":
        page = _leaf_page(ctx, start, end, view, sid, after, limit)
    else:
        page = _message_page(ctx, start, end, view, sid, after, limit)

    head: dict[str, Any] = {"period": {"input": text, **period.to_dict()}, "scope": scope, "mode": mode,
                            "reason": decided["reason"], "rollups": decided["rollups"], "limit": limit, **clamped}
    if mode == "summaries":
        head["unsummarized_messages"] = queries.count_unsummarized(ctx.runtime.db, start, end, view,
                                                                   visible=ctx.visible)
    out = _fit(head, page, ctx.response_cap)
    out["hint"] = _HINTS[mode]
    return out


_HINTS = {
    "rollups": ("Each rollup lists the leaf summary node_ids it covers; trove_recent(period=<its period>, "
                "mode='summaries') lists them with expand handles."),
    "summaries": ("Open a summary's exact messages with its 'expand' call; mode='messages' pages the raw messages "
                  "of this window; continue with cursor=next_cursor while has_more."),
    "messages": ("trove_expand(store_id=...) reads one message in full; continue with cursor=next_cursor while "
                 "has_more."),
}


def _decide(ctx: ToolContext, period: Period, start: float, end: float, view: str | None, wanted: str,
            after: tuple[str, float, int] | None) -> dict[str, Any]:
    """The mode that serves this call and why, plus the rollup facts behind the choice."""
    enabled = bool(ctx.runtime.config.temporal_rollups_enabled)
    facts: dict[str, Any] = {"enabled": enabled}
    if after is not None:
        if wanted != "auto" and wanted != after[0]:
            raise ToolError(f"cursor belongs to mode '{after[0]}', not '{wanted}'; drop one of them")
        wanted = after[0]
        if wanted != "rollups":
            return {"mode": wanted, "reason": f"the cursor continues the '{wanted}' pages", "rollups": facts}
    if wanted in ("summaries", "messages"):
        return {"mode": wanted, "reason": f"mode='{wanted}' was requested", "rollups": facts}
    spans = queries.leaf_spans(ctx.runtime.db, start, end, view, ctx.visible)
    # A rollup summarises one owner scope's sessions: a scope-bound caller reads its own scope's
    # rollups; a session-bound one (TROVE_MEMORY_SCOPE=session, or an unscoped session) none.
    session_bound = not ctx.visible.unrestricted and (ctx.visible.mode == "session" or not ctx.visible.scope)
    if wanted == "rollups" and session_bound:
        raise ToolError("rollups cover a whole scope, not one session (TROVE_MEMORY_SCOPE="
                        f"{ctx.visible.mode}); use mode='summaries'")
    days = {d for s in spans for d in plan.leaf_days(s.earliest_at, s.latest_at) if start <= d < end}
    facts["days_with_summaries"] = len(days)
    if wanted == "auto" and not spans:
        return {"mode": "messages", "reason": "no summary covers this window yet: its raw messages, in time order",
                "rollups": facts}
    if wanted == "auto":
        if not enabled:
            return {"mode": "summaries", "reason": "rollups are off (TROVE_TEMPORAL_ROLLUPS_ENABLED): leaf summaries "
                    "overlapping the window", "rollups": facts}
        if view is not None:
            return {"mode": "summaries", "reason": "a rollup covers a whole owner scope; scope='current' reads this "
                    "session's leaf summaries", "rollups": facts}
        if session_bound:
            return {"mode": "summaries", "reason": "rollups cover a whole scope, not one session; "
                    f"TROVE_MEMORY_SCOPE={ctx.visible.mode} reads this session's leaf summaries", "rollups": facts}
        if period.granularity == "hour":
            return {"mode": "summaries", "reason": f"the window {period.label!r} is not made of whole UTC days, "
                    "which rollups need: leaf summaries overlapping it", "rollups": facts}
    sections, missing, covered = _coverage(ctx, start, end, spans)
    facts.update({"covered_days": covered, "sections": len(sections),
                  "missing": [{"day": k.label, "status": st} for k, st in missing[:MISSING_LISTED]]})
    if not missing:
        return {"mode": "rollups", "reason": f"ready rollups cover all {len(days)} day(s) with summaries",
                "rollups": facts, "sections": sections}
    if wanted == "rollups":  # a rollup cursor whose rollups changed since the first page
        raise ToolError("the rollups behind this cursor changed since the first page; call again without cursor")
    first = missing[0]
    why = (f"rollups cover {min(covered, len(days))} of {len(days)} day(s) with summaries"
           + (f" ({first[0].label}: {first[1]})" if first else ""))
    return {"mode": "summaries", "reason": why + ": leaf summaries overlapping the window", "rollups": facts}


def _coverage(ctx: ToolContext, start: float, end: float, spans: Sequence[queries.LeafSpan]
              ) -> tuple[list[plan.RollupState], list[tuple[plan.PeriodKey, str]], int]:
    """Ready rollups covering the window, per owner scope the caller reads (its own; every scope
    with leaves here under ``profile``), in time order; the (day, status) pairs none covers; and
    the covered day count. An unscoped session's leaves have no rollup, so they stay missing."""
    scopes = sorted({s.scope for s in spans}) if ctx.visible.unrestricted else [ctx.visible.scope]
    store = RollupStore(ctx.runtime.db)
    sections: list[plan.RollupState] = []
    missing: list[tuple[plan.PeriodKey, str]] = []
    covered = 0
    for scope in scopes:
        days = {d for s in spans if s.scope == scope for d in plan.leaf_days(s.earliest_at, s.latest_at)}
        states = {(s.kind, s.start): s for s in store.states_in(start, end, scope)} if scope else {}
        coverage = plan.plan_coverage(start, end, states, days)
        sections += coverage.sections
        missing += coverage.missing
        covered += coverage.covered_days
    sections.sort(key=lambda s: (s.start, s.scope))
    missing.sort(key=lambda m: m[0].start)
    return sections, missing, covered


def _item_chars(cap: int, n: int) -> int:
    return max(MIN_ITEM_CHARS, min(MAX_ITEM_CHARS, (cap - ENVELOPE_CHARS) // max(1, n)))


def _rollup_page(ctx: ToolContext, sections: Sequence[plan.RollupState], after: tuple[str, float, int] | None,
                 limit: int) -> dict[str, Any]:
    offset = after[2] if after is not None else 0
    chosen = list(sections[offset:offset + limit])
    store = RollupStore(ctx.runtime.db)
    rows = store.get_many([s.rollup_id for s in chosen])
    listed = [store.source_node_ids(r.rollup_id, NODE_IDS_LISTED + 1) for r in rows]

    def items(max_chars: int) -> list[dict[str, Any]]:
        return [{"kind": "rollup", "rollup_id": r.rollup_id, "period_kind": r.period_kind, "period": r.key.label,
                 "scope": r.scope, "period_start": iso(r.period_start), "period_end": iso(r.period_end),
                 "status": r.status, "built_at": iso(r.built_at), "level": r.level, "token_count": r.token_count,
                 **_text(r.summary, max_chars), "source_count": r.source_count, "node_ids": ids[:NODE_IDS_LISTED],
                 "node_ids_truncated": len(ids) > NODE_IDS_LISTED,
                 "expand": f"trove_recent(period='{r.key.label}', mode='summaries')"}
                for r, ids in zip(rows, listed, strict=True)]

    cursors = [_cursor("rollups", 0.0, offset + i + 1) for i in range(len(rows))]
    return {"items": items, "cursors": cursors, "total": len(sections),
            "more_after_page": offset + len(chosen) < len(sections)}


def _leaf_page(ctx: ToolContext, start: float, end: float, view: str | None, sid: str | None,
               after: tuple[str, float, int] | None, limit: int) -> dict[str, Any]:
    db, dag = ctx.runtime.db, ctx.runtime.dag
    rows = queries.leaves(db, start, end, session_id=view, after=(after[1], after[2]) if after else None,
                          limit=limit + 1, visible=ctx.visible)
    more = len(rows) > limit
    rows = rows[:limit]
    sources = queries.first_sources(db, [n.node_id for n in rows])

    def handle(n: Any) -> str:
        if sid and (view is not None or n.session_id == sid or dag.is_reachable(sid, n.node_id)):
            return f"trove_expand(node_id={n.node_id})"
        first, _ = sources.get(n.node_id, (1, 0))
        return f"trove_load_session(session_id='{n.session_id}', after_store_id={first - 1})"

    handles = [handle(n) for n in rows]

    def items(max_chars: int) -> list[dict[str, Any]]:
        return [{"kind": "summary", "node_id": n.node_id, "session_id": n.session_id,
                 "from_current_session": bool(sid) and n.session_id == sid, "earliest_at": iso(n.earliest_at),
                 "latest_at": iso(n.latest_at), "token_count": n.token_count, "level": n.level,
                 **_text(n.summary, max_chars), "messages": sources.get(n.node_id, (0, 0))[1], "expand": h}
                for n, h in zip(rows, handles, strict=True)]

    cursors = [_cursor("summaries", n.earliest_at if n.earliest_at is not None else n.created_at, n.node_id)
               for n in rows]
    return {"items": items, "cursors": cursors, "total": queries.count_leaves(db, start, end, view, ctx.visible),
            "more_after_page": more}


def _message_page(ctx: ToolContext, start: float, end: float, view: str | None, sid: str | None,
                  after: tuple[str, float, int] | None, limit: int) -> dict[str, Any]:
    db = ctx.runtime.db
    rows = queries.messages(db, start, end, session_id=view, after=(after[1], after[2]) if after else None,
                            limit=limit + 1, visible=ctx.visible)
    more = len(rows) > limit
    rows = rows[:limit]

    def items(max_chars: int) -> list[dict[str, Any]]:
        return [{"kind": "message", **{k: v for k, v in message_item(r, sid, max_chars=max_chars).items()
                                       if k != "content_offset"}} for r in rows]

    return {"items": items, "cursors": [_cursor("messages", r.created_at, r.store_id) for r in rows],
            "total": queries.count_messages(db, start, end, view, ctx.visible), "more_after_page": more}


def _fit(head: dict[str, Any], page: dict[str, Any], cap: int) -> dict[str, Any]:
    """The most leading items that fit ``cap`` (texts cut to a per-item share first)."""
    cursors: list[str] = page["cursors"]
    n_all = len(cursors)
    budget = _item_chars(cap, n_all)
    while True:
        items = page["items"](budget)

        def build(n: int, items: list[dict[str, Any]] = items) -> dict[str, Any]:
            more = n < n_all or page["more_after_page"]
            cut = any(i.get("content_truncated") for i in items[:n])
            return {**head, "total_items": page["total"], "returned_items": n, "has_more": more,
                    "next_cursor": cursors[n - 1] if more and n > 0 else None,
                    "truncated": cut or n < n_all, "items_dropped_for_size": n_all - n,
                    "char_limit": cap, "items": items[:n]}

        payload, fitted = fit_items(build, n_all, cap - 400)  # room for the hint added afterwards
        if fitted > 0 or n_all == 0 or budget <= MIN_ITEM_CHARS:
            return payload
        budget = max(MIN_ITEM_CHARS, budget // 2)
