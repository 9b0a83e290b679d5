"""Assertion extraction: leased, bounded passes over raw messages, plus operator status,
rebuild and drop.

A pass takes the database lease ``assertions``, reads the next batch of user and assistant
messages past the cursor, asks the model (the injected completion function) for JSON, keeps
only proposals whose quote verifies against the stored row, and stores them with the cursor
move in one transaction that lands only if the cursor did not move meanwhile. The engine
schedules passes on a background thread (``schedule``); ``trove_query_state`` may run one
small catch-up; operators run ``rebuild``. Nothing here runs unless the option is on or the
operator forces it.
"""
from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import leases
from ..background import PassScheduler
from ..models import Complete, host_task_window
from .assertion_store import AssertionStore, BatchLog
from .contract import VERSION, Batch, holds_a_message, parse_answer, plan_batch, render_prompt

if TYPE_CHECKING:
    from ..config import TroveConfig
    from ..runtime import Runtime

log = logging.getLogger("hermes_trove.state")

LEASE = "assertions"
LEASE_TTL_S = 120.0  # renewed per batch; a dead holder's lease is taken over at once
PASS_INTERVAL_S = 20.0       # a process starts at most one unforced background pass this often
MAX_ANSWER_TOKENS = 2000
REBUILD_DEFAULT_LIMIT = 200  # messages one operator rebuild reads unless --limit says otherwise


def run_pass(runtime: Runtime, complete: Complete | None, *, max_batches: int | None = None,
             budget_s: float | None = None, max_messages: int | None = None, force: bool = False,
             clock: Callable[[], float] = time.monotonic,
             progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """One bounded pass under the lease; ``force`` runs it with assertions off (operators)."""
    runtime.settle()  # a server store: this machine's rows ship before the pass reads
    cfg = runtime.config
    if not cfg.assertions_enabled and not force:
        return {"status": "disabled", "reason": "TROVE_ASSERTIONS_ENABLED is off"}
    if complete is None:
        return {"status": "no_model", "reason": "no model in this process: Hermes' background passes extract"}
    store = AssertionStore(runtime.db)
    store.ensure()
    max_batches = int(cfg.assertion_batches_per_pass) if max_batches is None else int(max_batches)
    budget_s = cfg.assertion_pass_budget_ms / 1000.0 if budget_s is None else float(budget_s)
    per_batch = int(cfg.assertion_batch_messages)
    window = extraction_window(cfg)
    totals = {"batches": 0, "messages": 0, "model_calls": 0, "input_chars": 0, "proposed": 0, "stored": 0,
              "unverified": 0, "invalid": 0, "malformed": 0, "errors": 0}

    def step() -> bool:
        room = per_batch if max_messages is None else min(per_batch, max_messages - totals["messages"])
        cursor = store.cursor()
        rows = store.pending(cursor, room, head) if room > 0 and head is not None else []
        batch = plan_batch(rows, window, MAX_ANSWER_TOKENS)  # the rest wait for the next batch
        if rows and not batch.rows:
            too_small.append(window)
        if not batch.rows:
            return False
        outcome = _batch(runtime, store, complete, cursor, batch)
        for k in totals:
            totals[k] += int(outcome.get(k, 0))
        if progress is not None:
            progress(dict(totals, backlog=store.backlog()))
        return not outcome.get("stop")

    too_small: list[int] = []
    with leases.bounded_pass(runtime.db, LEASE, LEASE_TTL_S, budget_s=budget_s, max_steps=max_batches,
                             clock=clock) as run:
        if not run.held:
            return run.busy()
        head = store.settled_head()  # None: a message writer is mid-commit; the next pass reads on
        run.loop(step)
    if too_small:  # nothing read, nothing skipped: the messages wait for a larger window
        _warn_once(runtime.db.path, window)
        return {"status": "window_too_small", **totals, "backlog": store.backlog(), "seconds": run.seconds(),
                "reason": f"the auxiliary model's {window}-token window cannot hold the extraction prompt, an"
                          f" answer and a message; raise it ({window_setting(cfg)}) to extract"}
    return {"status": "ok", **totals, "backlog": store.backlog(), "seconds": run.seconds()}


def extraction_window(cfg: TroveConfig) -> int:
    """The window an extraction request must fit: the smaller of the auxiliary windows the operator
    gave, TROVE_SUMMARY_CONTEXT_LENGTH and the host's ``auxiliary.compression.context_length``,
    each when set (0 = neither: unbounded). A model named by TROVE_ASSERTION_EXTRACTION_MODEL has no
    window of its own to read, so it is bounded the same way. TROVE_SUMMARY_CONTEXT_LENGTH is left
    out when it describes another model: TROVE_SUMMARY_MODEL names one while extraction takes the
    host's auxiliary default."""
    known = [w for _, w in _windows(cfg) if w > 0]
    return min(known) if known else 0


def _windows(cfg: TroveConfig) -> list[tuple[str, int]]:
    """Each setting that may bound extraction and the window it gives (0 = unset)."""
    other_model = bool(cfg.summary_model) and not cfg.assertion_extraction_model
    own = 0 if other_model else int(cfg.summary_context_length or 0)
    return [("TROVE_SUMMARY_CONTEXT_LENGTH", own),
            ("the host's auxiliary.compression.context_length", host_task_window(home=cfg.hermes_home))]


def window_setting(cfg: TroveConfig) -> str:
    """The setting to raise for a larger extraction window: the one giving the smallest window (both
    when they give the same); TROVE_SUMMARY_CONTEXT_LENGTH only while it bounds extraction."""
    given = [(name, w) for name, w in _windows(cfg) if w > 0]
    least = min((w for _, w in given), default=0)
    return " or ".join(name for name, w in given if w == least) or "the host's auxiliary.compression.context_length"


@functools.cache  # once per store and window
def _warn_once(path: str, window: int) -> None:
    log.warning("trove: assertion extraction waits: a %d-token auxiliary window cannot hold the prompt,"
                " an answer and a message", window)


def _batch(runtime: Runtime, store: AssertionStore, complete: Complete, cursor: int, batch: Batch) -> dict[str, Any]:
    cfg = runtime.config
    rows = batch.rows
    shown = dict(zip((r.store_id for r in rows), batch.shown, strict=True))
    keep = [r for r in rows if not runtime.filters.ignored_by(r.session_id, r.platform)]
    first, last = rows[0].store_id, rows[-1].store_id
    if not keep:  # only ignored sessions: move past them without a model call
        done = store.commit_batch(cursor, last, [], BatchLog(first, last, 0, 0, 0, 0, 0, 0, 0, "skipped"), VERSION)
        return {"batches": 1, "stop": done is None}
    messages, chars = render_prompt(keep, [shown[r.store_id] for r in keep])
    cuts = Batch(tuple(keep), tuple(shown[r.store_id] for r in keep), batch.answer_tokens).cuts()
    try:
        answer = complete(messages, str(cfg.assertion_extraction_model or ""), float(cfg.assertion_timeout_seconds),
                          batch.answer_tokens)
    except Exception as exc:  # the batch stays pending; the next pass retries it
        log.warning("trove: assertion extraction call failed: %s", exc)
        store.log_failure(BatchLog(first, last, len(keep), 1, chars, 0, 0, 0, 0, "model_error",
                                   f"{type(exc).__name__}: {str(exc)[:300]}"))
        return {"batches": 1, "model_calls": 1, "input_chars": chars, "errors": 1, "stop": True}
    parsed = parse_answer(answer, {r.store_id: r for r in keep}, shown)
    outcome = "malformed" if parsed.malformed else "ok"
    # a malformed answer's reason first (status shows it; the log keeps 500 characters), then what the
    # batch could not show (the rest of a message past it is never read), then the quotes refused
    notes = [parsed.malformed] + cuts if parsed.malformed else cuts + list(parsed.reasons[:3])
    error = "; ".join(notes) if notes else None
    log_row = BatchLog(first, last, len(keep), 1, chars, parsed.proposed, 0, parsed.unverified, parsed.invalid,
                       outcome, error[:500] if error else None)
    stored = store.commit_batch(cursor, last, parsed.candidates, log_row, VERSION)
    if stored is None:  # another process moved the cursor: its batch stands, this one is dropped
        return {"batches": 1, "model_calls": 1, "input_chars": chars, "stop": True}
    return {"batches": 1, "messages": len(keep), "model_calls": 1, "input_chars": chars, "proposed": parsed.proposed,
            "stored": stored, "unverified": parsed.unverified, "invalid": parsed.invalid,
            "malformed": int(parsed.malformed is not None)}


# -- the background schedule -----------------------------------------------------------
_PASSES = PassScheduler("trove-assertions")


def schedule(runtime: Runtime, completion: Callable[[], Complete | None]) -> threading.Thread | None:
    """Start a background pass when assertions are on, none runs here and the interval passed.
    The caller's turn never waits for it; ``completion`` is asked for the model only then."""
    if not runtime.config.assertions_enabled:
        return None

    def prepare() -> Callable[[], None] | None:
        complete = completion()
        return None if complete is None else functools.partial(_background, runtime, complete)

    return _PASSES.start(runtime.db.path, prepare, interval_s=PASS_INTERVAL_S)


def _background(runtime: Runtime, complete: Complete) -> None:
    report = run_pass(runtime, complete)
    if report.get("stored"):
        log.info("trove: assertion pass stored %d, backlog %d", report["stored"], report.get("backlog", 0))


# -- operators -------------------------------------------------------------------------
def status(runtime: Runtime) -> dict[str, Any]:
    """What is enabled, table sizes, extraction backlog, model spend and recent errors."""
    cfg = runtime.config
    store = AssertionStore(runtime.db)
    window = extraction_window(cfg)
    out: dict[str, Any] = {"assertions_enabled": bool(cfg.assertions_enabled), "extraction_window": window,
                           "window_holds_a_message": holds_a_message(window, MAX_ANSWER_TOKENS),
                           "adaptive_retrieval_enabled": bool(cfg.adaptive_retrieval_enabled),
                           "preanswer_evidence_enabled": bool(cfg.preanswer_evidence_enabled),
                           "tables_present": store.present()}
    if not out["tables_present"]:
        out["note"] = (f"no state tables in this {'file' if runtime.db.kind == 'sqlite' else 'store'}"
                       " (they are created when an option is turned on)")
        return out
    held = leases.holder(runtime.db, LEASE)
    out.update(tables=store.sizes(), relations=store.relation_counts(), cursor=store.cursor(),
               backlog=store.backlog(), spend=store.spend(), recent_errors=store.errors(),
               lease_holder=held.owner if held else None)
    return out


def rebuild(runtime: Runtime, complete: Complete | None, *, apply: bool, limit: int | None = None,
            reset: bool = False, progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Preview (default) or run extraction over the backlog now, at most ``limit`` messages.
    ``reset`` forgets every assertion first and starts again from the first message."""
    store = AssertionStore(runtime.db)
    limit = REBUILD_DEFAULT_LIMIT if limit is None else max(1, int(limit))
    present = store.present()
    backlog = store.backlog(0 if reset or not present else store.cursor())
    per_batch = int(runtime.config.assertion_batch_messages)
    todo = min(backlog, limit)
    if not apply:
        return {"status": "preview", "backlog": backlog, "would_read": todo,
                "model_calls_at_most": -(-todo // per_batch), "reset": reset,
                "hint": "add --apply to extract now (a model must be available in this process)"}
    if complete is None:
        return {"status": "refused", "reason": "no model in this process: run it inside Hermes (/trove assertions"
                                               " rebuild --apply) or let the background passes extract"}
    store.ensure()
    forgotten = store.reset() if reset else 0
    report = run_pass(runtime, complete, max_batches=10_000, budget_s=600.0, max_messages=limit, force=True,
                      progress=progress)
    return {**report, "forgotten": forgotten}


def drop(runtime: Runtime, *, apply: bool) -> dict[str, Any]:
    """Turn-off helper: drop every state table and its ledger entries (preview without ``apply``).
    A SQLite file is backed up first; a PostgreSQL store is the server's to back up (no file copy)."""
    store = AssertionStore(runtime.db)
    on_file = runtime.db.kind == "sqlite"
    if not store.present():
        return {"status": "ok", "dropped": [], "note": f"no state tables in this {'file' if on_file else 'store'}"}
    if not apply:
        return {"status": "preview", "would_drop": store.sizes(),
                "hint": "turn the options off first, then add --apply "
                        + ("(a backup is taken first)" if on_file else "(no file backup of a PostgreSQL store:"
                                                                           " pg_dump the schema first to keep one)")}
    if runtime.config.assertions_enabled or runtime.config.adaptive_retrieval_enabled:
        return {"status": "refused", "reason": "turn TROVE_ASSERTIONS_ENABLED and TROVE_ADAPTIVE_RETRIEVAL_ENABLED"
                                               " off first, or the next turn creates the tables again"}
    if not on_file:
        return {"status": "ok", "dropped": store.drop(), "backup": None,
                "note": "a PostgreSQL store: no file backup taken (the server's own backups cover it)"}
    from ..backups import take_backup

    backup = take_backup(runtime)
    return {"status": "ok", "dropped": store.drop(), "backup": vars(backup)}
