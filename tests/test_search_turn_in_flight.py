"""The turn being answered is never evidence: its question, tool calls and results stay out of
trove_grep and trove_recall when the model calls them mid-turn (the engine stores the live
transcript first, so those rows are in the store)."""
from __future__ import annotations

import json

import pytest
from conftest import assistant, stamped, tool_call, tool_result, user

from hermes_trove.refs import make_ref
from hermes_trove.store import SessionKey
from hermes_trove.tools import dispatch

BACKENDS = ("sqlite", "postgresql")  # every test here runs on the file and on a server

T0 = 1_700_000_000.0
QUESTION = "what did I say about my passport?"


def earlier_turns():
    return [user("I keep my passport in the blue drawer of the desk"), assistant("Noted: the blue drawer."),
            user("And the spare car key?"), assistant("The spare key is on the hook.")]


def in_flight(first_call_done=False):
    """The live turn: the question, a grep call, and (optionally) its result and a second call."""
    msgs = [user(QUESTION),
            assistant("", [tool_call("c1", "trove_grep", json.dumps({"query": "passport"}))])]
    if first_call_done:
        msgs += [tool_result("c1", "passport: the blue drawer", name="trove_grep"),
                 assistant("Checking more.", [tool_call("c2", "trove_recall", json.dumps({"query": "passport"}))])]
    return msgs


def mid_turn(engine, name, live, **args):
    out = json.loads(engine.handle_tool_call(name, args, messages=live))
    assert "error" not in out, out
    return out


def contents(runtime, ids):
    return [row.content for row in runtime.store.get_many(ids)]


@pytest.mark.parametrize("first_call_done", [False, True])
@pytest.mark.parametrize("query", [QUESTION, "passport", "passport drawer grep"])
def test_grep_mid_turn_returns_earlier_turns_never_the_turn_in_flight(engine, first_call_done, query):
    live = stamped(earlier_turns() + in_flight(first_call_done))
    out = mid_turn(engine, "trove_grep", live, query=query)
    ids = [h["store_id"] for h in out["results"] if h["type"] == "message"]
    stored = engine.runtime.store.tail("s1", len(live))
    turn = {row.store_id for row in stored[4:]}
    assert turn and not turn & set(ids)
    assert "I keep my passport in the blue drawer of the desk" in contents(engine.runtime, ids)


def test_grep_in_every_scope_leaves_the_turn_out(engine):
    live = stamped(earlier_turns() + in_flight(True))
    for args in ({"session_scope": "all"}, {"session_scope": "session", "session_id": "s1"},
                 {"sort": "recency"}, {"sort": "recent_relevance"}, {"role": "user"}):
        out = mid_turn(engine, "trove_grep", live, query="passport", **args)
        texts = contents(engine.runtime, [h["store_id"] for h in out["results"]])
        assert QUESTION not in texts and texts, args
        assert all("trove_grep" not in t for t in texts)


def test_a_finished_turn_is_evidence_for_the_next_one(engine):
    first = stamped(earlier_turns() + in_flight(True) + [assistant("Your passport is in the blue drawer.")])
    mid_turn(engine, "trove_grep", first, query="passport")
    second = first + stamped([user("thanks, and the car key?")], t0=T0 + 3600)
    out = mid_turn(engine, "trove_grep", second, query=QUESTION)
    texts = contents(engine.runtime, [h["store_id"] for h in out["results"]])
    assert QUESTION in texts  # the earlier question is history now


def test_without_a_turn_in_flight_the_latest_message_is_searchable(engine):
    engine.runtime.store.append(SessionKey("s1", platform="cli"), stamped(earlier_turns() + in_flight()))
    out = json.loads(dispatch(engine.tool_context(), "trove_grep", {"query": QUESTION}))
    assert QUESTION in contents(engine.runtime, [h["store_id"] for h in out["results"]])


def test_the_first_turn_of_a_session_has_nothing_to_find_in_itself(engine):
    out = mid_turn(engine, "trove_grep", stamped(in_flight(True)), query="passport")
    assert out["results"] == []


def test_recall_mid_turn_skips_the_turn_even_after_a_compaction_covered_it(engine):
    runtime = engine.runtime
    runtime.store.append(SessionKey("old", platform="cli"), stamped(earlier_turns(), t0=T0 - 86400))
    live = stamped(in_flight(True))
    mid_turn(engine, "trove_grep", live, query="passport")  # stores the live turn
    runtime.store.advance_frontier("s1", runtime.store.last_store_id("s1"))  # as if compacted mid-turn
    out = mid_turn(engine, "trove_recall", live, query=QUESTION)
    texts = [h["snippet"] for h in out["hits"]]
    assert any("blue drawer of the desk" in t for t in texts)
    assert not any("what did I say" in t or "trove_grep" in t for t in texts)
    assert out["excluded"]["in_flight_turn"] >= 2


def test_recall_called_outside_a_turn_counts_no_turn(engine):
    runtime = engine.runtime
    runtime.store.append(SessionKey("old", platform="cli"), stamped(earlier_turns(), t0=T0 - 86400))
    out = json.loads(dispatch(engine.tool_context(), "trove_recall", {"query": QUESTION}))
    assert "in_flight_turn" not in out.get("excluded", {})
    assert out["hits"]


def test_last_reply_store_id_walks_back_to_the_last_finished_answer(runtime):
    key = SessionKey("s", platform="cli")
    assert runtime.store.last_reply_store_id("s") == 0
    ids = runtime.store.append(key, stamped(earlier_turns() + in_flight(True)))
    assert runtime.store.last_reply_store_id("s") == ids[3]
    more = runtime.store.append(key, [assistant("Done: the blue drawer.")])
    assert runtime.store.last_reply_store_id("s") == more[0]
    assert runtime.store.last_reply_store_id("other") == 0


def test_the_walk_back_is_bounded_by_its_window(runtime):
    key = SessionKey("s", platform="cli")
    ids = runtime.store.append(key, stamped([assistant("an old finished reply")] + [user(f"u{i}") for i in range(6)]))
    assert runtime.store.last_reply_store_id("s") == ids[0]
    assert runtime.store.last_reply_store_id("s", window=3) == ids[-3] - 1  # no reply in the newest 3 rows
    assert runtime.store.last_reply_store_id("s", window=7) == ids[0]
    only = runtime.store.append(SessionKey("q", platform="cli"), [user("the first question")])
    assert runtime.store.last_reply_store_id("q") == only[0] - 1


def test_evidence_coverage_rerun_leaves_the_turn_out(engine):
    live = stamped(earlier_turns() + in_flight(True))
    mid_turn(engine, "trove_grep", live, query="passport")  # stores the live turn
    stored = engine.runtime.store.tail("s1", len(live))
    fact = stored[0]
    proposal = {"version": "evidence-selector-v1", "operation": "count_distinct", "selections": [
        {"facet": "place", "exact_ref": make_ref(fact, 0, len(fact.content)).to_dict(), "distinct_key": "drawer"}]}
    out = mid_turn(engine, "trove_compile_evidence", live, question="where is my passport?", proposal=proposal,
                   coverage={"query": "passport"})
    assert out["coverage"]["complete_result_set"] and out["coverage"]["candidates"] == 1, out["coverage"]
    assert out["state"] == "finite_coverage"
