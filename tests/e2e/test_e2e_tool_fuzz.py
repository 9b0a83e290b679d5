"""Bad tool arguments through the real host: the fake model calls trove tools with seeded wrong
arguments (a wrong type, an enum miss, a number under its minimum, a missing required argument,
an unknown key, a far date, broken full-text syntax); the host runs every call, hands the model a
JSON object whose error names the argument, and the session goes on to a normal answer.
``tests/test_tool_fuzz.py`` runs the same properties in-process, with many more examples."""
from __future__ import annotations

import json
import random
from typing import Any

import pytest

from .harness import chat_requests

pytestmark = pytest.mark.e2e

SEED = 20260
# (tool, arguments, the argument the error must name); a few drawn per run from the seed.
CASES: list[tuple[str, dict[str, Any], str]] = [
    ("trove_grep", {"query": "kiln", "limit": "seven"}, "limit"),
    ("trove_grep", {"query": "kiln", "sort": "bogus"}, "sort"),
    ("trove_grep", {"query": "kiln", "time_from": "99999-01-01T00:00:00Z"}, "time_from"),
    ("trove_grep", {"limit": 3}, "query"),
    ("trove_expand", {"store_id": 0}, "store_id"),
    ("trove_expand", {"node_id": 1, "part": {"a": "b"}}, "part"),
    ("trove_load_session", {"session_id": "s", "limit": -4}, "limit"),
    ("trove_recall", {"query": "kiln", "include": "everything"}, "include"),
    ("trove_recent", {"period": "10000000000000000000000-01-01"}, "period"),
    ("trove_query_state", {"subject_key": ["user:self"]}, "subject_key"),
    ("trove_compute", {"question": "how many?", "operands": "none"}, "operands"),
    ("trove_inspect", {"limit": 0}, "limit"),
]
BROKEN_QUERIES = ['"', "*", "NEAR(", "AND OR", "(((", "a OR"]


def test_wrong_tool_arguments_through_the_host_get_named_errors_and_the_session_goes_on(make_home, fake_llm):
    rng = random.Random(SEED)
    cases = rng.sample(CASES, 6)
    queries = rng.sample(BROKEN_QUERIES, 2)
    turns = [f"try this <<tool:{name} {json.dumps(args)}>>" for name, args, _ in cases]
    turns += [f"search <<tool:trove_grep {json.dumps({'query': q})}>>" for q in queries]
    turns.append("thanks, that is all")
    home = make_home()
    start = len(fake_llm.requests())
    result = home.run_driver({"turns": turns, "max_iterations": 4}, "tool-fuzz", timeout=600)
    assert result["returncode"] == 0, result["stderr"][-3000:]
    assert "Traceback" not in result["stderr"], result["stderr"][-3000:]
    replies = tool_replies(fake_llm.requests()[start:])
    for name, args, named in cases:
        body = replies.get((name, json.dumps(args, sort_keys=True)))
        assert body is not None, (name, args, sorted(replies))
        assert isinstance(body.get("error"), str) and named in body["error"], (name, args, body)
        assert "failed" not in body["error"], body
    for q in queries:  # broken full-text syntax is read as words, never an error of the index
        body = replies[("trove_grep", json.dumps({"query": q}, sort_keys=True))]
        assert "failed" not in str(body.get("error", "")), body
    assert len(result["turns"]) == len(turns) and result["turns"][-1]["final"], result["turns"][-1:]  # it went on


def tool_replies(requests: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Each trove tool call the host ran, by (name, arguments), to the JSON object it handed the model."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for body in chat_requests(requests):
        calls = {c["id"]: c["function"] for m in body["messages"] if m.get("role") == "assistant"
                 for c in m.get("tool_calls") or []}
        for m in body["messages"]:
            call = calls.get(m.get("tool_call_id")) if m.get("role") == "tool" else None
            if call is None or not call["name"].startswith("trove_"):
                continue
            content = m.get("content")
            reply = json.loads(content) if isinstance(content, str) else content
            assert isinstance(reply, dict), (call, content)
            out[(call["name"], json.dumps(json.loads(call["arguments"]), sort_keys=True))] = reply
    return out
