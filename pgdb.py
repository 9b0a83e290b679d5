"""The only place that opens PostgreSQL: the server backend of the store.

``PgDatabase`` has ``Database``'s shape, so the data modules run one SQL text on either backend:
``PgConnection`` turns their SQLite-style ``?`` and ``:name`` placeholders into psycopg's. Server-only
SQL lives in ``pgtext`` and ``pgschema``. Nothing connects at load: a server down at start is an
outage, not a load failure.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import select
import socket
import threading
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from . import pgschema
from .config import redact_url
from .db import write_meta
from .version import install_hint

CONNECT_TIMEOUT_S = 5
STATEMENT_TIMEOUT_MS = 60000
STALL_S = STATEMENT_TIMEOUT_MS / 1000 + 5  # a wait past the server's own statement timeout: it is not answering
# SQLSTATE of a lock_timeout that ran out (``backend.settled_heads``' busy): rolled back, the connection is sound
LOCK_NOT_AVAILABLE = "55P03"
# TCP keepalives, so a link that drops silently (no reset) fails a statement in about 25 s rather
# than at STALL_S: idle 10 s, then a probe every 5 s, dead after 3 unanswered; unacknowledged
# writes give up after TCP_USER_TIMEOUT_MS. Each applies only where the operator set none.
KEEPALIVES = {"keepalives": "1", "keepalives_idle": "10", "keepalives_interval": "5", "keepalives_count": "3"}
TCP_USER_TIMEOUT_MS = 25000
log = logging.getLogger("hermes_trove.pgdb")
_SCHEMES = ("postgresql://", "postgres://")


class StoreSelectionError(ValueError):
    """``TROVE_DATABASE_URL`` cannot select a store: malformed, or the driver is missing."""


def check_url(url: str) -> str:
    """``url`` stripped, once it is a PostgreSQL URL or libpq key=value string psycopg can parse.

    Raises ``StoreSelectionError`` naming the variable and the fix; touches no network.
    """
    value = (url or "").strip()
    if not value:
        raise StoreSelectionError("TROVE_DATABASE_URL is empty")
    if "://" in value and not value.startswith(_SCHEMES):
        raise StoreSelectionError(
            f"TROVE_DATABASE_URL={redact_url(value)!r} is not a PostgreSQL URL: it must start with postgresql://"
            " (or be a libpq string such as 'service=trove'); unset it to keep the SQLite file")
    if "://" not in value and "=" not in value:
        raise StoreSelectionError(
            f"TROVE_DATABASE_URL={redact_url(value)!r} is neither a postgresql:// URL nor a libpq key=value string"
            " (for a service name write 'service=NAME')")
    conninfo = _driver().conninfo
    try:
        if "://" in value:
            urlsplit(value).port  # noqa: B018  (a port that is not a number raises here; libpq waits)
        conninfo.conninfo_to_dict(value)
    except Exception as exc:  # psycopg.ProgrammingError: the parser's own words
        raise StoreSelectionError(f"TROVE_DATABASE_URL={redact_url(value)!r} is malformed: {exc}") from None
    return value


def _service_settings(name: str) -> dict[str, str] | None:
    """The keys libpq reads for service ``name`` from the files it looks in (PGSERVICEFILE or
    ~/.pg_service.conf, then PGSYSCONFDIR's pg_service.conf); None when no file here defines it."""
    import configparser

    files = [Path(os.environ.get("PGSERVICEFILE") or Path.home() / ".pg_service.conf")]
    if os.environ.get("PGSYSCONFDIR"):
        files.append(Path(os.environ["PGSYSCONFDIR"]) / "pg_service.conf")
    for file in files:
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        try:
            parser.read(file, encoding="utf-8")
        except (OSError, configparser.Error, UnicodeDecodeError):
            continue
        if parser.has_section(name):
            return dict(parser.items(name))
    return None


def keepalive_params(url: str) -> dict[str, str]:
    """The TCP keepalive parameters to add to ``url``'s connection: those neither it nor its service
    sets. None at all when the operator turned keepalives off, or names a service this process cannot
    read (libpq's own settings of it then stand)."""
    given = dict(_driver().conninfo.conninfo_to_dict(url))
    service = given.get("service") or os.environ.get("PGSERVICE")
    if service:
        settings = _service_settings(str(service))
        if settings is None:
            return {}
        given = {**settings, **given}
    if str(given.get("keepalives", "1")).strip() == "0":
        return {}
    wanted = dict(KEEPALIVES)
    if _driver().pq.version() >= 120000:  # libpq 12 knows tcp_user_timeout (and ignores it off Linux)
        wanted["tcp_user_timeout"] = str(TCP_USER_TIMEOUT_MS)
    return {k: v for k, v in wanted.items() if k not in given}


def _driver() -> Any:
    try:
        import psycopg
    except ImportError:
        raise StoreSelectionError(
            "TROVE_DATABASE_URL selects PostgreSQL but psycopg is not installed: install the postgres extra"
            f" ({install_hint('postgres')}) or unset TROVE_DATABASE_URL to keep the SQLite file") from None
    return psycopg


# -- placeholders ------------------------------------------------------------------------

_TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|::|\?|(?<![:\w]):([A-Za-z_]\w*)|%")


def translate(sql: str) -> str:
    """SQLite placeholders to psycopg's: ``?`` to ``%s``, ``:name`` to ``%(name)s``, ``%`` doubled.

    Quoted literals and identifiers keep their text (a ``%`` inside one is still doubled: psycopg
    reads the whole string); ``::`` casts stay.
    """
    def swap(m: re.Match[str]) -> str:  # a "::" cast has no "%" to double
        if m.group(1):
            return f"%({m.group(1)})s"
        return "%s" if m.group(0) == "?" else m.group(0).replace("%", "%%")

    return _TOKEN.sub(swap, sql)


translated = functools.lru_cache(maxsize=4096)(translate)  # the data modules repeat a small set of statements


class PgRow(tuple[Any, ...]):
    """One result row read by position or by column name, like ``sqlite3.Row``."""

    __slots__ = ()
    _names: tuple[str, ...] = ()

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names.index(key))
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


def _row_factory(cursor: Any) -> Any:
    names = tuple(c.name for c in (cursor.description or ()))
    return type("Row", (PgRow,), {"__slots__": (), "_names": names})  # built from a row's values


def _register_dumpers(raw: Any) -> None:
    """Booleans travel as 0/1 integers (the schema keeps SQLite's INTEGER flags); strings with each NUL as
    U+FFFD: a server's text cannot hold U+0000 (psycopg refuses it), and one tool output with a NUL would
    otherwise stop every later row from shipping."""
    psycopg = _driver()
    from psycopg.adapt import Dumper
    from psycopg.types.string import StrDumperUnknown

    class BoolAsInt(Dumper):
        oid = psycopg.postgres.types["int4"].oid

        def dump(self, obj: bool) -> bytes:
            return b"1" if obj else b"0"

    class NulFree(StrDumperUnknown):
        def dump(self, obj: str) -> Any:
            return super().dump(obj.replace("\x00", "\ufffd"))

    raw.adapters.register_dumper(bool, BoolAsInt)
    raw.adapters.register_dumper(str, NulFree)


class PgCursor:
    """What ``PgConnection.execute`` returns: rows, ``rowcount``, and ``lastrowid`` from RETURNING."""

    def __init__(self, cursor: Any):
        self._cursor = cursor

    @property
    def rowcount(self) -> int:
        return int(self._cursor.rowcount)

    @property
    def lastrowid(self) -> int | None:
        raise AttributeError("PostgreSQL has no lastrowid: write the statement with RETURNING")

    def fetchone(self) -> Any:
        return self._cursor.fetchone() if self._cursor.description else None

    def fetchall(self) -> list[Any]:
        return list(self._cursor.fetchall()) if self._cursor.description else []

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


def _readable(fd: int) -> bool:
    """Bytes (or EOF) wait on ``fd`` now. poll, where there is one: select refuses a descriptor past 1023."""
    if not hasattr(select, "poll"):
        return bool(select.select([fd], [], [], 0)[0])
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


class PgConnection:
    """A psycopg connection that takes the data modules' SQL: ``execute``, ``executemany``,
    ``in_transaction``. Autocommit outside ``PgDatabase.transaction``."""

    def __init__(self, raw: Any):
        self.raw = raw
        self.owner = threading.get_ident()  # the thread that opened it (``close_connections`` spares live ones)
        self.busy_since = 0.0  # when the outermost wait on the server began (``time.monotonic``; 0: none)

    @contextlib.contextmanager
    def watched(self) -> Iterator[None]:
        """A wait on the server: past STALL_S the watchdog shuts this socket, so the call fails (the
        connection is reopened on next use) instead of waiting as long as the peer acknowledges."""
        outer = self.busy_since
        self.busy_since = outer or time.monotonic()
        try:
            yield
        finally:
            self.busy_since = outer

    def dropped(self) -> bool:
        """Closed, or idle with something to read: the server ended it (a restart, an idle timeout,
        pg_terminate_backend), which libpq learns only at the next statement, failing it."""
        return bool(self.raw.closed or self.raw.broken) or (not self.in_transaction and _readable(self.raw.fileno()))

    def abort(self) -> None:
        with contextlib.suppress(Exception), socket.socket(fileno=os.dup(self.raw.pgconn.socket)) as sock:
            sock.shutdown(socket.SHUT_RDWR)

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = (),
                prepare: bool | None = None) -> PgCursor:
        """``sql`` in SQLite's placeholders. ``prepare=False``: never as a prepared statement, so the server
        plans it at each call with its parameters' values, as it plans a statement holding them as literals
        (a prepared one may take a generic plan, blind to the values, from its sixth call on)."""
        return self.run(translated(sql), params if isinstance(params, Mapping) else tuple(params), prepare)

    def run(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = (), prepare: bool | None = None) -> PgCursor:
        """``sql`` in psycopg's own placeholders, watched; ``prepare`` as psycopg takes it (None: after 5 calls)."""
        cur = self.raw.cursor(row_factory=_row_factory)
        with self.watched():
            cur.execute(sql, params, prepare=prepare)
        return PgCursor(cur)

    def executemany(self, sql: str, seq: Sequence[Any] | Iterator[Any]) -> PgCursor:
        cur = self.raw.cursor(row_factory=_row_factory)
        rows = [r if isinstance(r, Mapping) else tuple(r) for r in seq]
        if rows:
            with self.watched():
                cur.executemany(translated(sql), rows)
        return PgCursor(cur)

    @property
    def in_transaction(self) -> bool:
        return bool(self.raw.info.transaction_status != _driver().pq.TransactionStatus.IDLE)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.raw.close()


_local = threading.local()
_OPENED: weakref.WeakSet[PgConnection] = weakref.WeakSet()  # every connection this process opened
_OPENED_LOCK = threading.Lock()
_WATCHED_IN: list[int] = []  # the process whose watchdog runs (a forked child starts its own)


def _watch() -> None:
    """Every second: shut the socket of any connection whose wait on the server passed STALL_S."""
    while True:
        time.sleep(1.0)
        with _OPENED_LOCK:
            stalled = [c for c in _OPENED if c.busy_since and time.monotonic() - c.busy_since > STALL_S]
        for conn in stalled:
            log.warning("trove: the PostgreSQL server has not answered for %.0f s; closing that connection", STALL_S)
            conn.abort()


def close_connections() -> int:
    """Close the server connections this process opened, except those of threads still running
    (closing a connection another thread is using would pull libpq from under it); each reopens on
    next use. For tests and shutdown."""
    running = {t.ident for t in threading.enumerate()} - {threading.get_ident()}
    with _OPENED_LOCK:
        opened = list(_OPENED)
    idle = [conn for conn in opened if not conn.raw.closed and conn.owner not in running]
    for conn in idle:
        conn.close()
    return len(idle)


class PgDatabase:
    """A PostgreSQL database (one schema of it, by the URL's search_path). Copies share it."""

    kind = "postgresql"

    def __init__(self, url: str):
        self.url = check_url(url)
        self.path = redact_url(self.url)  # what status and doctor show where SQLite shows a file

    def __deepcopy__(self, memo: dict) -> PgDatabase:
        return self

    def connect(self) -> PgConnection:
        """This thread's connection, opened (and the schema migrated) on first use."""
        conns: dict[tuple[int, str], PgConnection] = getattr(_local, "pg", None) or {}
        _local.pg = conns
        key = (os.getpid(), self.url)
        conn = conns.get(key)
        if conn is not None and conn.dropped():
            conn.close()
            conn = None
        if conn is None:
            conn = conns[key] = self.open_connection()
        return conn

    def open_connection(self) -> PgConnection:
        """A new connection, the schema migrated: ``connect`` keeps one per thread; a long-lived
        worker (the outbox's shipper) keeps its own."""
        psycopg = _driver()
        raw = psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
                              **keepalive_params(self.url))
        _register_dumpers(raw)
        conn = PgConnection(raw)
        with _OPENED_LOCK:
            _OPENED.add(conn)
            if _WATCHED_IN[-1:] != [os.getpid()]:
                _WATCHED_IN.append(os.getpid())
                threading.Thread(target=_watch, name="pg-stall-watchdog", daemon=True).start()
        try:
            # Set here, not through libpq's ``options``: that would replace the operator's own (the URL's,
            # a service file's, PGOPTIONS), search_path included. A timeout they configured is kept.
            conn.run(f"SELECT set_config('statement_timeout', '{STATEMENT_TIMEOUT_MS}', false)"
                     " WHERE current_setting('statement_timeout') = '0'")
            # JIT compiles a plan whose estimate passes jit_above_cost, as a search's can (65 ms of
            # compiling for a 7 ms search at a million rows). Off unless the operator set it.
            conn.run("SELECT set_config('jit', 'off', false) FROM pg_settings"
                     " WHERE name = 'jit' AND source = 'default'")
            pgschema.migrate(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def close(self) -> None:
        conns = getattr(_local, "pg", None) or {}
        conn = conns.pop((os.getpid(), self.url), None)
        if conn is not None:
            conn.close()

    def read(self) -> PgConnection:
        return self.connect()

    @contextlib.contextmanager
    def transaction(self, wait_s: float | None = None) -> Iterator[PgConnection]:
        """One short server transaction (BEGIN ... COMMIT, ROLLBACK on error); nested use joins it. ``wait_s``
        is the SQLite file's lock wait: the server's own timeouts bound this one."""
        conn = self.connect()
        if conn.in_transaction:
            yield conn
            return
        try:
            with conn.watched(), conn.raw.transaction():
                yield conn
        except _driver().OperationalError as exc:
            if getattr(exc, "sqlstate", None) != LOCK_NOT_AVAILABLE:  # a lock wait that ran out is an answer
                self.close()  # a broken connection is reopened on next use
            raise

    def checkpoint(self) -> None:
        """The server keeps its own write-ahead log."""

    # -- schema and meta (Database's names) -----------------------------------------------
    def applied_migrations(self) -> list[str]:
        return sorted(str(r[0]) for r in self.read().execute("SELECT name FROM schema_migrations"))

    def ensure_optional(self, feature: str) -> list[str]:
        return pgschema.migrate_optional(self.connect(), feature)

    def drop_optional(self, feature: str) -> list[str]:
        return pgschema.drop_optional(self.connect(), feature)

    def has_optional(self, feature: str) -> bool:
        return pgschema.optional_applied(self.read(), feature)

    def set_meta(self, values: Mapping[str, str | None]) -> None:
        with self.transaction() as conn:
            write_meta(conn, values)  # type: ignore[arg-type]

