"""Outbox rows set aside: a row the server refuses for its own values is marked, never deleted.

One damaged row (a value that does not convert, a constraint it breaks) would otherwise fail every
shipment, and nothing written after it would reach the server. ``isolate`` finds which rows of a
refused batch are at fault, one statement each; the shipper marks those in ``outbox_aside`` (the rows
themselves stay whole in the outbox file) and ships on. The rule for what depends on a set-aside row:
a message of a set-aside session is set aside too (its session cannot reach the server without it),
now and later, until the session ships; a message set aside on its own holds nothing back. A server
that is away or refuses everything (connection, permission, schema) is no row's fault: that keeps
waiting as before. ``doctor outbox`` lists and exports the marked rows, ``doctor outbox retry`` ships them.
"""
from __future__ import annotations

import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .backend import storage_error

_TABLE = ("CREATE TABLE IF NOT EXISTS outbox_aside(kind TEXT NOT NULL, key TEXT NOT NULL, session_id TEXT NOT NULL,"
          " reason TEXT NOT NULL, set_aside_at REAL NOT NULL, PRIMARY KEY(kind, key))")
REASONS_SHOWN = 5
SESSIONS_SHOWN = 10
_ID_CHUNK = 500


@dataclass(frozen=True)
class Aside:
    """One set-aside row: a ``session`` (key: its id) or a ``message`` (key: its local store id)."""

    kind: str
    key: str
    session_id: str
    reason: str


# SQLSTATE classes about a statement's values: data exception, integrity constraint, a limit a value
# passes (a text too long to index). Only a row that fails alone is set aside, so a limit the whole
# batch passed sets nothing aside.
_ROW_CLASSES = ("22", "23", "54")


def row_fault(exc: BaseException) -> bool:
    """True when ``exc`` says the row's own values were refused: the server's data, constraint and limit
    errors, or the driver (or this build) failing to convert a value. A connection, permission or schema
    error, and anything SQLite or the file system raised, is not a row's fault."""
    if type(exc).__module__.startswith("psycopg"):
        state = str(getattr(exc, "sqlstate", None) or "")
        return state[:2] in _ROW_CLASSES if state else any(c.__name__ == "DataError" for c in type(exc).__mro__)
    return isinstance(exc, (ValueError, TypeError, OverflowError)) and not storage_error(exc)


def reason_of(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:240]}"  # one line


class RefusedEveryRowError(ConnectionError):
    """Every row of a kind in a batch was refused: a server or build that takes none of them (a column
    or constraint a newer schema added, a conversion this build gets wrong), not one row's values."""


def isolate(ship: Callable[[list[Any], list[Any]], int], rows: Sequence[Any],
            sessions: Sequence[Any], *, proof: bool = True) -> tuple[int, list[Aside]]:
    """Ship a refused batch one statement at a time, in order: each session alone, then each message with
    its session. Returns (messages added, what was set aside); raises whatever is not a row's fault
    (nothing is marked then: the batch is read again and every statement is idempotent). ``proof``: a
    message refused is at fault only when another message of the batch went through; else
    ``RefusedEveryRowError`` (they wait, as in an outage). A session row refused alone is set aside."""
    found: list[Aside] = []
    bad_sessions: dict[str, str] = {}
    by_id = {str(s[0]): s for s in sessions}
    passed: Counter[str] = Counter()
    for sid, s in by_id.items():
        try:
            ship([], [s])
        except Exception as exc:
            if not row_fault(exc):
                raise
            bad_sessions[sid] = reason_of(exc)
            found.append(Aside("session", sid, sid, bad_sessions[sid]))
    added = 0
    for r in rows:
        sid = str(r[1])
        if sid in bad_sessions:
            found.append(Aside("message", str(r[0]), sid, f"its session {sid} is set aside"))
            continue
        try:
            added += ship([r], [by_id[sid]] if sid in by_id else [])
            passed["message"] += 1
        except Exception as exc:
            if not row_fault(exc):
                raise
            found.append(Aside("message", str(r[0]), sid, reason_of(exc)))
    own = [a for a in found if a.kind == "message" and a.session_id not in bad_sessions]
    if proof and own and not passed["message"]:
        raise RefusedEveryRowError(f"the server refused every message of the batch ({own[0].reason}): no"
                                   " message of it went through to show the fault is a row's own; they wait")
    return added, found


class HeldBackError(RuntimeError):
    """A session with rows set aside is compacted by the host's compressor: a trove compaction reads the
    server, which lacks those rows, and would drop them from the prompt unsummarised."""


def held_for(conn: sqlite3.Connection, session_id: str) -> int:
    """How many of ``session_id``'s rows (its own, its messages) are set aside."""
    if not _exists(conn):
        return 0
    return int(conn.execute("SELECT COUNT(*) FROM outbox_aside WHERE session_id = ?", (session_id,)).fetchone()[0])


def _exists(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='outbox_aside'").fetchone() is not None


def aside_sessions(conn: sqlite3.Connection) -> set[str]:
    """Ids of the sessions set aside (none when nothing ever was)."""
    if not _exists(conn):
        return set()
    return {str(r[0]) for r in conn.execute("SELECT key FROM outbox_aside WHERE kind='session'")}


def mark(conn: sqlite3.Connection, entries: Iterable[Aside]) -> None:
    """Set ``entries`` aside inside the caller's transaction; a row set aside again keeps its first time."""
    entries = list(entries)
    if not entries:
        return
    conn.execute(_TABLE)
    conn.executemany("INSERT INTO outbox_aside(kind, key, session_id, reason, set_aside_at) VALUES (?, ?, ?, ?, ?)"
                     " ON CONFLICT(kind, key) DO UPDATE SET reason = excluded.reason",
                     [(e.kind, e.key, e.session_id, e.reason, time.time()) for e in entries])


def unmark(conn: sqlite3.Connection, entries: Iterable[Aside]) -> None:
    """Forget the marks of ``entries`` (they shipped) inside the caller's transaction."""
    if _exists(conn):
        conn.executemany("DELETE FROM outbox_aside WHERE kind = ? AND key = ?", [(e.kind, e.key) for e in entries])


def entries(conn: sqlite3.Connection) -> list[Aside]:
    """Every mark, sessions first, then messages in their order."""
    if not _exists(conn):
        return []
    got = conn.execute("SELECT kind, key, session_id, reason FROM outbox_aside"
                       " ORDER BY kind = 'message', CAST(key AS INTEGER), key").fetchall()
    return [Aside(str(k), str(key), str(s), str(r)) for k, key, s, r in got]


def summary(conn: sqlite3.Connection) -> dict[str, Any]:
    """Count, oldest mark, the commonest reasons and the sessions concerned (``rows`` 0: none)."""
    if not _exists(conn):
        return {"rows": 0}
    got = conn.execute("SELECT kind, session_id, reason, set_aside_at FROM outbox_aside").fetchall()
    if not got:
        return {"rows": 0}
    sessions = sorted({str(r[1]) for r in got})
    return {"rows": len(got), "messages": sum(1 for r in got if r[0] == "message"),
            "sessions_set_aside": sum(1 for r in got if r[0] == "session"),
            "oldest_at": min(float(r[3]) for r in got),
            "reasons": dict(Counter(str(r[2]) for r in got).most_common(REASONS_SHOWN)),
            "sessions": sessions[:SESSIONS_SHOWN], "more_sessions": max(0, len(sessions) - SESSIONS_SHOWN)}


def marked_messages(conn: sqlite3.Connection) -> tuple[int, Any]:
    """How many messages are set aside, and when the oldest of them was written (a read-only open of the
    file; (0, None) when none ever was)."""
    if not _exists(conn):
        return 0, None
    count, oldest = conn.execute("SELECT COUNT(*), MIN(m.ingested_at) FROM outbox_aside a LEFT JOIN messages m"
                                 " ON m.store_id = CAST(a.key AS INTEGER) WHERE a.kind='message'").fetchone()
    return int(count), oldest


def exported(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Each mark with its row whole (every column, a message's text unpacked), for an operator to keep."""
    out: list[dict[str, Any]] = []
    for e in entries(conn):
        if e.kind == "session":
            cur = conn.execute("SELECT * FROM sessions WHERE session_id = ?", (e.key,))
        else:
            cur = conn.execute("SELECT *, trove_text(content) AS content FROM messages WHERE store_id = ?",
                               (int(e.key),))
        names = [d[0] for d in cur.description]
        got = cur.fetchone()
        row = dict(zip(names, got, strict=True)) if got is not None else None  # a later name wins: the text
        out.append({"kind": e.kind, "key": e.key, "session_id": e.session_id, "reason": e.reason,
                    "row": None if row is None else {k: _plain(v) for k, v in row.items()}})
    return out


def _plain(value: Any) -> Any:
    return value.hex() if isinstance(value, bytes) else value


def rows_by_id(conn: sqlite3.Connection, columns: str, store_ids: Sequence[int]) -> list[Any]:
    """Messages ``store_ids`` as a shipment reads them (``columns``), in their order."""
    rows: list[Any] = []
    ids = sorted(set(store_ids))
    for i in range(0, len(ids), _ID_CHUNK):
        part = ids[i:i + _ID_CHUNK]
        rows += conn.execute(f"SELECT store_id, {columns} FROM messages WHERE store_id IN"
                             f" ({','.join('?' * len(part))}) ORDER BY store_id", part).fetchall()
    return sorted(rows, key=lambda r: int(r[0]))


def sessions_by_id(conn: sqlite3.Connection, columns: str, session_ids: Iterable[str]) -> list[Any]:
    ids = sorted(set(session_ids))
    got: list[Any] = []
    for i in range(0, len(ids), _ID_CHUNK):
        part = ids[i:i + _ID_CHUNK]
        got += conn.execute(f"SELECT {columns} FROM sessions WHERE session_id IN ({','.join('?' * len(part))})",
                            part).fetchall()
    return got
