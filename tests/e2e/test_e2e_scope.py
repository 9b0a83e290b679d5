"""Owner scopes under the real host: two Telegram chats and the CLI on one trove.db.

User A's chat (platform ``telegram``, its gateway session key passed as the host passes it)
tells the agent a fact. User B's NEW session in another chat asks for it through recall, grep
``all``, recent, load_session and evidence_pack, and gets none of it. A's own new session and
a second CLI session still recall their own.
"""
from __future__ import annotations

import json
from typing import Any

import pytest

from .harness import chat_requests, query

A_KEY = "agent:main:telegram:dm:1111"
B_KEY = "agent:main:telegram:dm:2222"
FACT = "please remember: my gym locker code is OSPREY-7731."
CLI_FACT = "please remember: the cli deploy port is 9091."


def tool(name: str, **args: Any) -> str:
    return f"run it <<tool:{name} {json.dumps(args)}>>"


def gateway(key: str, user: str) -> dict[str, Any]:
    return {"platform": "telegram", "gateway_session_key": key, "user_id": user}


@pytest.fixture(scope="module")
def scoped(make_home, fake_llm) -> dict[str, Any]:
    home = make_home()
    a1 = home.run_driver({"turns": [FACT, "thanks"], **gateway(A_KEY, "1111")}, "scope-a1")
    home.run_driver({"turns": [CLI_FACT, "thanks"]}, "scope-c1")
    secret = query(home.db_path, "SELECT store_id FROM messages WHERE session_id = ? AND content = ?",
                   (a1["session_id"], FACT))[0][0]
    asks = [tool("trove_recall", query="gym locker code"),
            tool("trove_grep", query="gym locker code", session_scope="all"),
            tool("trove_recent", period="today", mode="messages"),
            tool("trove_load_session", session_id=a1["session_id"]),
            tool("trove_evidence_pack", question="what is the gym locker code?",
                 baseline_refs=[f"trove:{secret}:0-20"])]
    start = len(fake_llm.requests())
    b = home.run_driver({"turns": asks, "max_iterations": 4, **gateway(B_KEY, "2222")}, "scope-b1")
    b_requests = fake_llm.requests()[start:]
    start = len(fake_llm.requests())
    a2 = home.run_driver({"turns": [tool("trove_recall", query="gym locker code")], "max_iterations": 4,
                          **gateway(A_KEY, "1111")}, "scope-a2")
    a2_requests = fake_llm.requests()[start:]
    start = len(fake_llm.requests())
    c2 = home.run_driver({"turns": [tool("trove_recall", query="deploy port"),
                                    tool("trove_recall", query="gym locker code")], "max_iterations": 4}, "scope-c2")
    c2_requests = fake_llm.requests()[start:]
    return {"home": home, "a1": a1, "b": b, "a2": a2, "c2": c2, "secret": secret,
            "b_requests": b_requests, "a2_requests": a2_requests, "c2_requests": c2_requests}


def tool_results(requests: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Every tool result the model saw, by tool name (from the last chat request of the run)."""
    last = chat_requests(requests)[-1]
    calls = {c["id"]: (c.get("function") or {}).get("name") for m in last["messages"]
             if m.get("role") == "assistant" for c in m.get("tool_calls") or []}
    out: dict[str, list[str]] = {}
    for m in last["messages"]:
        if m.get("role") == "tool" and m.get("tool_call_id") in calls:
            out.setdefault(calls[m["tool_call_id"]], []).append(str(m.get("content")))
    return out


def test_each_session_records_the_scope_the_host_gave_it(scoped):
    rows = dict(query(scoped["home"].db_path, "SELECT session_id, scope FROM sessions"))
    assert rows[scoped["a1"]["session_id"]] == f"telegram:{A_KEY}"
    assert rows[scoped["a2"]["session_id"]] == f"telegram:{A_KEY}"
    assert rows[scoped["b"]["session_id"]] == f"telegram:{B_KEY}"
    assert rows[scoped["c2"]["session_id"]] == "local"


def test_another_chat_reads_none_of_the_fact_through_any_path(scoped):
    results = tool_results(scoped["b_requests"])
    assert set(results) == {"trove_recall", "trove_grep", "trove_recent", "trove_load_session",
                            "trove_evidence_pack"}, results
    for name, texts in results.items():
        for text in texts:
            assert "OSPREY-7731" not in text, (name, text)
    load = json.loads(results["trove_load_session"][0])
    assert load["error"].startswith(f"no stored session '{scoped['a1']['session_id']}'")
    everything = json.dumps([r for r in chat_requests(scoped["b_requests"])])
    assert "OSPREY-7731" not in everything  # nor the pre-answer block or any other prompt text


def test_the_owners_new_session_and_a_second_cli_session_still_recall_their_own(scoped):
    a2 = tool_results(scoped["a2_requests"])["trove_recall"]
    assert "OSPREY-7731" in a2[0]
    c2 = tool_results(scoped["c2_requests"])["trove_recall"]
    assert "9091" in c2[0] and "OSPREY-7731" not in c2[1]
