"""Deterministic reading by handle: ``trove_describe``, ``trove_expand`` and ``trove_load_session``.

They turn summary node ids, store ids, payload refs and session ids into metadata and exact
content pages, without a model. Node ids must be visible in the current session (own or carried
over); store ids and sessions may be any the caller's scope reads; payload refs go through the
sidecar store. A session is read in store order behind an exclusive ``after_store_id`` cursor.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import tokens
from ..payloads.sidecar import PayloadError, describe_ref, read_ref, refs_in
from ..toolkit import (
    ROLES,
    ToolContext,
    ToolError,
    bool_arg,
    chars_within,
    content_slice,
    current_session,
    echo_filters,
    enum_arg,
    expand_hint,
    fit_items,
    int_arg,
    iso,
    message_item,
    message_meta,
    require_session,
    str_arg,
    str_list_arg,
    time_window,
)

if TYPE_CHECKING:
    from ..dag import NodeRow

SAMPLES_PER_DEPTH = 20
CHILDREN_LISTED = 50
SOURCE_PAGE = 200
MIN_PARTIAL_TOKENS = 200  # do not start a new source with less budget than this
REFS_LISTED = 20
# Room under the response cap for the clamp fields and ignored_arguments added after a node
# page is fitted, so the generic bound never has to halve a fitted page.
PAGE_HEADROOM = 6000


def _visible_node(ctx: ToolContext, session_id: str, node_id: int) -> NodeRow:
    dag = ctx.runtime.dag
    node = dag.get(node_id)
    # Reachable nodes are the session's own and those carried in; a carried node whose owner is
    # outside the caller's scope (a foreign carry) is refused like an unknown one.
    if node is None or not dag.is_reachable(session_id, node.node_id) or (
            node.session_id != session_id and ctx.visible.mode == "conversation"
            and not ctx.runtime.store.visible_session(node.session_id, ctx.visible)):
        raise ToolError(f"summary node {node_id} is not visible in the current session; "
                        "trove_describe() lists this session's nodes (use store_id for raw rows of other sessions)")
    return node


def _node_meta(session_id: str, node: NodeRow) -> dict[str, Any]:
    return {"node_id": node.node_id, "depth": node.depth, "token_count": node.token_count,
            "source_token_count": node.source_token_count, "earliest_at": iso(node.earliest_at),
            "latest_at": iso(node.latest_at), "carried": node.session_id != session_id,
            "expand_hint": expand_hint(node)}


def _payload_refused(exc: PayloadError) -> ToolError:
    text = str(exc)  # most name the argument already; say it once
    return ToolError(text if text.startswith("externalized_ref") else f"externalized_ref: {text}")


# -- trove_describe --------------------------------------------------------------
def trove_describe(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    node_id = int_arg(args, "node_id", None, minimum=1)
    ref = (str_arg(args, "externalized_ref") or "").strip() or None
    if node_id is not None and ref:
        raise ToolError("give node_id or externalized_ref, not both")
    sid = require_session(ctx, "trove_describe")
    if ref:
        try:
            return describe_ref(ctx.runtime, ref, session_id=sid)
        except PayloadError as exc:
            raise _payload_refused(exc) from None
    if node_id is not None:
        return _describe_node(ctx, sid, node_id)
    return _describe_session(ctx, sid)


def _describe_session(ctx: ToolContext, sid: str) -> dict[str, Any]:
    dag, store = ctx.runtime.dag, ctx.runtime.store
    stats = dag.depth_stats(sid)
    nodes = dag.visible(sid)
    depths: dict[str, Any] = {}
    for depth, st in stats.items():
        at_depth = [n for n in nodes if n.depth == depth]
        sample = at_depth[-SAMPLES_PER_DEPTH:]
        depths[f"d{depth}"] = {"count": st["count"], "total_tokens": st["tokens"],
                               "total_source_tokens": st["source_tokens"],
                               "nodes": [_node_meta(sid, n) for n in sample],
                               "more_nodes": max(0, len(at_depth) - len(sample))}
    frontier = [n.node_id for n in dag.frontier(sid)]
    return {"session_id": sid, "store_message_count": store.count(sid), "total_nodes": len(nodes),
            "frontier_node_ids": frontier[:100], "frontier_size": len(frontier), "depths": depths,
            "hint": "trove_describe(node_id=...) for one node; trove_expand(node_id=...) for its sources"}


def _describe_node(ctx: ToolContext, sid: str, node_id: int) -> dict[str, Any]:
    dag, store = ctx.runtime.dag, ctx.runtime.store
    node = _visible_node(ctx, sid, node_id)
    total = dag.source_count(node)
    ids = dag.source_ids(node, 0, CHILDREN_LISTED)
    if node.depth == 0:
        children = [{"store_id": r.store_id, "session_id": r.session_id, "role": r.role,
                     "timestamp": iso(r.created_at), "token_count": r.token_count,
                     "content_chars": len(r.content)} for r in store.get_many(ids)]
    else:
        children = [_node_meta(sid, c) for c in (dag.get(i) for i in ids) if c is not None]
    out = _node_meta(sid, node)
    out.update({"owner_session_id": node.session_id, "level": node.level, "model": node.model,
                "source_type": "messages" if node.depth == 0 else "nodes", "num_sources": total,
                "descendant_message_count": len(dag.descendant_store_ids(node.node_id)),
                "parent_node_id": dag.parent_of(node.node_id, sid), "summary_preview": node.summary[:300],
                "summary_chars": len(node.summary), "children": children,
                "children_truncated": total > len(ids)})
    return out


# -- trove_expand ------------------------------------------------------------------
def trove_expand(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    chosen = [k for k in ("node_id", "store_id", "externalized_ref") if args.get(k) not in (None, "")]
    if len(chosen) != 1:
        raise ToolError("give exactly one of node_id, store_id or externalized_ref"
                        + (f" (got {', '.join(chosen)})" if chosen else ""))
    clamped: dict[str, Any] = {}
    max_tokens = int_arg(args, "max_tokens", 4000, minimum=1, cap=16000, clamped=clamped) or 4000
    content_offset = int_arg(args, "content_offset", 0, minimum=0) or 0
    exact = bool_arg(args, "include_exact_ref")
    source_offset = int_arg(args, "source_offset", 0, minimum=0) or 0  # checked in every mode: never ignored
    source_limit = int_arg(args, "source_limit", None, minimum=1, cap=SOURCE_PAGE)
    part = enum_arg(args, "part", ("content", "tool_calls"), "content") or "content"  # checked in every mode too
    mode = chosen[0]
    if part != "content" and mode != "store_id":  # a node or a payload has no tool-call part to read
        raise ToolError(f"part={part!r} reads one message's tool calls: give store_id (the {mode} mode reads content)")
    if mode == "store_id":
        store_id = int_arg(args, "store_id", None, minimum=1) or 0
        out = _expand_store(ctx, store_id, part, max_tokens, content_offset, exact)
    elif mode == "externalized_ref":
        sid = require_session(ctx, "trove_expand(externalized_ref)")
        ref = (str_arg(args, "externalized_ref") or "").strip()
        try:
            out = read_ref(ctx.runtime, ref, session_id=sid, content_offset=content_offset, max_chars=max_tokens * 4)
        except PayloadError as exc:
            raise _payload_refused(exc) from None
    else:
        sid = require_session(ctx, "trove_expand(node_id)")
        node = _visible_node(ctx, sid, int_arg(args, "node_id", None, minimum=1) or 0)
        page = _walk_sources(ctx, sid, node, source_offset, source_limit, content_offset, max_tokens, exact)
        out = _node_response(sid, node, page, ctx.response_cap - PAGE_HEADROOM)
    out.update(clamped)
    return out


def _expand_store(ctx: ToolContext, store_id: int, part: str, max_tokens: int, offset: int,
                  exact: bool) -> dict[str, Any]:
    row = ctx.runtime.store.get(store_id, ctx.visible)  # another scope's row reads as unknown
    if row is None:
        raise ToolError(f"no stored message with store_id {store_id}")
    current = current_session(ctx)
    if part == "tool_calls":
        text = row.tool_calls or ""
        out = message_meta(row, current)
        out["part"] = "tool_calls"
        out.update(content_slice(text, offset, chars_within(text, offset, max_tokens)))
    else:
        out = message_item(row, current, offset=offset, max_chars=chars_within(row.content, offset, max_tokens),
                           include_exact_ref=exact)
        out["part"] = "content"
    refs = refs_in(row.content)[:REFS_LISTED]
    if refs:
        out["externalized_refs"] = refs
        if row.session_id != current:
            out["externalized_note"] = "refs of another session's rows are readable only from that session"
    if out["has_more"]:
        out["expand_args"] = {"store_id": store_id, "part": part, "content_offset": out["next_content_offset"]}
    return out


@dataclass(frozen=True)
class _SourcePage:
    """The sources of one node that fit the token budget, and where the next page starts."""

    source_offset: int
    content_offset: int
    source_limit: int | None
    total: int
    items: list[dict[str, Any]]
    next_source: int | None
    next_content: int | None


def _walk_sources(ctx: ToolContext, sid: str, node: NodeRow, source_offset: int, source_limit: int | None,
                  content_offset: int, max_tokens: int, exact: bool) -> _SourcePage:
    """Walk a node's sources from the cursor, spending ``max_tokens`` on their content."""
    dag, store = ctx.runtime.dag, ctx.runtime.store
    total = dag.source_count(node)
    if source_offset > total:
        raise ToolError(f"source_offset {source_offset} is past the node's {total} sources")
    ids = dag.source_ids(node, source_offset, source_limit or SOURCE_PAGE)
    rows = {r.store_id: r for r in store.get_many(ids)} if node.depth == 0 else {}
    budget = max_tokens
    items: list[dict[str, Any]] = []
    next_source: int | None = None
    next_content: int | None = None
    for i, source_id in enumerate(ids):
        index = source_offset + i
        start = content_offset if i == 0 else 0
        row = rows.get(source_id)  # a message of a depth-0 node
        child = dag.get(source_id) if node.depth > 0 else None
        text = row.content if row is not None else child.summary if child is not None else ""
        if start > len(text):
            raise ToolError(f"content_offset {start} is past the end of source {index} ({len(text)} chars)")
        need = tokens.count(text[start:])
        if items and need > budget and budget < MIN_PARTIAL_TOKENS:
            next_source, next_content = index, 0
            break
        take = len(text) - start if need <= budget else chars_within(text, start, budget)
        if row is not None:
            item: dict[str, Any] = message_item(row, sid, offset=start, max_chars=take, include_exact_ref=exact)
        elif node.depth == 0:
            item = {"store_id": source_id, "missing": True}
        else:
            item = _node_meta(sid, child) if child is not None else {"node_id": source_id, "missing": True}
            item.update(content_slice(text, start, take))
        item["source_index"] = index
        items.append(item)
        budget -= min(need, budget)
        if item.get("has_more"):
            next_source, next_content = index, item["next_content_offset"]
            break
        if budget <= 0 and index + 1 < total:
            next_source, next_content = index + 1, 0
            break
    else:
        end = source_offset + len(ids)
        if end < total:
            next_source, next_content = end, 0
    return _SourcePage(source_offset, content_offset, source_limit, total, items, next_source, next_content)


def _node_response(sid: str, node: NodeRow, page: _SourcePage, cap: int) -> dict[str, Any]:
    """The page as a response, cut at a source boundary to fit ``cap``; a cut page's cursor
    points at the first source left out."""
    items = page.items

    def build(n: int) -> dict[str, Any]:
        nxt, nxt_content = (page.next_source, page.next_content) if n == len(items) else \
            (items[n]["source_index"], items[n].get("content_offset", 0))
        more = nxt is not None
        pagination = {"source_offset": page.source_offset, "content_offset": page.content_offset,
                      "source_limit": page.source_limit, "returned_sources": n, "total_sources": page.total,
                      "next_source_offset": nxt, "next_content_offset": nxt_content if more else None,
                      "has_more": more, "remaining_sources": page.total - nxt if more and nxt is not None else 0}
        out = {"node_id": node.node_id, "depth": node.depth, "carried": node.session_id != sid,
               "source_type": "messages" if node.depth == 0 else "nodes", "expanded": items[:n],
               "pagination": pagination}
        if more:
            out["expand_args"] = {"node_id": node.node_id, "source_offset": nxt, "content_offset": nxt_content or 0}
        return out

    payload, kept = fit_items(build, len(items), cap)
    return payload if kept or not items else build(1)


# -- trove_load_session ---------------------------------------------------------

def trove_load_session(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    session_id = (str_arg(args, "session_id", required=True, allow_empty=False) or "").strip()
    extra: dict[str, Any] = {}
    after = int_arg(args, "after_store_id", 0, minimum=0) or 0
    limit = int_arg(args, "limit", 100, minimum=1, cap=200, clamped=extra) or 100
    max_chars = int_arg(args, "max_content_chars", 4000, minimum=1, cap=20000, clamped=extra) or 4000
    roles = str_list_arg(args, "roles", max_items=len(ROLES))
    for r in roles or []:
        if r not in ROLES:
            raise ToolError(f"roles may contain only {', '.join(ROLES)}; got {r[:40]!r}")
    time_from, time_to = time_window(args)
    exact = bool_arg(args, "include_exact_ref")

    store = ctx.runtime.store
    if not store.visible_session(session_id, ctx.visible):  # unknown, or another scope's: the same refusal
        raise ToolError(f"no stored session {session_id[:120]!r}; trove_grep with session_scope='all' "
                        "shows the session_id of each hit")
    total = store.count(session_id)
    rows = store.page(session_id, after, limit + 1, roles=roles or None, time_from=time_from, time_to=time_to)
    more = len(rows) > limit
    current = current_session(ctx)
    items = [message_item(r, current, max_chars=max_chars, include_exact_ref=exact) for r in rows[:limit]]

    def build(n: int) -> dict[str, Any]:
        has_more = more or n < len(items)
        out: dict[str, Any] = {"session_id": session_id, "limit": limit, "max_content_chars": max_chars,
                               "after_store_id": after, "total_messages": total, "returned_messages": n,
                               "messages": items[:n], "has_more": has_more,
                               "next_cursor": (int(items[n - 1]["store_id"]) if n else after) if has_more else None}
        if n < len(items):
            out["truncated"] = True
        out.update(echo_filters(roles=roles, time_from=time_from, time_to=time_to))
        out.update(extra)
        return out

    payload, kept = fit_items(build, len(items), ctx.response_cap)
    return payload if kept or not items else build(1)  # one enormous row: returned, shrunk by the generic bound
