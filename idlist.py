"""One SQL condition for a caller-sized list of text ids (session ids), within any build's cap on parameters.

A SQLite statement takes at most ``SQLITE_LIMIT_VARIABLE_NUMBER`` parameters (999 before 3.32,
32,766 after, or as a build or program sets it). A list longer than an eighth of the cap goes as one
JSON text read by ``json_each`` (ids holding a NUL as hex literals; no JSON: every id so); a server
takes one array. ``chunks`` splits a look-up whose rows add up the same read in runs.
"""
from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from .backend import on_server

SERVER_CAP = 65535  # parameters a statement may take on a server (its protocol counts them in 16 bits)
SHARE = 8  # a short list binds at most this fraction of the cap: room for its copies and the other parameters
_JSON: list[bool] = []  # whether this process's SQLite library reads JSON, once known


def among(conn: Any, column: str, ids: Sequence[str]) -> tuple[str, list[Any]]:
    """SQL ``column`` (an expression) is one of ``ids``, and its arguments; the same rows every way."""
    ids = [str(i) for i in ids]
    if on_server(conn):
        return f"{column} = ANY(?::text[])", [ids]
    if len(ids) <= cap(conn) // SHARE:
        return f"{column} IN ({','.join('?' * len(ids))})", ids
    plain, nul = [i for i in ids if "\x00" not in i], [i for i in ids if "\x00" in i]
    if not reads_json(conn):
        return f"{column} IN ({','.join(_literal(i) for i in (*plain, *nul))})", []
    # ids holding a NUL join the same list as literals: one list keeps the seek on the column's index
    # (an OR with a function of the column, such as hex(), reads every row of the table instead)
    extra = f" UNION ALL VALUES {','.join(f'({_literal(i)})' for i in nul)}" if nul else ""
    return f"{column} IN (SELECT value FROM json_each(?){extra})", [json.dumps(plain, ensure_ascii=False)]


def chunks(conn: Any, ids: Sequence[Any], others: int = 0) -> list[list[Any]]:
    """``ids`` in runs that fit one statement beside its ``others`` parameters: for a look-up whose
    rows (or sums) add up the same read a run at a time. [] for no ids."""
    size, ids = max(1, cap(conn) - others), list(ids)
    return [ids[i:i + size] for i in range(0, len(ids), size)]


def cap(conn: Any) -> int:
    """The parameters one statement on ``conn`` may take: the connection's own limit, a server's protocol's."""
    return SERVER_CAP if on_server(conn) else conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)


def reads_json(conn: sqlite3.Connection) -> bool:
    """Whether SQLite has its JSON functions (built in since 3.38, an option before); asked once a process."""
    if not _JSON:
        try:
            conn.execute("SELECT json_valid('[]')").fetchone()
            _JSON.append(True)
        except sqlite3.OperationalError:
            _JSON.append(False)
    return _JSON[0]


def _literal(text: str) -> str:
    """SQL for ``text`` as a text value written by its UTF-8 bytes in hex (any character, a NUL too; the
    literal holds hex digits only). Pure."""
    return f"CAST(X'{text.encode('utf-8').hex().upper()}' AS TEXT)"
