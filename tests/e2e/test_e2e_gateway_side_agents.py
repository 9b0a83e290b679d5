"""The gateway's side agents for a live chat: ``/compress`` and session hygiene.

Each builds a temporary agent for the chat's session; its clean-up ends that session with an
empty list (gateway/run.py ``_cleanup_agent_resources``). The chat goes on, so trove keeps its
session open: the sessions table and ``/trove status`` show no end for it, while ``/new`` in
the chat still ends the session it leaves, also right after ``/compress``, when the chat has no agent to
clean up and the gateway's ``on_session_finalize`` hook is the only call (tests/e2e/gateway_driver.py builds
the agents).
"""
from __future__ import annotations

from typing import Any

import pytest

from .harness import GATEWAY_DRIVER, chat_requests, query, tool_names

CHATS = {name: {"platform": "telegram", "user": user, "key": f"agent:main:telegram:dm:{user}"}
         for name, user in (("A", "5151"), ("D", "6262"), ("B", "7373"), ("E", "8484"))}
FILLER = " ".join(["notes about the tide tables and the harbour lights"] * 40)


@pytest.fixture(scope="module")
def side_agents(make_home, fake_llm) -> dict[str, Any]:
    home = make_home(context_length=64000, TROVE_FRESH_TAIL_COUNT="4", TROVE_ENABLE_SLASH_COMMAND="1")
    steps = [
        *[{"chat": "A", "text": f"turn {i}: lamp {i} burns paraffin. {FILLER}"} for i in range(5)],
        {"chat": "A", "command": "/compress"},
        {"chat": "A", "command": "/trove status"},
        {"chat": "D", "seed": 40, "size": 4000},
        {"chat": "D", "command": "hygiene"},
        {"chat": "D", "command": "/trove status"},
        {"chat": "A", "text": "after the compaction: which lamp burns paraffin?"},
        {"chat": "A", "command": "/new"},
        *[{"chat": "B", "text": f"turn {i}: buoy {i} rings a bell. {FILLER}"} for i in range(5)],
        {"chat": "B", "command": "/compress"},  # evicts the chat's agent: /new finds none to clean up
        {"chat": "B", "command": "/new"},
        {"chat": "E", "text": f"REBUILT-0: the first agent of chat E has the trove tools. {FILLER}"},
        *[{"chat": "E", "text": f"turn {i}: gull {i} nests on the pier. {FILLER}"} for i in range(1, 5)],
        {"chat": "E", "toolsets": ["memory"]},  # /tools: the next agent of the chat has none of them
        {"chat": "E", "command": "/compress"},  # the policy's turn leaves the live list: the next turn needs it
        {"chat": "E", "text": "REBUILT-1: the chat's new agent answers its first turn"},
    ]
    start = len(fake_llm.requests())
    result = home.run_driver({"chats": CHATS, "state": str(home.root / "gateway-sessions.json"), "steps": steps},
                             "gw-side-agents", timeout=600, script=GATEWAY_DRIVER)
    return {"home": home, "steps": result["steps"], "bodies": chat_requests(fake_llm.requests()[start:])}


def ended(run: dict[str, Any], session_id: str) -> bool:
    rows = query(run["home"].db_path, "SELECT ended_at IS NOT NULL FROM sessions WHERE session_id = ?",
                 (session_id,))
    assert rows, session_id
    return bool(rows[0][0])


def status_line(text: str, name: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip().startswith(f"{name}:")), "")


def test_compress_in_a_live_chat_leaves_its_session_open(side_agents):
    steps = side_agents["steps"]
    compress, status = steps[5], steps[6]
    assert "error" not in compress and compress["engine_name"] == "trove" and compress["in_place"], compress
    live = compress["session_id"]
    assert status_line(status["text"], "session_id") == f"session_id: {live}", status["text"][:600]
    assert status_line(status["text"], "ended_at") == "ended_at: null", status["text"][:900]
    assert_status_shows_the_helper_s_compaction(status["text"])


def assert_status_shows_the_helper_s_compaction(text: str) -> None:
    # the temporary agent's engine copy compacted; the status of the chat's own copy shows it
    assert status_line(text, "last_compression_status") == "last_compression_status: compacted", text[:1500]
    assert status_line(text, "host_kept_tail") in ("host_kept_tail: True", "host_kept_tail: False"), text[:2500]


def test_hygiene_in_a_live_chat_leaves_its_session_open(side_agents):
    steps = side_agents["steps"]
    hygiene, status = steps[8], steps[9]
    assert "error" not in hygiene and hygiene["engine_name"] == "trove", hygiene
    live = hygiene["session_id"]
    assert status_line(status["text"], "session_id") == f"session_id: {live}", status["text"][:600]
    assert status_line(status["text"], "ended_at") == "ended_at: null", status["text"][:900]
    assert_status_shows_the_helper_s_compaction(status["text"])
    assert not ended(side_agents, live)


def test_new_in_the_chat_still_ends_the_session_it_leaves(side_agents):
    steps = side_agents["steps"]
    new = steps[11]
    assert new["old_session_id"] == steps[5]["session_id"] != new["session_id"], new
    assert ended(side_agents, new["old_session_id"])


def test_new_right_after_compress_still_ends_the_session_it_leaves(side_agents):
    steps = side_agents["steps"]
    compress, new = steps[17], steps[18]
    assert "error" not in compress and compress["engine_name"] == "trove", compress
    assert new["old_session_id"] == compress["session_id"] != new["session_id"], new
    assert ended(side_agents, new["old_session_id"])


@pytest.mark.parametrize("step", [
    # /compress compacts with a temporary agent (enabled_toolsets ["memory"], never asked for the engine's
    # tools) on the chat's own session; the summary it writes is read next by the chat's agent, which has
    # the trove_* tools, so its header names them.
    5,
    # Chat D has a transcript and no agent yet (a gateway just restarted): the hygiene agent binds its session
    # first, without the tools. That bind is no word on what the chat's agent will have, so the summary
    # header follows the platform's agents, which get the trove_* tools.
    8,
], ids=["compress helper", "hygiene helper before the chat's agent"])
def test_the_summary_a_helper_writes_names_the_tools_the_chats_agent_has(side_agents, step):
    live = side_agents["steps"][step]["session_id"]
    rows = query(side_agents["home"].home / "state.db",
                 "SELECT content FROM messages WHERE session_id = ? AND content LIKE '[trove summary]%'", (live,))
    assert rows, live
    assert all("trove_grep" in str(content).split("\n\n")[0] for (content,) in rows), [r[0][:300] for r in rows]


def test_a_chats_agent_rebuilt_without_the_tools_gets_no_policy_on_its_first_turn(side_agents):
    # /tools: the chat's next agent is built with toolsets that leave out the context engine's, after a
    # /compress took the turn carrying the policy out of the live list. Neither the helper's binds nor the
    # earlier agent's offer may bring the policy back on the new agent's first turn.
    steps = side_agents["steps"]
    assert all("error" not in s for s in steps[-8:]), steps[-8:]

    def last_user(body: dict[str, Any]) -> str:
        return str(next(m for m in reversed(body["messages"]) if m.get("role") == "user").get("content"))

    first = [b for b in side_agents["bodies"] if "REBUILT-0" in last_user(b)]
    rebuilt = [b for b in side_agents["bodies"] if "REBUILT-1" in last_user(b)]
    assert first and "TROVE recall policy" in last_user(first[0]), [last_user(b)[:300] for b in first]
    assert rebuilt and not [b for b in rebuilt if "TROVE recall policy" in last_user(b)], last_user(rebuilt[0])[:600]
    assert not [n for b in rebuilt for n in tool_names(b) if n.startswith("trove_")], tool_names(rebuilt[0])
