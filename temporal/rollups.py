"""Rollup maintenance: bounded passes that build day, week and month rollups.

A pass takes the database lease ``rollups`` (so processes sharing trove.db never build the
same rollup twice), turns leaf summaries written since the last pass into pending periods,
then builds what ``rollup_plan.plan_builds`` picks, one at a time, until its build count or
time budget runs out. A day is written from its leaf summaries, a week from its days, a
month from its weeks and edge days, through the summarizer's escalation ladder, so a build
always ends with text even without a model. The engine schedules passes on a background
thread (``schedule``); operators run them synchronously (``rebuild``). Status is ``status``.

Rollups are per owner scope: a leaf's period rows carry its session's ``sessions.scope`` and a
build reads only that scope's leaves, days and weeks, so a rollup never mixes scopes. Leaves of
unscoped sessions (scope ``""``, visible to themselves alone) get no rollup.
"""
from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .. import leases, tokens
from ..background import PassScheduler
from ..compaction.summarize import MIN_MODEL_INPUT_TOKENS, Summarizer, truncate_deterministic
from ..models import Complete
from ..scope import Visibility
from . import queries
from . import rollup_plan as plan
from .periods import PeriodError, parse_period
from .rollup_plan import PeriodKey
from .rollup_store import RollupStore

if TYPE_CHECKING:
    from ..runtime import Runtime
    from .rollup_plan import RollupState

log = logging.getLogger("hermes_trove.rollups")

LEASE = "rollups"
PASS_INTERVAL_S = 60.0      # a process schedules at most one unforced pass per minute
RETRY_AFTER_S = 900.0       # a failed build is retried after this long
REBUILD_MAX_BUILDS = 50     # a synchronous rebuild builds at most this many; later passes finish
REBUILD_BUDGET_S = 120.0

_DAY_TASK = ("Write the record of {when} (UTC) from the conversation summaries below, so an assistant can later "
             "answer 'what happened that day?'. Keep what was done, decided and learned, with names, identifiers, "
             "numbers and what was left open. Some summaries reach into neighbouring days: keep only what "
             "happened on {when}. Aim for about {{budget}} tokens. End with one line "
             "'Expand for details about: <topics covered>'.")
_AGGREGATE_TASK = ("Write the record of {when} (UTC) from the {parts} records below, so an assistant can later "
                   "answer 'what happened then?'. Keep the arc: what was done and decided, milestones with their "
                   "dates, facts that still hold, and what remains open; drop detail that only mattered within a "
                   "day. Aim for about {{budget}} tokens. End with one line 'Expand for details about: <topics>'.")


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(float(ts), tz=UTC).strftime("%Y-%m-%d %H:%M")


def sync(runtime: Runtime, store: RollupStore | None = None, now: float | None = None) -> int:
    """Pending rows per (owner scope, period) for leaf summaries written since the last sync; returns rows made."""
    store = store or RollupStore(runtime.db)
    spans = store.leaf_spans_after(store.leaf_cursor())
    if not spans:
        return 0
    keys: set[tuple[str, PeriodKey]] = set()
    for scope in {sc for *_, sc in spans if sc}:
        found = plan.periods_for_leaves((e, latest) for _, e, latest, sc in spans if sc == scope)
        keys.update((scope, k) for k in found)
    return store.ensure_periods(sorted(keys), spans[-1][0], now)


def _fit(sources: list[str], max_tokens: int) -> list[str]:
    """Shorten each source to an equal share when together they pass the input bound."""
    if tokens.count("\n\n".join(sources)) <= max_tokens:
        return sources
    share = max(64, max_tokens // max(1, len(sources)))
    return [truncate_deterministic(s, share) for s in sources]


def _record(sources: list[str], max_tokens: int, window: int) -> str:
    """The record a rollup is written from: its sources within ``max_tokens`` and, when the summary
    model's ``window`` is known, within the share of it a summary record may take
    (``Summarizer.record_cap``), so the request and its answer fit that model."""
    cap = min(max_tokens, Summarizer.record_cap(window)) if window > 0 else max_tokens
    text = "\n\n".join(_fit(sources, cap))
    # each source keeps at least 64 tokens: very many of them can still pass the cap together
    return text if tokens.count(text) <= cap else truncate_deterministic(text, cap)


def _inputs(runtime: Runtime, store: RollupStore, key: PeriodKey, scope: str) -> tuple[list[str], list[int], int]:
    """The texts a rollup of ``scope`` is written from (that scope's leaves, or its own smaller
    rollups), the leaf node ids it covers, and their source tokens."""
    if not scope:  # unscoped sessions share no rollup
        return [], [], 0
    if key.kind == "day":
        own = Visibility(mode="conversation", scope=scope)
        rows = [n for n in queries.leaves(runtime.db, key.start, key.end, visible=own)
                if key.start in plan.leaf_days(n.earliest_at or n.created_at,
                                               n.latest_at or n.earliest_at or n.created_at)]
        leaf_texts = [f"[summary node {n.node_id} | {_iso(n.earliest_at or n.created_at)} to "
                 f"{_iso(n.latest_at or n.created_at)} UTC | session {n.session_id}]\n{n.summary}" for n in rows]
        return leaf_texts, [n.node_id for n in rows], sum(n.token_count for n in rows)
    texts: list[str] = []
    node_ids: list[int] = []
    source_tokens = 0
    for part in plan.parts_of(key):
        row = store.by_key(part, scope)
        if row is None or row.status != "ready":
            continue
        texts.append(f"[{part.kind} {part.label}: {part.description}]\n{row.summary}")
        source_tokens += row.token_count
        node_ids.extend(n for n in store.source_node_ids(row.rollup_id) if n not in node_ids)
    return texts, node_ids, source_tokens


def build(runtime: Runtime, store: RollupStore, state: RollupState, summarizer: Summarizer,
          now: float) -> dict[str, Any]:
    """Claim, write and store one rollup; the outcome as a small dict."""
    key = state.key
    out: dict[str, Any] = {"rollup_id": state.rollup_id, "kind": key.kind, "period": key.label, "scope": state.scope}
    generation = store.claim(state, now)
    if generation is None:
        return {**out, "outcome": "skipped", "reason": "changed since planning"}
    calls = input_tokens = 0
    try:
        texts, node_ids, source_tokens = _inputs(runtime, store, key, state.scope)
        if not node_ids:
            store.discard(state.rollup_id, generation)
            return {**out, "outcome": "discarded", "reason": "no leaf summaries left in the period"}
        cfg = runtime.config
        window = summarizer.window(0)  # the summary model's own, when known: the request must fit it
        text = _record(texts, int(cfg.rollup_input_max_tokens), window)
        if tokens.count(text) < MIN_MODEL_INPUT_TOKENS:  # too small to be worth a call: kept as is
            summary, level, model = text, "verbatim", ""
        else:
            if key.kind == "day":
                task = _DAY_TASK.format(when=key.description)
                budget = int(cfg.rollup_daily_target_tokens)
            else:
                parts = "day" if key.kind == "week" else "week and day"
                task = _AGGREGATE_TASK.format(when=key.description, parts=parts)
                budget = int(cfg.rollup_aggregate_target_tokens)
            fitted = summarizer.budget_in(text, budget, window, task)
            res = summarizer.summarize(text, 2, budget if fitted is None else fitted, task=task,
                                       allow_model=fitted is not None)
            summary, level, model = res.text, res.level, res.model
            calls, input_tokens = res.calls, res.input_tokens
        done = store.finish(state.rollup_id, generation, summary=summary, token_count=tokens.count(summary),
                            source_token_count=source_tokens, level=level, model=model, model_calls=calls,
                            input_tokens=input_tokens, node_ids=node_ids, now=now)
    except Exception as exc:  # a failed build is recorded and retried later; the pass goes on
        log.exception("trove: rollup %s %s failed", key.kind, key.label)
        store.fail(state.rollup_id, generation, f"{type(exc).__name__}: {exc}", now, model_calls=calls,
                   input_tokens=input_tokens)
        return {**out, "outcome": "failed", "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    if not done:
        return {**out, "outcome": "superseded", "reason": "a leaf or a rebuild request arrived during the build",
                "model_calls": calls}
    return {**out, "outcome": "ready", "level": level, "sources": len(node_ids), "model_calls": calls,
            "input_tokens": input_tokens}


def _pending(store: RollupStore, now: float, ttl: float, limit: int = 1_000_000) -> list[RollupState]:
    return plan.plan_builds(store.states(), now, limit=limit, claim_ttl=ttl, retry_after=RETRY_AFTER_S)


def run_pass(runtime: Runtime, complete: Complete | None, *, now: float | None = None,
             max_builds: int | None = None, budget_s: float | None = None,
             clock: Callable[[], float] = time.monotonic, force: bool = False) -> dict[str, Any]:
    """One bounded maintenance pass under the lease; ``force`` runs it with rollups off."""
    runtime.settle()  # a server store: this machine's rows ship before the pass reads
    cfg = runtime.config
    if not cfg.temporal_rollups_enabled and not force:
        return {"status": "disabled", "reason": "TROVE_TEMPORAL_ROLLUPS_ENABLED is off"}
    now = time.time() if now is None else now
    max_builds = int(cfg.rollup_builds_per_pass) if max_builds is None else int(max_builds)
    budget_s = cfg.rollup_maintenance_budget_ms / 1000.0 if budget_s is None else float(budget_s)
    ttl = float(cfg.rollup_lease_ttl_seconds)
    store = RollupStore(runtime.db)
    built: list[dict[str, Any]] = []
    summarizer = Summarizer(cfg, complete)

    def step() -> bool:
        todo = _pending(store, now, ttl, limit=1)
        if todo:
            built.append(build(runtime, store, todo[0], summarizer, now))
        return bool(todo)

    with leases.bounded_pass(runtime.db, LEASE, ttl, budget_s=budget_s, max_steps=max_builds, clock=clock) as run:
        if not run.held:
            return run.busy()
        # Under the lease no one else builds: a row an earlier holder left 'building' (killed
        # mid-pass) is rebuilt now, not after its claim ages past the ttl.
        store.abandon_building([s.rollup_id for s in store.states() if s.status == "building"], now)
        synced = sync(runtime, store, now)
        run.loop(step)
        remaining = len(_pending(store, now, ttl))
    return {"status": "ok", "synced_periods": synced, "built": built, "remaining": remaining,
            "seconds": run.seconds()}


# -- the background schedule -----------------------------------------------------------
_PASSES = PassScheduler("trove-rollups")


def schedule(runtime: Runtime, completion: Callable[[], Complete | None], *,
             force: bool = False) -> threading.Thread | None:
    """Start a background pass when rollups are on and none runs in this process.

    Unforced calls (a session starting) run at most once per PASS_INTERVAL_S; a compaction
    forces one, since it just wrote leaves. ``completion`` is asked for the model only
    when a pass starts. The caller's turn never waits for the pass.
    """
    if not runtime.config.temporal_rollups_enabled:
        return None
    return _PASSES.start(runtime.db.path, lambda: functools.partial(_background_pass, runtime, completion()),
                         interval_s=PASS_INTERVAL_S, force=force)


def _background_pass(runtime: Runtime, complete: Complete | None) -> None:
    report = run_pass(runtime, complete)
    if report.get("built"):
        log.info("trove: rollup pass built %d, %d remaining", len(report["built"]), report["remaining"])


# -- operators: status and rebuild --------------------------------------------------------
def status(runtime: Runtime, now: float | None = None, scope: str | None = None) -> dict[str, Any]:
    """Rollup counts per kind and status (over every owner scope, or one), rows per scope,
    model spend, the lease, what waits to be built. For operators: it shows no rollup text."""
    now = time.time() if now is None else now
    store = RollupStore(runtime.db)
    held = leases.holder(runtime.db, LEASE)
    pending = [s for s in _pending(store, now, float(runtime.config.rollup_lease_ttl_seconds))
               if scope is None or s.scope == scope]
    return {"status": "ok", "enabled": bool(runtime.config.temporal_rollups_enabled),
            "scope": "all" if scope is None else scope, "scopes": store.scopes(),
            "kinds": store.counts(scope), "buildable_now": len(pending),
            "next": [f"{s.kind} {s.key.label} [{s.scope}] ({s.status})" for s in pending[:5]],
            "unsynced_leaves": store.unsynced_leaves(), "lease_holder": held.owner if held else None,
            "failures": [{"rollup_id": r.rollup_id, "kind": r.period_kind, "period": r.key.label, "scope": r.scope,
                          "error": r.error, "failed_at": r.failed_at} for r in store.failures(scope=scope)]}


def rebuild(runtime: Runtime, complete: Complete | None, kind: str, when: str | None, *, apply: bool,
            build: bool = True, now: float | None = None, scope: str | None = None) -> dict[str, Any]:
    """Mark rollups for a rebuild and build them in one bounded synchronous pass (``apply``);
    without ``apply`` only say what would be rebuilt. ``when`` is any period form (a date...).
    ``build=False`` (a process without a model) only marks them; Hermes' passes build them.
    ``scope`` narrows it to one owner scope's rollups (every scope when None)."""
    now = time.time() if now is None else now
    kinds = list(plan.KINDS) if kind == "all" else [kind]
    if kind not in (*plan.KINDS, "all"):
        return {"status": "usage", "error": f"unknown rollup kind {kind!r}; use day, week, month or all"}
    start = end = None
    if when:
        try:
            period = parse_period(when, now)
        except PeriodError as exc:
            return {"status": "usage", "error": str(exc)}
        start, end = period.start.timestamp(), period.end.timestamp()
    store = RollupStore(runtime.db)
    scope_text = (f"{', '.join(kinds)} rollups" + (f" overlapping {when}" if when else "")
                  + (f" of scope {scope}" if scope is not None else ""))
    if not apply:
        return {"status": "preview", "would_rebuild": store.count_matching(kinds, start, end, scope),
                "unsynced_leaves": store.unsynced_leaves(), "target": scope_text,
                "hint": "add 'apply' to mark them stale and rebuild now (rollups must be enabled)"}
    if not runtime.config.temporal_rollups_enabled:
        return {"status": "refused", "reason": "TROVE_TEMPORAL_ROLLUPS_ENABLED is off"}
    sync(runtime, store, now)
    marked = store.mark_stale(kinds, start, end, now, scope)
    if not build:
        return {"status": "ok", "target": scope_text, "marked_stale": marked, "built": [],
                "remaining": len(_pending(store, now, float(runtime.config.rollup_lease_ttl_seconds))),
                "note": "no model in this process: the next background pass inside Hermes rebuilds them"}
    report = run_pass(runtime, complete, now=now, max_builds=max(REBUILD_MAX_BUILDS, 1), budget_s=REBUILD_BUDGET_S)
    return {"status": "ok" if report["status"] == "ok" else report["status"], "target": scope_text,
            "marked_stale": marked, **{k: v for k, v in report.items() if k != "status"}}
