"""One gateway process serving several chats, through the agents the Hermes gateway builds.

Telegram and Discord chats interleave and run in threads (one compacting while the other's
tools run, long tool outputs included), one chat sends ``/new``, one ``/compress``, one arrives
with a long transcript written before trove saw it, so the gateway's session hygiene compacts it
first, and then the process restarts. Every message is stored once in its own session and
scope, no chat reads another chat's or the owner's CLI memory through any tool, ``/new`` keeps
the chat's deep summaries, and no request passes the model's window (tests/e2e/gateway_driver.py
builds the agents).
"""
from __future__ import annotations

import json
from typing import Any

import pytest

from .harness import GATEWAY_DRIVER, chat_requests, content_counts, query, request_tokens, tool_names

WINDOW = 64000
CHATS = {name: {"platform": platform, "user": user, "key": f"agent:main:{platform}:dm:{user}"}
         for name, platform, user in (("A", "telegram", "1111"), ("B", "discord", "2222"), ("D", "telegram", "4444"))}
A_FACT = "please remember: my gym locker code is OSPREY-7731."
B_FACT = "please remember: my bank pin is HERON-4242."
CLI_FACT = "please remember: the owner's vault phrase is MARLIN-5150."
BIG = " ".join(["filler words about the weather and the garden"] * 300)  # about 3,500 tokens


def tool(name: str, **args: Any) -> str:
    return f"run it <<tool:{name} {json.dumps(args)}>>"


def scope(name: str) -> str:
    return f"{CHATS[name]['platform']}:{CHATS[name]['key']}"


@pytest.fixture(scope="module")
def gateway(make_home, fake_llm, tmp_path_factory) -> dict[str, Any]:
    # a short tail lets /compress find work in short chats; small leaves and fan-in 2 grow chat A's DAG
    # past depth 2, the summaries its next session keeps after /new
    home = make_home(context_length=WINDOW, TROVE_FRESH_TAIL_COUNT="8", TROVE_LEAF_CHUNK_TOKENS="1500",
                     TROVE_CONDENSATION_FANIN="2", TROVE_ENABLE_SLASH_COMMAND="1")
    big_file = tmp_path_factory.mktemp("files") / "big.txt"
    big_file.write_text("".join(f"line {i}: the quick brown fox {i * 7}\n" for i in range(8000)), encoding="utf-8")
    cli = home.run_driver({"turns": [CLI_FACT, "thanks"]}, "gw-cli")
    state = str(home.root / "gateway-sessions.json")
    first = [
        {"chat": "A", "text": A_FACT},
        {"chat": "B", "text": B_FACT},
        {"parallel": [
            {"seq": [{"chat": "A", "text": f"A turn {i}: {BIG}"} for i in range(5)]},
            {"seq": [{"chat": "B", "text": tool("read_file", path=str(big_file))},
                     {"chat": "B", "text": tool("terminal", command=f"cat {big_file}")},
                     {"chat": "B", "text": tool("trove_grep", query="locker code", session_scope="all")},
                     {"chat": "B", "text": tool("trove_recall", query="gym locker code")}]}]},
        {"chat": "D", "seed": 40, "size": 4000},
        {"chat": "D", "command": "hygiene"},
        {"chat": "D", "text": tool("trove_grep", query="vault phrase", session_scope="all")},
        {"chat": "D", "text": tool("trove_recall", query="vault phrase")},
        {"chat": "A", "command": "/new"},
        {"chat": "A", "text": tool("trove_describe")},
        {"chat": "B", "command": "/compress locker"},
        {"chat": "B", "command": "/new"},
        {"chat": "B", "text": tool("trove_recall", query="bank pin")},
    ]
    start = len(fake_llm.requests())
    run1 = home.run_driver({"chats": CHATS, "state": state, "steps": first}, "gw-run1", timeout=600,
                           script=GATEWAY_DRIVER)
    a_session = flat(run1["steps"])[0]["session_id"]  # A's first session, which holds the fact
    secret = query(home.db_path, "SELECT store_id FROM messages WHERE content = ?", (A_FACT,))[0][0]
    second = [  # the same chats after a restart; A's new agent binds last, then B types /trove
        {"chat": "B", "text": tool("trove_load_session", session_id=a_session)},
        {"chat": "B", "text": tool("trove_expand", store_id=secret)},
        {"chat": "B", "text": tool("trove_grep", query="OSPREY", session_scope="all")},
        {"chat": "A", "text": "back after the restart"},
        {"chat": "B", "command": "/trove status"},
        {"chat": "B", "command": "/trove rotate apply"},
    ]
    run2 = home.run_driver({"chats": CHATS, "state": state, "steps": second}, "gw-run2", timeout=600,
                           script=GATEWAY_DRIVER)
    return {"home": home, "cli": cli, "run1": run1, "run2": run2, "requests": fake_llm.requests()[start:]}


def flat(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for s in steps:
        out += flat(s.get("parallel") or s.get("seq") or []) if ("parallel" in s or "seq" in s) else [s]
    return out


def turns(gateway: dict[str, Any], chat: str) -> list[dict[str, Any]]:
    steps = flat(gateway["run1"]["steps"]) + flat(gateway["run2"]["steps"])
    return [s for s in steps if s["step"].get("chat") == chat and "text" in s["step"]]


def test_every_step_ran_on_trove_without_an_error(gateway):
    for s in flat(gateway["run1"]["steps"]) + flat(gateway["run2"]["steps"]):
        assert "error" not in s, s["error"]
        if "engine_name" in s:
            assert s["engine_name"] == "trove", s
    warnings = gateway["run1"]["warnings"] + gateway["run2"]["warnings"]
    assert not [w for w in warnings if "falling back" in w or "hermes_trove" in w], warnings


def test_a_chat_first_compacted_by_session_hygiene_keeps_its_own_scope(gateway):
    d = turns(gateway, "D")
    rows = dict(query(gateway["home"].db_path, "SELECT session_id, scope FROM sessions"))
    assert rows[d[0]["session_id"]] == scope("D")
    for t in d:
        for name, text in t["tool_results"].items():
            assert "MARLIN-5150" not in text, (name, text)
    assert json.loads(d[0]["tool_results"]["trove_grep"])["total_results"] == 0


def test_every_chat_message_is_stored_once_in_its_own_session_and_scope(gateway):
    db = gateway["home"].db_path
    rows = dict(query(db, "SELECT session_id, scope FROM sessions"))
    for chat in CHATS:
        for t in turns(gateway, chat):
            assert rows[t["session_id"]] == scope(chat), (chat, t["session_id"])
            counts = content_counts(db, t["session_id"])
            text = t["step"]["text"]
            assert counts.get(("user", text)) == 1, (chat, text[:60], counts.get(("user", text)))
            assert sum(n for (role, content), n in content_counts(db).items() if content == text) == 1
    b = turns(gateway, "B")
    assert b[0]["session_id"] != b[-1]["session_id"]  # /new gave the chat a new session
    seeded = query(db, "SELECT session_id, COUNT(*), COUNT(DISTINCT content) FROM messages"
                       " WHERE content LIKE 'seeded question %' GROUP BY session_id")
    assert seeded == [(turns(gateway, "D")[0]["session_id"], 40, 40)]  # hygiene stored D's old transcript once


def test_no_chat_reads_another_chats_or_the_owners_memory_through_any_tool(gateway):
    for chat, foreign in (("B", ("OSPREY-7731", "MARLIN-5150")), ("D", ("OSPREY-7731", "HERON-4242", "MARLIN-5150"))):
        for t in turns(gateway, chat):
            for name, text in t["tool_results"].items():
                assert not [f for f in foreign if f in text], (chat, name, text[:300])
    b = {name: text for t in turns(gateway, "B") for name, text in t["tool_results"].items()}
    assert "no stored session" in b["trove_load_session"] and "no stored message" in b["trove_expand"]
    assert "HERON-4242" in b["trove_recall"]  # after /new the chat still recalls its own earlier session


def test_no_request_passes_the_window_and_every_main_request_offers_the_trove_tools(gateway):
    bodies = chat_requests(gateway["requests"])
    assert bodies
    for body in bodies:
        tools = len(json.dumps(body.get("tools") or [])) // 4
        assert request_tokens(body) + tools < WINDOW, (request_tokens(body), tools)
        if "trove_grep" not in tool_names(body):
            assert tool_names(body) == ["memory"] or not any(n.startswith("trove_") for n in tool_names(body))
    compactions = [t["compression_count"] for t in turns(gateway, "A")]
    assert max(compactions) >= 1  # chat A compacted while chat B's tools ran
    manual = [s for s in flat(gateway["run1"]["steps"]) if s["step"].get("command") == "/compress locker"][0]
    assert manual["engine_name"] == "trove" and manual["in_place"] and manual["after"] < manual["before"], manual
    nodes = dict(query(gateway["home"].db_path, "SELECT session_id, COUNT(*) FROM summary_nodes GROUP BY 1"))
    for sid in (manual["session_id"], turns(gateway, "D")[0]["session_id"]):  # trove summarised, not Hermes
        assert nodes.get(sid, 0) >= 1, (sid, nodes)


def test_new_in_a_gateway_chat_carries_that_chats_deep_summaries(gateway):
    a = turns(gateway, "A")
    old, new = a[0]["session_id"], [t for t in a if "trove_describe" in t["tool_results"]][0]
    db = gateway["home"].db_path
    deep = {n for (n,) in query(db, "SELECT node_id FROM summary_nodes WHERE session_id = ? AND depth >= 2", (old,))}
    carried = {n for (n,) in query(db, "SELECT node_id FROM carried_nodes WHERE session_id = ?", (new["session_id"],))}
    assert new["session_id"] != old and deep and carried and carried <= deep
    described = json.loads(new["tool_results"]["trove_describe"])
    assert described["total_nodes"] == len(carried)


def test_trove_commands_from_a_chat_act_on_that_chats_session_not_the_last_active_one(gateway):
    b_session = turns(gateway, "B")[-1]["session_id"]
    a_sessions = {t["session_id"] for t in turns(gateway, "A")}
    said = {s["step"]["command"]: s["text"] for s in flat(gateway["run2"]["steps"]) if "command" in s["step"]}
    assert f"session_id: {b_session}" in said["/trove status"], said["/trove status"][:600]
    assert f"session_id: {b_session}" in said["/trove rotate apply"], said["/trove rotate apply"]
    for sid in a_sessions:
        assert sid not in said["/trove status"] and sid not in said["/trove rotate apply"]
    rotated = query(gateway["home"].db_path, "SELECT session_id FROM sessions WHERE last_rotate_at IS NOT NULL")
    assert not {sid for (sid,) in rotated} & a_sessions, rotated
