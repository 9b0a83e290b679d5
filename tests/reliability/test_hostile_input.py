"""Findings 2, 5 and 6: hostile arguments get a bounded, validated reply. How fast each one
comes is printed by bench/bench_bounds.py (hostile section); tests assert no wall-clock time."""
from __future__ import annotations

import json

import pytest
from conftest import make_engine, user

from hermes_trove.retrieval.query import build_match
from hermes_trove.tools import TOOLS, TOOLS_BY_NAME, dispatch

from .conftest import SHAPES, MiB, reply, string_parameters

BACKENDS = ("sqlite", "postgresql")  # every test here runs on the file and on a server

pytestmark = pytest.mark.reliability


@pytest.fixture
def eng(runtime):
    e = make_engine(runtime)
    e.ingest([user("the deploy key lives in /etc/keys; port 6543 for the pooler")] * 3)
    return e


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_mebibyte_of_each_shape_parses_to_at_most_32_terms(shape):
    text = SHAPES[shape](MiB)
    assert len(build_match(text).terms) <= 32


def test_a_run_of_32000_parens_parses_to_its_one_word():
    assert build_match("(" * 32000 + "x") == build_match("x")


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("tool", ["trove_grep", "trove_expand_query"])
def test_a_mebibyte_query_is_refused_briefly(eng, tool, shape):
    text = SHAPES[shape](MiB)
    for args in ({"query": text, "prompt": text}, json.dumps({"query": text, "prompt": text})):
        out = dispatch(eng.tool_context(), tool, args)
        assert len(out) < 2000 and "too long" in json.loads(out)["error"] or "too large" in out


@pytest.mark.parametrize("tool", [t.name for t in TOOLS])
def test_every_string_argument_of_every_tool_is_bounded_before_parsing(eng, tool):
    big = "(" * MiB
    for param in string_parameters(TOOLS_BY_NAME[tool]) or ["query"]:
        out = dispatch(eng.tool_context(), tool, {param: big})
        assert len(out) <= TOOLS_BY_NAME[tool].response_cap and len(out) < 2000, (tool, param)
        assert "error" in json.loads(out)


def test_oversized_raw_argument_text_is_refused_before_json_parsing(eng):
    out = reply(eng.tool_context(), "trove_grep", "[" * (2 * MiB))
    assert "too large" in out["error"]
    out = reply(eng.tool_context(), "trove_grep", "[" * 100_000)
    assert "nested too deeply" in out["error"]


def test_errors_never_echo_a_whole_argument(eng):
    # A 1 MiB invalid value used to come back as a 4.3 MB reply.
    for args in ({"limit": "x" * 30000}, {"session_scope": "y" * 30000}, {"query": "q", "time_from": "z" * 30000},
                 {"store_id": "w" * 30000, "include_exact_ref": "v" * 30000}):
        out = dispatch(eng.tool_context(), "trove_expand" if "store_id" in args else "trove_grep", args)
        assert len(out) < 1000, (args.keys(), len(out))
        assert "error" in json.loads(out)


def test_every_reply_goes_through_its_tools_cap_errors_included(eng, monkeypatch):
    tool = TOOLS_BY_NAME["trove_status"]

    def shouting(ctx, args):
        raise ValueError("boom " * 100_000)

    from hermes_trove import tools as tools_mod
    broken = tools_mod.Tool(tool.schema, shouting, tool.response_cap)
    monkeypatch.setitem(tools_mod.TOOLS_BY_NAME, "trove_status", broken)
    out = dispatch(eng.tool_context(), "trove_status", {})
    assert len(out) <= tool.response_cap and "ValueError" in json.loads(out)["error"]


def test_unknown_tool_names_are_truncated_in_the_reply(eng):
    out = dispatch(eng.tool_context(), "x" * MiB, {})
    assert len(out) < 1000 and "unknown tool" in out
    out = dispatch(eng.tool_context(), ["not", "a", "name"], {})  # type: ignore[arg-type]
    assert "unknown tool" in out


@pytest.mark.parametrize("value", [2**63, 2**64 + 5, 10**30, -(2**63) - 1, 1e300])
@pytest.mark.parametrize("tool, param", [("trove_expand", "node_id"), ("trove_expand", "store_id"),
                                         ("trove_describe", "node_id"), ("trove_grep", "limit")])
def test_ids_beyond_64_bits_are_validation_errors_not_internal_failures(eng, tool, param, value):
    # These raised OverflowError inside SQLite binding.
    out = reply(eng.tool_context(), tool, {param: value, "query": "key"})
    assert param == "limit" or "error" in out  # limit is clamped to its cap instead
    if "error" in out:
        assert "failed:" not in out["error"] and "OverflowError" not in out["error"], out
        assert len(json.dumps(out)) < 1000


@pytest.mark.parametrize("param", ["session_id", "source", "query", "session_scope"])
def test_lone_surrogates_are_validation_errors_and_never_echoed(eng, param):
    bad = "abc\ud800def"
    for tool in ("trove_grep", "trove_load_session", "trove_describe"):
        raw = dispatch(eng.tool_context(), tool, {param: bad, "query": "key"} if param != "query" else {param: bad})
        raw.encode("utf-8")
        out = json.loads(raw)
        assert "invalid Unicode" in out["error"], (tool, out)
        assert "\ud800" not in raw
    raw = dispatch(eng.tool_context(), "trove_grep", '{"query": "a\\udc80b"}')
    assert "invalid Unicode" in json.loads(raw)["error"]
