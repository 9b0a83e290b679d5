"""``hermes prompt-size``: the host builds an offline agent (placeholder key ``inspect-only``) only to
measure its system prompt and tool schemas; it binds a session and never runs a turn. Trove's tools
are in what it measures, and trove.db keeps no session row for it; a conversation in the same home
afterwards is stored as usual.
"""
from __future__ import annotations

from typing import Any

import pytest

from .harness import query


@pytest.fixture(scope="module")
def measured(make_home, fake_llm) -> dict[str, Any]:
    home = make_home()
    start = len(fake_llm.requests())
    proc = home.hermes("prompt-size", timeout=300)
    sessions = query(home.db_path, "SELECT session_id, platform FROM sessions") if home.db_path.exists() else []
    requests = fake_llm.requests()[start:]
    later = home.run_driver({"turns": ["prompt-size later: a short remark"], "max_iterations": 2}, "prompt-size-later")
    return {"home": home, "proc": proc, "sessions": sessions, "requests": requests, "later": later}


def test_prompt_size_measures_trove_tools_and_leaves_no_session_row(measured):
    proc = measured["proc"]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Prompt-size breakdown" in proc.stdout and "Tool schemas" in proc.stdout
    assert measured["requests"] == []  # it measured offline
    assert measured["sessions"] == [], measured["sessions"]


def test_a_conversation_afterwards_is_stored_as_usual(measured):
    sid = measured["later"]["session_id"]
    rows = query(measured["home"].db_path, "SELECT session_id FROM sessions")
    assert rows == [(sid,)]
    assert query(measured["home"].db_path, "SELECT COUNT(*) FROM messages WHERE session_id = ?", (sid,))[0][0] >= 2
