from __future__ import annotations

import dataclasses
import json
import time
from types import SimpleNamespace

import pytest
from conftest import make_config, make_engine

from hermes_trove.refs import parse_claim, verify
from hermes_trove.retrieval import recall_search
from hermes_trove.runtime import build_runtime
from hermes_trove.store import SessionKey
from hermes_trove.toolkit import dumps
from hermes_trove.tools import dispatch

BACKENDS = ("sqlite", "postgresql")

DAY = 86400.0
T0 = 1_700_000_000.0


def call(engine, name, **args):
    out = json.loads(dispatch(engine.tool_context(), name, args))
    assert isinstance(out, dict)
    return out


def store(runtime, session, texts, t0=T0, platform="cli"):
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": text, "timestamp": t0 + 60 * i}
            for i, text in enumerate(texts)]
    return runtime.store.append(SessionKey(session, platform=platform), msgs)


@pytest.fixture
def memory(runtime):
    """Three earlier sessions and a fresh one asking."""
    a = store(runtime, "trip", ["We booked the ferry to Naxos for the 14th.",
                                "Great, the ferry leaves Piraeus at 7am."], t0=T0)
    b = store(runtime, "work", ["The staging deploy key lives in /etc/keys/staging.pem",
                                "Noted: staging key path saved."], t0=T0 + DAY)
    c = store(runtime, "garden", ["Tomatoes need staking in June.", "And basil likes sun."], t0=T0 + 2 * DAY)
    node = runtime.dag.add_leaf("trip", "Planned an island holiday: ferry booking and departure times.", a,
                                token_count=12, source_token_count=30, earliest_at=T0, latest_at=T0 + 60)
    return SimpleNamespace(trip=a, work=b, garden=c, node=node, engine=make_engine(runtime, session="fresh"))


def test_recall_finds_messages_in_other_sessions_with_working_expand_handles(memory):
    out = call(memory.engine, "trove_recall", query="where is the staging deploy key?")
    assert out["degraded"] is False
    top = out["hits"][0]
    assert top["kind"] == "message_excerpt" and top["store_id"] == memory.work[0]
    assert top["session_id"] == "work" and top["from_current_session"] is False
    assert top["arms"] == ["fts"] and top["timestamp"].startswith("2023-11-15")
    assert ">>>" in top["snippet"] and top["ref"] == f"store:{memory.work[0]}"
    expanded = call(memory.engine, top["expand"]["tool"], **top["expand"]["args"])
    assert expanded["content"] == "The staging deploy key lives in /etc/keys/staging.pem"
    page = call(memory.engine, top["load_session"]["tool"], **top["load_session"]["args"])
    assert memory.work[0] in [m["store_id"] for m in page["messages"]]


def test_the_reply_beside_a_matching_turn_is_recalled_though_it_shares_no_word(runtime):
    # The answer repeats none of the question's words: full text finds only the turn it answers.
    for i in range(20):
        store(runtime, f"other-{i}", [f"camping gear list {i}: tent, stove, lantern", "packed"])
    ids = store(runtime, "summer", ["How was the camping trip in June?",
                                    "We roasted marshmallows by the lake and hiked up to the ridge."], t0=T0 + DAY)
    out = call(make_engine(runtime, session="asker"), "trove_recall", query="camping trip in June", limit=10)
    assert [h["store_id"] for h in out["hits"]][:2] == ids
    assert out["provenance"]["coverage"]["fts"]["adjacent_turns"] >= 1


def test_a_turn_beside_a_hit_stays_out_when_the_time_bounds_or_the_gate_leave_it_out(runtime):
    ids = store(runtime, "summer", ["We roasted marshmallows by the lake.", "That camping trip in June was great.",
                                    "Our canoe tipped over twice."])
    asker = make_engine(runtime, session="asker")
    bounded = call(asker, "trove_recall", query="camping trip June", since=T0 + 30, before=T0 + 90)
    assert [h["store_id"] for h in bounded["hits"]] == [ids[1]]
    runtime.bound_sessions["summer"] = "ignored"
    assert call(asker, "trove_recall", query="camping trip June")["hits"] == []


def test_summaries_of_other_sessions_are_hits_whose_handles_reach_their_sources(memory):
    out = call(memory.engine, "trove_recall", query="island holiday", include="summaries")
    assert [h["kind"] for h in out["hits"]] == ["summary"]
    hit = out["hits"][0]
    assert hit["node_id"] == memory.node and hit["session_id"] == "trip" and hit["arms"] == ["summary"]
    # the node is not reachable from the asking session: the handle is a source row, which expands
    assert hit["expand"]["args"] == {"store_id": memory.trip[0]}
    expanded = call(memory.engine, "trove_expand", **hit["expand"]["args"])
    assert expanded["content"] == "We booked the ferry to Naxos for the 14th."
    page = call(memory.engine, "trove_load_session", **hit["load_session"]["args"])
    assert [m["store_id"] for m in page["messages"]][:2] == memory.trip


def test_a_summary_of_the_current_session_expands_by_node_id(runtime):
    ids = store(runtime, "here", ["Our canary phrase is violet lantern.", "ok"])
    node = runtime.dag.add_leaf("here", "The canary phrase was set (violet lantern).", ids, token_count=9,
                                source_token_count=20, earliest_at=T0, latest_at=T0 + 60)
    runtime.store.advance_frontier("here", ids[-1])
    engine = make_engine(runtime, session="here")
    hit = next(h for h in call(engine, "trove_recall", query="violet lantern")["hits"] if h["kind"] == "summary")
    assert hit["expand"]["args"] == {"node_id": node} and "load_session" not in hit
    assert call(engine, "trove_expand", node_id=node)["expanded"][0]["content"].startswith("Our canary")


def test_include_verbatim_and_include_summaries_select_the_arms(memory):
    verbatim = call(memory.engine, "trove_recall", query="ferry", include="verbatim")
    assert verbatim["hits"] and {h["kind"] for h in verbatim["hits"]} == {"message_excerpt"}
    assert verbatim["provenance"]["arms_run"] == ["fts"]
    assert verbatim["provenance"]["coverage"]["summary"]["reason"] == "include='verbatim'"
    both = call(memory.engine, "trove_recall", query="ferry")
    assert {h["kind"] for h in both["hits"]} == {"message_excerpt", "summary"}
    assert both["provenance"]["arms_run"] == ["fts", "summary"]


def test_response_reports_arms_weights_coverage_and_why_semantic_did_not_run(memory):
    out = call(memory.engine, "trove_recall", query="ferry")
    prov = out["provenance"]
    assert prov["fusion"] == "zscore" and "fusion_note" not in prov
    assert prov["arm_weights"] == {"fts": 1.0, "summary": 1.0, "semantic": 1.0}
    fts = prov["coverage"]["fts"]
    assert fts["ran"] is True and fts["candidates"] == 2 and fts["pool"] >= 32 and fts["bounded"] is False
    assert prov["coverage"]["semantic"] == {"ran": False, "weight": 1.0, "candidates": 0, "pool": 0,
                                            "bounded": False,
                                            "reason": "embeddings disabled (TROVE_EMBEDDINGS_ENABLED=false)"}
    assert out["degraded"] is False and out["degraded_reason"] is None


def test_scope_bias_prefers_the_current_conversation_softly(runtime):
    # the same matching words said in the current session (already compacted) and, later, elsewhere
    here = store(runtime, "here", ["the blue heron nests by the weir"], t0=T0)
    store(runtime, "other", ["the blue heron nests at the weir"], t0=T0 + 3 * DAY)
    runtime.store.advance_frontier("here", here[-1])
    engine = make_engine(runtime, session="here")
    biased = call(engine, "trove_recall", query="blue heron weir", scope_bias=1.0)
    assert [h["session_id"] for h in biased["hits"]] == ["here", "other"]
    assert biased["hits"][0]["from_current_session"] is True
    neutral = call(engine, "trove_recall", query="blue heron weir", scope_bias=0)
    assert [h["session_id"] for h in neutral["hits"]] == ["other", "here"]  # recency decides


def test_recency_prior_prefers_newer_of_equal_matches(runtime):
    now = time.time()
    old = store(runtime, "old", ["quarterly budget review notes"], t0=now - 90 * DAY)
    new = store(runtime, "new", ["quarterly budget review memo"], t0=now - DAY)  # equal matches, other text
    engine = make_engine(runtime, session="asker")
    hits = call(engine, "trove_recall", query="quarterly budget review")["hits"]
    assert [h["store_id"] for h in hits] == [new[0], old[0]]
    assert hits[0]["score"] > hits[1]["score"]


def test_since_and_before_bound_hits_in_time(memory):
    window = call(memory.engine, "trove_recall", query="ferry staging tomatoes",
                  since=T0 + DAY - 1, before="2023-11-16T00:00:00Z")
    assert {h["session_id"] for h in window["hits"]} == {"work"}
    assert window["since"] == "2023-11-15T22:13:19Z" and window["before"] == "2023-11-16T00:00:00Z"
    assert call(memory.engine, "trove_recall", query="x", since=T0, before=T0)["error"].startswith("since must")
    assert "timezone" in call(memory.engine, "trove_recall", query="x", since="2023-11-15T00:00:00")["error"]


def test_ignored_sessions_are_excluded_and_stateless_sessions_readable(tmp_path):
    cfg = make_config(tmp_path, ignore_session_patterns=("secret-*",), stateless_session_patterns=("ro-*",))
    runtime = build_runtime(cfg)
    store(runtime, "secret-1", ["the launch codes are orange"])
    store(runtime, "ro-1", ["the launch plan is orange too"])
    store(runtime, "bound-ignored", ["orange launch checklist"])
    runtime.bound_sessions["bound-ignored"] = "ignored"
    engine = make_engine(runtime, session="asker")
    out = call(engine, "trove_recall", query="orange launch")
    assert [h["session_id"] for h in out["hits"]] == ["ro-1"]
    assert out["excluded"]["ignored_session"] == 2


def test_rows_still_in_the_live_prompt_are_not_returned(runtime):
    engine = make_engine(runtime, session="live")
    store(runtime, "live", ["what was the wifi password again?"])
    store(runtime, "earlier", ["the wifi password is hunter2-river"])
    out = call(engine, "trove_recall", query="wifi password")
    assert [h["session_id"] for h in out["hits"]] == ["earlier"]
    assert out["excluded"]["live_context"] == 1


def test_a_text_repeated_in_several_rows_takes_one_place_and_the_rest_go_to_other_rows(runtime):
    repeated = "the backup job failed on the nightly volume snapshot"
    copies = [store(runtime, f"cron-{i}", [repeated], t0=T0 + i * DAY)[0] for i in range(4)]  # user rows
    question = store(runtime, "ops", ["why did the nightly backup job fail?"], t0=T0)[0]
    answer = store(runtime, "fix", ["the snapshot failed because the backup volume was full"], t0=T0)[0]
    engine = make_engine(runtime, session="asker")
    out = call(engine, "trove_recall", query="nightly backup job failed volume snapshot", limit=5)
    ids = [h["store_id"] for h in out["hits"]]
    assert [i for i in ids if i in copies] == [copies[-1]]  # one place, for the best-placed copy (the newest)
    assert question in ids and answer in ids and len(ids) == 3 and out["excluded"]["repeated_text"] == 3
    # the same text said by the other side is a row of its own
    echo = store(runtime, "echo", ["ok", repeated], t0=T0)[1]  # an assistant row
    again = call(engine, "trove_recall", query="nightly backup job failed volume snapshot", limit=10)
    assert echo in [h["store_id"] for h in again["hits"]] and again["excluded"]["repeated_text"] == 3


def test_answer_ready_hydrates_windows_whose_exact_refs_verify(memory, runtime):
    out = call(memory.engine, "trove_recall", query="ferry Naxos", detail="answer_ready")
    hydrated = [h for h in out["hits"] if "evidence" in h]
    assert hydrated
    for hit in hydrated:
        for window in hit["evidence"]:
            ref = verify(parse_claim({k: window[k] for k in
                                      ("store_id", "span_start", "span_end", "quote", "content_sha256")}),
                         runtime.store.get(window["store_id"]))
            assert ref.shorthand == window["ref"]
    message = next(h for h in hydrated if h["kind"] == "message_excerpt" and h["store_id"] == memory.trip[0])
    assert [w["position"] for w in message["evidence"]] == ["hit", "after"]


def test_answer_ready_window_of_a_long_message_centres_on_the_match(runtime):
    text = "filler words " * 400 + "the anchor phrase zanzibar appears here " + "more filler " * 400
    ids = store(runtime, "long", [text])
    engine = make_engine(runtime, session="asker")
    hit = call(engine, "trove_recall", query="zanzibar", detail="answer_ready")["hits"][0]
    window = hit["evidence"][0]
    assert "zanzibar" in window["quote"] and window["window_truncated"] is True
    assert window["span_end"] - window["span_start"] <= 2400
    assert text[window["span_start"]:window["span_end"]] == window["quote"] and window["store_id"] == ids[0]


def test_occurrence_time_resolves_dates_against_when_the_hit_was_said(runtime):
    store(runtime, "plans", ["We fly to Lisbon next Friday."], t0=1_700_000_000.0)  # a Tuesday
    engine = make_engine(runtime, session="asker")
    hit = call(engine, "trove_recall", query="Lisbon flight fly", include_occurrence_time=True)["hits"][0]
    occ = hit["occurrence_time"]
    assert occ and occ[0]["expression"].lower().endswith("next friday")
    assert occ[0]["start"] == "2023-11-17T00:00:00Z" and occ[0]["granularity"] == "day"
    ready = call(engine, "trove_recall", query="Lisbon flight fly", include_occurrence_time=True,
                 detail="answer_ready")["hits"][0]
    window = next(w for w in ready["evidence"] if w["position"] == "hit")
    assert window["occurrence_time"][0]["start"] == "2023-11-17T00:00:00Z"


def test_occurrence_time_of_a_long_hit_reads_its_first_4000_characters(runtime):
    from hermes_trove.retrieval.recall import OCCURRENCE_SCAN_CHARS

    early = "We fly to Lisbon next Friday. " + "log line " * 2000 + "deploy was yesterday"
    store(runtime, "plans", [early], t0=1_700_000_000.0)
    engine = make_engine(runtime, session="asker")
    hit = call(engine, "trove_recall", query="Lisbon fly", include_occurrence_time=True)["hits"][0]
    assert len(early) > OCCURRENCE_SCAN_CHARS
    assert [o["expression"] for o in hit["occurrence_time"]] == ["next Friday"]  # "yesterday" lies past the scan


def test_seen_refs_leave_already_read_hits_out(memory):
    first = call(memory.engine, "trove_recall", query="ferry")
    refs = [h["ref"] for h in first["hits"]]
    again = call(memory.engine, "trove_recall", query="ferry", seen_refs=refs)
    assert again["hits"] == [] and again["excluded"]["seen"] == len(refs)
    exact = call(memory.engine, "trove_recall", query="ferry", seen_refs=[f"trove:{memory.trip[0]}:0-5"])
    assert memory.trip[0] not in [h.get("store_id") for h in exact["hits"]]
    assert "not a recall handle" in call(memory.engine, "trove_recall", query="ferry", seen_refs=["x"])["error"]


def test_limit_is_capped_and_the_response_fits_its_bound(runtime):
    store(runtime, "big", [f"report {i}: the orchid greenhouse log " + "x" * 3000 for i in range(40)])
    engine = make_engine(runtime, session="asker")
    out = call(engine, "trove_recall", query="orchid greenhouse", limit=99)
    assert out["limit"] == 25 and out["limit_clamped_from"] == 99
    assert len(dumps(out)) <= 32000 and out["total_hits"] == 25
    for i in range(4):
        store(runtime, f"more-{i}", [f"orchid greenhouse humidity {j} " + "y" * 6000 for j in range(5)])
    ready = call(engine, "trove_recall", query="orchid greenhouse", limit=25, detail="answer_ready")
    assert len(dumps(ready)) <= 64000 and ready["hits"]
    assert sum(1 for h in ready["hits"] if "evidence" in h) == 8
    assert all(sum(len(w["quote"]) for w in h["evidence"]) <= 2400 for h in ready["hits"] if "evidence" in h)


def test_answer_ready_keeps_at_most_five_hits_per_session(runtime):
    store(runtime, "one", [f"marmalade recipe step {i}" for i in range(12)])
    engine = make_engine(runtime, session="asker")
    assert len(call(engine, "trove_recall", query="marmalade recipe", limit=12)["hits"]) == 12
    assert len(call(engine, "trove_recall", query="marmalade recipe", limit=12, detail="answer_ready")["hits"]) == 5


def test_bad_arguments_are_refused_with_a_fix(memory):
    assert "query" in call(memory.engine, "trove_recall")["error"]
    assert "query" in call(memory.engine, "trove_recall", query="   ")["error"]
    assert "include" in call(memory.engine, "trove_recall", query="a", include="everything")["error"]
    assert "scope_bias" in call(memory.engine, "trove_recall", query="a", scope_bias="lots")["error"]
    assert call(memory.engine, "trove_recall", query="ferry", scope_bias=3)["scope_bias_clamped_from"] == 3


def test_recall_works_before_any_session_is_bound(memory, runtime):
    from hermes_trove.toolkit import ToolContext

    out = json.loads(dispatch(ToolContext(runtime=runtime), "trove_recall", {"query": "ferry"}))
    assert out["hits"] and all(h["from_current_session"] is False for h in out["hits"])


def test_text_the_tokenizer_cannot_split_falls_back_to_substring(runtime):
    store(runtime, "cjk", ["会議は東京で開催されます"])
    engine = make_engine(runtime, session="asker")
    out = call(engine, "trove_recall", query="東京")
    assert out["hits"][0]["session_id"] == "cjk"
    assert out["provenance"]["coverage"]["fts"]["fallback"] == "substring"


# -- the semantic arm, through the interface retrieval.semantic provides -------------------
def _with_embeddings(runtime):
    runtime.config = dataclasses.replace(runtime.config, embeddings_enabled=True)


def test_semantic_module_missing_degrades_to_full_text_and_says_so(memory, runtime, monkeypatch):
    _with_embeddings(runtime)
    monkeypatch.setattr(recall_search, "semantic_module", lambda: None)
    out = call(memory.engine, "trove_recall", query="ferry")
    assert out["hits"] and out["degraded"] is True
    assert out["degraded_reason"] == "embeddings module unavailable"
    assert out["provenance"]["coverage"]["semantic"]["ran"] is False


def test_semantic_failure_or_timeout_degrades_to_full_text(memory, runtime, monkeypatch):
    _with_embeddings(runtime)

    def broken(*args, **kwargs):
        raise TimeoutError("provider took too long")

    monkeypatch.setattr(recall_search, "semantic_module", lambda: SimpleNamespace(start=broken))
    out = call(memory.engine, "trove_recall", query="ferry")
    assert out["hits"] and out["degraded"] is True and "TimeoutError" in out["degraded_reason"]
    not_ran = SimpleNamespace(hits=[], ran=False, degraded_reason="deadline passed", provider="local")
    monkeypatch.setattr(recall_search, "semantic_module",
                        lambda: SimpleNamespace(start=lambda *a, **k: lambda: not_ran))
    out = call(memory.engine, "trove_recall", query="ferry")
    assert out["degraded_reason"] == "deadline passed"
    assert out["provenance"]["coverage"]["semantic"]["provider"] == "local"


def test_semantic_hits_are_fused_with_full_text_and_found_by_meaning_alone(memory, runtime, monkeypatch):
    _with_embeddings(runtime)
    seen: dict = {}

    def start(rt, query, *, kinds, session_ids, since, before, limit, deadline_s):
        seen.update(kinds=kinds, limit=limit, deadline_s=deadline_s)
        hits = [SimpleNamespace(kind="message", item_id=memory.garden[0], score=0.82),  # meaning only
                SimpleNamespace(kind="message", item_id=memory.trip[0], score=0.40),
                SimpleNamespace(kind="summary", item_id=memory.node, score=0.35)]
        return lambda: SimpleNamespace(hits=hits, ran=True, degraded_reason=None, provider="fake", generation=3)

    monkeypatch.setattr(recall_search, "semantic_module", lambda: SimpleNamespace(start=start))
    out = call(memory.engine, "trove_recall", query="ferry")
    assert seen["kinds"] == ("message", "summary") and seen["deadline_s"] > 0
    by_ref = {h["ref"]: h for h in out["hits"]}
    assert by_ref[f"store:{memory.trip[0]}"]["arms"] == ["fts", "semantic"]
    assert by_ref[f"store:{memory.garden[0]}"]["arms"] == ["semantic"]
    assert by_ref[f"node:{memory.node}"]["arms"] == ["summary", "semantic"]
    assert out["provenance"]["arms_run"] == ["fts", "summary", "semantic"]
    assert out["provenance"]["coverage"]["semantic"]["generation"] == 3 and out["degraded"] is False
