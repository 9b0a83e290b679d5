"""``trove_expand_query``: a bounded answer from the auxiliary model over gathered evidence.

Candidate summary nodes and raw hits come from the query (or the given node ids);
``_gather`` expands them to evidence blocks within a token budget; ``_ask`` makes the one
model call under a hard deadline. The answer carries the node and store ids it was shown.
"""
from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .. import tokens
from ..fulltext import skipping
from ..models import clean_output
from ..toolkit import (
    ToolContext,
    chars_within,
    dumps,
    expand_hint,
    fit_items,
    int_arg,
    int_list_arg,
    iso,
    require_session,
    str_arg,
    turn_start,
)
from .query import build_match, own_tool_echo

if TYPE_CHECKING:
    from ..dag import NodeRow
    from ..runtime import Runtime
    from ..store import MessageRow

PER_MESSAGE_EVIDENCE_TOKENS = 2000
DESCENDANTS_RANKED = 2000
TOOL_CALLS_EVIDENCE_CHARS = 600
ANSWER_STEP_CHARS = 100  # the answer is cut in steps of this many characters to fit the cap

SYSTEM_PROMPT = (
    "You answer one question using only the evidence blocks given, which come from the stored history "
    "of a conversation. Summaries are cues; raw messages are the exact record, and newer evidence wins "
    "over older when they disagree. Cite what you relied on as [store N] or [node N]. If the evidence "
    "does not contain the answer, say that plainly. Be concise.")


def trove_expand_query(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    cfg = ctx.runtime.config
    prompt = (str_arg(args, "prompt", required=True, allow_empty=False) or "").strip()
    query = (str_arg(args, "query") or "").strip() or None
    node_ids = int_list_arg(args, "node_ids", max_items=50) or []
    clamped: dict[str, Any] = {}
    max_results = int_arg(args, "max_results", 5, minimum=1, cap=20, clamped=clamped) or 5
    max_tokens = int_arg(args, "max_tokens", 2000, minimum=1, cap=8000, clamped=clamped) or 2000
    default_ctx = max(max_tokens, int(cfg.expansion_context_tokens))
    context_max = int_arg(args, "context_max_tokens", default_ctx, minimum=256, cap=200000,
                          clamped=clamped) or default_ctx
    sid = require_session(ctx, "trove_expand_query")

    nodes, raw_rows, rejected, terms = _candidates(ctx.runtime, sid, node_ids,
                                                   query or (prompt if not node_ids else None), max_results,
                                                   turn_start(ctx))
    evidence = _gather(ctx.runtime, nodes, raw_rows, terms, context_max)
    model = cfg.expansion_model or cfg.summary_model or ""
    timeout_s = max(1.0, float(cfg.expansion_timeout_ms) / 1000.0)
    base: dict[str, Any] = {
        "prompt": prompt[:2000], "query": query, "answer": None, "model": model or "(auxiliary default)",
        "max_tokens": max_tokens, "context_max_tokens": context_max, "context_tokens": evidence["used"],
        "context_truncated": evidence["truncated"], "context_pagination": evidence["pagination"][:20],
        "node_ids": evidence["node_ids"], "store_ids": evidence["store_ids"],
        "matches": [{"node_id": n.node_id, "depth": n.depth, "summary": n.summary[:300],
                     "expand_hint": expand_hint(n)} for n in nodes],
        "raw_matches": [{"store_id": r.store_id, "role": r.role, "timestamp": iso(r.created_at),
                         "snippet": r.content[:200]} for r in raw_rows],
    }
    if rejected:
        base["rejected_node_ids"] = rejected
    base.update(clamped)
    if not evidence["blocks"]:
        return dict(base, error="no matching summary nodes or raw messages in this session; "
                    "try other terms with trove_grep", degraded=True)
    question = f"Question: {prompt}\n\nEvidence blocks (JSON):\n{dumps(evidence['blocks'])}"
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question}]
    answer, error = _ask(ctx, messages, model, timeout_s, max_tokens)
    if error:
        timed_out = {"timeout_seconds": timeout_s} if "timed out" in error else {}
        return dict(base, error=error, degraded=True, **timed_out)
    text = answer or ""  # as much of it as fits the cap, flagged when cut
    payload, _ = fit_items(lambda n: dict(base, answer=text[: n * ANSWER_STEP_CHARS]),
                           max(1, len(text) // ANSWER_STEP_CHARS + 1), ctx.response_cap)
    if len(payload["answer"]) < len(text):
        payload["answer_truncated"] = True
    return payload


def _candidates(runtime: Runtime, sid: str, node_ids: list[int], search_text: str | None,
                max_results: int, in_flight_after: int | None = None
                ) -> tuple[list[NodeRow], list[MessageRow], list[int], list[str]]:
    """What the question points at: the given nodes visible in ``sid`` then the best summary
    matches of the text, its best raw matches, the given ids refused, and the query terms."""
    dag = runtime.dag
    given = {n: dag.get(n) for n in node_ids}
    rejected = [n for n, node in given.items() if node is None or not dag.is_reachable(sid, node.node_id)]
    nodes = [node for n, node in given.items() if n not in rejected and node is not None]
    match = build_match(search_text) if search_text else None
    raw_rows: list[MessageRow] = []
    if match is not None and match.expression:
        seen = {n.node_id for n in nodes}
        for node, _, _ in dag.search(match.expression, sid, limit=max_results):
            if node.node_id not in seen:
                nodes.append(node)
                seen.add(node.node_id)
        # The turn being answered and trove's own search traffic are never evidence: skipped, read past.
        _, kept, _ = skipping(lambda n: runtime.store.search(match.expression, session_ids=[sid], limit=n),
                              max_results, lambda r: own_tool_echo(r) or
                              (in_flight_after is not None and r.store_id > in_flight_after))
        raw_rows = [r for r, _, _ in kept[:max_results]]
    words = [t.rstrip("*").lower() for t in match.terms] + [p.lower() for p in match.phrases] if match else []
    return nodes, raw_rows, rejected, [w for w in words if w]


def _gather(runtime: Runtime, nodes: list[NodeRow], raw_rows: list[MessageRow], terms: list[str],
            budget: int) -> dict[str, Any]:
    """Evidence blocks within ``budget`` tokens: raw hits first, then each node down to its messages."""
    dag, store = runtime.dag, runtime.store
    blocks: list[dict[str, Any]] = []
    pagination: list[dict[str, Any]] = []
    node_used: list[int] = []
    store_used: list[int] = []
    left = budget
    truncated = False

    def add_message(row: MessageRow, cap: int) -> int:
        nonlocal truncated
        text = row.content
        if row.tool_calls:
            text += "\n[tool calls] " + row.tool_calls[:TOOL_CALLS_EVIDENCE_CHARS]
        n = chars_within(text, 0, max(1, cap))
        block = {"kind": "message", "store_id": row.store_id, "role": row.role,
                 "timestamp": iso(row.created_at), "text": text[:n]}
        if n < len(row.content):
            truncated = True
            pagination.append({"store_id": row.store_id, "omitted_chars": len(row.content) - n,
                               "expand_args": {"store_id": row.store_id, "content_offset": n}})
        blocks.append(block)
        store_used.append(row.store_id)
        return tokens.count(text[:n]) + 16

    raw_share = left // 3 if nodes else left
    for row in raw_rows:
        if raw_share <= 0 or left <= 0:
            truncated = True
            break
        used = add_message(row, min(PER_MESSAGE_EVIDENCE_TOKENS, raw_share))
        raw_share -= used
        left -= used
    for i, node in enumerate(nodes):
        if left <= 0:
            truncated = True
            pagination.append({"node_id": node.node_id, "expand_args": {"node_id": node.node_id}})
            continue
        share = left // (len(nodes) - i)
        summary = node.summary[: chars_within(node.summary, 0, max(1, share // 4))]
        blocks.append({"kind": "summary", "node_id": node.node_id, "depth": node.depth, "text": summary})
        node_used.append(node.node_id)
        spent = tokens.count(summary) + 16
        shown = set(store_used)
        ids = [s for s in dag.descendant_store_ids(node.node_id) if s not in shown]
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
        if omitted:
            truncated = True
            pagination.append({"node_id": node.node_id, "omitted_messages": omitted,
                               "expand_args": {"node_id": node.node_id, "source_offset": 0}})
        left -= spent
    return {"blocks": blocks, "pagination": pagination, "truncated": truncated, "node_ids": node_used,
            "store_ids": store_used, "used": budget - max(0, left)}


def _rank_descendants(rows: list[MessageRow], terms: list[str]) -> list[MessageRow]:
    """Messages mentioning more query terms first; ties keep conversation order."""
    if not terms:
        return rows

    def hits(row: MessageRow) -> int:
        low = row.content.lower()
        return sum(1 for t in terms if t in low)

    return sorted(rows, key=lambda r: -hits(r))


def _ask(ctx: ToolContext, messages: list[dict[str, Any]], model: str, timeout_s: float,
         max_tokens: int) -> tuple[str | None, str | None]:
    """Call the auxiliary model with a hard deadline; returns (answer, error)."""
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
