"""The real ``hermes`` command line with hermes-trove enabled in a scratch home.

One session is built with ``hermes chat -Q -q`` and continued twice with ``--resume``
(the fake model calls the host's ``todo`` tool in the second turn); a separate one-shot
``hermes -z`` session follows. Each command is its own host process.
"""
from __future__ import annotations

import json
import re
from typing import Any

import pytest

from .harness import FALLBACK_WARNING, chat_requests, query, tool_names

TODO_ARGS = json.dumps({"todos": [{"id": "1", "content": "sort the mail", "status": "pending"}]})
CHAT_TURNS = [
    "cli turn 1: the parcel number is 4471",
    f"cli turn 2: list my chores <<tool:todo {TODO_ARGS}>>",
    "cli turn 3: that is all for now",
]
ONESHOT = "oneshot turn: a single question"


@pytest.fixture(scope="module")
def cli_runs(make_home, fake_llm) -> dict[str, Any]:
    home = make_home()
    start = len(fake_llm.requests())
    outputs = []
    first = home.run_cli(["chat", "-Q", "-q", CHAT_TURNS[0]])
    outputs.append(first)
    found = re.search(r"session_id:\s*(\S+)", first.stdout + first.stderr)
    assert found, f"hermes chat -Q printed no session id:\n{first.stdout}\n{first.stderr}"
    session_id = found.group(1)
    for text in CHAT_TURNS[1:]:
        outputs.append(home.run_cli(["chat", "-Q", "-q", text, "--resume", session_id]))
    oneshot = home.run_cli(["-z", ONESHOT])
    plugins = home.run_cli(["plugins", "list"])
    return {"home": home, "session_id": session_id, "outputs": outputs + [oneshot], "oneshot": oneshot,
            "plugins": plugins, "requests": fake_llm.requests()[start:]}


def _session_rows(db_path, session_id: str) -> list[tuple[Any, ...]]:
    return query(db_path, "SELECT role, content, tool_call_id, tool_calls FROM messages WHERE session_id = ? "
                          "ORDER BY store_id", (session_id,))


def test_the_cli_lists_hermes_trove_as_an_enabled_plugin(cli_runs):
    listing = cli_runs["plugins"].stdout
    line = next((ln for ln in listing.splitlines() if "hermes-trove" in ln), "")
    assert line, listing
    assert "enabled" in line


def test_no_cli_run_fell_back_to_the_built_in_compressor(cli_runs):
    for done in cli_runs["outputs"]:
        assert FALLBACK_WARNING not in done.stdout + done.stderr
    assert FALLBACK_WARNING not in cli_runs["home"].host_logs()


def test_a_resumed_cli_session_stores_each_message_exactly_once(cli_runs):
    rows = _session_rows(cli_runs["home"].db_path, cli_runs["session_id"])
    assert [r[1] for r in rows if r[0] == "user"] == CHAT_TURNS
    keys = [(r[0], r[1], r[2] or "", r[3] or "") for r in rows]
    assert len(keys) == len(set(keys)), [k for k in keys if keys.count(k) > 1]
    tool_rows = [r for r in rows if r[0] == "tool"]
    assert len(tool_rows) == 1 and "sort the mail" in tool_rows[0][1]
    calls = [r for r in rows if r[0] == "assistant" and r[3]]
    assert len(calls) == 1 and "todo" in calls[0][3]
    # user, assistant, user, assistant(call), tool, assistant, user, assistant
    assert len(rows) == 8


def test_the_one_shot_session_is_stored_apart_and_once(cli_runs):
    rows = query(cli_runs["home"].db_path, "SELECT session_id, role, content FROM messages WHERE content = ?",
                 (ONESHOT,))
    assert len(rows) == 1
    assert rows[0][0] != cli_runs["session_id"]
    assert cli_runs["oneshot"].stdout.strip().startswith("ack #")


def test_every_cli_request_offers_the_trove_tools(cli_runs):
    bodies = chat_requests(cli_runs["requests"])
    assert len(bodies) >= len(CHAT_TURNS) + 2  # the tool turn makes two requests, plus the one-shot
    for body in bodies:
        names = tool_names(body)
        assert "trove_grep" in names, names
        assert len(names) == len(set(names))


def test_the_cli_runs_touch_only_loopback(cli_runs):
    assert len(cli_runs["home"].guarded_processes) >= len(cli_runs["outputs"]) + 1
    assert cli_runs["home"].netlog.read_text(encoding="utf-8") == ""
