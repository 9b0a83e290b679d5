"""The only place that opens SQLite; it also applies and inspects the schema.

``Database`` holds a path, never a live handle: connections are cached per thread and process, so
engine copies share them. Writes go through ``transaction()`` (BEGIN IMMEDIATE under a per-file
lock). ``migrate`` applies what the ``schema_migrations`` ledger lacks and refuses a file whose
ledger names a migration this build does not know; when to check or repair is ``ops.maintenance``'s.
"""
from __future__ import annotations

import contextlib
import functools
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import packed
from .background import PassScheduler
from .migrations import FTS_TABLES, MIGRATIONS, OPTIONAL_DROPS, OPTIONAL_MIGRATIONS
from .pathprobe import non_directory_ancestor

HOST = socket.gethostname().replace("/", "_")  # names this host in lease owners and temporary files

BUSY_TIMEOUT_MS = 30000
# Past CHECKPOINT_WAL_BYTES (SQLite's default) a background thread checkpoints, at most once an interval
# (a WAL file keeps its size), so a commit does not; the safety net bounds the WAL if it falls behind.
CHECKPOINT_WAL_BYTES = 1000 * 4096
CHECKPOINT_INTERVAL_S = 1.0
SAFETY_NET_PAGES = 16000
_CHECKPOINTS = PassScheduler("trove-checkpoint")
LEDGER_DDL = "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)"
FTS_SHADOWS = ("data", "idx", "docsize", "config", "content")
KNOWN_MIGRATIONS = frozenset(name for name, _ in MIGRATIONS)
# Opt-in sets share the ledger: known (never refused) but never required.
OPTIONAL_NAMES = frozenset(name for entries in OPTIONAL_MIGRATIONS.values() for name, _ in entries)


class SchemaTooNewError(RuntimeError):
    """The database's migration ledger names migrations this build does not know."""


class UnusableDatabaseError(sqlite3.DatabaseError):
    """The database path cannot hold a trove database; the message names the path and the variable.

    ``path`` and ``why`` (the short reason, e.g. "its parent /x is not a directory") are kept apart
    for reports."""

    def __init__(self, message: str, path: str = "", why: str = ""):
        super().__init__(message)
        self.path, self.why = path, why


class ForeignDatabaseError(sqlite3.DatabaseError):
    """The file is a SQLite database trove did not make (tables, but no trove ledger); it is left as it is."""


def _unusable(path: str, exc: BaseException) -> UnusableDatabaseError:
    p = Path(path)
    blocker = non_directory_ancestor(p)
    if isinstance(exc, ForeignDatabaseError):
        why = str(exc)
    elif p.is_dir():
        why = "it is a directory"
    elif blocker is not None:
        why = f"its parent {blocker} is not a directory"
    elif isinstance(exc, PermissionError) or "readonly" in str(exc).lower() or "permission" in str(exc).lower():
        why = "it is not writable"
    elif isinstance(exc, sqlite3.DatabaseError) and "not a database" in str(exc).lower():
        why = "it is not a SQLite database"
    else:
        why = f"{type(exc).__name__}: {exc}"
    return UnusableDatabaseError(
        f"trove database {path} cannot be used ({why}); fix or move that file, or set TROVE_DATABASE_PATH "
        "to another file", path=path, why=why)


_local = threading.local()
_write_locks: dict[str, threading.RLock] = {}
_registry_lock = threading.Lock()


def _write_lock(path: str) -> threading.RLock:
    with _registry_lock:
        return _write_locks.setdefault(path, threading.RLock())


class _ThreadConnections(dict[tuple[int, str], sqlite3.Connection]):
    """One thread's connections, closed when the thread ends and its thread-local dies. A dropped sqlite3
    connection sits in a reference cycle: without this a finished thread's connection keeps its file
    descriptor until the cyclic GC happens to run."""

    def __del__(self) -> None:
        pid = os.getpid()
        for (owner, _), conn in list(self.items()):
            if owner == pid:  # a forked child must not close its parent's handles
                with contextlib.suppress(Exception):
                    conn.close()


class Database:
    """A SQLite file. Copies share the file and the per-thread connections."""

    kind = "sqlite"

    def __init__(self, path: str | os.PathLike[str]):
        self.path = str(Path(path).expanduser())

    def __deepcopy__(self, memo: dict) -> Database:
        return self

    # -- connections -------------------------------------------------------
    def connect(self) -> sqlite3.Connection:
        """This thread's connection, opened and migrated on first use."""
        conns: _ThreadConnections | None = getattr(_local, "conns", None)
        if conns is None:
            conns = _local.conns = _ThreadConnections()
        key = (os.getpid(), self.path)
        conn = conns.get(key)
        if conn is None:
            conn = conns[key] = self._open()
        return conn

    def _open(self) -> sqlite3.Connection:
        try:
            if Path(self.path).is_dir():
                raise IsADirectoryError(self.path)
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise _unusable(self.path, exc) from exc
        try:
            return self._prepare(conn)
        except SchemaTooNewError:
            raise
        except (OSError, sqlite3.Error) as exc:
            if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc).lower():
                raise  # busy, not broken
            raise _unusable(self.path, exc) from exc

    def _prepare(self, conn: sqlite3.Connection) -> sqlite3.Connection:
        try:
            conn.row_factory = sqlite3.Row
            packed.register(conn)
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'"
                                                 " AND name NOT LIKE 'sqlite!_%' ESCAPE '!' ORDER BY name")]
            if tables and "schema_migrations" not in tables:  # checked before the first write (WAL is one)
                raise ForeignDatabaseError(f"it is another program's SQLite database (tables {', '.join(tables[:5])}"
                                           f"{', ...' if len(tables) > 5 else ''}), not trove's")
            with contextlib.suppress(sqlite3.OperationalError):  # another process mid-switch: WAL persists once set
                conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(f"PRAGMA wal_autocheckpoint={SAFETY_NET_PAGES}")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute("PRAGMA trusted_schema=ON")  # our own file: its view and triggers call trove_text
            applied = set(applied_names(conn))
            if applied - OPTIONAL_NAMES != KNOWN_MIGRATIONS or behind_sets(applied):
                with _write_lock(self.path):
                    migrate(conn)
                    for feature in behind_sets(set(applied_names(conn))):
                        migrate_optional(conn, feature)
        except BaseException:
            conn.close()  # a refused or broken file must not leave its handle open
            raise
        return conn

    def close(self) -> None:
        conns = getattr(_local, "conns", {})
        conn = conns.pop((os.getpid(), self.path), None)
        if conn is not None:
            conn.close()

    # -- transactions ------------------------------------------------------
    @contextlib.contextmanager
    def transaction(self, wait_s: float | None = None) -> Iterator[sqlite3.Connection]:
        """A short write transaction (BEGIN IMMEDIATE ... COMMIT, ROLLBACK on error) waiting ``wait_s`` per lock."""
        conn, lock = self.connect(), _write_lock(self.path)
        if not lock.acquire(timeout=-1 if wait_s is None else wait_s):  # then the file's lock: begin_within
            raise sqlite3.OperationalError("database is locked (by another thread of this process)")
        with contextlib.ExitStack() as held:  # not ``with lock``: its wait is bounded above
            held.callback(lock.release)
            if conn.in_transaction:  # nested use joins the outer transaction
                yield conn
                return
            begin_within(conn, wait_s)
            try:
                yield conn
            except BaseException:
                _rollback(conn)
                raise
            retry(lambda: conn.execute("COMMIT"))
        with contextlib.suppress(OSError):  # the WAL goes back into the file off the turn
            if os.stat(self.path + "-wal").st_size >= CHECKPOINT_WAL_BYTES:
                _CHECKPOINTS.start(self.path, lambda: self.checkpoint, interval_s=CHECKPOINT_INTERVAL_S)

    def checkpoint(self) -> None:
        """A passive checkpoint on its own connection: copies what no reader needs, waits for nobody."""
        own = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        with contextlib.closing(own) as conn:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()

    def read(self) -> sqlite3.Connection:
        return self.connect()

    # -- schema and meta ---------------------------------------------------
    def applied_migrations(self) -> list[str]:
        return sorted(applied_names(self.read()))

    def ensure_optional(self, feature: str) -> list[str]:
        """Create the opt-in set ``feature`` if this file lacks it; returns the names applied."""
        conn = self.connect()
        if optional_applied(conn, feature):
            return []
        with _write_lock(self.path):
            return migrate_optional(conn, feature)

    def drop_optional(self, feature: str) -> list[str]:
        """Drop the opt-in set ``feature`` (its tables and ledger names); returns the names removed."""
        with _write_lock(self.path):
            return drop_optional(self.connect(), feature)

    def has_optional(self, feature: str) -> bool:
        return optional_applied(self.read(), feature)

    def set_meta(self, values: Mapping[str, str | None]) -> None:
        """Write ``meta`` keys in one transaction; a None value deletes the key."""
        with self.transaction() as conn:
            write_meta(conn, values)


def write_meta(conn: sqlite3.Connection, values: Mapping[str, str | None]) -> None:
    """Set ``meta`` keys inside the caller's transaction (either backend); a None value deletes the key."""
    for key, value in values.items():
        if value is None:
            conn.execute("DELETE FROM meta WHERE key=?", (key,))
        else:
            conn.execute("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET"
                         " value=excluded.value", (key, value))


# -- migrations ------------------------------------------------------------------------

def applied_names(conn: sqlite3.Connection) -> list[str]:
    """The names in the file's ledger (none when the file has no ledger yet)."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_migrations'").fetchone() is None:
        return []
    return [str(r[0]) for r in conn.execute("SELECT name FROM schema_migrations")]


def refuse_newer_schema(conn: sqlite3.Connection) -> None:
    """Raise ``SchemaTooNewError`` when the ledger names a migration this build does not know."""
    unknown = sorted(set(applied_names(conn)) - KNOWN_MIGRATIONS - OPTIONAL_NAMES)
    if unknown:  # named by the file behind the connection (``:memory:`` for an in-memory one)
        path = next((str(r[2]) for r in conn.execute("PRAGMA database_list") if r[1] == "main"), "") or ":memory:"
        raise SchemaTooNewError(
            f"{path} was migrated by a newer hermes-trove: its schema_migrations ledger holds"
            f" {', '.join(unknown)}, unknown to this build. Upgrade hermes-trove to open it, or point"
            f" TROVE_DATABASE_PATH at another file.")


def migrate(conn: sqlite3.Connection, stop_before: str | None = None) -> list[str]:
    """Apply, in order, the migrations the ledger lacks; returns the names applied. One BEGIN IMMEDIATE on an
    autocommit connection: the first process migrates, the others wait on the busy timeout and find nothing
    pending. ``stop_before`` (a migration name) leaves that migration and every later one unapplied."""
    if stop_before is not None and stop_before not in KNOWN_MIGRATIONS:
        raise ValueError(f"unknown migration {stop_before!r}")
    with _immediate(conn):
        refuse_newer_schema(conn)
        return _apply_pending(conn, MIGRATIONS, stop_before)


def migrate_optional(conn: sqlite3.Connection, feature: str) -> list[str]:
    """Apply the opt-in set ``feature`` (``migrations.OPTIONAL_MIGRATIONS``) through the ledger; returns the
    names applied. Used only when the feature is turned on (``Database.ensure_optional``)."""
    if optional_applied(conn, feature):
        return []  # the common case: a read, no write lock
    with _immediate(conn):
        return _apply_pending(conn, OPTIONAL_MIGRATIONS[feature])


def _apply_pending(conn: sqlite3.Connection, entries: Sequence[tuple[str, str]],
                   stop_before: str | None = None) -> list[str]:
    """Inside a write transaction: run the scripts of ``entries`` the ledger lacks, in order, and
    record each in the ledger; stop at ``stop_before``. Returns the names applied."""
    packed.register(conn)  # the full-text index's rebuild reads rows through ``trove_text``
    conn.execute(LEDGER_DDL)
    done = set(applied_names(conn))
    applied: list[str] = []
    for name, script in entries:
        if name == stop_before:
            break
        if name in done:
            continue
        for statement in split_sql(script):
            conn.execute(statement)
        conn.execute("INSERT INTO schema_migrations(name, applied_at) VALUES (?, ?)", (name, time.time()))
        applied.append(name)
    return applied


def behind_sets(applied: set[str]) -> list[str]:
    """The opt-in sets a file holds but not wholly: this build added a migration to them since.
    Opening the file applies the rest, so a set is never read as absent while its tables exist."""
    return [feature for feature, entries in OPTIONAL_MIGRATIONS.items()
            if applied & {name for name, _ in entries} and not {name for name, _ in entries} <= applied]


def optional_applied(conn: sqlite3.Connection, feature: str) -> bool:
    """True when every migration of the opt-in set ``feature`` is in the file's ledger."""
    return {name for name, _ in OPTIONAL_MIGRATIONS[feature]} <= set(applied_names(conn))


def drop_optional(conn: sqlite3.Connection, feature: str) -> list[str]:
    """Drop the opt-in set's tables and remove its names from the ledger; returns the names removed."""
    names = [name for name, _ in OPTIONAL_MIGRATIONS[feature]]
    with _immediate(conn):
        present = [n for n in names if n in set(applied_names(conn))]
        for statement in split_sql(OPTIONAL_DROPS[feature]):
            conn.execute(statement)
        if present:
            conn.executemany("DELETE FROM schema_migrations WHERE name=?", [(n,) for n in present])
    return present


def optional_schema(feature: str) -> SchemaObjects:
    """What the opt-in set ``feature`` adds to a migrated file (built in memory)."""
    base = blank_schema()
    with contextlib.closing(sqlite3.connect(":memory:", isolation_level=None)) as conn:
        migrate(conn)
        migrate_optional(conn, feature)
        full = schema_objects(conn)
    return SchemaObjects(*({k: v for k, v in getattr(full, f).items() if k not in getattr(base, f)}
                           for f in ("tables", "fts", "triggers", "indexes", "views")))


def split_sql(script: str) -> list[str]:
    """Split a migration script into statements, keeping trigger bodies whole."""
    out, buf = [], ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    return [statement for statement in (*out, buf.strip()) if statement]


# -- schema inspection -------------------------------------------------------------------

@dataclass(frozen=True)
class SchemaObjects:
    """Named schema objects by kind, each with the CREATE statement ``sqlite_master`` keeps. FTS shadow tables,
    SQLite's own tables and automatic indexes are left out: they come and go with the objects that own them."""

    tables: Mapping[str, str]
    fts: Mapping[str, str]
    triggers: Mapping[str, str]
    indexes: Mapping[str, str]
    views: Mapping[str, str]


def schema_objects(conn: sqlite3.Connection) -> SchemaObjects:
    rows = [(str(r[0]), str(r[1]), r[2]) for r in conn.execute("SELECT type, name, sql FROM sqlite_master")]
    virtual = {name: sql for kind, name, sql in rows
               if kind == "table" and str(sql or "").upper().startswith("CREATE VIRTUAL TABLE")}
    shadows = {f"{name}_{suffix}" for name in virtual for suffix in FTS_SHADOWS}

    def named(kind: str) -> dict[str, str]:
        return {name: str(sql) for k, name, sql in rows
                if k == kind and sql is not None and not name.startswith("sqlite_")
                and name not in virtual and name not in shadows}

    return SchemaObjects(named("table"), virtual, named("trigger"), named("index"), named("view"))


@functools.lru_cache(maxsize=1)
def blank_schema() -> SchemaObjects:
    """What a blank file holds once every migration has run (built in memory once)."""
    with contextlib.closing(sqlite3.connect(":memory:", isolation_level=None)) as conn:
        migrate(conn)
        return schema_objects(conn)


def create_trigger(conn: sqlite3.Connection, name: str) -> None:
    """Create a trigger as the migrations define it."""
    conn.execute(blank_schema().triggers[name])


def create_index(conn: sqlite3.Connection, name: str) -> None:
    """Create an index as the migrations define it."""
    conn.execute(blank_schema().indexes[name])


def create_view(conn: sqlite3.Connection, name: str) -> None:
    """Create a view as the migrations define it."""
    conn.execute(blank_schema().views[name])


# -- meta ----------------------------------------------------------------------------------

def meta_value(conn: sqlite3.Connection, key: str) -> str | None:
    try:
        r = conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
    except sqlite3.OperationalError:
        return None
    return None if r is None else str(r[0])


# -- FTS upkeep ------------------------------------------------------------------------------

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
    # One statement, so one snapshot: counts read apart disagree whenever another process commits between.
    exact_sql = (f"(SELECT COUNT(*) FROM {content} c WHERE NOT EXISTS (SELECT 1 FROM {fts}_docsize d"
                 f" WHERE d.id = c.{rowid})), (SELECT COUNT(*) FROM {fts}_docsize d WHERE NOT EXISTS"
                 f" (SELECT 1 FROM {content} c WHERE c.{rowid} = d.id))") if exact else "0, 0"
    row = conn.execute(f"SELECT (SELECT COUNT(*) FROM {content}), (SELECT COUNT(*) FROM {fts}_docsize),"
                       f" {exact_sql}").fetchone()
    return FtsSync(fts, *(int(v) for v in row))


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


def rebuild_fts(conn: sqlite3.Connection, fts: str) -> None:
    """Re-read every content row into the index (FTS5 ``rebuild``)."""
    conn.execute(f"INSERT INTO {fts}({fts}) VALUES('rebuild')")


def recreate_fts(conn: sqlite3.Connection, fts: str) -> None:
    """Drop the index and whatever is left of its shadow tables, then create it empty."""
    try:
        conn.execute(f"DROP TABLE IF EXISTS {fts}")
    except sqlite3.DatabaseError:
        # A damaged config row stops SQLite from even loading the table to drop it.
        conn.execute(f"INSERT OR REPLACE INTO {fts}_config(k, v) VALUES ('version', ?)", (_fts5_version(conn),))
        conn.execute(f"DROP TABLE IF EXISTS {fts}")
    for shadow in FTS_SHADOWS:
        conn.execute(f"DROP TABLE IF EXISTS {fts}_{shadow}")
    conn.execute(blank_schema().fts[fts])


def _fts5_version(conn: sqlite3.Connection) -> int:
    """The FTS5 file-format version this SQLite writes (read from a throwaway temp table)."""
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.trove_fts_probe USING fts5(x)")
    try:
        row = conn.execute("SELECT v FROM temp.trove_fts_probe_config WHERE k='version'").fetchone()
    finally:
        conn.execute("DROP TABLE temp.trove_fts_probe")
    return int(row[0]) if row else 4


# -- other files ---------------------------------------------------------------------------

def open_readonly(path: str | os.PathLike[str], immutable: bool = False,
                  timeout_s: float = BUSY_TIMEOUT_MS / 1000) -> sqlite3.Connection:
    """A read-only connection to any SQLite file (ours or a foreign source database).

    ``immutable`` reads a file nobody writes without creating -wal/-shm beside it.
    """
    uri = Path(path).resolve().as_uri() + ("?immutable=1" if immutable else "?mode=ro")
    conn = sqlite3.connect(uri, uri=True, timeout=timeout_s, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    packed.register(conn)
    return conn


def open_trove_readonly(path: str | os.PathLike[str], immutable: bool = False) -> sqlite3.Connection:
    """A read-only connection to a trove database, refused when a newer build migrated it."""
    conn = open_readonly(path, immutable=immutable)
    try:
        refuse_newer_schema(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def backup_file(source: sqlite3.Connection, dest: str | os.PathLike[str]) -> int:
    """Copy ``source`` to ``dest`` with the online backup API, atomically; returns bytes.

    The copy is made in a temporary file beside ``dest`` (one consistent snapshot even
    while other processes write), switched to a rollback journal, checked with
    ``quick_check`` and only then renamed into place.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}@{HOST}.{threading.get_ident()}.partial")
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


@contextlib.contextmanager
def _immediate(conn: sqlite3.Connection) -> Iterator[None]:
    """One BEGIN IMMEDIATE on an autocommit connection (``retry``): COMMIT at the end, ROLLBACK if the block raises."""
    retry(lambda: conn.execute("BEGIN IMMEDIATE"))
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise


def begin_within(conn: sqlite3.Connection, wait_s: float | None) -> object:
    """BEGIN IMMEDIATE, retried up to the busy timeout (``wait_s`` None), else tried once waiting ``wait_s``."""
    if wait_s is None:
        return retry(lambda: conn.execute("BEGIN IMMEDIATE"))
    conn.execute(f"PRAGMA busy_timeout={max(0, int(wait_s * 1000))}")
    try:
        return conn.execute("BEGIN IMMEDIATE")
    finally:
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")


def _rollback(conn: sqlite3.Connection) -> None:
    """Undo the open transaction, if SQLite has not already: after SQLITE_FULL (and some I/O errors)
    it rolls back by itself, and a second ROLLBACK would hide the error that matters."""
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def retry(fn: Callable[[], object], attempts: int = 5) -> object:
    """Retry a statement SQLite refused as busy before the busy timeout had passed (rare; cross-process); once
    the attempts together have waited that long the lock is held, and the caller degrades."""
    started = time.monotonic()
    for i in range(attempts):
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            busy = "locked" in str(exc) or "busy" in str(exc)
            if not busy or i == attempts - 1 or time.monotonic() - started >= BUSY_TIMEOUT_MS / 1000:
                raise
            time.sleep(0.05 * (i + 1))
    return None
