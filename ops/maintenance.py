"""Database upkeep: schema and FTS health checks, FTS repair, startup checks, lifecycle GC, and the
background work a crashed process left (stale leases, rollups stuck 'building').

The statements are ``db``'s schema and FTS primitives (a PostgreSQL store: ``server_schema``) and
``store``'s session-row methods. Checks are read-only; repair takes a backup first (a server
store's repair needs the operator's own) and works in one short transaction.
"""
from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from .. import leases
from ..backend import on_server, storage_error
from ..backups import PARTIAL, FileBackupUnavailable, backup_dir, backup_fields, backup_first, remove_dead_leftovers
from ..dag import SummaryDAG
from ..db import (
    Database,
    FtsSync,
    blank_schema,
    create_index,
    create_trigger,
    create_view,
    fts_integrity,
    fts_sync,
    meta_value,
    rebuild_fts,
    recreate_fts,
    schema_objects,
)
from ..migrations import FTS_TABLES
from ..payloads.sidecar import clean_stale_temp
from ..temporal.rollup_store import RollupStore
from ..temporal.rollups import LEASE as ROLLUP_LEASE
from . import queries, server_schema

if TYPE_CHECKING:
    from ..runtime import Runtime

log = logging.getLogger("hermes_trove.maintenance")

META_CHECKED_AT = "fts_integrity_checked_at"
META_FAILED = "fts_integrity_failed"
REPAIR_HINT = "/trove doctor repair apply"


# -- structural checks (cheap, always safe) ----------------------------------------

@dataclass(frozen=True)
class Structure:
    """Which expected schema objects are missing."""

    missing_tables: tuple[str, ...] = ()
    missing_fts: tuple[str, ...] = ()
    missing_triggers: tuple[str, ...] = ()
    missing_indexes: tuple[str, ...] = ()
    missing_views: tuple[str, ...] = ()  # the full-text index reads its rows through one

    @property
    def ok(self) -> bool:
        return not self.missing

    @property
    def missing(self) -> tuple[str, ...]:
        return (self.missing_tables + self.missing_fts + self.missing_triggers + self.missing_indexes
                + self.missing_views)


def check_structure(conn: sqlite3.Connection) -> Structure:
    if on_server(conn):  # a server's catalog against its migrations; the search side tables count as FTS
        gone = server_schema.missing(conn)
        return Structure(gone["tables"], gone["search"], gone["triggers"], gone["indexes"])
    expected, present = blank_schema(), schema_objects(conn)
    return Structure(*(tuple(sorted(set(getattr(expected, kind)) - set(getattr(present, kind))))
                       for kind in ("tables", "fts", "triggers", "indexes", "views")))


# -- the full-text indexes of either store ------------------------------------------

def search_indexes(conn: sqlite3.Connection) -> dict[str, tuple[str, str]]:
    """Index name -> (base table, id column): FTS5 tables on SQLite, ``pgtext``'s side tables on a server."""
    return server_schema.SEARCH_TABLES if on_server(conn) else FTS_TABLES


def index_sync(conn: sqlite3.Connection, name: str, exact: bool = True) -> FtsSync:
    return server_schema.search_sync(conn, name, exact) if on_server(conn) else fts_sync(conn, name, exact)


def index_integrity(conn: sqlite3.Connection, name: str) -> str | None:
    """The deep check of one index: FTS5's integrity-check, or a side table's exact row agreement."""
    return server_schema.search_problem(index_sync(conn, name)) if on_server(conn) else fts_integrity(conn, name)


# -- meta ------------------------------------------------------------------------

def fts_health(conn: sqlite3.Connection) -> dict[str, Any]:
    """What the last deep check recorded in ``meta`` (for status and doctor)."""
    checked = meta_value(conn, META_CHECKED_AT)
    failed = meta_value(conn, META_FAILED)
    try:
        failure = json.loads(failed) if failed else None
    except ValueError:
        failure = {"detail": failed}
    return {"last_deep_check_at": float(checked) if checked else None, "recorded_failure": failure}


# -- repair -------------------------------------------------------------------------

def diagnose_fts(conn: sqlite3.Connection, deep: bool = True) -> dict[str, Any]:
    """Structural and FTS diagnostics; changes nothing (``deep`` runs integrity-check)."""
    structure = check_structure(conn)
    tables: dict[str, Any] = {}
    for fts in search_indexes(conn):
        if fts in structure.missing_fts:
            tables[fts] = {"present": False}
            continue
        sync = index_sync(conn, fts)
        entry: dict[str, Any] = {"present": True, "content_rows": sync.content_rows,
                                 "indexed_rows": sync.indexed_rows, "unindexed_rows": sync.unindexed,
                                 "ghost_rows": sync.ghosts, "in_sync": sync.ok}
        if deep:
            error = index_integrity(conn, fts)
            entry["integrity"] = "ok" if error is None else error
        tables[fts] = entry
    multi = SummaryDAG.multi_parent_nodes(conn)  # nodes condensed twice by one session
    lineage = {"multi_parent_nodes": len(multi), "multi_parent_examples": [list(m) for m in multi[:10]],
               "overlapping_frontier": SummaryDAG.overlapping_frontier(conn)}  # raw rows two frontier nodes cover
    needs = bool(not structure.ok or any(not t.get("present") or not t.get("in_sync")
                                         or t.get("integrity", "ok") != "ok" for t in tables.values())
                 or lineage["multi_parent_nodes"] or lineage["overlapping_frontier"])
    return {"lineage": lineage, **{name: list(names) for name, names in asdict(structure).items()},
            "fts": tables, "needs_repair": needs, "recorded": fts_health(conn)}


def repair_fts(runtime: Runtime, have_backup: bool = False) -> dict[str, Any]:
    """Backup first, then recreate missing FTS tables, triggers and indexes, rebuild both indexes,
    and undo duplicate condensations (the later parent goes; raw messages stay). On a PostgreSQL
    store it is refused unless ``have_backup``; the search side tables are rebuilt from the base rows."""
    before = {**diagnose_fts(queries.settled(runtime)), "background": diagnose_background(runtime.db)}
    try:
        backup = backup_first(runtime, have_backup)
    except FileBackupUnavailable as exc:
        return {**exc.refusal(), "before": before}
    actions: list[str] = repair_background(runtime.db)  # a killed pass's leases and rows
    with runtime.db.transaction() as c:
        for sid, ids in SummaryDAG.repair_duplicate_condensations(c).items():
            actions.append(f"session {sid}: removed {len(ids)} duplicate summary nodes and rebuilt its frontier")
        if on_server(c):
            actions += server_schema.repair(c)
        else:
            _repair_file(c, actions)
    after = diagnose_fts(runtime.db.read())
    runtime.db.set_meta({META_CHECKED_AT: repr(time.time()),
                         META_FAILED: None if not after["needs_repair"] else json.dumps(after["fts"])})
    return {"status": "repaired" if not after["needs_repair"] else "still_unhealthy", **backup_fields(backup),
            "actions": actions, "before": before,
            "after": {**after, "background": diagnose_background(runtime.db)}}


def _repair_file(c: sqlite3.Connection, actions: list[str]) -> None:
    """SQLite's repair inside the caller's transaction: missing objects, then both FTS5 indexes rebuilt."""
    s = check_structure(c)
    # Views first: a full-text index reads through one. recreate_fts also clears leftover shadow
    # tables that would block the create.
    for names, create, label in ((s.missing_views, create_view, "view "), (s.missing_fts, recreate_fts, ""),
                                 (s.missing_triggers, create_trigger, "trigger "),
                                 (s.missing_indexes, create_index, "index ")):
        for name in names:
            create(c, name)
            actions.append(f"created {label}{name}")
    for fts in FTS_TABLES:
        try:
            rebuild_fts(c, fts)
            actions.append(f"rebuilt {fts}")
        except sqlite3.DatabaseError:
            # Shadow tables too damaged to rebuild in place: recreate the index from scratch.
            recreate_fts(c, fts)
            rebuild_fts(c, fts)
            actions.append(f"recreated and rebuilt {fts}")


def diagnose(runtime: Runtime) -> dict[str, Any]:
    """``/trove doctor repair`` (read-only): SQLite/FTS diagnostics plus a killed pass's leftovers."""
    out = {**diagnose_fts(queries.settled(runtime)), "background": diagnose_background(runtime.db)}
    out["needs_repair"] = bool(out["needs_repair"] or out["background"]["stale_leases"]
                               or out["background"]["stuck_building_rollups"])
    return out


# -- background work left by a crashed process ---------------------------------------

def _stuck_rollups(db: Database) -> list[int]:
    """Rollups left 'building' with no live process holding the rollup lease."""
    if leases.holder(db, ROLLUP_LEASE) is not None:  # a live builder owns its 'building' rows
        return []
    return [s.rollup_id for s in RollupStore(db).states() if s.status == "building"]


def diagnose_background(db: Database) -> dict[str, Any]:
    """Stale lease rows (expired, or their holder is gone from this host) and orphaned 'building' rollups."""
    now = time.time()
    stale = leases.stale(db, now)
    return {"stale_leases": [{"name": s.name, "owner": s.owner, "expired": s.expires_at <= now,
                              "expires_in_s": round(s.expires_at - now, 1)} for s in stale],
            "stuck_building_rollups": _stuck_rollups(db)}


def repair_background(db: Database) -> list[str]:
    """Clear what ``diagnose_background`` finds; each step is conditional on the rows being unchanged."""
    cleared = leases.clear_stale(db, leases.stale(db))
    reset = RollupStore(db).abandon_building(_stuck_rollups(db), time.time())
    return [text for n, text in ((cleared, f"cleared {cleared} stale lease(s)"),
                                 (reset, f"marked {reset} orphaned 'building' rollup(s) stale for rebuild")) if n]


# -- empty lifecycle-row GC ---------------------------------------------------------

def gc_empty_lifecycle(runtime: Runtime, now: float | None = None) -> int:
    """Delete empty, old lifecycle rows once the table is large; never a bound session."""
    cfg = runtime.config
    if not cfg.empty_lifecycle_gc_enabled:
        return 0
    cutoff = (time.time() if now is None else now) - float(cfg.empty_lifecycle_gc_max_age_hours) * 3600

    def prune() -> int:  # a tidy-up at a session's start
        if runtime.store.session_count() <= int(cfg.empty_lifecycle_gc_threshold):
            return 0
        return runtime.store.delete_empty_sessions(cutoff, keep=sorted(runtime.bound_sessions))

    deleted = _tidy("empty lifecycle rows left for a later pass", prune)
    if deleted:
        log.info("trove: pruned %d empty lifecycle rows", deleted)
    return deleted


TIDY_EVERY_S = 600.0  # a session's start tidies empty rows at most this often per store
_TIDY_CLAIM = threading.Lock()


def tidy_at_session_start(runtime: Runtime) -> int:
    """``gc_empty_lifecycle`` at a session's start, at most once per ``TIDY_EVERY_S`` (or the rows' minimum
    age, when shorter) for each runtime: the pass reads the whole sessions table, and a row becomes a
    candidate only hours after it was last touched, so a gateway starting chats all day need not pay it
    at every start."""
    with _TIDY_CLAIM:  # two sessions starting together on two threads: one of them runs the pass
        if time.monotonic() < runtime.empty_gc_due:
            return 0
        tidied_now(runtime)
    return gc_empty_lifecycle(runtime)


def tidied_now(runtime: Runtime) -> None:
    """The next session's start to tidy empty rows is an interval from now (start-up's pass counts too)."""
    interval = min(TIDY_EVERY_S, float(runtime.config.empty_lifecycle_gc_max_age_hours) * 3600)
    runtime.empty_gc_due = time.monotonic() + interval


def drop_unstored_row(runtime: Runtime, session_id: str) -> bool:
    """Remove the empty row a session got when it bound before the host named its platform, now that
    it is one trove stores nothing for (the curator's agent of ``hermes curator run`` binds as an
    ordinary session, then says platform "curator"). A row with messages or summaries stays.
    A tidy-up: a store it cannot reach now (a server away) keeps the row and stays usable."""
    # the delete looks at the row itself: no read first (on a server, one round trip fewer)
    return bool(session_id) and _tidy(f"the empty row of {session_id} stays for now",
                                      lambda: runtime.store.delete_empty_sessions(time.time(), only=session_id)) > 0


def _tidy(left: str, delete: Callable[[], int]) -> int:
    """A tidy-up's deleted count; 0 when the store cannot be reached now (a server away: the outbox
    takes the turns meanwhile), which is logged as ``left`` and is no store failure."""
    try:
        return delete()
    except Exception as exc:
        if not storage_error(exc):
            raise
        log.info("trove: %s (%s)", left, type(exc).__name__)
        return 0


def previous_in_chat(store: Any, key: Any) -> str:
    """The newest other session of a gateway chat with ``key``'s scope, for a new session that holds
    nothing yet. The gateway builds a new agent after /new, /reset or an idle reset: no on_session_reset."""
    if not key.conversation_id or store.last_store_id(key.session_id):
        return ""
    scope = (store.session(key.session_id) or key).scope
    earlier = [s for s in store.sessions(20, key.conversation_id) if s.session_id != key.session_id]
    return next((s.session_id for s in earlier if s.scope == scope), "")


# -- startup --------------------------------------------------------------------------

@dataclass(frozen=True)
class StartupReport:
    structure: Structure
    counts_in_sync: bool
    deep_check: str  # skipped | not_due | started | ok | failed | error
    gc_deleted: int = 0
    problems: tuple[str, ...] = field(default=())


def deep_check_due(interval_hours: float, last_checked: float | None, now: float) -> bool:
    """0 ⇒ every startup, negative ⇒ never, else when the interval has elapsed."""
    return not interval_hours < 0 and (interval_hours == 0 or last_checked is None
                                       or now - last_checked >= interval_hours * 3600)


def run_deep_check(runtime: Runtime) -> bool:
    """Integrity-check both full-text indexes; record the time and any failure in ``meta``."""
    conn = runtime.db.read()
    missing = check_structure(conn).missing_fts
    failures = {fts: err for fts in search_indexes(conn) if fts not in missing and (err := index_integrity(conn, fts))}
    runtime.db.set_meta({META_CHECKED_AT: repr(time.time()),
                         META_FAILED: json.dumps({"at": time.time(), "tables": failures}) if failures else None})
    if failures:
        log.warning("trove: full-text index corruption detected in %s; search may miss or misreport rows."
                    " Run `%s` (it takes a backup first).", ", ".join(sorted(failures)), REPAIR_HINT)
    return not failures


def startup(runtime: Runtime, background: bool = True, now: float | None = None) -> StartupReport | None:
    """Cheap checks on every load; the deep FTS check only when due. Never raises."""
    try:
        return _startup(runtime, background, time.time() if now is None else now)
    except Exception:
        log.warning("trove: startup maintenance skipped", exc_info=True)
        return None


def _startup(runtime: Runtime, background: bool, now: float) -> StartupReport:
    conn = runtime.db.read()
    structure = check_structure(conn)
    problems: list[str] = []
    if not structure.ok:
        problems.append(f"missing schema objects: {', '.join(structure.missing)}")
    indexes = search_indexes(conn)
    syncs = [index_sync(conn, fts, exact=False) for fts in indexes if fts not in structure.missing_fts]
    problems += [f"{s.table} indexes {s.indexed_rows} rows but {indexes[s.table][0]} has {s.content_rows}"
                 for s in syncs if not s.ok]
    if problems:
        log.warning("trove: %s. Run `%s` (it takes a backup first).", "; ".join(problems), REPAIR_HINT)
    interval = float(runtime.config.fts_integrity_check_interval_hours)
    last = meta_value(conn, META_CHECKED_AT)
    deep = "skipped" if interval < 0 else "not_due"
    if deep_check_due(interval, float(last) if last else None, now):
        if background:
            threading.Thread(target=_background_check, args=(runtime,), name="trove-fts-check", daemon=True).start()
            deep = "started"
        else:
            deep = "ok" if run_deep_check(runtime) else "failed"
    tidied_now(runtime)  # the first session's start, moments later, need not read the table again
    deleted = gc_empty_lifecycle(runtime, now=now)
    clean_stale_temp(runtime.payload_dir)  # temp files a crashed sidecar write left (on a server: the spool)
    remove_dead_leftovers(backup_dir(runtime.config), PARTIAL)  # a killed backup's half-made copy
    return StartupReport(structure, all(s.ok for s in syncs), deep, deleted, tuple(problems))


def _background_check(runtime: Runtime) -> None:
    try:
        run_deep_check(runtime)
    except Exception:
        log.warning("trove: background FTS integrity check failed to run", exc_info=True)
    finally:
        runtime.db.close()  # this thread's connection
