"""trove_compute: one table of cases per operation, grounding failures, and fail-closed planning."""
from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from conftest import make_engine, user

from hermes_trove.filters import SessionFilters
from hermes_trove.refs import make_ref
from hermes_trove.store import SessionKey
from hermes_trove.toolkit import ToolContext
from hermes_trove.tools import dispatch

BACKENDS = ("sqlite", "postgresql")

DAY = 86400
T0 = datetime(2024, 5, 6, 12, tzinfo=UTC).timestamp()

FACTS = {
    "job": "I started the new job on 3 March 2024.",
    "migration": "I finished the migration on 17 April 2024.",
    "run_km": "I ran 5 km on Monday.",
    "run_mi": "Then I ran 3 miles with Ana.",
    "shoes_usd": "The shoes cost $20.",
    "hat_usd": "The hat cost $15.",
    "cafe_eur": "The cafe was €12.",
    "hours": "The hike took 2 hours.",
    "months": "The course lasted 3 months.",
    "disk_gb": "The backup used 1.5 GB.",
    "disk_mb": "The logs used 500 MB.",
    "paris": "We visited Paris in June 2023.",
    "rome": "We visited Rome in June 2023.",
    "lisbon": "We visited Lisbon on 2 August 2023.",
    "city_old": "I live in Berlin since 2019.",
    "city_new": "I moved to Madrid on 1 February 2024.",
    "dog": "I adopted a dog.",
    "two_dates": "We met on 1 May 2024 and again on 9 May 2024.",
    "vague": "That was a few days ago.",
    "weight": "I weigh 80 kg now.",
}


@pytest.fixture
def world(runtime):
    key = SessionKey("s1")
    ids = runtime.store.append(key, [dict(user(t), timestamp=T0 + i * DAY) for i, t in enumerate(FACTS.values())])
    rows = {name: runtime.store.get(i) for name, i in zip(FACTS, ids, strict=True)}
    ctx = ToolContext(runtime, key)

    def call(tool: str, **args):
        return json.loads(dispatch(ctx, tool, args))

    def ref(name: str, **extra):
        row = rows[name]
        return {**make_ref(row, 0, len(row.content)).to_dict(), **extra}

    return call, ref, rows


CASES = [
    # (question, operands as (fact, extra fields), extra args, expected status, expected value, unit)
    ("How many days between starting the job and finishing the migration?", [("job", {}), ("migration", {})],
     {}, "computed", 45, "day"),
    ("How many weeks between starting the job and finishing the migration?", [("migration", {}), ("job", {})],
     {}, "computed", 6.4286, "week"),
    ("How many months between the job and the migration?", [("job", {}), ("migration", {})], {}, "computed",
     1.4667, "month"),
    ("How long ago did I start the job?", [("job", {})], {"question_date": "2024-03-13T00:00:00Z"}, "computed",
     10, "day"),
    ("How long ago did I start the job?", [("job", {})], {}, "fallback", None, None),  # needs question_date
    ("How many days between Paris and Lisbon?", [("paris", {}), ("lisbon", {})], {}, "fallback", None, None),
    ("How many months between Paris and Lisbon?", [("paris", {}), ("lisbon", {})], {}, "computed", 2, "month"),
    ("How far did I run in total?", [("run_km", {"unit": "km"}), ("run_mi", {"unit": "mi"})],
     {"evidence_complete": True}, "computed", 9.828032, "km"),
    ("How many miles did I run in total?", [("run_km", {}), ("run_mi", {})], {"evidence_complete": True},
     "computed", 6.106856, "mile"),
    ("How much did I spend in total?", [("shoes_usd", {}), ("hat_usd", {})], {"evidence_complete": True},
     "computed", 35, "USD"),
    ("How much did I spend in total?", [("shoes_usd", {}), ("hat_usd", {})], {}, "partial", 35, "USD"),
    ("How much did I spend in total?", [("shoes_usd", {}), ("cafe_eur", {})], {}, "fallback", None, None),
    ("How much time in total?", [("hours", {}), ("run_km", {"unit": "km"})], {}, "fallback", None, None),
    ("How much time in total?", [("hours", {}), ("months", {})], {}, "fallback", None, None),
    ("How much storage in total?", [("disk_gb", {}), ("disk_mb", {})], {"evidence_complete": True}, "computed",
     2, "GB"),
    ("How much did I spend in total?", [("shoes_usd", {}), ("shoes_usd", {})], {"evidence_complete": True},
     "computed", 20, "USD"),  # the same ref twice counts once
    ("How much more did the shoes cost than the hat?", [("shoes_usd", {}), ("hat_usd", {})], {}, "computed", 5,
     "USD"),
    ("How much more did the hat cost than the shoes?", [("hat_usd", {}), ("shoes_usd", {})], {}, "computed", -5,
     "USD"),
    ("What is the difference between the hat and the shoes?", [("hat_usd", {}), ("shoes_usd", {})], {},
     "computed", 5, "USD"),
    ("How much more did the shoes cost than the cafe?", [("shoes_usd", {}), ("cafe_eur", {})], {}, "fallback",
     None, None),
    ("How many cities did we visit?", [("paris", {"key": "Paris"}), ("rome", {"key": "Rome"}),
                                       ("lisbon", {"key": "Lisbon"}), ("paris", {"key": "paris"})],
     {"evidence_complete": True}, "computed", 3, None),
    ("How many cities did we visit?", [("paris", {"key": "Paris"}), ("rome", {"key": "Rome"})], {}, "partial",
     2, None),
    ("How many cities did we visit?", [("paris", {}), ("rome", {})], {}, "fallback", None, None),  # no keys
    ("How many cities have we visited at present?", [("paris", {"key": "Paris"}), ("rome", {"key": "Rome"}),
                                                     ("lisbon", {"key": "Lisbon"})],
     {"evidence_complete": True}, "computed", 3, None),  # "at present" is no window of one day
    ("tell me how many cities we have visited since I just moved", [("paris", {"key": "Paris"}),
                                                                  ("rome", {"key": "Rome"}),
                                                                  ("lisbon", {"key": "Lisbon"})],
     {"evidence_complete": True}, "computed", 3, None),  # nor is "just moved"
    ("How many cities did we visit in June 2023?", [("paris", {"key": "Paris"}), ("rome", {"key": "Rome"}),
                                                    ("lisbon", {"key": "Lisbon"})],
     {"evidence_complete": True}, "computed", 2, None),
    ("How many cities did we visit since July 2023?", [("paris", {"key": "Paris"}), ("lisbon", {"key": "Lisbon"})],
     {"evidence_complete": True}, "computed", 1, None),  # open window
    ("How many cities did we visit before 2024?", [("paris", {"key": "Paris"}), ("lisbon", {"key": "Lisbon"})],
     {"evidence_complete": True}, "computed", 2, None),  # open window, the other side
    ("Which city did we visit first?", [("lisbon", {"label": "Lisbon"}), ("paris", {"label": "Paris"})],
     {"evidence_complete": True}, "computed", "Paris", None),
    ("Which city did we visit first?", [("paris", {"label": "Paris"}), ("rome", {"label": "Rome"})], {},
     "fallback", None, None),  # a tie at the top
    ("In what order did we visit them?", [("lisbon", {"label": "Lisbon"}), ("job", {"label": "job"}),
                                          ("paris", {"label": "Paris"})],
     {"evidence_complete": True}, "computed", ["Paris", "Lisbon", "job"], None),
    ("Where do I currently live?", [("city_new", {"key": "city", "value": "Madrid"}),
                                    ("city_old", {"key": "Berlin", "value": "Berlin"})], {}, "fallback", None, None),
    ("Where does the user currently live?", [("city_old", {"key": "live", "label": "Berlin"}),
                                             ("city_new", {"key": "moved", "label": "Madrid"})],
     {"operation": "latest_state", "evidence_complete": True}, "computed", None, None),
]


@pytest.mark.parametrize("question,ops,extra,status,value,unit", CASES,
                         ids=[f"{i}-{c[0][:30]}" for i, c in enumerate(CASES)])
def test_compute_case_table(world, question, ops, extra, status, value, unit):
    call, ref, _ = world
    out = call("trove_compute", question=question, operands=[ref(name, **fields) for name, fields in ops], **extra)
    assert out["status"] == status, out
    if status == "fallback":
        assert out["answer"] is None and out["next_path"] == "evidence_only" and out["reason"] and out["next_step"]
        return
    if isinstance(value, (int, float)):
        assert out["answer"]["value"] == pytest.approx(value, abs=1e-3)
        assert out["answer"]["unit"] == unit
    elif value is not None:
        assert out["answer"]["value"] == value
    assert out["trace"] and out["provenance"]["model_calls"] == 0


def test_a_date_difference_trace_can_be_redone_by_hand(world):
    call, ref, _ = world
    out = call("trove_compute", question="How many days between the job and the migration?",
               operands=[ref("job"), ref("migration")], candidate_answer="45 days")
    steps = [s for s in out["trace"] if s["step"] == "arithmetic"]
    assert steps[0]["expression"] == "2024-04-17 - 2024-03-03 = 45 days"
    assert [s["expression"] for s in out["trace"] if s["step"] == "date"] == ["on 3 March 2024", "on 17 April 2024"]
    assert out["candidate_verification"]["agrees"] is True


@pytest.mark.parametrize("candidate,agrees", [("45 days", True), ("46 days", False), ("about 6 weeks", True),
                                              ("two months", False), ("no idea", None)])
def test_candidate_answers_are_checked_in_their_own_unit(world, candidate, agrees):
    call, ref, _ = world
    out = call("trove_compute", question="How long between the job and the migration?",
               operands=[ref("job"), ref("migration")], candidate_answer=candidate)
    assert out["candidate_verification"]["agrees"] is agrees, out["candidate_verification"]


def test_an_undated_quote_is_dated_by_its_observation_day_and_says_so(world):
    call, ref, rows = world
    out = call("trove_compute", question="How many days between adopting the dog and finishing the migration?",
               operands=[ref("dog"), ref("migration")])
    assert out["status"] == "computed"
    dates = {s["operand"]: s for s in out["trace"] if s["step"] == "date"}
    assert dates[1]["source"] == "observed_at"
    assert dates[1]["date"] == datetime.fromtimestamp(rows["dog"].created_at, UTC).date().isoformat()


@pytest.mark.parametrize("name,extra,reason", [
    ("two_dates", {}, "names 2 times"),
    ("vague", {}, "does not pin a date down"),
    ("job", {"date": "2024-03-04"}, "neither written in the quote nor resolved"),
])
def test_dates_that_the_quote_does_not_settle_fail_closed(world, name, extra, reason):
    call, ref, _ = world
    out = call("trove_compute", question="How many days between these?", operands=[ref(name, **extra),
                                                                                     ref("migration")])
    assert out["status"] == "fallback" and reason in out["rejected_operands"][0]["reason"]


def test_a_given_date_written_differently_grounds_through_the_resolver(world):
    call, ref, _ = world
    out = call("trove_compute", question="How many days between these?",
               operands=[ref("job", date="2024-03-03"), ref("migration", date="17 April 2024")])
    assert out["status"] == "computed" and out["answer"]["value"] == 45


def _mutated(ref, **change):
    return {**ref, **change}


@pytest.mark.parametrize("mutation,reason", [
    (lambda r: _mutated(r, span_start=r["span_start"] + 1), "quote is not the stored text"),
    (lambda r: _mutated(r, quote=r["quote"].replace("$20", "$25")), "quote is not the stored text"),
    (lambda r: _mutated(r, content_sha256="a" * 64), "stale or edited"),
    (lambda r: _mutated(r, value=25), "value 25 is not written in the quote"),
    (lambda r: _mutated(r, unit="EUR"), "not a value in 'EUR'"),
    (lambda r: _mutated(r, unit="furlongs"), "unknown unit"),
    (lambda r: _mutated(r, store_id=10_000), "not stored"),
    (lambda r: {"assertion_id": "a1"}, "assertions are disabled"),
    (lambda r: "trove:not-a-ref", "not a ref"),
])
def test_every_grounding_failure_names_its_reason(world, mutation, reason):
    call, ref, _ = world
    bad = mutation(ref("shoes_usd"))
    out = call("trove_compute", question="How much did I spend in total?", operands=[bad, ref("hat_usd")])
    assert out["status"] == "fallback" and out["answer"] is None
    assert [r["operand"] for r in out["rejected_operands"]] == [1]
    assert reason in out["rejected_operands"][0]["reason"], out["rejected_operands"]


def test_a_ref_from_an_ignored_session_is_refused(runtime):
    runtime.filters = SessionFilters.build(ignore=["scratch-*"])
    ids = runtime.store.append(SessionKey("scratch-1"), [dict(user("The hat cost $15."), timestamp=T0)])
    ids += runtime.store.append(SessionKey("s1"), [dict(user("The shoes cost $20."), timestamp=T0)])
    ctx = ToolContext(runtime, SessionKey("s1"))
    ops = [make_ref(runtime.store.get(i), 0, 17).to_dict() for i in ids]
    out = json.loads(dispatch(ctx, "trove_compute", {"question": "How much in total?", "operands": ops}))
    assert out["status"] == "fallback"
    assert "ignored" in out["rejected_operands"][0]["reason"] and out["rejected_operands"][0]["operand"] == 1


def test_a_ref_to_a_deleted_row_is_refused(world, runtime):
    call, ref, rows = world
    cited = ref("hat_usd")
    with runtime.db.transaction() as conn:  # what retention / doctor clean do to a row
        conn.execute("DELETE FROM messages WHERE store_id=?", (rows["hat_usd"].store_id,))
    out = call("trove_compute", question="How much in total?", operands=[ref("shoes_usd"), cited])
    assert out["status"] == "fallback" and "not stored" in out["rejected_operands"][0]["reason"]


def test_a_value_the_quote_does_not_single_out_fails_closed(world):
    call, ref, _ = world
    out = call("trove_compute", question="How much more?", operands=[ref("run_km"), ref("shoes_usd")],
               operation="difference")
    assert out["status"] == "fallback" and "unit mismatch" in out["reason"]


@pytest.mark.parametrize("question,reason", [
    ("What is the total difference?", "both a total"),
    ("Tell me about the shoes.", "no supported operation"),
])
def test_ambiguous_or_unsupported_questions_fail_closed_with_a_next_step(world, question, reason):
    call, ref, _ = world
    out = call("trove_compute", question=question, operands=[ref("shoes_usd"), ref("hat_usd")])
    assert out["status"] == "fallback" and reason in out["reason"] and out["next_step"]
    assert out["plan"] is None


@pytest.mark.parametrize("args,error", [
    ({"question": "total?", "operands": []}, "1-50"),
    ({"question": "total?", "operands": [{"store_id": 1, "span_start": 0, "span_end": 1}] * 51}, "at most 50"),
    ({"question": "", "operands": ["trove:1:0-1"]}, "must not be empty"),
    ({"question": "total?", "operands": [7]}, "must be an object"),
])
def test_malformed_calls_are_refused(world, args, error):
    call, _, _ = world
    out = call("trove_compute", **args)
    assert error in out["error"]


def test_compute_never_calls_the_model(runtime):
    calls = []
    engine = make_engine(runtime, complete=lambda *a: calls.append(a) or "x")
    ids = runtime.store.append(SessionKey("s1"), [dict(user("The hat cost $15."), timestamp=T0)])
    ref = make_ref(runtime.store.get(ids[0]), 0, 17).to_dict()
    out = json.loads(engine.handle_tool_call("trove_compute", {"question": "How much in total?", "operands": [ref]},
                                             messages=[]))
    assert out["status"] == "partial", out
    assert out["answer"]["value"] == 15 and calls == []


def test_question_date_relative_window_needs_question_date(world):
    call, ref, _ = world
    out = call("trove_compute", question="How many cities did we visit last year?",
               operands=[ref("paris", key="Paris")], operation="date_filter")
    assert out["status"] == "fallback" and "question_date" in out["reason"]
    out = call("trove_compute", question="How many cities did we visit last year?",
               operands=[ref("paris", key="Paris")], question_date="2024-02-01T00:00:00Z")
    assert out["status"] == "partial" and out["answer"]["value"] == 1

