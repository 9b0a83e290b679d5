"""Full text over a few known rows on SQLite: which of them match, and FTS5's snippet of each.

``rowid IN (...)`` on the archive's index seeks every phrase's doclist once per row, so rows of up to
``SCRATCH_MAX_CHARS`` are matched in a scratch FTS5 table tokenizing as ``messages_fts``; longer ones
ask the archive's index, and past ``WHOLE_SNIPPET_MAX_CHARS`` a row's snippet is its best-ranked
piece's (``snippet()`` over a whole big tool output took seconds a row).
"""
from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from .migrations import MESSAGES_TOKENIZE
from .packed import unpack
from .substring import whole_letters

MAX_ROWS = 500
SCRATCH_MAX_CHARS = 2000
WHOLE_SNIPPET_MAX_CHARS = 32000  # longer rows take their snippet from their best piece
PIECE_OVERLAP = 200  # a long row's pieces overlap by this much, so a phrase across a cut is whole in one


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
    found: list[Any] = _scratch(conn, expression, short, snippets) if short else []
    whole = [i for i in long if not snippets or rows[i]["_chars"] <= WHOLE_SNIPPET_MAX_CHARS]
    if whole:
        found += conn.execute(f"SELECT rowid, {snippet_sql('messages_fts', snippets)} FROM messages_fts"
                              f" WHERE messages_fts MATCH ? AND rowid IN ({','.join('?' * len(whole))})",
                              (expression, *whole)).fetchall()
    huge = [i for i in long if snippets and rows[i]["_chars"] > WHOLE_SNIPPET_MAX_CHARS]
    if huge:
        hits = [int(r[0]) for r in conn.execute(f"SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?"
                                                f" AND rowid IN ({','.join('?' * len(huge))})", (expression, *huge))]
        found += _piece_snippets(conn, expression, [rows[i] for i in hits])
    return [(rows[int(rid)], whole_letters(str(snip or ""))) for rid, snip in sorted(found, key=lambda f: int(f[0]))]


def _scratch(conn: sqlite3.Connection, expression: str, rows: Sequence[tuple[int, str | None, str | None]],
             snippets: bool, group: Callable[[int], int] | None = None) -> list[Any]:
    """``(rowid, snippet)`` of the scratch rows ``(rowid, content, tool_calls)`` matching ``expression``;
    with ``group`` (rowid -> its group) only each group's best-ranked row.

    The rows live inside a savepoint that is rolled back: nothing is committed and nothing deleted
    (a DELETE would tokenize each row again and leave FTS5 tombstone segments behind, and three
    commits of the temp schema cost more than the matching itself). Inside a caller's transaction
    it undoes only its own writes. An error that makes SQLite roll the whole transaction back (a
    full disk under the temp schema) is raised as it is."""
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.trove_rows_fts USING fts5(content, tool_calls,"
                 f" tokenize='{MESSAGES_TOKENIZE}')")
    conn.execute("SAVEPOINT trove_scratch")
    try:
        conn.executemany("INSERT INTO temp.trove_rows_fts(rowid, content, tool_calls) VALUES (?,?,?)", rows)
        where = "trove_rows_fts MATCH ?"
        args: list[Any] = [expression]
        if group is not None:
            best: dict[int, int] = {}
            for (rid,) in conn.execute(f"SELECT rowid FROM temp.trove_rows_fts WHERE {where}"
                                       " ORDER BY bm25(trove_rows_fts)", args):
                best.setdefault(group(int(rid)), int(rid))
            where += f" AND rowid IN ({','.join('?' * len(best))})"
            args += list(best.values())
        return conn.execute(f"SELECT rowid, {snippet_sql('trove_rows_fts', snippets)} FROM temp.trove_rows_fts"
                            f" WHERE {where}", args).fetchall()
    finally:
        if conn.in_transaction:  # after SQLITE_FULL (and some I/O errors) SQLite has undone it all itself,
            conn.execute("ROLLBACK TO trove_scratch")  # savepoint too: naming it would hide that error
            conn.execute("RELEASE trove_scratch")


def _piece_snippets(conn: sqlite3.Connection, expression: str, rows: Sequence[sqlite3.Row]) -> list[tuple[int, str]]:
    """``(store_id, snippet)`` of long matching rows: each row's text (then its tool calls) cut into
    overlapping pieces, the snippet of its best-ranked matching piece ("" when none matches alone)."""
    owner: list[tuple[int, bool, bool]] = []  # per piece: its row, and whether text comes before / after it
    pieces: list[tuple[int, str | None, str | None]] = []
    for r in rows:
        for column, text in ((1, str(unpack(r["content"]) or "")), (2, str(r["tool_calls"] or ""))):
            for at in _cuts(len(text)):
                piece = text[at:at + SCRATCH_MAX_CHARS]
                pieces.append((len(pieces), piece if column == 1 else None, piece if column == 2 else None))
                owner.append((int(r["store_id"]), at > 0, at + SCRATCH_MAX_CHARS < len(text)))
    best: dict[int, str] = {}
    for piece, snip in _scratch(conn, expression, pieces, True, group=lambda rid: owner[rid][0]):
        store_id, before, after = owner[int(piece)]  # the piece cut the text: say so as FTS5 does for its window
        best[store_id] = ("…" if before and not snip.startswith("…") else "") + snip \
            + ("…" if after and not snip.endswith("…") else "")
    return [(int(r["store_id"]), best.get(int(r["store_id"]), "")) for r in rows]


def _cuts(length: int) -> range:
    """Where a text of ``length`` characters is cut into overlapping pieces of ``SCRATCH_MAX_CHARS``
    (one piece when it fits, none when empty); the last piece reaches the end."""
    if length <= SCRATCH_MAX_CHARS:
        return range(min(1, length))
    return range(0, length - PIECE_OVERLAP, SCRATCH_MAX_CHARS - PIECE_OVERLAP)
