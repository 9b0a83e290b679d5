"""Drill-down tools: ``trove_describe``, ``trove_expand`` and ``trove_expand_query``.

They turn summary node ids, store ids and payload refs into metadata, exact content pages
and bounded answers. Node ids must be visible in the current session (own or carried
over); store ids may come from any session. Payload refs go to ``payloads`` when present.
"""
from __future__ import annotations

import threading
from typing import Any, Mapping

from .. import tokens
from .query import build_match
from ..toolkit import (ToolContext, ToolError, current_session, require_session, bool_arg, chars_within, content_slice, dumps, enum_arg,
                           fit_items, int_arg, int_list_arg, iso, message_item, message_meta, str_arg)

SAMPLES_PER_DEPTH = 20
CHILDREN_LISTED = 50
SOURCE_PAGE = 200
MIN_PARTIAL_TOKENS = 200  # do not start a new source with less budget than this
EXPAND_QUERY_CHAR_LIMIT = 32000
EXPAND_CHAR_LIMIT = 90000
PER_MESSAGE_EVIDENCE_TOKENS = 2000
DESCENDANTS_RANKED = 2000


def _payloads(func: str) -> Any:
    """A ``payloads`` function whose refusals (bad, missing or foreign refs) become ToolErrors."""
    try:
        from ..payloads import sidecar as payloads
        target = getattr(payloads, func)
    except (ImportError, AttributeError):
        raise ToolError("externalized payloads are not available in this installation") from None
    refusal = getattr(payloads, "PayloadError", ToolError)

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return target(*args, **kwargs)
        except refusal as exc:
            raise ToolError(f"externalized_ref: {exc}") from None

    return call


def _refs_in(text: str) -> list[str]:
    try:
        from ..payloads.sidecar import refs_in
    except ImportError:
        return []
    return list(refs_in(text))[:20]


def _visible_node(ctx: ToolContext, session_id: str, node_id: int) -> Any:
    dag = ctx.runtime.dag
    node = dag.get(node_id)
    if node is None or not dag.is_reachable(session_id, node.node_id):
        raise ToolError(f"summary node {node_id} is not visible in the current session; "
                        "trove_describe() lists this session's nodes (use store_id for raw rows of other sessions)")
    return node


def _node_meta(ctx: ToolContext, session_id: str, node: Any) -> dict[str, Any]:
    return {"node_id": node.node_id, "depth": node.depth, "token_count": node.token_count,
            "source_token_count": node.source_token_count, "earliest_at": iso(node.earliest_at),
            "latest_at": iso(node.latest_at), "carried": node.session_id != session_id,
            "expand_hint": node.expand_hint or f"trove_expand(node_id={node.node_id})"}


# -- trove_describe --------------------------------------------------------------
def trove_describe(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    node_id = int_arg(args, "node_id", None, minimum=1)
    ref = (str_arg(args, "externalized_ref") or "").strip() or None
    if node_id is not None and ref:
        raise ToolError("give node_id or externalized_ref, not both")
    sid = require_session(ctx, "trove_describe")
    if ref:
        out = _payloads("describe_ref")(ctx.runtime, ref, session_id=sid)
        return dict(out) if isinstance(out, dict) else {"externalized_ref": ref, "result": out}
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
                               "nodes": [_node_meta(ctx, sid, n) for n in sample],
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
        children = [_node_meta(ctx, sid, c) for c in (dag.get(i) for i in ids) if c is not None]
    parent = dag.parent_of(node.node_id, sid)
    out = _node_meta(ctx, sid, node)
    out.update({"owner_session_id": node.session_id, "level": node.level, "model": node.model,
                "source_type": "messages" if node.depth == 0 else "nodes", "num_sources": total,
                "descendant_message_count": len(dag.descendant_store_ids(node.node_id)),
                "parent_node_id": parent, "summary_preview": node.summary[:300],
                "summary_chars": len(node.summary), "children": children,
                "children_truncated": total > len(ids)})
    return out


# -- trove_expand ------------------------------------------------------------------
def trove_expand(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    chosen = [k for k in ("node_id", "store_id", "externalized_ref") if args.get(k) not in (None, "")]
    if len(chosen) != 1:
        raise ToolError("give exactly one of node_id, store_id or externalized_ref"
                        + (f" (got {', '.join(chosen)})" if chosen else ""))
    extra: dict[str, Any] = {}
    max_tokens = int_arg(args, "max_tokens", 4000, minimum=1, cap=16000, clamped=extra) or 4000
    content_offset = int_arg(args, "content_offset", 0, minimum=0) or 0
    exact = bool_arg(args, "include_exact_ref")
    mode = chosen[0]
    if mode == "store_id":
        out = _expand_store(ctx, args, max_tokens, content_offset, exact)
    elif mode == "externalized_ref":
        sid = require_session(ctx, "trove_expand(externalized_ref)")
        ref = str_arg(args, "externalized_ref") or ""
        res = _payloads("read_ref")(ctx.runtime, ref.strip(), session_id=sid, content_offset=content_offset,
                                    max_chars=max_tokens * 4)
        out = dict(res) if isinstance(res, dict) else {"externalized_ref": ref, "result": res}
    else:
        out = _expand_node(ctx, args, max_tokens, content_offset, exact)
    out.update(extra)
    return out


def _expand_store(ctx: ToolContext, args: Mapping[str, Any], max_tokens: int, offset: int,
                  exact: bool) -> dict[str, Any]:
    store_id = int_arg(args, "store_id", None, minimum=1) or 0
    part = enum_arg(args, "part", ("content", "tool_calls"), "content") or "content"
    row = ctx.runtime.store.get(store_id)
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
    refs = _refs_in(row.content)
    if refs:
        out["externalized_refs"] = refs
        if row.session_id != current:
            out["externalized_note"] = "refs of another session's rows are readable only from that session"
    if out["has_more"]:
        out["expand_args"] = {"store_id": store_id, "part": part, "content_offset": out["next_content_offset"]}
    return out


def _expand_node(ctx: ToolContext, args: Mapping[str, Any], max_tokens: int, content_offset: int,
                 exact: bool) -> dict[str, Any]:
    dag, store = ctx.runtime.dag, ctx.runtime.store
    sid = require_session(ctx, "trove_expand(node_id)")
    node = _visible_node(ctx, sid, int_arg(args, "node_id", None, minimum=1) or 0)
    source_offset = int_arg(args, "source_offset", 0, minimum=0) or 0
    source_limit = int_arg(args, "source_limit", None, minimum=1, cap=SOURCE_PAGE)
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
        if node.depth == 0:
            row = rows.get(source_id)
            text = row.content if row is not None else ""
        else:
            child = dag.get(source_id)
            text = child.summary if child is not None else ""
        if start > len(text):
            raise ToolError(f"content_offset {start} is past the end of source {index} ({len(text)} chars)")
        need = tokens.count(text[start:])
        if items and need > budget and budget < MIN_PARTIAL_TOKENS:
            next_source, next_content = index, 0
            break
        take = len(text) - start if need <= budget else chars_within(text, start, budget)
        if node.depth == 0:
            if row is None:
                item: dict[str, Any] = {"store_id": source_id, "missing": True}
            else:
                item = message_item(row, sid, offset=start, max_chars=take, include_exact_ref=exact)
        else:
            item = _node_meta(ctx, sid, child) if child is not None else {"node_id": source_id, "missing": True}
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
    def build(n: int) -> dict[str, Any]:
        nxt, nxt_content = (next_source, next_content) if n == len(items) else \
            (items[n]["source_index"], items[n].get("content_offset", 0))
        more = nxt is not None
        pagination = {"source_offset": source_offset, "content_offset": content_offset,
                      "source_limit": source_limit, "returned_sources": n, "total_sources": total,
                      "next_source_offset": nxt, "next_content_offset": nxt_content if more else None,
                      "has_more": more, "remaining_sources": total - nxt if more and nxt is not None else 0}
        out = {"node_id": node.node_id, "depth": node.depth, "carried": node.session_id != sid,
               "source_type": "messages" if node.depth == 0 else "nodes", "expanded": items[:n],
               "pagination": pagination}
        if more:
            out["expand_args"] = {"node_id": node.node_id, "source_offset": nxt, "content_offset": nxt_content or 0}
        return out

    payload, kept = fit_items(build, len(items), EXPAND_CHAR_LIMIT)
    return payload if kept or not items else build(1)


# -- trove_expand_query --------------------------------------------------------------
SYSTEM_PROMPT = (
    "You answer one question using only the evidence blocks given, which come from the stored history "
    "of a conversation. Summaries are cues; raw messages are the exact record, and newer evidence wins "
    "over older when they disagree. Cite what you relied on as [store N] or [node N]. If the evidence "
    "does not contain the answer, say that plainly. Be concise.")


def trove_expand_query(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    runtime = ctx.runtime
    cfg = runtime.config
    prompt = (str_arg(args, "prompt", required=True, allow_empty=False) or "").strip()
    query = (str_arg(args, "query") or "").strip() or None
    node_ids = int_list_arg(args, "node_ids", max_items=50) or []
    extra: dict[str, Any] = {}
    max_results = int_arg(args, "max_results", 5, minimum=1, cap=20, clamped=extra) or 5
    max_tokens = int_arg(args, "max_tokens", 2000, minimum=1, cap=8000, clamped=extra) or 2000
    default_ctx = max(max_tokens, int(cfg.expansion_context_tokens))
    context_max = int_arg(args, "context_max_tokens", default_ctx, minimum=256, cap=200000,
                          clamped=extra) or default_ctx
    sid = require_session(ctx, "trove_expand_query")

    given = {n: runtime.dag.get(n) for n in node_ids}
    rejected = [n for n, node in given.items() if node is None or not runtime.dag.is_reachable(sid, node.node_id)]
    nodes = [node for n, node in given.items() if n not in rejected]
    search_text = query or (prompt if not node_ids else None)
    match = build_match(search_text) if search_text else None
    raw_rows: list[Any] = []
    if match is not None and match.expression:
        seen = {n.node_id for n in nodes}
        for node, _, _ in runtime.dag.search(match.expression, sid, limit=max_results):
            if node.node_id not in seen:
                nodes.append(node)
                seen.add(node.node_id)
        raw_rows = [r for r, _, _ in runtime.store.search(match.expression, session_ids=[sid], limit=max_results)]
    terms = _terms(match)
    evidence = _gather(ctx, sid, nodes, raw_rows, terms, context_max)

    model = cfg.expansion_model or cfg.summary_model or ""
    timeout_s = max(1.0, float(cfg.expansion_timeout_ms) / 1000.0)
    base: dict[str, Any] = {
        "prompt": prompt[:2000], "query": query, "answer": None, "model": model or "(auxiliary default)",
        "max_tokens": max_tokens, "context_max_tokens": context_max, "context_tokens": evidence["used"],
        "context_truncated": evidence["truncated"], "context_pagination": evidence["pagination"][:20],
        "node_ids": evidence["node_ids"], "store_ids": evidence["store_ids"],
        "matches": [{"node_id": n.node_id, "depth": n.depth, "summary": n.summary[:300],
                     "expand_hint": n.expand_hint or f"trove_expand(node_id={n.node_id})"} for n in nodes],
        "raw_matches": [{"store_id": r.store_id, "role": r.role, "timestamp": iso(r.created_at),
                         "snippet": r.content[:200]} for r in raw_rows],
    }
    if rejected:
        base["rejected_node_ids"] = rejected
    base.update(extra)
    if not evidence["blocks"]:
        return dict(base, error="no matching summary nodes or raw messages in this session; "
                    "try other terms with trove_grep", degraded=True)
    question = f"Question: {prompt}\n\nEvidence blocks (JSON):\n{dumps(evidence['blocks'])}"
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question}]
    answer, error = _ask(ctx, messages, model, timeout_s, max_tokens)
    if error:
        out = dict(base, error=error, degraded=True)
        if "timed out" in error:
            out["timeout_seconds"] = timeout_s
        return out
    base["answer"] = answer
    payload, _ = fit_items(lambda n: dict(base, answer=(answer or "")[: n * 100]),
                           max(1, len(answer or "") // 100 + 1), EXPAND_QUERY_CHAR_LIMIT)
    if len(payload["answer"]) < len(answer or ""):
        payload["answer_truncated"] = True
    return payload


def _terms(match: Any) -> list[str]:
    if match is None:
        return []
    words = [t.rstrip("*").lower() for t in match.terms] + [p.lower() for p in match.phrases]
    return [w for w in words if w]


def _gather(ctx: ToolContext, sid: str, nodes: list[Any], raw_rows: list[Any], terms: list[str],
            budget: int) -> dict[str, Any]:
    """Evidence blocks within ``budget`` tokens: raw hits first, then each node down to its messages."""
    dag, store = ctx.runtime.dag, ctx.runtime.store
    blocks: list[dict[str, Any]] = []
    pagination: list[dict[str, Any]] = []
    node_used: list[int] = []
    store_used: list[int] = []
    left = budget
    truncated = False

    def add_message(row: Any, cap: int) -> int:
        nonlocal truncated
        text = row.content
        if row.tool_calls:
            text += "\n[tool calls] " + row.tool_calls[:600]
        n = chars_within(text, 0, max(1, cap)) if text else 0
        block = {"kind": "message", "store_id": row.store_id, "role": row.role,
                 "timestamp": iso(row.created_at), "text": text[:n]}
        if n < len(row.content):
            truncated = True
            pagination.append({"store_id": row.store_id, "omitted_chars": len(row.content) - n,
                               "expand_args": {"store_id": row.store_id, "content_offset": n}})
        blocks.append(block)
        store_used.append(row.store_id)
        return tokens.count(block["text"]) + 16

    seen: set[int] = set()
    raw_share = left // 3 if nodes else left
    for row in raw_rows:
        if raw_share <= 0 or left <= 0:
            truncated = True
            break
        used = add_message(row, min(PER_MESSAGE_EVIDENCE_TOKENS, raw_share))
        raw_share -= used
        left -= used
        seen.add(row.store_id)
    for i, node in enumerate(nodes):
        if left <= 0:
            truncated = True
            pagination.append({"node_id": node.node_id, "expand_args": {"node_id": node.node_id}})
            continue
        share = left // (len(nodes) - i)
        summary = node.summary[: chars_within(node.summary, 0, max(1, share // 4))] if node.summary else ""
        blocks.append({"kind": "summary", "node_id": node.node_id, "depth": node.depth, "text": summary})
        node_used.append(node.node_id)
        spent = tokens.count(summary) + 16
        ids = [s for s in dag.descendant_store_ids(node.node_id) if s not in seen]
        ranked = _rank_descendants(store.get_many(ids[:DESCENDANTS_RANKED]), terms)
        chosen, omitted = [], 0
        for row in ranked:
            cost = min(tokens.count(row.content) + 16, PER_MESSAGE_EVIDENCE_TOKENS)
            if spent + cost > share:
                omitted += 1
                continue
            chosen.append(row)
            spent += cost
        omitted += max(0, len(ids) - DESCENDANTS_RANKED)
        for row in sorted(chosen, key=lambda r: r.store_id):
            add_message(row, PER_MESSAGE_EVIDENCE_TOKENS)
            seen.add(row.store_id)
        if omitted:
            truncated = True
            pagination.append({"node_id": node.node_id, "omitted_messages": omitted,
                               "expand_args": {"node_id": node.node_id, "source_offset": 0}})
        left -= spent
    return {"blocks": blocks, "pagination": pagination, "truncated": truncated, "node_ids": node_used,
            "store_ids": store_used, "used": budget - max(0, left)}


def _rank_descendants(rows: list[Any], terms: list[str]) -> list[Any]:
    """Messages mentioning more query terms first; ties keep conversation order."""
    if not terms:
        return rows

    def hits(row: Any) -> int:
        low = row.content.lower()
        return sum(1 for t in terms if t in low)

    return sorted(rows, key=lambda r: -hits(r))


def _ask(ctx: ToolContext, messages: list[dict[str, Any]], model: str, timeout_s: float,
         max_tokens: int) -> tuple[str | None, str | None]:
    """Call the auxiliary model with a hard deadline; returns (answer, error)."""
    from ..compaction.summarize import clean_output

    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["text"] = ctx.ask_model(messages, model, timeout_s, max_tokens)
        except Exception as exc:
            box["error"] = f"{type(exc).__name__}: {exc}"[:500]

    worker = threading.Thread(target=run, name="trove-expand-query", daemon=True)
    worker.start()
    worker.join(timeout_s + 1.0)
    if worker.is_alive():
        return None, f"the auxiliary model timed out after {timeout_s:g}s; expand the refs directly"
    if "error" in box:
        return None, f"auxiliary model unavailable: {box['error']}; expand the refs directly"
    answer = clean_output(str(box.get("text") or ""))
    if not answer:
        return None, "the auxiliary model returned an empty answer; expand the refs directly"
    return answer, None
