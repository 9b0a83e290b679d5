"""A search's time filter as a store-id range: the clauses, and the lowest and highest store id of
the rows a time range keeps, read exactly with a few seeks at the store's ends or through the time
index, so a search with a time filter ranks only the ids inside it."""
from __future__ import annotations

import sqlite3

PROBE_ROWS = 1024  # rows read from each end of the store, in id order, before the time index is scanned
SHORT_RANGE = 10_000  # rows: a time range this long or longer keeps the store's first id as its low end


def time_bounds(column: str, time_from: float | None, time_to: float | None) -> tuple[list[str], list[float]]:
    """``column >= time_from`` and ``column <= time_to`` for the ends given, and their arguments."""
    ends = [(f"{column} >= ?", time_from), (f"{column} <= ?", time_to)]
    return [clause for clause, at in ends if at is not None], [at for _, at in ends if at is not None]


def time_ids(conn: sqlite3.Connection, time_from: float | None, time_to: float | None,
             within: tuple[int, int] | None = None) -> tuple[int, int] | None:
    """The lowest and highest store id of the rows whose ``created_at`` lies in the time range, inside
    ``within`` (a session's id range) when given; None when no row does.

    Exact, not an estimate: rows are mostly stored in time order but not always (imported old
    histories, clock changes), so every row the time filter keeps lies inside the returned ids.
    Each end is first looked for among the ``PROBE_ROWS`` rows at that end of the store in id order
    (a ``time_to`` near the present, a ``time_from`` far in the past); else a high end comes from a
    read of the rows down from the newest id when fewer rows are newer than the range than inside
    it (``_walk_down``), and otherwise the ``messages_time`` index gives the ends, a read of the
    rows in the range. An open end gives the store's end, and so
    does a low end past ``SHORT_RANGE`` rows of the range (the newest-N window fills before it).
    """
    keep, args = time_bounds("created_at", time_from, time_to)
    kept = " AND ".join(keep)
    # "+created_at" keeps the probe on id order; the subquery stops after PROBE_ROWS rows
    probe = ("SELECT {agg}(store_id) FROM (SELECT store_id, created_at FROM messages ORDER BY store_id {order}"
             " LIMIT ?) WHERE " + kept.replace("created_at", "+created_at"))
    low = conn.execute(probe.format(agg="MIN", order="ASC"), [PROBE_ROWS, *args]).fetchone()[0] \
        if time_from is not None else _store_end(conn, "MIN")
    high = conn.execute(probe.format(agg="MAX", order="DESC"), [PROBE_ROWS, *args]).fetchone()[0] \
        if time_to is not None else _store_end(conn, "MAX")
    if high is None and time_to is not None:
        how = _walk_down(conn, float(time_to))
        if not how:
            return None  # no row is that old
        if how == "ids":  # fewer rows newer than the range than in it: read ids down
            row = conn.execute(f"SELECT store_id FROM messages WHERE {kept.replace('created_at', '+created_at')}"
                               " ORDER BY store_id DESC LIMIT 1", args).fetchone()
            if row is None:
                return None
            high = row[0]
    if low is None and high is not None:
        # a range of many rows fills the window before its first row: its start is looked up only when short
        count, low = conn.execute(f"SELECT COUNT(*), MIN(store_id) FROM (SELECT store_id FROM messages WHERE {kept}"
                                  " LIMIT ?)", [*args, SHORT_RANGE]).fetchone()
        if count >= SHORT_RANGE:
            low = _store_end(conn, "MIN")
    elif low is None or high is None:  # the end of a range not among the probed rows: the index scans it for both
        low, high = conn.execute(f"SELECT MIN(store_id), MAX(store_id) FROM messages WHERE {kept}", args).fetchone()
    if low is None:
        return None
    low, high = (int(low), int(high)) if within is None else (max(int(low), within[0]), min(int(high), within[1]))
    return None if low > high else (low, high)


def _walk_down(conn: sqlite3.Connection, time_to: float) -> str:
    """How to find the newest row up to ``time_to``: "ids" (read rows down from the newest id), "index"
    (read the time index over the range), "" (no row is that old). A choice of cost only, both exact:
    the store id of the newest row by time up to ``time_to`` tells, if rows were in time order, how
    many rows each way reads; a row read in id order costs about twice an index entry."""
    guess = conn.execute("SELECT store_id FROM messages WHERE created_at <= ? ORDER BY created_at DESC LIMIT 1",
                         (time_to,)).fetchone()
    if guess is None:
        return ""
    first, last = int(_store_end(conn, "MIN") or 0), int(_store_end(conn, "MAX") or 0)  # a row exists: not empty
    return "ids" if 2 * (last - int(guess[0])) < int(guess[0]) - first else "index"


def _store_end(conn: sqlite3.Connection, agg: str) -> int | None:
    """The store's first ("MIN") or last ("MAX") store id: one seek each (a SELECT of both aggregates
    would read every row); None when the store is empty."""
    return conn.execute(f"SELECT {agg}(store_id) FROM messages").fetchone()[0]
