"""One-shot ``hermes chat -q`` runs, each a new session, and ``--continue`` resuming the newest.

In a 64K window with the CLI's own tool schemas (about 17,000 tokens of fixed overhead): run A
tells a short fact; run B, a new session, pastes about 7,000 tokens that open with a second fact;
run C (``--continue``) resumes B, not A, with another paste, so it compacts B's first turn
before its main request; run D (``--continue``) greps B's fact; run E, a new session again,
recalls A's fact with ``trove_recall``. Trove must hold three sessions, every message once, B's
frontier must survive the processes and be shown to D's model, and recall from E (the default
scope: every local CLI session) must find A's fact in A.
"""
from __future__ import annotations

import json
import re
from typing import Any

import pytest

from .harness import FALLBACK_WARNING, chat_requests, content_counts, query, request_tokens

CONTEXT_LENGTH = 64000
PASTE_CHARS = 28000  # about 7,000 tokens
WORDS = ("amber", "basalt", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper")
NODE_LABEL = re.compile(r"\[d\d+ node \d+ \|")
FACT_A = "oneshot A: remember that the rowing boat is named PELICAN-2291."
GREP_B = json.dumps({"query": "SHED-8812"})
RECALL_A = json.dumps({"query": "rowing boat named"})


def paste(i: int, head: str) -> str:
    body = " ".join(f"{WORDS[(i + k) % len(WORDS)]}{k % 89}" for k in range(PASTE_CHARS // 7))
    return (head + " " + body)[:PASTE_CHARS]


RUNS = [  # (message, flags)
    (FACT_A, []),
    (paste(1, "oneshot B: the garden shed code is SHED-8812."), []),
    (paste(2, "oneshot C: a second pasted log."), ["--continue"]),
    (f"oneshot D: what was the shed code? <<tool:trove_grep {GREP_B}>>", ["--continue"]),
    (f"oneshot E: what was the boat called? <<tool:trove_recall {RECALL_A}>>", []),
]


def _session(out: str) -> str:
    found = re.search(r"session_id:\s*(\S+)", out)
    assert found, out[-2000:]
    return found.group(1)


@pytest.fixture(scope="module")
def oneshots(make_home, fake_llm) -> dict[str, Any]:
    home = make_home(context_length=CONTEXT_LENGTH)
    runs = []
    for text, flags in RUNS:
        start = len(fake_llm.requests())
        done = home.run_cli(["chat", "-Q", "-q", text, *flags])
        out = done.stdout + done.stderr
        runs.append({"session": _session(out), "out": out, "requests": fake_llm.requests()[start:]})
    return {"home": home, "runs": runs}


def _tool_result(run: dict[str, Any]) -> dict[str, Any]:
    bodies = [b for b in chat_requests(run["requests"]) if b["messages"][-1].get("role") == "tool"]
    assert bodies, "the tool never ran"
    return dict(json.loads(bodies[0]["messages"][-1]["content"]))


def test_one_shots_are_new_sessions_and_continue_resumes_the_newest(oneshots):
    a, b, c, d, e = (r["session"] for r in oneshots["runs"])
    assert len({a, b, e}) == 3 and c == b and d == b
    for run in oneshots["runs"]:
        assert FALLBACK_WARNING not in run["out"]
    db = oneshots["home"].db_path
    assert sorted(query(db, "SELECT session_id FROM sessions")) == sorted([(a,), (b,), (e,)])


def test_every_message_is_stored_once_in_its_own_session(oneshots):
    db = oneshots["home"].db_path
    a, b, _, _, e = (r["session"] for r in oneshots["runs"])
    assert [c for (r, c), n in content_counts(db, a).items() if r == "user"] == [FACT_A]
    users_b = [(c, n) for (r, c), n in content_counts(db, b).items() if r == "user"]
    assert sorted(users_b) == sorted((text, 1) for text, _ in RUNS[1:4]), [(c[:30], n) for c, n in users_b]
    assert all(n == 1 for sid in (a, b, e) for n in content_counts(db, sid).values())
    assert [c for (r, c), n in content_counts(db, e).items() if r == "user"] == [RUNS[4][0]]


def test_the_continued_session_keeps_its_frontier_across_processes(oneshots):
    db, b = oneshots["home"].db_path, oneshots["runs"][1]["session"]
    frontier = query(db, "SELECT f.node_id FROM session_frontier f JOIN summary_nodes n ON n.node_id = f.node_id"
                         " WHERE f.session_id = ? AND n.session_id = ?", (b, b))
    assert frontier, "run C never compacted B"
    foreign = query(db, "SELECT COUNT(*) FROM node_messages nm JOIN messages m ON m.store_id = nm.store_id"
                        " JOIN summary_nodes n ON n.node_id = nm.node_id WHERE m.session_id != n.session_id")
    assert foreign[0][0] == 0
    d = oneshots["runs"][3]
    first = chat_requests(d["requests"])[0]
    assert NODE_LABEL.search(json.dumps(first["messages"])), "run D's model was not shown B's summary"
    assert "oneshot B: the garden shed code" not in json.dumps(first["messages"])  # compacted out of the prompt
    assert max(request_tokens(body) for r in oneshots["runs"] for body in chat_requests(r["requests"])) \
        < int(CONTEXT_LENGTH * 0.6)


def test_grep_in_the_continued_session_finds_the_compacted_fact(oneshots):
    found = _tool_result(oneshots["runs"][3])
    b = oneshots["runs"][1]["session"]
    first_b = query(oneshots["home"].db_path, "SELECT MIN(store_id) FROM messages WHERE session_id = ?", (b,))[0][0]
    assert first_b in [r.get("store_id") for r in found["results"]], found["results"]


def test_a_new_one_shot_recalls_the_first_sessions_fact(oneshots):
    result = _tool_result(oneshots["runs"][4])
    a = oneshots["runs"][0]["session"]
    first_a = query(oneshots["home"].db_path, "SELECT MIN(store_id) FROM messages WHERE session_id = ?", (a,))[0][0]
    hits = [h for h in result["hits"] if h.get("store_id") == first_a]
    assert hits and hits[0]["session_id"] == a and hits[0]["from_current_session"] is False, result["hits"]
