"""Full text over a few known rows on SQLite: which of them match, and FTS5's snippet of each.

Asking the archive's index about given rows (``rowid IN (...)``) makes FTS5 seek every phrase's
doclist once per row: milliseconds when a phrase is common, on every page of results. So rows
of up to ``SCRATCH_MAX_CHARS`` are copied into a scratch FTS5 table in the connection's temp
schema, matched there and removed; it tokenizes as ``messages_fts`` does
(``migrations.MESSAGES_TOKENIZE``), so the same rows match and ``snippet()`` marks the same
spans. Longer rows (a big tool output would be tokenized three more times in the scratch
table) still ask the archive's index.
"""
from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from .migrations import MESSAGES_TOKENIZE
from .packed import unpack

MAX_ROWS = 500
SCRATCH_MAX_CHARS = 2000


def snippet_sql(table: str, snippets: bool = True) -> str:
    """The snippet every message search shows (FTS5 ``snippet()`` over ``table``), or an empty string
    when snippets are off."""
    return f"snippet({table}, -1, '>>>', '<<<', '…', 40)" if snippets else "''"


def matching(conn: sqlite3.Connection, expression: str, store_ids: Sequence[int], where: Sequence[str],
             args: Sequence[Any], snippets: bool = True) -> list[tuple[sqlite3.Row, str]]:
    """``(messages row, snippet)`` for each of ``store_ids`` (the first ``MAX_ROWS``) that passes
    ``where`` (on alias ``m``) and matches ``expression``, in store order; snippets are "" when off."""
    ids = sorted({int(i) for i in store_ids[:MAX_ROWS]})
    if not ids or not expression:
        return []
    filters = "".join(f" AND {w}" for w in where)
    rows = {int(r["store_id"]): r for r in conn.execute(
        "SELECT m.*, length(trove_text(m.content)) + COALESCE(length(m.tool_calls), 0) AS _chars FROM messages m"
        f" WHERE m.store_id IN ({','.join('?' * len(ids))}){filters}", [*ids, *args])}
    short = [(i, unpack(r["content"]), r["tool_calls"]) for i, r in rows.items() if r["_chars"] <= SCRATCH_MAX_CHARS]
    long = [i for i, r in rows.items() if r["_chars"] > SCRATCH_MAX_CHARS]
    found: list[Any] = []
    if short:
        conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.trove_rows_fts USING fts5(content, tool_calls,"
                     f" tokenize='{MESSAGES_TOKENIZE}')")
        try:
            conn.executemany("INSERT INTO temp.trove_rows_fts(rowid, content, tool_calls) VALUES (?,?,?)", short)
            found += conn.execute(f"SELECT rowid, {snippet_sql('trove_rows_fts', snippets)} FROM temp.trove_rows_fts"
                                  " WHERE trove_rows_fts MATCH ?", (expression,)).fetchall()
        finally:
            conn.execute("DELETE FROM temp.trove_rows_fts")
    if long:
        found += conn.execute(f"SELECT rowid, {snippet_sql('messages_fts', snippets)} FROM messages_fts"
                              f" WHERE messages_fts MATCH ? AND rowid IN ({','.join('?' * len(long))})",
                              (expression, *long)).fetchall()
    return [(rows[int(rid)], str(snip or "")) for rid, snip in sorted(found, key=lambda f: int(f[0]))]
