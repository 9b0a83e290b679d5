"""What the data modules ask about the store they run on, SQLite file or PostgreSQL server.

Which backend a connection talks to, which exceptions are the store's (not bugs), how far a
worker may read ids no later commit will undercut, and a multi-row insert that returns the ids
the database drew. Backend-specific SQL stays in the few branches that call ``on_server``.
"""
from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .db import SchemaTooNewError
from .rows import MAX_COUNT

if TYPE_CHECKING:
    from .db import Database


def storage_error(exc: BaseException) -> bool:
    """True when ``exc`` comes from a store (SQLite, the file system, the PostgreSQL driver), not from a bug."""
    return isinstance(exc, (sqlite3.Error, OSError, SchemaTooNewError)) or type(exc).__module__.startswith("psycopg")


def lock_busy(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite's word that another connection holds the write lock (a wait, not a failure)."""
    return isinstance(exc, sqlite3.OperationalError) and any(w in str(exc).lower() for w in ("locked", "busy"))


def on_server(conn: object) -> bool:
    """True when ``conn`` talks to a PostgreSQL server (``pgdb.PgConnection``), not a SQLite file."""
    return not isinstance(conn, sqlite3.Connection)


def sane(column: str) -> str:
    """SQL reading ``column`` as 0 where it holds no count or epoch time a trove write stores (text, NaN,
    negative, huge)."""
    return f"CASE WHEN {column} BETWEEN 0 AND {MAX_COUNT} THEN {column} ELSE 0 END"


def an_id(column: str) -> str:
    """SQL true where ``column`` holds a row id as trove writes them (a whole number from 1); false for
    the damage a SQLite file can carry instead (text, a fraction, a negative or huge number)."""
    return f"({column} BETWEEN 1 AND {MAX_COUNT} AND {column} = CAST({column} AS BIGINT))"


UNBOUNDED = 2**62  # an id bound (or LIMIT) that bounds nothing, on both backends
# PostgreSQL: how long ``settled_heads`` waits for the tables' writers to finish, past the server's
# deadlock_timeout: only then does the server cancel an autovacuum holding the tables for a waiter.
SETTLE_WAIT_MS = 1000
# never longer: while the pass waits for its SHARE lock, every later writer of these tables (a turn's
# messages) queues behind it, so a server with a long deadlock_timeout must not hold turns that long
SETTLE_WAIT_MAX_MS = 5000


def settle_wait_ms(deadlock_timeout_ms: int | None) -> int:
    """``settled_heads``' lock_timeout in ms: deadlock_timeout plus ``SETTLE_WAIT_MS``, at most
    ``SETTLE_WAIT_MAX_MS``; ``SETTLE_WAIT_MS`` when deadlock_timeout could not be read. Pure."""
    if deadlock_timeout_ms is None or deadlock_timeout_ms < 0:
        return SETTLE_WAIT_MS
    return min(deadlock_timeout_ms + SETTLE_WAIT_MS, SETTLE_WAIT_MAX_MS)


def settled_heads(db: Database, *columns: tuple[str, str]) -> tuple[int, ...] | None:
    """The highest id of each ``(table, id column)`` that no later commit can undercut, for a worker
    whose cursor must never pass a row still being written; None when a writer did not finish
    within that wait (the next pass reads on).

    SQLite draws ids in commit order: no bound. A server draws them at insert, so a transaction can
    commit an id below one already read: the heads are read once the tables' writers have finished
    (a SHARE lock held for the index lookups; turns write the outbox, never these tables). The wait
    outlasts deadlock_timeout by SETTLE_WAIT_MS: autovacuum working on a table yields to a waiter only
    then, so a wait ending with it would step aside every time the server vacuums these tables. It
    never passes SETTLE_WAIT_MAX_MS (``settle_wait_ms``): later writers of the tables queue behind it.
    """
    if not on_server(db.read()):
        return tuple(UNBOUNDED for _ in columns)
    heads = ", ".join(f"(SELECT MAX({column}) FROM {table})" for table, column in columns)
    try:
        with db.transaction() as conn:
            found = conn.execute("SELECT setting FROM pg_settings WHERE name = 'deadlock_timeout'").fetchone()
            wait = settle_wait_ms(int(found[0]) if found and str(found[0]).isdigit() else None)
            conn.execute("SELECT set_config('lock_timeout', ?, true)", (str(wait),))
            conn.execute(f"LOCK TABLE {', '.join(table for table, _ in columns)} IN SHARE MODE")
            row = conn.execute(f"SELECT {heads}").fetchone()
    except Exception as exc:
        if getattr(exc, "sqlstate", None) != "55P03":  # lock_not_available: a writer is still busy
            raise
        return None
    return tuple(int(v or 0) for v in row)


def insert_returning(conn: sqlite3.Connection, insert: tuple[str, str], rows: Sequence[Sequence[object]],
                     table: str = "messages", key: str = "store_id", chunk: int = 400) -> list[int]:
    """Insert ``rows`` (``insert`` = (column list, one row's ``?`` marks)) with multi-row VALUES,
    a few statements in all; returns the ids the database drew, in row order."""
    ids: list[int] = []
    for i in range(0, len(rows), chunk):
        part = rows[i:i + chunk]
        marks = ",".join(f"({insert[1]})" for _ in part)
        got = conn.execute(f"INSERT INTO {table}({insert[0]}) VALUES {marks} RETURNING {key}",
                           [v for row in part for v in row]).fetchall()
        ids.extend(sorted(int(r[0]) for r in got))
    return ids
