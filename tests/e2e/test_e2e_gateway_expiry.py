"""Three gateway chats over time: one switches to a much smaller window, one goes idle, one resumes.

Chat A grows to about 65,000 tokens on a 256K window, then ``/model`` moves its cached agent to
``fake-model-small`` (64K, from ``custom_providers``) in place; the gateway then restarts and builds
A's agent, and its ``/compress`` helper, on the small model (the session's override). Chat B says a
fact, then the expiry watcher finalizes its idle session and its next message opens a new one. Chat C
says a fact, ``/new``, and after the restart ``/resume``s its first session.

Checks: every request after the switch fits the small window, also after the restart; the first
turn is still found by ``trove_grep``; B's old session is ended in trove, the new one follows it in
the same scope and recalls the fact; C's next request shows the resumed transcript and its message is
stored there; every message is stored once (tests/e2e/gateway_driver.py).
"""
from __future__ import annotations

import json
from typing import Any

import pytest

from .harness import FALLBACK_WARNING, GATEWAY_DRIVER, chat_requests, content_counts, query, request_tokens

BIG, SMALL = 256000, 64000
CHATS = {name: {"platform": "telegram", "user": user, "key": f"agent:main:telegram:dm:{user}"}
         for name, user in (("A", "1111"), ("B", "2222"), ("C", "3333"))}
WORDS = ("amber", "basalt", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper")
B_FACT = "remember: my dog is called REX-7731"
C_FACT = "remember: the boat is called WREN-3"


def turn_text(i: int) -> str:  # about 9,000 tokens each
    head = f"gateway turn {i:02d}: " + ("the locker code is QX-5182. " if i == 1 else "")
    return (head + " ".join(f"{WORDS[(i + k) % len(WORDS)]}{k % 89}" for k in range(36000 // 7)))[:36000]


def tool(name: str, **args: Any) -> str:
    return f"run it <<tool:{name} {json.dumps(args)}>>"


@pytest.fixture(scope="module")
def idle(make_home, fake_llm) -> dict[str, Any]:
    home = make_home(context_length=BIG)
    with (home.home / "config.yaml").open("a", encoding="utf-8") as fh:
        fh.write(f"custom_providers:\n  - name: fake\n    base_url: {home.base_url}\n    api_key: sk-fake\n"
                 f"    models:\n      fake-model-small:\n        context_length: {SMALL}\n")
    state = str(home.root / "gw.json")
    first = [{"chat": "A", "text": turn_text(i)} for i in range(1, 8)]
    first += [{"chat": "A", "model": "fake-model-small"}, {"chat": "A", "text": "after the switch"},
              {"chat": "A", "text": tool("trove_grep", query="QX-5182")},
              {"chat": "B", "text": B_FACT}, {"chat": "B", "command": "expire"},
              {"chat": "B", "text": "back after a quiet week"},
              {"chat": "B", "text": tool("trove_recall", query="dog")}]
    first += [{"chat": "C", "text": C_FACT}, {"chat": "C", "command": "/new"}, {"chat": "C", "text": "a new topic"}]
    second = [{"chat": "A", "text": turn_text(i)} for i in range(8, 11)]
    second += [{"chat": "A", "command": "/compress"}, {"chat": "A", "text": "after the restart"}]
    start = len(fake_llm.requests())
    run1 = home.run_driver({"chats": CHATS, "state": state, "steps": first}, "idle-1", timeout=600,
                           script=GATEWAY_DRIVER)
    switched = next(i for i, r in enumerate(fake_llm.requests()) if i >= start
                    and "after the switch" in json.dumps(r["body"].get("messages")))
    c_first = next(s for s in run1["steps"] if s["step"].get("text") == C_FACT)["session_id"]
    second += [{"chat": "C", "command": f"/resume {c_first}"}, {"chat": "C", "text": "back on the boat topic"}]
    run2 = home.run_driver({"chats": CHATS, "state": state, "steps": second}, "idle-2", timeout=600,
                           script=GATEWAY_DRIVER)
    return {"home": home, "steps": run1["steps"] + run2["steps"], "warnings": run1["warnings"] + run2["warnings"],
            "before": chat_requests(fake_llm.requests()[start:switched]),
            "after": chat_requests(fake_llm.requests()[switched:])}


def test_a_chat_resumed_after_a_restart_goes_on_in_the_session_it_resumed(idle):
    c = turns(idle, "C")
    old, new, back = c[0]["session_id"], c[1]["session_id"], c[2]
    assert old != new and back["session_id"] == old
    body = [b for b in idle["after"] if "back on the boat topic" in json.dumps(b["messages"][-1])][0]
    said = json.dumps(body["messages"])
    assert C_FACT in said and "a new topic" not in said  # the resumed transcript, not the one it left
    rows = query(idle["home"].db_path, "SELECT session_id FROM messages WHERE content = ?", ("back on the boat topic",))
    assert rows == [(old,)]


def turns(idle: dict[str, Any], chat: str) -> list[dict[str, Any]]:
    return [s for s in idle["steps"] if s["step"].get("chat") == chat and "text" in s["step"]]


def test_every_step_ran_on_trove_without_an_error(idle):
    for s in idle["steps"]:
        assert "error" not in s, s["error"]
        assert s.get("engine_name", "trove") == "trove", s
    assert not [w for w in idle["warnings"] if FALLBACK_WARNING in w or "hermes_trove" in w], idle["warnings"]
    switch = next(s for s in idle["steps"] if "model" in s["step"])
    assert switch["context_length"] == SMALL and switch["threshold_tokens"] < SMALL, switch


def test_every_request_after_the_switch_fits_the_small_window_also_after_the_restart(idle):
    before = [request_tokens(b) for b in idle["before"]]
    after = [request_tokens(b) + len(json.dumps(b.get("tools") or [])) // 4 for b in idle["after"]]
    assert max(before) > SMALL, before  # the chat alone no longer fit the small window
    assert len(after) >= 6 and max(after) < SMALL, after
    grep = json.loads(turns(idle, "A")[8]["tool_results"]["trove_grep"])
    assert grep["total_results"] >= 1 and "QX-5182" in json.dumps(grep)


def test_an_expired_chat_session_ends_and_the_next_one_follows_it_and_recalls_it(idle):
    b = turns(idle, "B")
    old, new = b[0]["session_id"], b[1]["session_id"]
    rows = {sid: (ended, scope, prev) for sid, ended, scope, prev in query(
        idle["home"].db_path, "SELECT session_id, ended_at, scope, previous_session_id FROM sessions")}
    first = query(idle["home"].db_path, "SELECT MIN(created_at) FROM messages WHERE session_id = ?", (new,))[0][0]
    assert old != new and rows[old][0] is not None and rows[old][0] <= first  # ended before B spoke again
    assert rows[new][1] == rows[old][1] == f"telegram:{CHATS['B']['key']}" and rows[new][2] == old
    assert "REX-7731" in b[2]["tool_results"]["trove_recall"]


def test_every_message_is_stored_once(idle):
    counts = content_counts(idle["home"].db_path)
    for s in turns(idle, "A") + turns(idle, "B") + turns(idle, "C"):
        assert counts.get(("user", s["step"]["text"])) == 1, s["step"]["text"][:60]
