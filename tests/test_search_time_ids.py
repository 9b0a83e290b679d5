"""A time-filtered search narrows its full-text scan to a store-id range, and that range is exact.

Rows are mostly stored in time order, but an imported old history or a clock change puts old
times on new ids and new times on old ids; the id range must still hold every row the time filter
keeps, so a filtered search returns exactly what a brute-force filter over every match returns.
"""
from __future__ import annotations

import random
import sqlite3

import pytest
from conftest import assistant, user

from hermes_trove import ftsbound, ftstime
from hermes_trove.fulltext import build_match
from hermes_trove.store import SessionKey

T0 = 1_700_000_000.0


def fill(runtime, seed: int = 5) -> None:
    """Three chats: one in time order, one imported later with old times, one whose clock jumps back and forth."""
    rng = random.Random(seed)
    words = ["coffee", "budget", "trip", "plan", "note"]

    def text(i: int) -> str:
        return f"row {i} " + " ".join(rng.choices(words, k=4))

    runtime.store.append(SessionKey("clock"), [  # the first ids: two old rows, then one from a clock far ahead
        {**user(text(i)), "timestamp": at} for i, at in enumerate((T0 - 9000, T0 - 9000, T0 + 50_000))])
    runtime.store.append(SessionKey("ordered"), [
        {**(user if i % 2 else assistant)(text(i)), "timestamp": T0 + 100 * i} for i in range(60)])
    runtime.store.append(SessionKey("imported"), [
        {**user(text(i)), "timestamp": T0 - 5000 + 90 * i} for i in range(40)])  # new ids, times before everything
    runtime.store.append(SessionKey("skewed"), [
        {**assistant(text(i)), "timestamp": T0 + rng.uniform(-6000, 9000)} for i in range(40)])


def rows(runtime, session: str | None = None) -> list[tuple[int, float, str, str]]:
    conn = runtime.store.db.read()
    return [(int(r[0]), float(r[1]), r[2], r[3]) for r in
            conn.execute("SELECT store_id, created_at, role, content FROM messages WHERE ? IS NULL OR session_id = ?"
                         " ORDER BY store_id", (session, session))]


RANGES = [(None, T0 - 4000), (T0 - 4000, T0 + 1000), (T0 + 2500, None), (T0 + 1000, T0 + 1000.5),
          (T0 + 20_000, None), (None, T0 - 10_000), (T0 - 3000, T0 + 7000), (T0 + 3000, T0 + 100)]


# the probe of each end finds it; or the time index or a walk down the ids must; or a long range keeps
# the store's first id
PATHS = [(1024, 10_000), (2, 10_000), (2, 3), (0, 10_000), (0, 3)]


@pytest.mark.parametrize(("probe", "short"), PATHS)
def test_time_ids_hold_every_row_of_the_time_range(runtime, backend, monkeypatch, probe, short):
    if backend != "sqlite":
        pytest.skip("the id range is SQLite's; PostgreSQL filters in SQL")
    monkeypatch.setattr(ftstime, "PROBE_ROWS", probe)
    monkeypatch.setattr(ftstime, "SHORT_RANGE", short)
    fill(runtime)
    table = rows(runtime)
    conn = runtime.store.db.read()
    assert isinstance(conn, sqlite3.Connection)
    for lo, hi in RANGES:
        kept = [sid for sid, at, _, _ in table if (lo is None or at >= lo) and (hi is None or at <= hi)]
        if not kept:
            assert ftstime.time_ids(conn, lo, hi) is None, (lo, hi)
            continue
        got = ftstime.time_ids(conn, lo, hi)
        assert got is not None and got[0] <= min(kept) and got[1] >= max(kept), (lo, hi)  # every kept row inside
        assert got[0] == min(kept) or (got[0] == table[0][0] and (lo is None or len(kept) >= short))  # tight
        assert (got[1] == max(kept)) if hi is not None else got[1] <= table[-1][0]
        within = (table[70][0], table[110][0])  # a session's id range
        inside = [sid for sid in kept if within[0] <= sid <= within[1]]
        narrowed = ftstime.time_ids(conn, lo, hi, within)
        if inside:
            assert narrowed is not None and narrowed[0] <= min(inside) and narrowed[1] >= max(inside)
            assert within[0] <= narrowed[0] and narrowed[1] <= within[1]


@pytest.mark.parametrize(("probe", "short"), PATHS)
@pytest.mark.parametrize("newest", [None, 7])
def test_a_time_filtered_search_loses_no_row_the_filter_keeps(runtime, backend, monkeypatch, probe, short, newest):
    if backend != "sqlite":
        pytest.skip("the id range is SQLite's; PostgreSQL filters in SQL")
    monkeypatch.setattr(ftstime, "PROBE_ROWS", probe)
    monkeypatch.setattr(ftstime, "SHORT_RANGE", short)
    monkeypatch.setattr(ftsbound, "RARE_BUDGET", 0)  # every phrase common: only the window is ranked
    fill(runtime)
    table, skewed = rows(runtime), rows(runtime, "skewed")
    expression = build_match("coffee trip").expression
    for lo, hi in RANGES:
        for role in (None, "user"):
            kept = sorted((sid for sid, at, r, content in table
                           if ("coffee" in content or "trip" in content) and (role is None or r == role)
                           and (lo is None or at >= lo) and (hi is None or at <= hi)), reverse=True)
            want = set(kept if newest is None else kept[:newest])  # the window: the newest kept matches
            hits = runtime.store.search(expression, time_from=lo, time_to=hi, role=role, limit=500,
                                        snippets=False, max_candidates=newest)
            assert {row.store_id for row, _, _ in hits} == want, (lo, hi, role)
            on_session = runtime.store.search(expression, session_ids=["skewed"], time_from=lo, time_to=hi,
                                              role=role, limit=500, snippets=False)
            assert {row.store_id for row, _, _ in on_session} == {
                sid for sid, _, _, _ in skewed if sid in set(kept)}, (lo, hi, role)


def window_plans(runtime, **filters):
    """A search for "coffee trip" with ``filters`` and the query plan of each filtered window it read."""
    conn = runtime.store.db.read()
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        hits = runtime.store.search(build_match("coffee trip").expression, limit=5, snippets=False,
                                    max_candidates=7, **filters)
    finally:
        conn.set_trace_callback(None)
    windows = [sql for sql in seen if "OFFSET" in sql and "CROSS JOIN" in sql]
    assert windows, seen
    return hits, [" | ".join(str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + sql)) for sql in windows]


def test_the_filtered_window_reads_matches_in_the_full_text_index_order(runtime, backend):
    """The window's query takes the matches newest first from the full-text index, with no sort of every match."""
    if backend != "sqlite":
        pytest.skip("about FTS5's window")
    fill(runtime)
    _, plans = window_plans(runtime, role="user", time_to=T0 + 3000)
    for plan in plans:
        assert "TEMP B-TREE" not in plan, plan


def test_a_session_windows_rows_are_found_by_their_id_not_through_the_session_index(runtime, backend):
    """Checking a session filter through messages_session (session id, then store id) costs more per
    match than finding the row by its id; the window reads a thousand matches that way."""
    if backend != "sqlite":
        pytest.skip("about FTS5's window")
    fill(runtime)
    # a role filter keeps the walk over the rows (a session that holds every id of its span, searched
    # with no other filter, has its window found in the full-text index alone: tests/test_ftsbound_owned.py)
    hits, plans = window_plans(runtime, session_ids=["ordered"], role="user")
    assert hits and {(row.session_id, row.role) for row, _, _ in hits} == {("ordered", "user")}
    for plan in plans:
        assert "INTEGER PRIMARY KEY" in plan and "messages_session" not in plan, plan
