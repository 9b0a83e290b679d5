"""The host's background review fork under the real CLI, with the memory nudge on.

With ``memory.memory_enabled`` and ``memory.nudge_interval: 4``, the host forks a review agent
after turns 4, 8 and 12, on a thread named ``bg-review``: its engine copy binds a throw-away
session id, takes over the parent's id, replays the parent's transcript plus the review prompt to
the model, then calls ``on_session_end(parent_id, [])``. After twelve turns and the reviews, a
thirteenth turn greps the first turn's fact, ``/trove status`` reports the session (still open),
and a later CLI session recalls the fact with ``trove_recall``.
"""
from __future__ import annotations

import json
import re
from typing import Any

import pytest

from .harness import FALLBACK_WARNING, chat_requests, content_counts, query

FACT = "turn 01: please remember the boathouse key is MARLIN-5307."
REVIEW_PROMPT = "Review the conversation above and consider saving to memory"
TURNS = [FACT] + [f"turn {i:02d}: a short remark about the weather, number {i}" for i in range(2, 13)]
GREP = f'turn 13: what was the key? <<tool:trove_grep {json.dumps({"query": "boathouse key"})}>>'
RECALL = f'a new session: what was the key? <<tool:trove_recall {json.dumps({"query": "boathouse key"})}>>'


@pytest.fixture(scope="module")
def reviewed(make_home, fake_llm) -> dict[str, Any]:
    home = make_home(TROVE_ENABLE_SLASH_COMMAND="1")
    config = home.home / "config.yaml"
    config.write_text(config.read_text(encoding="utf-8").replace(
        "memory:\n  nudge_interval: 0\n", "memory:\n  memory_enabled: true\n  nudge_interval: 4\n"), encoding="utf-8")
    start = len(fake_llm.requests())
    steps: list[dict[str, Any]] = [{"chat": text} for text in TURNS]
    steps += [{"wait_threads": ["bg-review"], "seconds": 90}, {"command": "/trove status"}, {"chat": GREP}]
    run = home.run_driver({"mode": "cli", "toolsets": ["todo", "memory", "context_engine"], "max_iterations": 4,
                           "steps": steps}, "review", timeout=300)
    parent_requests = fake_llm.requests()[start:]
    start = len(fake_llm.requests())
    later = home.run_driver({"turns": [RECALL], "max_iterations": 4}, "review-later")
    return {"home": home, "run": run, "requests": parent_requests, "later": later,
            "later_requests": fake_llm.requests()[start:], "parent": run["steps"][0]["session_id"]}


def review_requests(reviewed: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in chat_requests(reviewed["requests"])
            if REVIEW_PROMPT in json.dumps(b["messages"][-1:])]


def test_the_host_forked_a_review_after_turns_four_eight_and_twelve(reviewed):
    reviews = review_requests(reviewed)
    assert len(reviews) == 3, len(reviews)
    for body, turn in zip(reviews, (4, 8, 12), strict=True):
        users = [m for m in body["messages"] if m.get("role") == "user"]
        assert len(users) > 1 and f"turn {turn:02d}:" in json.dumps(users[-2])
    assert all(s["still_running"] == 0 for s in reviewed["run"]["steps"] if s["kind"] == "wait")


def test_trove_db_holds_no_throw_away_id_only_the_parent_and_the_later_session(reviewed):
    db, parent, later = reviewed["home"].db_path, reviewed["parent"], reviewed["later"]["session_id"]
    assert sorted(query(db, "SELECT session_id FROM sessions")) == sorted([(parent,), (later,)])
    assert sorted(query(db, "SELECT DISTINCT session_id FROM messages")) == sorted([(parent,), (later,)])


def test_the_parent_rows_are_intact_once_each_and_carry_no_review_prompt(reviewed):
    db, parent = reviewed["home"].db_path, reviewed["parent"]
    rows = query(db, "SELECT role, content FROM messages WHERE session_id = ? ORDER BY store_id", (parent,))
    assert [c for r, c in rows if r == "user"] == TURNS + [GREP]
    assert [r for r, _ in rows[:24]] == ["user", "assistant"] * 12  # no review turn spliced in
    counts = content_counts(db, parent)
    assert all(n == 1 for (role, _), n in counts.items() if role == "user"), counts
    assert not query(db, "SELECT store_id FROM messages WHERE content LIKE ?", (f"%{REVIEW_PROMPT}%",))


def test_status_after_the_reviews_names_the_live_session_still_open(reviewed):
    out = next(s for s in reviewed["run"]["steps"] if s["kind"] == "command")["output"]
    assert re.search(rf"^\s*session_id:\s*{reviewed['parent']}\s*$", out, re.M), out[:400]
    lifecycle = out[out.index("  lifecycle:"):]
    assert re.search(r"^\s*ended_at:\s*null\s*$", lifecycle, re.M), lifecycle[:600]


def last_tool_result(requests: list[dict[str, Any]], marker: str) -> str:
    bodies = [b for b in chat_requests(requests) if any(marker in str(m.get("content")) for m in b["messages"])
              and b["messages"][-1].get("role") == "tool"]
    assert bodies, f"no tool result after {marker!r}"
    return str(bodies[0]["messages"][-1]["content"])


def test_grep_in_the_parent_finds_the_fact_once(reviewed):
    result = json.loads(last_tool_result(reviewed["requests"], GREP))
    facts = [r for r in result["results"] if "MARLIN-5307" in json.dumps(r)]
    assert len(facts) == 1, result


def test_a_later_session_recalls_the_fact_from_the_parent_and_nothing_from_the_reviews(reviewed):
    result = json.loads(last_tool_result(reviewed["later_requests"], RECALL))
    assert any("MARLIN-5307" in json.dumps(h) for h in result["hits"]), result["hits"]
    assert {h.get("session_id") for h in result["hits"]} <= {reviewed["parent"]}, result["hits"]
    assert REVIEW_PROMPT not in json.dumps(result)


def test_no_exception_or_fallback_reaches_the_host(reviewed):
    logs = reviewed["home"].host_logs()
    assert FALLBACK_WARNING not in logs
    assert "failed (the host carries on)" not in logs and "hook failed" not in logs
    assert not [w for w in reviewed["run"]["warnings"] if "trove" in w.lower()], reviewed["run"]["warnings"]
