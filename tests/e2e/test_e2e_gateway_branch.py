"""``/branch`` in a gateway chat: the branch goes on from everything its parent had summarised.

One chat compacts its session into a summary DAG (small leaves, pairwise condensation), then
sends ``/branch``: the gateway copies the transcript into a new session (a session row marked as
branched from the parent) and builds a new agent for it. The branch carries every summary on the
parent's frontier, not only the deep ones a ``/new`` carries; after two more compactions in the
branch, each of those summaries still reaches the branch's prompt (directly or folded into the
branch's own). tests/e2e/gateway_driver.py replays the gateway's ``/branch``.
"""
from __future__ import annotations

import json
import re
from typing import Any

import pytest

from .harness import GATEWAY_DRIVER, chat_requests, query

CHATS = {"D": {"platform": "telegram", "user": "8888", "key": "agent:main:telegram:dm:8888"}}
BIG = " ".join(["filler words about the weather and the garden"] * 300)  # about 3,500 tokens


@pytest.fixture(scope="module")
def branched(make_home, fake_llm) -> dict[str, Any]:
    home = make_home(context_length=64000, TROVE_FRESH_TAIL_COUNT="4", TROVE_LEAF_CHUNK_TOKENS="1500",
                     TROVE_CONDENSATION_FANIN="2", TROVE_ENABLE_SLASH_COMMAND="1")
    steps = [{"chat": "D", "text": f"D turn {i}: {BIG}"} for i in range(8)] + [{"chat": "D", "command": "/branch"}]
    steps += [{"chat": "D", "text": f"D branch {i}: {BIG}"} for i in range(4)]
    steps.append({"chat": "D", "command": "/trove status"})
    start = len(fake_llm.requests())
    run = home.run_driver({"chats": CHATS, "state": str(home.root / "gateway-sessions.json"), "steps": steps},
                          "gw-branch", timeout=600, script=GATEWAY_DRIVER)
    branch = next(s for s in run["steps"] if s["step"].get("command") == "/branch")
    return {"home": home, "steps": run["steps"], "branch": branch, "warnings": run["warnings"],
            "requests": fake_llm.requests()[start:]}


def test_every_turn_ran_on_trove_in_the_parent_and_the_branch(branched):
    for s in branched["steps"]:
        assert "error" not in s, s["error"]
        assert s.get("engine_name", "trove") == "trove", s
    assert not [w for w in branched["warnings"] if "falling back" in w or "hermes_trove" in w]
    assert branched["branch"]["copied"] > 0
    later = [s for s in branched["steps"] if str(s["step"].get("text", "")).startswith("D branch")]
    assert {s["session_id"] for s in later} == {branched["branch"]["session_id"]}
    assert later[-1]["compression_count"] >= 1
    status = branched["steps"][-1]["text"]
    assert f"session_id: {branched['branch']['session_id']}" in status, status[:300]


def test_the_branch_carries_the_parents_whole_frontier(branched):
    db, parent, branch = (branched["home"].db_path, branched["branch"]["parent_session_id"],
                          branched["branch"]["session_id"])
    frontier = dict(query(db, "SELECT f.node_id, n.depth FROM session_frontier f JOIN summary_nodes n"
                              " ON n.node_id = f.node_id WHERE f.session_id = ?", (parent,)))
    assert [n for n, depth in frontier.items() if depth < 2], frontier  # more than a /new would carry
    carried = {n for (n,) in query(db, "SELECT node_id FROM carried_nodes WHERE session_id = ?", (branch,))}
    assert carried == set(frontier)
    assert query(db, "SELECT previous_session_id FROM sessions WHERE session_id = ?", (branch,)) == [(parent,)]
    last = chat_requests(branched["requests"])[-1]
    summary = str(last["messages"][1].get("content"))
    shown = {int(n) for n in re.findall(r"node (\d+)", summary)}
    reach = set(shown)
    for node in shown:  # a carried node the branch folded into one of its own summaries still reaches it
        reach |= {c for (c,) in query(db, "WITH RECURSIVE d(id) AS (SELECT ? UNION SELECT child_id FROM"
                                          " node_children JOIN d ON node_children.node_id = d.id) SELECT id FROM d",
                                      (node,))}
    assert carried <= reach, (sorted(carried), sorted(shown), json.dumps(summary)[:300])
