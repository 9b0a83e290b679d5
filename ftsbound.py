"""Archive-wide full text on SQLite past the newest-N window: every match of a rare term is ranked.

An archive search ranks only the newest matching rows, so a name said in an old conversation would
fall out behind newer rows sharing only common words: the query's rarest phrases (at most
``RARE_BUDGET`` matches together) have every older match ranked too, scored over the whole query as
bm25 over ``(rare) AND (whole)`` minus bm25 over ``(rare)`` (no ``rowid IN`` list, which FTS5 runs
once per id).
"""
from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from . import idlist

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
    count stops at ``budget + 1``, so a common word costs no more. [] when the expression is no OR of phrases.

    A phrase is first asked for its match past the ``budget``-th, which steps through the matches
    without handing each to a count; only a phrase without one is counted, by a plain count: the
    probe has shown it has at most ``budget`` matches, and a count bounded by a LIMIT subquery
    costs several times more per match (one more read of a rare phrase's matches must not cost
    more than the single bounded count did). Rows written between the two reads stay within the cap."""
    budget = RARE_BUDGET if budget is None else budget
    where = "".join(f" AND {w}" for w in narrow)
    probe = f"SELECT 1 FROM messages_fts WHERE messages_fts MATCH ?{where} LIMIT 1 OFFSET ?"
    count = f"SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?{where}"
    return [(p, budget + 1 if conn.execute(probe, (p, *narrow_args, budget)).fetchone() is not None
             else min(budget + 1, int(conn.execute(count, (p, *narrow_args)).fetchone()[0])))
            for p in phrases(expression)]


class Window(NamedTuple):
    """Where a search's window starts, the rare phrases ranked past it, and how its rows are ordered."""

    low: int | None  # the lowest store id inside the window; None: fewer rows match, no window
    rare: list[str]  # phrases whose every older match is ranked too
    common: bool     # every phrase is common: the window's rows are taken newest first (``newest``), no bm25()


NO_WINDOW = Window(None, [], False)


def window(conn: sqlite3.Connection, fts_where: Sequence[str], fts_args: Sequence[Any], scoped: str,
           scope_args: Sequence[Any], newest: int, common: int | None = None, sessions: Sequence[str] = (),
           within: tuple[int, int] | None = None, by_session: bool = False) -> Window:
    """Where a search's window of the newest ``newest`` matches starts, and the rare phrases ranked past it.

    ``fts_where``/``fts_args`` are the full-text side (the MATCH first, then a session's id range);
    ``scoped`` (on alias ``m``) keeps the rows the search may return (its sessions, filters and the
    caller's visibility), so the window holds only those. The window's low end is the lowest store id
    inside it (None when fewer rows match: no window, nothing older); the rare phrases are those
    with at most ``RARE_BUDGET`` matches in the range together, whose older matches are ranked
    too. With ``common``, a query whose every phrase has more than ``RARE_BUDGET`` matches
    keeps only its newest ``common`` and is marked ``common``: there is no rare phrase to rank
    past the window, and BM25 over common words only, whose weights are low and alike, tells
    rows apart little while its statistics read every phrase's whole posting list.

    ``sessions`` are the sessions ``scoped`` keeps rows of, and ``within`` the searched id range:
    one session spread thin over it (``_thin``) has its newest matches found through its ids
    when its newest rows show many matches beside them (``_Newest``).

    The phrases are counted first: which window applies depends on them, so its newest matches
    are walked once, and not at all when the counts, added up, already fall short of it.
    ``by_session``: ``scoped`` keeps rows by their session alone (no role, source or time filter), so
    the window may come from the full-text index alone (``_by_index``), with no row looked up per match.
    """
    counts = phrase_counts(conn, str(fts_args[0]), fts_where[1:], fts_args[1:])
    every_common = common is not None and all_common(counts, RARE_BUDGET)
    n = min(newest, common) if every_common and common is not None else newest
    if too_few(counts, n, RARE_BUDGET):
        return NO_WINDOW
    thin = len(sessions) == 1 and within is not None and bool(scoped) and _thin(conn, sessions, within)
    session = (sessions[0], within) if thin and within else None
    low = None
    if by_session and scoped and not thin and len(sessions) == 1 and within is not None:
        told, low = _by_index(conn, fts_where, fts_args, scoped, scope_args, sessions[0], within, n)
        if told and low is None:
            return NO_WINDOW  # fewer rows of the range match than the window holds: fewer still pass
    low = _Newest(conn, fts_where, fts_args, scoped, scope_args, session).at(n) if low is None else low
    return NO_WINDOW if low is None else Window(low, pick_rare(counts, RARE_BUDGET), every_common)


OWNED_STEP = 64  # a session's ids stepped over first when checking it holds every id of a span
OWNED_SESSIONS = 32  # a store of at most this many sessions is checked session by session
CHAT_CHECK_IDS = 4096  # a session's id range past which that is cheaper than stepping (two seeks a session)
OWNED_IDS_PER_MATCH = 16  # ids stepped over per match of the window at most: past it the walk costs less


def _by_index(conn: sqlite3.Connection, fts_where: Sequence[str], fts_args: Sequence[Any], scoped: str,
              scope_args: Sequence[Any], session: str, within: tuple[int, int], n: int) -> tuple[bool, int | None]:
    """The window's low end from the full-text index alone (``scoped`` a filter on the session alone):
    ``(True, id)`` when no other chat has a row from ``within``'s ``n``-th newest match to the session's
    newest row, which passes ``scoped`` (no row looked up: about 0.55 µs a match saved); ``(True, None)``
    when fewer match; ``(False, None)`` when it cannot tell (the caller walks the rows). A store of at
    most ``OWNED_SESSIONS`` sessions, the range past ``CHAT_CHECK_IDS`` ids, is asked each other session's
    newest id in it (two seeks a session; an index entry left without its row, in a damaged store, then
    counts as a match, as with no filter). Else the session's ids are stepped over newest first, in
    spans four times longer each time (about 0.03 µs an id), each step checking it lands where a session
    holding every id would: another chat's row or a gap stops it (within ``OWNED_STEP``: before the read).
    A span of more than ``OWNED_IDS_PER_MATCH`` ids a match is not stepped over (the walk's row per match
    costs less than that many ids stepped): the caller walks the rows."""
    first, top = within
    if conn.execute(f"SELECT 1 FROM messages m WHERE m.store_id = ? AND m.session_id = ? AND {scoped}",
                    [top, session, *scope_args]).fetchone() is None:
        return False, None
    clear = None  # the lowest id from which no other chat has a row up to top, when asked
    if top - first > CHAT_CHECK_IDS:
        chats = conn.execute(  # the store's sessions in order, one seek each, and each other one's newest in range
            "WITH RECURSIVE s(id) AS (SELECT (SELECT MIN(session_id) FROM messages) UNION ALL"
            " SELECT (SELECT MIN(session_id) FROM messages WHERE session_id > s.id) FROM s WHERE s.id IS NOT NULL"
            " LIMIT ?) SELECT id, CASE WHEN id <> ? THEN (SELECT MAX(store_id) FROM messages"
            " WHERE session_id = s.id AND store_id BETWEEN ? AND ?) END FROM s",
            [OWNED_SESSIONS + 1, session, first, top]).fetchall()
        if any(chat is None for chat, _ in chats):  # every session seen (the last step finds none)
            clear = max([first, *(int(at) + 1 for _, at in chats if at is not None)])
    ids, step = _Stepper(conn, "SELECT store_id FROM messages WHERE session_id = ?", [session], key="store_id",
                         start=top + 1, descending=True), 0

    def held(span: int) -> bool:  # every id from top - span to top is the session's
        nonlocal step
        while step < span:
            step = min(span, max(OWNED_STEP, 4 * step))
            if not ids.more_than(step) or ids.after != top - step:
                return False
        return True

    if clear is None and not held(min(OWNED_STEP, top - first)):
        return False, None
    above = first if clear is None else clear
    row = conn.execute(f"SELECT rowid FROM messages_fts WHERE {' AND '.join(fts_where)} AND rowid >= ?"
                       " ORDER BY rowid DESC LIMIT 1 OFFSET ?", [*fts_args, above, max(1, n) - 1]).fetchone()
    if row is None:
        return above == first, None
    if clear is None and top - int(row[0]) > OWNED_IDS_PER_MATCH * max(1, n):
        return False, None  # matches sparse among the session's ids: stepping over them costs more than the walk
    return (True, int(row[0])) if clear is not None or held(top - int(row[0])) else (False, None)


def too_few(counts: Sequence[tuple[str, int]], n: int, budget: int) -> bool:
    """True when the phrases' matches, added up, are fewer than ``n``: their OR matches fewer rows
    still, so a window of the newest ``n`` holds them all and its read can be skipped. False for
    an expression that was not counted (no OR of phrases) and when a count stopped past ``budget``
    (``phrase_counts``: its phrase may have many more). Pure."""
    return bool(counts) and all(count <= budget for _, count in counts) and sum(count for _, count in counts) < n


def _on_index(fts_where: Sequence[str]) -> str:
    """The full-text side's clauses, their ``rowid`` named ``messages_fts.rowid`` (beside a joined ``m``)."""
    return " AND ".join(w.replace("rowid", "messages_fts.rowid") for w in fts_where)


FEW_ROWS = 5000  # rows: a thin session this small is ranked among its ids whenever more rows match than a window
SAMPLES = 16  # store ids looked up, spread over the searched range, to tell a session spread thin
ROWS_PER_MATCH = 6  # a session's id read costs about a sixth to a tenth of a match's row looked up


def ranked(conn: sqlite3.Connection, fts_where: Sequence[str], fts_args: Sequence[Any], where: Sequence[str],
           args: Sequence[Any], limit: int, sessions: Sequence[str] = (),
           within: tuple[int, int] | None = None) -> list[sqlite3.Row]:
    """The ``limit`` best matches by ``bm25()`` that pass ``where`` (on ``m``), ties in store id order:
    ``messages`` columns, ``_rank`` and an empty ``_snippet``.

    Ranks inside the full-text index first and joins only the best rows: joining every match costs
    a random row read each. Filters on ``m`` may drop ranked rows, so the ranked window widens
    until it holds ``limit`` survivors or every match. ``bm25()`` reads each phrase's posting list
    for its statistics.

    A session spread thin among other chats' rows would have its range's every match scored at
    each widening. So when ``where`` keeps only ``sessions``, whose rows are under a quarter of
    ``SAMPLES`` ids spaced over the searched range ``within`` (the first window would hold too few
    of them), and more rows match than the first window takes (else one window ranks them all),
    only the sessions' matches are scored: found through the sessions' ids when the sessions hold
    few rows per match of the range (``_among``), else by looking up each match's row
    (``_by_rows``); ``_way`` tells which, or that the sessions hold over a quarter of the range's
    ids after all (a sample can miss a dense session's rows): then the window. The rows are the same every way.
    """
    window = limit * 4 if where else limit
    if sessions and where and within is not None and _thin(conn, sessions, within):
        matches = _matches(conn, fts_where, fts_args)
        way = _way(conn, fts_where, fts_args, sessions, within, matches) if matches.more_than(window) else ""
        if way == "ids":
            return _among(conn, fts_where, fts_args, where, args, limit, sessions)
        if way == "rows":
            return _by_rows(conn, fts_where, fts_args, where, args, limit)
    filters = " WHERE " + " AND ".join(where) if where else ""
    while True:
        rows = _best(conn, fts_where, fts_args, filters, args, window, limit)
        if len(rows) >= limit or window < 0 or not where:
            return list(rows)
        total = conn.execute(f"SELECT COUNT(*) FROM messages_fts WHERE {' AND '.join(fts_where)}",
                             fts_args).fetchone()[0]
        if window >= total:
            return list(rows)
        window = window * 8 if window * 8 < total else -1


def _best(conn: sqlite3.Connection, fts_where: Sequence[str], fts_args: Sequence[Any], filters: str,
          args: Sequence[Any], window: int, limit: int) -> list[sqlite3.Row]:
    """The ``limit`` best of the ``window`` best-ranked matches (all for a negative ``window``) that pass
    ``filters``, best first, ties in store id order: ``ranked``'s rows.

    The window's ids and ranks are read in rank order and each one's row is looked up only until
    ``limit`` pass (``_first_passing``): sorting the joined window looked up every row of it (400
    for a pool of 100, about 0.8 ms in a 100,000-message session)."""
    return _first_passing(conn, f"SELECT rowid AS rid, {_RANK} AS r FROM messages_fts"
                                f" WHERE {' AND '.join(fts_where)} ORDER BY r, rid LIMIT ?",
                          [*fts_args, window], filters, args, limit)


LOOKUP_ROWS = 250  # ids a look-up names at most (three parameters each)


def _first_passing(conn: sqlite3.Connection, ranked_sql: str, ranked_args: Sequence[Any], filters: str,
                   args: Sequence[Any], limit: int) -> list[sqlite3.Row]:
    """The first ``limit`` rows, in the order ``ranked_sql`` gives its ``(rid, r)`` pairs (its own
    ORDER BY), whose ``messages`` row passes ``filters`` (on ``m``): ``messages`` columns, ``_rank``
    (``r``) and an empty ``_snippet``. Rows are looked up a batch at a time, ``limit`` ids first and
    twice as many each time after, so a filter that passes every row looks up ``limit`` rows; a batch
    leaves room for the filters' arguments within the connection's cap on a statement's parameters (999
    on SQLite builds before 3.32; filters that fill it alone fail as they would in any statement).

    The ranks and the rows are read in one snapshot (a read transaction unless the caller is in one):
    a row rewritten meanwhile (a payload clean-up) would come with its old rank, one deleted would
    be missing from the pool."""
    with _snapshot(conn):
        return _passing(conn, conn.execute(ranked_sql, ranked_args).fetchall() if limit else [], filters, args,
                        limit)


@contextlib.contextmanager
def _snapshot(conn: sqlite3.Connection) -> Iterator[None]:
    """Reads inside one snapshot of the file: a deferred read transaction, ended after them (a write of the
    caller's own transaction is never ended here: inside one, its reads share its snapshot already)."""
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN")
    try:
        yield
    finally:
        if conn.in_transaction:  # a read ends the same either way; ROLLBACK cannot fail for want of a lock
            conn.execute("ROLLBACK")


def _passing(conn: sqlite3.Connection, ranked: Sequence[Any], filters: str, args: Sequence[Any],
             limit: int) -> list[sqlite3.Row]:
    """``_first_passing``'s look-ups, over the ``ranked`` ``(rid, r)`` pairs already read."""
    want = len(ranked) if limit < 0 else limit  # a negative limit: every row that passes
    out: list[sqlite3.Row] = []
    room = max(1, (idlist.cap(conn) - len(args)) // 3)  # three parameters a row
    start, size = 0, max(want, 1)
    while start < len(ranked) and len(out) < want:
        batch = ranked[start:start + min(size, LOOKUP_ROWS, room)]
        values = ",".join("(?,?,?)" for _ in batch)
        flat = [x for k, (rid, r) in enumerate(batch, start) for x in (k, rid, r)]
        out.extend(conn.execute(
            f"WITH c(k, rid, r) AS (VALUES {values}) SELECT m.*, c.r AS _rank, '' AS _snippet"
            f" FROM c CROSS JOIN messages m ON m.store_id = c.rid{filters} ORDER BY c.k", [*flat, *args]))
        start, size = start + len(batch), size * 2
    return out[:want]


def _way(conn: sqlite3.Connection, fts_where: Sequence[str], fts_args: Sequence[Any],
         sessions: Sequence[str], within: tuple[int, int], matches: _Stepper | None = None) -> str:
    """How ``ranked`` scores a thin-looking session's matches: "ids" when reading the sessions' ids
    costs less than looking up each match's row (they hold at most ``FEW_ROWS`` rows, or fewer
    than about ``ROWS_PER_MATCH`` rows per match of the range), "rows" when it does not, "" (the
    window) when the sessions hold more than a quarter of the ids ``within`` the searched range:
    dense, which the sample can miss when the sessions' rows come at a steady period.

    The counts are bounded steps through an index (``_Stepper``; ``matches`` goes on from the
    caller's), doubling from ``FEW_ROWS`` up to the quarter: whether the sessions hold more than
    ``n`` rows and the range more than ``n / ROWS_PER_MATCH`` matches, in turn, each step going on
    from the row the last one stopped at (several sessions' rows, in no one id order, are stepped
    through from the first each time). Neither read goes much past what the cheaper way reads anyway."""
    among, among_args = idlist.among(conn, "session_id", sessions)
    held = f"SELECT 1 FROM messages WHERE {among} AND store_id BETWEEN ? AND ?"
    rows = _Stepper(conn, "SELECT store_id FROM messages WHERE session_id = ?", sessions, key="store_id") \
        if len(sessions) == 1 else _Stepper(conn, held, [*among_args, 0, 2 ** 62])
    matches = matches or _matches(conn, fts_where, fts_args)
    n, quarter, counted = FEW_ROWS, max((within[1] - within[0] + 1) // 4, 1), False  # counted: the range's quarter
    while rows.more_than(n if counted else min(n, quarter)):
        if not counted and n >= quarter:
            if _Stepper(conn, held, [*among_args, *within]).more_than(quarter):
                return ""  # over a quarter of the range's ids are the sessions': the first window holds enough
            counted = True  # most of their rows lie outside the range (a time range's): asked no more
            continue
        if not matches.more_than(n // ROWS_PER_MATCH):
            return "rows"  # many rows per match: each match's row is looked up
        n *= 2
    return "ids"


class _Stepper:
    """Tells whether a read holds more than ``n`` rows, stepping over them without handing any over.

    Ordered by an indexed ``key`` (from ``start``, exclusive; ``descending``: newest first), each
    step goes on from the row the last one stopped at, whose key is ``after``; without a key
    (several sessions' rows, in no one id order) each steps from the first row again."""

    def __init__(self, conn: sqlite3.Connection, sql: str, args: Sequence[Any], key: str = "", start: int = -1,
                 descending: bool = False) -> None:
        order = f" AND {key} {'<' if descending else '>'} ? ORDER BY {key}{' DESC' if descending else ''}" \
            if key else ""
        self.conn, self.sql, self.args, self.key = conn, f"{sql}{order} LIMIT 1 OFFSET ?", list(args), key
        self.seen, self.after = 0, start  # rows known to be there, the key of the last one stepped to

    def more_than(self, n: int) -> bool:
        if n < self.seen:
            return True
        row = self.conn.execute(self.sql, [*self.args, self.after, n - self.seen] if self.key
                                else [*self.args, n]).fetchone()
        if row is None:
            return False
        self.seen, self.after = n + 1, int(row[0]) if self.key else self.after
        return True


def _matches(conn: sqlite3.Connection, fts_where: Sequence[str], fts_args: Sequence[Any]) -> _Stepper:
    """Steps through the full-text side's matches in store-id order, scoring none."""
    return _Stepper(conn, f"SELECT rowid FROM messages_fts WHERE {' AND '.join(fts_where)}", fts_args, key="rowid")


def _thin(conn: sqlite3.Connection, sessions: Sequence[str], within: tuple[int, int]) -> bool:
    """True when under a quarter of ``SAMPLES`` rows, at ids spread over ``within``, are the sessions'.

    The i-th id lies in the i-th of ``SAMPLES`` equal parts of the range, at an uneven place in it
    (thousandths ``613 * i mod 1000``): evenly spaced ids would all land on the rows of a chat that
    writes every k-th row when the spacing is a multiple of k, and read it as dense."""
    low, high = within
    among, among_args = idlist.among(conn, "sid", sessions)
    held = conn.execute(
        "WITH RECURSIVE k(i) AS (VALUES(0) UNION ALL SELECT i + 1 FROM k WHERE i + 1 < ?),"
        " s(sid) AS (SELECT (SELECT session_id FROM messages"
        " WHERE store_id >= ? + (? - ?) * (1000 * i + 613 * i % 1000) / (1000 * ?)"
        f" ORDER BY store_id LIMIT 1) FROM k) SELECT COUNT(*) FROM s WHERE {among}",
        [SAMPLES, low, high, low, SAMPLES, *among_args]).fetchone()[0]
    return 4 * int(held) < SAMPLES


def _among(conn: sqlite3.Connection, fts_where: Sequence[str], fts_args: Sequence[Any], where: Sequence[str],
           args: Sequence[Any], limit: int, sessions: Sequence[str]) -> list[sqlite3.Row]:
    """``ranked``'s rows, scoring only the sessions' matches: the sessions' ids are read once from
    ``messages_session`` alone into a list the index's matches are checked against (``+rowid`` keeps it
    off the full-text index, which would run the query once per id), ``bm25()`` is computed for the
    matches kept only, and ``where`` is checked on those matches' rows only (checked on the ids' list, a
    role or source filter would read every row of the sessions, matching or not)."""
    among, among_args = idlist.among(conn, "session_id", sessions)
    sql = (f"WITH f AS MATERIALIZED (SELECT rowid AS rid, {_RANK} AS r FROM messages_fts"
           f" WHERE {' AND '.join(fts_where)} AND +rowid IN (SELECT store_id FROM messages"
           f" WHERE {among}))"
           " SELECT m.*, f.r AS _rank, '' AS _snippet FROM f CROSS JOIN messages m ON m.store_id = f.rid"
           f" WHERE {' AND '.join(where)} ORDER BY f.r, f.rid LIMIT ?")
    return list(conn.execute(sql, [*fts_args, *among_args, *args, limit]).fetchall())


def _by_rows(conn: sqlite3.Connection, fts_where: Sequence[str], fts_args: Sequence[Any], where: Sequence[str],
             args: Sequence[Any], limit: int) -> list[sqlite3.Row]:
    """``ranked``'s rows, each match's row looked up by its id to check ``where`` before it is scored:
    ``bm25()`` is computed for the rows kept only, and only the ``limit`` best are read whole. Costs
    a row seek per match (``NOT INDEXED``: by its id, not through a session index), which a session
    holding many more rows than the range has matches pays for rather than reading its ids."""
    sql = (f"SELECT o.*, f.r AS _rank, '' AS _snippet FROM (SELECT m.store_id AS rid, {_RANK} AS r"
           " FROM messages_fts CROSS JOIN messages m NOT INDEXED ON m.store_id = messages_fts.rowid"
           f" WHERE {_on_index(fts_where)} AND {' AND '.join(where)} ORDER BY r, rid LIMIT ?) f"
           " CROSS JOIN messages o ON o.store_id = f.rid ORDER BY f.r, f.rid")
    return list(conn.execute(sql, [*fts_args, *args, limit]).fetchall())


ALL_RANK, ANY_RANK = -2.0, -1.0  # ``newest``'s ranks: a row holding every phrase, any other row


def newest(conn: sqlite3.Connection, fts_where: Sequence[str], fts_args: Sequence[Any], where: Sequence[str],
           args: Sequence[Any], limit: int) -> list[sqlite3.Row]:
    """A query of common words only, ordered without ``bm25()``: the newest ``limit`` rows holding every
    phrase (``_rank`` ``ALL_RANK``), then the newest others (``ANY_RANK``), all passing ``where``.

    Rows as ``ranked`` gives them. FTS5 hands matches over in rowid order and stops at the
    ``limit``-th, so neither read scans a posting list past the window the caller bounds
    ``fts_where`` to. A query of one phrase takes its newest matches only.
    """
    parts = phrases(str(fts_args[0]))
    filters = "".join(f" AND {w}" for w in where)
    sql = ("SELECT m.*, ? AS _rank, '' AS _snippet FROM messages_fts CROSS JOIN messages m"
           f" ON m.store_id = messages_fts.rowid WHERE {_on_index(fts_where)}{filters}"
           " ORDER BY messages_fts.rowid DESC LIMIT ?")
    every = conn.execute(sql, [ALL_RANK, " AND ".join(f"({p})" for p in parts), *fts_args[1:], *args,
                               limit]).fetchall() if len(parts) > 1 else []
    held = {int(r["store_id"]) for r in every}
    rest = [r for r in conn.execute(sql, [ANY_RANK, *fts_args, *args, limit]) if int(r["store_id"]) not in held]
    return [*every, *rest][:limit]


class _Newest:
    """The n-th newest match the caller may read, for a growing ``n`` (``at``), each read going on
    below the last one's row: by looking up each match's row, or for one ``session`` spread thin
    over the id range given with it, through its ids.

    A match's row looked up costs about 2 µs at a million stored messages (a seek to a page of
    its own), stepping over a match in the index about 0.04 µs; at one row in a hundred the
    session's newest 1,000 matches lie among some 100,000 of the range. Its ids, read newest first
    from ``messages_session`` in spans of doubling length (2 ``n`` of them first), each go into a
    list the span's matches are checked against before any row is read (about 0.14 µs an id
    listed, 0.1 µs a match checked). That pays when the matches are many beside the session's
    ids, which the newest span tells (``_listed``); else each match's row is looked up."""

    def __init__(self, conn: sqlite3.Connection, fts_where: Sequence[str], fts_args: Sequence[Any], scoped: str,
                 scope_args: Sequence[Any], session: tuple[str, tuple[int, int]] | None) -> None:
        self.conn, self.fts_where, self.fts_args = conn, list(fts_where), list(fts_args)
        self.scoped, self.scope_args, self.session = scoped, list(scope_args), session
        self.found = 0  # matches kept so far
        self.below: int | None = 2 ** 62  # the lowest kept one's id (reads go on under it); None: no more
        if session is not None:
            name, (low, high) = session
            self.ids = _Stepper(conn, "SELECT store_id FROM messages WHERE session_id = ? AND store_id BETWEEN ? AND ?",
                                [name, low, high], key="store_id", start=high + 1, descending=True)
            self.floor, self.span = high + 1, 0  # the lowest id the spans read so far reach; their length

    def at(self, n: int) -> int | None:
        """The store id of the ``n``-th newest match (``n`` not below the last call's; under 1 asks for
        the newest); None when fewer match."""
        n = max(1, int(n))
        if self.below is None or n == self.found:  # the same n again: the match found for it
            return self.below
        if self.session is not None and not self.found and not self._listed(int(n)):
            self.session = None  # few matches beside the session's ids: each match's row is looked up
        found = self._by_ids(n, self.below) if self.session is not None else self._by_rows(n, self.below)
        self.below = found
        if found is not None:
            self.found = n
        return found

    def _by_rows(self, n: int, below: int) -> int | None:
        skip, under = max(0, int(n) - self.found - 1), " AND messages_fts.rowid < ?" if self.found else ""
        under_args = [below] if self.found else []
        # Matches newest down: CROSS JOIN keeps the index outermost (a walk of a session's rows matching each is
        # a hundred times slower) and its rowid order needs no sort; NOT INDEXED finds each row by its id, not
        # through messages_session (0.32 against 0.48 ms for 1,000 matches).
        row = self.conn.execute(f"SELECT rowid FROM messages_fts WHERE {' AND '.join(self.fts_where)}"
                                f"{under.replace('messages_fts.', '')} ORDER BY rowid DESC LIMIT 1 OFFSET ?",
                                [*self.fts_args, *under_args, skip]).fetchone() \
            if not self.scoped else self.conn.execute(
                "SELECT m.store_id FROM messages_fts CROSS JOIN messages m NOT INDEXED"
                f" ON m.store_id = messages_fts.rowid WHERE {_on_index(self.fts_where)} AND {self.scoped}{under}"
                " ORDER BY messages_fts.rowid DESC LIMIT 1 OFFSET ?",
                [*self.fts_args, *self.scope_args, *under_args, skip]).fetchone()
        return None if row is None else int(row[0])

    def _by_ids(self, n: int, below: int) -> int | None:
        assert self.session is not None
        name, (low, high) = self.session
        need, top = int(n) - self.found, below if self.found else high + 1
        sql = ("SELECT COUNT(*), MIN(rid) FROM (SELECT m.store_id AS rid FROM messages_fts CROSS JOIN messages m"
               f" NOT INDEXED ON m.store_id = messages_fts.rowid WHERE {_on_index(self.fts_where)}"
               " AND messages_fts.rowid BETWEEN ? AND ? AND +messages_fts.rowid IN (SELECT store_id FROM messages"
               f" WHERE session_id = ? AND store_id BETWEEN ? AND ?) AND {self.scoped}"
               " ORDER BY messages_fts.rowid DESC LIMIT ?)")
        while True:
            if self.floor >= top:  # the spans read so far are checked: the session's next ids, twice as many
                if self.floor <= low:
                    return None
                self.span = max(2 * self.span, 2 * need)
                self.floor = self.ids.after + 1 if self.ids.more_than(self.span) else low
            span = [self.floor, top - 1]
            count, last = self.conn.execute(sql, [*self.fts_args, *span, name, *span, *self.scope_args,
                                                  need]).fetchone()
            if count >= need:
                return int(last)
            self.found, need, top = self.found + int(count), need - int(count), self.floor

    def _listed(self, n: int) -> bool:
        """Whether the session's newest ``2 n`` ids span more than ``n`` matches of the range (one
        match for two ids): then its ids are listed, span by span; else each match's row is looked
        up. An id listed costs about a fifteenth of a row looked up, but the spans list every id down
        to the window's end, all of them when the session's matches do not fill the window: with
        few matches per id (a rare word) that costs more than their rows (a 50,000-row session, one
        row in twenty, 2 rare words, the window's 1,000th then 5,000th: 3.4 ms by rows, 13.1 ms
        listing every span)."""
        assert self.session is not None
        _, (low, high) = self.session
        self.span = 2 * n
        self.floor = self.ids.after + 1 if self.ids.more_than(self.span) else low
        return self.conn.execute(f"SELECT 1 FROM messages_fts WHERE {' AND '.join(self.fts_where)}"
                                 " AND rowid BETWEEN ? AND ? LIMIT 1 OFFSET ?",
                                 [*self.fts_args, self.floor, high, n]).fetchone() is not None


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
    scored = (f"WITH one AS MATERIALIZED (SELECT rowid AS rid, {_RANK} AS r FROM messages_fts"
              f" WHERE messages_fts MATCH ? AND rowid < ?{narrow}),"
              f" two AS MATERIALIZED (SELECT rowid AS rid, {_RANK} AS r FROM messages_fts"
              f" WHERE messages_fts MATCH ? AND rowid < ?{narrow})")
    params = [rare_expr, int(below), *fts_args, f"({rare_expr}) AND ({expression})", int(below), *fts_args]
    return _first_passing(conn, f"{scored} SELECT two.rid, two.r - one.r AS r FROM two JOIN one ON one.rid = two.rid"
                                f" ORDER BY r, two.rid", params,
                          filters, args, int(limit))
