"""Doctor: read-only health checks over the database, the indexes, lineage and config.

``run_doctor`` returns ``{overall, checks[{check, status, detail}], guidance[]}``. Each check is
isolated (one failing check never hides the others) and changes no row; repairs live behind
``/trove doctor repair apply``; the SQL the checks need lives in ``queries``.
"""
from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import subsystems
from ..compaction.summarize import window_warnings
from ..compaction.window import TRIGGER_CEILING
from ..config import reserve_floor_cap, stranded_store
from ..dag import SummaryDAG
from ..db import meta_value
from ..outbox import outbox_path, unshipped
from ..payloads import health as payload_health
from ..payloads.redact import describe_config
from ..runtime import store_fix, store_reason
from ..store import count_empty_sessions
from ..subsystems import Check
from ..toolkit import iso
from ..version import install_hint
from . import install, outbox_ops, queries
from .maintenance import (
    FTS_TABLES,
    META_FAILED,
    REPAIR_HINT,
    check_structure,
    diagnose_background,
    fts_integrity,
    index_sync,
    search_indexes,
)
from .status import UNBOUND, file_size, health_section, pressure_section

if TYPE_CHECKING:
    from ..runtime import Runtime

WAL_WARN_BYTES = 256 * 1024 * 1024
Shared = dict[str, Any]  # facts one check leaves for a later one (structure, snapshot, payload report)


def retry_note(fix: str) -> str:
    """``fix`` with what happens meanwhile: trove retries by itself, unless the fix is a new build."""
    return fix if "restart Hermes" in fix else fix + "; trove retries by itself and resumes (no restart needed)"


def _check_store(runtime: Runtime, conn: sqlite3.Connection, ctx: Shared) -> Check:
    """Does the store take writes? A live engine's verdict, else the file system's."""
    health = ctx.get("health") or health_section(runtime)
    if health["usable"]:
        return "pass", f"store usable: {runtime.db.path}", ""
    return "fail", health["state"], retry_note(health["fix"])


def _check_integrity(runtime: Runtime, conn: sqlite3.Connection, ctx: Shared) -> Check:
    rows = queries.quick_check(conn)
    if rows == ["ok"]:
        return "pass", "quick_check ok", ""
    return "fail", "; ".join(rows[:5]), \
        "the file is damaged: stop writers, take /trove backup, restore a known-good backup"


def _check_journal(runtime: Runtime, conn: sqlite3.Connection, ctx: Shared) -> Check:
    mode = queries.journal_mode(conn)
    if mode == "wal":
        return "pass", "journal_mode=wal", ""
    return "warn", f"journal_mode={mode} (expected wal)", "another tool switched the journal mode; restart Hermes"


def _check_sizes(runtime: Runtime, conn: sqlite3.Connection, ctx: Shared) -> Check:
    path = runtime.db.path
    db, wal = file_size(path) or 0, file_size(path + "-wal") or 0
    detail = f"database {db} bytes, WAL {wal} bytes"
    if wal > max(WAL_WARN_BYTES, db):
        return "warn", detail + " (WAL larger than the database)", \
            "a long-lived reader is blocking checkpoints; close idle Hermes processes"
    return "pass", detail, ""


def _check_tables(runtime: Runtime, conn: sqlite3.Connection, ctx: Shared) -> Check:
    s = check_structure(conn)
    ctx["structure"] = s
    if s.ok:
        search = "FTS tables" if runtime.db.kind == "sqlite" else "search side tables, indexes"
        return "pass", f"core tables, {search} and triggers present", ""
    missing = list(s.missing_tables) + list(s.missing_fts) + [f"trigger {t}" for t in s.missing_triggers] \
        + [f"index {i}" for i in s.missing_indexes] + [f"view {v}" for v in s.missing_views]
    status = "fail" if s.missing_tables or s.missing_fts or s.missing_views else "warn"
    return status, "missing: " + ", ".join(missing), f"run {REPAIR_HINT} (backup-first)"


def _check_fts_sync(runtime: Runtime, conn: sqlite3.Connection, ctx: Shared) -> Check:
    missing = ctx["structure"].missing_fts if "structure" in ctx else ()
    parts, bad = [], False
    for fts in (name for name in search_indexes(conn) if name not in missing):
        s = index_sync(conn, fts)
        bad = bad or not s.ok
        parts.append(f"{fts}: {s.indexed_rows}/{s.content_rows} indexed, {s.unindexed} unindexed, {s.ghosts} ghost")
    return ("warn" if bad else "pass"), "; ".join(parts) or "no FTS tables", \
        (f"search disagrees with stored rows; run {REPAIR_HINT}" if bad else "")


def _check_fts_integrity(runtime: Runtime, conn: sqlite3.Connection, ctx: Shared) -> Check:
    missing = ctx["structure"].missing_fts if "structure" in ctx else ()
    errors = {fts: err for fts in FTS_TABLES if fts not in missing and (err := fts_integrity(conn, fts))}
    recorded = meta_value(conn, META_FAILED)
    if errors:
        return "fail", "; ".join(f"{k}: {v}" for k, v in errors.items()), f"run {REPAIR_HINT} (backup-first)"
    if recorded:
        return "pass", "integrity-check ok now (an earlier startup check recorded a failure)", ""
    return "pass", "integrity-check ok for " + ", ".join(t for t in FTS_TABLES if t not in missing), ""


def _check_lineage(runtime: Runtime, conn: sqlite3.Connection, ctx: Shared) -> Check:
    bad = {k: v for k, v in queries.lineage_orphans(conn).items() if v}
    multi = SummaryDAG.multi_parent_nodes(conn)
    overlap = SummaryDAG.overlapping_frontier(conn)
    if multi or overlap:
        parts = [f"{len(multi)} nodes with more than one parent in their session"] if multi else []
        parts += [f"session {sid}: {n} messages covered by more than one frontier node"
                  for sid, n in sorted(overlap.items())[:5]]
        parts += [f"{k}: {v}" for k, v in bad.items()]
        return "fail", "; ".join(parts), \
            f"two processes condensed the same nodes: run {REPAIR_HINT} (backup-first; raw messages are kept)"
    if not bad:
        return "pass", "every summary node reaches its sources", ""
    return "warn", ", ".join(f"{k}: {v}" for k, v in bad.items()), \
        "inspect: some summaries point at rows that were deleted outside trove; raw search still works"


def _check_damaged_rows(runtime: Runtime, conn: sqlite3.Connection, ctx: Shared) -> Check:
    found = queries.damaged_rows(conn)
    if not found:
        return "pass", "every message and summary row reads as trove wrote it", ""
    detail = "; ".join(f"{kind}: {n} (ids {', '.join(map(str, ids))}{', ...' if n > len(ids) else ''})"
                       for kind, (n, ids) in found.items())
    lost = "messages whose stored text is damaged" in found
    return ("fail" if lost else "warn"), detail, \
        "rows changed outside trove or by the disk; the rest reads normally. " \
        + ("Restore the file from a backup taken before the damage" if lost else "Reads treat them as unknown")


def _check_lifecycle(runtime: Runtime, conn: sqlite3.Connection, ctx: Shared) -> Check:
    rows, beyond = queries.lifecycle_counts(conn)
    empty = count_empty_sessions(conn)
    detail = f"{rows} session rows, {empty} empty, {beyond} with a frontier beyond their last message"
    if beyond:
        return "warn", detail, "inspect: a frontier past the last stored message hides nothing but suggests lost rows"
    if empty > int(runtime.config.empty_lifecycle_gc_threshold) and not runtime.config.empty_lifecycle_gc_enabled:
        return "warn", detail, \
            "many empty lifecycle rows: enable TROVE_EMPTY_LIFECYCLE_GC_ENABLED or /trove doctor clean"
    return "pass", detail, ""


def _check_config(runtime: Runtime, conn: sqlite3.Connection, ctx: Shared) -> Check:
    cfg, issues = runtime.config, list(runtime.config.warnings)
    # A value that was refused (and replaced by its default) is a failure, not a hint.
    refused = list(issues)
    snap = ctx.get("snapshot") or {}
    window = int(snap.get("context_length") or 0)
    if window and cfg.reserve_tokens_floor and reserve_floor_cap(cfg, window) is None:
        refused.append(f"TROVE_RESERVE_TOKENS_FLOOR={cfg.reserve_tokens_floor} leaves under a quarter of the"
                       f" {window}-token window; it is ignored")
        issues.append(refused[-1])
    if int(cfg.fresh_tail_count) < 2:
        issues.append(f"TROVE_FRESH_TAIL_COUNT={cfg.fresh_tail_count}: a tail under 2 loses the live exchange")
    if float(cfg.context_threshold) > 0.9:
        issues.append(f"TROVE_CONTEXT_THRESHOLD={cfg.context_threshold}: above 0.9 leaves no room to compact")
    if int(cfg.incremental_max_depth) == 0:
        issues.append("TROVE_INCREMENTAL_MAX_DEPTH=0: leaves never condense, the summary prefix grows")
    for p in runtime.filters.invalid_patterns:
        issues.append(f"TROVE_IGNORE_MESSAGE_PATTERNS: invalid pattern {p!r} dropped")
    if runtime.filters.message_filter_state == "disabled":
        issues.append("message patterns set but the 'regex' package is missing: message filtering is off"
                      f" ({install_hint('regex')})")
    if cfg.doctor_clean_apply_enabled:
        issues.append("TROVE_DOCTOR_CLEAN_APPLY_ENABLED=true: destructive clean apply is allowed")
    issues.extend(window_warnings(cfg))
    stranded = stranded_store(cfg)
    issues += [stranded] if stranded else []
    if not issues:
        return "pass", "configuration values look sane", ""
    status = "fail" if refused else "warn"
    return status, "; ".join(issues), "inspect: fix the named TROVE_* variables and restart Hermes"


def _check_pressure(runtime: Runtime, conn: sqlite3.Connection, ctx: Shared) -> Check:
    snap = ctx.get("snapshot")
    if snap is None:
        return "pass", f"{UNBOUND}: no live engine in this process", ""
    pressure = pressure_section(snap)
    threshold, last = pressure["threshold_tokens"], pressure["last_prompt_tokens"]
    if not pressure["measured"]:  # right after a compaction: no ratio, the overhead still tells
        detail = f"session {snap.get('session_id')}: {pressure['note']}"
    elif pressure["ratio"] is None:
        return "pass", f"session {snap.get('session_id')}: threshold not initialized yet", ""
    else:
        ratio = last / threshold
        detail = f"session {snap.get('session_id')}: {last}/{threshold} tokens ({ratio:.0%} of threshold)"
        if ratio > 1.5:
            return "warn", detail, "compaction is not keeping up: check last_compression_status in /trove status"
    overhead, window = int(snap.get("overhead_tokens") or 0), int(snap.get("context_length") or 0)
    if window and overhead >= window * TRIGGER_CEILING:
        return "warn", (f"{detail}; the host's system prompt and tool schemas take {overhead} of the "
                        f"{window}-token window, leaving the conversation no room"), \
            "enable fewer toolsets (hermes tools) or use a model with a larger window"
    return "pass", detail, ""


def _check_largest(runtime: Runtime, conn: sqlite3.Connection, ctx: Shared) -> Check:
    return "pass", "; ".join(f"#{r.store_id} {r.role} in {r.session_id}: {r.token_count} tokens, {r.chars} chars"
                             for r in queries.largest_messages(conn, 5)) or "no messages stored", ""


def _check_payloads(runtime: Runtime, conn: sqlite3.Connection, ctx: Shared) -> Check:
    result = payload_health.doctor_report(runtime)
    ctx["payload_report"] = result
    pdir = result.get("payload_dir") or {}
    inline, missing = int(result.get("suspicious_inline_rows") or 0), int(pdir.get("missing_refs") or 0)
    home = f"payload table {pdir.get('files', 0)} rows" if pdir.get("table") else \
        f"payload dir {pdir.get('files', 0)} files"
    detail = (f"{inline} suspicious inline payload rows; {home},"
              f" {pdir.get('bytes', 0)} bytes; {missing} missing and {pdir.get('unreadable_refs', 0)} unreadable refs")
    if pdir.get("unreferenced_files"):  # reported, not a problem: sessions deleted since leave theirs
        detail += f"; {pdir['unreferenced_files']} unreferenced (their sessions are gone)"
    if pdir.get("not_a_directory"):
        return "fail", f"payload directory {pdir.get('path')} is a file, not a directory: every sidecar write fails", \
            ("move that file away or set TROVE_LARGE_OUTPUT_EXTERNALIZATION_PATH to a directory;"
             " large payloads stay inline until then")
    if pdir.get("stale_temp_files"):
        detail += f"; {pdir['stale_temp_files']} stale temp files"
        return "warn", detail, "temp files left by a crashed writer: restart Hermes (startup removes them)"
    if missing or pdir.get("unreadable_refs"):
        return "warn", detail, "inspect: externalized payloads are missing or damaged; their rows keep only the stub"
    if inline and pdir.get("table"):
        return "warn", detail, ("inspect: these rows predate the storage guard or the server refused their payload"
                              " (the log says why); they stay whole and readable inline")
    if inline:
        return "warn", detail, ("inspect: these rows predate the storage guard or their sidecar write failed; run"
                              " scripts/backfill_externalized_tool_outputs.py and check the payload dir is writable")
    return "pass", detail, ""


def _check_plugin(runtime: Runtime, conn: sqlite3.Connection, ctx: Shared) -> Check:
    ident = install.identity_section(runtime, in_host=ctx.get("snapshot") is not None)
    ctx["plugin"] = ident
    commit = ident.get("plugin_git_commit")
    git = f", git {str(commit)[:12]}{' dirty' if ident.get('plugin_git_dirty') else ''}" if commit else ""
    detail = (f"{ident['plugin_version']} loaded from {ident['plugin_path']} ({ident['route']}{git});"
              f" host: {ident['host']['verdict']}; skill in index: {ident['skill']['in_index']}")
    before, after, fixes = [], [], []  # every problem found is named: one may not hide another
    if ident.get("warning"):
        before.append(ident["warning"])
        fixes.append(ident["advice"])
    if str(ident["host"]["verdict"]).startswith("fallback"):
        fixes.append("run `hermes config set context.engine trove` and restart Hermes")
    if not ident["host"].get("compression_enabled", True):
        after.append("compression.enabled is off in config.yaml, so Hermes asks no engine to compact on its own"
                     " (no automatic trigger; the CLI also refuses /compress) and the prompt grows with the"
                     " conversation")
        fixes.append("run `hermes config set compression.enabled true` and restart Hermes")
    if not fixes:
        return "pass", detail, ""
    return "warn", "; ".join([*before, detail, *after]), "; ".join(dict.fromkeys(f for f in fixes if f))


def _check_scopes(runtime: Runtime, conn: sqlite3.Connection, ctx: Shared) -> Check:
    total, ids = queries.unscoped_sessions(conn)
    mode = runtime.config.memory_scope
    if not total:
        return "pass", f"every session has an owner scope (TROVE_MEMORY_SCOPE={mode})", ""
    return "warn", f"{total} session(s) without an owner scope, e.g. {', '.join(ids)}", \
        "they were written by a gateway without a session key; other sessions do not see them unless " \
        "TROVE_MEMORY_SCOPE=profile"


def _check_background(runtime: Runtime, conn: sqlite3.Connection, ctx: Shared) -> Check:
    found = diagnose_background(runtime.db)
    stale, stuck = found["stale_leases"], found["stuck_building_rollups"]
    if not stale and not stuck:
        return "pass", "no stale lease, no rollup stuck building", ""
    parts = ([f"{len(stale)} stale lease(s): " + ", ".join(s["name"] for s in stale)] if stale else []) \
        + ([f"{len(stuck)} rollup(s) stuck building with no live builder"] if stuck else [])
    return "warn", "; ".join(parts), f"a process died mid-pass; run {REPAIR_HINT} (backup-first) to clear them"


CHECKS: tuple[tuple[str, Callable[[Runtime, sqlite3.Connection, Shared], Check]], ...] = (
    ("store_usable", _check_store),
    ("database_integrity", _check_integrity),
    ("journal_mode", _check_journal),
    ("storage_size", _check_sizes),
    ("schema_core_tables", _check_tables),
    ("fts_index_sync", _check_fts_sync),
    ("fts_integrity", _check_fts_integrity),
    ("orphaned_lineage", _check_lineage),
    ("damaged_rows", _check_damaged_rows),
    ("lifecycle", _check_lifecycle),
    ("config_validation", _check_config),
    ("context_pressure", _check_pressure),
    ("largest_rows", _check_largest),
    ("payload_storage", _check_payloads),
    ("plugin_identity", _check_plugin),
    ("session_scopes", _check_scopes),
    ("background_work", _check_background),
)


def _check_outbox(runtime: Runtime, conn: sqlite3.Connection, ctx: Shared) -> Check:
    shipper = getattr(runtime.store, "shipper", None)
    if shipper is None:
        return _check_left_outbox(runtime)
    state = shipper.status()
    aside = state["set_aside"]
    if aside["rows"]:  # refused for their own values: nothing ships them by itself
        waiting = f"; {state['pending']} more wait to ship" if state["pending"] else ""
        return "warn", outbox_ops.described(aside) + waiting, outbox_ops.fix_text(state["outbox"])
    if not state["pending"]:
        return "pass", f"outbox {state['outbox']} is empty: the server has every message written here", ""
    oldest = state["oldest_pending_at"]
    waiting = (f"{state['pending']} message(s) written here wait in {state['outbox']}, the oldest since"
               f" {iso(oldest)} ({max(0, int(time.time() - oldest))} s)")
    if not state["reachable"]:
        return "warn", f"{waiting}; the server cannot take them ({state['last_error']})", \
            (f"they exist only on this machine until the server takes them: keep {state['outbox']}; bring the server"
             " back or fix TROVE_DATABASE_URL, and the next turn or `hermes trove status` ships them")
    return "warn", waiting, "they ship in the background after each turn; a steady backlog means the server is slow"


def _check_left_outbox(runtime: Runtime) -> Check:
    """A SQLite store with an outbox beside it: turns written while ``TROVE_DATABASE_URL`` was set, and
    not shipped before it was removed, are in that file only; nothing reads or ships them now."""
    found = left_outbox(runtime.db.path)
    return ("warn", *found) if found else ("pass", "the SQLite file is the store (no outbox waiting)", "")


def left_outbox(db_path: str) -> tuple[str, str] | None:
    """(what waits, what to do) for an outbox beside the SQLite file ``db_path`` holding unshipped turns
    (or one that would not read); None when there is none. The file need not exist."""
    path = outbox_path(Path(db_path).parent)
    try:
        count, oldest, aside = unshipped(path)
    except Exception as exc:  # a damaged file: say so, it may still hold turns
        return (f"outbox {path} beside this store could not be read ({type(exc).__name__}: {exc})",
                "keep the file: it may hold turns written while TROVE_DATABASE_URL was set")
    if not count:
        return None
    refused = f" ({aside} of them set aside: the server refused their values)" if aside else ""
    retry = ("; the set-aside ones only through `hermes trove doctor outbox` (lists them) and `doctor outbox"
             " retry` once repaired, with the URL set") if aside else ""
    return (f"{count} message(s) written while TROVE_DATABASE_URL was set, the oldest at {iso(oldest)}, were"
            f" never shipped and wait in {path}{refused}; this SQLite store does not hold them",
            f"keep {path}: set TROVE_DATABASE_URL to that server again and the next turn or `hermes trove status`"
            f" ships them{retry} (docs/fleet.md)")


# Checks that read SQLite's own structures (pragmas, the file, FTS5's integrity-check): not run on a
# server. There the schema check reads the catalog, the index check pgtext's side tables, and the
# payload check the server's payloads table; the outbox check is added.
SQLITE_ONLY = frozenset({"database_integrity", "journal_mode", "storage_size", "fts_integrity"})


def all_checks(runtime: Runtime | None = None) -> tuple[tuple[str, Callable[[Runtime, sqlite3.Connection, Shared],
                                                                          Check]], ...]:
    """The core checks, then each subsystem's; on a PostgreSQL store the file checks give way to the outbox's."""
    checks = CHECKS + tuple(check for row in subsystems.SUBSYSTEMS for check in row.checks)
    if runtime is not None and runtime.db.kind != "sqlite":
        checks = tuple(c for c in checks if c[0] not in SQLITE_ONLY)
    return checks + (("outbox", _check_outbox),)


def run_doctor(runtime: Runtime | None, snapshot: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Run every check; never raises. ``overall`` is the worst status seen."""
    if runtime is None:
        return {"overall": "unhealthy", "checks": [{"check": "runtime", "status": "fail", "detail": "no runtime"}],
                "guidance": []}
    checks, guidance = [], []
    ctx: Shared = {"snapshot": dict(snapshot) if snapshot is not None else None,
                   "health": health_section(runtime) if runtime.db.kind != "sqlite" else None}  # one bounded probe
    try:
        if ctx["health"] and not ctx["health"]["usable"]:
            raise ConnectionError(ctx["health"]["reason"])  # no read waits on that server again
        conn = queries.settled(runtime)  # a server store: this process's outbox rows count too
    except Exception as exc:
        return _unopenable(runtime, exc, ctx["health"])
    for name, fn in all_checks(runtime):
        try:
            status, detail, advice = fn(runtime, conn, ctx)
        except Exception as exc:
            status, detail, advice = "fail", f"check crashed: {type(exc).__name__}: {exc}", "inspect"
        checks.append({"check": name, "status": status, "detail": detail})
        if advice and status != "pass":
            guidance.append(f"{name}: {advice}")
    worst = {c["status"] for c in checks}
    overall = "unhealthy" if "fail" in worst else "warnings" if "warn" in worst else "healthy"
    session = snapshot.get("session_id") if snapshot is not None else UNBOUND
    out = {"overall": overall, "database_path": runtime.db.path, "session_id": session,
           "checks": checks, "guidance": guidance}
    if "payload_report" in ctx:
        out["payloads"] = ctx["payload_report"]
    out["sensitive_patterns"] = describe_config(runtime.config)
    if "plugin" in ctx:
        out["plugin"] = ctx["plugin"]
    return out


def _unopenable(runtime: Runtime, exc: Exception, health: dict[str, Any] | None = None) -> dict[str, Any]:
    """The report when the store does not even open: what failed, the store's state, the fix, and
    (a server) what waits in this machine's outbox."""
    health = health or health_section(runtime)
    fix = health.get("fix") or store_fix(runtime.db.path, store_reason(exc) or str(exc))
    state = health["state"] if not health["usable"] else f"unusable: {store_reason(exc) or exc}"
    checks = [{"check": "database_open", "status": "fail", "detail": f"{type(exc).__name__}: {exc}"},
              {"check": "store_usable", "status": "fail", "detail": state}]
    guidance = [f"database_open: {retry_note(fix)}"]
    if runtime.db.kind != "sqlite":
        status, detail, advice = _check_outbox(runtime, None, {})  # type: ignore[arg-type]
        checks.append({"check": "outbox", "status": status, "detail": detail})
        guidance += [f"outbox: {advice}"] if advice else []
    return {"overall": "unhealthy", "database_path": runtime.db.path, "store_health": health,
            "checks": checks, "guidance": guidance}
