"""History search behind ``trove_grep``: candidates, fusion and one materialized page.

Raw messages, summary nodes and externalized payloads are searched apart, each list ordered by
the requested sort, then fused by reciprocal rank (or by time for recency). Only the rows of the
requested page get snippets.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from itertools import islice
from typing import TYPE_CHECKING, Any

from .. import ftsbound
from ..fulltext import ARCHIVE_CANDIDATES, COMMON_CANDIDATES, LITERAL_CANDIDATES, LITERAL_MAX_CHARS, skipping
from ..payloads.sidecar import search_payloads
from ..scope import EVERYTHING, Visibility
from ..toolkit import expand_hint, iso, message_meta
from . import fusion, semantic
from .query import Candidate, Match, build_match, own_tool_echo, rerank

if TYPE_CHECKING:
    from ..runtime import Runtime

SORTS = ("relevance", "recency", "recent_relevance")
SORT_ALIASES = {"hybrid": "recent_relevance"}  # the old, deprecated name (not hybrid search)
MODES = ("full_text", "semantic", "hybrid")
# mode=hybrid: min-max interpolation of full text and vectors, this weight on the vector arm.
# Leave-one-conversation-out on LoCoMo dev picked 0.4 in 4 of 5 folds (docs/embeddings.md).
HYBRID_SEMANTIC_WEIGHT = 0.4
SCOPES = ("current", "all", "session")
CONTENT_SCOPES = ("history", "externalized", "both")
RERANK_POOL = 100
DAY_S = 86400.0


@dataclass(frozen=True)
class GrepRequest:
    """One validated search: what to match, where, how to order it and which page."""

    query: str
    limit: int
    offset: int
    sort: str
    scope: str
    content_scope: str
    current: str | None                   # the bound session
    session_id: str | None = None         # the searched session when scope == "session"
    role: str | None = None
    source: str | None = None
    time_from: float | None = None
    time_to: float | None = None
    refs: tuple[str, ...] | None = None  # externalized refs to restrict payload search to
    mode: str = "full_text"               # full_text | semantic | hybrid (vectors, when embeddings run)
    visible: Visibility = EVERYTHING      # the sessions the caller may read (TROVE_MEMORY_SCOPE)
    turn_start: int | None = None         # the bound session's rows past this are the turn in flight

    def in_flight(self, row: Any) -> bool:
        """A row of the turn being answered: never evidence for it."""
        return self.turn_start is not None and row.session_id == self.current and row.store_id > self.turn_start

    @property
    def raw_filtered(self) -> bool:
        """Filters only raw rows carry, so summaries cannot honour them."""
        return bool(self.role or self.time_from is not None or self.time_to is not None)


@dataclass(frozen=True)
class GrepPage:
    """One page of fused results plus what the caller should be told about the search."""

    match: Match
    results: list[dict[str, Any]]
    more: bool                 # ranked results exist beyond this page
    notes: dict[str, Any]      # fallbacks, omitted result kinds, payload scan facts


@dataclass(frozen=True)
class _Hit:
    kind: str       # "message", "summary" or "external"
    item: Any       # the stored row, the summary node or the payload hit dict
    score: float    # higher is better
    at: float       # unix seconds, for recency
    snippet: str = ""


def grep(runtime: Runtime, req: GrepRequest) -> GrepPage:
    """Search, fuse and materialize the page ``[offset, offset + limit)``."""
    match = build_match(req.query)
    notes: dict[str, Any] = {}
    need = req.offset + req.limit + 1
    # BM25 picks a candidate pool; rerank (coverage + adjacent turns) orders it.
    pool = min(1000, max(RERANK_POOL, 4 * need))
    raw: list[_Hit] = []
    literal_snippets: dict[int, str] = {}
    want_summaries = req.scope == "current" and not req.raw_filtered and req.content_scope != "externalized"
    vectors = _start_vectors(runtime, req, want_summaries, pool) \
        if req.mode != "full_text" and req.content_scope != "externalized" else None  # runs beside full text
    if req.content_scope != "externalized":
        hits, literal_snippets = _raw_candidates(runtime, req, match, pool, notes)
        raw = _ranked_raw(hits, match.terms)
        if req.scope == "all":
            notes["archive_candidate_limit"] = ARCHIVE_CANDIDATES
            # both stores narrow a query of common words; a server's time filter keeps BM25
            if runtime.db.kind == "sqlite" or req.time_from is None and req.time_to is None:
                notes["archive_common_candidate_limit"] = COMMON_CANDIDATES
            notes["archive_rare_term_budget"] = ftsbound.RARE_BUDGET
    nodes = _summary_hits(runtime, match.expression, req.current or "", req.source, pool) \
        if want_summaries and match.expression else []
    if vectors is not None:
        raw, nodes = _with_vectors(runtime, req, vectors(), raw, nodes, literal_snippets, notes)
    lists = [raw, nodes]
    if req.content_scope != "history" and req.scope == "current":
        lists.append([_Hit("external", h, 0.0, 0.0)
                      for h in _external_hits(runtime, req.current or "", req.query, need, req.refs, notes)])
    now = time.time()
    merged = _merge([_order(lst, req.sort, runtime.config, now) for lst in lists], req.sort)

    if req.scope != "current" or req.raw_filtered:
        notes["summary_results_omitted"] = True
    if req.content_scope != "history" and req.scope != "current":
        notes["externalized_results_omitted"] = True
    if not match.expression and not merged:
        notes["note"] = "the query has no searchable words; use words, \"phrases\" or prefix* terms"
    page = merged[req.offset:req.offset + req.limit]
    results = _materialize(runtime, match.expression, page, req.current, literal_snippets)
    return GrepPage(match, results, len(merged) > req.offset + req.limit, notes)


def _raw_candidates(runtime: Runtime, req: GrepRequest, match: Match, pool: int,
                    notes: dict[str, Any]) -> tuple[list[tuple[Any, float, str]], dict[int, str]]:
    """BM25 hits over raw rows; a substring scan when the tokenizer finds nothing."""
    bound = req.current if req.scope == "current" else req.session_id
    session_ids = ([bound] if bound else []) if req.scope in ("current", "session") else None  # [] matches nothing
    find = partial(runtime.store.search, session_ids=session_ids, role=req.role, source=req.source,
                   time_from=req.time_from, time_to=req.time_to, visible=req.visible,
                   max_candidates=ARCHIVE_CANDIDATES)

    def search(expression: str, limit: int, **kw: Any) -> list[tuple[Any, float, str]]:
        # the turn in flight and trove's own search traffic are skipped, not counted against the pool
        return skipping(lambda n: find(expression, limit=n, **kw), limit,
                        lambda row: req.in_flight(row) or own_tool_echo(row))[1]

    hits = search(match.expression, pool, snippets=False, common_candidates=COMMON_CANDIDATES) \
        if match.expression else []
    literal = req.query.strip()
    if hits or not 0 < len(literal) <= LITERAL_MAX_CHARS:
        return hits, {}
    # Text the tokenizer cannot split (CJK runs, emoji, partial ids): substring scan.
    hits = search("", pool, literal=literal,
                  max_candidates=LITERAL_CANDIDATES if req.scope == "all" else None)
    if hits:
        notes["fallback"] = "substring"
    return hits, {row.store_id: snip for row, _, snip in hits}


def _ranked_raw(hits: list[tuple[Any, float, str]], terms: tuple[str, ...]) -> list[_Hit]:
    by_id = {row.store_id: row for row, _, _ in hits}
    candidates = [Candidate(row.store_id, row.session_id, -float(rank),
                            (row.content + " " + (row.tool_calls or "")).lower()) for row, rank, _ in hits]
    return [_Hit("message", by_id[store_id], score, float(by_id[store_id].created_at or 0.0))
            for store_id, score in rerank(candidates, terms)]


def _start_vectors(runtime: Runtime, req: GrepRequest, want_summaries: bool,
                   pool: int) -> Callable[[], semantic.SemanticResult]:
    """The vector search begun (``semantic.start``); calling the result waits for it."""
    bound = req.current if req.scope == "current" else req.session_id
    before = None if req.time_to is None else req.time_to + 1e-6  # time_to is inclusive
    session_ids = [bound] if bound else runtime.store.visible_session_ids(req.visible)
    return semantic.start(runtime, req.query, kinds=("message", "summary") if want_summaries else ("message",),
                          session_ids=session_ids, since=req.time_from, before=before, limit=pool)


def _with_vectors(runtime: Runtime, req: GrepRequest, result: semantic.SemanticResult, raw: list[_Hit],
                  nodes: list[_Hit], snippets: dict[int, str], notes: dict[str, Any]) -> tuple[list[_Hit], list[_Hit]]:
    """mode=semantic replaces the full-text lists with vector hits; hybrid fuses them by score.

    When vectors cannot answer (embeddings off, unavailable, no vectors, deadline), the full-text
    lists stand and the notes say so.
    """
    notes["semantic"] = result.to_dict()
    if not result.ran:
        notes.update({"mode": "full_text", "requested_mode": req.mode, "degraded_to_fts": True,
                      "degraded_reason": result.degraded_reason})
        return raw, nodes
    notes["mode"] = req.mode
    rows = {r.store_id: r for r in runtime.store.get_many([h.item_id for h in result.hits if h.kind == "message"],
                                                           req.visible)}
    vec_raw: list[_Hit] = []
    vec_nodes: list[_Hit] = []
    for h in result.hits:
        if h.kind == "message":
            row = rows.get(h.item_id)
            if row is None or req.in_flight(row) or own_tool_echo(row) or (req.role and row.role != req.role) or \
                    (req.source and row.source != req.source):
                continue
            if h.span is not None:
                snippets.setdefault(row.store_id, row.content[h.span[0]:h.span[1]][:240])
            vec_raw.append(_Hit("message", row, h.score, float(row.created_at or 0.0)))
        elif (node := runtime.dag.get(h.item_id)) is not None:
            if req.source and not runtime.dag.has_descendant_source(node.node_id, req.source):
                continue
            vec_nodes.append(_Hit("summary", node, h.score, float(node.latest_at or node.created_at or 0.0)))
    if req.mode == "semantic":
        return vec_raw, vec_nodes
    return _interpolate(raw, vec_raw), _interpolate(nodes, vec_nodes)


def _interpolate(fts: list[_Hit], vec: list[_Hit]) -> list[_Hit]:
    """Min-max interpolation of a full-text list and a vector list of the same kind."""
    def key(h: _Hit) -> int:
        return int(h.item.store_id if h.kind == "message" else h.item.node_id)

    items = {key(h): h for h in vec}
    items.update({key(h): h for h in fts})
    fused = fusion.interpolate({"fts": {key(h): h.score for h in fts}, "semantic": {key(h): h.score for h in vec}},
                               {"fts": 1.0 - HYBRID_SEMANTIC_WEIGHT, "semantic": HYBRID_SEMANTIC_WEIGHT},
                               floors={"fts": 0.0, "semantic": None})
    return [replace(items[k], score=fused[k]) for k in fusion.ranked(fused)]


def _summary_hits(runtime: Runtime, expression: str, session_id: str, source: str | None,
                  pool: int) -> list[_Hit]:
    found = runtime.dag.search(expression, session_id, limit=pool * 4 if source else pool)
    kept = (f for f in found if not source or runtime.dag.has_descendant_source(f[0].node_id, source))  # lazily
    return [_Hit("summary", node, -float(rank), float(node.latest_at or node.created_at or 0.0), snippet)
            for node, rank, snippet in islice(kept, pool)]


def _external_hits(runtime: Runtime, session_id: str, query: str, need: int, refs: tuple[str, ...] | None,
                   notes: dict[str, Any]) -> list[dict[str, Any]]:
    try:
        found = search_payloads(runtime, session_id, query, limit=need, refs=refs)
    except Exception as exc:  # a payload scan failure must not hide history results
        notes["externalized_error"] = f"{type(exc).__name__}: {exc}"[:300]
        return []
    if found.get("scan"):
        notes["externalized_scan"] = found["scan"]
    return list(found.get("results", []))


def _order(hits: list[_Hit], sort: str, cfg: Any, now: float) -> list[_Hit]:
    """Order one list: relevance keeps ranked order, recency goes by time, recent_relevance
    scales each score by recall's recency prior (``fusion.recency_factor``, its two knobs)."""
    if sort == "recency":
        return sorted(hits, key=lambda h: h.at, reverse=True)
    if sort == "recent_relevance":
        half_life, floor = float(cfg.recall_recency_half_life_days) * DAY_S, float(cfg.recall_recency_floor)
        return sorted(hits, key=lambda h: h.score * fusion.recency_factor(now - h.at, half_life, floor),
                      reverse=True)
    return hits


def _merge(lists: list[list[_Hit]], sort: str) -> list[_Hit]:
    """One ranked list: newest first for recency, else reciprocal-rank fusion of the lists."""
    lists = [lst for lst in lists if lst]
    if len(lists) == 1:
        return lists[0]
    if sort == "recency":
        return sorted((h for lst in lists for h in lst), key=lambda h: h.at, reverse=True)
    arms = {str(n): [(n, pos) for pos in range(len(lst))] for n, lst in enumerate(lists)}
    fused = fusion.rrf(arms, dict.fromkeys(arms, 1.0))
    return [lists[n][pos] for n, pos in fusion.ranked(fused)]


def _materialize(runtime: Runtime, expression: str, page: list[_Hit], current: str | None,
                 known: dict[int, str]) -> list[dict[str, Any]]:
    """Result dicts for one page; snippets are built only for the rows shown."""
    snippets = snippets_for(runtime, expression,
                            [h.item.store_id for h in page if h.kind == "message" and h.item.store_id not in known])
    snippets.update(known)
    return [_message_hit(h.item, snippets, current) if h.kind == "message"
            else _summary_hit(h.item, h.snippet) if h.kind == "summary" else h.item for h in page]


def snippets_for(runtime: Runtime, expression: str, store_ids: list[int]) -> dict[int, str]:
    """The full-text snippets of the rows shown (none without ids or searchable words)."""
    if not store_ids or not expression:
        return {}
    return {row.store_id: snip for row, _, snip in runtime.store.search(expression, store_ids=store_ids,
                                                                         limit=len(store_ids))}


def _message_hit(row: Any, snippets: dict[int, str], current: str | None) -> dict[str, Any]:
    return {"type": "message", **message_meta(row, current), "snippet": snippets.get(row.store_id) or row.content[:240]}


def _summary_hit(node: Any, snippet: str) -> dict[str, Any]:
    return {"type": "summary", "node_id": node.node_id, "depth": node.depth,
            "snippet": snippet or node.summary[:300], "token_count": node.token_count,
            "earliest_at": iso(node.earliest_at), "latest_at": iso(node.latest_at),
            "expand_hint": expand_hint(node)}
