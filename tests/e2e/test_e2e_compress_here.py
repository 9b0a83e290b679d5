"""``/compress here 2`` typed in the real CLI, default settings: the user's boundary is honoured.

Eight short exchanges run through ``cli.HermesCLI``; then ``/compress here 2``. The host passes
trove only the messages before the last two exchanges and appends those two itself, verbatim.
All twelve passed messages sit inside trove's default 32-message tail, which used to hold them
back ("No changes from compression"); the passed prefix is compacted whole now, and nothing is
lost: every turn stays stored once and the chat goes on.
"""
from __future__ import annotations

import json
from typing import Any

import pytest

from .harness import GATEWAY_DRIVER, chat_requests, content_counts, query

TURNS = [f"here turn {i}: the marigold shelf holds jar {i}" for i in range(8)]


@pytest.fixture(scope="module")
def here_run(make_home) -> dict[str, Any]:
    home = make_home()
    steps = [{"chat": text} for text in TURNS] + [{"command": "/compress here 2"}, {"chat": "one more turn"}]
    result = home.run_cli_steps(steps, "compress-here")
    return {"home": home, "result": result, "before": result["steps"][len(TURNS) - 1],
            "compress": result["steps"][len(TURNS)]}


def test_the_prefix_before_the_users_boundary_is_compacted(here_run):
    step, before = here_run["compress"], here_run["before"]
    out = step["output"]
    assert step["engine_name"] == "trove" and step["compression_count"] == 1, out
    assert "No changes from compression" not in out and "Compressed:" in out, out
    assert before["history_length"] == 16
    assert step["history_length"] < before["history_length"], out  # a summary in place of 12 messages


def test_the_last_two_exchanges_stay_raw_and_everything_else_is_beneath_a_summary(here_run):
    db, session = here_run["home"].db_path, here_run["compress"]["session_before"]
    covered = {row[0] for row in query(
        db, "SELECT m.content FROM node_messages n JOIN messages m ON m.store_id = n.store_id"
            " JOIN summary_nodes s ON s.node_id = n.node_id WHERE s.session_id = ? AND m.role = 'user'", (session,))}
    assert covered == set(TURNS[:6]), covered


def test_every_turn_is_stored_once_and_the_conversation_goes_on(here_run):
    result = here_run["result"]
    rows = query(here_run["home"].db_path, "SELECT content, COUNT(*) FROM messages WHERE role = 'user'"
                                           " GROUP BY content", ())
    counts = dict(rows)
    assert all(counts.get(text) == 1 for text in TURNS + ["one more turn"]), counts
    assert result["steps"][-1]["reply"].startswith("ack #")
    assert here_run["home"].netlog.read_text(encoding="utf-8") == ""


AFTER = ["what did the last two turns say?", "and after that?", "one last question"]
GATEWAY_CHATS = {"G": {"platform": "telegram", "user": "5555", "key": "agent:main:telegram:dm:5555"}}


@pytest.fixture(scope="module")
def gateway_here(make_home, fake_llm) -> dict[str, Any]:
    # the gateway asks has_content_to_compress(head) first and answers "nothing to do" on False
    home = make_home()
    steps = [{"chat": "G", "text": text} for text in TURNS] + [{"chat": "G", "command": "/compress here 2"}]
    steps += [{"chat": "G", "text": text} for text in AFTER]
    start = len(fake_llm.requests())
    result = home.run_driver({"chats": GATEWAY_CHATS, "state": str(home.root / "gw.json"), "steps": steps},
                             "compress-here-gw", timeout=600, script=GATEWAY_DRIVER)
    return {"home": home, "compress": result["steps"][len(TURNS)], "session": result["steps"][0]["session_id"],
            "after": result["steps"][len(TURNS) + 1:], "reply": result["steps"][len(TURNS) - 1]["final"],
            "requests": chat_requests(fake_llm.requests()[start:])}


def test_a_gateway_compress_here_compacts_the_prefix_too(gateway_here):
    step = gateway_here["compress"]
    assert "error" not in step and not step.get("nothing_to_compress"), step
    assert step["engine_name"] == "trove" and step["before"] == 16 and step["after"] < 16, step
    covered = {row[0] for row in query(
        gateway_here["home"].db_path, "SELECT m.content FROM node_messages n JOIN messages m ON m.store_id ="
        " n.store_id JOIN summary_nodes s ON s.node_id = n.node_id WHERE s.session_id = ? AND m.role = 'user'",
        (gateway_here["session"],))}
    assert covered == set(TURNS[:6]), covered


def test_the_next_gateway_turns_still_show_the_two_exchanges_the_user_kept(gateway_here):
    # compacting in place, the gateway writes back only what trove returned for the prefix and reloads the
    # chat from there. The first turn's message is merged into the summary before it, which drops what the
    # hooks gave that turn; the kept exchanges come along with the next one, and later turns replay that once
    bodies = [[b for b in gateway_here["requests"] if text in json.dumps(b["messages"][-1])][0] for text in AFTER]
    for body in bodies[1:]:
        said = json.dumps(body["messages"], ensure_ascii=False)
        kept = (TURNS[6], TURNS[7], f"]: {gateway_here['reply']}")  # the newest kept answer, as the block shows it
        assert [said.count(text) for text in kept] == [1, 1, 1], said[-3000:]
    counts = content_counts(gateway_here["home"].db_path, gateway_here["session"])
    assert all(counts.get(("user", text)) == 1 for text in TURNS + AFTER), counts
    assert all(step["engine_name"] == "trove" and "error" not in step for step in gateway_here["after"])
