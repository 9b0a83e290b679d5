"""A turn of many tool calls that compacts between them, in a 64K window.

After three long turns the user asks a question whose answer takes repeated runs of the host's
``terminal`` tool (the fake model calls it again after each result, ``<<loop>>``, up to the
iteration limit); each result is about 3,000 tokens, so the prompt passes the trigger between
tool calls and the host compacts mid-turn. Hermes merges the user message that follows trove's
summary message into it. Every request of the turn must still carry the question, every message
is stored once, and no request comes near the window.
"""
from __future__ import annotations

import json
from typing import Any

import pytest

from .harness import FALLBACK_WARNING, aux_requests, chat_requests, query, request_tokens

CONTEXT_LENGTH = 64000
COMMAND = json.dumps({"command": "python3 -c \"print(' '.join('tok%d' % i for i in range(3000)))\""})
LONG = " ".join(f"w{k}" for k in range(8000))
QUESTION = ("QUESTION-Z what does the script print? <<loop>> <<tool:terminal " + COMMAND + ">> "
            + " ".join(f"q{k}" for k in range(1500)))
TURNS = [f"turn {i}: {LONG}" for i in range(1, 4)] + [QUESTION]


@pytest.fixture(scope="module")
def midturn(make_home, fake_llm) -> dict[str, Any]:
    home = make_home(context_length=CONTEXT_LENGTH)
    start = len(fake_llm.requests())
    result = home.run_driver({"turns": TURNS, "max_iterations": 7, "toolsets": ["terminal", "context_engine"]},
                             "midturn", timeout=600)
    requests = fake_llm.requests()[start:]
    first = next(i for i, r in enumerate(requests) if "QUESTION-Z" in json.dumps(r["body"].get("messages")))
    rows = query(home.db_path, "SELECT role, content, tool_call_id FROM messages WHERE session_id = ?",
                 (result["session_id"],))
    return {"result": result, "turn": requests[first:], "requests": requests, "rows": rows}


def test_the_turn_compacted_between_its_tool_calls(midturn):
    result = midturn["result"]
    assert result["engine_name"] == "trove" and not [w for w in result["warnings"] if FALLBACK_WARNING in w]
    turn = midturn["turn"]
    first_tool = next(i for i, r in enumerate(turn) if r["body"]["messages"][-1].get("role") == "tool")
    assert aux_requests(turn[first_tool:]), "no compaction ran between the turn's tool calls"
    assert result["turns"][-1]["compression_count"] > result["turns"][-2]["compression_count"]


def test_every_request_of_the_turn_carries_the_question(midturn):
    bodies = chat_requests(midturn["turn"])
    missing = [i for i, b in enumerate(bodies) if "QUESTION-Z" not in json.dumps(b["messages"])]
    assert not missing, f"requests {missing} of {len(bodies)} lost the question"
    assert len(bodies) >= 5  # the model kept working on it up to the iteration limit
    assert max(request_tokens(b) for b in chat_requests(midturn["requests"])) < int(CONTEXT_LENGTH * 0.6)


def test_every_message_is_stored_once(midturn):
    rows = midturn["rows"]
    users = [content for role, content, _ in rows if role == "user"]
    assert all(users.count(t) == 1 for t in TURNS), [users.count(t) for t in TURNS]
    call_ids = [call_id for role, _, call_id in rows if role == "tool"]
    assert len(call_ids) >= 4 and len(call_ids) == len(set(call_ids)), call_ids
