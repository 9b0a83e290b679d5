"""A session whose rows are spread thin among other chats' is ranked among its own rows, with the same result.

A gateway serving many chats interleaves their rows, so one chat's store-id range holds mostly
other chats' matches. ``ftsbound.ranked`` scores only the session's matches, found through its
ids (``_among``) or, for a session holding many rows per match, by looking up each match's row
(``_by_rows``), instead of widening a window over every match of the range; the rows, their
order (ties in store id order) and their scores are the ones the widening window gives.
"""
from __future__ import annotations

import sqlite3

import pytest
from conftest import assistant, user

from hermes_trove import ftsbound
from hermes_trove.fulltext import build_match
from hermes_trove.store import SessionKey

WORDS = ["coffee", "budget", "trip", "plan", "note", "review", "garden"]


def fill(runtime) -> None:
    """Twenty chats; the "thin" chat says one row in every twenty-five, many of them word for word alike."""
    for i in range(1500):
        session = "thin" if i % 25 == 7 else f"chat-{i % 19}"
        text = ("coffee budget plan" if i % 50 == 7 else
                " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 2 + i % 5)))
        text += " harbour" if i % 300 == 7 else ""
        runtime.store.append(SessionKey(session), [(user if i % 2 else assistant)(f"{text} row")])


@pytest.fixture
def conn(runtime, backend) -> sqlite3.Connection:
    """The filled store's connection (``fill``); the widening window is SQLite's, PostgreSQL ranks in SQL."""
    if backend != "sqlite":
        pytest.skip("the widening window is SQLite's; PostgreSQL ranks in SQL")
    fill(runtime)
    read = runtime.store.db.read()
    assert isinstance(read, sqlite3.Connection)
    return read


def scored(statements: list[str]) -> list[str]:
    """The full-text statements that computed ``bm25()``."""
    return [q for q in statements if "bm25(" in q]


def ranked_both(conn: sqlite3.Connection, match: str, where: list[str], args: list, limit: int):
    """The rows and the full-text statements run, for the widening window and for ``_among``."""
    lo, hi = conn.execute("SELECT MIN(store_id), MAX(store_id) FROM messages WHERE session_id = 'thin'").fetchone()
    fts_where, fts_args = ["messages_fts MATCH ?", "rowid BETWEEN ? AND ?"], [match, lo, hi]
    out = []
    for sessions in ((), ("thin",)):
        seen: list[str] = []  # FTS5's own reads of its tables come as "-- " lines
        conn.set_trace_callback(seen.append)
        try:
            got = ftsbound.ranked(conn, fts_where, fts_args, where, args, limit, sessions, (lo, hi))
        finally:
            conn.set_trace_callback(None)
        out.append(([(int(r["store_id"]), float(r["_rank"]), r["content"]) for r in got],
                    [s for s in seen if "messages_fts" in s and not s.startswith("--")]))
    return out


@pytest.mark.parametrize("limit", [1, 3, 10, 100])
@pytest.mark.parametrize("query", ["coffee budget plan", "coffee", "garden review", "trip"])
def test_thin_session_ranks_its_own_rows_alike(conn, query, limit):
    match = build_match(query).expression
    for where, args in ((["m.session_id IN (?)"], ["thin"]), (["m.session_id IN (?)", "m.role=?"], ["thin", "user"])):
        (old, old_sql), (new, new_sql) = ranked_both(conn, match, where, args, limit)
        every = conn.execute(
            "SELECT m.store_id, bm25(messages_fts, 1.0, 0.6), m.content FROM messages_fts JOIN messages m"
            " ON m.store_id = messages_fts.rowid WHERE messages_fts MATCH ? AND " + " AND ".join(where),
            [match, *args]).fetchall()
        expected = sorted(((int(s), float(r), c) for s, r, c in every), key=lambda t: (t[1], t[0]))[:limit]
        assert new == old == expected, (query, limit, where)
        old_scored, new_scored = scored(old_sql), scored(new_sql)
        assert len(new_scored) == 1  # one scoring pass: the session's matches, or a range's few matches
        if limit in (3, 10):  # the window widened, each step scoring the range's every match again
            assert len(old_scored) >= 2 and "+rowid IN" in new_scored[0]
        if len(old_scored) >= 2:
            assert "+rowid IN" in new_scored[0]


def test_ties_at_the_cut_follow_store_ids(conn):
    (old, _), (new, _) = ranked_both(conn, build_match("coffee budget plan").expression,
                                     ["m.session_id IN (?)"], ["thin"], 20)
    alike = [row for row in new if row[2] == "coffee budget plan row"]
    assert len(alike) >= 2 and len({r for _, r, _ in alike}) == 1  # word for word alike rows score alike
    assert [s for s, _, _ in alike] == sorted(s for s, _, _ in alike)
    assert new == old


def expected_rows(conn: sqlite3.Connection, match: str, where: list[str], args: list, limit: int):
    """Every match passing ``where`` scored and sorted here: the rows ``ranked`` must give."""
    every = conn.execute(
        "SELECT m.store_id, bm25(messages_fts, 1.0, 0.6), m.content FROM messages_fts JOIN messages m"
        " ON m.store_id = messages_fts.rowid WHERE messages_fts MATCH ? AND " + " AND ".join(where),
        [match, *args]).fetchall()
    return sorted(((int(s), float(r), c) for s, r, c in every), key=lambda t: (t[1], t[0]))[:limit]


@pytest.mark.parametrize("limit", [1, 3, 10, 40])
@pytest.mark.parametrize("query", ["coffee budget plan", "coffee", "garden review", "harbour", "harbour trip"])
def test_a_session_past_few_rows_ranks_its_own_rows_alike(conn, monkeypatch, query, limit):
    """Past ``FEW_ROWS`` (lowered: "thin" holds 60 rows) a thin session is ranked by its ids when it
    holds few rows per match of its range, else by looking up each match's row; both give the
    window's rows, ranks and order, scoring the range's matches once."""
    monkeypatch.setattr(ftsbound, "FEW_ROWS", 10)
    match = build_match(query).expression
    for where, args in ((["m.session_id IN (?)"], ["thin"]), (["m.session_id IN (?)", "m.role=?"], ["thin", "user"])):
        (old, old_sql), (new, new_sql) = ranked_both(conn, match, where, args, limit)
        assert new == old == expected_rows(conn, match, where, args, limit), (query, limit, where)
        assert len(scored(new_sql)) == 1
        if len(scored(old_sql)) >= 2:  # the window widened: the session's matches were scored instead
            way = "NOT INDEXED" if query == "harbour" else "+rowid IN"  # 5 matches for 60 rows; hundreds
            assert way in scored(new_sql)[0], (query, limit, where)


def test_a_big_session_with_few_matches_looks_up_their_rows(conn, monkeypatch):
    monkeypatch.setattr(ftsbound, "FEW_ROWS", 10)  # "thin" holds 60 rows
    lo, hi = conn.execute("SELECT MIN(store_id), MAX(store_id) FROM messages WHERE session_id = 'thin'").fetchone()
    common = ["messages_fts MATCH ?", "rowid BETWEEN ? AND ?"], [build_match("coffee").expression, lo, hi]
    few = ["messages_fts MATCH ?", "rowid BETWEEN ? AND ?"], [build_match("harbour").expression, lo, hi]
    assert ftsbound._way(conn, *common, ["thin"], (lo, hi)) == "ids"  # 60 rows, hundreds of matches: its ids
    assert ftsbound._way(conn, *few, ["thin"], (lo, hi)) == "rows"  # 60 rows, 5 matches: each match's row
    for sessions in (["thin"], ["thin", "chat-3"]):  # one session's rows are stepped through once, several's again
        assert ftsbound._way(conn, *common, sessions, (lo, hi)) == "ids"
        assert ftsbound._way(conn, *few, sessions, (lo, hi)) == "rows"


def test_a_chat_in_step_with_even_samples_reads_thin(runtime, backend):
    """A chat writing every tenth row over a range of 1,500 ids: ids spaced evenly by 100 would all
    land on its rows and read it as dense; the spread sample reads it thin."""
    if backend != "sqlite":
        pytest.skip("the density sample is SQLite's")
    for i in range(1501):
        runtime.store.append(SessionKey("steady" if i % 10 == 0 else f"chat-{i % 7}"), [user(f"coffee row {i}")])
    conn = runtime.store.db.read()
    assert isinstance(conn, sqlite3.Connection)
    lo, hi = conn.execute("SELECT MIN(store_id), MAX(store_id) FROM messages WHERE session_id = 'steady'").fetchone()
    assert (hi - lo) % (10 * (ftsbound.SAMPLES - 1)) == 0  # evenly spaced samples would all be "steady"'s rows
    assert all(conn.execute("SELECT session_id FROM messages WHERE store_id = ?",
                            (lo + (hi - lo) * i // (ftsbound.SAMPLES - 1),)).fetchone()[0] == "steady"
               for i in range(ftsbound.SAMPLES))
    assert ftsbound._thin(conn, ["steady"], (lo, hi))
    hits = runtime.store.search(build_match("coffee").expression, ["steady"], limit=10, snippets=False,
                                max_candidates=5000, common_candidates=1000)
    assert len(hits) == 10 and {row.session_id for row, _, _ in hits} == {"steady"}


def test_few_matches_keep_the_window(conn):
    for where, args, found in ((["m.session_id IN (?)"], ["thin"], 5), (["m.session_id IN (?)", "m.role=?"],
                                                                       ["thin", "assistant"], 0)):
        (old, old_sql), (new, new_sql) = ranked_both(conn, build_match("harbour").expression, where, args, 10)
        assert new == old and len(new) == found  # five rows match: one window ranks them all, without the ids
        assert scored(new_sql) == scored(old_sql)
        assert not any("+rowid IN" in q for q in new_sql)


def test_store_search_of_a_thin_session(runtime, backend):
    fill(runtime)
    hits = runtime.store.search(build_match("coffee budget").expression, ["thin"], limit=30, snippets=False,
                                max_candidates=5000, common_candidates=1000)
    assert len(hits) == 30 and {row.session_id for row, _, _ in hits} == {"thin"}
    ranks = [(rank, row.store_id) for row, rank, _ in hits]
    assert ranks == sorted(ranks)


def test_a_dense_session_keeps_the_window(runtime, backend):
    if backend != "sqlite":
        pytest.skip("the widening window is SQLite's")
    for i in range(300):  # "dense" says most rows of its range; another chat now and then
        session = "other" if i % 10 == 3 else "dense"
        runtime.store.append(SessionKey(session), [user(f"coffee plan {WORDS[i % len(WORDS)]} row")])
    conn = runtime.store.db.read()
    assert isinstance(conn, sqlite3.Connection)
    lo, hi = conn.execute("SELECT MIN(store_id), MAX(store_id) FROM messages WHERE session_id = 'dense'").fetchone()
    assert not ftsbound._thin(conn, ["dense"], (lo, hi)) and ftsbound._thin(conn, ["other"], (lo, hi))
    fts_where, fts_args = ["messages_fts MATCH ?", "rowid BETWEEN ? AND ?"], [build_match("coffee").expression, lo, hi]
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        got = ftsbound.ranked(conn, fts_where, fts_args, ["m.session_id IN (?)"], ["dense"], 5, ["dense"], (lo, hi))
    finally:
        conn.set_trace_callback(None)
    assert len(got) == 5 and {r["session_id"] for r in got} == {"dense"}
    assert not any("+rowid IN" in q for q in seen)  # the first window holds enough of its rows
    assert [tuple(r) for r in got] == [tuple(r) for r in ftsbound.ranked(conn, fts_where, fts_args,
                                                                         ["m.session_id IN (?)"], ["dense"], 5)]


def test_a_role_filter_reads_the_matching_rows_only(conn):
    where, args = ["m.session_id IN (?)", "m.role=?", "(m.source=? OR (?='unknown' AND m.source=''))"], \
        ["thin", "user", "unknown", "unknown"]
    (old, _), (new, new_sql) = ranked_both(conn, build_match("coffee").expression, where, args, 10)
    assert new == old and len(new) == 10
    scored = [q for q in new_sql if "+rowid IN" in q]
    assert len(scored) == 1
    # the sessions' ids come from the session index alone: a role or source filter is checked on the
    # matches' rows, not on every row of the sessions
    plan = [r[-1] for r in conn.execute("EXPLAIN QUERY PLAN " + scored[0])]
    seeks = [p for p in plan if "messages_session" in p]
    assert seeks and all("COVERING INDEX" in p for p in seeks), plan


def test_a_dense_session_the_sample_misses_keeps_the_window(runtime, backend, monkeypatch):
    """Every other row over 417 ids is "dense"'s, yet 15 of the 16 sampled ids fall on the other
    chats' rows (the uneven places keep in step with period 2 at this length): it reads thin. The
    sessions' rows counted on the way then show over a quarter of the range: the window ranks it."""
    if backend != "sqlite":
        pytest.skip("the widening window is SQLite's")
    monkeypatch.setattr(ftsbound, "FEW_ROWS", 10)
    for i in range(417):
        text = " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 2 + i % 4))
        runtime.store.append(SessionKey("dense" if i % 2 == 0 else f"chat-{i % 5}"), [user(f"{text} row")])
    conn = runtime.store.db.read()
    assert isinstance(conn, sqlite3.Connection)
    lo, hi = conn.execute("SELECT MIN(store_id), MAX(store_id) FROM messages WHERE session_id = 'dense'").fetchone()
    assert hi - lo == 416 and ftsbound._thin(conn, ["dense"], (lo, hi))  # the sample misses it
    for query in ("coffee", "garden review"):
        match = build_match(query).expression
        fts_where, fts_args = ["messages_fts MATCH ?", "rowid BETWEEN ? AND ?"], [match, lo, hi]
        assert ftsbound._way(conn, fts_where, fts_args, ["dense"], (lo, hi)) == ""
        seen: list[str] = []
        conn.set_trace_callback(seen.append)
        try:
            got = ftsbound.ranked(conn, fts_where, fts_args, ["m.session_id IN (?)"], ["dense"], 10,
                                  ["dense"], (lo, hi))
        finally:
            conn.set_trace_callback(None)
        assert [(int(r["store_id"]), float(r["_rank"]), r["content"]) for r in got] == \
            expected_rows(conn, match, ["m.session_id IN (?)"], ["dense"], 10)
        ways = [q for q in scored(seen) if "messages_fts" in q and not q.startswith("--")]
        assert ways and not any("+rowid IN" in q or "NOT INDEXED" in q for q in ways), ways  # the window


def newest_matches(conn: sqlite3.Connection, match: str, where: list[str], args: list, within: tuple[int, int]):
    """Every match in ``within`` passing ``where``, newest first: what the window's n-th newest is taken from."""
    return [int(r[0]) for r in conn.execute(
        "SELECT m.store_id FROM messages_fts JOIN messages m ON m.store_id = messages_fts.rowid"
        " WHERE messages_fts MATCH ? AND m.store_id BETWEEN ? AND ? AND " + " AND ".join(where)
        + " ORDER BY m.store_id DESC", [match, *within, *args])]


class Listed(ftsbound._Newest):
    """Lists the session's ids span by span whatever the matches (as when they are many)."""

    def _listed(self, n: int) -> bool:
        super()._listed(n)
        return True


FILTERS = ((["m.session_id IN (?)"], ["thin"]), (["m.session_id IN (?)", "m.role=?"], ["thin", "user"]))


@pytest.mark.parametrize("query", ["coffee budget plan", "coffee", "garden review", "harbour", "harbour trip"])
def test_the_windows_bound_through_a_thin_sessions_ids_is_the_rows_walks(conn, query):
    """The window's n-th newest match found through a thin session's ids, in spans of doubling
    length (listed whatever the matches, or as the newest span's matches tell), is the one the walk
    over every match's row finds: for n asked in turn (each read going on below the last), with a
    role filter, and over a narrower id range (a time range's)."""
    match = build_match(query).expression
    lo, hi = conn.execute("SELECT MIN(store_id), MAX(store_id) FROM messages WHERE session_id = 'thin'").fetchone()
    for within in ((lo, hi), (lo + 300, hi - 400)):
        fts_where, fts_args = ["messages_fts MATCH ?", "rowid BETWEEN ? AND ?"], [match, *within]
        for where, args in FILTERS:
            every = newest_matches(conn, match, where, args, within)
            for asked in ((1,), (2, 3), (1, 5, 6, 40), (7, 8, 1000), (max(1, len(every)),), (len(every) + 1,)):
                scoped = " AND ".join(where)
                by_rows = ftsbound._Newest(conn, fts_where, fts_args, scoped, args, None)
                by_ids = ftsbound._Newest(conn, fts_where, fts_args, scoped, args, ("thin", within))
                listed = Listed(conn, fts_where, fts_args, scoped, args, ("thin", within))
                expected = [every[n - 1] if n <= len(every) else None for n in asked]
                # once one read finds too few, the later ones find none
                expected = [e if None not in expected[:i] else None for i, e in enumerate(expected)]
                assert [by_rows.at(n) for n in asked] == expected, (query, within, where, asked)
                assert [by_ids.at(n) for n in asked] == expected, (query, within, where, asked)
                assert [listed.at(n) for n in asked] == expected, (query, within, where, asked)


def test_a_thin_sessions_window_is_read_through_its_ids(conn):
    lo, hi = conn.execute("SELECT MIN(store_id), MAX(store_id) FROM messages WHERE session_id = 'thin'").fetchone()
    for query, newest, common in (("coffee", 20, 5), ("coffee budget plan", 30, None), ("harbour", 2, None)):
        fts_where, fts_args = ["messages_fts MATCH ?", "rowid BETWEEN ? AND ?"], [build_match(query).expression, lo, hi]
        seen: list[str] = []
        conn.set_trace_callback(seen.append)
        try:
            thin = ftsbound.window(conn, fts_where, fts_args, "m.session_id IN (?)", ["thin"], newest, common,
                                   ["thin"], (lo, hi))
        finally:
            conn.set_trace_callback(None)
        assert thin == ftsbound.window(conn, fts_where, fts_args, "m.session_id IN (?)", ["thin"], newest, common)
        assert thin.low is not None
        walks = [q for q in seen if "ORDER BY messages_fts.rowid DESC" in q]
        # a span of the session's ids holding more matches than ids has them listed, else each match's row is
        # looked up: "harbour" has five matches in the range
        assert walks and all(("+messages_fts.rowid IN" in q) == (query != "harbour") for q in walks), walks
    assert ftsbound.window(conn, fts_where, fts_args, "m.session_id IN (?)", ["thin"], 6, None, ["thin"],
                           (lo, hi)) == ftsbound.NO_WINDOW  # five rows say "harbour"


@pytest.mark.parametrize("key,descending", [("", False), ("store_id", False), ("store_id", True)])
def test_a_stepper_tells_more_than_n_rows_asked_in_any_order(conn, key, descending):
    """One stepper reads matches, a session's rows newest first or oldest first, and several
    sessions' rows (no key: from the first each time); its answers are the counts'."""
    sql, args = "SELECT store_id FROM messages WHERE session_id = ?", ["thin"]
    if not key:
        sql, args = "SELECT 1 FROM messages WHERE session_id IN (?, ?) AND store_id BETWEEN ? AND ?", \
            ["thin", "chat-3", 0, 2 ** 62]
    total = conn.execute(f"SELECT COUNT(*) FROM ({sql})", args).fetchone()[0]
    stepper = ftsbound._Stepper(conn, sql, args, key=key, start=2 ** 62 if descending else -1, descending=descending)
    for n in (0, 3, 2, 10, total - 1, 5, total, total + 4, 1):
        assert stepper.more_than(n) == (total > n), (n, total)
    matches = ftsbound._matches(conn, ["messages_fts MATCH ?"], [build_match("coffee").expression])
    found = conn.execute("SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH 'coffee'").fetchone()[0]
    assert [matches.more_than(n) for n in (4, found - 1, found, 2)] == [True, True, False, True]


def test_a_window_of_none_or_fewer_is_the_newest_match_through_a_thin_sessions_ids_too(conn):
    """A window of 0 (or fewer) matches asked of a thin session's ids is its newest match, as the walk over
    every match's row gives it, whether or not the range ends past the session's newest row; asking the
    same n again gives the same match, not the next one down."""
    lo, hi = conn.execute("SELECT MIN(store_id), MAX(store_id) FROM messages WHERE session_id = 'thin'").fetchone()
    top = conn.execute("SELECT MAX(store_id) FROM messages").fetchone()[0]
    for within in ((lo, hi), (lo, top), (lo + 300, hi - 400)):
        for query in ("coffee", "coffee budget plan", "harbour"):
            fts_where, fts_args = ["messages_fts MATCH ?", "rowid BETWEEN ? AND ?"], [build_match(query).expression,
                                                                                    *within]
            for where, args in FILTERS:
                scoped = " AND ".join(where)
                newest = newest_matches(conn, build_match(query).expression, where, args, within)
                for n in (0, -3):
                    got = ftsbound.window(conn, fts_where, fts_args, scoped, args, n, None, ["thin"], within)
                    assert got == ftsbound.window(conn, fts_where, fts_args, scoped, args, n), (query, within, n)
                    assert got.low == (newest[0] if newest else None)
                    assert Listed(conn, fts_where, fts_args, scoped, args, ("thin", within)).at(n) == got.low
                for cls in (Listed, ftsbound._Newest):
                    again = cls(conn, fts_where, fts_args, scoped, args, ("thin", within))
                    expected = newest[2] if len(newest) > 2 else None
                    assert [again.at(3), again.at(3)] == [expected, expected], (query, within, where)


def test_a_window_over_two_thin_sessions_holds_both_sessions_matches(conn):
    """Two sessions spread thin keep the walk over every match's row (the ids way reads one session's ids):
    the window is the one the walk gives, the n-th newest match of either session."""
    names = ["thin", "chat-3"]
    lo, hi = conn.execute("SELECT MIN(store_id), MAX(store_id) FROM messages WHERE session_id IN (?, ?)",
                          names).fetchone()
    assert ftsbound._thin(conn, names, (lo, hi))
    for query in ("coffee", "coffee budget plan", "garden review"):
        match = build_match(query).expression
        fts_where, fts_args = ["messages_fts MATCH ?", "rowid BETWEEN ? AND ?"], [match, lo, hi]
        every = newest_matches(conn, match, ["m.session_id IN (?, ?)"], names, (lo, hi))
        for n in (3, 20, 60):
            got = ftsbound.window(conn, fts_where, fts_args, "m.session_id IN (?, ?)", names, n, None, names, (lo, hi))
            assert got.low == (every[n - 1] if n <= len(every) else None), (query, n)
