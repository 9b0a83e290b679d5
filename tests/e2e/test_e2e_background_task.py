"""``/background PROMPT`` typed in the real CLI: the host runs the prompt through an agent of its own,
on a thread of its own, beside the chat, and drops that agent when it is done. The task's turn is the
user's and is stored once in its own session; ``/trove`` keeps addressing the chat, both before and
after the task's agent is gone (it must never fall back to "no session bound")."""
from __future__ import annotations

from typing import Any

import pytest

from .harness import query

FACT = "bg job: remember that the greenhouse key is KIWI-3307"


@pytest.fixture(scope="module")
def background_run(make_home) -> dict[str, Any]:
    home = make_home(TROVE_ENABLE_SLASH_COMMAND="1")
    steps = [{"chat": "chat turn one: the shed is painted green"}, {"command": f"/background {FACT}"},
             {"wait_threads": ["bg-task-*"], "seconds": 120},
             {"chat": "chat turn two"}, {"command": "/trove status"}, {"command": "/trove rotate"}]
    result = home.run_cli_steps(steps, "background-task")
    return {"home": home, "result": result, "steps": result["steps"]}


def test_the_task_ran_to_its_end_and_its_turn_is_stored_once_in_its_own_session(background_run):
    steps, db = background_run["steps"], background_run["home"].db_path
    assert steps[2]["still_running"] == 0, steps[2]
    chat = steps[0]["session_id"]
    rows = query(db, "SELECT session_id FROM messages WHERE role = 'user' AND content = ?", (FACT,))
    assert len(rows) == 1 and rows[0][0] != chat and rows[0][0].startswith("bg_"), rows


def test_trove_keeps_addressing_the_chat_after_the_task(background_run):
    steps = background_run["steps"]
    chat = steps[0]["session_id"]
    assert steps[3]["session_id"] == chat and steps[3]["engine_name"] == "trove"
    status, rotate = steps[4]["output"], steps[5]["output"]
    assert f"session_id: {chat}" in status and "(unbound)" not in status, status[:600]
    assert f"session_id: {chat}" in rotate and "no session is bound" not in rotate, rotate[:600]
    assert "Traceback" not in status + rotate
    assert background_run["home"].netlog.read_text(encoding="utf-8") == ""
