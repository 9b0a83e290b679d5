"""Transcripts the host rewrites in gateway chats: ``/undo``, ``/retry`` and the todo snapshot.

Three chats interleave in one gateway process. Chat R tells the agent a code and takes the turn
back with ``/undo``; chat S asks a question and asks again with ``/retry``; chat T has the model
write a todo list, so after each compaction Hermes appends its todo snapshot, which it merges into
the user message before it (and keeps so in the transcript the gateway reloads each turn). All
three talk on until trove compacts them. The taken-back turn and the replaced answer stay stored
in trove.db (beneath the new summaries, so ``trove_expand`` reaches them), but no summary request
shows them to the model: the host hides rewound turns from re-prompts, and so does trove. Every
message of chat T is stored exactly once and the snapshot, the host's text, never
(tests/e2e/gateway_driver.py builds the agents and replays the gateway's commands).
"""
from __future__ import annotations

import json
import re
from typing import Any

import pytest

from .harness import GATEWAY_DRIVER, aux_requests, chat_requests, content_counts, query, request_tokens

WINDOW = 64000
CHATS = {"R": {"platform": "telegram", "user": "5555", "key": "agent:main:telegram:dm:5555"},
         "S": {"platform": "discord", "user": "6666", "key": "agent:main:discord:dm:6666"},
         "T": {"platform": "telegram", "user": "7777", "key": "agent:main:telegram:dm:7777"}}
BIG = " ".join(["filler words about the weather and the garden"] * 300)  # about 3,500 tokens
UNDONE = "please remember: my door code is KESTREL-1234. " + BIG  # long: a model summarises its leaf
QUESTION = "S question: what is the capital of France? " + BIG
TODO = 'plan it <<tool:todo {"todos": [{"id": "1", "content": "water the plants", "status": "pending"}]}>>'
SNAPSHOT = "[Your active task list was preserved across context compression]"


@pytest.fixture(scope="module")
def rewound(make_home, fake_llm) -> dict[str, Any]:
    home = make_home(context_length=WINDOW, TROVE_FRESH_TAIL_COUNT="4", TROVE_LEAF_CHUNK_TOKENS="1500")
    steps = [{"chat": "R", "text": "R: hello"}, {"chat": "S", "text": "S: hello"},
             {"chat": "R", "text": f"R turn 0: {BIG}"}, {"chat": "S", "text": QUESTION},
             {"chat": "R", "text": UNDONE}, {"chat": "S", "command": "/retry"}, {"chat": "R", "command": "/undo"},
             {"chat": "T", "text": TODO}]
    for i in range(1, 6):
        steps += [{"chat": c, "text": f"{c} turn {i}: {BIG}"} for c in CHATS]
    start = len(fake_llm.requests())
    run = home.run_driver({"chats": CHATS, "state": str(home.root / "gateway-sessions.json"), "steps": steps},
                          "gw-rewind", timeout=600, script=GATEWAY_DRIVER)
    return {"home": home, "steps": run["steps"], "warnings": run["warnings"],
            "requests": fake_llm.requests()[start:]}


def said(run: dict[str, Any], chat: str, key: str, value: str) -> dict[str, Any]:
    return next(s for s in run["steps"] if s["step"].get("chat") == chat and s["step"].get(key) == value)


def test_every_turn_ran_on_trove_and_both_chats_compacted(rewound):
    for s in rewound["steps"]:
        assert "error" not in s, s["error"]
        assert s.get("engine_name", "trove") == "trove", s
    assert not [w for w in rewound["warnings"] if "falling back" in w or "hermes_trove" in w], rewound["warnings"]
    assert said(rewound, "R", "command", "/undo")["rewound"] == 2
    last = {s["step"]["chat"]: s for s in rewound["steps"] if "text" in s["step"]}
    db = rewound["home"].db_path
    for chat in CHATS:
        assert last[chat]["compression_count"] >= 1, (chat, last[chat])
        assert query(db, "SELECT COUNT(*) FROM summary_nodes WHERE session_id = ?",
                     (last[chat]["session_id"],))[0][0] >= 1
    for body in chat_requests(rewound["requests"]):
        assert request_tokens(body) + len(json.dumps(body.get("tools") or [])) // 4 < WINDOW


def test_a_chat_with_a_todo_list_stores_each_message_once_and_never_the_snapshot(rewound):
    db = rewound["home"].db_path
    turns = [s for s in rewound["steps"] if s["step"].get("chat") == "T"]
    assert "water the plants" in turns[0]["tool_results"]["todo"]
    assert turns[-1]["compression_count"] >= 1
    counts = content_counts(db, turns[0]["session_id"])
    for t in turns:
        text = t["step"]["text"]
        assert counts.get(("user", text)) == 1, (text[:40], counts.get(("user", text)))
    assert not [text for (role, text) in counts if SNAPSHOT in str(text)]
    assert sum(n for (role, _), n in counts.items() if role == "user") == len(turns)


def test_what_was_taken_back_stays_stored_once_and_beneath_a_summary(rewound):
    db = rewound["home"].db_path
    old_answer = said(rewound, "S", "text", QUESTION)["final"]
    for chat, text in (("R", UNDONE), ("S", QUESTION), ("S", old_answer)):
        sid = said(rewound, chat, "text", "R: hello" if chat == "R" else "S: hello")["session_id"]
        role = "assistant" if text == old_answer else "user"
        assert content_counts(db, sid).get((role, text)) == 1, (chat, text)
        covered = query(db, "SELECT COUNT(*) FROM node_messages n JOIN messages m ON m.store_id = n.store_id"
                            " WHERE m.session_id = ? AND m.content = ?", (sid, text))
        assert covered[0][0] == 1, (chat, text)


def test_no_summary_is_written_from_an_undone_turn_or_a_replaced_answer(rewound):
    old_answer = said(rewound, "S", "text", QUESTION)["final"]
    new_answer = said(rewound, "S", "command", "/retry")["final"]
    assert old_answer != new_answer
    prompts = [str(b["messages"][0].get("content")) for b in aux_requests(rewound["requests"])]
    nodes = [text for (text,) in query(rewound["home"].db_path, "SELECT summary FROM summary_nodes")]
    summarised = "\n".join(prompts + nodes)  # what the summary model read, and what trove wrote
    assert "KESTREL" not in summarised
    assert not re.search(rf"\]: {re.escape(old_answer)}\b", summarised), old_answer
    assert prompts and f"]: {QUESTION[:40]}" in summarised  # the chat around them was summarised


def test_each_chats_last_request_shows_every_message_past_its_summaries(rewound):
    """Nothing a chat said left the model's view unsummarised: each stored message is beneath a
    summary node or, past them, in the chat's last request (raw, or merged by the host)."""
    db, bodies = rewound["home"].db_path, chat_requests(rewound["requests"])
    last = {s["step"]["chat"]: s for s in rewound["steps"] if "text" in s["step"]}
    for chat, step in last.items():
        sid = step["session_id"]
        body = [b for b in bodies if any(step["step"]["text"] in str(m.get("content")) for m in b["messages"])][-1]
        shown = [str(m.get("content") or "") for m in body["messages"]]
        covered = {i for (i,) in query(db, "SELECT n.store_id FROM node_messages n JOIN summary_nodes s"
                                           " ON s.node_id = n.node_id WHERE s.session_id = ?", (sid,))}
        rows = query(db, "SELECT store_id, content FROM messages WHERE session_id = ? AND role IN ('user', 'assistant')"
                         " AND content != ''", (sid,))
        lost = [(i, text[:40]) for i, text in rows if i not in covered and not any(text in s for s in shown)
                and text != step["final"]]  # the last answer came from that request
        assert not lost, (chat, lost)
