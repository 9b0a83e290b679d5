"""Database upkeep: schema/FTS health checks, FTS repair, online backups, startup checks.

Checks are read-only; every mutating path here (repair, lifecycle GC, startup stamps) runs
in short transactions, and repair takes a backup first. Backups use SQLite's online backup
API, so they are consistent while other processes write. Session-level clean-up lives in
``hygiene.py`` and rotate in ``rotate.py``.
"""
from __future__ import annotations

import json
import logging
import re
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..db import MIGRATIONS, backup_file, split_sql

log = logging.getLogger("hermes_trove.maintenance")

# FTS table -> (content table, content rowid column)
FTS_TABLES: dict[str, tuple[str, str]] = {"messages_fts": ("messages", "store_id"),
                                          "nodes_fts": ("summary_nodes", "node_id")}
META_CHECKED_AT = "fts_integrity_checked_at"
META_FAILED = "fts_integrity_failed"
REPAIR_HINT = "/trove doctor repair apply"


def _schema_statements() -> dict[str, dict[str, str]]:
    """Expected tables, FTS tables and triggers by name, read from the migrations."""
    out: dict[str, dict[str, str]] = {"table": {}, "fts": {}, "trigger": {}}
    pattern = re.compile(r"CREATE\s+(VIRTUAL\s+TABLE|TABLE|TRIGGER)\s+IF\s+NOT\s+EXISTS\s+(\w+)", re.I)
    dropped = re.compile(r"DROP\s+(TABLE|TRIGGER)\s+IF\s+EXISTS\s+(\w+)", re.I)
    for _, script in MIGRATIONS:
        for stmt in split_sql(script):
            gone = dropped.match(stmt)
            if gone:  # a later migration retired it
                for bucket in out.values():
                    bucket.pop(gone.group(2), None)
                continue
            m = pattern.match(stmt)
            if not m:
                continue
            kind = m.group(1).upper()
            bucket = "fts" if kind.startswith("VIRTUAL") else "trigger" if kind == "TRIGGER" else "table"
            out[bucket][m.group(2)] = stmt
    return out


EXPECTED = _schema_statements()


# -- structural checks (cheap, always safe) ----------------------------------------

@dataclass(frozen=True)
class Structure:
    """Which expected schema objects are missing."""

    missing_tables: tuple[str, ...] = ()
    missing_fts: tuple[str, ...] = ()
    missing_triggers: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not (self.missing_tables or self.missing_fts or self.missing_triggers)


def check_structure(conn: sqlite3.Connection) -> Structure:
    present = {(r[0], r[1]) for r in conn.execute("SELECT type, name FROM sqlite_master")}
    tables = {n for t, n in present if t == "table"}
    triggers = {n for t, n in present if t == "trigger"}
    return Structure(tuple(sorted(set(EXPECTED["table"]) - tables)),
                     tuple(sorted(set(EXPECTED["fts"]) - tables)),
                     tuple(sorted(set(EXPECTED["trigger"]) - triggers)))


@dataclass(frozen=True)
class FtsSync:
    """Row agreement between one FTS index and its content table (read-only counts)."""

    table: str
    content_rows: int
    indexed_rows: int
    unindexed: int  # content rows with no FTS document
    ghosts: int     # FTS documents with no content row

    @property
    def ok(self) -> bool:
        return self.content_rows == self.indexed_rows and not self.unindexed and not self.ghosts


def fts_sync(conn: sqlite3.Connection, fts: str, exact: bool = True) -> FtsSync:
    """Compare ``<fts>_docsize`` with the content table; ``exact`` adds anti-join counts."""
    content, rowid = FTS_TABLES[fts]
    n_content = int(conn.execute(f"SELECT COUNT(*) FROM {content}").fetchone()[0])
    n_index = int(conn.execute(f"SELECT COUNT(*) FROM {fts}_docsize").fetchone()[0])
    unindexed = ghosts = 0
    if exact:
        unindexed = int(conn.execute(
            f"SELECT COUNT(*) FROM {content} c WHERE NOT EXISTS"
            f" (SELECT 1 FROM {fts}_docsize d WHERE d.id = c.{rowid})").fetchone()[0])
        ghosts = int(conn.execute(
            f"SELECT COUNT(*) FROM {fts}_docsize d WHERE NOT EXISTS"
            f" (SELECT 1 FROM {content} c WHERE c.{rowid} = d.id)").fetchone()[0])
    return FtsSync(fts, n_content, n_index, unindexed, ghosts)


def fts_integrity(conn: sqlite3.Connection, fts: str) -> str | None:
    """FTS5 deep integrity-check against the content table; None when sound, else the error.

    The statement changes nothing, but SQLite runs it as a write statement (it briefly
    holds the write lock), so it is never run on a path that must not block writers.
    """
    try:
        conn.execute(f"INSERT INTO {fts}({fts}, rank) VALUES('integrity-check', 1)")
    except sqlite3.DatabaseError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


# -- meta helpers -----------------------------------------------------------------

def meta_get(conn: sqlite3.Connection, key: str) -> str | None:
    try:
        r = conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
    except sqlite3.OperationalError:
        return None
    return None if r is None else str(r[0])


def _meta_set(runtime: Any, values: dict[str, str | None]) -> None:
    with runtime.db.transaction() as conn:
        for key, value in values.items():
            if value is None:
                conn.execute("DELETE FROM meta WHERE key=?", (key,))
            else:
                conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))


def fts_health(conn: sqlite3.Connection) -> dict[str, Any]:
    """What the last deep check recorded in ``meta`` (for status and doctor)."""
    checked = meta_get(conn, META_CHECKED_AT)
    failed = meta_get(conn, META_FAILED)
    try:
        failure = json.loads(failed) if failed else None
    except ValueError:
        failure = {"detail": failed}
    return {"last_deep_check_at": float(checked) if checked else None, "recorded_failure": failure}


# -- backups ------------------------------------------------------------------------

@dataclass(frozen=True)
class Backup:
    path: str
    bytes: int
    seconds: float


def backup_dir(config: Any) -> Path:
    """``$HERMES_HOME/backups/trove``: where every backup and the rolling rotate slot go."""
    return Path(config.hermes_home).expanduser() / "backups" / "trove"


def timestamped_backup_path(runtime: Any, now: float | None = None) -> Path:
    stem = Path(runtime.db.path).stem
    stamp = time.strftime("%Y%m%d_%H%M%S", time.localtime(time.time() if now is None else now))
    base = backup_dir(runtime.config)
    path = base / f"{stem}-{stamp}.sqlite3"
    n = 2
    while path.exists():  # two backups in one second keep both
        path = base / f"{stem}-{stamp}-{n}.sqlite3"
        n += 1
    return path


def backup_to(runtime: Any, dest: Path) -> Backup:
    """Copy the live database to ``dest`` atomically via the SQLite online backup API.

    The copy is taken in one step inside a read snapshot (consistent while other processes
    write), switched to a single-file rollback journal, checked with ``quick_check``, then
    renamed into place, so ``dest`` never holds a partial copy.
    """
    started = time.perf_counter()
    size = backup_file(runtime.db.read(), dest)
    return Backup(str(dest), size, time.perf_counter() - started)


def take_backup(runtime: Any) -> Backup:
    """A new timestamped backup: ``<backup_dir>/<dbstem>-YYYYmmdd_HHMMSS.sqlite3``."""
    return backup_to(runtime, timestamped_backup_path(runtime))


# -- repair -------------------------------------------------------------------------

def diagnose_fts(conn: sqlite3.Connection, deep: bool = True) -> dict[str, Any]:
    """Structural and FTS diagnostics; changes nothing (``deep`` runs integrity-check)."""
    structure = check_structure(conn)
    tables: dict[str, Any] = {}
    for fts in FTS_TABLES:
        if fts in structure.missing_fts:
            tables[fts] = {"present": False}
            continue
        sync = fts_sync(conn, fts)
        entry: dict[str, Any] = {"present": True, "content_rows": sync.content_rows,
                                 "indexed_rows": sync.indexed_rows, "unindexed_rows": sync.unindexed,
                                 "ghost_rows": sync.ghosts, "in_sync": sync.ok}
        if deep:
            error = fts_integrity(conn, fts)
            entry["integrity"] = "ok" if error is None else error
        tables[fts] = entry
    needs = bool(not structure.ok or any(not t.get("present") or not t.get("in_sync")
                                         or t.get("integrity", "ok") != "ok" for t in tables.values()))
    return {"missing_tables": list(structure.missing_tables), "missing_fts": list(structure.missing_fts),
            "missing_triggers": list(structure.missing_triggers), "fts": tables, "needs_repair": needs,
            "recorded": fts_health(conn)}


def repair_fts(runtime: Any) -> dict[str, Any]:
    """Backup first, then recreate missing FTS tables/triggers and rebuild both indexes."""
    conn = runtime.db.read()
    before = diagnose_fts(conn)
    backup = take_backup(runtime)
    actions: list[str] = []
    with runtime.db.transaction() as c:
        structure = check_structure(c)
        for name in structure.missing_fts:
            _drop_fts(c, name)  # leftover shadow tables would block CREATE VIRTUAL TABLE
            c.execute(EXPECTED["fts"][name])
            actions.append(f"created {name}")
        for name in structure.missing_triggers:
            c.execute(EXPECTED["trigger"][name])
            actions.append(f"created trigger {name}")
        for fts in FTS_TABLES:
            try:
                c.execute(f"INSERT INTO {fts}({fts}) VALUES('rebuild')")
                actions.append(f"rebuilt {fts}")
            except sqlite3.DatabaseError:
                # Shadow tables too damaged to rebuild in place: recreate the index from scratch.
                _drop_fts(c, fts)
                c.execute(EXPECTED["fts"][fts])
                c.execute(f"INSERT INTO {fts}({fts}) VALUES('rebuild')")
                actions.append(f"recreated and rebuilt {fts}")
    after = diagnose_fts(runtime.db.read())
    _meta_set(runtime, {META_CHECKED_AT: repr(time.time()),
                        META_FAILED: None if not after["needs_repair"] else json.dumps(after["fts"])})
    return {"status": "repaired" if not after["needs_repair"] else "still_unhealthy", "backup": backup.path,
            "actions": actions, "before": before, "after": after}


def _fts5_version(conn: sqlite3.Connection) -> int:
    """The FTS5 file-format version this SQLite writes (read from a throwaway temp table)."""
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.trove_fts_probe USING fts5(x)")
    try:
        row = conn.execute("SELECT v FROM temp.trove_fts_probe_config WHERE k='version'").fetchone()
    finally:
        conn.execute("DROP TABLE temp.trove_fts_probe")
    return int(row[0]) if row else 4


def _drop_fts(conn: sqlite3.Connection, fts: str) -> None:
    try:
        conn.execute(f"DROP TABLE IF EXISTS {fts}")
    except sqlite3.DatabaseError:
        # A damaged config row stops SQLite from even loading the table to drop it.
        conn.execute(f"INSERT OR REPLACE INTO {fts}_config(k, v) VALUES ('version', ?)", (_fts5_version(conn),))
        conn.execute(f"DROP TABLE IF EXISTS {fts}")
    for shadow in ("data", "idx", "docsize", "config", "content"):
        conn.execute(f"DROP TABLE IF EXISTS {fts}_{shadow}")


# -- empty lifecycle-row GC ---------------------------------------------------------

_EMPTY_SESSION = ("NOT EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.session_id)"
                  " AND NOT EXISTS (SELECT 1 FROM summary_nodes n WHERE n.session_id = s.session_id)"
                  " AND NOT EXISTS (SELECT 1 FROM carried_nodes c WHERE c.session_id = s.session_id)")


def empty_lifecycle_rows(conn: sqlite3.Connection) -> int:
    return int(conn.execute(f"SELECT COUNT(*) FROM sessions s WHERE {_EMPTY_SESSION}").fetchone()[0])


def gc_empty_lifecycle(runtime: Any, now: float | None = None) -> int:
    """Delete empty, old lifecycle rows once the table is large; never a bound session."""
    cfg = runtime.config
    if not cfg.empty_lifecycle_gc_enabled:
        return 0
    conn = runtime.db.read()
    if int(conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]) <= int(cfg.empty_lifecycle_gc_threshold):
        return 0
    cutoff = (time.time() if now is None else now) - float(cfg.empty_lifecycle_gc_max_age_hours) * 3600
    bound = sorted(runtime.bound_sessions)
    keep = f" AND s.session_id NOT IN ({','.join('?' * len(bound))})" if bound else ""
    with runtime.db.transaction() as c:
        cur = c.execute(f"DELETE FROM sessions WHERE session_id IN (SELECT s.session_id FROM sessions s"
                        f" WHERE {_EMPTY_SESSION} AND MAX(s.created_at, s.updated_at) <= ?{keep})",
                        [cutoff, *bound])
        deleted = int(cur.rowcount or 0)
    if deleted:
        log.info("trove: pruned %d empty lifecycle rows", deleted)
    return deleted


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
    if interval_hours < 0:
        return False
    if interval_hours == 0 or last_checked is None:
        return True
    return now - last_checked >= interval_hours * 3600


def run_deep_check(runtime: Any) -> bool:
    """Integrity-check both FTS indexes; record the time and any failure in ``meta``."""
    conn = runtime.db.read()
    failures = {fts: err for fts in FTS_TABLES
                if fts not in check_structure(conn).missing_fts and (err := fts_integrity(conn, fts))}
    _meta_set(runtime, {META_CHECKED_AT: repr(time.time()),
                        META_FAILED: json.dumps({"at": time.time(), "tables": failures}) if failures else None})
    if failures:
        log.warning("trove: full-text index corruption detected in %s; search may miss or misreport rows."
                    " Run `%s` (it takes a backup first).", ", ".join(sorted(failures)), REPAIR_HINT)
    return not failures


def startup(runtime: Any, background: bool = True, now: float | None = None) -> StartupReport | None:
    """Cheap checks on every load; the deep FTS check only when due. Never raises."""
    try:
        return _startup(runtime, background, time.time() if now is None else now)
    except Exception:
        log.warning("trove: startup maintenance skipped", exc_info=True)
        return None


def _startup(runtime: Any, background: bool, now: float) -> StartupReport:
    conn = runtime.db.read()
    structure = check_structure(conn)
    problems: list[str] = []
    if not structure.ok:
        missing = structure.missing_tables + structure.missing_fts + structure.missing_triggers
        problems.append(f"missing schema objects: {', '.join(missing)}")
    synced = True
    for fts in FTS_TABLES:
        if fts in structure.missing_fts:
            continue
        sync = fts_sync(conn, fts, exact=False)
        if not sync.ok:
            synced = False
            problems.append(f"{fts} indexes {sync.indexed_rows} rows but {FTS_TABLES[fts][0]} has {sync.content_rows}")
    if problems:
        log.warning("trove: %s. Run `%s` (it takes a backup first).", "; ".join(problems), REPAIR_HINT)
    interval = float(runtime.config.fts_integrity_check_interval_hours)
    last = meta_get(conn, META_CHECKED_AT)
    deep = "skipped" if interval < 0 else "not_due"
    if deep_check_due(interval, float(last) if last else None, now):
        if background:
            threading.Thread(target=_background_check, args=(runtime,), name="trove-fts-check", daemon=True).start()
            deep = "started"
        else:
            deep = "ok" if run_deep_check(runtime) else "failed"
    deleted = gc_empty_lifecycle(runtime, now=now)
    return StartupReport(structure, synced, deep, deleted, tuple(problems))


def _background_check(runtime: Any) -> None:
    try:
        run_deep_check(runtime)
    except Exception:
        log.warning("trove: background FTS integrity check failed to run", exc_info=True)
    finally:
        runtime.db.close()  # this thread's connection
