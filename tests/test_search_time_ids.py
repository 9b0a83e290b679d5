"""The window of a filtered search takes its matches newest first from the full-text index."""
from __future__ import annotations

import random

import pytest
from conftest import assistant, user

from hermes_trove.fulltext import build_match
from hermes_trove.store import SessionKey

T0 = 1_700_000_000.0


def fill(runtime, seed: int = 5) -> None:
    """Three chats: one in time order, one imported later with old times, one whose clock jumps back and forth."""
    rng = random.Random(seed)
    words = ["coffee", "budget", "trip", "plan", "note"]

    def text(i: int) -> str:
        return f"row {i} " + " ".join(rng.choices(words, k=4))

    runtime.store.append(SessionKey("ordered"), [
        {**(user if i % 2 else assistant)(text(i)), "timestamp": T0 + 100 * i} for i in range(60)])
    runtime.store.append(SessionKey("imported"), [
        {**user(text(i)), "timestamp": T0 - 5000 + 90 * i} for i in range(40)])  # new ids, times before everything
    runtime.store.append(SessionKey("skewed"), [
        {**assistant(text(i)), "timestamp": T0 + rng.uniform(-6000, 9000)} for i in range(40)])


def test_the_filtered_window_reads_matches_in_the_full_text_index_order(runtime, backend):
    """The window's query takes the matches newest first from the full-text index, with no sort of every match."""
    if backend != "sqlite":
        pytest.skip("about FTS5's window")
    fill(runtime)
    conn = runtime.store.db.read()
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        runtime.store.search(build_match("coffee trip").expression, role="user", time_to=T0 + 3000, limit=5,
                             snippets=False, max_candidates=7)
    finally:
        conn.set_trace_callback(None)
    windows = [sql for sql in seen if "OFFSET" in sql and "CROSS JOIN" in sql]
    assert windows, seen
    for sql in windows:
        plan = " | ".join(str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + sql))
        assert "TEMP B-TREE" not in plan, plan
