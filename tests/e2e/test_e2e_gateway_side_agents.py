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

from .harness import GATEWAY_DRIVER, query

CHATS = {name: {"platform": "telegram", "user": user, "key": f"agent:main:telegram:dm:{user}"}
         for name, user in (("A", "5151"), ("D", "6262"), ("B", "7373"))}
FILLER = " ".join(["notes about the tide tables and the harbour lights"] * 40)


@pytest.fixture(scope="module")
def side_agents(make_home) -> dict[str, Any]:
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
    ]
    result = home.run_driver({"chats": CHATS, "state": str(home.root / "gateway-sessions.json"), "steps": steps},
                             "gw-side-agents", timeout=600, script=GATEWAY_DRIVER)
    return {"home": home, "steps": result["steps"]}


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


def test_the_summary_a_compress_helper_writes_names_the_tools_the_chats_agent_has(side_agents):
    # /compress compacts with a temporary agent (enabled_toolsets ["memory"], never asked for the engine's
    # tools) on the chat's own session; the summary it writes is read next by the chat's agent, which has
    # the trove_* tools, so its header names them.
    steps = side_agents["steps"]
    live = steps[5]["session_id"]
    rows = query(side_agents["home"].home / "state.db",
                 "SELECT content FROM messages WHERE session_id = ? AND content LIKE '[trove summary]%'", (live,))
    assert rows, live
    assert all("trove_grep" in str(content).split("\n\n")[0] for (content,) in rows), [r[0][:300] for r in rows]


def test_the_summary_a_hygiene_helper_writes_before_the_chat_has_an_agent_names_the_tools(side_agents):
    # Chat D has a transcript and no agent yet (a gateway just restarted): the hygiene agent binds its session
    # first, without the tools. That bind is no word on what the chat's agent will have, so the summary
    # header follows the platform's agents, which get the trove_* tools.
    steps = side_agents["steps"]
    live = steps[8]["session_id"]
    rows = query(side_agents["home"].home / "state.db",
                 "SELECT content FROM messages WHERE session_id = ? AND content LIKE '[trove summary]%'", (live,))
    assert rows, live
    assert all("trove_grep" in str(content).split("\n\n")[0] for (content,) in rows), [r[0][:300] for r in rows]
