"""Ctrl-C in the middle of a tool call, then a conversation long enough to compact it away.

The fake model runs the host's ``terminal`` tool with a six-second command; the driver calls
``agent.interrupt()`` (what the CLI's input thread does on Ctrl-C) two seconds in. The host
closes the group with an "interrupted" tool result and reply. Five turns of about 6,000 tokens
follow in a 64K window, so the interrupted group is compacted. Every message is stored once with
its call id, no request ever carries a tool result without its call, and ``trove_grep`` still
finds the interrupted command.
"""
from __future__ import annotations

import json
from typing import Any

import pytest

from .harness import FALLBACK_WARNING, chat_requests, query

COMMAND = json.dumps({"command": "sleep 6; echo INTERRUPT-ME-77"})
FILLER = " ".join(f"filler{k % 97} word{k}" for k in range(3000))
TURNS: list[Any] = ["first turn: the locker code is QX-5182",
                    {"text": f"run the slow job <<tool:terminal {COMMAND}>>", "interrupt_after": 2.0},
                    *[f"long turn {i}: {FILLER}" for i in range(1, 6)],
                    '<<tool:trove_grep {"query": "INTERRUPT-ME-77"}>>']


@pytest.fixture(scope="module")
def interrupted(make_home, fake_llm) -> dict[str, Any]:
    home = make_home(context_length=64000, TROVE_FRESH_TAIL_COUNT="4")
    start = len(fake_llm.requests())
    result = home.run_driver({"turns": TURNS, "max_iterations": 4, "toolsets": ["terminal", "context_engine"]},
                             "interrupt", timeout=600)
    rows = query(home.db_path, "SELECT role, content, tool_call_id, tool_calls FROM messages WHERE session_id = ? "
                               "ORDER BY store_id", (result["session_id"],))
    return {"result": result, "rows": rows, "requests": fake_llm.requests()[start:]}


def test_the_interrupted_group_is_stored_once_and_paired(interrupted):
    result, rows = interrupted["result"], interrupted["rows"]
    assert result["engine_name"] == "trove" and not [w for w in result["warnings"] if FALLBACK_WARNING in w]
    assert result["compression_count"] >= 1
    calls = [(i, c) for i, (role, _, _, tc) in enumerate(rows) if role == "assistant" and tc
             for c in json.loads(tc) if c["function"]["name"] == "terminal"]
    assert len(calls) == 1, calls
    i, call = calls[0]
    role, content, call_id, _ = rows[i + 1]
    assert role == "tool" and call_id == call["id"] and "interrupted" in content.lower(), rows[i + 1]
    users = [content for role, content, _, _ in rows if role == "user"]
    assert users == [t["text"] if isinstance(t, dict) else t for t in TURNS]


def test_no_request_carries_a_tool_result_without_its_call(interrupted):
    for body in chat_requests(interrupted["requests"]):
        called: set[str] = set()
        for m in body["messages"]:
            called.update(c["id"] for c in m.get("tool_calls") or [])
            if m.get("role") == "tool":
                assert m.get("tool_call_id") in called, [x.get("role") for x in body["messages"]]


def test_grep_finds_the_interrupted_command_after_compaction(interrupted):
    messages = chat_requests(interrupted["requests"])[-1]["messages"]
    assert not any("sleep 6" in json.dumps(m.get("tool_calls") or []) for m in messages)  # compacted away
    assert messages[-1]["role"] == "tool"
    found = json.loads(messages[-1]["content"])
    assert found["total_results"] >= 1 and any("INTERRUPT-ME-77" in json.dumps(r) for r in found["results"])
