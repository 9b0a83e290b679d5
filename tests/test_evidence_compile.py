"""trove_compile_evidence: field-by-field validation and every sufficiency state; the disabled tools."""
from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from conftest import user

from hermes_trove.refs import make_ref
from hermes_trove.store import SessionKey
from hermes_trove.toolkit import ToolContext
from hermes_trove.tools import dispatch

BACKENDS = ("sqlite", "postgresql")

T0 = datetime(2024, 5, 6, 12, tzinfo=UTC).timestamp()
TEXTS = ["I visited Paris on 2 June 2023 with Ana.", "I visited Rome on 9 June 2023.",
         "The ticket to Paris cost $120.", "The ticket to Paris cost $150.", "Unrelated: the weather was fine."]


@pytest.fixture
def world(runtime):
    key = SessionKey("s1")
    ids = runtime.store.append(key, [dict(user(t), timestamp=T0 + i) for i, t in enumerate(TEXTS)])
    refs = [make_ref(runtime.store.get(i), 0, len(t)).to_dict() for i, t in zip(ids, TEXTS, strict=True)]
    ctx = ToolContext(runtime, key)

    def call(selections, **extra):
        proposal = {"version": "evidence-selector-v1", "selections": selections, **extra.pop("proposal", {})}
        return json.loads(dispatch(ctx, "trove_compile_evidence", {"question": "q?", "proposal": proposal, **extra}))

    return call, refs


def test_every_claimed_field_is_checked_against_the_quote(world):
    call, refs = world
    out = call([{"claim_id": "a", "facet": "trip", "exact_ref": refs[0], "entity": "Paris", "date": "2023-06-02",
                 "distinct_key": "place:Paris", "role": "user", "source": "unknown"},
                {"claim_id": "b", "facet": "trip", "exact_ref": refs[1], "entity": "Milan", "date": "2023-06-10",
                 "role": "assistant"}])
    a, b = out["selections"]
    assert a["status"] == "verified" and set(a["verified_fields"]) == {"entity", "date", "distinct_key", "role",
                                                                       "source"}
    assert b["status"] == "partial" and set(b["failed_fields"]) == {"entity", "date", "role"}
    assert out["state"] == "answer_sufficient" and out["model_claims_trusted"] is False


def test_unknown_when_nothing_verifies(world):
    call, refs = world
    out = call([{"facet": "trip", "exact_ref": dict(refs[0], quote="I visited Pariss")}, {"facet": "trip"}])
    assert out["state"] == "unknown" and out["counts"]["rejected"] == 2
    assert "quote is not the stored text" in out["selections"][0]["reason"]
    assert "exact_ref is required" in out["selections"][1]["reason"]


def test_conflicting_verified_values_are_conflicted(world):
    call, refs = world
    out = call([{"facet": "price", "exact_ref": refs[2], "entity": "Paris", "value": "120"},
                {"facet": "price", "exact_ref": refs[3], "entity": "Paris", "value": "150"}])
    assert out["state"] == "conflicted" and out["conflicts"][0]["values"] == {"120": ["s1"], "150": ["s2"]}


def test_partial_when_a_requested_facet_lacks_verified_evidence(world):
    call, refs = world
    out = call([{"facet": "trip", "exact_ref": refs[0]}], proposal={"requested_facets": ["trip", "price"]})
    assert out["state"] == "partial" and "price" in out["reasons"][0]
    assert out["facets"]["price"] == {"covered": False, "claim_ids": []}
    declared = call([{"facet": "trip", "exact_ref": refs[0]}], proposal={"missing_facets": ["companion"]})
    assert declared["state"] == "partial"


def test_computation_sufficient_for_a_non_aggregate_operation(world):
    call, refs = world
    out = call([{"facet": "first", "exact_ref": refs[0], "date": "2023-06-02"},
                {"facet": "second", "exact_ref": refs[1], "date": "2023-06-09"}],
               proposal={"operation": "date_difference"})
    assert out["state"] == "computation_sufficient" and out["computation"]["answer"]["value"] == 7


def test_an_aggregate_without_a_coverage_search_is_only_partial(world):
    call, refs = world
    sel = [{"facet": "city", "exact_ref": refs[0], "distinct_key": "Paris"},
           {"facet": "city", "exact_ref": refs[1], "distinct_key": "Rome"}]
    out = call(sel, proposal={"operation": "count_distinct"})
    assert out["state"] == "partial" and "coverage not proven" in out["reasons"][0]
    assert out["computation"]["answer"]["value"] == 2 and out["computation"]["answer"]["bound"] == "at_least"


def test_finite_coverage_only_when_the_rerun_search_is_fully_covered(world):
    call, refs = world
    sel = [{"facet": "city", "exact_ref": refs[0], "distinct_key": "Paris"},
           {"facet": "city", "exact_ref": refs[1], "distinct_key": "Rome"}]
    covered = call(sel, proposal={"operation": "count_distinct"}, coverage={"query": "visited"})
    assert covered["state"] == "finite_coverage", covered
    assert covered["coverage"]["complete_result_set"] and covered["coverage"]["candidates"] == 2
    assert covered["computation"]["status"] == "computed" and covered["computation"]["answer"]["value"] == 2
    missed = call(sel[:1], proposal={"operation": "count_distinct"}, coverage={"query": "visited"})
    assert missed["state"] == "partial" and missed["coverage"]["uncovered_store_ids"] == [refs[1]["store_id"]]
    too_many = call(sel, proposal={"operation": "count_distinct"}, coverage={"query": "visited", "max_candidates": 1})
    assert too_many["state"] == "partial" and too_many["coverage"]["complete_result_set"] is False


def test_malformed_proposals_are_refused(world):
    call, refs = world
    assert "selections" in call([])["error"]
    assert "operation" in call([{"exact_ref": refs[0]}], proposal={"operation": "guess"})["error"]
    assert "coverage" in call([{"exact_ref": refs[0]}], coverage={"q": 1})["error"]


@pytest.mark.parametrize("tool", ["trove_query_state", "trove_retrieve"])
def test_state_tools_are_listed_but_disabled_with_a_reason(runtime, tool):
    out = json.loads(dispatch(ToolContext(runtime, SessionKey("s1")), tool, {"subject_key": "user:self",
                                                                             "action": "start"}))
    assert out["status"] == "disabled" and "disabled" in out["reason"] and out["next_step"]
