"""Evidence verdicts: the compile brief's state table, per-selection verdicts, conflicts, the coverage
re-run over every scope, and the pack's ref verdicts and budgets, over a real temporary store."""
from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from conftest import user

from hermes_trove.evidence.compile import Proposal, check_coverage, conflicts, decide, parse_proposal
from hermes_trove.evidence.pack import PackBudgets, parse_budgets, parse_refs
from hermes_trove.refs import make_ref
from hermes_trove.store import SessionKey
from hermes_trove.toolkit import ToolContext
from hermes_trove.tools import dispatch

DAY = 86400
T0 = datetime(2024, 5, 6, 12, tzinfo=UTC).timestamp()


def verified(facet: str, claim_id: str = "a", **fields) -> dict:
    return {"claim_id": claim_id, "facet": facet, "status": "verified", "verified_fields": fields}


def proposal(operation=None, requested=(), missing=()) -> Proposal:
    return Proposal(operation, tuple(requested), tuple(missing), ())


PROVEN = {"proven": True}
UNPROVEN = {"proven": False, "reason": "the search found no candidates"}
FELL_BACK = {"status": "fallback", "reason": "unit mismatch"}
COMPUTED = {"status": "computed"}

DECISIONS = [
    # (proposal, checked selections, coverage, computation, state, words of the first reason)
    (proposal(), [], None, None, "unknown", "no selection verified"),
    (proposal(), [{"claim_id": "a", "facet": "x", "status": "rejected"}], None, None, "unknown", "no selection"),
    (proposal(), [{"claim_id": "a", "facet": "x", "status": "partial"}], None, None, "unknown", "no selection"),
    (proposal(requested=["trip"]), [verified("trip")], None, None, "answer_sufficient", "every requested facet"),
    (proposal(requested=["trip", "price"]), [verified("trip")], None, None, "partial", "without a verified "
                                                                                        "selection: price"),
    (proposal(missing=["price"]), [verified("trip")], None, None, "partial", "declares missing facets: price"),
    (proposal("sum"), [verified("price")], None, FELL_BACK, "partial", "computation fell back: unit mismatch"),
    (proposal("sum"), [verified("price")], None, COMPUTED, "partial", "coverage not proven (no coverage search"),
    (proposal("sum"), [verified("price")], UNPROVEN, COMPUTED, "partial", "the search found no candidates"),
    (proposal("sum"), [verified("price")], PROVEN, COMPUTED, "finite_coverage", "every candidate"),
    (proposal("count_distinct"), [verified("city")], PROVEN, COMPUTED, "finite_coverage", "every candidate"),
    (proposal(), [verified("city")], PROVEN, None, "finite_coverage", "every candidate"),
    (proposal("difference"), [verified("price")], None, COMPUTED, "computation_sufficient", "difference computed"),
    (proposal("date_difference"), [verified("when")], UNPROVEN, COMPUTED, "computation_sufficient", "computed"),
    (proposal(requested=["x"]), [verified("x", "a", value="1"), verified("x", "b", value="2")], PROVEN, None,
     "conflicted", "1 facet(s)"),
]


@pytest.mark.parametrize("prop,checked,coverage,computation,state,reason", DECISIONS,
                         ids=[f"{i}-{c[4]}" for i, c in enumerate(DECISIONS)])
def test_the_state_table(prop, checked, coverage, computation, state, reason):
    got, reasons = decide(prop, checked, conflicts(checked), coverage, computation)
    assert got == state and reason in reasons[0], reasons


CONFLICTS = [
    # (verified selections' fields, number of conflicts)
    ([{"value": "120"}, {"value": "150"}], 1),
    ([{"value": "120"}, {"value": "120"}], 0),
    ([{"value": "Paris"}, {"value": "paris."}], 0),  # the same value written differently
    ([{"value": "120", "entity": "Paris"}, {"value": "150", "entity": "Rome"}], 0),
    ([{"value": "120", "date": "2024-01"}, {"value": "150", "date": "2024-02"}], 0),
    ([{"value": "120", "distinct_key": "a"}, {"value": "150", "distinct_key": "b"}], 0),
    ([{"value": "120"}, {"entity": "Paris"}], 0),  # no value, nothing to disagree on
]


@pytest.mark.parametrize("fields,count", CONFLICTS, ids=[str(i) for i in range(len(CONFLICTS))])
def test_conflicts_are_different_values_for_one_slot(fields, count):
    checked = [verified("price", f"c{i}", **f) for i, f in enumerate(fields)]
    assert len(conflicts(checked)) == count


def test_a_conflict_names_its_slot_and_which_claims_say_what():
    [found] = conflicts([verified("price", "a", value="120", entity="Paris"),
                         verified("price", "b", value="150", entity="paris")])
    assert found == {"facet": "price", "entity": "paris", "distinct_key": None, "date": None,
                     "values": {"120": ["a"], "150": ["b"]}}


COVERAGE = [
    # (candidate ids, more, limit, verified ids, proven, complete, reason words)
    ([1, 2], False, 48, {1, 2}, True, True, None),
    ([1, 2], False, 48, {1}, False, True, "1 candidate rows have no verified selection"),
    ([], False, 48, set(), False, True, "found no candidates"),
    ([1, 2, 3], False, 2, {1, 2, 3}, False, False, "more than 2 candidates"),
    ([1], True, 48, {1}, False, False, "more than 48 candidates"),
]


@pytest.mark.parametrize("ids,more,limit,covered,proven,complete,reason", COVERAGE,
                         ids=[str(i) for i in range(len(COVERAGE))])
def test_check_coverage_table(ids, more, limit, covered, proven, complete, reason):
    out = check_coverage(ids, more, limit, covered, {"query": "q"})
    assert out["proven"] is proven and out["complete_result_set"] is complete and out["query"] == "q"
    assert (reason in out["reason"]) if reason else "reason" not in out


@pytest.mark.parametrize("raw,error", [
    (None, "must be an object"), ({"selections": []}, "1-50"), ({"selections": [{}] * 51}, "at most 50"),
    ({"selections": [3]}, "selection 1 must be an object"), ({"selections": [{}], "operation": "divide"},
                                                             "proposal.operation must be one of"),
    ({"selections": [{}], "requested_facets": "trip"}, "list of strings"),
    ({"selections": [{}], "missing_facets": ["x"] * 13}, "at most 12"),
])
def test_malformed_proposals_raise(raw, error):
    with pytest.raises(ValueError, match=error):
        parse_proposal(raw)


def test_a_proposal_keeps_bad_refs_per_selection_and_reads_lookup_as_no_operation():
    p = parse_proposal({"operation": "lookup", "selections": [{"exact_ref": "trove:x"}, {"facet": "f", "claim_id": 9,
                                                                                         "exact_ref": "trove:3:0-4",
                                                                                         "value": 5, "unit": ""}]})
    assert p.operation is None
    bad, good = p.selections
    assert bad.claim is None and "not a ref" in (bad.error or "") and bad.claim_id == "s1"
    assert good.claim is not None and good.claim_id == "9" and good.fields == {"value": "5"}


# -- through the tools ------------------------------------------------------------------------
TEXTS = ["The ticket to Paris cost $120.", "The ticket to Rome cost $90.", "I flew to Paris on 2 June 2023.",
         "東京の切符は 5000", "The weather was fine."]


@pytest.fixture
def world(runtime):
    ids = runtime.store.append(SessionKey("s1"), [dict(user(t), timestamp=T0 + i * DAY) for i, t in enumerate(TEXTS)])
    ids += runtime.store.append(SessionKey("s2"), [dict(user("The ticket to Oslo cost $300."), timestamp=T0)])
    refs = [make_ref(runtime.store.get(i), 0, len(runtime.store.get(i).content)).to_dict() for i in ids]

    def call(tool: str, session: str | None = "s1", **args):
        ctx = ToolContext(runtime, SessionKey(session) if session else None)
        return json.loads(dispatch(ctx, tool, {"question": "How much in total?", **args}))

    return call, refs


def selections(refs, *indexes, **fields):
    return [{"claim_id": f"c{i}", "facet": "price", "exact_ref": refs[i], **fields} for i in indexes]


COVERAGE_RUNS = [
    # (selected refs, coverage argument, session bound, proven, candidates, uncovered indexes or reason words)
    ((0, 1), {"query": "ticket"}, "s1", True, 2, []),
    ((0,), {"query": "ticket"}, "s1", False, 2, [1]),
    ((0, 1), {"query": "ticket", "session_scope": "all"}, "s1", False, 3, [5]),
    ((0, 1, 5), {"query": "ticket", "session_scope": "all"}, None, True, 3, []),
    ((5,), {"query": "ticket", "session_scope": "session", "session_id": "s2"}, "s1", True, 1, []),
    ((0, 1), {"query": "ticket", "max_candidates": 1}, "s1", False, 2, "more than 1 candidates"),
    ((0, 1), {"query": "submarine"}, "s1", False, 0, "found no candidates"),
    ((3,), {"query": "東京"}, "s1", True, 1, []),  # the substring fallback, as trove_grep runs it
]


@pytest.mark.both_backends
@pytest.mark.parametrize("chosen,coverage,session,proven,candidates,uncovered", COVERAGE_RUNS,
                         ids=[str(i) for i in range(len(COVERAGE_RUNS))])
def test_the_coverage_rerun_over_every_scope(world, chosen, coverage, session, proven, candidates, uncovered):
    call, refs = world
    out = call("trove_compile_evidence", session=session, coverage=coverage,
               proposal={"operation": "sum", "selections": selections(refs, *chosen)})
    cov = out["coverage"]
    assert cov["proven"] is proven and cov["candidates"] == candidates, cov
    assert cov["session_scope"] == coverage.get("session_scope", "current")
    if isinstance(uncovered, str):
        assert uncovered in cov["reason"]
    else:
        assert cov["uncovered_store_ids"] == [refs[i]["store_id"] for i in uncovered]
    assert out["state"] == ("finite_coverage" if proven else "partial")


@pytest.mark.both_backends
@pytest.mark.parametrize("coverage,session,error", [
    ({"query": ""}, "s1", "coverage must be an object with a query"),
    ("ticket", "s1", "coverage must be an object"),
    ({"query": "ticket", "session_scope": "session"}, "s1", "needs coverage.session_id"),
    ({"query": "ticket"}, None, "needs a bound session"),
    ({"query": "ticket", "session_scope": "galaxy"}, "s1", "session_scope"),
    ({"query": "ticket", "max_candidates": 49}, "s1", "max_candidates"),
])
def test_a_malformed_coverage_argument_is_refused(world, coverage, session, error):
    call, refs = world
    out = call("trove_compile_evidence", session=session, coverage=coverage,
               proposal={"selections": selections(refs, 0)})
    assert error in out["error"], out


@pytest.mark.both_backends
def test_a_coverage_rerun_honours_the_memory_scope(world, runtime):
    """Rows of a session the caller may not read are no candidates (and cannot be selected)."""
    call, refs = world
    out = call("trove_compile_evidence", session="s1", coverage={"query": "Oslo", "session_scope": "all"},
               proposal={"selections": selections(refs, 0)})
    assert out["coverage"]["candidates"] == 1  # TROVE_MEMORY_SCOPE defaults to every session


@pytest.mark.both_backends
def test_compile_computes_over_the_verified_fields_only(world):
    call, refs = world
    sels = selections(refs, 0, 1, value="120") + [{"claim_id": "x", "facet": "price", "exact_ref": refs[1],
                                                   "value": "90"}]
    out = call("trove_compile_evidence", proposal={"operation": "sum", "selections": sels})
    by_id = {s["claim_id"]: s for s in out["selections"]}
    assert by_id["c0"]["status"] == "verified" and by_id["c1"]["status"] == "partial"
    assert "value" in by_id["c1"]["failed_fields"] and by_id["x"]["status"] == "verified"
    assert out["computation"]["answer"]["value"] == 210 and out["counts"] == {"verified": 2, "partial": 1,
                                                                              "rejected": 0}


SELECTION_VERDICTS = [
    # (selection fields beyond the ref, status, verified field names, failed field names)
    ({"entity": "Paris", "value": "120", "unit": "USD"}, "verified", {"entity", "value", "unit"}, set()),
    ({"entity": "Rome"}, "partial", set(), {"entity"}),
    ({"value": "121"}, "partial", set(), {"value"}),
    ({"value": "120", "unit": "EUR"}, "partial", set(), {"value", "unit"}),
    ({"role": "assistant", "source": "unknown"}, "partial", {"source"}, {"role"}),
    ({"date": "2023-06-02"}, "partial", set(), {"date"}),
    ({"distinct_key": "ticket"}, "verified", {"distinct_key"}, set()),
]


@pytest.mark.both_backends
@pytest.mark.parametrize("fields,status,good,bad", SELECTION_VERDICTS, ids=[str(i) for i in range(7)])
def test_selection_verdict_table(world, fields, status, good, bad):
    call, refs = world
    out = call("trove_compile_evidence", proposal={"selections": [{"exact_ref": refs[0], **fields}]})
    [sel] = out["selections"]
    assert sel["status"] == status and set(sel["verified_fields"]) == good
    assert set(sel.get("failed_fields", {})) == bad


@pytest.mark.both_backends
def test_a_rejected_selection_carries_the_ref_error(world):
    call, refs = world
    out = call("trove_compile_evidence", proposal={"selections": [{"exact_ref": dict(refs[0], quote="nope")},
                                                                  {"exact_ref": "trove:9999:0-3"}]})
    first, second = out["selections"]
    assert first["status"] == second["status"] == "rejected" and out["state"] == "unknown"
    assert "not the stored text" in first["reason"] and "not stored" in second["reason"]


@pytest.mark.both_backends
def test_a_small_response_cap_keeps_the_leading_selections(world):
    call, refs = world
    sels = [{"claim_id": f"c{i}", "exact_ref": refs[i % 3], "label": "x" * 190} for i in range(40)]
    out = call("trove_compile_evidence", proposal={"selections": sels}, budgets={"response_char_cap": 4096})
    assert out["truncated"] is True and out["selections_omitted_for_cap"] == 40 - len(out["selections"])
    assert len(json.dumps(out)) <= 4096


# -- the pack's verdicts ----------------------------------------------------------------------
@pytest.mark.parametrize("raw,expected,notes", [
    (None, PackBudgets(), {}),
    ({"max_refs": 3}, PackBudgets(max_refs=3), {}),
    ({"max_refs": 500}, PackBudgets(max_refs=50), {"max_refs_clamped_from": 500}),
    ({"max_quote_chars": 1}, PackBudgets(max_quote_chars=64), {"max_quote_chars_clamped_from": 1}),
    ({"max_per_date": "2"}, PackBudgets(max_per_date=2), {}),
    ({"colour": "red"}, PackBudgets(), {"ignored_budgets": ["colour"]}),
])
def test_pack_budgets_table(raw, expected, notes):
    assert parse_budgets(raw) == (expected, notes)


@pytest.mark.parametrize("raw,error", [([], "1-50"), ("trove:1:0-2", "1-50"), (["trove:1:0-2"] * 51, "at most 50"),
                                       ({"max_refs": "x"}, "budgets.max_refs")])
def test_pack_arguments_refused(raw, error):
    with pytest.raises(ValueError, match=error):
        parse_refs(raw) if not isinstance(raw, dict) else parse_budgets(raw)


def test_pack_refs_keep_their_parse_errors():
    [(i, claim, error), (j, other, none)] = parse_refs(["trove:nope", {"exact_ref": "trove:4:0-3"}])
    assert (i, claim) == (1, None) and "not a ref" in (error or "")
    assert (j, none) == (2, None) and other is not None and other.store_id == 4


PACK_VERDICTS = [
    # (ref change, item kept, words of the rejection or repair)
    (lambda r: r, True, None),
    (lambda r: dict(r, span_start=r["span_start"] + 2, span_end=r["span_end"] + 2), True, "window"),
    (lambda r: dict(r, quote="Lisbon"), False, "does not occur inside the window"),
    (lambda r: dict(r, content_sha256="0" * 64), False, "never repaired"),
    (lambda r: dict(r, store_id=9999), False, "is not stored"),
    (lambda r: "trove:bad", False, "not a ref"),
]


@pytest.mark.both_backends
@pytest.mark.parametrize("change,kept,words", PACK_VERDICTS, ids=[str(i) for i in range(len(PACK_VERDICTS))])
def test_pack_ref_verdicts(world, change, kept, words):
    call, refs = world
    out = call("trove_evidence_pack", baseline_refs=[change(dict(refs[0], quote="ticket to Paris", span_start=4,
                                                                 span_end=19))])
    assert (out["returned"] == 1) is kept, out
    if kept and words:
        assert words in out["items"][0]["repaired"]["window"]
    elif not kept:
        assert out["status"] == "empty" and words in out["rejected"][0]["reason"], out["rejected"]


@pytest.mark.both_backends
def test_pack_items_carry_their_occurrences_and_observation_time(world):
    call, refs = world
    out = call("trove_evidence_pack", baseline_refs=[refs[2], refs[0]])
    first, second = out["items"]
    assert first["store_id"] == refs[0]["store_id"] and second["occurrences"][0]["expression"] == "on 2 June 2023"
    assert first["occurrences"] == [] and first["observed_at"].startswith("2024-05-06")
