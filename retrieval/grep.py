"""Search and transcript tools: ``trove_grep`` and ``trove_load_session``.

Both read through ``ctx.runtime.store`` / ``ctx.runtime.dag`` only. Ranking of raw
and summary hits is merged here (reciprocal rank, or time for recency); the SQL lives in
the store and the DAG, the query text is built by ``search.build_match``.
"""
from __future__ import annotations

import time
from typing import Any, Mapping

from .query import Candidate, build_match, rerank
from ..toolkit import (ROLES, ToolContext, ToolError, current_session, require_session, bool_arg, enum_arg, fit_items, int_arg, iso,
                           message_item, parse_time, str_arg, str_list_arg)

GREP_CHAR_LIMIT = 32000
LOAD_CHAR_LIMIT = 64000
SORTS = ("relevance", "recency", "hybrid")
SCOPES = ("current", "all", "session")
CONTENT_SCOPES = ("history", "externalized", "both")
_RRF_K = 60
RERANK_POOL = 100
LITERAL_MAX_CHARS = 200
ARCHIVE_CANDIDATES = 20000  # session_scope='all' ranks at most the newest N matching rows
_HYBRID_DECAY_PER_HOUR = 0.001


def time_window(args: Mapping[str, Any]) -> tuple[float | None, float | None]:
    start = parse_time(args.get("time_from"), "time_from")
    end = parse_time(args.get("time_to"), "time_to")
    if start is not None and end is not None and start > end:
        raise ToolError("time_from is after time_to; swap them or widen the window")
    return start, end


# -- trove_grep ----------------------------------------------------------------
def trove_grep(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    runtime = ctx.runtime
    query = str_arg(args, "query", required=True) or ""
    extra: dict[str, Any] = {}
    limit = int_arg(args, "limit", 10, minimum=1, cap=200, clamped=extra) or 10
    offset = int_arg(args, "offset", 0, minimum=0, cap=10000) or 0
    sort = enum_arg(args, "sort", SORTS, "relevance") or "relevance"
    role = enum_arg(args, "role", ROLES, None)
    source = (str_arg(args, "source") or "").strip() or None
    time_from, time_to = time_window(args)
    scope = enum_arg(args, "session_scope", SCOPES, "current") or "current"
    scope_session = (str_arg(args, "session_id") or "").strip() or None
    content_scope = enum_arg(args, "content_scope", CONTENT_SCOPES, "history") or "history"
    refs = str_list_arg(args, "externalized_refs", max_items=256)
    current = current_session(ctx)

    if scope == "session" and not scope_session:
        raise ToolError("session_scope='session' needs session_id")
    if scope != "session" and scope_session:
        raise ToolError("session_id is used only with session_scope='session'")
    if scope == "current" and not current:
        raise ToolError("no session is bound yet; search stored sessions with session_scope='all'")
    if refs and content_scope == "history":
        raise ToolError("externalized_refs needs content_scope='externalized' or 'both'")

    match = build_match(query)
    raw_filter = bool(role or time_from is not None or time_to is not None)
    want_summaries = scope == "current" and not raw_filter and content_scope != "externalized"
    want_raw = content_scope != "externalized"
    want_external = content_scope != "history" and scope == "current"
    need = offset + limit + 1
    # BM25 picks a candidate pool; rerank (coverage + adjacent turns) orders it.
    pool = min(1000, max(RERANK_POOL, 4 * need))
    session_ids = [current] if scope == "current" else [scope_session] if scope == "session" else None

    lists: list[list[dict[str, Any]]] = []
    literal_snippets: dict[int, str] = {}
    if want_raw:
        bound = ARCHIVE_CANDIDATES if scope == "all" else None
        filters = {"session_ids": session_ids, "role": role, "source": source, "time_from": time_from,
                   "time_to": time_to, "max_candidates": bound}
        hits = runtime.store.search(match.expression, limit=pool, snippets=False, **filters) \
            if match.expression else []
        literal = query.strip()
        if not hits and 0 < len(literal) <= LITERAL_MAX_CHARS:
            # Text the tokenizer cannot split (CJK runs, emoji, partial ids): substring scan.
            hits = runtime.store.search("", limit=pool, literal=literal, **filters)
            literal_snippets = {row.store_id: snip for row, _, snip in hits}
            if hits:
                extra["fallback"] = "substring"
        lists.append(_order(_ranked_raw(hits, match.terms), sort))
        if scope == "all":
            extra["archive_candidate_limit"] = ARCHIVE_CANDIDATES
    if want_summaries and match.expression:
        lists.append(_order(_summary_hits(runtime, match.expression, current or "", source, pool), sort))
    if want_external:
        lists.append([{"_kind": "external", "_hit": h, "_score": 0.0, "_time": 0.0}
                      for h in _external_hits(runtime, current or "", query, need, refs, extra)])
    merged = _merge(lists, sort)

    if scope != "current" or raw_filter:
        extra["summary_results_omitted"] = True
    if content_scope != "history" and scope != "current":
        extra["externalized_results_omitted"] = True
    if not match.expression and not merged:
        extra["note"] = "the query has no searchable words; use words, \"phrases\" or prefix* terms"
    more = len(merged) > offset + limit
    window = _materialize(runtime, match.expression, merged[offset:offset + limit], current, literal_snippets)

    def build(n: int) -> dict[str, Any]:
        truncated = n < len(window)
        out: dict[str, Any] = {
            "query": query if len(query) <= 500 else query[:500] + "…", "fts_query": match.expression[:1000],
            "sort": sort, "session_scope": scope, "content_scope": content_scope, "limit": limit,
            "offset": offset, "total_results": n, "results": window[:n],
            "has_more": more or truncated, "next_offset": offset + n if (more or truncated) else None,
            "truncated": truncated,
        }
        if scope_session:
            out["session_id"] = scope_session
        out.update(_echo_filters(role=role, source=source, time_from=time_from, time_to=time_to))
        out.update(extra)
        return out

    payload, _ = fit_items(build, len(window), GREP_CHAR_LIMIT)
    return payload


def _echo_filters(time_from: float | None = None, time_to: float | None = None, **given: Any) -> dict[str, Any]:
    """The filters a response repeats back: the ones that were set, times as ISO strings."""
    out = {k: v for k, v in given.items() if v}
    if time_from is not None:
        out["time_from"] = iso(time_from)
    if time_to is not None:
        out["time_to"] = iso(time_to)
    return out


def _ranked_raw(hits: list[tuple[Any, float, str]], terms: tuple[str, ...]) -> list[dict[str, Any]]:
    by_id = {row.store_id: row for row, _, _ in hits}
    candidates = [Candidate(row.store_id, row.session_id, -float(rank),
                            (row.content + " " + (row.tool_calls or "")).lower()) for row, rank, _ in hits]
    return [{"_kind": "message", "_row": by_id[store_id], "_score": score,
             "_time": float(by_id[store_id].created_at or 0.0)} for store_id, score in rerank(candidates, terms)]


def _summary_hits(runtime: Any, expression: str, session_id: str, source: str | None,
                  pool: int) -> list[dict[str, Any]]:
    fetch = pool * 4 if source else pool
    out = []
    for node, rank, snippet in runtime.dag.search(expression, session_id, limit=fetch):
        if source and not runtime.dag.has_descendant_source(node.node_id, source):
            continue
        out.append({"_kind": "summary", "_node": node, "_snippet": snippet, "_score": -float(rank),
                    "_time": float(node.latest_at or node.created_at or 0.0)})
        if len(out) >= pool:
            break
    return out


def _order(hits: list[dict[str, Any]], sort: str) -> list[dict[str, Any]]:
    """Order one list: relevance keeps ranked order; recency by time; hybrid decays by age."""
    if sort == "recency":
        return sorted(hits, key=lambda h: h["_time"], reverse=True)
    if sort == "hybrid":
        now = time.time()

        def decayed(h: dict[str, Any]) -> float:
            age_hours = max(0.0, (now - h["_time"]) / 3600.0)
            return h["_score"] / (1.0 + age_hours * _HYBRID_DECAY_PER_HOUR)

        return sorted(hits, key=decayed, reverse=True)
    return hits


def _merge(lists: list[list[dict[str, Any]]], sort: str) -> list[dict[str, Any]]:
    """One ranked list: newest first for recency, else reciprocal-rank interleaving."""
    lists = [lst for lst in lists if lst]
    if len(lists) == 1:
        return lists[0]
    if sort == "recency":
        return sorted((h for lst in lists for h in lst), key=lambda h: h["_time"], reverse=True)
    scored = [(1.0 / (_RRF_K + pos + 1), n, pos, h) for n, lst in enumerate(lists) for pos, h in enumerate(lst)]
    scored.sort(key=lambda t: (-t[0], t[1], t[2]))
    return [t[3] for t in scored]


def _materialize(runtime: Any, expression: str, entries: list[dict[str, Any]], current: str | None,
                 known: dict[int, str]) -> list[dict[str, Any]]:
    """Result dicts for one page; snippets are built only for the rows shown."""
    raw_ids = [e["_row"].store_id for e in entries if e["_kind"] == "message" and e["_row"].store_id not in known]
    snippets = {row.store_id: snip for row, _, snip in
                runtime.store.search(expression, store_ids=raw_ids, limit=len(raw_ids))} \
        if raw_ids and expression else {}
    snippets.update(known)
    out = []
    for e in entries:
        if e["_kind"] == "message":
            row = e["_row"]
            hit: dict[str, Any] = {"type": "message", "store_id": row.store_id, "session_id": row.session_id,
                                   "source": row.source, "role": row.role, "timestamp": iso(row.created_at),
                                   "snippet": snippets.get(row.store_id) or row.content[:240],
                                   "from_current_session": bool(current) and row.session_id == current}
            if row.tool_name:
                hit["tool_name"] = row.tool_name
            out.append(hit)
        elif e["_kind"] == "summary":
            node = e["_node"]
            out.append({"type": "summary", "node_id": node.node_id, "depth": node.depth,
                        "snippet": e["_snippet"] or node.summary[:300], "token_count": node.token_count,
                        "earliest_at": iso(node.earliest_at), "latest_at": iso(node.latest_at),
                        "expand_hint": node.expand_hint or f"trove_expand(node_id={node.node_id})"})
        else:
            out.append(e["_hit"])
    return out


def _external_hits(runtime: Any, session_id: str, query: str, need: int, refs: list[str] | None,
                   extra: dict[str, Any]) -> list[dict[str, Any]]:
    try:
        from ..payloads import ops as payload_ops
        search_payloads = payload_ops.search_payloads
    except (ImportError, AttributeError):
        extra["externalized_note"] = "externalized payload search is not available in this installation"
        return []
    try:
        found = search_payloads(runtime, session_id, query, limit=need, refs=refs)
    except Exception as exc:  # a payload scan failure must not hide history results
        extra["externalized_error"] = f"{type(exc).__name__}: {exc}"[:300]
        return []
    hits = found.get("results", []) if isinstance(found, dict) else list(found or [])
    if isinstance(found, dict):
        scan = found.get("scan") if isinstance(found.get("scan"), dict) else \
            {k: v for k, v in found.items() if k != "results"}
        if scan:
            extra["externalized_scan"] = scan
    return [dict(h, type=h.get("type", "externalized")) for h in hits if isinstance(h, dict)]


# -- trove_load_session ---------------------------------------------------------
def trove_load_session(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    store = ctx.runtime.store
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
    total = store.count(session_id)
    if total == 0 and store.session(session_id) is None:
        raise ToolError(f"no stored session {session_id[:120]!r}; trove_grep with session_scope='all' "
                        "shows the session_id of each hit")
    rows = store.page(session_id, after, limit + 1, roles=roles or None, time_from=time_from, time_to=time_to)
    more = len(rows) > limit
    rows = rows[:limit]
    current = current_session(ctx)
    items = [message_item(r, current, max_chars=max_chars, include_exact_ref=exact) for r in rows]

    def build(n: int) -> dict[str, Any]:
        has_more = more or n < len(items)
        out: dict[str, Any] = {"session_id": session_id, "limit": limit, "max_content_chars": max_chars,
                               "after_store_id": after, "total_messages": total, "returned_messages": n,
                               "messages": items[:n], "has_more": has_more,
                               "next_cursor": _cursor(items[:n], after) if has_more else None}
        if n < len(items):
            out["truncated"] = True
        out.update(_echo_filters(roles=roles, time_from=time_from, time_to=time_to))
        out.update(extra)
        return out

    payload, kept = fit_items(build, len(items), LOAD_CHAR_LIMIT)
    if kept == 0 and items:  # one enormous row: return it anyway, shrunk by the generic bound
        payload = build(1)
    return payload


def _cursor(items: list[dict[str, Any]], after: int) -> int:
    """The after_store_id that continues a page: its last row, or the same cursor if empty."""
    return int(items[-1]["store_id"]) if items else after
