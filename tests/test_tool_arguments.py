"""Numeric arguments of every tool, called the way a model calls them: through ``tools.dispatch``.

NaN, the infinities (which Python's json module reads from ``Infinity``/``NaN``), numbers past
2^53 and their string spellings, in every number, count, budget, id, offset and time argument
of all 15 tools, at the top level and nested, get a validation error that names the argument
and says what it accepts - never a caught internal failure. Also: the time forms
``question_date`` and the other time arguments accept, in one table.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from conftest import make_config, make_engine

from hermes_trove import schemas
from hermes_trove.refs import make_ref
from hermes_trove.runtime import build_runtime
from hermes_trove.state import contract
from hermes_trove.state.assertion_store import AssertionStore
from hermes_trove.store import SessionKey
from hermes_trove.toolkit import MAX_SAFE_INTEGER, TIME_MAX, TIME_MIN, ToolError, parse_time, question_date_arg
from hermes_trove.tools import TOOLS, TOOLS_BY_NAME, dispatch

T0 = datetime(2026, 5, 4, 9, tzinfo=UTC).timestamp()
INF = float("inf")
# JSON numbers: Python's json reads Infinity, -Infinity and NaN as floats; ints may be any size.
BAD_NUMBERS = (INF, -INF, float("nan"), 1e18, 10**30, -(10**30))
# The same values spelled as strings, as a model also writes them.
BAD_TEXTS = ("Infinity", "-Infinity", "NaN", "1e18", str(10**30))


@dataclass
class World:
    ctx: Any
    store_id: int
    node_id: int
    ref: dict[str, Any]
    assertion_id: str
    retrieval_id: str


@pytest.fixture
def world(tmp_path, monkeypatch) -> World:
    monkeypatch.setattr("hermes_trove.temporal.rollups.schedule", lambda *a, **k: None)
    runtime = build_runtime(make_config(tmp_path, assertions_enabled=True, adaptive_retrieval_enabled=True))
    engine = make_engine(runtime)
    ids = runtime.store.append(SessionKey("s1"), [
        {"role": "user", "content": "I live in Berlin and the shoes cost $20.", "timestamp": T0},
        {"role": "user", "content": "The hat cost $15.", "timestamp": T0 + 60}])
    node = runtime.dag.add_leaf("s1", "leaf: Berlin, shoes and a hat", ids, token_count=10, source_token_count=20,
                                earliest_at=T0, latest_at=T0 + 60)
    row = runtime.store.get(ids[0])
    store = AssertionStore(runtime.db)
    store.ensure()
    answer = {"assertions": [{"store_id": row.store_id, "quote": "I live in Berlin", "subject": "user:self",
                              "predicate": "lives_in", "value": "Berlin", "kind": "fact", "confidence": 0.9}]}
    candidates = contract.parse_answer(json.dumps(answer), {row.store_id: row}).candidates
    store.add(candidates)
    ctx = engine.tool_context()
    started = json.loads(dispatch(ctx, "trove_retrieve", {
        "action": "start", "question": "where do I live?", "identity": {"intent_type": "lookup"},
        "requirements": [{"slot_id": "city", "description": "the city", "minimum_refs": 1}]}))
    return World(ctx, row.store_id, node, make_ref(row, 0, len(row.content)).to_dict(), candidates[0].assertion_id,
                 started["retrieval_id"])


Base = Callable[[World], dict[str, Any]]
Path = tuple[str | int, ...]


def _q(**more: Any) -> Base:
    return lambda w: {"question": "How much did I spend in total?", **more}


# Each tool: (valid arguments, the numeric argument paths inside them). Top-level number and
# time parameters are read from the schemas (and checked to be listed here); nested ones are named.
CASES: dict[str, list[tuple[Base, list[Path]]]] = {
    "trove_grep": [(lambda w: {"query": "shoes"}, [("limit",), ("offset",), ("time_from",), ("time_to",)])],
    "trove_describe": [(lambda w: {}, [("node_id",)])],
    "trove_expand": [
        (lambda w: {"store_id": w.store_id}, [("store_id",), ("max_tokens",), ("content_offset",)]),
        (lambda w: {"node_id": w.node_id}, [("node_id",), ("source_offset",), ("source_limit",)]),
    ],
    "trove_expand_query": [(lambda w: {"prompt": "where do I live?", "node_ids": [w.node_id]},
                            [("node_ids", 0), ("max_results",), ("max_tokens",), ("context_max_tokens",)])],
    "trove_load_session": [(lambda w: {"session_id": "s1"},
                            [("after_store_id",), ("limit",), ("max_content_chars",), ("time_from",), ("time_to",)])],
    "trove_status": [(lambda w: {"limit": 1}, [("limit",)])],  # takes none: checked before any handler
    "trove_inspect": [(lambda w: {}, [("limit",)])],
    "trove_doctor": [(lambda w: {"limit": 1}, [("limit",)])],
    "trove_recall": [(lambda w: {"query": "shoes"}, [("limit",), ("scope_bias",), ("since",), ("before",)])],
    "trove_query_state": [(lambda w: {"subject_key": "user:self"}, [("as_of",), ("limit",)])],
    "trove_compute": [
        (lambda w: _q(operands=[dict(w.ref, value=20)])(w),
         [("question_date",), ("operands", 0, "value"), ("operands", 0, "store_id"), ("operands", 0, "span_start"),
          ("operands", 0, "span_end")]),
    ],
    "trove_compile_evidence": [
        (lambda w: _q(proposal={"selections": [{"claim_id": "a", "exact_ref": dict(w.ref)}]},
                      budgets={"max_quote_chars": 100, "response_char_cap": 8000},
                      coverage={"query": "shoes", "session_scope": "all", "max_candidates": 5})(w),
         [("question_date",), ("budgets", "max_quote_chars"), ("budgets", "response_char_cap"),
          ("coverage", "max_candidates"), ("proposal", "selections", 0, "exact_ref", "store_id"),
          ("proposal", "selections", 0, "exact_ref", "span_end")]),
    ],
    "trove_evidence_pack": [
        (lambda w: _q(baseline_refs=[dict(w.ref)],
                      budgets={k: 5 for k in ("max_refs", "max_per_session", "max_per_date")})(w),
         [("question_date",), ("budgets", "max_refs"), ("budgets", "max_per_session"), ("budgets", "max_per_date"),
          ("budgets", "max_quote_chars"), ("budgets", "repair_window_chars"), ("baseline_refs", 0, "store_id"),
          ("baseline_refs", 0, "span_start")]),
    ],
    "trove_retrieve": [
        (lambda w: {"action": "start", "question": "where do I live?", "identity": {"intent_type": "lookup"},
                    "requirements": [{"slot_id": "city", "description": "the city", "minimum_refs": 1}]},
         [("question_date",), ("requirements", 0, "minimum_refs"), ("identity", "window_start")]),
        (lambda w: {"action": "search", "retrieval_id": w.retrieval_id, "missing_slot": "city",
                    "tool": "trove_recall", "tool_args": {"query": "Berlin"}},
         [("tool_args", "limit"), ("tool_args", "since")]),
    ],
    "trove_recent": [(lambda w: {"period": "yesterday"}, [("limit",)])],
}
# Arguments that take no text: their string spellings are refused by the central check alone.
NUMBERS_ONLY = {("trove_status", ("limit",)), ("trove_doctor", ("limit",)),
                ("trove_compute", ("operands", 0, "value")),  # a text value is a value written in the quote
                ("trove_retrieve", ("identity", "window_start"))}
# A string spelling that is finite: recall's scope_bias (retrieval/recall.py) clamps it into 0..1.
CLAMPED_TEXTS = {("trove_recall", ("scope_bias",), "1e18"), ("trove_recall", ("scope_bias",), str(10**30))}


def _numeric_parameters(schema: dict[str, Any]) -> set[str]:
    out = set()
    for name, prop in schema["parameters"]["properties"].items():
        item_type = prop.get("items", {}).get("type")
        if prop["type"] in ("integer", "number") or item_type == "integer" or "Unix seconds" in prop["description"]:
            out.add(name)
    return out


def test_the_table_covers_every_tool_and_every_top_level_number_or_time():
    assert sorted(CASES) == sorted(t.name for t in TOOLS)
    for tool in TOOLS:
        listed = {path[0] for _, paths in CASES[tool.name] for path in paths if len(path) == 1 or path[1] == 0}
        assert _numeric_parameters(dict(tool.schema)) <= listed, tool.name


def _set(args: dict[str, Any], path: Path, value: Any) -> dict[str, Any]:
    out = json.loads(json.dumps(args))
    target: Any = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out


def _refusal(out: dict[str, Any]) -> str | None:
    """The top-level error, or the reason the one bad item (operand, ref, selection) was refused."""
    if "error" in out:
        return str(out["error"])
    for key in ("rejected_operands", "rejected", "selections"):
        for item in out.get(key) or []:
            if item.get("reason") and item.get("status", "rejected") == "rejected":
                return str(item["reason"])
    return None


def _params() -> list[Any]:
    out = []
    for tool, cases in CASES.items():
        for n, (base, paths) in enumerate(cases):
            for path in paths:
                values = BAD_NUMBERS + (() if (tool, path) in NUMBERS_ONLY else BAD_TEXTS)
                for value in values:
                    if (tool, path, value) in CLAMPED_TEXTS:
                        continue
                    label = f"{tool}-{n}-{'.'.join(map(str, path))}-{value!r}"[:120]
                    out.append(pytest.param(tool, base, path, value, id=label))
    return out


@pytest.mark.parametrize(("tool", "base", "path", "value"), _params())
@pytest.mark.parametrize("as_text", [False, True], ids=["parsed", "json-text"])
def test_a_bad_number_in_any_argument_is_a_named_validation_error(world, caplog, tool, base, path, value, as_text):
    args = _set(base(world), path, value)
    sent = json.dumps(args) if as_text else args  # json.dumps writes Infinity/NaN as the host would pass them
    with caplog.at_level(logging.WARNING, logger="hermes_trove"):
        out = json.loads(dispatch(world.ctx, tool, sent))
    reason = _refusal(out)
    assert reason is not None, (tool, path, value, out)
    leaf = next(str(p) for p in reversed(path) if isinstance(p, str))
    assert leaf in reason, (tool, path, value, reason)
    assert " failed: " not in reason and "Traceback" not in reason
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [r.getMessage() for r in caplog.records]


def test_the_valid_base_calls_are_not_errors(world):
    """The bases above are good calls, so each refusal comes from the bad value alone."""
    for tool, cases in CASES.items():
        for base, _ in cases:
            if tool in ("trove_status", "trove_doctor", "trove_expand_query"):
                continue  # the first two take no arguments; the third needs a model
            args = base(world)
            if tool == "trove_retrieve" and args["action"] == "search":
                continue  # a search spends one of the episode's three rounds
            out = json.loads(dispatch(world.ctx, tool, args))
            assert "error" not in out, (tool, out)


@pytest.mark.parametrize(("value", "message"), [
    ({"limit": INF}, "limit must be a finite number, got Infinity"),
    ({"limit": float("nan")}, "limit must be a finite number, got NaN"),
    ({"limit": 10**30}, f"limit is out of range: an integer of 31 digits; numbers in tool arguments must lie "
                        f"between -{MAX_SAFE_INTEGER} and {MAX_SAFE_INTEGER}"),
    ({"limit": "1e18"}, "limit is out of range: 1e+18; it must be an integer from 1 to 200"),
    ({"limit": "Infinity"}, "limit must be an integer from 1 to 200"),
    ({"limit": 2.5}, "limit must be an integer from 1 to 200"),
    ({"limit": 0}, "limit must be an integer from 1 to 200"),
    ({"time_from": 1e15}, "time_from=1000000000000000.0 is out of range: accepted 1000-01-01T00:00:00Z to "
                          "8999-12-31T23:59:59Z"),
    ({"time_from": "NaN"}, "time_from must be unix seconds or an ISO 8601 time"),
])
def test_messages_name_the_argument_and_what_it_accepts(world, value, message):
    out = json.loads(dispatch(world.ctx, "trove_grep", {"query": "shoes", **value}))
    assert message in out["error"], out["error"]
    assert len(out["error"]) < 300


def test_a_count_above_its_cap_is_still_clamped_and_reported(world):
    out = json.loads(dispatch(world.ctx, "trove_grep", {"query": "shoes", "limit": 10**6}))
    assert out["limit"] == 200 and out["limit_clamped_from"] == 10**6
    pack = json.loads(dispatch(world.ctx, "trove_evidence_pack", {
        "question": "q", "baseline_refs": [world.ref], "budgets": {"max_refs": 1e6, "max_quote_chars": "100"}}))
    assert pack["budgets"]["max_refs"] == 50 and pack["max_refs_clamped_from"] == 1e6
    assert pack["budgets"]["max_quote_chars"] == 100 and "max_quote_chars_clamped_from" not in pack


# -- time arguments -------------------------------------------------------------------------
NOON = datetime(2026, 12, 1, 10, tzinfo=UTC).timestamp()
MIDNIGHT = datetime(2026, 12, 1, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(("raw", "expected"), [
    ("2026-12-01", MIDNIGHT),
    ("2026-12-01Z", MIDNIGHT),
    ("2026-12-01z", MIDNIGHT),
    ("2026-12-01+02:00", MIDNIGHT - 7200),
    ("2026-12-01T10:00:00", NOON),
    ("2026-12-01T10:00:00Z", NOON),
    ("2026-12-01T10:00:00+02:00", NOON - 7200),
    ("2026-12-01T10:00:00.000-01:30", NOON + 5400),
    ("2026-12-01 10:00:00Z", NOON),
    (" 2026-12-01T10:00Z ", NOON),
    (NOON, NOON),
    (int(NOON), NOON),
    (str(int(NOON)), NOON),
    (None, None),
    ("", None),
])
def test_question_date_takes_dates_and_times_with_or_without_a_timezone(raw, expected):
    assert question_date_arg({"question_date": raw}) == expected


@pytest.mark.parametrize(("raw", "expected"), [
    ("2026-12-01Z", MIDNIGHT), ("2026-12-01+02:00", MIDNIGHT - 7200), ("2026-12-01T10:00:00Z", NOON),
])
def test_other_times_take_a_date_with_its_timezone(raw, expected):
    assert parse_time(raw, "time_from") == expected


@pytest.mark.parametrize(("raw", "message"), [
    ("2026-12-01", "time_from='2026-12-01' has no timezone; add one, e.g. 2026-12-01Z or 2026-12-01+02:00"),
    ("2026-12-01T10:00:00", "has no timezone; add one, e.g. 2026-12-01T10:00:00Z"),
    ("2026-13-01Z", "time_from='2026-13-01Z' is no such date or time (month must be in 1..12)"),
    ("2023-02-30T00:00:00Z", "time_from='2023-02-30T00:00:00Z' is no such date or time (day is out of range for"),
    ("2023-02-29", "time_from='2023-02-29' is no such date or time (day is out of range for month)"),
    ("2024-01-01T25:00:00+02:00", "is no such date or time (hour must be in 0..23)"),
    ("2024-01-01T00:00:00+25:00", "is no such date or time (offset must be a timedelta strictly between"),
    ("2026-12-01 at noon", "is not unix seconds or an ISO 8601 time"),
    ("yesterday", "is not unix seconds or an ISO 8601 time"),
    ("0999-12-31T00:00:00Z", "is out of range: accepted 1000-01-01T00:00:00Z"),
    (1e18, "is out of range"),
    (INF, "must be unix seconds or an ISO 8601 time with a timezone"),
    ("-Infinity", "got -Infinity"),
    (True, "got a boolean"),
    ([1], "got list"),
])
def test_bad_times_are_refused_with_the_fix(raw, message):
    with pytest.raises(ToolError, match=None) as caught:
        parse_time(raw, "time_from")
    assert message in str(caught.value), str(caught.value)


def test_the_suggested_fix_for_a_naive_time_is_itself_accepted():
    for naive in ("2026-12-01", "2026-12-01T10:00:00"):
        with pytest.raises(ToolError) as caught:
            parse_time(naive, "time_from")
        fixed = str(caught.value).split("e.g. ")[1].split(" or ")[0]
        assert parse_time(fixed, "time_from") is not None


def test_the_time_range_edges_are_accepted():
    assert parse_time(TIME_MIN.timestamp(), "t") == TIME_MIN.timestamp()
    assert parse_time(TIME_MAX.isoformat(), "t") == TIME_MAX.timestamp()


@pytest.mark.parametrize("tool", ["trove_compute", "trove_evidence_pack", "trove_compile_evidence", "trove_retrieve"])
@pytest.mark.parametrize("question_date", ["2026-12-01", "2026-12-01Z", "2026-12-01T10:00:00", "2026-12-01T10:00:00Z",
                                           "2026-12-01T10:00:00+02:00"])
def test_every_tool_taking_question_date_accepts_its_forms(world, tool, question_date):
    base = {"trove_compute": _q(operands=[dict(world.ref, value=20)]),
            "trove_evidence_pack": _q(baseline_refs=[world.ref]),
            "trove_compile_evidence": _q(proposal={"selections": [{"claim_id": "a", "exact_ref": world.ref}]}),
            "trove_retrieve": CASES["trove_retrieve"][0][0]}[tool](world)
    out = json.loads(dispatch(world.ctx, tool, dict(base, question_date=question_date)))
    assert "error" not in out, out


# The documented bounds (docs/retrieval-tools.md): the evidence tools take 4,000 characters, trove_retrieve 4,096.
@pytest.mark.parametrize(("tool", "limit"), [("trove_compute", 4000), ("trove_evidence_pack", 4000),
                                             ("trove_compile_evidence", 4000), ("trove_retrieve", 4096)])
def test_every_tool_taking_a_question_bounds_it_by_its_own_limit(world, tool, limit):
    base = {"trove_compute": _q(operands=[dict(world.ref, value=20)]),
            "trove_evidence_pack": _q(baseline_refs=[world.ref]),
            "trove_compile_evidence": _q(proposal={"selections": [{"claim_id": "a", "exact_ref": world.ref}]}),
            "trove_retrieve": CASES["trove_retrieve"][0][0]}[tool](world)
    for fits in ("q" * limit, "  " + "q" * limit + "\n"):  # the bound holds after stripping
        assert "error" not in json.loads(dispatch(world.ctx, tool, dict(base, question=fits))), (tool, len(fits))
    out = json.loads(dispatch(world.ctx, tool, dict(base, question="q" * (limit + 1))))
    assert out["error"] == f"question is longer than {limit} characters", out
    for missing in ("", "   ", None):
        args = dict(base, question=missing) if missing is not None else {k: v for k, v in base.items()
                                                                         if k != "question"}
        assert "question" in json.loads(dispatch(world.ctx, tool, args))["error"], (tool, missing)


def test_question_date_is_described_once_in_the_schemas():
    described = {s["name"] for s in (schemas.TROVE_COMPUTE, schemas.TROVE_EVIDENCE_PACK, schemas.TROVE_COMPILE_EVIDENCE,
                                     schemas.TROVE_RETRIEVE) if "question_date" in s["parameters"]["properties"]}
    assert len(described) == 4
    assert TOOLS_BY_NAME["trove_compute"].schema["parameters"]["properties"]["question_date"] is \
        schemas.TROVE_RETRIEVE["parameters"]["properties"]["question_date"]
    assert "2026-12-01" in schemas.TROVE_COMPUTE["parameters"]["properties"]["question_date"]["description"]


def _schema_minimums() -> list[Any]:
    out = []
    for tool in TOOLS:
        base = CASES[tool.name][0][0]
        for name, prop in tool.schema["parameters"]["properties"].items():
            if prop.get("type") == "integer" and "minimum" in prop:
                out.append(pytest.param(tool.name, base, name, prop["minimum"], id=f"{tool.name}-{name}"))
    return out


@pytest.mark.parametrize(("tool", "base", "name", "minimum"), _schema_minimums())
def test_the_schema_minimum_of_each_integer_is_what_the_tool_accepts(world, tool, base, name, minimum):
    """A model that trusts the advertised ``minimum`` is never refused for it, and one below it is."""
    at = _refusal(json.loads(dispatch(world.ctx, tool, _set(base(world), (name,), minimum))))
    assert at is None or f"{name} " not in at, (tool, name, minimum, at)
    below = _refusal(json.loads(dispatch(world.ctx, tool, _set(base(world), (name,), minimum - 1))))
    assert below is not None and name in below, (tool, name, minimum - 1, below)
