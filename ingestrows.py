"""The statements an ingest adds to its inserts: the new rows' full-text entries and the session row's refresh.

Split from ``store.py`` so that the hot path of a turn reads in one place: after its message inserts an
ingest writes the full-text entries from the values it just bound (no read back, no unpacking) and
refreshes the session row and its cursor in one UPDATE.
"""
from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from . import pgtext
from .backend import on_server
from .rows import SessionKey

IndexedRow = tuple[int, Any, Any]  # (store id, text as written, tool calls as written)


def index_new_rows(conn: sqlite3.Connection, store_ids: Sequence[int], indexed: Sequence[IndexedRow] = ()) -> None:
    """Add rows just inserted in this transaction to the full-text index in one statement. ``indexed``
    (each row's store id, text and tool calls as written) spares SQLite reading and unpacking them again."""
    if indexed and not on_server(conn):
        conn.executemany("INSERT INTO messages_fts(rowid, content, tool_calls) VALUES (?,?,?)", indexed)
    elif store_ids and on_server(conn):
        pgtext.index_messages(conn, conn.execute(
            "SELECT store_id, content, tool_calls FROM messages WHERE store_id BETWEEN ? AND ?",
            (min(store_ids), max(store_ids))).fetchall())
    elif store_ids:
        conn.execute("INSERT INTO messages_fts(rowid, content, tool_calls) SELECT store_id, trove_text(content),"
                     " tool_calls FROM messages WHERE store_id BETWEEN ? AND ?", (min(store_ids), max(store_ids)))


def touch_session(conn: sqlite3.Connection, key: SessionKey, now: float, cursor: tuple[int, str] | None) -> None:
    """What the session upsert does to an existing row (no previous session given), and with ``cursor`` the
    new ingest cursor, in one UPDATE. The key's scope replaces an empty one, and any scope of a row
    stored without a platform once the key names one (every SET reads the row as it was)."""
    unset = "scope='' OR platform=''" if key.platform else "scope=''"
    sets = ["updated_at=?", "ended_at=NULL", f"scope=CASE WHEN {unset} THEN ? ELSE scope END"]
    args: list[Any] = [now, key.effective_scope]
    for column, value in (("conversation_id", key.conversation_id), ("platform", key.platform)):
        if value:  # the upsert keeps the stored value when the key's is empty
            sets.append(f"{column}=?")
            args.append(value)
    if cursor is not None:
        sets.append("ingest_len=?, ingest_identity=?")
        args += cursor
    conn.execute(f"UPDATE sessions SET {', '.join(sets)} WHERE session_id=?", (*args, key.session_id))
