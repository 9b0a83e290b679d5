"""RollupStore (temporal/rollup_store.py) on both backends: period rows per scope, the
claim/finish/fail/discard generation protocol, staleness of larger periods, operator reads, and
the leaf triggers (SQLite's 0013, pgschema's PL/pgSQL) that mark rollups stale."""
from __future__ import annotations

import pytest
from conftest import make_config
from test_rollups import add_leaf, at

from hermes_trove.runtime import build_runtime
from hermes_trove.temporal import rollup_plan as plan
from hermes_trove.temporal.rollup_store import RollupStore

BACKENDS = ("sqlite", "postgresql")

MAY3 = plan.period_of("day", at(3))
MAY4 = plan.period_of("day", at(4))
WEEK18 = plan.period_of("week", at(3))
MAY = plan.period_of("month", at(3))
LATER = at(10, month=6)


@pytest.fixture
def runtime(tmp_path):
    return build_runtime(make_config(tmp_path, temporal_rollups_enabled=True))


@pytest.fixture
def store(runtime):
    rollups = RollupStore(runtime.db)
    rollups.ensure_periods([("", MAY3), ("", MAY4), ("", WEEK18), ("", MAY), ("team", MAY3)], cursor=7, now=at(5))
    return rollups


def state(store: RollupStore, key: plan.PeriodKey, scope: str = "") -> plan.RollupState:
    [found] = [s for s in store.states(scope) if s.key == key]
    return found


def build(store: RollupStore, key: plan.PeriodKey, node_ids=(), scope: str = "", now: float = LATER) -> int:
    row = state(store, key, scope)
    generation = store.claim(row, now)
    assert generation is not None
    assert store.finish(row.rollup_id, generation, summary=f"text of {key.label}", token_count=10,
                        source_token_count=100, level="detailed", model="m", model_calls=1, input_tokens=50,
                        node_ids=list(node_ids), now=now)
    return row.rollup_id


def test_ensure_periods_makes_one_pending_row_per_scope_and_period_and_moves_the_cursor(store):
    assert store.leaf_cursor() == 7
    assert sorted((s.scope, s.kind, s.key.label, s.status) for s in store.states()) == [
        ("", "day", "2024-05-03", "pending"), ("", "day", "2024-05-04", "pending"), ("", "month", "2024-05", "pending"),
        ("", "week", "2024-W18", "pending"), ("team", "day", "2024-05-03", "pending")]
    assert store.ensure_periods([("", MAY3), ("team", MAY4)], cursor=9, now=at(6)) == 1
    assert store.leaf_cursor() == 9
    assert store.scopes() == {"": 4, "team": 2}


def test_states_in_returns_one_scopes_rows_overlapping_a_window(store):
    may3_only = store.states_in(MAY3.start, MAY3.end, "")
    assert sorted(s.key.label for s in may3_only) == ["2024-05", "2024-05-03", "2024-W18"]
    assert [s.key.label for s in store.states_in(MAY3.start, MAY3.end, "team")] == ["2024-05-03"]
    assert store.states_in(at(1, month=7), at(2, month=7), "") == []


def test_a_claim_bumps_the_generation_once_and_a_second_claim_of_the_same_state_loses(store):
    row = state(store, MAY3)
    generation = store.claim(row, LATER)
    assert generation == row.generation + 1
    assert store.claim(row, LATER) is None
    claimed = store.get(row.rollup_id)
    assert claimed is not None and (claimed.status, claimed.attempts, claimed.claimed_at) == ("building", 1, LATER)


def test_finish_stores_text_and_lineage_and_only_lands_on_its_own_generation(runtime, store):
    leaves = [add_leaf(runtime, 3), add_leaf(runtime, 3, hours=(14, 15))]
    row = state(store, MAY3)
    generation = store.claim(row, LATER)
    assert generation is not None
    assert not store.finish(row.rollup_id, generation + 1, summary="late", token_count=1, source_token_count=1,
                            level="detailed", model="m", model_calls=1, input_tokens=1, node_ids=leaves, now=LATER)
    assert store.finish(row.rollup_id, generation, summary="day text", token_count=12, source_token_count=900,
                        level="detailed", model="m", model_calls=2, input_tokens=80, node_ids=leaves, now=LATER)
    done = store.get(row.rollup_id)
    assert done is not None
    assert (done.status, done.summary, done.source_count, done.model_calls, done.built_at) == (
        "ready", "day text", 2, 2, LATER)
    assert store.source_node_ids(row.rollup_id) == leaves
    assert store.source_node_ids(row.rollup_id, limit=1) == leaves[:1]
    assert store.by_key(MAY3, "") == done and store.by_key(MAY3, "nobody") is None


def test_finishing_a_day_marks_its_ready_week_and_month_stale_in_its_own_scope_only(store):
    week_id, month_id = build(store, WEEK18), build(store, MAY)
    team_day = build(store, MAY3, scope="team")
    assert [r.status for r in store.get_many([week_id, month_id, team_day])] == ["ready", "ready", "ready"]
    build(store, MAY3)
    assert [r.status for r in store.get_many([week_id, month_id])] == ["stale", "stale"]


def test_fail_records_the_error_and_counts_the_spend(store):
    row = state(store, MAY4)
    generation = store.claim(row, LATER)
    assert generation is not None
    assert store.fail(row.rollup_id, generation, "model down " * 200, LATER, model_calls=3, input_tokens=30)
    assert not store.fail(row.rollup_id, generation, "again", LATER)  # no longer building
    failed = store.get(row.rollup_id)
    assert failed is not None and failed.status == "failed" and len(failed.error or "") == 1000
    assert [f.rollup_id for f in store.failures()] == [row.rollup_id]
    assert store.failures(scope="team") == []
    counts = store.counts("")
    assert counts["day"]["statuses"] == {"failed": 1, "pending": 1} and counts["day"]["model_calls"] == 3


def test_discard_drops_only_a_row_claimed_under_that_generation(store):
    row = state(store, MAY4)
    assert not store.discard(row.rollup_id, row.generation)  # not building
    generation = store.claim(row, LATER)
    assert generation is not None
    assert not store.discard(row.rollup_id, generation - 1)
    assert store.discard(row.rollup_id, generation)
    assert store.get(row.rollup_id) is None


def test_abandon_building_makes_only_building_rows_stale(store):
    building, pending = state(store, MAY3), state(store, MAY4)
    assert store.claim(building, LATER) is not None
    assert store.abandon_building([], LATER) == 0
    assert store.abandon_building([building.rollup_id, pending.rollup_id], LATER) == 1
    assert [r.status for r in store.get_many([building.rollup_id, pending.rollup_id])] == ["stale", "pending"]


@pytest.mark.parametrize(("kinds", "window", "scope", "marked"), [
    (("day",), None, None, 3),
    (("day",), None, "team", 1),
    (("day", "week", "month"), None, "", 4),
    (("day",), (MAY4.start, MAY4.end), None, 1),
    (("week", "month"), (MAY4.start, MAY4.end), None, 2),
    (("month",), (at(1, month=6), at(2, month=6)), None, 0),
])
def test_mark_stale_and_count_matching_take_kinds_a_window_and_a_scope(store, kinds, window, scope, marked):
    start, end = window or (None, None)
    assert store.count_matching(kinds, start, end, scope=scope) == marked
    assert store.mark_stale(kinds, start, end, now=LATER, scope=scope) == marked
    assert store.mark_stale(kinds, start, end, now=LATER, scope=scope) == 0  # already stale


def test_unsynced_leaves_count_leaf_summaries_past_the_cursor(runtime):
    rollups = RollupStore(runtime.db)
    first = add_leaf(runtime, 3)
    add_leaf(runtime, 4)
    assert rollups.unsynced_leaves() == 2
    assert [span[0] for span in rollups.leaf_spans_after(first)] == [first + 1]
    rollups.ensure_periods([], cursor=first, now=at(5))
    assert rollups.unsynced_leaves() == 1
    assert rollups.get_many([]) == [] and rollups.get(999) is None


def _statuses(store: RollupStore) -> dict[tuple[str, str], str]:
    return {(s.scope, s.key.label): s.status for s in store.states() if s.scope}


def _all_ready(runtime) -> None:
    with runtime.db.transaction() as conn:
        conn.execute("UPDATE temporal_rollups SET status = 'ready', updated_at = 0 WHERE status != 'pending'")


def test_a_leaf_added_changed_or_removed_marks_its_scopes_overlapping_rollups_stale(runtime, store):
    leaf = add_leaf(runtime, 3)  # session s1, owner scope "local"
    assert runtime.db.read().execute("SELECT scope FROM sessions WHERE session_id = 's1'").fetchone()[0] == "local"
    store.ensure_periods([("local", MAY3), ("local", MAY4), ("local", WEEK18), ("local", MAY)], cursor=leaf)
    for key in (MAY3, MAY4, WEEK18):  # May stays pending: the triggers leave pending rows alone
        build(store, key, scope="local")
    build(store, MAY3, scope="team")
    _all_ready(runtime)
    team = ("team", "2024-05-03")

    add_leaf(runtime, 3, hours=(14, 15))
    assert _statuses(store) == {("local", "2024-05-03"): "stale", ("local", "2024-05-04"): "ready",
                                ("local", "2024-W18"): "stale", ("local", "2024-05"): "pending", team: "ready"}
    stamped = store.get(state(store, MAY3, "local").rollup_id)
    assert stamped is not None and stamped.updated_at > 1e9  # the trigger stamps epoch seconds, not Julian days

    _all_ready(runtime)
    with runtime.db.transaction() as conn:  # a column the triggers do not watch
        conn.execute("UPDATE summary_nodes SET token_count = 451 WHERE node_id = ?", (leaf,))
    assert set(_statuses(store).values()) == {"ready", "pending"}
    with runtime.db.transaction() as conn:
        conn.execute("UPDATE summary_nodes SET summary = 'rewritten' WHERE node_id = ?", (leaf,))
    changed = _statuses(store)
    assert changed[("local", "2024-05-03")] == "stale" and changed[("local", "2024-05-04")] == "ready"

    _all_ready(runtime)
    with runtime.db.transaction() as conn:  # moved from 3 to 4 May: both days go stale
        conn.execute("UPDATE summary_nodes SET earliest_at = ?, latest_at = ? WHERE node_id = ?",
                     (at(4, 9), at(4, 11), leaf))
    moved = _statuses(store)
    assert moved[("local", "2024-05-03")] == moved[("local", "2024-05-04")] == "stale" and moved[team] == "ready"

    _all_ready(runtime)
    with runtime.db.transaction() as conn:
        conn.execute("DELETE FROM temporal_rollup_sources")
        conn.execute("DELETE FROM node_messages WHERE node_id = ?", (leaf,))
        conn.execute("DELETE FROM session_frontier WHERE node_id = ?", (leaf,))
        conn.execute("DELETE FROM summary_nodes WHERE node_id = ?", (leaf,))
    removed = _statuses(store)
    assert removed[("local", "2024-05-04")] == "stale" and removed[("local", "2024-05-03")] == "ready"
    assert removed[team] == "ready"


def test_a_leaf_of_a_session_without_a_row_marks_every_scope_and_condensed_nodes_mark_none(runtime, store):
    store.ensure_periods([("local", MAY3)], cursor=0)
    build(store, MAY3, scope="local")
    build(store, MAY3, scope="team")
    _all_ready(runtime)
    with runtime.db.transaction() as conn:
        conn.execute("INSERT INTO summary_nodes(session_id, depth, summary, earliest_at, latest_at, created_at)"
                     " VALUES ('gone', 1, 'condensed', ?, ?, ?)", (at(3, 9), at(3, 10), at(3, 10)))
    assert _statuses(store) == {("local", "2024-05-03"): "ready", ("team", "2024-05-03"): "ready"}
    with runtime.db.transaction() as conn:  # no times: its creation instant is its span
        conn.execute("INSERT INTO summary_nodes(session_id, depth, summary, earliest_at, latest_at, created_at)"
                     " VALUES ('gone', 0, 'orphan leaf', NULL, NULL, ?)", (at(3, 10),))
    assert _statuses(store) == {("local", "2024-05-03"): "stale", ("team", "2024-05-03"): "stale"}
