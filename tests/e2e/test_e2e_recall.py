"""Recall after compaction under the real host: a detail said once, compacted out of the
prompt, found again with ``trove_grep`` and read back exactly with ``trove_expand``.

The first user turn states a canary; long filler turns in a 64K window push it through
compaction. The last turn asks about it: the fake model calls ``trove_grep``, reads the
``store_id`` of the oldest message hit from the JSON the host handed back, and calls
``trove_expand`` with it. The summaries the fake summarizer writes never mention the canary,
so the only way it can reach the model again is through those two tools.
"""
from __future__ import annotations

import json
from typing import Any

import pytest

from .fake_llm import decide
from .harness import aux_requests, chat_requests, query

CONTEXT_LENGTH = 64000
CANARY = "the vault rotation code is ZEBRA-7781"
FILLER_TURNS = 14
TURN_CHARS = 12000  # about 3,000 tokens each
WORDS = ("amber", "basalt", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper")
GREP_ARGS = json.dumps({"query": "vault rotation code"})
QUESTION = ("final turn: what was the vault rotation code I gave at the start? "
            f"<<tool:trove_grep {GREP_ARGS}>> <<then:trove_expand>>")


def filler(i: int, chars: int = TURN_CHARS) -> str:
    head = f"filler turn {i:02d} about {WORDS[i % len(WORDS)]}-{i}: "
    body = " ".join(f"{WORDS[(i + k) % len(WORDS)]}{k % 89}" for k in range(chars // 8))
    return (head + body)[:chars]


FIRST_TURN = f"first turn: please remember that {CANARY}. {filler(0, 4000)}"
TURNS = [FIRST_TURN] + [filler(i) for i in range(1, FILLER_TURNS + 1)] + [QUESTION]


@pytest.fixture(scope="module")
def recall_run(make_home, fake_llm) -> dict[str, Any]:
    home = make_home(context_length=CONTEXT_LENGTH, TROVE_CONTEXT_THRESHOLD="0.5",
                     TROVE_FRESH_TAIL_COUNT="6", TROVE_LEAF_CHUNK_TOKENS="6000")
    start = len(fake_llm.requests())
    result = home.run_driver({"turns": TURNS, "max_iterations": 6}, "recall", timeout=900)
    return {"home": home, "result": result, "requests": fake_llm.requests()[start:]}


def _calls(body: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [c for m in body["messages"] if m.get("role") == "assistant" for c in m.get("tool_calls") or []
            if (c.get("function") or {}).get("name") == name]


def _result_for(body: dict[str, Any], call: dict[str, Any]) -> dict[str, Any]:
    found = [m for m in body["messages"] if m.get("role") == "tool" and m.get("tool_call_id") == call["id"]]
    assert len(found) == 1, found
    return found[0]


def _final_turn_bodies(run: dict[str, Any]) -> list[dict[str, Any]]:
    """Main requests of the final turn: those whose last user message is the question."""
    out = []
    for body in chat_requests(run["requests"]):
        users = [m for m in body["messages"] if m.get("role") == "user"]
        if users and QUESTION in str(users[-1].get("content")):
            out.append(body)
    return out


def test_the_fake_model_chains_expand_onto_the_oldest_grep_hit():
    tools = [{"type": "function", "function": {"name": n}} for n in ("trove_grep", "trove_expand")]
    grep_result = json.dumps({"results": [{"type": "summary", "node_id": 3}, {"type": "message", "store_id": 40},
                                          {"type": "message", "store_id": 2}]})
    call = {"id": "c1", "type": "function", "function": {"name": "trove_grep", "arguments": GREP_ARGS}}
    msgs = [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": grep_result}]
    assert decide({"tools": tools, "messages": msgs}, 9) == {"tool": ("trove_expand", '{"store_id": 2}')}
    expand = {"id": "c2", "type": "function", "function": {"name": "trove_expand", "arguments": "{}"}}
    later = msgs + [{"role": "assistant", "content": None, "tool_calls": [expand]},
                    {"role": "tool", "tool_call_id": "c2", "content": "{}"}]
    assert decide({"tools": tools, "messages": later}, 10)["text"].startswith("TOOL-RESULT-SEEN #10")


def test_compaction_ran_before_the_question(recall_run):
    result = recall_run["result"]
    assert result["engine_name"] == "trove"
    assert aux_requests(recall_run["requests"]), "no summarizer call reached the fake server"
    before_question = result["turns"][-2]["compression_count"]
    assert before_question and before_question >= 1, result["turns"][-4:]
    nodes = query(recall_run["home"].db_path, "SELECT summary FROM summary_nodes WHERE session_id = ?",
                  (result["session_id"],))
    assert nodes and not [s for (s,) in nodes if "ZEBRA-7781" in s]  # summaries never carry the canary


def _carries_first_turn(body: dict[str, Any]) -> bool:
    return any(m.get("role") == "user" and FIRST_TURN in str(m.get("content")) for m in body["messages"])


def test_the_first_turn_is_no_longer_in_the_prompt_when_the_model_searches(recall_run):
    everything = chat_requests(recall_run["requests"])
    assert _carries_first_turn(everything[0]) and _carries_first_turn(everything[1])  # raw before compaction
    bodies = _final_turn_bodies(recall_run)
    assert len(bodies) == 3, f"expected grep call, expand call and final answer requests, got {len(bodies)}"
    assert not [b for b in bodies if _carries_first_turn(b)], "the raw first turn is still in the request"
    assert "ZEBRA-7781" not in json.dumps(bodies[0]["messages"])  # the question turn itself has no canary


def test_grep_finds_the_first_turn_and_its_result_is_json(recall_run):
    bodies = _final_turn_bodies(recall_run)
    grep_calls = _calls(bodies[1], "trove_grep")
    assert len(grep_calls) == 1
    payload = json.loads(_result_for(bodies[1], grep_calls[0])["content"])
    assert "error" not in payload, payload
    first_id = query(recall_run["home"].db_path, "SELECT store_id FROM messages WHERE session_id = ? AND content = ?",
                     (recall_run["result"]["session_id"], FIRST_TURN))
    assert len(first_id) == 1
    hits = [r for r in payload["results"] if r.get("type") == "message"]
    assert first_id[0][0] in [h["store_id"] for h in hits], hits
    assert min(h["store_id"] for h in hits) == first_id[0][0]


def test_expand_with_the_store_id_from_grep_returns_the_canary_turn_exactly(recall_run):
    bodies = _final_turn_bodies(recall_run)
    grep_payload = json.loads(_result_for(bodies[1], _calls(bodies[1], "trove_grep")[0])["content"])
    picked = min(r["store_id"] for r in grep_payload["results"] if r.get("type") == "message")
    expand_calls = _calls(bodies[2], "trove_expand")
    assert len(expand_calls) == 1
    assert json.loads(expand_calls[0]["function"]["arguments"]) == {"store_id": picked}
    message = _result_for(bodies[2], expand_calls[0])
    assert message is bodies[2]["messages"][-1]  # the request right after the expand call
    assert CANARY in message["content"]
    payload = json.loads(message["content"])
    assert payload["store_id"] == picked
    assert payload["content"] == FIRST_TURN
    assert payload["has_more"] is False
    final = recall_run["result"]["turns"][-1]["final"]
    assert final.startswith("TOOL-RESULT-SEEN") and f'"store_id":{picked}' in final


def test_the_recall_run_touches_only_loopback(recall_run):
    assert recall_run["home"].guarded_processes
    assert recall_run["home"].netlog.read_text(encoding="utf-8") == ""
