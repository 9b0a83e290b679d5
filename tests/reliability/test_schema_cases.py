"""Every tool x every hostile value its schema invites, through ``TroveEngine.handle_tool_call``.

The cases are a table, not a fuzzer: each parameter of each schema gets the values its declared
type invites (wrong types, nested objects, huge strings and lists, negative, zero, huge, NaN and
infinite numbers, booleans for ints, empty and odd Unicode, FTS5 syntax), put into arguments
that are otherwise valid so the call reaches the handler. Each call must answer valid JSON under
the tool's cap, with an error the argument check or the handler wrote (never a caught internal
failure), and a read-only tool must leave the store as it was. The slowest call is printed.
"""
from __future__ import annotations

import json
import sqlite3
import threading
import time
from typing import Any

import pytest
from conftest import background_passes_finish, make_config, make_engine, with_search_path

from hermes_trove.refs import make_ref
from hermes_trove.runtime import build_runtime
from hermes_trove.store import SessionKey
from hermes_trove.tools import TOOLS, TOOLS_BY_NAME

pytestmark = pytest.mark.reliability

T0 = 1_780_000_000.0
# Tools that may write: trove_retrieve keeps its episodes; every other tool only reads.
WRITERS = {"trove_retrieve"}

TEXTS: dict[str, Any] = {
    "empty": "", "space": "   ", "nul": "a\x00b", "surrogate": "x\ud800y", "rtl": "\u202e\u200fabc\u200b",
    "combining": "e\u0301" * 50, "emoji": "\U0001F600" * 20, "quote": '"', "quotes": '"shoes', "near": "NEAR(",
    "near_full": "NEAR(shoes hat, 2)", "star": "*", "star_word": "*shoes", "and_or": "AND OR", "not": "NOT",
    "caret": "^shoes", "column": "content:shoes", "column_bad": "nosuch:shoes", "braces": "{shoes hat}",
    "parens": "((shoes", "plus": "+shoes -hat", "colon": ":", "dots": "..", "nan": "NaN", "inf": "Infinity",
    "negative": "-1", "huge_number": "9" * 400, "long": "shoes " * 5000, "too_long": "x" * 40000,
    "sql": "'; DROP TABLE messages; --", "percent": "100%_\\", "newlines": "\n\r\t\f\v",
}
NUMBERS: dict[str, Any] = {
    "zero": 0, "negative": -1, "minus_huge": -(2**53 - 1), "huge": 2**53 - 1, "past_safe": 2**64,
    "nan": float("nan"), "inf": float("inf"), "neg_inf": float("-inf"), "fraction": 0.5, "true": True,
    "false": False, "text_number": "7", "text_word": "seven",
}
def nested(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = [value]
    return value


OTHERS: dict[str, Any] = {
    "null": None, "object": {"a": {"b": "c"}}, "list": ["x", 1], "empty_list": [], "empty_object": {},
    "deep": nested(20), "many_items": ["shoes"] * 4000,
    "list_of_objects": [{"store_id": 1}] * 60, "list_of_nulls": [None] * 60, "list_of_numbers": [float("nan"), -5],
}


def values_for(prop: dict[str, Any]) -> dict[str, Any]:
    """The hostile values one parameter's schema invites: every table for every type, so a string
    parameter gets numbers and objects too; enums also get near misses."""
    out = {**{f"text_{k}": v for k, v in TEXTS.items()}, **{f"num_{k}": v for k, v in NUMBERS.items()}, **OTHERS}
    if "enum" in prop:
        first = prop["enum"][0]
        out.update(enum_upper=first.upper(), enum_padded=f" {first} ", enum_other="bogus")
    items = prop.get("items", {})
    if "enum" in items:
        out.update(items_bogus=["bogus"], items_repeated=[items["enum"][0]] * 500)
    return out


def bases(w: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Arguments that work for each tool, so a hostile value in one parameter reaches the handler."""
    ref = w["ref"]
    question = "How much did I spend on shoes and the hat?"
    return {
        "trove_grep": {"query": "shoes"},
        "trove_describe": {"node_id": w["node_id"]},
        "trove_expand": {"store_id": w["store_id"]},
        "trove_expand_query": {"prompt": "what did the shoes cost?"},
        "trove_load_session": {"session_id": "s1"},
        "trove_status": {},
        "trove_inspect": {},
        "trove_doctor": {},
        "trove_recall": {"query": "shoes"},
        "trove_query_state": {"subject_key": "user:self"},
        "trove_compute": {"question": question, "operands": [dict(ref)]},
        "trove_compile_evidence": {"question": question,
                                   "proposal": {"selections": [{"claim_id": "a", "exact_ref": dict(ref)}]}},
        "trove_evidence_pack": {"question": question, "baseline_refs": [dict(ref)]},
        "trove_retrieve": {"action": "status", "retrieval_id": w["retrieval_id"]},
        "trove_recent": {"period": "last week"},
    }


def cases(backend: str) -> list[Any]:
    """(backend, tool, parameter, value name) for every parameter of every schema, plus whole-argument
    cases. On PostgreSQL only the texts (its own full-text and time parsing) and whole arguments."""
    out = []
    for tool in TOOLS:
        for param, prop in tool.schema["parameters"]["properties"].items():
            out.extend((backend, tool.name, param, name) for name in values_for(prop)
                       if backend == "sqlite" or name.startswith("text_"))
        out.extend((backend, tool.name, "*", name) for name in WHOLE)
    return out


WHOLE: dict[str, Any] = {
    "none": None, "text": "not json", "json_list": "[1, 2]", "json_cut": '{"query": "sho', "list": ["query"],
    "number": 7, "unknown_key": {"no_such_argument": 1}, "unknown_nested": {"zz": {"a": [1, {"b": None}]}},
    "odd_key": {"\u202equery": "shoes"}, "nan_text": '{"limit": NaN, "query": "x"}',
}


@pytest.fixture(scope="module")
def worlds(request, tmp_path_factory):
    """Each backend's world, built on first use and kept for the module (so the cases of both
    backends, in any order, share two stores)."""
    built: dict[str, dict[str, Any]] = {}
    teardown: list[Any] = []

    def get(backend: str) -> dict[str, Any]:
        if backend not in built:
            gen = build_world(backend, request, tmp_path_factory)
            built[backend] = next(gen)
            teardown.append(gen)
        return built[backend]

    yield get
    for gen in teardown:
        next(gen, None)


def build_world(backend: str, request: Any, tmp_path_factory: Any) -> Any:
    """One store with two messages, a leaf over them, an assertion and a retrieval episode."""
    tmp = tmp_path_factory.mktemp(backend)
    pg = watcher = None
    cfg = make_config(tmp, assertions_enabled=True, adaptive_retrieval_enabled=True, database_url="")
    schema = None
    threads = set(threading.enumerate())  # another module's leftovers: never waited on here
    if backend == "postgresql":
        import uuid

        import psycopg
        url = request.getfixturevalue("pg_url")
        schema = f"t_{uuid.uuid4().hex}"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        cfg = make_config(tmp, assertions_enabled=True, adaptive_retrieval_enabled=True,
                          database_url=with_search_path(url, schema, "public"))
        pg = psycopg.connect(cfg.database_url, autocommit=True)
    runtime = build_runtime(cfg)
    engine = make_engine(runtime, complete=lambda *a, **k: "The shoes cost $20.")
    ids = runtime.store.append(SessionKey("s1"), [
        {"role": "user", "content": "I live in Berlin and the shoes cost $20.", "timestamp": T0},
        {"role": "user", "content": "The hat cost $15.", "timestamp": T0 + 60}])
    runtime.store.settle(timeout_s=5.0)
    node = runtime.dag.add_leaf("s1", "leaf: Berlin, shoes and a hat", ids, token_count=10,
                                source_token_count=20, earliest_at=T0, latest_at=T0 + 60)
    row = runtime.store.get(ids[0])
    started = json.loads(engine.handle_tool_call("trove_retrieve", {
        "action": "start", "question": "where do I live?", "identity": {"intent_type": "lookup"},
        "requirements": [{"slot_id": "city", "description": "the city", "minimum_refs": 1}]}))
    background_passes_finish(threads)  # the session start's passes write; the cases must not race them
    if backend == "sqlite":
        watcher = sqlite3.connect(cfg.database_path)
    w = {"engine": engine, "watcher": watcher, "runtime": runtime, "store_id": row.store_id, "node_id": node,
         "ref": make_ref(row, 0, len(row.content)).to_dict(), "retrieval_id": started.get("retrieval_id", ""),
         "backend": backend, "cfg": cfg, "pg": pg, "slowest": (0.0, ""), "threads": threads}
    yield w
    print(f"\n{backend}: slowest call {w['slowest'][0]:.2f} s: {w['slowest'][1]}")
    for conn in (pg, watcher):
        if conn is not None:
            conn.close()
    if schema is not None:
        from conftest import drop_schema

        from hermes_trove.pgdb import close_connections
        close_connections()
        drop_schema(request.getfixturevalue("pg_url"), schema)


def fingerprint(w: dict[str, Any]) -> Any:
    """What changes with any write: SQLite's data_version as another connection sees it, or every
    table's rows on a server."""
    if w["backend"] == "sqlite":
        return {"data_version": w["watcher"].execute("PRAGMA data_version").fetchall()}  # all: no read left open
    conn = w["pg"]  # a search may refresh the server's term statistics under a lease: bookkeeping, not data
    tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                                         " AND tablename <> 'work_leases' ORDER BY 1")]
    rows = conn.execute(" UNION ALL ".join(f"(SELECT '{t}', md5(coalesce(string_agg(x::text, '|' ORDER BY x::text),"
                                           f" '')) FROM \"{t}\" x)" for t in tables)).fetchall()
    return dict(rows)


def settled_fingerprint(w: dict[str, Any]) -> Any:
    """``fingerprint`` once the background passes started since the world was built (an earlier case's,
    or those of the call just made) have ended: a write of one lands in its own case's window, never in a
    later case's."""
    background_passes_finish(w["threads"])
    return fingerprint(w)


@pytest.mark.parametrize(("backend_name", "tool", "param", "value"), cases("sqlite") + cases("postgresql"))
def test_a_hostile_value_gets_a_clear_answer_and_changes_nothing(worlds, backend_name, tool, param, value):
    world = worlds(backend_name)
    base = bases(world)[tool]
    if param == "*":
        args: Any = {**base, **WHOLE[value]} if isinstance(WHOLE[value], dict) else WHOLE[value]
    else:
        prop = TOOLS_BY_NAME[tool].schema["parameters"]["properties"][param]
        args = {**base, param: values_for(prop)[value]}
    background_passes_finish(world["threads"])  # an earlier case's background pass lands before the snapshot
    calling = set(threading.enumerate())
    before = fingerprint(world) if tool not in WRITERS else None
    started = time.perf_counter()
    out = world["engine"].handle_tool_call(tool, args)
    took = time.perf_counter() - started
    background_passes_finish(calling)  # what the call started in the background counts as its own writes
    if took > world["slowest"][0]:
        world["slowest"] = (took, f"{tool} {param}={value}")
    assert isinstance(out, str)
    out.encode("utf-8")
    body = json.loads(out)
    assert isinstance(body, dict)
    assert len(out) <= TOOLS_BY_NAME[tool].response_cap
    error = body.get("error")
    assert error is None or (isinstance(error, str) and error.strip()), body
    assert not (isinstance(error, str) and (f"{tool} failed" in error or "trove:" in error[:7])), error
    if before is not None:
        after = fingerprint(world)
        assert after == before, f"{tool} wrote to {sorted(t for t in after if after[t] != before.get(t))}"


@pytest.mark.parametrize("backend_name", ["sqlite", "postgresql"])
def test_the_fingerprint_sees_a_write(worlds, backend_name):
    world = worlds(backend_name)
    before = fingerprint(world)
    world["engine"].handle_tool_call("trove_retrieve", {"action": "abandon", "retrieval_id": world["retrieval_id"]})
    assert fingerprint(world) != before
