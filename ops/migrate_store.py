"""Copy a trove store to another backend: ``hermes trove migrate --to TARGET``.

Reads the configured store (one read snapshot) and copies its tables, ids kept, into a PostgreSQL
database or a SQLite file in key-ordered chunks, each one short target transaction that records
its progress in the target's ``meta``, so a re-run adds nothing and a killed run continues. Ends
with per-table counts and checksums compared on both sides.
"""
from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from .. import pgtext
from ..backend import on_server, storage_error
from ..backups import backup_dir
from ..config import OUTBOX_FILE, database_path, names_server, payload_dir, redact_url
from ..db import Database, optional_schema
from ..packed import exact_text, pack
from ..pathprobe import SIDECARS, sidecar_of
from ..pgdb import PgDatabase, StoreSelectionError

if TYPE_CHECKING:
    from ..runtime import Runtime

CHUNK_ROWS = 2000
PROGRESS_PREFIX = "migrated_from:"
# meta keys that describe one file or one server, never the history: not copied
LOCAL_META = ("fts_integrity_checked_at", "fts_integrity_failed", "outbox_origin", "outbox_cursor", "outbox_sessions")
Progress = Callable[[str, int, int, float], None]  # (table, rows done, rows in all, seconds so far)


class TargetError(ValueError):
    """``--to`` names no usable target (malformed, the source itself, a directory)."""


class TargetInUseError(RuntimeError):
    """The target was written since the copy: more rows would collide with its own ids."""


@dataclass(frozen=True)
class Table:
    """One copied table. ``append`` rows never change once written: copied past a cursor kept in
    the target's meta. The others are rescanned each run: ``upsert`` refreshes a row the source
    changed later (by ``newer``), ``sync`` also removes target rows the source no longer has."""

    name: str
    key: tuple[str, ...]
    mode: str  # append | upsert | sync | meta
    newer: str = ""  # upsert: the column that says which side's row is newer


TABLES: tuple[Table, ...] = (
    Table("sessions", ("session_id",), "upsert", "updated_at"),
    Table("imports", ("import_id",), "upsert", "last_at"),
    Table("messages", ("store_id",), "append"),
    Table("summary_nodes", ("node_id",), "append"),
    Table("node_messages", ("node_id", "ordinal"), "append"),
    Table("node_children", ("node_id", "ordinal"), "append"),
    Table("carried_nodes", ("session_id", "node_id"), "sync"),
    Table("session_frontier", ("session_id", "node_id"), "sync"),
    Table("imported_messages", ("import_id", "source_key"), "append"),
    Table("imported_nodes", ("import_id", "source_key"), "append"),
    # the subsystems' tables (absent from a source that never had them: nothing to copy)
    Table("temporal_rollups", ("rollup_id",), "upsert", "updated_at"),
    Table("temporal_rollup_sources", ("rollup_id", "ordinal"), "sync"),
    Table("embedding_generations", ("generation_id",), "sync"),
    Table("embedding_vectors", ("vector_id",), "append"),
    Table("assertions", ("assertion_id",), "append"),
    Table("assertion_relations", ("from_id", "to_id", "relation"), "sync"),
    Table("assertion_extraction", ("name",), "upsert", "updated_at"),
    Table("assertion_batches", ("batch_id",), "append"),
    Table("assertion_terms", ("term", "observed_at", "assertion_id"), "append"),
    Table("retrieval_episodes", ("retrieval_id",), "upsert", "updated_at"),
    Table("retrieval_events", ("retrieval_id", "seq"), "append"),
    Table("meta", ("key",), "meta"),
)
# Identity columns whose sequence must start past the copied ids on a server.
IDENTITIES = (("messages", "store_id"), ("summary_nodes", "node_id"), ("temporal_rollups", "rollup_id"),
              ("embedding_generations", "generation_id"), ("embedding_vectors", "vector_id"),
              ("assertion_batches", "batch_id"))
# sum of text lengths, compared (a message's text read through ``trove_text``: a SQLite file may store it packed)
CHECKSUMS = {"messages": "trove_text(content)", "summary_nodes": "summary"}


# -- the target -----------------------------------------------------------------------------

def open_target(text: str, source: Database | PgDatabase,
                reserved: Sequence[tuple[Path, str, bool]] = ()) -> Database | PgDatabase:
    """The database ``text`` names: a postgresql:// URL or libpq ``key=value`` string, else a SQLite
    file path. Raises ``TargetError`` for a malformed one, a directory, the source itself, a file SQLite
    keeps beside a database, or a path in ``reserved`` (``reserved_paths``)."""
    value = (text or "").strip()
    if not value:
        raise TargetError("--to is empty: give a postgresql:// URL, a libpq string (service=NAME)"
                          " or a SQLite file path")
    if "\x00" in value:
        raise TargetError("--to contains a NUL byte: give a postgresql:// URL, a libpq string or a SQLite file path")
    if names_server(value):
        try:
            server = PgDatabase(value)
        except StoreSelectionError as exc:
            raise TargetError(str(exc).replace("TROVE_DATABASE_URL=", "--to ").replace(
                "TROVE_DATABASE_URL", "--to")) from None
        if isinstance(source, PgDatabase) and _server_identity(source.url) == _server_identity(server.url):
            raise TargetError(f"--to {server.path} is the source store itself: give another database or schema")
        return server
    path = Path(os.path.expanduser(value)).absolute()
    if path.is_dir():
        raise TargetError(f"--to {path} is a directory: give a SQLite file path (for example {path / 'trove.db'})")
    if isinstance(source, Database) and os.path.realpath(path) == os.path.realpath(source.path):
        raise TargetError(f"--to {path} is the source store itself: give another file")
    refusal = _reserved_refusal(path, reserved)
    if refusal:
        raise TargetError(f"--to {path} {refusal}: nothing was written; give a file of its own"
                          " (for example trove-copy.db in another folder)")
    return Database(path)


def reserved_paths(runtime: Runtime) -> list[tuple[Path, str, bool]]:
    """The paths trove and SQLite use beside the runtime's store, as ``(path, what, whole folder)``:
    a copy written to one of them is deleted, truncated or overwritten later (SQLite's own files at a
    checkpoint or close, the outbox when it ships, a payload or backup folder by trove's clean-ups)."""
    config, out = runtime.config, []
    files = [(database_path(config), "the store")]
    if isinstance(runtime.db, Database):
        files.append((Path(runtime.db.path), "the store"))
    files.append((database_path(config).parent / OUTBOX_FILE, "the PostgreSQL outbox"))
    for base, what in files:
        out.append((base, f"{what} {base}", False))
        out += [(base.with_name(base.name + suffix), f"the {suffix[1:]} file SQLite keeps beside {what} {base}",
                 False) for suffix in SIDECARS]
    payloads, backups = payload_dir(config), backup_dir(config)
    out.append((payloads, f"in the payload folder {payloads}, which trove cleans up", True))
    out.append((backups, f"in trove's backup folder {backups}, where trove writes and replaces its backups", True))
    return out


def _reserved_refusal(path: Path, reserved: Sequence[tuple[Path, str, bool]]) -> str:
    """Why ``path`` may not hold a copy ('' when it may): a file SQLite keeps beside a database, or a
    path in ``reserved`` (compared resolved, symlinks included, and by file identity when both exist)."""
    real = Path(os.path.realpath(path))
    owner = sidecar_of(path)
    if owner is not None:
        base, suffix = owner
        return (f"is the {suffix[1:]} file SQLite keeps beside the database {base}, which SQLite deletes or"
                " truncates when that database checkpoints or closes")
    for where, what, tree in reserved:
        there = Path(os.path.realpath(where))
        same = real == there or (real.exists() and there.exists() and os.path.samefile(real, there))
        if same or (tree and there in real.parents):
            return what if what.startswith("in ") else f"is {what}"
    return ""


def _server_identity(url: str) -> tuple[tuple[str, str], ...]:
    from psycopg.conninfo import conninfo_to_dict

    return tuple(sorted((k, str(v)) for k, v in conninfo_to_dict(url).items() if k != "password"))


def source_identity(db: Database | PgDatabase) -> str:
    """How the target's progress keys name the source: its file, or its redacted URL."""
    return f"postgresql:{db.path}" if isinstance(db, PgDatabase) else f"sqlite:{os.path.realpath(db.path)}"


# -- reading ------------------------------------------------------------------------------

@contextlib.contextmanager
def _snapshot(conn: Any) -> Iterator[Any]:
    """One read snapshot for the whole copy, so lineage never points past the rows copied."""
    if on_server(conn):
        with conn.raw.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield conn
        return
    if conn.in_transaction:
        yield conn
        return
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        conn.execute("ROLLBACK")  # nothing was written: this only ends the snapshot


def _columns(conn: Any, table: str) -> list[str]:
    """The table's columns in order ([] when it does not exist)."""
    if on_server(conn):
        return [str(r[0]) for r in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema()"
            " AND table_name = ? ORDER BY ordinal_position", (table,))]
    return [str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")]


def _count(conn: Any, table: str, where: str = "", args: Sequence[Any] = ()) -> int:
    return int(conn.execute(f"SELECT COUNT(*) FROM {table}{where}", tuple(args)).fetchone()[0])


def _after(key: Sequence[str], cursor: Sequence[Any] | None) -> tuple[str, list[Any]]:
    """The WHERE clause of rows past ``cursor`` in key order (row values for a composite key)."""
    if cursor is None:
        return "", []
    if len(key) == 1:
        return f" WHERE {key[0]} > ?", [cursor[0]]
    return f" WHERE ({', '.join(key)}) > ({', '.join('?' * len(key))})", list(cursor)


def _meta_copied(key: str) -> bool:
    return not (key in LOCAL_META or key.startswith(PROGRESS_PREFIX))


def _tables(conn: Any) -> list[str]:
    if on_server(conn):
        return [str(r[0]) for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")]
    return [str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]


# -- writing ------------------------------------------------------------------------------

def _insert(conn: Any, table: Table, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """Insert ``rows``, leaving rows already there alone (``upsert``: refreshing older ones); returns
    the keys of the rows that were new, a few multi-row statements in all."""
    per = max(1, min(500, 30000 // max(1, len(columns))))
    conflict = " ON CONFLICT DO NOTHING"
    if table.mode == "upsert":
        sets = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in table.key)
        conflict = (f" ON CONFLICT ({', '.join(table.key)}) DO UPDATE SET {sets}"
                    f" WHERE {table.name}.{table.newer} < excluded.{table.newer}")
    existing: set[tuple[Any, ...]] = set()
    if table.mode == "upsert":  # DO UPDATE returns updated rows too: tell new ones apart first
        existing = _present(conn, table, [tuple(r[columns.index(k)] for k in table.key) for r in rows])
    new: list[tuple[Any, ...]] = []
    mark = f"({', '.join('?' * len(columns))})"
    for i in range(0, len(rows), per):
        part = rows[i:i + per]
        got = conn.execute(f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES {', '.join([mark] * len(part))}"
                           f"{conflict} RETURNING {', '.join(table.key)}", [v for r in part for v in r]).fetchall()
        new.extend(k for k in (tuple(g) for g in got) if k not in existing)
    return new


def _stored(conn: Any, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Sequence[Sequence[Any]]:
    """``rows`` as the target stores them: a SQLite file packs long message text (``packed.py``)."""
    if table != "messages" or on_server(conn):
        return rows
    at = columns.index("content")
    return [(*r[:at], pack(r[at]), *r[at + 1:]) for r in rows]


def _present(conn: Any, table: Table, keys: Sequence[tuple[Any, ...]]) -> set[tuple[Any, ...]]:
    (name,) = table.key  # upsert tables have one-column keys
    out: set[tuple[Any, ...]] = set()
    for i in range(0, len(keys), 500):
        part = [k[0] for k in keys[i:i + 500]]
        out.update((r[0],) for r in conn.execute(
            f"SELECT {name} FROM {table.name} WHERE {name} IN ({', '.join('?' * len(part))})", part))
    return out


def _index(conn: Any, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], new: set[Any]) -> None:
    """Full text for the rows just added: ``pgtext`` on a server; in a SQLite file the messages index
    (nodes are indexed by their insert trigger)."""
    indexed = {"messages": ("store_id", "content", "tool_calls"), "summary_nodes": ("node_id", "summary")}
    if table not in indexed or (table == "summary_nodes" and not on_server(conn)):
        return
    at = [columns.index(c) for c in indexed[table]]
    fresh = [tuple(r[i] for i in at) for r in rows if r[at[0]] in new]
    if fresh and on_server(conn):
        (pgtext.index_messages if table == "messages" else pgtext.index_nodes)(conn, fresh)
    elif fresh:
        conn.executemany("INSERT INTO messages_fts(rowid, content, tool_calls) VALUES (?, ?, ?)", fresh)


def _set_cursor(conn: Any, key: str, value: Sequence[Any]) -> None:
    conn.execute("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                 (key, json.dumps(list(value))))


def _get_cursor(conn: Any, key: str) -> list[Any] | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else list(json.loads(str(row[0])))


# -- the copy -----------------------------------------------------------------------------

SOURCE_FAILED, TARGET_FAILED = "the source cannot be read", "the target cannot be written"


@dataclass
class _Run:
    source: Any  # the source connection, inside its snapshot
    target: Database | PgDatabase
    identity: str
    progress: Progress | None
    budget: int | None  # rows this run may still read (tests stop a run early with it)
    side: str = SOURCE_FAILED  # what a storage error now says failed: the side the next statement uses


def copy_table(run: _Run, table: Table) -> dict[str, Any]:
    """Copy one table in chunks; returns its line of the report."""
    src, t0 = run.source, time.monotonic()
    run.side = SOURCE_FAILED
    present = set(_columns(src, table.name))
    run.side = TARGET_FAILED
    tconn = run.target.connect()
    columns = [c for c in _columns(tconn, table.name) if c in present]
    if not columns:
        return {"copied": 0, "already": 0, "total": 0, "seconds": 0.0, "absent": True}
    progress_key = f"{PROGRESS_PREFIX}{run.identity}:{table.name}"
    cursor = _get_cursor(tconn, progress_key) if table.mode == "append" else None
    run.side = SOURCE_FAILED
    total = _count(src, table.name)
    where, args = _after(table.key, cursor)
    done = total - _count(src, table.name, where, args)
    copied, already = 0, done  # rows up to the cursor were copied by an earlier run
    order = ", ".join(table.key)
    keys_seen: set[tuple[Any, ...]] = set()
    while run.budget is None or run.budget > 0:
        limit = CHUNK_ROWS if run.budget is None else min(CHUNK_ROWS, run.budget)
        where, args = _after(table.key, cursor)
        reads = [f"trove_text({c})" if (table.name, c) == ("messages", "content") else c for c in columns]
        run.side = SOURCE_FAILED
        rows = [tuple(r) for r in src.execute(
            f"SELECT {', '.join(reads)} FROM {table.name}{where} ORDER BY {order} LIMIT ?", (*args, limit))]
        if not rows:
            break
        cursor = [rows[-1][columns.index(k)] for k in table.key]
        if table.mode == "meta":
            rows = [r for r in rows if _meta_copied(str(r[0]))]
        if table.mode == "sync":
            keys_seen.update(tuple(r[columns.index(k)] for k in table.key) for r in rows)
        run.side = TARGET_FAILED
        with run.target.transaction() as conn:
            new = _insert(conn, table, columns, _stored(conn, table.name, columns, rows)) if rows else []
            _index(conn, table.name, columns, rows, {k[0] for k in new})
            if table.mode == "append":
                _set_cursor(conn, progress_key, cursor)
        copied, already, done = copied + len(new), already + len(rows) - len(new), done + len(rows)
        if run.budget is not None:
            run.budget -= len(rows)
        if run.progress is not None:
            run.progress(table.name, done, total, time.monotonic() - t0)
    if run.progress is not None and not (copied or already):
        run.progress(table.name, done, total, time.monotonic() - t0)  # an empty or finished table: one line
    finished = run.budget is None or run.budget > 0
    run.side = TARGET_FAILED
    removed = _remove_stale(run.target, table, keys_seen) if table.mode == "sync" and finished else 0
    line = {"copied": copied, "already": already, "total": total, "seconds": round(time.monotonic() - t0, 3)}
    return {**line, "removed": removed} if table.mode == "sync" else line


def _remove_stale(target: Database | PgDatabase, table: Table, source_keys: set[tuple[Any, ...]]) -> int:
    """Delete target rows of a ``sync`` table that the source no longer has (a frontier node that a
    later condensation replaced). Safe: a target written since the copy is refused before this."""
    conn = target.connect()
    there = {tuple(r) for r in conn.execute(f"SELECT {', '.join(table.key)} FROM {table.name}")}
    stale = sorted(there - source_keys)
    if stale:
        with target.transaction() as c:
            c.executemany(f"DELETE FROM {table.name} WHERE {' AND '.join(f'{k} = ?' for k in table.key)}", stale)
    return len(stale)


def _refuse_if_written(run: _Run) -> None:
    """A target that holds messages or nodes past this copy's cursor has been in use since (or holds
    another store): more rows from the source would collide with its ids, and refreshing sessions or
    frontiers would undo its work."""
    tconn = run.target.connect()
    for name, key in (("messages", "store_id"), ("summary_nodes", "node_id")):
        cursor = _get_cursor(tconn, f"{PROGRESS_PREFIX}{run.identity}:{name}")
        beyond = _count(tconn, name, f" WHERE {key} > ?", ((cursor or [0])[0],))
        if beyond:
            raise TargetInUseError(
                f"the target {run.target.path} already holds {beyond} {name} rows this copy did not write"
                f" ({key} above {(cursor or [0])[0]}): it holds another store or was used after the copy."
                " Copy into an empty database, schema or file")


def _move_sequences(target: Database | PgDatabase) -> dict[str, int]:
    """After copying to PostgreSQL, the identity sequences start past the copied ids."""
    if not isinstance(target, PgDatabase):
        return {}  # SQLite's AUTOINCREMENT already follows the largest id inserted
    out: dict[str, int] = {}
    with target.transaction() as conn:
        present = set(_tables(conn))
        for table, key in (pair for pair in IDENTITIES if pair[0] in present):
            top = int(conn.execute(f"SELECT COALESCE(MAX({key}), 0) FROM {table}").fetchone()[0])
            conn.execute(f"SELECT setval(pg_get_serial_sequence('{table}', '{key}'), ?, false)", (top + 1,))
            out[table] = top + 1
    return out


def _chars(conn: Any, table: str, column: str) -> int:
    """The summed length of ``column``, a NUL counted as one character (SQLite's LENGTH stops at
    one; a server holds each as U+FFFD)."""
    total = int(conn.execute(f"SELECT COALESCE(SUM(LENGTH({column})), 0) FROM {table}").fetchone()[0])
    if not on_server(conn):
        total += sum(len(v) - v.index("\x00") for (v,) in conn.execute(
            f"SELECT {column} FROM {table} WHERE instr(CAST({column} AS BLOB), x'00') > 0"))
    return total


def verify(source: Any, target: Any) -> dict[str, Any]:
    """Per table: rows on each side (meta: the copied keys) and, for text tables, summed lengths."""
    out: dict[str, Any] = {}
    present = set(_tables(source))
    for table in (t for t in TABLES if t.name in present):
        if table.mode == "meta":
            keys = [str(r[0]) for r in source.execute("SELECT key FROM meta") if _meta_copied(str(r[0]))]
            there = {str(r[0]) for r in target.execute("SELECT key FROM meta")}
            out["meta"] = {"source": len(keys), "target": len([k for k in keys if k in there])}
        else:
            out[table.name] = {"source": _count(source, table.name), "target": _count(target, table.name)}
        if table.name in CHECKSUMS:
            out[table.name]["source_chars"] = _chars(source, table.name, CHECKSUMS[table.name])
            out[table.name]["target_chars"] = _chars(target, table.name, CHECKSUMS[table.name])
        line = out[table.name]
        line["equal"] = line["source"] == line["target"] and line.get("source_chars") == line.get("target_chars")
    return out


def migrate(runtime: Runtime, to: str, *, progress: Progress | None = None,
            max_rows: int | None = None) -> dict[str, Any]:
    """Copy the runtime's store into ``to``; returns the report (``status`` ok, partial, incomplete,
    mismatch or refused). Raises ``TargetError`` for a bad ``to``. ``max_rows`` stops the run after
    that many rows read (a stand-in for a killed run: the next run continues)."""
    source_db = runtime.db
    target = open_target(to, source_db, reserved_paths(runtime))
    started = time.monotonic()
    report: dict[str, Any] = {"source": source_db.path, "target": redact_url(target.path),
                              "target_kind": target.kind}
    failed = "the source cannot be read"
    try:  # a server that is down (or refuses the schema), a damaged file: nothing was written anywhere
        source = source_db.read()
        failed = "the target cannot be opened"
        target.connect()  # creates or migrates the target's schema
    except Exception as exc:
        return {"status": "error", "error": f"{failed}: {type(exc).__name__}: {exc}".strip(), **report}
    with _snapshot(source):
        run = _Run(source, target, source_identity(source_db), progress, max_rows)
        try:
            _refuse_if_written(run)
        except TargetInUseError as exc:
            return {"status": "refused", "error": str(exc), **report}
        present = set(_tables(source))
        if any(_count(source, name) for name in optional_schema("state").tables if name in present):
            target.ensure_optional("state")  # remembered state comes along: its tables first
        tables: dict[str, dict[str, Any]] = {}
        for table in (t for t in TABLES if t.name in present):
            try:
                with exact_text(source):  # a copy holds the stored bytes, never U+FFFD in their place
                    tables[table.name] = copy_table(run, table)
            except Exception as exc:
                if isinstance(exc, sqlite3.OperationalError) and "decode" in str(exc):
                    return {"status": "error", "error": f"the source's {table.name} table holds text whose bytes"
                            f" are no UTF-8 ({exc}); a copy never replaces stored bytes, so it stopped there (the"
                            " tables and rows before it were copied, the source is unchanged; the doctor's"
                            " damaged_rows names the rows)", **report}
                if not storage_error(exc):
                    raise
                return {"status": "error", "error": f"{run.side}: {type(exc).__name__}: {exc}".strip() + f"; the"
                        f" copy stopped in the {table.name} table, keeping every chunk it wrote: run the same"
                        " command again to continue where it stopped", **report}
        stopped = run.budget is not None and run.budget <= 0
        sequences = _move_sequences(target) if not stopped else {}
        if isinstance(target, PgDatabase) and not stopped:  # ranking statistics over the copied rows, once
            pgtext.refresh_stats(target.connect(), full=True)
        checks = verify(source, target.read()) if not stopped else {}
    elapsed = time.monotonic() - started
    rows = sum(t["copied"] + t["already"] for t in tables.values())
    report.update(tables=tables, copied=sum(t["copied"] for t in tables.values()),
                  already=sum(t["already"] for t in tables.values()), elapsed_s=round(elapsed, 3),
                  rows_per_s=round(rows / elapsed, 1) if elapsed > 0 else None)
    if sequences:
        report["sequences_next"] = sequences
    report["not_copied_note"] = ("payload files (trove-payloads/) are not copied: externalized refs in the copy"
                                 " resolve only where those files, or the server's payloads table, are")
    waiting = _outbox_pending(runtime)
    if waiting:
        report.update(outbox_pending=waiting, outbox_note=f"{waiting} messages wait in this machine's outbox and"
                      " are not on the server yet: they are not in this copy; let Hermes ship them (rows set aside:"
                      " `hermes trove doctor outbox`) and run the command again")
    if stopped:
        return {**report, "status": "incomplete",
                "note": "stopped early; run the same command again to continue where it stopped"}
    report["verify"] = checks
    if not all(line["equal"] for line in checks.values()):
        report["status"] = "mismatch"
        report["note"] = ("the counts differ: the source changed since the copy began, or lost rows the target"
                          " still holds; copy into an empty target for an exact copy")
    else:
        report["status"] = "partial" if waiting else "ok"
    return report


def _outbox_pending(runtime: Runtime) -> int:
    """Rows a PostgreSQL store's local outbox holds that the server does not have yet, set-aside rows
    included (0 for SQLite)."""
    outbox = getattr(runtime.store, "outbox", None)
    with contextlib.suppress(Exception):
        return int(outbox.pending()) + int(outbox.aside_summary().get("messages", 0)) if outbox is not None else 0
    return 0


# -- the terminal ---------------------------------------------------------------------------

class TerminalProgress:
    """A one-line ``\\r`` bar per table on a terminal; elsewhere only ``finish``'s final line."""

    def __init__(self, stream: TextIO):
        self.out = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())

    def __call__(self, table: str, done: int, total: int, seconds: float) -> None:
        if not self.tty:
            return
        frac = min(1.0, done / total) if total else 1.0
        rate = done / seconds if seconds > 0 else 0.0
        self.out.write(f"\r{table:<18} [{'#' * int(frac * 30):<30}] {done}/{total} rows  {rate:,.0f} rows/s")
        if done >= total:
            self.out.write("\n")
        self.out.flush()

    def finish(self, report: dict[str, Any]) -> None:
        done = (f"{report.get('copied', 0)} rows copied, {report.get('already', 0)} already there,"
                f" in {report.get('elapsed_s', 0)}s -> {report.get('target')}")
        with contextlib.suppress(OSError, ValueError):
            self.out.write(f"trove migrate: {report.get('status')}: {report.get('error') or done}\n")
            self.out.flush()
