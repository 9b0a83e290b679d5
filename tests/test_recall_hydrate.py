"""How recall hits are shaped, by table: handles, clipped snippets, load_session arguments,
citable windows (budget, centring, neighbours) and summary hits' source rows."""
from __future__ import annotations

import pytest

from hermes_trove.refs import parse_claim, verify
from hermes_trove.retrieval import recall as hydrate
from hermes_trove.retrieval.recall_search import RecallHit
from hermes_trove.store import SessionKey

BACKENDS = ("sqlite", "postgresql")

T0 = 1_700_000_000.0


def put(runtime, session, texts):
    return runtime.store.append(SessionKey(session, platform="cli"), [
        {"role": "user" if i % 2 == 0 else "assistant", "content": t, "timestamp": T0 + 60 * i}
        for i, t in enumerate(texts)])


def message_hit(runtime, store_id, snippet=""):
    row = runtime.store.get(store_id)
    return RecallHit("message", store_id, row.session_id, float(row.created_at), 0.5, ("fts",), False, row=row,
                     snippet=snippet)


def node_hit(runtime, node_id):
    node = runtime.dag.get(node_id)
    return RecallHit("summary", node_id, node.session_id, float(node.latest_at or 0.0), 0.4, ("summary",), False,
                     node=node)


@pytest.mark.parametrize("kind, item_id, ref", [("message", 7, "store:7"), ("summary", 3, "node:3")])
def test_hit_ref_table(kind, item_id, ref):
    assert hydrate.hit_ref(RecallHit(kind, item_id, "s", 0.0, 1.0, (), False)) == ref


@pytest.mark.parametrize("length", [0, 1, 299, 300, 301, 5000])
def test_snippets_are_clipped_to_their_cap(length):
    text = "y" * length
    clipped = hydrate._clip(text)
    assert len(clipped) == min(length, hydrate.SNIPPET_CHARS)
    assert clipped.endswith("…") is (length > hydrate.SNIPPET_CHARS)


@pytest.mark.parametrize("store_id, after", [(1, 0), (4, 0), (5, 1), (100, 96)])
def test_load_session_starts_a_few_rows_before_the_hit(store_id, after):
    args = hydrate._load_args("s", store_id)
    assert args == {"tool": "trove_load_session",
                    "args": {"session_id": "s", "after_store_id": after, "limit": 2 * hydrate.LOAD_SESSION_BEFORE + 1}}


@pytest.mark.parametrize("text, terms, budget, start, truncated", [
    ("short text", ("short",), 100, 0, False),                           # fits: the whole row
    ("a" * 1000 + " needle " + "b" * 1000, ("needle",), 300, 901, True),  # centred a third before the term
    ("needle " + "b" * 1000, ("needle",), 300, 0, True),                 # term at the start
    ("b" * 1000 + " needle", ("needle",), 300, 707, True),               # near the end: the last budget chars
    ("b" * 1000, ("missing",), 300, 0, True),                            # no term: from the start
    ("x" * 500 + " joined " + "x" * 500, ("joining",), 90, 471, True),  # a stem finds an inflection
])
def test_window_table(runtime, text, terms, budget, start, truncated):
    [sid] = put(runtime, "s", [text])
    window = hydrate._window(runtime.store.get(sid), terms, budget, False, "hit")
    assert window["span_start"] == start and window["window_truncated"] is truncated
    assert window["span_end"] - window["span_start"] == min(budget, len(text))
    assert window["quote"] == text[window["span_start"]:window["span_end"]]
    claim = parse_claim({k: window[k] for k in ("store_id", "span_start", "span_end", "quote", "content_sha256")})
    assert verify(claim, runtime.store.get(sid)).quote == window["quote"]


def test_evidence_of_a_message_is_the_hit_and_its_neighbours_of_the_same_session(runtime):
    ids = put(runtime, "s", ["before it", "the hit itself", "after it"])
    put(runtime, "other", ["interleaved elsewhere"])
    middle = hydrate._evidence(runtime, message_hit(runtime, ids[1]), [], ("hit",), False)
    assert [w["position"] for w in middle] == ["before", "hit", "after"]
    first = hydrate._evidence(runtime, message_hit(runtime, ids[0]), [], ("before",), False)
    assert [w["position"] for w in first] == ["hit", "after"]
    last = hydrate._evidence(runtime, message_hit(runtime, ids[2]), [], ("after",), False)
    assert [w["position"] for w in last] == ["before", "hit"]


def test_neighbours_take_a_bounded_share_of_the_window(runtime):
    ids = put(runtime, "s", ["n" * 5000, "h" * 5000, "m" * 5000])
    windows = hydrate._evidence(runtime, message_hit(runtime, ids[1]), [], (), False)
    sizes = {w["position"]: w["span_end"] - w["span_start"] for w in windows}
    assert sizes == {"before": hydrate.NEIGHBOR_CHARS, "after": hydrate.NEIGHBOR_CHARS,
                     "hit": hydrate.WINDOW_CHARS - 2 * hydrate.NEIGHBOR_CHARS}


def test_a_summary_hit_is_shaped_from_its_best_source_rows(runtime):
    ids = put(runtime, "old", ["we picked the teal paint", "and the oak floor", "the teal paint dries fast"])
    node = runtime.dag.add_leaf("old", "decorating: paint and floor", ids, token_count=5, source_token_count=20,
                                earliest_at=T0, latest_at=T0 + 120)
    [item] = hydrate.shape_hits(runtime, [node_hit(runtime, node)], '"teal"', ("teal",), "asking",
                                answer_ready=True, occurrence_time=False)
    assert item["kind"] == "summary" and item["ref"] == f"node:{node}"
    assert set(item["source_store_ids"]) <= {ids[0], ids[2]} and len(item["source_store_ids"]) == 2
    assert item["expand"] == {"tool": "trove_expand", "args": {"store_id": item["source_store_ids"][0]}}
    assert item["load_session"]["args"]["session_id"] == "old"
    assert [w["position"] for w in item["evidence"]] == ["source", "source"]


def test_a_summary_of_the_calling_session_expands_by_node_id(runtime):
    ids = put(runtime, "here", ["alpha beta", "gamma"])
    node = runtime.dag.add_leaf("here", "alpha summary", ids, token_count=2, source_token_count=5,
                                earliest_at=T0, latest_at=T0 + 60)
    [item] = hydrate.shape_hits(runtime, [node_hit(runtime, node)], '"alpha"', ("alpha",), "here",
                                answer_ready=False, occurrence_time=False)
    assert item["expand"] == {"tool": "trove_expand", "args": {"node_id": node}}
    assert item["from_current_session"] is True and "load_session" not in item


@pytest.mark.parametrize("current, other", [("asking", True), ("s", False), (None, True)])
def test_message_hits_offer_load_session_only_for_other_sessions(runtime, current, other):
    [sid] = put(runtime, "s", ["the kettle whistles"])
    [item] = hydrate.shape_hits(runtime, [message_hit(runtime, sid)], '"kettle"', ("kettle",), current,
                                answer_ready=False, occurrence_time=False)
    assert ("load_session" in item) is other and item["from_current_session"] is (not other)
    assert item["expand"] == {"tool": "trove_expand", "args": {"store_id": sid}}
    assert ">>>kettle<<<" in item["snippet"] or "kettle" in item["snippet"]


def test_answer_ready_hydrates_only_the_first_hits(runtime):
    ids = put(runtime, "s", [f"walnut note {i}" for i in range(hydrate.ANSWER_READY_HITS + 3)])
    hits = [message_hit(runtime, i) for i in ids]
    items = hydrate.shape_hits(runtime, hits, '"walnut"', ("walnut",), "asking", answer_ready=True,
                               occurrence_time=False)
    assert [("evidence" in it) for it in items] == [True] * hydrate.ANSWER_READY_HITS + [False] * 3
    assert all(it["snippet"] for it in items)


def test_a_hit_with_its_own_snippet_keeps_it(runtime):
    [sid] = put(runtime, "s", ["部署失败:数据库连接错误"])
    [item] = hydrate.shape_hits(runtime, [message_hit(runtime, sid, snippet="…>>>数据库<<<…")], "", (), None,
                                answer_ready=False, occurrence_time=False)
    assert item["snippet"] == "…>>>数据库<<<…"
