"""``assertion_id`` operands of trove_compute: a stored assertion resolves to its exact ref, value
and tracked key, then grounds like a cited span; unknown, malformed or disabled ones fail closed
with the reason (and how to enable the store)."""
from __future__ import annotations

import json

import pytest
from conftest import make_config

from hermes_trove.runtime import build_runtime
from hermes_trove.state import contract
from hermes_trove.state.assertion_store import AssertionStore
from hermes_trove.store import SessionKey
from hermes_trove.toolkit import ToolContext
from hermes_trove.tools import dispatch

BACKENDS = ("sqlite", "postgresql")

DAY = 86400.0
T0 = 1_714_550_400.0  # 2024-05-01 08:00 UTC


def _runtime(tmp_path, enabled: bool = True):
    return build_runtime(make_config(tmp_path, assertions_enabled=enabled))


def _assert(runtime, text: str, at: float, *facts: tuple[str, str, str, str]) -> list[str]:
    """Store ``text`` as a user message at ``at`` and one assertion per (quote, predicate, value, kind)."""
    [store_id] = runtime.store.append(SessionKey("s1"), [{"role": "user", "content": text, "timestamp": at}])
    row = runtime.store.get(store_id)
    answer = {"assertions": [{"store_id": store_id, "quote": q, "subject": "user:self", "predicate": p, "value": v,
                              "kind": k, "confidence": 0.9} for q, p, v, k in facts]}
    candidates = contract.parse_answer(json.dumps(answer), {store_id: row}).candidates
    store = AssertionStore(runtime.db)
    store.ensure()
    store.add(candidates, now=at)
    return [c.assertion_id for c in candidates]


def compute(runtime, **args) -> dict:
    return json.loads(dispatch(ToolContext(runtime, SessionKey("s1")), "trove_compute", args))


@pytest.fixture
def moves(tmp_path):
    runtime = _runtime(tmp_path)
    berlin = _assert(runtime, "I live in Berlin.", T0, ("I live in Berlin", "lives_in", "Berlin", "fact"))
    madrid = _assert(runtime, "Now I live in Madrid.", T0 + 30 * DAY,
                     ("I live in Madrid", "lives_in", "Madrid", "fact"))
    return runtime, berlin[0], madrid[0]


def test_latest_state_over_assertions_keys_them_by_what_they_track(moves):
    runtime, berlin, madrid = moves
    out = compute(runtime, question="Where do I live now?", operands=[{"assertion_id": berlin},
                                                                       {"assertion_id": madrid}])
    assert out["status"] in ("computed", "partial"), out
    assert out["plan"]["operation"] == "latest_state"
    [state] = out["answer"]["states"]
    assert state["key"] == "user:self lives_in" and state["state"] == "Madrid" and state["operand"] == 2
    assert [o["assertion_id"] for o in out["operands"]] == [berlin, madrid]
    assert out["operands"][1]["ref"].startswith("trove:") and out["operands"][1]["quote"] == "I live in Madrid"


def test_assertion_and_ref_operands_mix_and_given_fields_win(tmp_path):
    runtime = _runtime(tmp_path)
    shoes = _assert(runtime, "The shoes cost $20.", T0, ("The shoes cost $20", "paid_for_shoes", "20", "fact"))
    hat = _assert(runtime, "The hat cost $15 and the scarf $5.", T0 + DAY,
                  ("The hat cost $15 and the scarf $5", "paid_for_hat", "hat for $15", "fact"))
    total = compute(runtime, question="How much did I spend in total?", evidence_complete=True,
                    operands=[{"assertion_id": shoes[0]}, {"assertion_id": hat[0], "value": 15}])
    assert total["status"] == "computed", total
    assert total["answer"]["value"] == 35 and total["answer"]["unit"] == "USD"
    vague = compute(runtime, question="How much did I spend in total?", operands=[{"assertion_id": hat[0]}])
    assert vague["status"] == "fallback" and "2 numbers" in vague["rejected_operands"][0]["reason"]


def test_count_distinct_over_assertions_counts_their_values(tmp_path):
    runtime = _runtime(tmp_path)
    ids = _assert(runtime, "We visited Paris and then Rome.", T0, ("We visited Paris", "visited", "Paris", "event"),
                  ("then Rome", "visited", "Rome", "event"))
    out = compute(runtime, question="How many cities did we visit?", evidence_complete=True,
                  operands=[{"assertion_id": i} for i in ids])
    assert out["status"] == "computed" and out["answer"]["value"] == 2, out
    assert out["answer"]["keys"] == ["paris", "rome"]


@pytest.mark.parametrize(("operand", "reason"), [
    ({"assertion_id": "a1"}, "'a1' is not an assertion id: pass the 64-character hex assertion_id"),
    ({"assertion_id": 12345}, "'12345' is not an assertion id"),
    ({"assertion_id": "f" * 65}, "is not an assertion id"),
    ({"assertion_id": "0" * 64}, "no assertion 000000000000... is stored"),
])
def test_unknown_or_malformed_ids_fail_closed_with_the_reason(moves, operand, reason):
    runtime, berlin, _ = moves
    out = compute(runtime, question="Where do I live now?", operands=[operand, {"assertion_id": berlin}])
    assert out["status"] == "fallback" and out["answer"] is None
    assert [r["operand"] for r in out["rejected_operands"]] == [1]
    assert reason in out["rejected_operands"][0]["reason"], out["rejected_operands"]


def test_ids_are_read_case_insensitively(moves):
    runtime, berlin, madrid = moves
    out = compute(runtime, question="Where do I live now?", operands=[{"assertion_id": berlin.upper()},
                                                                       {"assertion_id": f" {madrid} "}])
    assert out["answer"]["states"][0]["state"] == "Madrid"


def test_with_assertions_off_the_operand_says_how_to_enable_them(tmp_path):
    on = _runtime(tmp_path)
    [aid] = _assert(on, "I live in Berlin.", T0, ("I live in Berlin", "lives_in", "Berlin", "fact"))
    off = _runtime(tmp_path, enabled=False)  # the same file, the store switched off
    out = compute(off, question="Where do I live now?", operands=[{"assertion_id": aid}])
    reason = out["rejected_operands"][0]["reason"]
    assert out["status"] == "fallback"
    assert "assertions are disabled" in reason and "TROVE_ASSERTIONS_ENABLED=true" in reason


def test_an_assertion_whose_message_changed_since_extraction_fails_closed(moves):
    runtime, berlin, madrid = moves
    with runtime.db.transaction() as conn:
        conn.execute("UPDATE messages SET content = 'I live in Lisbon.' WHERE content = 'I live in Berlin.'")
    out = compute(runtime, question="Where do I live now?", operands=[{"assertion_id": berlin},
                                                                       {"assertion_id": madrid}])
    assert out["status"] == "fallback" and out["rejected_operands"][0]["operand"] == 1
    assert "stale or edited" in out["rejected_operands"][0]["reason"]


def test_the_retrieval_controller_can_finish_through_assertion_operands(moves):
    runtime, berlin, madrid = moves
    runtime = build_runtime(make_config_from(runtime, adaptive_retrieval_enabled=True))
    ctx = ToolContext(runtime, SessionKey("s1"))
    started = json.loads(dispatch(ctx, "trove_retrieve", {
        "action": "start", "question": "Where do I live now?", "identity": {"intent_type": "current_state"},
        "requirements": [{"slot_id": "city", "description": "where I live"}]}))
    rid = started["retrieval_id"]
    found = json.loads(dispatch(ctx, "trove_retrieve", {"action": "search", "retrieval_id": rid, "missing_slot": "city",
                                                        "tool": "trove_query_state",
                                                        "tool_args": {"subject_key": "user:self"}}))
    refs = [o["ref"] for o in found["observed"]]
    done = json.loads(dispatch(ctx, "trove_retrieve", {
        "action": "finish", "retrieval_id": rid, "selected_refs": refs, "resolved_slots": ["city"],
        "computation": {"operands": [{"assertion_id": berlin}, {"assertion_id": madrid}]}}))
    assert done["status"] == "finished", done
    assert done["evidence_view"]["computation"]["answer"]["states"][0]["state"] == "Madrid"


def make_config_from(runtime, **overrides):
    import dataclasses

    return dataclasses.replace(runtime.config, **overrides)


@pytest.mark.parametrize(("text", "quote", "valid_from"), [
    ("I live in Porto now.", "I live in Porto now", "said"),  # the day it was said: from the moment said
    ("Today I moved to Porto.", "Today I moved to Porto", "said"),
    ("I live in Porto.", "I live in Porto", "said"),  # no time named
    ("On May 3 I moved to Porto.", "On May 3 I moved to Porto", T0 + 2 * DAY - 8 * 3600),  # 2024-05-03 00:00
    ("I've lived in Porto for the past three weeks.", "I've lived in Porto for the past three weeks",
     T0 - 6 * DAY - 8 * 3600),  # a window holding the moment said keeps its start: 2024-04-25 00:00
])
def test_a_state_holds_from_the_time_its_quote_names_or_from_when_it_was_said(tmp_path, text, quote, valid_from):
    runtime = _runtime(tmp_path)
    said = T0 + 14 * DAY + 7 * 3600  # 2024-05-15 15:00 UTC
    [store_id] = runtime.store.append(SessionKey("s1"), [{"role": "user", "content": text, "timestamp": said}])
    answer = {"assertions": [{"store_id": store_id, "quote": quote, "subject": "user:self", "predicate": "lives_in",
                              "value": "Porto", "kind": "fact", "confidence": 0.9}]}
    [candidate] = contract.parse_answer(json.dumps(answer), {store_id: runtime.store.get(store_id)}).candidates
    assert candidate.valid_from == (said if valid_from == "said" else valid_from)
