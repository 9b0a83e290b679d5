"""Compactor: one ``compress()`` call — map, plan, summarise, persist, condense, assemble.

Raw messages are committed before any summary that covers them; each summary node and
the frontier move commit together, so a crash between a model call and its commit only
loses that call. Planning lives in ``policy.py``, model calls in ``summarize.py`` and the
summary message in ``assembly.py``; the compactor gets its collaborators, not the engine.
"""
from __future__ import annotations

import bisect
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import tokens
from ..ingest import Identify, is_synthetic, message_identity
from ..outboxaside import HeldBackError
from ..payloads.replay import apply_replay_stubs
from ..payloads.sidecar import transcript_gc
from . import assembly, policy
from .summarize import Summarizer, SummaryResult, cut_note, expand_hint, serialize_messages
from .window import MIN_TARGET, TRIGGER_CEILING, plan_target

if TYPE_CHECKING:
    from ..dag import NodeRow
    from ..runtime import Runtime
    from ..store import MessageRow, SessionKey

log = logging.getLogger("hermes_trove.compaction")

TAIL_SHARE = 0.6            # the protected tail may use at most this share of that target
MAX_CALLS = 12              # model calls per compress() (leaf + condensation)
SWEEP_SECONDS = 120.0       # wall-clock bound between calls of one compress()
FRONTIER_LABEL_TOKENS = 60  # header and footer of the summary message, when it exists
CATCHUP_LEAVES = 4          # extra leaf passes under critical budget pressure (bounded catch-up)


@dataclass(frozen=True)
class CompactionLimits:
    """The window one compress() works within, as the engine knows it at call time."""

    threshold_tokens: int  # 0 = not initialised: no threshold applies
    context_length: int    # 0 = unknown: the critical-pressure rule is off
    overhead_tokens: int = 0  # the host's fixed part as the trigger measured it (0 = measure here)


@dataclass
class CompactionResult:
    messages: list[dict[str, Any]]
    progress: bool
    status: str
    reason: str
    report: dict[str, Any] = field(default_factory=dict)
    fallback_used: bool = False


def leaf_budget(source_tokens: int) -> int:
    return max(policy.LEAF_BUDGET_FLOOR, min(4000, source_tokens // 5))


def condense_budget(children_tokens: int) -> int:
    return max(policy.LEAF_BUDGET_FLOOR, min(4000, int(children_tokens * 0.4)))


class Compactor:
    """Runs one compaction of ``key``'s session over ``runtime``'s store and DAG."""

    def __init__(self, runtime: Runtime, key: SessionKey, limits: CompactionLimits, summarizer: Summarizer):
        self.runtime = runtime
        self.config = runtime.config
        self.key = key
        self.limits = limits
        self.summarizer = summarizer
        self.window = summarizer.window(int(limits.context_length or 0))  # what a summary request must fit
        self.calls = 0
        self.aux_input_tokens = 0
        self.levels: list[str] = []
        self.failed_over = 0  # summaries a model failure pushed down the ladder
        self.source_tokens = 0
        self.stubbed = 0
        self.errors: list[str] = []
        self.started = time.monotonic()
        self.extra = ""
        self.nodes: list[NodeRow] = []  # the session's summary frontier, as dag.frontier orders it
        self.node_tokens = 0            # their rendered tokens
        self.taken_back: frozenset[int] = frozenset()  # rows the host rewound: covered, never summarised

    # -- entry ---------------------------------------------------------------
    def run(self, messages: list[dict[str, Any]], current_tokens: int | None = None,
            focus_topic: str | None = None, force: bool = False, memory_context: str = "",
            identity: Identify = message_identity) -> CompactionResult:
        store, sid = self.runtime.store, self.key.session_id
        held = getattr(store, "held_back", None)  # a server store: rows of this session set aside
        if held is not None and (why := held(sid)):
            raise HeldBackError(why)  # the host's compressor takes this call; nothing is dropped unsummarised
        frontier = store.frontier_store_id(sid)
        backlog = store.backlog(sid, frontier)
        # The summary frontier is read once; the passes below keep this copy and its token total
        # current, so a compaction costs what it folds, not the length of the history.
        self._read_nodes()
        host = assembly.split_host_merge(messages)
        live, live_ids = self._map_live(host, backlog, identity)
        # an explicit request for a prefix the host keeps a tail after: that prefix is compacted whole
        prefix_ids = policy.keeps_tail_after(live_ids, [(r.store_id, r.identity) for r in backlog]) if force else None
        prefix_only = prefix_ids is not None
        live_ids = prefix_ids if prefix_ids is not None else live_ids
        self.taken_back = policy.taken_back(live_ids, [r.store_id for r in backlog])
        overhead = max(0, int(current_tokens or 0) - tokens.count_messages(messages))
        if current_tokens and self.limits.overhead_tokens:  # the trigger's measure, so both agree on it
            overhead = int(self.limits.overhead_tokens)
        threshold = int(self.limits.threshold_tokens or 0) or 10 ** 9
        target = plan_target(threshold, overhead)  # window.py: never starved by a large overhead

        count = tokens.count_message
        tail_start = len(live) if prefix_only else policy.select_fresh_tail(
            live, self.config.fresh_tail_count, self.config.fresh_tail_max_tokens, count)
        live = self._stub_history(live, tail_start)
        if not prefix_only:
            tail_start = policy.enforce_budget(live, tail_start, int(target * TAIL_SHARE), count)
        at = [i for i in range(tail_start) if live_ids[i]]  # where each candidate stands in ``live``
        sweep = bool(self.config.threshold_full_sweep_enabled)
        focus = (focus_topic or "").strip()
        if memory_context.strip():
            self.extra = ("Notes from the agent's memory providers (keep the summary consistent with them):\n"
                          + memory_context.strip()[:4000])

        # 1. leaf passes over the oldest candidates, as many as the budget needs
        cand_msgs = [live[i] for i in at]
        sizes = [count(m) for m in cand_msgs]
        # Unstored messages after candidate k stay with it unless an ignore pattern filtered them out
        # (a message shown rewritten has a stored row; dropping it would read as the host's undo).
        skip = self.runtime.filters.skip_message
        stays = [live_ids[i] > 0 or not skip(m) for i, m in enumerate(live[:tail_start])]
        extra = [0] * (len(at) + 1)  # tokens of the unstored messages that stay from candidate k on
        for k in range(len(at) - 1, -1, -1):
            stop = at[k + 1] if k + 1 < len(at) else tail_start
            extra[k] = extra[k + 1] + sum(count(live[i]) for i in range(at[k] + 1, stop) if stays[i])
        chunk = policy.chunk_target(sum(sizes), self.config.leaf_chunk_tokens, self.config.dynamic_leaf_chunk_max,
                                    self.config.dynamic_leaf_chunk_enabled, self.window)
        chunks = policy.plan_leaf_chunks(cand_msgs, sizes, chunk)
        tail_tokens = sum(count(m) for m in live[tail_start:])
        # Critical pressure (TROVE_CRITICAL_BUDGET_PRESSURE_RATIO of the window) lifts the polite
        # gates: up to CATCHUP_LEAVES leaf passes past "already fits", and partial condensation.
        critical = self._critical(current_tokens or tokens.count_messages(messages))
        catchup = 0
        compacted_upto = 0  # number of candidates folded into leaves
        covered = frontier  # every stored row up to here is beneath a leaf
        leaves = 0
        for ch in chunks:
            raw_left = sum(sizes[ch.start:]) + extra[ch.start]
            prefix = self.node_tokens + (FRONTIER_LABEL_TOKENS if self.nodes else 0)
            if not (force or sweep) and prefix + raw_left + tail_tokens <= target:
                if not critical or catchup >= CATCHUP_LEAVES:
                    break  # already fits (e.g. after stubbing): no summary call needed
                catchup += 1  # deferred backlog caught up while the window is nearly full
            last_id = live_ids[at[ch.end - 1]]
            # stored rows the host list did not show are folded in too, so lineage has no gaps
            # (those it took back are covered but not summarised: see ``_leaf``)
            rows = [r for r in backlog if covered < r.store_id <= last_id]
            if not rows or not self._leaf(rows, focus):
                break
            covered = last_id
            compacted_upto = ch.end
            leaves += 1

        # 2. condensation while the frontier has full groups (or is too big for its share)
        if sweep:
            prefix_budget = self.config.summary_prefix_target_tokens or self.config.leaf_chunk_tokens
        else:
            prefix_budget = target - tail_tokens - sum(sizes[compacted_upto:]) - extra[compacted_upto]
        condensed = self._condense(sid, prefix_budget, sweep or force or critical, critical)

        # 3. assembly
        # Unstored live messages before the tail are dropped with the compacted part, and those an
        # ignore pattern filtered out everywhere; one shown rewritten among the kept candidates stays in
        # place, so the next list shows no gap there that ``policy.taken_back`` reads as the host's.
        keep_from = at[compacted_upto] if compacted_upto < len(at) else tail_start
        raw_keep = [m for i, m in enumerate(live[:tail_start]) if i >= keep_from and stays[i]]
        room = threshold - overhead  # what the messages may hold and stay under the trigger
        if tail_tokens > room and self.limits.context_length:  # past the trigger anyway: the window's ceiling
            room = max(room, int(self.limits.context_length * TRIGGER_CEILING) - overhead)
        kept = raw_keep + live[tail_start:]  # the request comes back within the tail's share and the room
        request = None if prefix_only else assembly.turn_request(  # the host's kept tail holds the request
            kept, host, min(int(target * TAIL_SHARE), room - tokens.count_messages(kept)))
        out, omitted = assembly.assemble(self.nodes, raw_keep, live[tail_start:], target, room, request,
                                         tools=self.runtime.gives_tools(self.key.session_id, self.key.platform))
        # giving back a merged message, or only dropping the host's saved flags, is no progress
        progress = all(out != [assembly.unsaved(m) if isinstance(m, dict) else m for m in shown]
                       for shown in (messages, host))
        status = "compacted" if leaves or condensed else ("stubbed" if self.stubbed else
                                                          "sanitized" if progress else "noop")
        reason = "" if progress else ("nothing outside the protected tail to compact" if not at
                                      else "summaries could not shrink the prompt")
        for name, value in (("summary_calls", self.calls), ("aux_input_tokens", self.aux_input_tokens),
                            ("compacted_source_tokens", self.source_tokens)):
            self.runtime.bump(name, value)
        report = {
            "status": status, "reason": reason, "leaf_passes": leaves, "condensation_passes": condensed,
            "summary_calls": self.calls, "aux_input_tokens": self.aux_input_tokens,
            "levels": self.levels, "errors": self.errors[-5:], "tokens_before": tokens.count_messages(messages),
            "tokens_after": tokens.count_messages(out), "overhead_tokens": overhead, "target_tokens": target,
            "threshold_tokens": threshold, "fresh_tail_messages": len(live) - tail_start,
            "host_kept_tail": prefix_only, **kept_tail_ids(prefix_only, live_ids, backlog),
            "omitted_summary_nodes": len(omitted), "stubbed_tool_results": self.stubbed, "focus_topic": focus,
            "forced": bool(force), "critical_pressure": critical, "catchup_leaf_passes": catchup,
            "seconds": round(time.monotonic() - self.started, 3), "at": time.time(),
        }
        return CompactionResult(out, progress, status, reason, report,
                                fallback_used=self.failed_over > 0)

    def _critical(self, current_tokens: int | None) -> bool:
        """Pressure at or above TROVE_CRITICAL_BUDGET_PRESSURE_RATIO of the window (0 disables)."""
        ratio = float(self.config.critical_budget_pressure_ratio or 0)
        window = int(self.limits.context_length or 0)
        return bool(ratio and window and int(current_tokens or 0) >= ratio * window)

    def _stub_history(self, live: list[dict[str, Any]], protect_from: int) -> list[dict[str, Any]]:
        """Active-replay stubbing of big tool results before the tail (opt-in, checked by
        ``apply_replay_stubs``; rows untouched)."""
        try:
            out, done = apply_replay_stubs(self.runtime, self.key.session_id, live, protect_from=protect_from)
        except Exception:
            log.exception("trove: replay stubbing failed; payloads stay inline")
            return live
        self.stubbed = done
        return out

    # -- mapping -------------------------------------------------------------
    @staticmethod
    def _map_live(messages: list[dict[str, Any]], backlog: list[MessageRow],
                  identity: Identify = message_identity) -> tuple[list[dict[str, Any]], list[int]]:
        """The live raw part of the host list (past the frontier) with store ids (0 = unstored).

        Pairs equal identities from the end, keeping store order, so a transcript that holds
        only part of the backlog (a gateway /compress head) still maps. Host messages before
        the first paired one are already summarised (or rotated away) and leave the prompt.
        """
        raw = [m for m in messages if isinstance(m, dict) and not is_synthetic(m)]
        ids = [0] * len(raw)
        positions: dict[str, list[int]] = {}
        for pos, row in enumerate(backlog):
            positions.setdefault(row.identity, []).append(pos)
        j = len(backlog)  # rows at index >= j are taken; matches must stay in store order
        first = len(raw)
        for i in range(len(raw) - 1, -1, -1):
            found = positions.get(identity(raw[i]))
            if not found:
                continue  # not stored (filtered out) or already behind the frontier
            k = bisect.bisect_left(found, j) - 1
            if k < 0:
                continue
            j = found[k]
            ids[i] = backlog[j].store_id
            first = i
        if first == len(raw):
            first = 0  # nothing stored past the frontier, or nothing aligned: drop nothing
        start = policy.forward_to_group_start(raw, first)  # never begin on an orphan tool result
        # keep unstored messages that sit between matched ones (ignored by filters)
        return raw[start:], ids[start:]

    # -- passes --------------------------------------------------------------
    def _budget_left(self) -> bool:
        return self.calls < MAX_CALLS and time.monotonic() - self.started < SWEEP_SECONDS

    def _summarize(self, text: str, depth: int, budget: int, focus: str) -> SummaryResult:
        extra = self.extra if depth == 0 else ""
        asked = tokens.count(text) + tokens.count(extra + self.config.custom_instructions + focus)
        asked += policy.SUMMARY_INSTRUCTION_TOKENS
        # a record the window cannot hold is cut here: asking would only be refused, and count
        # against the route's circuit breaker that the next, smaller records need closed
        if not self._budget_left() or not policy.request_fits(asked, self.window):
            return self.summarizer.summarize(text, depth, budget, focus, allow_model=False)
        budget = policy.budget_within(budget, asked, self.window)
        res = self.summarizer.summarize(text, depth, budget, focus, extra)
        self.calls += res.calls
        self.aux_input_tokens += res.input_tokens
        self.errors.extend(res.errors)
        self.failed_over += res.failed_over
        return res

    def _leaf(self, rows: list[MessageRow], focus: str) -> bool:
        shown = [r for r in rows if r.store_id not in self.taken_back]
        text = serialize_messages(shown)
        source_tokens = sum(r.token_count for r in rows)
        res = self._summarize(text, 0, leaf_budget(source_tokens), focus)
        self.levels.append(res.level)
        note = cut_note(shown)  # a message the record showed in part: the summary says so
        summary = f"{res.text}\n{note}" if note else res.text
        size = tokens.count(summary) if note else res.tokens
        leaf = self.runtime.dag.add_leaf_below_frontier(
            self.key.session_id, summary, [r.store_id for r in rows], token_count=size,
            source_token_count=source_tokens, earliest_at=min(r.created_at for r in rows),
            latest_at=max(r.created_at for r in rows), level=res.level, model=res.model,
            expand_hint=expand_hint(res.text))
        if leaf is None:
            self._read_nodes()
            return False  # another engine copy compacted these meanwhile
        self._replace_nodes((), leaf)
        self.source_tokens += source_tokens
        try:  # a no-op unless TROVE_LARGE_OUTPUT_TRANSCRIPT_GC_ENABLED
            transcript_gc(self.runtime, self.key.session_id, [r.store_id for r in rows])
        except Exception:
            log.exception("trove: transcript GC failed (rows left as they were)")
        return True

    def _condense(self, sid: str, prefix_budget: int, eager: bool, critical: bool = False) -> int:
        dag = self.runtime.dag
        cfg = self.config
        done = attempts = 0
        while attempts < 2 * MAX_CALLS:
            attempts += 1
            over = self.node_tokens > max(0, prefix_budget)
            group = policy.plan_condensation([assembly.node_info(n) for n in self.nodes], cfg.condensation_fanin,
                                             cfg.incremental_max_depth, allow_partial=(over and eager) or critical,
                                             max_tokens=policy.summary_input_cap(self.window))
            if group is None or (done >= MAX_CALLS):
                return done
            by_id = {n.node_id: n for n in self.nodes}
            children = [by_id[i] for i in group.node_ids]
            text = "\n\n---\n\n".join(f"[d{c.depth} node {c.node_id}]\n{c.summary}" for c in children)
            res = self._summarize(text, group.depth + 1, condense_budget(group.tokens), "")
            self.levels.append(res.level)
            parent = dag.condense_on_frontier(
                sid, group.depth + 1, res.text, list(group.node_ids), token_count=res.tokens,
                source_token_count=sum(c.source_token_count for c in children),
                earliest_at=min((c.earliest_at or c.created_at) for c in children),
                latest_at=max((c.latest_at or c.created_at) for c in children),
                level=res.level, model=res.model, expand_hint=expand_hint(res.text))
            if parent is None:
                self._read_nodes()  # another process condensed some of these meanwhile: plan again
                continue
            self._replace_nodes(group.node_ids, parent)
            done += 1
        return done

    def _read_nodes(self) -> None:
        self.nodes = self.runtime.dag.frontier(self.key.session_id)
        self.node_tokens = sum(assembly.node_info(n).tokens for n in self.nodes)

    def _replace_nodes(self, gone: tuple[int, ...], node: NodeRow) -> None:
        """Keep the frontier copy and its token total current: ``gone`` leave, ``node`` joins."""
        left = [n for n in self.nodes if n.node_id in gone]
        self.node_tokens += assembly.node_info(node).tokens - sum(assembly.node_info(n).tokens for n in left)
        self.nodes = [n for n in self.nodes if n.node_id not in gone] + [node]
        self.nodes.sort(key=lambda n: (-n.depth, n.earliest_at or n.created_at, n.node_id))


def kept_tail_ids(prefix_only: bool, live_ids: list[int], backlog: list[MessageRow]) -> dict[str, list[int]]:
    """The first and last store ids of the tail the host keeps after a prefix it passed (``/compress here N``),
    for the next turn to check the host showed it; nothing for any other compaction."""
    newest = max(live_ids, default=0)
    kept = [r.store_id for r in backlog if r.store_id > newest] if prefix_only and newest else []
    return {"host_kept_tail_ids": [kept[0], kept[-1]]} if kept else {}


def has_content(runtime: Runtime, key: SessionKey | None, messages: list[dict[str, Any]]) -> bool:
    """True when a forced compaction of ``messages`` could fold something: raw turns older than the
    tail it protects, or any stored turn of a prefix the host keeps a tail after (``/compress here N``
    on a gateway asks this first; ``policy.host_keeps_tail``)."""
    raw = [m for m in messages if isinstance(m, dict) and not is_synthetic(m)]
    if key is not None and raw:
        store, sid = runtime.store, key.session_id
        backlog = store.backlog(sid, store.frontier_store_id(sid))
        _, ids = Compactor._map_live(assembly.split_host_merge(messages), backlog)
        if policy.keeps_tail_after(ids, [(r.store_id, r.identity) for r in backlog]) is not None:
            return True
    cfg, count = runtime.config, tokens.count_message
    start = policy.select_fresh_tail(raw, cfg.fresh_tail_count, cfg.fresh_tail_max_tokens, count)
    budget = int(MIN_TARGET * TAIL_SHARE)  # the host's prompt overhead is not known here
    return len(raw) > 1 and policy.enforce_budget(raw, start, budget, count) > 0


def handover_reason(runtime: Runtime, exc: BaseException) -> str:
    """Why a failed trove compaction is handed to the host's compressor: the store broke, rows of the session
    wait set aside (expected until they ship: one warning line a compaction, no traceback), or trove did."""
    if runtime.store_failed(exc, "compaction"):
        return "store unusable"
    if isinstance(exc, HeldBackError):
        log.warning("trove: %s; this compaction goes to the built-in compressor until they ship", exc)
        return str(exc)[:300]
    log.exception("trove: compaction failed; this one is delegated to the built-in compressor")
    return f"trove compaction failed: {type(exc).__name__}: {exc}"[:300]
