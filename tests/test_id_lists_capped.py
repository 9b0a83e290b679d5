"""Look-ups over a caller's list of ids read it a run at a time within the statement's parameter cap.

SQLite builds before 3.32 take 999 parameters a statement; here the cap is lowered on the store's
connection, so a few dozen ids are past it. An imported leaf over many rows, the first sources of
many leaves, a condensation's frontier check, rollups by id and superseded turns give what they give
with the cap out of reach (``idlist.chunks``).
"""
from __future__ import annotations

import contextlib
import sqlite3

from conftest import make_config, user
from test_recall_changed_facts import with_assertions

from hermes_trove import changed
from hermes_trove.importer.rows import SourceSummary
from hermes_trove.importer.target import Writer
from hermes_trove.runtime import build_runtime
from hermes_trove.store import SessionKey
from hermes_trove.temporal import queries
from hermes_trove.temporal import rollup_plan as plan
from hermes_trove.temporal.rollup_store import RollupStore

CAP = 20  # the widest single-row statement a leaf import runs binds 15
UNCAPPED = 250_000


@contextlib.contextmanager
def capped(conn: sqlite3.Connection, cap: int = CAP):
    conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, cap)
    try:
        yield conn
    finally:
        conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, UNCAPPED)


def summary(key: str) -> SourceSummary:
    return SourceSummary(key=key, summary_id=key, depth=0, content=f"summary {key}", earliest_at=None,
                         latest_at=None, model="imported", message_ids=(), child_ids=())


def test_imported_leaves_their_sources_and_the_frontier_past_the_cap(tmp_path):
    runtime = build_runtime(make_config(tmp_path))
    ids = runtime.store.append(SessionKey("s1"), [{**user(f"note {i} " + "word " * (i % 7)), "timestamp": 1e9 + i}
                                                  for i in range(90)])
    with runtime.db.transaction() as conn, capped(conn):
        writer = Writer(runtime, conn, "import-1")
        writer.record_import("test", ["fixture"], {})
        big = writer.add_node("s1", summary("big"), 0, ids[:60])  # one leaf over 60 rows: three runs of twenty
        small = [writer.add_node("s1", summary(f"leaf-{k}"), 0, ids[60 + k:61 + k]) for k in range(30)]
    node = runtime.dag.get(big)
    assert node is not None
    tokens, first, last = runtime.db.read().execute(
        "SELECT SUM(token_count), MIN(created_at), MAX(created_at) FROM messages WHERE store_id BETWEEN ? AND ?",
        (ids[0], ids[59])).fetchone()
    assert (node.source_token_count, node.earliest_at, node.latest_at) == (tokens, first, last)
    leaves = [big, *small]
    with capped(runtime.db.read()):
        assert queries.first_sources(runtime.db, [*leaves, 10_000, 10_001]) == \
            {big: (ids[0], 60), **{n: (ids[60 + k], 1) for k, n in enumerate(small)}}
    with runtime.db.transaction() as conn, capped(conn):
        assert runtime.dag.on_frontier("s1", leaves, conn)
        assert not runtime.dag.on_frontier("s1", [*leaves, 10_000], conn)


def test_rollups_by_id_past_the_cap(tmp_path):
    runtime = build_runtime(make_config(tmp_path, temporal_rollups_enabled=True))
    rollups = RollupStore(runtime.db)
    days = [plan.period_of("day", 1_700_000_000.0 + 86_400 * d) for d in range(25)]
    rollups.ensure_periods([("", day) for day in days], cursor=0, now=1_700_000_000.0)
    wanted = [s.rollup_id for s in rollups.states()][::-1]
    assert len(wanted) == 25
    with capped(runtime.db.read()):
        got = rollups.get_many([*wanted, 99_999])
    assert [r.rollup_id for r in got] == wanted and {r.period_start for r in got} == {d.start for d in days}


def test_superseded_turns_past_the_cap(tmp_path):
    runtime, old, new = with_assertions(tmp_path)
    others = [i for i in range(1, 40) if i not in (old, new)]
    with capped(runtime.db.read()):
        assert changed.superseded_turns(runtime.db, [*others, old, new]) == {old: new}


def test_a_leaf_naming_a_source_twice_across_runs_sums_it_once(tmp_path):
    """An imported summary may list a message twice; ``IN`` counts it once, and so do its runs."""
    runtime = build_runtime(make_config(tmp_path))
    ids = runtime.store.append(SessionKey("s1"), [{**user(f"note {i} " + "word " * (i % 7)), "timestamp": 1e9 + i}
                                                  for i in range(40)])
    with runtime.db.transaction() as conn:
        writer = Writer(runtime, conn, "import-1")
        writer.record_import("test", ["fixture"], {})
        uncapped = writer.add_node("s1", summary("wide"), 0, [*ids[:30], *ids[:30]])
        with capped(conn):  # the first thirty ids fall in the first two runs, their repeats in the next two
            twice = writer.add_node("s1", summary("twice"), 0, [*ids[:30], *ids[:30]])
    tokens = runtime.db.read().execute("SELECT SUM(token_count) FROM messages WHERE store_id BETWEEN ? AND ?",
                                       (ids[0], ids[29])).fetchone()[0]
    nodes = [runtime.dag.get(uncapped), runtime.dag.get(twice)]
    assert [n.source_token_count for n in nodes if n is not None] == [tokens, tokens]
