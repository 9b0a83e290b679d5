"""Archive-wide full text on SQLite past the newest-N window: every match of a rare term is ranked.

An archive search ranks only the newest ``ARCHIVE_CANDIDATES`` matching rows, so its cost does
not follow the archive. On common words that is harmless, but a name or an identifier said in
an old conversation would fall out of the window behind newer rows that share only common
words. So the query's rarest phrases (together at most ``RARE_BUDGET`` matching rows in the
searched range) have every older match ranked as well, with the exact score the whole query
gives it. A caller may narrow the window further for a query with no rare phrase (``window``).

FTS5's ``bm25()`` sums one term per phrase of the expression, so over ``(rare) AND (whole)`` a
row scores its rare phrases twice and the rest once; subtracting its score over ``(rare)``
alone leaves its score over the whole query, with no ``rowid IN`` list (which FTS5 would answer
by running the query once per id).
"""
from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from typing import Any

RARE_BUDGET = 5000  # rows: the rare phrases' matches ranked beyond the window, at most (PostgreSQL too)

_PART = re.compile(r'"(?:[^"]|"")*"\*?')
_RANK = "bm25(messages_fts, 1.0, 0.6)"


def phrases(expression: str) -> list[str]:
    """The phrases of a ``build_match`` expression (``"a" OR "b c" OR "d"*``); [] for any other form. Pure."""
    parts = _PART.findall(expression)
    return parts if parts and " OR ".join(parts) == expression else []


def pick_rare(counts: Sequence[tuple[str, int]], budget: int) -> list[str]:
    """The rarest phrases whose matches, added up, stay within ``budget``; phrases with none are left out. Pure."""
    out, total = [], 0
    for part, count in sorted(counts, key=lambda pc: pc[1]):
        if count <= 0:
            continue
        if total + count > budget:
            break
        out.append(part)
        total += count
    return out


def all_common(counts: Sequence[tuple[str, int]], budget: int) -> bool:
    """True when the phrases were counted and each that matches anything has more than ``budget`` matches. Pure."""
    return bool(counts) and not pick_rare(counts, budget)


def phrase_counts(conn: sqlite3.Connection, expression: str, narrow: Sequence[str] = (),
                  narrow_args: Sequence[Any] = (), budget: int | None = None) -> list[tuple[str, int]]:
    """``(phrase, matches)`` of the expression's phrases inside ``narrow`` (a session's id range); each
    count stops at ``budget + 1``, so a common word costs no more. [] when the expression is no OR of phrases."""
    budget = RARE_BUDGET if budget is None else budget
    where = "".join(f" AND {w}" for w in narrow)
    return [(p, int(conn.execute(f"SELECT count(*) FROM (SELECT 1 FROM messages_fts WHERE messages_fts MATCH ?{where}"
                                 " LIMIT ?)", (p, *narrow_args, budget + 1)).fetchone()[0]))
            for p in phrases(expression)]


def window(conn: sqlite3.Connection, fts_where: Sequence[str], fts_args: Sequence[Any], scoped: str,
           scope_args: Sequence[Any], newest: int, common: int | None = None) -> tuple[int | None, list[str]]:
    """Where a search's window of the newest ``newest`` matches starts, and the rare phrases ranked past it.

    ``fts_where``/``fts_args`` are the full-text side (the MATCH first, then a session's id range);
    ``scoped`` (on alias ``m``) keeps the rows the search may return (its sessions, filters and the
    caller's visibility), so the window holds only those. Returns the lowest store id
    inside the window (None when fewer rows match: no window, nothing older) and the phrases
    with at most ``RARE_BUDGET`` matches in the range together, whose older matches are ranked
    too. With ``common``, a query whose every phrase has more than ``RARE_BUDGET`` matches
    ranks only its newest ``common``: there is no rare phrase to rank past the window, and
    BM25 over common words only, whose weights are low and alike, tells rows apart little.
    """
    first = min(newest, common) if common is not None else newest
    low = _nth_newest(conn, fts_where, fts_args, scoped, scope_args, first)
    if low is None:
        return None, []
    counts = phrase_counts(conn, str(fts_args[0]), fts_where[1:], fts_args[1:])
    if first < newest and not all_common(counts, RARE_BUDGET):
        low = _nth_newest(conn, fts_where, fts_args, scoped, scope_args, newest)
        if low is None:
            return None, []
    return low, pick_rare(counts, RARE_BUDGET)


def _nth_newest(conn: sqlite3.Connection, fts_where: Sequence[str], fts_args: Sequence[Any], scoped: str,
                scope_args: Sequence[Any], n: int) -> int | None:
    """The store id of the ``n``-th newest match the caller may read; None when fewer match."""
    skip = max(0, int(n) - 1)
    # the matches are read first, newest down: CROSS JOIN keeps the full-text index outermost (else the
    # planner may walk a session's rows by its index and match each one, a hundred times slower), and
    # ordering by its rowid lets it hand the matches over in that order (ordering by m.store_id sorts
    # every match first). With a filter this reads the matches newer than the window's last kept row.
    join = "CROSS JOIN"
    row = conn.execute(f"SELECT rowid FROM messages_fts WHERE {' AND '.join(fts_where)}"
                       " ORDER BY rowid DESC LIMIT 1 OFFSET ?", [*fts_args, skip]).fetchone() \
        if not scoped else conn.execute(
            f"SELECT m.store_id FROM messages_fts {join} messages m ON m.store_id = messages_fts.rowid WHERE "
            + " AND ".join(w.replace("rowid", "messages_fts.rowid") for w in fts_where)
            + f" AND {scoped} ORDER BY messages_fts.rowid DESC LIMIT 1 OFFSET ?",
            [*fts_args, *scope_args, skip]).fetchone()
    return None if row is None else int(row[0])


def older_hits(conn: sqlite3.Connection, expression: str, rare: Sequence[str], below: int,
               fts_where: Sequence[str], fts_args: Sequence[Any], where: Sequence[str], args: Sequence[Any],
               limit: int) -> list[sqlite3.Row]:
    """Rows under store id ``below`` matching a ``rare`` phrase, best first by their score over ``expression``.

    Each row carries ``messages`` columns plus ``_rank`` (FTS5's bm25 of the whole expression) and
    an empty ``_snippet``. ``fts_where``/``fts_args`` narrow the full-text side (a session's id
    range), ``where``/``args`` filter on ``m`` as ``Store.search`` writes them.
    """
    rare_expr = " OR ".join(rare)
    narrow = "".join(f" AND {w}" for w in fts_where)
    if conn.execute(f"SELECT 1 FROM messages_fts WHERE messages_fts MATCH ? AND rowid < ?{narrow} LIMIT 1",
                    [rare_expr, int(below), *fts_args]).fetchone() is None:
        return []  # every rare match is inside the window: skip the scoring, which counts every phrase's matches
    filters = f" WHERE {' AND '.join(where)}" if where else ""
    sql = (f"WITH one AS MATERIALIZED (SELECT rowid AS rid, {_RANK} AS r FROM messages_fts"
           f" WHERE messages_fts MATCH ? AND rowid < ?{narrow}),"
           f" two AS MATERIALIZED (SELECT rowid AS rid, {_RANK} AS r FROM messages_fts"
           f" WHERE messages_fts MATCH ? AND rowid < ?{narrow})"
           f" SELECT m.*, two.r - one.r AS _rank, '' AS _snippet FROM two JOIN one ON one.rid = two.rid"
           f" JOIN messages m ON m.store_id = two.rid{filters} ORDER BY _rank, m.store_id LIMIT ?")
    params = [rare_expr, int(below), *fts_args, f"({rare_expr}) AND ({expression})", int(below), *fts_args,
              *args, int(limit)]
    return list(conn.execute(sql, params).fetchall())
