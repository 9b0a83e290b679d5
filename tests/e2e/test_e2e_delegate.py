"""``delegate_task`` under the real host: a child agent with its own engine copy and session.

The interactive CLI (``HermesCLI``, with the host's state.db) tells the agent a fact, then the
fake model calls the host's ``delegate_task`` (a top-level call runs the child in the background,
on the host's delegation pool, while the parent goes on). The child agent's goal makes the
fake model run the host's ``terminal`` tool over and over (about 5,000 tokens of output a call) until the
child's iteration budget (6) runs out in a 64K window, so the child's own engine copy compacts
(fresh tail 4).
``/trove status`` runs before the delegation, while the child runs and after it has finished
(the child's engine copy is then gone), then one more parent turn. The child's session takes the
parent's owner scope (``local``), so a later CLI session's ``trove_recall`` reaches what the child saw.

Hermes 0.19 never hands a child the context-engine tools (``delegate_task`` strips the
``context_engine`` toolset, whose tool list is empty), so the child cannot call ``trove_*``;
the test pins that too, so a host that starts passing them is noticed.
"""
from __future__ import annotations

import json
import re
from typing import Any

import pytest

from .harness import FALLBACK_WARNING, GATEWAY_DRIVER, chat_requests, query, request_tokens, tool_names

PARENT_FACT = "please remember: the parent vault code is HERON-4410."
CHILD_NOTE = "child note KESTREL-2290"
OUTPUT_END = "tok2499"  # the last word of each terminal result (about 5,000 tokens a result)
AFTER = "after the child: what next?"
CHILD_BUDGET = 6
TOOLSETS = ["todo", "terminal", "context_engine", "delegation"]
CHILD_SYSTEM = "You are a focused subagent"
WINDOW = 64000
POLICY = "TROVE recall policy"
LATER = f'a later session <<tool:trove_recall {json.dumps({"query": "KESTREL-2290", "include": "verbatim"})}>>'


def child_goal(note: str = CHILD_NOTE) -> str:
    """A short task whose answer takes repeated runs of ``terminal`` printing ``note`` and 2,500 words."""
    script = "print('" + note + " ' + ' '.join('tok%d' % i for i in range(2500)))"
    command = json.dumps({"command": 'python3 -c "' + script + '"'})
    return f"child task: keep noting. <<loop>> <<tool:terminal {command}>>"


def delegate(goal: str) -> str:
    """A parent turn whose tool marker calls delegate_task with ``goal``: the goal's braces and
    angle brackets are JSON escapes, so the parent's own marker parsing sees none of its markers."""
    return f'delegate this <<tool:delegate_task {{"goal": {escaped(goal)}, "background": false}}>>'


def delegate_batch(goals: list[str]) -> str:
    """A parent turn calling delegate_task with one task per goal (the host runs them in parallel)."""
    tasks = ", ".join('{"goal": ' + escaped(g) + "}" for g in goals)
    return f'fan out <<tool:delegate_task {{"tasks": [{tasks}], "background": false}}>>'


def escaped(goal: str) -> str:
    literal = json.dumps(goal)
    for char, escape in (("{", "\\u007b"), ("}", "\\u007d"), ("<", "\\u003c"), (">", "\\u003e")):
        literal = literal.replace(char, escape)
    return literal


def session_field(output: str, name: str) -> str:
    found = re.search(rf"^\s*{name}:\s*(\S+)", output, re.M)
    return found.group(1) if found else ""


@pytest.fixture(scope="module")
def delegated(make_home, fake_llm) -> dict[str, Any]:
    # config.yaml's model.context_length is every agent's window, the child's included (Hermes 0.19
    # reads custom_providers' per-model windows only without it): both run on 64K.
    home = make_home(context_length=WINDOW, TROVE_FRESH_TAIL_COUNT="4", TROVE_ENABLE_SLASH_COMMAND="1")
    with (home.home / "config.yaml").open("a", encoding="utf-8") as fh:
        fh.write(f"delegation:\n  max_iterations: {CHILD_BUDGET}\n")
    start = len(fake_llm.requests())
    run = home.run_driver({"mode": "cli", "toolsets": TOOLSETS, "max_iterations": 6,
                           "steps": [{"chat": PARENT_FACT}, {"command": "/trove status"},
                                     {"chat": delegate(child_goal())}, {"command": "/trove status"},
                                     {"wait_delegations": 120}, {"command": "/trove status"},
                                     {"chat": AFTER}]}, "delegate", timeout=240)
    requests = fake_llm.requests()[start:]
    sessions = query(home.db_path, "SELECT session_id, platform, scope FROM sessions ORDER BY created_at")
    start = len(fake_llm.requests())
    later = home.run_driver({"turns": [LATER], "max_iterations": 4}, "delegate-later")
    return {"home": home, "run": run, "requests": requests, "sessions": sessions,
            "parent": run["steps"][0]["session_id"], "later": later, "later_requests": fake_llm.requests()[start:]}


def child_requests(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The children's main requests: the host opens a child's system prompt with this line."""
    return [b for b in chat_requests(requests) if CHILD_SYSTEM in str(b["messages"][0].get("content"))]


def children(delegated: dict[str, Any]) -> list[str]:
    return [sid for sid, platform, _ in delegated["sessions"] if platform == "subagent"]


def test_the_child_is_stored_under_its_own_session_and_the_parent_keeps_its_own(delegated):
    db, parent = delegated["home"].db_path, delegated["parent"]
    assert [s[0] for s in delegated["sessions"] if s[0] != parent] == children(delegated)  # before the later run
    assert len(children(delegated)) == 1, delegated["sessions"]
    child = children(delegated)[0]
    results = "SELECT COUNT(*) FROM messages WHERE session_id = ? AND role = 'tool' AND content LIKE ?"
    assert query(db, results, (child, f"%{CHILD_NOTE} tok0 %{OUTPUT_END}%"))[0][0] >= CHILD_BUDGET - 1
    assert query(db, results, (parent, f"%{OUTPUT_END}%"))[0][0] == 0
    rows = query(db, "SELECT role, content FROM messages WHERE session_id = ? ORDER BY store_id", (parent,))
    assert [c for r, c in rows if r == "user"] == [PARENT_FACT, delegate(child_goal()), AFTER]
    assert len(rows) == 8  # fact, ack, delegating turn, its tool call, the dispatch record, ack, AFTER, ack
    child_rows = query(db, "SELECT role, content FROM messages WHERE session_id = ? ORDER BY store_id", (child,))
    assert child_rows[0] == ("user", child_goal())
    assert [r for r, _ in child_rows].count("tool") >= CHILD_BUDGET - 1  # the loop ran to its budget


def test_the_child_takes_the_parent_owner_scope_and_a_later_session_recalls_what_it_saw(delegated):
    db, parent, child = delegated["home"].db_path, delegated["parent"], children(delegated)[0]
    assert query(db, "SELECT scope, previous_session_id FROM sessions WHERE session_id = ?", (child,)) == \
        [("local", parent)]
    bodies = [b for b in chat_requests(delegated["later_requests"]) if b["messages"][-1].get("role") == "tool"]
    hits = json.loads(str(bodies[0]["messages"][-1]["content"]))["hits"]
    assert any(h.get("session_id") == child and "KESTREL" in json.dumps(h) for h in hits), hits


def test_the_child_compacted_with_its_own_nodes_and_the_parent_summaries_cover_only_parent_rows(delegated):
    db, child = delegated["home"].db_path, children(delegated)[0]
    nodes = dict(query(db, "SELECT session_id, COUNT(*) FROM summary_nodes GROUP BY session_id"))
    assert nodes.get(child, 0) >= 1, nodes
    crossing = query(db, "SELECT n.node_id, n.session_id, m.session_id FROM summary_nodes n"
                         " JOIN node_messages nm ON nm.node_id = n.node_id"
                         " JOIN messages m ON m.store_id = nm.store_id WHERE n.session_id != m.session_id")
    assert crossing == []  # no summary of either session folds the other's messages


def test_status_names_the_parent_conversation_before_and_after_the_delegation(delegated):
    steps = delegated["run"]["steps"]
    assert steps[4]["kind"] == "wait" and steps[4]["still_running"] == 0
    for step in (steps[1], steps[3], steps[5]):
        assert step["kind"] == "command"
        assert session_field(step["output"], "session_id") == delegated["parent"], step["output"][:400]
        assert session_field(step["output"], "bound") == "True"


def test_the_child_runs_on_its_small_window_and_every_request_of_it_stays_bounded(delegated):
    bodies = child_requests(delegated["requests"])
    sizes = [request_tokens(b) for b in bodies]
    assert max(sizes) < 0.6 * WINDOW, sizes
    assert any(b < a for a, b in zip(sizes, sizes[1:], strict=False)), sizes  # it compacted between tool calls
    # and its task survived every compaction: each request still carries the goal
    assert all(any(m.get("role") == "user" and child_goal() in str(m.get("content")) for m in b["messages"])
               for b in bodies)
    assert len(bodies) >= CHILD_BUDGET - 1


def test_the_child_gets_no_trove_tools_from_this_host_and_the_parent_keeps_them(delegated):
    bodies = chat_requests(delegated["requests"])
    child_bodies = child_requests(delegated["requests"])
    assert len(child_bodies) >= CHILD_BUDGET - 1
    assert all(not any(n.startswith("trove_") for n in tool_names(b)) for b in child_bodies)
    parent_bodies = [b for b in bodies if b not in child_bodies]
    assert all("trove_grep" in tool_names(b) for b in parent_bodies)
    # so trove does not tell the child to call tools it was not given; the parent still gets the policy
    assert not [b for b in child_bodies if POLICY in json.dumps(b["messages"])]
    assert POLICY in json.dumps(parent_bodies[0]["messages"])


def test_the_parent_turn_after_the_child_is_bounded_and_carries_none_of_the_child_transcript(delegated):
    bodies = chat_requests(delegated["requests"])
    after = [b for b in bodies if AFTER in json.dumps(b["messages"][-1:])]
    assert len(after) == 1
    text = json.dumps(after[0]["messages"])
    assert not [m for m in after[0]["messages"] if m.get("role") == "tool"
                and OUTPUT_END in str(m.get("content"))]  # no terminal result of the child
    assert PARENT_FACT in text
    assert request_tokens(after[0]) < 0.6 * WINDOW


def test_no_exception_or_fallback_reaches_the_host(delegated):
    logs = delegated["home"].host_logs()
    assert FALLBACK_WARNING not in logs
    assert "Traceback" not in logs and "failed (the host carries on)" not in logs
    assert not [w for w in delegated["run"]["warnings"] if "trove" in w.lower()], delegated["run"]["warnings"]


BATCH = [f"batch note GANNET-{n}" for n in (101, 202, 303)]


@pytest.fixture(scope="module")
def fanned(make_home, fake_llm) -> dict[str, Any]:
    """Three children at once (the host's default of three parallel children), each compacting."""
    home = make_home(context_length=WINDOW, TROVE_FRESH_TAIL_COUNT="4")
    with (home.home / "config.yaml").open("a", encoding="utf-8") as fh:
        fh.write(f"delegation:\n  max_iterations: {CHILD_BUDGET}\n")
    start = len(fake_llm.requests())
    run = home.run_driver({"mode": "cli", "toolsets": TOOLSETS, "max_iterations": 6,
                           "steps": [{"chat": PARENT_FACT}, {"chat": delegate_batch([child_goal(n) for n in BATCH])},
                                     {"wait_delegations": 180}, {"chat": AFTER}]}, "fan-out", timeout=300)
    return {"home": home, "run": run, "requests": fake_llm.requests()[start:], "parent": run["steps"][0]["session_id"]}


def test_parallel_children_each_store_their_own_transcript_once_and_compact_apart(fanned):
    db, parent = fanned["home"].db_path, fanned["parent"]
    assert fanned["run"]["steps"][2]["still_running"] == 0
    rows = query(db, "SELECT session_id, platform, scope, previous_session_id FROM sessions WHERE session_id != ?",
                 (parent,))
    assert len(rows) == 3 and {r[1:] for r in rows} == {("subagent", "local", parent)}, rows
    firsts = {}
    for sid, *_ in rows:
        stored = query(db, "SELECT role, content FROM messages WHERE session_id = ? ORDER BY store_id", (sid,))
        firsts[sid] = stored[0][1]
        assert [r for r, _ in stored].count("tool") >= CHILD_BUDGET - 1
        note = next(n for n in BATCH if n in stored[0][1])
        assert all(note in c for r, c in stored if r == "tool")  # only its own terminal results
        assert query(db, "SELECT COUNT(*) FROM summary_nodes WHERE session_id = ?", (sid,))[0][0] >= 1
    assert sorted(firsts.values()) == sorted(child_goal(n) for n in BATCH)
    crossing = query(db, "SELECT COUNT(*) FROM summary_nodes n JOIN node_messages nm ON nm.node_id = n.node_id"
                         " JOIN messages m ON m.store_id = nm.store_id WHERE n.session_id != m.session_id")
    assert crossing == [(0,)]
    sizes = [request_tokens(b) for b in child_requests(fanned["requests"])]
    assert len(sizes) >= 3 * (CHILD_BUDGET - 1) and max(sizes) < 0.6 * WINDOW, sizes
    assert [c for (c,) in query(db, "SELECT content FROM messages WHERE session_id = ? AND role = 'user'"
                                    " ORDER BY store_id", (parent,))] == \
        [PARENT_FACT, delegate_batch([child_goal(n) for n in BATCH]), AFTER]


def test_parallel_children_reach_no_error_in_the_host_log(fanned):
    logs = fanned["home"].host_logs()
    assert "database is locked" not in logs and "Traceback" not in logs
    assert "failed (the host carries on)" not in logs and FALLBACK_WARNING not in logs
    assert not [w for w in fanned["run"]["warnings"] if "trove" in w.lower()], fanned["run"]["warnings"]


GW = {"T": {"platform": "telegram", "user": "5151", "key": "agent:main:telegram:dm:5151"},
      "U": {"platform": "telegram", "user": "6262", "key": "agent:main:telegram:dm:6262"}}
GW_NOTE = "gateway child note OSPREY-3131"


def recall(query_text: str) -> str:
    return f'<<tool:trove_recall {json.dumps({"query": query_text, "include": "verbatim"})}>>'


@pytest.fixture(scope="module")
def in_chat(make_home, fake_llm) -> dict[str, Any]:
    """A Telegram chat delegates; another chat and the first chat's next session recall."""
    home = make_home()
    steps = [{"chat": "T", "text": delegate(f"child task from the chat: {GW_NOTE}")}, {"wait_delegations": 120},
             {"chat": "U", "text": recall("OSPREY-3131")}, {"chat": "T", "command": "/new"},
             {"chat": "T", "text": recall("OSPREY-3131")}]
    run = home.run_driver({"chats": GW, "state": str(home.root / "gw.json"), "steps": steps}, "gw-delegate",
                          timeout=300, script=GATEWAY_DRIVER)
    return {"home": home, "steps": run["steps"], "warnings": run["warnings"]}


def test_a_chats_child_takes_the_chats_scope_and_only_that_chat_recalls_it(in_chat):
    for s in in_chat["steps"]:
        assert "error" not in s, s["error"]
    assert in_chat["steps"][1]["still_running"] == 0
    db, parent = in_chat["home"].db_path, in_chat["steps"][0]["session_id"]
    [(child, scope, previous)] = query(db, "SELECT session_id, scope, previous_session_id FROM sessions"
                                           " WHERE platform = 'subagent'")
    assert (scope, previous) == (f"telegram:{GW['T']['key']}", parent)
    assert query(db, "SELECT role, content FROM messages WHERE session_id = ? ORDER BY store_id LIMIT 1",
                 (child,)) == [("user", f"child task from the chat: {GW_NOTE}")]
    other = json.loads(in_chat["steps"][2]["tool_results"]["trove_recall"])
    assert other["hits"] == [] and "gateway child note" not in json.dumps(other)
    own = json.loads(in_chat["steps"][4]["tool_results"]["trove_recall"])
    assert child in {h.get("session_id") for h in own["hits"]}, own["hits"]
    assert not [w for w in in_chat["warnings"] if "trove" in w.lower()], in_chat["warnings"]
