"""Computed evidence under the real host: two facts recalled with ``trove_grep``, their exact refs
handed to ``trove_compute``, and the computed answer in the request that follows.

Two early user turns state dated facts. The last turn asks the duration between them: the fake
model calls ``trove_grep``, turns the two whole-message hits into exact-ref operands (store_id,
span, quote) and calls ``trove_compute``; the host sends the tool result back in the next request,
and the fake model's final text quotes it.
"""
from __future__ import annotations

import json
from typing import Any

import pytest

from .fake_llm import grep_hits_as_operands
from .harness import chat_requests

FACT_A = "kickoff note: the orchard project kickoff happened on 3 March 2024."
FACT_B = "launch note: the orchard project launch happened on 17 April 2024."
GREP_ARGS = json.dumps({"query": "orchard project happened"})
QUESTION = (f"how many days between the orchard kickoff and launch? <<tool:trove_grep {GREP_ARGS}>> "
            "<<then:trove_compute>>")


@pytest.fixture(scope="module")
def compute_run(make_home, fake_llm) -> dict[str, Any]:
    home = make_home()
    start = len(fake_llm.requests())
    result = home.run_driver({"turns": [FACT_A, FACT_B, QUESTION], "max_iterations": 6}, "compute", timeout=600)
    return {"home": home, "result": result, "requests": fake_llm.requests()[start:]}


def test_the_fake_model_builds_operands_only_from_whole_message_hits():
    payload = {"results": [{"type": "message", "role": "user", "store_id": 2, "snippet": "b >>>x<<<"},
                           {"type": "message", "role": "user", "store_id": 1, "snippet": "a…"},
                           {"type": "message", "role": "user", "store_id": 3, "snippet": "c"}]}
    args = grep_hits_as_operands(payload)
    assert args is not None and [o["store_id"] for o in args["operands"]] == [2, 3]
    assert args["operands"][0] == {"store_id": 2, "span_start": 0, "span_end": 3, "quote": "b x"}


def _tool_results(body: dict[str, Any], name: str) -> list[dict[str, Any]]:
    ids = {c["id"] for m in body["messages"] if m.get("role") == "assistant" for c in m.get("tool_calls") or []
           if (c.get("function") or {}).get("name") == name}
    return [json.loads(m["content"]) for m in body["messages"]
            if m.get("role") == "tool" and m.get("tool_call_id") in ids]


def test_compute_runs_on_the_recalled_refs_and_its_answer_reaches_the_next_request(compute_run):
    bodies = [b for b in chat_requests(compute_run["requests"])
              if QUESTION in str([m.get("content") for m in b["messages"] if m.get("role") == "user"][-1:])]
    assert len(bodies) == 3, f"expected grep, compute and final requests, got {len(bodies)}"
    compute_calls = [c for m in bodies[2]["messages"] if m.get("role") == "assistant" for c in m.get("tool_calls") or []
                     if c["function"]["name"] == "trove_compute"]
    assert len(compute_calls) == 1
    arguments = json.loads(compute_calls[0]["function"]["arguments"])
    assert arguments["question_date"] == "2026-12-01"  # date-only, accepted as written
    operands = arguments["operands"]
    assert sorted(o["quote"] for o in operands) == sorted([FACT_B, FACT_A])
    results = _tool_results(bodies[2], "trove_compute")
    assert len(results) == 1
    out = results[0]
    assert out["status"] == "computed", out
    assert out["answer"]["value"] == 45 and out["answer"]["unit"] == "day"
    assert "2024-04-17 - 2024-03-03 = 45 days" in [s.get("expression") for s in out["trace"]]
    assert bodies[2]["messages"][-1]["role"] == "tool"  # the computed answer is the last thing the model sees
    final = compute_run["result"]["turns"][-1]["final"]
    assert final.startswith("TOOL-RESULT-SEEN") and '"text":"45 days"' in final


def test_the_compute_run_touches_only_loopback(compute_run):
    assert compute_run["home"].netlog.read_text(encoding="utf-8") == ""
