"""Whole-memory recall under the real host: a fact said in one session is found from a NEW
session with ``trove_recall`` and read back exactly with ``trove_expand``.

Run one tells the agent a canary and ends (the host's exit path flushes the transcript).
Run two is a new agent process with a new session id in the same Hermes home: the fake
model calls ``trove_recall``, then ``trove_expand`` with the ``expand`` arguments of the
best hit, which must be the earlier session's message, returned verbatim. Run three asks
again from a third session: run two's recall and expand results (which quote the canary) are
trove's own traffic, so run one's message is found again (after run two's question, which
names the same words) and no tool result quoting it is a hit.
"""
from __future__ import annotations

import json
from typing import Any

import pytest

from .harness import chat_requests, query

CANARY_TURN = "please remember for later: the harbour gate code is KESTREL-4412, north entrance."
RECALL_ARGS = json.dumps({"query": "harbour gate code"})
QUESTION = f"what was the harbour gate code? <<tool:trove_recall {RECALL_ARGS}>> <<then:trove_expand>>"


@pytest.fixture(scope="module")
def memory_run(make_home, fake_llm) -> dict[str, Any]:
    home = make_home()
    first = home.run_driver({"turns": [CANARY_TURN, "thanks, that is all for now"]}, "recall-memory-1")
    start = len(fake_llm.requests())
    second = home.run_driver({"turns": [QUESTION], "max_iterations": 6}, "recall-memory-2")
    requests = fake_llm.requests()[start:]
    again = len(fake_llm.requests())
    third = home.run_driver({"turns": [QUESTION], "max_iterations": 6}, "recall-memory-3")
    return {"home": home, "first": first, "second": second, "requests": requests, "third": third,
            "third_requests": fake_llm.requests()[again:]}


def _tool_messages(body: dict[str, Any], name: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    calls = {c["id"]: c for m in body["messages"] if m.get("role") == "assistant" for c in m.get("tool_calls") or []
             if (c.get("function") or {}).get("name") == name}
    return [(calls[m["tool_call_id"]], m) for m in body["messages"]
            if m.get("role") == "tool" and m.get("tool_call_id") in calls]


def test_the_question_runs_in_a_new_session_and_recall_is_advertised(memory_run):
    first, second = memory_run["first"], memory_run["second"]
    assert first["engine_name"] == second["engine_name"] == "trove"
    assert first["session_id"] != second["session_id"]
    assert "trove_recall" in second["tools"]
    stored = query(memory_run["home"].db_path, "SELECT COUNT(*) FROM messages WHERE session_id = ? AND content = ?",
                   (first["session_id"], CANARY_TURN))
    assert stored == [(1,)]


def test_recall_from_the_new_session_finds_the_earlier_session_and_expand_returns_it_exactly(memory_run):
    first, second = memory_run["first"], memory_run["second"]
    last = chat_requests(memory_run["requests"])[-1]
    recalled = _tool_messages(last, "trove_recall")
    assert len(recalled) == 1
    payload = json.loads(recalled[0][1]["content"])
    assert "error" not in payload, payload
    best = payload["hits"][0]
    assert best["session_id"] == first["session_id"] and best["from_current_session"] is False
    assert best["kind"] == "message_excerpt" and best["expand"]["tool"] == "trove_expand"
    assert payload["provenance"]["arms_run"] == ["fts", "summary"]
    assert payload.get("excluded", {}).get("live_context", 0) >= 1  # the question itself is in the prompt

    expanded = _tool_messages(last, "trove_expand")
    assert len(expanded) == 1
    call, message = expanded[0]
    assert json.loads(call["function"]["arguments"]) == best["expand"]["args"]
    page = json.loads(message["content"])
    assert page["content"] == CANARY_TURN and page["session_id"] == first["session_id"]
    assert page["has_more"] is False
    final = second["turns"][-1]["final"]
    assert final.startswith("TOOL-RESULT-SEEN") and f'"store_id":{best["store_id"]}' in final


def test_asking_again_from_a_third_session_finds_the_message_not_the_earlier_answers(memory_run):
    first, second, third = memory_run["first"], memory_run["second"], memory_run["third"]
    assert third["session_id"] not in (first["session_id"], second["session_id"])
    last = chat_requests(memory_run["third_requests"])[-1]
    payload = json.loads(_tool_messages(last, "trove_recall")[0][1]["content"])
    assert "error" not in payload, payload
    hits = payload["hits"]
    canary = [h for h in hits if h["session_id"] == first["session_id"] and h["role"] == "user"]
    assert canary and hits.index(canary[0]) <= 1, [(h["role"], h["snippet"][:90]) for h in hits]
    # Run two's recall and expand results quote the canary: trove's own traffic, never a hit.
    assert all(h["role"] != "tool" for h in hits), [(h["role"], h["snippet"][:90]) for h in hits]
    assert payload["excluded"]["own_tool_output"] >= 2


def test_the_recall_run_touches_only_loopback(memory_run):
    assert memory_run["home"].netlog.read_text(encoding="utf-8") == ""
