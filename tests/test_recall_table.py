"""trove_recall by table: argument parsing (scope_bias, seen_refs handles, include/detail,
limits), what the gate leaves out and counts, the per-session cap, and the ordering rules of
``recall_search.recall`` called directly with a fixed ``now``."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from conftest import make_engine

from hermes_trove.retrieval import recall, recall_search
from hermes_trove.retrieval.recall_search import RecallHit, RecallRequest
from hermes_trove.store import SessionKey
from hermes_trove.toolkit import ToolError
from hermes_trove.tools import dispatch

BACKENDS = ("sqlite", "postgresql")

DAY = 86400.0
T0 = 1_700_000_000.0


def store(runtime, session, texts, t0=T0, step=60.0):
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": t, "timestamp": t0 + step * i}
            for i, t in enumerate(texts)]
    return runtime.store.append(SessionKey(session, platform="cli"), msgs)


@pytest.fixture
def asker(runtime):
    store(runtime, "notes", ["the violin lesson is on Tuesday", "bring the violin rosin",
                             "the piano tuner comes Friday"])
    return make_engine(runtime, session="asker")


def call(engine, **args):
    out = json.loads(dispatch(engine.tool_context(), "trove_recall", args))
    assert isinstance(out, dict)
    return out


# -- arguments ------------------------------------------------------------------------------------

@pytest.mark.parametrize("raw, value, clamped", [
    (None, 0.5, None), ("", 0.5, None), (0, 0.0, None), (1, 1.0, None), (0.25, 0.25, None), ("0.75", 0.75, None),
    (3, 1.0, 3), (-2, 0.0, -2), (1.5, 1.0, 1.5), ("-0.1", 0.0, -0.1),
])
def test_scope_bias_table(raw, value, clamped):
    got: dict = {}
    assert recall._unit_float({"scope_bias": raw}, "scope_bias", 0.5, got) == value
    assert got.get("scope_bias_clamped_from") == clamped


@pytest.mark.parametrize("raw", [True, False, "lots", [0.5], {"v": 1}, float("nan"), float("inf"), "1e400"])
def test_scope_bias_refuses_what_is_not_a_finite_number(raw):
    with pytest.raises(ToolError, match="scope_bias must be a number between 0 and 1"):
        recall._unit_float({"scope_bias": raw}, "scope_bias", 0.5, {})


@pytest.mark.parametrize("refs, expected", [
    ([], set()),
    (["store:12"], {("message", 12)}),
    (["store_id:12", "store_id=13"], {("message", 12), ("message", 13)}),
    (["node:4", "node_id:5"], {("summary", 4), ("summary", 5)}),
    (["trove:77:0-10"], {("message", 77)}),
    (["trove:77"], {("message", 77)}),
    (["  store:9  "], {("message", 9)}),
    (["store:1", "store:1"], {("message", 1)}),
])
def test_seen_refs_table(refs, expected):
    assert recall._seen(refs) == frozenset(expected)


@pytest.mark.parametrize("ref", ["x", "store:", "store:abc", "node:-1", "trove:1:a-b", "message:3", "store:1 extra",
                                 "store:" + "9" * 19])
def test_seen_refs_refuses_what_is_not_a_handle(ref):
    with pytest.raises(ToolError, match="not a recall handle"):
        recall._seen([ref])


@pytest.mark.parametrize("args, message", [
    ({}, "query"),
    ({"query": ""}, "query"),
    ({"query": "   "}, "query"),
    ({"query": "a", "include": "everything"}, "include must be one of"),
    ({"query": "a", "detail": "full"}, "detail must be one of"),
    ({"query": "a", "limit": 0}, "limit"),
    ({"query": "a", "since": T0, "before": T0}, "since must be earlier"),
    ({"query": "a", "since": T0 + 10, "before": T0}, "since must be earlier"),
    ({"query": "a", "seen_refs": ["nope"]}, "not a recall handle"),
    ({"query": "a", "seen_refs": [f"store:{i}" for i in range(101)]}, "at most 100"),
    ({"query": "a", "since": "2023-11-15T00:00:00"}, "timezone"),
])
def test_argument_errors_table(asker, args, message):
    assert message in call(asker, **args).get("error", "")


@pytest.mark.parametrize("limit, returned, clamped", [(1, 1, None), (2, 2, None), (25, 3, None), (26, 3, 26)])
def test_limit_table(asker, limit, returned, clamped):
    out = call(asker, query="violin piano", limit=limit)
    assert out["total_hits"] == returned and out.get("limit_clamped_from") == clamped
    assert out["has_more"] is (returned < 3)


@pytest.mark.parametrize("include, kinds", [("all", {"message_excerpt", "summary"}), ("verbatim", {"message_excerpt"}),
                                            ("summaries", {"summary"})])
def test_include_selects_the_kinds_returned(runtime, include, kinds):
    ids = store(runtime, "notes", ["the violin lesson is on Tuesday", "bring the violin rosin"])
    runtime.dag.add_leaf("notes", "violin lessons and rosin", ids, token_count=5, source_token_count=20,
                         earliest_at=T0, latest_at=T0 + 60)
    out = call(make_engine(runtime, session="asker"), query="violin rosin", include=include)
    assert {h["kind"] for h in out["hits"]} == kinds


def test_the_response_says_how_it_ordered_and_what_ran(asker):
    out = call(asker, query="violin")
    prov = out["provenance"]
    assert prov["arms_run"] == ["fts", "summary"] and set(prov["arm_weights"]) == set(recall_search.ARMS)
    assert prov["coverage"]["semantic"]["ran"] is False and "ordering" in prov
    assert out["next"].startswith("open a hit")


# -- what the gate leaves out ---------------------------------------------------------------------

def test_seen_and_time_bounds_are_counted(asker):
    first = call(asker, query="violin")  # the two violin turns, and the piano turn beside the best one
    assert [h["store_id"] for h in first["hits"]] == [2, 1, 3]
    seen = call(asker, query="violin", seen_refs=[first["hits"][0]["ref"]])
    # a seen hit is not the pool's, so the turn beside it no longer joins through it
    assert seen["excluded"] == {"seen": 1} and [h["store_id"] for h in seen["hits"]] == [1]
    bounded = call(asker, query="violin", before=T0 + 30)  # the full-text arms bound time in SQL
    assert [h["timestamp"] for h in bounded["hits"]] == ["2023-11-14T22:13:20Z"]


def test_nothing_excluded_means_no_excluded_field(asker):
    assert "excluded" not in call(asker, query="violin")


def gate(runtime, **req):
    return recall_search.Gate(runtime, RecallRequest(query="q", **req))


def row_of(runtime, store_id):
    return runtime.store.get(store_id)


def test_gate_in_flight_rows_of_the_current_session_only(runtime):
    here = store(runtime, "here", ["a", "b", "c"])
    there = store(runtime, "there", ["a", "b"])
    g = gate(runtime, current="here", turn_start=here[0])
    runtime.store.advance_frontier("here", here[-1])  # nothing is live: only the turn rule applies
    assert [g.admit_row(row_of(runtime, i)) for i in here] == [True, False, False]
    assert all(g.admit_row(row_of(runtime, i)) for i in there)
    assert g.excluded["in_flight_turn"] == 2


def test_gate_without_a_turn_start_admits_compacted_rows(runtime):
    here = store(runtime, "here", ["a", "b"])
    runtime.store.advance_frontier("here", here[-1])
    g = gate(runtime, current="here")
    assert all(g.admit_row(row_of(runtime, i)) for i in here) and g.excluded["in_flight_turn"] == 0


@pytest.mark.parametrize("current, conversation, session, row_conversation, expected", [
    ("s", None, "s", "", True),
    ("s", None, "t", "", False),
    ("s", "conv", "t", "conv", True),
    ("s", "conv", "t", "other", False),
    (None, None, "s", "", False),
    (None, "conv", "t", "conv", True),
    ("s", "", "t", "", False),
])
def test_in_scope_table(runtime, current, conversation, session, row_conversation, expected):
    g = gate(runtime, current=current, current_conversation=conversation)
    assert g.in_scope(session, row_conversation) is expected


# -- ordering, called directly -----------------------------------------------------------------------

def hit(session, n, score=1.0):
    return RecallHit("message", n, session, 0.0, score, ("fts",), False)


@pytest.mark.parametrize("sessions, cap, expected", [
    ([], 5, []),
    (["a"] * 7, 5, [1, 2, 3, 4, 5]),
    (["a", "b", "a", "b", "a"], 2, [1, 2, 3, 4]),
    (["a", "b", "c"], 1, [1, 2, 3]),
    (["a", "a", "b", "a", "b"], 1, [1, 3]),
])
def test_per_session_cap_table(sessions, cap, expected):
    hits = [hit(s, i + 1) for i, s in enumerate(sessions)]
    assert [h.item_id for h in recall_search._per_session_cap(hits, cap)] == expected


def text_hit(n, role, content):
    return RecallHit("message", n, "s", 0.0, 1.0, ("fts",), False, row=SimpleNamespace(role=role, content=content))


@pytest.mark.parametrize("rows, expected, repeated", [
    ([], [], 0),
    ([("user", "a"), ("user", "b")], [1, 2], 0),
    ([("user", "a"), ("user", "a"), ("user", "a")], [1], 2),
    ([("user", "a"), ("assistant", "a"), ("tool", "a")], [1, 2, 3], 0),  # another role: another row
    ([("user", "a"), ("user", "A"), ("user", "a ")], [1, 2, 3], 0),     # exact text only
    ([("user", "a"), None, ("user", "b"), ("user", "a"), None], [1, 2, 3, 5], 1),  # summaries are kept
])
def test_distinct_text_table(rows, expected, repeated):
    hits = [text_hit(i + 1, *r) if r else RecallHit("summary", i + 1, "s", 0.0, 1.0, ("summary",), False)
            for i, r in enumerate(rows)]
    excluded = {"repeated_text": 0}
    assert [h.item_id for h in recall_search._distinct_text(hits, excluded)] == expected
    assert excluded["repeated_text"] == repeated


def test_equal_scores_order_newer_first(runtime):
    older = store(runtime, "a", ["copper kettle polish"], t0=T0)
    newer = store(runtime, "b", ["copper kettle shine"], t0=T0 + DAY)  # equal matches, other text
    out = recall_search.recall(runtime, RecallRequest(query="copper kettle", now=T0 + DAY))
    assert [h.item_id for h in out.hits] == [newer[0], older[0]]


@pytest.mark.parametrize("age_days, newer_first", [(0.0, True), (30.0, True), (3000.0, True)])
def test_the_recency_prior_never_reverses_equal_matches_but_fades(runtime, age_days, newer_first):
    older = store(runtime, "a", ["brass lantern wick"], t0=T0)
    newer = store(runtime, "b", ["brass lantern hook"], t0=T0 + 10 * DAY)
    out = recall_search.recall(runtime, RecallRequest(query="brass lantern", now=T0 + 10 * DAY + age_days * DAY))
    order = [h.item_id for h in out.hits]
    assert (order == [newer[0], older[0]]) is newer_first
    ratio = out.hits[1].score / out.hits[0].score
    assert 0.5 <= ratio <= 1.0


def test_scope_bias_multiplies_the_current_conversation(runtime):
    here = store(runtime, "here", ["silver teapot lid"], t0=T0)
    store(runtime, "other", ["silver teapot cup"], t0=T0)
    runtime.store.advance_frontier("here", here[-1])
    for bias, first in ((0.0, None), (0.5, "here"), (1.0, "here")):
        out = recall_search.recall(runtime, RecallRequest(query="silver teapot", current="here", scope_bias=bias,
                                                          now=T0))
        scores = {h.session_id: h.score for h in out.hits}
        assert (scores["here"] > scores["other"]) is (bias > 0)  # the re-scoring stage keeps the bias's order
        if first:
            assert out.hits[0].session_id == first and out.hits[0].in_scope


def test_more_reports_hits_beyond_the_limit(runtime):
    store(runtime, "a", [f"amber bead {i}" for i in range(6)])
    out = recall_search.recall(runtime, RecallRequest(query="amber bead", limit=4, now=T0))
    assert len(out.hits) == 4 and out.more is True
    out = recall_search.recall(runtime, RecallRequest(query="amber bead", limit=6, now=T0))
    assert len(out.hits) == 6 and out.more is False


def test_a_query_without_words_finds_nothing_and_degrades_nothing(runtime):
    store(runtime, "a", ["plain words"])
    out = recall_search.recall(runtime, RecallRequest(query="?!", now=T0))
    assert out.hits == [] and out.match.expression == "" and out.degraded is False
