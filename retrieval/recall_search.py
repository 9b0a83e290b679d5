"""Whole-memory recall: gather candidates from every arm, fuse them, apply the priors.

Arms: BM25 over every session's raw rows (re-ranked, joined by the turns beside its best hits),
BM25 over every summary node, and vectors (``semantic``) when embeddings are on. ``fusion``
combines the bounded pools, a current-conversation bias and a recency prior scale the result, and
``rescore`` re-orders the best. ``Gate`` drops what the caller must not get back. No response shaping.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .. import changed, ftsbound
from ..fulltext import ARCHIVE_CANDIDATES, LITERAL_CANDIDATES, LITERAL_MAX_CHARS, skipping
from ..scope import EVERYTHING, Visibility
from . import fusion, rescore, semantic
from .query import Candidate, Match, adjacent_ids, adjacent_scores, build_match, own_tool_echo, rerank

if TYPE_CHECKING:
    from ..dag import NodeRow
    from ..rows import MessageRow
    from ..runtime import Runtime

INCLUDES = ("all", "summaries", "verbatim")
DETAILS = ("snippets", "answer_ready")
ARMS = ("fts", "summary", "semantic")
PER_SESSION_ANSWER_READY = 5  # answer_ready keeps at most this many hits from one session
DAY_S = 86400.0
CONTEXT_RADIUS = 8  # store ids either side that count as a raw hit's neighbourhood (same session)
CHANGED_WINDOW = 50  # best fused hits in which a changed fact's current statement moves first
# The turns beside the best full-text hits join the pool with this share of their neighbour's score
# (chosen by leaving one LoCoMo dev conversation out, among archives of 100,000 messages).
ADJACENT_SEEDS, ADJACENT_SHARE = 100, 0.5
# Coverage weighs each of the question's terms by its rarity among the candidates, and this much
# (query.rerank, pooled; chosen the same way among 0.5, 1, 2, 4, 8 and 16).
POOLED_COVERAGE = 16.0

Key = tuple[str, int]  # ("message", store_id) or ("summary", node_id)


@dataclass(frozen=True)
class RecallRequest:
    """One validated recall: what to find, where the caller stands and what to leave out."""

    query: str
    limit: int = 8
    scope_bias: float = 0.5
    include: str = "all"
    detail: str = "snippets"
    seen: frozenset[Key] = frozenset()
    since: float | None = None
    before: float | None = None
    current: str | None = None               # the bound session
    current_conversation: str | None = None  # its conversation id, when the host gave one
    now: float | None = None                 # the recency prior's "now" (default: wall clock)
    visible: Visibility = EVERYTHING         # the sessions the caller may read (TROVE_MEMORY_SCOPE)
    turn_start: int | None = None            # the bound session's rows past this are the turn in flight


@dataclass(frozen=True)
class RecallHit:
    kind: str                 # "message" or "summary"
    item_id: int              # store_id or node_id
    session_id: str
    at: float                 # unix seconds the item speaks for (message time, summary's latest)
    score: float              # fused score after the priors
    arms: tuple[str, ...]     # the arms that found it
    in_scope: bool            # from the current conversation
    row: MessageRow | None = None
    node: NodeRow | None = None
    snippet: str = ""


@dataclass
class ArmReport:
    """What one arm did: whether it ran, its weight, how much it saw, and why it did not run."""

    name: str
    weight: float
    ran: bool = False
    candidates: int = 0
    pool: int = 0
    bounded: bool = False
    reason: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"ran": self.ran, "weight": self.weight, "candidates": self.candidates, "pool": self.pool,
                "bounded": self.bounded, **({"reason": self.reason} if self.reason else {}), **self.facts}


@dataclass(frozen=True)
class RecallResult:
    match: Match
    hits: list[RecallHit]
    more: bool
    arms: dict[str, ArmReport]
    fusion: str
    degraded: bool
    degraded_reason: str | None
    excluded: dict[str, int]


def recall(runtime: Runtime, req: RecallRequest) -> RecallResult:
    """Search every arm, fuse, apply the priors and return the best ``req.limit`` hits."""
    cfg = runtime.config
    match = build_match(req.query)
    pool = max(int(cfg.recall_candidates), 4 * req.limit)
    w = {"fts": float(cfg.recall_fts_weight), "summary": float(cfg.recall_summary_weight),
         "semantic": float(cfg.recall_semantic_weight)}
    reports = {name: ArmReport(name, w[name]) for name in ARMS}
    gate = Gate(runtime, req)
    scores: dict[str, dict[Key, float]] = {}
    rows: dict[int, MessageRow] = {}
    nodes: dict[int, NodeRow] = {}
    snippets: dict[Key, str] = {}

    pending = _start_semantic(runtime, req, pool, reports["semantic"])  # it runs while the full-text arms do
    if req.include != "summaries":
        scores["fts"] = fts_arm(runtime, req, match, pool, gate, rows, snippets, reports["fts"])
    else:
        reports["fts"].reason = "include='summaries'"
    if req.include != "verbatim":
        scores["summary"] = summary_arm(runtime, req, match, pool, gate, nodes, snippets, reports["summary"])
    else:
        reports["summary"].reason = "include='verbatim'"
    degraded_reason = _semantic_arm(runtime, req, pending, gate, rows, nodes, scores, reports["semantic"])

    method = cfg.recall_fusion  # one of fusion.FUSIONS: the configuration refuses any other
    ran = {name: arm for name, arm in scores.items() if arm}
    fused = fusion.fuse(ran, w, method, floors={"fts": 0.0, "summary": 0.0, "semantic": None})
    now = time.time() if req.now is None else req.now
    half_life = float(cfg.recall_recency_half_life_days) * DAY_S
    hits: list[RecallHit] = []
    for key, base in fused.items():
        kind, item_id = key
        row = rows.get(item_id) if kind == "message" else None
        node = nodes.get(item_id) if kind == "summary" else None
        if row is None and node is None:
            continue
        session_id = row.session_id if row is not None else node.session_id  # type: ignore[union-attr]
        at = float(row.created_at or 0.0) if row is not None else float(
            node.latest_at or node.created_at or 0.0)  # type: ignore[union-attr]
        in_scope = gate.in_scope(session_id, row.conversation_id if row is not None else "")
        score = base * fusion.scope_factor(req.scope_bias, in_scope) * fusion.recency_factor(
            now - at, half_life, float(cfg.recall_recency_floor))
        found = tuple(name for name in ARMS if key in scores.get(name, {}))
        hits.append(RecallHit(kind, item_id, session_id, at, score, found, in_scope, row, node,
                              snippets.get(key, "")))
    hits.sort(key=lambda h: (-h.score, -h.at, h.kind, h.item_id))
    hits = rescored(runtime, req, match, hits, rescore.WITH_VECTORS if "semantic" in ran else rescore.DEFAULT)
    hits = _distinct_text(_current_first(runtime, req.query, hits), gate.excluded)
    if req.detail == "answer_ready":
        hits = _per_session_cap(hits, PER_SESSION_ANSWER_READY)
    return RecallResult(match, hits[:req.limit], len(hits) > req.limit, reports, method, degraded_reason is not None,
                        degraded_reason, gate.excluded)


class Gate:
    """Which stored items recall may return: not ignored, not live in the prompt, not seen."""

    def __init__(self, runtime: Runtime, req: RecallRequest):
        self.runtime = runtime
        self.req = req
        self.excluded = {"ignored_session": 0, "in_flight_turn": 0, "live_context": 0, "seen": 0,
                         "outside_time_bounds": 0, "repeated_text": 0, "own_tool_output": 0}
        self._ignored: dict[str, bool] = {}
        self._frontier: int | None = None

    def ignored(self, session_id: str, platform: str | None = None) -> bool:
        if session_id not in self._ignored:
            bound_ignored = self.runtime.bound_sessions.get(session_id) == "ignored"
            if platform is None and not bound_ignored:
                srow = self.runtime.store.session(session_id)
                platform = srow.platform if srow is not None else ""
            self._ignored[session_id] = bound_ignored or \
                self.runtime.filters.ignored_by(session_id, platform or "") is not None
        return self._ignored[session_id]

    def live(self, row: MessageRow) -> bool:
        """A current-session row past the compaction frontier is already in the prompt."""
        if not self.req.current or row.session_id != self.req.current:
            return False
        if self._frontier is None:
            self._frontier = self.runtime.store.frontier_store_id(self.req.current)
        return row.store_id > self._frontier

    def admit_row(self, row: MessageRow) -> bool:
        req = self.req
        return self._admit(
            "ignored_session" if self.ignored(row.session_id, row.platform) else
            "outside_time_bounds" if req.before is not None and float(row.created_at or 0.0) >= req.before else
            "live_context" if self.live(row) else
            # an earlier search's result or request: a copy, not the source
            "own_tool_output" if own_tool_echo(row) else
            # the turn being answered, though a compaction covered it
            "in_flight_turn" if req.turn_start is not None and row.session_id == req.current
            and row.store_id > req.turn_start else
            "seen" if ("message", row.store_id) in req.seen else None)

    def admit_node(self, node: NodeRow) -> bool:
        return self._admit("ignored_session" if self.ignored(node.session_id) else
                           "seen" if ("summary", node.node_id) in self.req.seen else None)

    def _admit(self, refused: str | None) -> bool:
        """Count a refusal under its reason; admit when there is none."""
        if refused is not None:
            self.excluded[refused] += 1
        return refused is None

    def in_scope(self, session_id: str, conversation_id: str) -> bool:
        return bool(self.req.current) and session_id == self.req.current or \
            bool(self.req.current_conversation) and conversation_id == self.req.current_conversation


def fts_arm(runtime: Runtime, req: RecallRequest, match: Match, pool: int, gate: Gate,
             rows: dict[int, MessageRow], snippets: dict[Key, str], report: ArmReport) -> dict[Key, float]:
    """BM25 over raw rows of every session, then coverage and adjacent-turn re-ranking; the turns
    beside the best hits join the pool, as the reply a question's words miss sits beside them."""
    report.ran, report.pool = True, pool
    report.facts.update(archive_candidate_limit=ARCHIVE_CANDIDATES, archive_rare_term_budget=ftsbound.RARE_BUDGET)
    store = runtime.store
    # trove's own search traffic is skipped by reading further, so it never takes the pool's places
    found, _, complete = skipping(lambda n: store.search(
        match.expression, time_from=req.since, time_to=req.before, limit=n, snippets=False,
        max_candidates=ARCHIVE_CANDIDATES, visible=req.visible), pool) if match.expression else ([], [], True)
    literal = req.query.strip()
    if not found and 0 < len(literal) <= LITERAL_MAX_CHARS:
        # Text the tokenizer cannot split (CJK runs, emoji, partial ids): a bounded substring scan.
        found, _, complete = skipping(lambda n: store.search(
            "", time_from=req.since, time_to=req.before, limit=n, literal=literal,
            max_candidates=LITERAL_CANDIDATES, visible=req.visible), pool)
        if found:
            report.facts["fallback"] = "substring"
            snippets.update((("message", row.store_id), snip) for row, _, snip in found)
    report.bounded = not complete
    kept = [(row, rank) for row, rank, _ in found if gate.admit_row(row)]
    rows.update((row.store_id, row) for row, _ in kept)
    report.candidates = len(kept)
    if report.facts.get("fallback"):
        # substring hits are unranked (newest first): a gentle descending score keeps that order
        return {("message", row.store_id): 1.0 / (1 + i) for i, (row, _) in enumerate(kept)}
    candidates = [Candidate(row.store_id, row.session_id, -float(rank),
                            (row.content + " " + (row.tool_calls or "")).lower()) for row, rank in kept]
    reranked = dict(rerank(candidates, match.terms, POOLED_COVERAGE, pooled=True))
    groups = {row.store_id: row.session_id for row, _ in kept}
    searched = {row.store_id for row, _, _ in found}  # a row the search found and the gate refused stays out
    beside = [row for row in runtime.store.get_many(adjacent_ids(reranked, ADJACENT_SEEDS), req.visible)
              if row.store_id not in searched and (req.since is None or float(row.created_at or 0.0) >= req.since)]
    added = adjacent_scores(reranked, groups, {row.store_id: row.session_id for row in beside}, ADJACENT_SHARE)
    for row in beside:
        if row.store_id in added and gate.admit_row(row):
            rows[row.store_id], groups[row.store_id] = row, row.session_id
            reranked[row.store_id] = added[row.store_id]
    report.facts["adjacent_turns"] = len(reranked) - len(kept)
    smoothed = fusion.context_smoothing(reranked, groups, CONTEXT_RADIUS, float(runtime.config.recall_context_weight))
    return {("message", key): score for key, score in smoothed.items()}


def summary_arm(runtime: Runtime, req: RecallRequest, match: Match, pool: int, gate: Gate,
                 nodes: dict[int, NodeRow], snippets: dict[Key, str], report: ArmReport) -> dict[Key, float]:
    """BM25 over the summary nodes of every session."""
    report.ran, report.pool = True, pool
    if not match.expression:
        return {}
    found = runtime.dag.search_all(match.expression, limit=pool, time_from=req.since, time_to=req.before,
                                   visible=req.visible)
    report.bounded = len(found) >= pool
    kept = [(node, rank, snip) for node, rank, snip in found if gate.admit_node(node)]
    nodes.update((node.node_id, node) for node, _, _ in kept)
    snippets.update((("summary", node.node_id), snip) for node, _, snip in kept)
    out = {("summary", node.node_id): -float(rank) for node, rank, _ in kept}
    report.candidates = len(out)
    return out


def _start_semantic(runtime: Runtime, req: RecallRequest, pool: int, report: ArmReport) -> Callable[[], Any] | None:
    """The vector arm begun through ``retrieval.semantic.start``: a function that waits for its
    result, or None with the reason in ``report``."""
    cfg = runtime.config
    if not cfg.embeddings_enabled:
        report.reason = "embeddings disabled (TROVE_EMBEDDINGS_ENABLED=false)"
        return None
    report.pool = pool
    semantic = semantic_module()
    if semantic is None:
        report.reason = "embeddings module unavailable"
        return None
    kinds = {"all": ("message", "summary"), "verbatim": ("message",), "summaries": ("summary",)}[req.include]
    try:
        return semantic.start(
            runtime, req.query, kinds=kinds, session_ids=runtime.store.visible_session_ids(req.visible),
            since=req.since, before=req.before, limit=pool, deadline_s=float(cfg.embedding_query_deadline_ms) / 1000.0)
    except Exception as exc:  # a vector failure must leave full text answering
        report.reason = f"semantic search failed: {type(exc).__name__}: {str(exc)[:200]}"
        return None


def _semantic_arm(runtime: Runtime, req: RecallRequest, finish: Callable[[], Any] | None,
                  gate: Gate, rows: dict[int, MessageRow], nodes: dict[int, NodeRow],
                  scores: dict[str, dict[Key, float]], report: ArmReport) -> str | None:
    """The vector arm's hits, admitted and scored; returns the degradation reason, if any (none
    when embeddings are off)."""
    if finish is None:
        return report.reason if runtime.config.embeddings_enabled else None
    try:
        result = finish()
    except Exception as exc:  # a vector failure must leave full text answering
        report.reason = f"semantic search failed: {type(exc).__name__}: {str(exc)[:200]}"
        return report.reason
    for name in ("provider", "model", "generation", "coverage", "elapsed_ms"):
        value = getattr(result, name, None)
        if value is not None and isinstance(value, (str, int, float, bool, dict, list)):
            report.facts[name] = value
    if not getattr(result, "ran", False):
        report.reason = str(getattr(result, "degraded_reason", None) or "semantic search did not run")
        return report.reason
    report.ran = True
    hits = list(getattr(result, "hits", []) or [])
    report.bounded = len(hits) >= report.pool
    _load_missing(runtime, hits, rows, nodes, req.visible)
    out: dict[Key, float] = {}
    for hit in hits:
        key: Key = (str(hit.kind), int(hit.item_id))
        if ((row := rows.get(key[1])) is not None and gate.admit_row(row)) if key[0] == "message" \
                else ((node := nodes.get(key[1])) is not None and gate.admit_node(node)):
            out[key] = max(out.get(key, -2.0), float(hit.score))  # chunks of one message: its best chunk
    report.candidates = len(out)
    scores["semantic"] = out
    reason = getattr(result, "degraded_reason", None)
    return str(reason) if reason else None


def semantic_module() -> Any:
    """The vector search API (``retrieval.semantic``); a seam tests replace, None = unavailable."""
    return semantic


def _load_missing(runtime: Runtime, hits: list[Any], rows: dict[int, MessageRow], nodes: dict[int, NodeRow],
                  visible: Visibility) -> None:
    want_rows = [int(h.item_id) for h in hits if h.kind == "message" and int(h.item_id) not in rows]
    rows.update((row.store_id, row) for row in runtime.store.get_many(want_rows, visible))
    listed = runtime.store.visible_session_ids(visible)
    allowed = None if listed is None else set(listed)
    for h in hits:
        if h.kind == "summary" and int(h.item_id) not in nodes:
            node = runtime.dag.get(int(h.item_id))
            if node is not None and (allowed is None or node.session_id in allowed):
                nodes[node.node_id] = node


def rescored(runtime: Runtime, req: RecallRequest, match: Match, hits: list[RecallHit],
              weights: rescore.Weights) -> list[RecallHit]:
    """The fused hits re-scored by ``rescore`` (reading the adjacent turns of the message hits)."""
    if weights.rescore <= 0:
        return hits
    items = [rescore.Item((h.kind, h.item_id), h.row.content if h.row is not None else h.node.summary if h.node
                          else h.snippet, h.at, h.score)
             for h in hits]
    near: dict[Any, str] = {}
    if weights.neighbours > 0:
        head = [h for h in hits[:weights.pool] if h.row is not None]
        around = {i for h in head for i in (h.item_id - 1, h.item_id + 1)}
        found = {r.store_id: r for r in runtime.store.get_many(sorted(around), req.visible)}
        for h in head:
            near[("message", h.item_id)] = " ".join(r.content for r in (found.get(h.item_id - 1),
                                                    found.get(h.item_id + 1)) if r and r.session_id == h.session_id)
    q = rescore.question(req.query, match.terms, match.phrases)
    ordered = rescore.rescore(q, items, near, weights)
    by_key: dict[Hashable, RecallHit] = {(h.kind, h.item_id): h for h in hits}
    return [replace(by_key[it.key], score=it.score) for it in ordered]


def _current_first(runtime: Runtime, question: str, hits: list[RecallHit]) -> list[RecallHit]:
    """Raw hits of the window in ``changed.current_first`` order (summaries keep their places);
    the window's scores keep falling, so a moved hit takes the score of the place it took."""
    top, rows = hits[:CHANGED_WINDOW], {h.item_id: h for h in hits[:CHANGED_WINDOW] if h.row is not None}
    order = iter(changed.current_first(question, [(k, h.row.content, h.at, h.row.role) for k, h in rows.items()
                                                  if h.row is not None],
                                       runtime.db if runtime.config.assertions_enabled else None))
    moved = [rows[next(order)] if h.row is not None else h for h in top]
    return [replace(h, score=old.score) for h, old in zip(moved, top, strict=True)] + hits[CHANGED_WINDOW:]


def _distinct_text(hits: list[RecallHit], excluded: dict[str, int]) -> list[RecallHit]:
    """The hits without raw rows that repeat a better-placed row's role and text exactly (a message
    sent again, a tool output repeated, one history imported twice): each place goes to new text."""
    seen: set[tuple[str, str]] = set()
    out = []
    for h in hits:
        if h.row is not None:
            key = (h.row.role, h.row.content)
            if key in seen:
                excluded["repeated_text"] += 1
                continue
            seen.add(key)
        out.append(h)
    return out


def _per_session_cap(hits: list[RecallHit], cap: int) -> list[RecallHit]:
    counts: dict[str, int] = {}
    out = []
    for h in hits:
        counts[h.session_id] = counts.get(h.session_id, 0) + 1
        if counts[h.session_id] <= cap:
            out.append(h)
    return out
