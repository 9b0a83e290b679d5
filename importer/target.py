"""The target side of an import: ledger look-ups, the backup, and the writes, all on the one connection
of the caller's transaction. A dry run only reads the target (``ReadOnlyLedger``); a target that does not
exist is built in a staging file beside it and linked into place when complete (``publish``).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import tempfile
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import idlist, tokens
from ..backups import PARTIAL, remove_dead_leftovers
from ..db import HOST, backup_file, open_readonly
from ..payloads.sidecar import sync_directory
from ..store import SessionKey
from .convert import expand_hint, summary_level
from .report import ImportFailure
from .rows import SourceMessage, SourceSummary

if TYPE_CHECKING:
    from ..runtime import Runtime

CHUNK = 500


def default_import_id(paths: Sequence[Path]) -> str:
    """Derived from the resolved source path(s): same files, same import."""
    names = "\n".join(sorted(str(p) for p in paths))
    digest = hashlib.sha256(names.encode("utf-8", "surrogateescape")).hexdigest()  # a name that is no UTF-8: its bytes
    return digest[:16]


def backup(target: Path) -> str:
    """Copy an existing target with SQLite's online backup API; returns the backup path."""
    stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S")
    dest = target.with_name(f"{target.name}.backup-{stamp}")
    n = 1
    while dest.exists():
        dest = target.with_name(f"{target.name}.backup-{stamp}-{n}")
        n += 1
    src = open_readonly(target)
    remove_dead_leftovers(target.parent, PARTIAL)
    try:
        backup_file(src, dest)
    except sqlite3.DatabaseError as exc:
        raise ImportFailure(f"cannot back up target {target}: {exc}") from exc
    finally:
        src.close()
    return str(dest)


def staging_file(target: Path) -> Path:
    """A new, empty private file beside ``target`` to build a new target in, named with this pid and
    host so that the next run on this host deletes one a killed import left (with its SQLite side files)."""
    remove_dead_leftovers(target.parent, re.compile(rf"\.{re.escape(target.name)}\.(\d+)@(.+)\.\w+\.importing(-\w+)?"))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}@{HOST}.", suffix=".importing",
                                    dir=target.parent)
    except OSError as exc:
        raise ImportFailure(f"cannot create the target database in {target.parent}: {exc}") from exc
    os.close(fd)
    return Path(name)


def unjournaled(conn: sqlite3.Connection) -> None:
    """Write a staged target without WAL or fsyncs (each page once): nobody else knows the file and a
    failed import deletes it; the rollback journal stays in memory so that ROLLBACK still works."""
    conn.execute("PRAGMA journal_mode=MEMORY")
    conn.execute("PRAGMA synchronous=OFF")


class BackgroundSync:
    """Flushes a staged file (written without fsyncs) every second or so, on a thread that waits on the
    disk without holding the interpreter lock, so little is left for the final sync in ``publish``."""

    def __init__(self, path: Path, interval_s: float = 1.0):
        self._stop = threading.Event()
        self._fd = os.open(path, os.O_RDWR)
        self._thread = threading.Thread(target=self._run, args=(interval_s,), name="trove-import-sync", daemon=True)
        self._thread.start()

    def _run(self, interval_s: float) -> None:
        sync = getattr(os, "fdatasync", os.fsync)
        while not self._stop.wait(interval_s):
            try:
                sync(self._fd)
            except OSError:
                return  # publish's own fsync still makes the file durable

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        os.close(self._fd)


def publish(staged: Path, target: Path) -> None:
    """Move a completed staged database to ``target``, never replacing a file that appeared there."""
    with staged.open("rb+") as fh:
        os.fsync(fh.fileno())
    appeared = ImportFailure(f"{target} appeared while the import ran (is Hermes using it?); it was left as it "
                             "is and nothing was imported into it: run the import again")
    try:
        os.link(staged, target)
    except FileExistsError:
        raise appeared from None
    except OSError:  # no hard links on this file system
        if target.exists():
            raise appeared from None
        os.replace(staged, target)
    sync_directory(target.parent)


def discard(staged: Path) -> None:
    """Remove a staged file and any SQLite side files it left."""
    for suffix in ("", "-journal", "-wal", "-shm"):
        Path(str(staged) + suffix).unlink(missing_ok=True)


def imported_session_ids(target: Path) -> list[str]:
    """Session ids of earlier imports in ``target`` (``...:agent:...``), read-only; [] without a target."""
    if not target.exists():
        return []
    try:
        conn = _read_target(target)
    except sqlite3.DatabaseError:
        return []
    try:
        return [str(r[0]) for r in conn.execute("SELECT DISTINCT session_id FROM sessions WHERE platform='openclaw'"
                                                 " AND session_id LIKE '%:agent:%'")]
    except sqlite3.DatabaseError:
        return []
    finally:
        conn.close()


def _read_target(target: Path) -> sqlite3.Connection:
    """A checkpointed file (no -wal beside it) is read as immutable so that not even -wal/-shm files
    appear; a live one (Hermes running) is read through its WAL with mode=ro."""
    return open_readonly(target, immutable=not target.with_name(target.name + "-wal").exists())


class Ledger:
    """The import ledger's look-ups: the target ids of source keys an import already stored."""

    conn: sqlite3.Connection | None = None

    def messages(self, import_id: str, keys: Sequence[str]) -> dict[str, int]:
        return self._lookup("imported_messages", "store_id", import_id, keys)

    def nodes(self, import_id: str, keys: Sequence[str]) -> dict[str, int]:
        return self._lookup("imported_nodes", "node_id", import_id, keys)

    def _lookup(self, table: str, column: str, import_id: str, keys: Sequence[str]) -> dict[str, int]:
        if self.conn is None or not keys:
            return {}
        out: dict[str, int] = {}
        for i in range(0, len(keys), CHUNK):
            chunk = list(keys[i:i + CHUNK])
            sql = (f"SELECT source_key, {column} FROM {table} WHERE import_id=? AND source_key IN"
                   f" ({','.join('?' * len(chunk))})")
            out.update({str(k): int(v) for k, v in self.conn.execute(sql, [import_id, *chunk])})
        return out


class ReadOnlyLedger(Ledger):
    """What a target already holds for an import id, read without writing anything."""

    def __init__(self, target: Path):
        self.conn: sqlite3.Connection | None = None
        if not target.exists():
            return
        try:
            conn = _read_target(target)
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        except sqlite3.DatabaseError as exc:
            raise ImportFailure(f"target is not a readable SQLite database: {target} ({exc})") from exc
        if {"imported_messages", "imported_nodes"} <= names:
            self.conn = conn
        else:
            conn.close()

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


class Writer(Ledger):
    """Writes on the caller's transaction connection; also the ledger it writes to."""

    conn: sqlite3.Connection

    def __init__(self, runtime: Runtime, conn: sqlite3.Connection, import_id: str):
        self.store = runtime.store
        self.dag = runtime.dag
        self.conn = conn
        self.import_id = import_id

    def record_import(self, kind: str, sources: Sequence[str], options: dict[str, Any]) -> None:
        now = time.time()
        self.conn.execute(
            "INSERT INTO imports(import_id, kind, sources, options, first_at, last_at) VALUES (?,?,?,?,?,?)"
            " ON CONFLICT(import_id) DO UPDATE SET last_at=excluded.last_at",
            (self.import_id, kind, json.dumps(list(sources)), json.dumps(options, sort_keys=True), now, now))

    def append(self, key: SessionKey, rows: Sequence[SourceMessage]) -> list[int]:
        """Store the rows (prepared by the reader when it could) and record them in the ledger."""
        prepared = [r.row for r in rows if r.row is not None]
        if len(prepared) == len(rows):
            ids = self.store.insert_rows(self.conn, key, prepared)
        else:
            ids = self.store.append_bulk(key, [r.message for r in rows if r.message is not None], conn=self.conn)
        now = time.time()
        self.conn.executemany(
            "INSERT INTO imported_messages(import_id, source_key, store_id, meta, imported_at) VALUES (?,?,?,?,?)",
            [(self.import_id, r.key, sid, r.meta, now) for r, sid in zip(rows, ids, strict=True)])
        return ids

    def settle_session_times(self, session_id: str) -> None:
        """The session row takes its messages' original times, not the time of the import."""
        self.conn.execute(
            "UPDATE sessions SET created_at=(SELECT MIN(created_at) FROM messages WHERE session_id=?1),"
            " updated_at=(SELECT MAX(created_at) FROM messages WHERE session_id=?1)"
            " WHERE session_id=?1 AND EXISTS (SELECT 1 FROM messages WHERE session_id=?1)", (session_id,))

    def add_node(self, session_id: str, s: SourceSummary, depth: int, sources: Sequence[int]) -> int:
        """A leaf over store ids (depth 0) or a condensed node over child node ids."""
        sql = ("SELECT COALESCE(SUM(token_count),0), MIN(created_at), MAX(created_at) FROM messages WHERE store_id"
               if depth == 0 else "SELECT COALESCE(SUM(source_token_count),0), MIN(earliest_at), MAX(latest_at)"
               " FROM summary_nodes WHERE node_id")
        parts = [self.conn.execute(f"{sql} IN ({','.join('?' * len(run))})", run).fetchone()
                 for run in idlist.chunks(self.conn, sorted({int(i) for i in sources}))]  # each id once: IN counts a
        # repeated id once, and one repeated across two runs would be summed twice
        r = (sum(int(p[0] or 0) for p in parts), min((p[1] for p in parts if p[1] is not None), default=None),
             max((p[2] for p in parts if p[2] is not None), default=None))
        common: dict[str, Any] = dict(token_count=tokens.count(s.content), source_token_count=int(r[0] or 0),
                      earliest_at=s.earliest_at if s.earliest_at is not None else r[1],
                      latest_at=s.latest_at if s.latest_at is not None else r[2],
                      level=summary_level(s.content), model=s.model, expand_hint=expand_hint(s.content),
                      conn=self.conn)
        node = self.dag.add_leaf(session_id, s.content, sources, **common) if depth == 0 else \
            self.dag.add_condensed(session_id, depth, s.content, sources, **common)
        self.conn.execute("INSERT INTO imported_nodes(import_id, source_key, node_id, imported_at) VALUES (?,?,?,?)",
                          (self.import_id, s.key, node, time.time()))
        return node
