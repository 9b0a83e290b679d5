"""Embedding indexing: bounded passes, the background worker thread, backfill and status.

A pass holds the lease ``embeddings:<provider>:<model>``, embeds the rows past the generation's
cursors (messages as chunks with spans, summaries whole) and writes each group's vectors with the
advanced cursor in one transaction, so a crash or a lost lease loses nothing. It stops at its time
budget or item count; a generation that has caught up becomes the active one.
"""
from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from .. import leases
from .embed_providers import EmbeddingUnavailable, Provider, ProviderSpec, check_available, get_provider
from .embed_text import CHUNK_CHARS, VectorCarry, chunk_spans, contexts, item_text, recipe
from .semantic import coverage, searched_generation, spend_guard, target_spec, vector_store
from .vector_index import quantize
from .vector_store import Generation, PendingText, VectorRow, VectorStore

if TYPE_CHECKING:
    from ..runtime import Runtime

log = logging.getLogger("hermes_trove.embeddings")

GROUP_ROWS = 64            # local rows embedded (sorted by length into batches) and committed together
LEASE_TTL_S = 60.0  # renewed per batch; a dead holder's lease is taken over at once
PRUNE_PER_PASS = 5000
@dataclass
class PassReport:
    status: str = "idle"      # idle | done | partial | busy | unavailable | error | off
    generation: int | None = None
    embedded: int = 0         # texts embedded (chunks + summaries)
    vectors: int = 0          # rows inserted
    rows: int = 0             # messages + summaries the cursors moved past
    swapped: bool = False
    restarted: bool = False   # the generation's messages are being embedded again (new recipe)
    pruned: int = 0
    error: str | None = None
    holder: str | None = None  # busy: the owner of the lease
    seconds: float = 0.0
    pending: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if v is not None}


def group_rows(spec: ProviderSpec) -> int:
    """Rows per group: the local model sorts GROUP_ROWS by length into its batches (a batch pads
    to its longest text); a remote provider commits each paid request before sending the next."""
    return GROUP_ROWS if spec.provider == "local" else max(1, min(GROUP_ROWS, spec.batch_size))


def _group_vectors(provider: Provider, items: list[PendingText], tool_policy: str, guard: Any,
                   context: dict[int, str] | None = None,
                   carry: VectorCarry | None = None) -> tuple[list[VectorRow], int]:
    texts: list[str] = []
    meta: list[tuple[PendingText, int, int | None]] = []
    context = context or {}
    for item in items:
        text = item_text(item, tool_policy)
        if item.kind == "summary":
            if text.strip():
                texts.append(text[:CHUNK_CHARS * 2])
                meta.append((item, 0, None))
            continue
        after = context.get(item.item_id, "")
        for start, end in chunk_spans(text):
            texts.append(text[start:end] + ("\n" + after if after else ""))
            meta.append((item, start, end))
    if not texts:
        return [], 0
    vectors = provider.embed(texts, guard)
    q, scale = quantize(carry.mix(meta, vectors) if carry is not None else vectors)
    rows = [VectorRow(item.kind, item.item_id, start, end, item.session_id, item.at, q[i].tobytes(), float(scale[i]))
            for i, (item, start, end) in enumerate(meta)]
    return rows, len(texts)


def _generation_for(store: VectorStore, spec: ProviderSpec, provider: Provider, recipe_name: str) -> Generation | None:
    """The target generation; a remote provider's dimension is learned from its first vectors."""
    dim = provider.dim
    if dim:
        return store.ensure(spec.provider, spec.model, dim, spec.base_url, recipe_name)
    found = store.find(spec.provider, spec.model)
    return found if found is not None and found.state != "retired" else None


@dataclass(frozen=True)
class PassPlan:
    """What one indexing pass is to do, decided before any lease is taken."""

    spec: ProviderSpec
    budget_s: float
    limit: int             # rows the pass moves past at most
    policy: str            # TROVE_EMBEDDING_TOOL_OUTPUT_POLICY
    context: str           # TROVE_EMBEDDING_CONTEXT: vector | text | none
    context_messages: int  # earlier messages read as text (context=text)
    recipe: str
    text_follows: bool = False  # a first build with vector context: text context follows in place


def plan_pass(runtime: Runtime, store: VectorStore, budget_s: float | None = None,
              max_items: int | None = None) -> PassPlan | PassReport:
    """The pass to run, or the report of one with nothing to do (off, unavailable, caught up)."""
    cfg = runtime.config
    if not cfg.embeddings_enabled:
        return PassReport(status="off")
    spec = target_spec(runtime)
    reason = check_available(spec)
    if reason:
        return PassReport(status="unavailable", error=reason)
    mode, want = str(cfg.embedding_context), int(cfg.embedding_context_messages)
    newest = store.find(spec.provider, spec.model)
    # the common idle case, decided without a lease: the provider's newest generation is active, of the current
    # recipe, without a recorded error, past the newest message and node, and nothing is left to prune
    if newest is not None and newest.state == "active" and newest.recipe == recipe(mode, want) \
            and not newest.last_error and _reached(newest, store.heads()) and not store.has_retired_vectors():
        return PassReport(status="done", generation=newest.generation_id, pending=0)
    # a first build (none searchable yet: none, building or retired) with text context starts with vectors
    text_follows = mode == "text" and want > 0 and (newest is None or newest.state != "active")
    if text_follows:
        mode = "vector"  # searchable sooner; the text recipe follows in place
    return PassPlan(spec, cfg.embedding_pass_budget_ms / 1000.0 if budget_s is None else budget_s,
                    cfg.embedding_pass_max_items if max_items is None else max_items,
                    cfg.embedding_tool_output_policy, mode, want, recipe(mode, want), text_follows)


def run_pass(runtime: Runtime, *, budget_s: float | None = None, max_items: int | None = None,
             owner: str | None = None) -> PassReport:
    """One bounded indexing pass; never raises (failures are in the report and the generation row)."""
    runtime.settle()  # a server store: this machine's rows ship before the pass reads
    started = time.monotonic()
    store = vector_store(runtime)
    plan = plan_pass(runtime, store, budget_s, max_items)
    if isinstance(plan, PassReport):
        return plan
    report = PassReport()
    with leases.bounded_pass(runtime.db, f"embeddings:{plan.spec.label}", LEASE_TTL_S, budget_s=plan.budget_s,
                             owner=owner) as run:
        if run.held:
            apply_pass(runtime, store, plan, run, report)
        else:  # another process (or thread) is indexing this generation
            report.status, report.holder = "busy", run.holder
    report.seconds = round(time.monotonic() - started, 3)
    return report


def apply_pass(runtime: Runtime, store: VectorStore, plan: PassPlan, run: leases.BoundedPass,
               report: PassReport) -> None:
    """The effects of ``plan`` under its lease: one group of rows per step, then the generation's
    upkeep. A failure is recorded on the generation and in ``report``."""
    gen: Generation | None = None
    try:
        provider = get_provider(plan.spec)
        guard = spend_guard(runtime, plan.spec)
        gen = _open_generation(store, plan, provider, guard, report)
        upto = store.settled_heads()
        if upto is None:  # a server's writer of messages or summaries is still busy: next pass
            report.status, report.holder = "busy", "a writer of messages or summaries"
            return
        replacing = gen.message_cursor < store.highest_vectored(gen.generation_id, "message")
        groups = _Groups(store, plan, provider, guard, gen, replacing, report, upto)
        run.loop(groups.step)
        gen = groups.gen
        if replacing and gen.message_cursor >= store.highest_vectored(gen.generation_id, "message"):
            store.invalidate(gen.generation_id)  # re-embedding done: mirrors reload the new vectors once
        if gen.last_error:
            store.record_error(gen.generation_id, None)
        caught_up = _reached(gen, store.heads())
        report.swapped = gen.state == "building" and caught_up
        if report.swapped:  # a building generation that reached the newest rows is swapped in
            store.activate(gen.generation_id)
        report.pending = store.backlog(gen, plan.policy).pending
        report.status = "done" if caught_up and not plan.text_follows else "partial"
        report.pruned = store.prune_retired(PRUNE_PER_PASS)
    except EmbeddingUnavailable as exc:
        report.status, report.error = "unavailable", str(exc)
        if gen is not None:
            store.record_error(gen.generation_id, str(exc))
    except Exception as exc:
        report.status, report.error = "error", f"{type(exc).__name__}: {exc}"[:500]
        log.warning("trove: embedding pass failed: %s", report.error)
        if gen is not None:
            store.record_error(gen.generation_id, report.error)


def _open_generation(store: VectorStore, plan: PassPlan, provider: Provider, guard: Any,
                     report: PassReport) -> Generation:
    """The generation the pass writes; one made with another recipe has its messages embedded again."""
    gen = _generation_for(store, plan.spec, provider, plan.recipe)
    if gen is None:  # a remote provider's dimension is learned from one probe vector
        provider.embed(["dimension probe"], guard)
        gen = _generation_for(store, plan.spec, provider, plan.recipe)
        if gen is None:
            raise EmbeddingUnavailable("the provider returned no vector to learn its dimension from")
    if gen.recipe != plan.recipe:  # made with another recipe: embed every message again, in place
        gen = store.restart_messages(gen.generation_id, plan.recipe) or gen
        report.restarted = True
    report.generation = gen.generation_id
    return gen


@dataclass
class _Groups:
    """The steps of one pass: each embeds the next group of pending rows (messages, then summaries)
    and writes its vectors with the advanced cursor."""

    store: VectorStore
    plan: PassPlan
    provider: Provider
    guard: Any
    gen: Generation
    replacing: bool        # the messages are being embedded again (their old vectors go)
    report: PassReport     # its ``rows`` count what the pass moved past so far
    upto: tuple[int, int]  # ``settled_heads``: the pass reads no row past them
    kind: str = "message"
    carry: VectorCarry | None = None  # context=vector: each session's latest vector, carried over groups

    def _next(self) -> list[PendingText]:
        take = min(group_rows(self.plan.spec), self.plan.limit - self.report.rows)
        if self.kind == "message":
            items = self.store.pending_messages(self.gen.message_cursor, take, self.upto[0])
            if items:
                return items
            self.kind = "summary"
        return self.store.pending_nodes(self.gen.node_cursor, take, self.upto[1])

    def step(self) -> bool:
        items = self._next() if self.report.rows < self.plan.limit else []
        if not items:
            return False
        store, gen, kind, policy = self.store, self.gen, self.kind, self.plan.policy
        context = carry = None
        if kind == "message" and self.plan.context == "text":
            context = contexts(store, items, policy, self.plan.context_messages)
        elif kind == "message" and self.plan.context == "vector":
            carry = self.carry = self.carry or VectorCarry(store, gen.generation_id, policy)
        rows, embedded = _group_vectors(self.provider, items, policy, self.guard, context, carry)
        top = items[-1].item_id
        again = [(i.kind, i.item_id) for i in items] if kind == "message" and self.replacing else []
        self.report.vectors += store.write(gen.generation_id, rows, replaces=again,
                                           message_cursor=top if kind == "message" else None,
                                           node_cursor=top if kind == "summary" else None)
        self.report.embedded += embedded
        self.report.rows += len(items)
        self.gen = store.generation(gen.generation_id) or gen
        return True


def _reached(gen: Generation, heads: tuple[int, int]) -> bool:
    """Whether the generation's cursors are past ``heads`` (the newest store_id and node_id)."""
    return gen.message_cursor >= heads[0] and gen.node_cursor >= heads[1]


# -- the background worker ------------------------------------------------------------------------

FAILURE_PAUSE_S = 30.0  # the longest pause after failed passes (a provider that stays down is asked this often)
SUCCEEDED = ("partial", "done", "idle", "busy")


def pause_after(status: str, failures: int, idle: float) -> float:
    """Seconds the worker waits after a pass: none to speak of while rows are pending, ``idle``
    once caught up (or stepping aside), and after ``failures`` failed passes in a row 1 s,
    doubling per failure up to FAILURE_PAUSE_S (never less than ``idle``)."""
    if status == "partial":
        return 0.05
    if status in SUCCEEDED or failures < 1:
        return idle
    return max(idle, min(FAILURE_PAUSE_S, 2.0 ** min(failures - 1, 16)))


class IndexWorker(threading.Thread):
    """Runs passes until stopped: back to back while work is pending, ``idle_s`` apart otherwise."""

    def __init__(self, runtime: Runtime):
        super().__init__(name="trove-embeddings", daemon=True)
        self.runtime = runtime
        self._stop_event = threading.Event()
        self._wake = threading.Event()
        self.last: PassReport | None = None

    def stop(self, timeout: float = 10.0) -> None:
        self._stop_event.set()
        self._wake.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout)

    def nudge(self) -> None:
        """Run the next pass now (new rows were stored)."""
        self._wake.set()

    def run(self) -> None:
        idle = float(self.runtime.config.embedding_idle_seconds)
        failures = 0  # failed passes in a row
        while not self._stop_event.is_set():
            try:
                self.last = run_pass(self.runtime)
            except Exception:  # run_pass reports its own failures; this is a last resort
                log.exception("trove: embedding worker pass crashed")
                self.last = PassReport(status="error", error="pass crashed")
            failures = 0 if self.last.status in SUCCEEDED else failures + 1
            self._wake.wait(pause_after(self.last.status, failures, idle))
            self._wake.clear()


_WORKERS: dict[str, IndexWorker] = {}
_WORKERS_LOCK = threading.Lock()


def start_background(runtime: Runtime) -> IndexWorker | None:
    """Start this process's worker for the runtime's database when embeddings are enabled."""
    if not runtime.config.embeddings_enabled:
        return None
    with _WORKERS_LOCK:
        worker = _WORKERS.get(runtime.db.path)
        if worker is not None and worker.is_alive():
            return worker
        worker = IndexWorker(runtime)
        _WORKERS[runtime.db.path] = worker
        worker.start()
        return worker


def stop_all(timeout: float = 10.0) -> None:
    """Stop every worker of this process (tests, shutdown)."""
    with _WORKERS_LOCK:
        workers = list(_WORKERS.values())
        _WORKERS.clear()
    for worker in workers:
        worker.stop(timeout)


# -- operator commands --------------------------------------------------------------------------

def status(runtime: Runtime) -> dict[str, Any]:
    """Provider, generations, coverage (0..1), backlog, last error, worker: for status and doctor."""
    cfg = runtime.config
    spec = target_spec(runtime)
    reason = check_available(spec)
    out: dict[str, Any] = {"enabled": bool(cfg.embeddings_enabled), "provider": spec.label,
                           "available": reason is None, **({"unavailable_reason": reason} if reason else {})}
    try:
        store = vector_store(runtime)
        gens = store.generations()
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"[:300]
        return out
    searched = searched_generation(store)
    target = next((g for g in reversed(gens) if (g.provider, g.model) == (spec.provider, spec.model)
                   and g.state != "retired"), None)
    policy = cfg.embedding_tool_output_policy
    if searched is not None:
        backlog = store.backlog(searched, policy)
        out.update({"generation": searched.generation_id, "generation_label": searched.label,
                    "generation_state": searched.state, "coverage": backlog.coverage, "vectors": backlog.vectors,
                    "eligible_rows": backlog.eligible, "backlog": backlog.pending, "recipe": searched.recipe})
        wanted = recipe(str(cfg.embedding_context), int(cfg.embedding_context_messages))
        if searched.recipe != wanted:
            out["recipe_pending"] = f"messages will be embedded again with {wanted} (now {searched.recipe})"
        coverage(runtime, searched, fresh=True)
    else:
        out.update({"generation": None, "coverage": 0.0, "vectors": 0, "backlog": None})
    if target is not None and searched is not None and target.generation_id != searched.generation_id:
        b = store.backlog(target, policy)
        out["building"] = {"generation": target.generation_id, "label": target.label, "coverage": b.coverage,
                           "backlog": b.pending}
    out["last_error"] = next((g.last_error for g in reversed(gens) if g.last_error), None)
    out["generations"] = [{"generation": g.generation_id, "label": g.label, "state": g.state, "recipe": g.recipe}
                          for g in gens]
    out["vector_bytes"] = store.vector_bytes()
    worker = _WORKERS.get(runtime.db.path)
    out["worker"] = ("running" if worker is not None and worker.is_alive() else "stopped") if cfg.embeddings_enabled \
        else "off"
    if worker is not None and worker.last is not None:
        out["last_pass"] = worker.last.to_dict()
    return out


def warmup(runtime: Runtime) -> dict[str, Any]:
    """Load the provider and embed one text: proves the setup works, reports load time and dimension."""
    if not runtime.config.embeddings_enabled:
        return {"status": "refused", "error": "embeddings are off; set TROVE_EMBEDDINGS_ENABLED=true"}
    spec = target_spec(runtime)
    started = time.perf_counter()
    try:
        provider = get_provider(spec)
        vec = provider.embed(["warm-up"], spend_guard(runtime, spec))
    except Exception as exc:
        return {"status": "error", "provider": spec.label, "error": str(exc)[:300]}
    return {"status": "ok", "provider": spec.label, "dim": int(vec.shape[1]),
            "seconds": round(time.perf_counter() - started, 3)}


def backfill(runtime: Runtime, *, max_seconds: float | None = None,
             progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Index until nothing is pending (or ``max_seconds`` passed), reporting progress per pass."""
    if not runtime.config.embeddings_enabled:
        return {"status": "refused", "error": "embeddings are off; set TROVE_EMBEDDINGS_ENABLED=true"}
    started = time.monotonic()
    totals = {"embedded": 0, "vectors": 0, "rows": 0, "passes": 0}
    busy_since: float | None = None
    while True:
        last = run_pass(runtime, budget_s=5.0, max_items=2048)
        totals["passes"] += 1
        for key in ("embedded", "vectors", "rows"):
            totals[key] += getattr(last, key)
        if progress is not None:
            snap = status(runtime)
            progress({"coverage": snap.get("building", snap).get("coverage", 0.0), **totals})
        if last.status == "busy":  # another process holds the lease: wait a little, then report
            busy_since = busy_since or time.monotonic()
            if time.monotonic() - busy_since > 30:
                break
            time.sleep(0.5)
            continue
        busy_since = None
        if last.status != "partial" or (max_seconds is not None and time.monotonic() - started >= max_seconds):
            break
    snap = status(runtime)
    state = "ok" if last.status in ("done", "idle") else "partial" if last.status in ("partial", "busy") \
        else "error"
    return {"status": state, "last_pass": last.to_dict(), **totals,
            "seconds": round(time.monotonic() - started, 2), "coverage": snap.get("coverage"),
            "backlog": snap.get("backlog"), "generation": snap.get("generation")}


def tty_progress(stream: TextIO | None = None) -> Callable[[dict[str, Any]], None] | None:
    """A one-line progress bar on a terminal; None when ``stream`` is not a TTY."""
    out = stream or sys.stderr
    if not getattr(out, "isatty", lambda: False)():
        return None

    def show(p: dict[str, Any]) -> None:
        frac = float(p.get("coverage") or 0.0)
        bar = "#" * int(frac * 30)
        out.write(f"\rembedding [{bar:<30}] {frac * 100:5.1f}%  {p.get('vectors', 0)} vectors")
        out.flush()
    return show
