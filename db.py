"""The only place that opens SQLite.

``Database`` holds a path, never a live handle: connections are cached per thread and
per process, so engine copies (the host deep-copies the engine per agent) share them
safely. Writes go through ``transaction()`` (BEGIN IMMEDIATE under a per-file process
lock). Schema changes are named migrations recorded in ``schema_migrations``; a file
stamped by a newer schema is refused before any DDL runs.
"""
from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

SCHEMA_VERSION = 1
BUSY_TIMEOUT_MS = 30000


class SchemaTooNewError(RuntimeError):
    """The database was written by a newer hermes-trove schema."""


_local = threading.local()
_write_locks: dict[str, threading.RLock] = {}
_registry_lock = threading.Lock()


def _write_lock(path: str) -> threading.RLock:
    with _registry_lock:
        return _write_locks.setdefault(path, threading.RLock())


MIGRATIONS: list[tuple[str, str]] = [
    ("0001_core", """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS messages (
    store_id        INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id      TEXT NOT NULL,
    conversation_id TEXT NOT NULL DEFAULT '',
    platform        TEXT NOT NULL DEFAULT '',
    source          TEXT NOT NULL DEFAULT 'unknown',
    role            TEXT NOT NULL,
    content         TEXT NOT NULL DEFAULT '',
    content_is_json INTEGER NOT NULL DEFAULT 0,
    tool_calls      TEXT,
    tool_call_id    TEXT,
    tool_name       TEXT,
    extra           TEXT,
    token_count     INTEGER NOT NULL DEFAULT 0,
    identity        TEXT NOT NULL DEFAULT '',
    pinned          INTEGER NOT NULL DEFAULT 0,
    created_at      REAL NOT NULL,
    ingested_at     REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_session ON messages(session_id, store_id);
CREATE INDEX IF NOT EXISTS messages_session_time ON messages(session_id, created_at);
CREATE INDEX IF NOT EXISTS messages_identity ON messages(session_id, identity);
CREATE INDEX IF NOT EXISTS messages_source ON messages(source, session_id, store_id);
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(
    content, tool_calls, content='messages', content_rowid='store_id',
    tokenize='porter unicode61 remove_diacritics 2');
CREATE TRIGGER IF NOT EXISTS messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content, tool_calls) VALUES (new.store_id, new.content, new.tool_calls);
END;
CREATE TRIGGER IF NOT EXISTS messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, tool_calls)
    VALUES ('delete', old.store_id, old.content, old.tool_calls);
END;
CREATE TRIGGER IF NOT EXISTS messages_fts_update AFTER UPDATE OF content, tool_calls ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, tool_calls)
    VALUES ('delete', old.store_id, old.content, old.tool_calls);
    INSERT INTO messages_fts(rowid, content, tool_calls) VALUES (new.store_id, new.content, new.tool_calls);
END;

CREATE TABLE IF NOT EXISTS summary_nodes (
    node_id            INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id         TEXT NOT NULL,
    depth              INTEGER NOT NULL,
    summary            TEXT NOT NULL,
    token_count        INTEGER NOT NULL DEFAULT 0,
    source_token_count INTEGER NOT NULL DEFAULT 0,
    earliest_at        REAL,
    latest_at          REAL,
    level              TEXT NOT NULL DEFAULT 'normal',
    model              TEXT NOT NULL DEFAULT '',
    expand_hint        TEXT NOT NULL DEFAULT '',
    created_at         REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS summary_nodes_session ON summary_nodes(session_id, depth, node_id);
CREATE TABLE IF NOT EXISTS node_messages (
    node_id  INTEGER NOT NULL REFERENCES summary_nodes(node_id) ON DELETE CASCADE,
    ordinal  INTEGER NOT NULL,
    store_id INTEGER NOT NULL,
    PRIMARY KEY (node_id, ordinal)
);
CREATE INDEX IF NOT EXISTS node_messages_store ON node_messages(store_id);
CREATE TABLE IF NOT EXISTS node_children (
    node_id  INTEGER NOT NULL REFERENCES summary_nodes(node_id) ON DELETE CASCADE,
    ordinal  INTEGER NOT NULL,
    child_id INTEGER NOT NULL,
    PRIMARY KEY (node_id, ordinal)
);
CREATE INDEX IF NOT EXISTS node_children_child ON node_children(child_id);
CREATE TABLE IF NOT EXISTS carried_nodes (
    session_id TEXT NOT NULL,
    node_id    INTEGER NOT NULL REFERENCES summary_nodes(node_id) ON DELETE CASCADE,
    from_session_id TEXT NOT NULL,
    carried_at REAL NOT NULL,
    PRIMARY KEY (session_id, node_id)
);
CREATE VIRTUAL TABLE IF NOT EXISTS nodes_fts USING fts5(
    summary, content='summary_nodes', content_rowid='node_id',
    tokenize='porter unicode61 remove_diacritics 2');
CREATE TRIGGER IF NOT EXISTS nodes_fts_insert AFTER INSERT ON summary_nodes BEGIN
    INSERT INTO nodes_fts(rowid, summary) VALUES (new.node_id, new.summary);
END;
CREATE TRIGGER IF NOT EXISTS nodes_fts_delete AFTER DELETE ON summary_nodes BEGIN
    INSERT INTO nodes_fts(nodes_fts, rowid, summary) VALUES ('delete', old.node_id, old.summary);
END;
CREATE TRIGGER IF NOT EXISTS nodes_fts_update AFTER UPDATE OF summary ON summary_nodes BEGIN
    INSERT INTO nodes_fts(nodes_fts, rowid, summary) VALUES ('delete', old.node_id, old.summary);
    INSERT INTO nodes_fts(rowid, summary) VALUES (new.node_id, new.summary);
END;

CREATE TABLE IF NOT EXISTS sessions (
    session_id      TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL DEFAULT '',
    platform        TEXT NOT NULL DEFAULT '',
    ingest_len      INTEGER NOT NULL DEFAULT 0,
    ingest_identity TEXT NOT NULL DEFAULT '',
    frontier_store_id INTEGER NOT NULL DEFAULT 0,
    last_rotate_at  REAL,
    last_rotate_backup TEXT,
    previous_session_id TEXT,
    created_at      REAL NOT NULL,
    updated_at      REAL NOT NULL,
    ended_at        REAL
);
"""),
    ("0002_imports", """
CREATE TABLE IF NOT EXISTS imports (
    import_id  TEXT PRIMARY KEY,
    kind       TEXT NOT NULL,
    sources    TEXT NOT NULL,
    options    TEXT NOT NULL DEFAULT '{}',
    first_at   REAL NOT NULL,
    last_at    REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS imported_messages (
    import_id  TEXT NOT NULL,
    source_key TEXT NOT NULL,
    store_id   INTEGER NOT NULL,
    meta       TEXT,
    imported_at REAL NOT NULL,
    PRIMARY KEY (import_id, source_key)
);
CREATE INDEX IF NOT EXISTS imported_messages_store ON imported_messages(store_id);
CREATE TABLE IF NOT EXISTS imported_nodes (
    import_id  TEXT NOT NULL,
    source_key TEXT NOT NULL,
    node_id    INTEGER NOT NULL,
    imported_at REAL NOT NULL,
    PRIMARY KEY (import_id, source_key)
);
"""),
    ("0003_session_frontier", """
CREATE TABLE IF NOT EXISTS session_frontier (
    session_id TEXT NOT NULL,
    node_id    INTEGER NOT NULL REFERENCES summary_nodes(node_id) ON DELETE CASCADE,
    PRIMARY KEY (session_id, node_id)
);
CREATE INDEX IF NOT EXISTS session_frontier_node ON session_frontier(node_id);
INSERT OR IGNORE INTO session_frontier(session_id, node_id)
SELECT v.session_id, v.node_id FROM (
    SELECT session_id, node_id FROM summary_nodes
    UNION SELECT session_id, node_id FROM carried_nodes) v
WHERE NOT EXISTS (
    SELECT 1 FROM node_children c JOIN summary_nodes p ON p.node_id = c.node_id
    WHERE c.child_id = v.node_id AND (p.session_id = v.session_id OR p.node_id IN
        (SELECT node_id FROM carried_nodes WHERE session_id = v.session_id)));
"""),
    # Row-at-a-time FTS5 inserts from a trigger cost several times a batched insert, so the
    # store indexes each batch of new rows with one statement (MessageStore._index_new_rows).
    ("0004_fts_insert_by_store", """
DROP TRIGGER IF EXISTS messages_fts_insert;
"""),
    # The import ledger is only ever looked up by its key: stored clustered on it, with no
    # second index, each imported row costs one B-tree insert here instead of three.
    ("0005_import_ledger_by_key", """
CREATE TABLE imported_messages_by_key (
    import_id  TEXT NOT NULL,
    source_key TEXT NOT NULL,
    store_id   INTEGER NOT NULL,
    meta       TEXT,
    imported_at REAL NOT NULL,
    PRIMARY KEY (import_id, source_key)
) WITHOUT ROWID;
INSERT INTO imported_messages_by_key(import_id, source_key, store_id, meta, imported_at)
SELECT import_id, source_key, store_id, meta, imported_at FROM imported_messages;
DROP TABLE imported_messages;
ALTER TABLE imported_messages_by_key RENAME TO imported_messages;
"""),
]


class Database:
    """A SQLite file. Copies share the file and the per-thread connections."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = str(Path(path).expanduser())

    def __deepcopy__(self, memo: dict) -> "Database":
        return self

    # -- connections -------------------------------------------------------
    def connect(self) -> sqlite3.Connection:
        """This thread's connection, opened and migrated on first use."""
        conns: dict[tuple[int, str], sqlite3.Connection] = getattr(_local, "conns", None) or {}
        _local.conns = conns
        key = (os.getpid(), self.path)
        conn = conns.get(key)
        if conn is None:
            conn = self._open()
            conns[key] = conn
        return conn

    def _open(self) -> sqlite3.Connection:
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        try:
            conn.execute("PRAGMA journal_mode=WAL")
        except sqlite3.OperationalError:
            pass  # another process holds the file mid-switch; WAL is persistent once set
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        if not self._is_current(conn):
            self._migrate(conn)
        return conn

    @staticmethod
    def _is_current(conn: sqlite3.Connection) -> bool:
        try:
            done = {r[0] for r in conn.execute("SELECT name FROM schema_migrations")}
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        except sqlite3.OperationalError:
            return False
        if row is not None and int(row[0]) > SCHEMA_VERSION:
            return False  # let _migrate raise the clear error
        return row is not None and all(name in done for name, _ in MIGRATIONS)

    def close(self) -> None:
        conns = getattr(_local, "conns", {})
        conn = conns.pop((os.getpid(), self.path), None)
        if conn is not None:
            conn.close()

    # -- transactions ------------------------------------------------------
    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A short write transaction: BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error)."""
        conn = self.connect()
        with _write_lock(self.path):
            if conn.in_transaction:  # nested use joins the outer transaction
                yield conn
                return
            _retry(lambda: conn.execute("BEGIN IMMEDIATE"))
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            _retry(lambda: conn.execute("COMMIT"))

    def read(self) -> sqlite3.Connection:
        return self.connect()

    # -- schema ------------------------------------------------------------
    def _migrate(self, conn: sqlite3.Connection) -> None:
        with _write_lock(self.path):
            _retry(lambda: conn.execute("BEGIN IMMEDIATE"))
            try:
                conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
                conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
                if row is not None and int(row[0]) > SCHEMA_VERSION:
                    raise SchemaTooNewError(
                        f"{self.path} has schema version {row[0]}, newer than this hermes-trove "
                        f"(supports {SCHEMA_VERSION}); upgrade hermes-trove or use another TROVE_DATABASE_PATH")
                done = {r[0] for r in conn.execute("SELECT name FROM schema_migrations")}
                for name, sql in MIGRATIONS:
                    if name in done:
                        continue
                    for statement in split_sql(sql):
                        conn.execute(statement)
                    conn.execute("INSERT INTO schema_migrations(name, applied_at) VALUES (?, ?)", (name, time.time()))
                conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def applied_migrations(self) -> list[str]:
        return [r[0] for r in self.read().execute("SELECT name FROM schema_migrations ORDER BY name")]


def split_sql(script: str) -> list[str]:
    """Split a migration script into statements, keeping trigger bodies whole."""
    out, buf = [], ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                out.append(buf.strip())
            buf = ""
    if buf.strip():
        out.append(buf.strip())
    return out


def open_readonly(path: str | os.PathLike[str], immutable: bool = False,
                  timeout_s: float = BUSY_TIMEOUT_MS / 1000) -> sqlite3.Connection:
    """A read-only connection to any SQLite file (ours or a foreign source database).

    ``immutable`` reads a file nobody writes without creating -wal/-shm beside it.
    """
    uri = Path(path).resolve().as_uri() + ("?immutable=1" if immutable else "?mode=ro")
    conn = sqlite3.connect(uri, uri=True, timeout=timeout_s, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    return conn


def backup_file(source: sqlite3.Connection, dest: str | os.PathLike[str]) -> int:
    """Copy ``source`` to ``dest`` with the online backup API, atomically; returns bytes.

    The copy is made in a temporary file beside ``dest`` (one consistent snapshot even
    while other processes write), switched to a rollback journal, checked with
    ``quick_check`` and only then renamed into place.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.{threading.get_ident()}.partial")
    target = sqlite3.connect(str(tmp), isolation_level=None)
    try:
        source.backup(target)
        target.execute("PRAGMA journal_mode=DELETE")
        verdict = target.execute("PRAGMA quick_check").fetchone()[0]
        if verdict != "ok":
            raise sqlite3.DatabaseError(f"backup copy failed quick_check: {verdict}")
    except BaseException:
        target.close()
        tmp.unlink(missing_ok=True)
        raise
    target.close()
    os.replace(tmp, dest)
    return dest.stat().st_size


def _retry(fn: Callable[[], object], attempts: int = 5) -> object:
    """Retry a statement that hit SQLITE_BUSY after the busy timeout (rare; cross-process)."""
    for i in range(attempts):
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc) or i == attempts - 1:
                raise
            time.sleep(0.05 * (i + 1))
    return None
