"""``/new`` under the real CLI: summaries of depth >= 2 carry into the fresh session.

One host process holds the interactive CLI object (``cli.HermesCLI``). Sixteen turns of
about 2,000 tokens in a 64K window compact with small leaves (``TROVE_LEAF_CHUNK_TOKENS``
1500) and pairwise condensation (``TROVE_CONDENSATION_FANIN`` 2), so the DAG grows past
depth 2. Then ``/new --yes`` goes through ``HermesCLI.process_command`` (the CLI's own
``new_session``: ``on_session_end``, new id, ``reset_session_state``, rebinding), and one
more turn runs in the new session, where the fake model calls ``trove_describe``.
"""
from __future__ import annotations

import json
from typing import Any

import pytest

from .harness import chat_requests, query

CONTEXT_LENGTH = 64000
RETAIN_DEPTH = 2
OLD_TURNS = 16
WORDS = ("amber", "basalt", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper")
NEW_TURN = "new session turn: what do you still know? <<tool:trove_describe {}>>"


def old_turn(i: int, chars: int = 8000) -> str:
    head = f"old turn {i:02d} about {WORDS[i % len(WORDS)]}-{i}: "
    body = " ".join(f"{WORDS[(i + k) % len(WORDS)]}{k % 89}" for k in range(chars // 8))
    return (head + body)[:chars]


OLD = [old_turn(i) for i in range(1, OLD_TURNS + 1)]


@pytest.fixture(scope="module")
def new_run(make_home, fake_llm) -> dict[str, Any]:
    home = make_home(context_length=CONTEXT_LENGTH, TROVE_CONTEXT_THRESHOLD="0.5", TROVE_FRESH_TAIL_COUNT="6",
                     TROVE_LEAF_CHUNK_TOKENS="1500", TROVE_CONDENSATION_FANIN="2",
                     TROVE_NEW_SESSION_RETAIN_DEPTH=str(RETAIN_DEPTH))
    start = len(fake_llm.requests())
    steps = [{"chat": text} for text in OLD] + [{"command": "/new --yes"}, {"chat": NEW_TURN}]
    result = home.run_driver({"mode": "cli", "steps": steps, "max_iterations": 6}, "lifecycle", timeout=900)
    new_step = result["steps"][OLD_TURNS]
    return {"home": home, "result": result, "requests": fake_llm.requests()[start:],
            "old": new_step["session_before"], "new": new_step["session_id"], "new_step": new_step,
            "last_step": result["steps"][-1]}


def _db(run: dict[str, Any], sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    return query(run["home"].db_path, sql, params)


def _new_session_bodies(run: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in chat_requests(run["requests"])
            if any(m.get("role") == "user" and NEW_TURN in str(m.get("content")) for m in b["messages"])]


def test_the_old_session_compacted_into_a_dag_of_depth_two_or_more(new_run):
    old_turns = new_run["result"]["steps"][:OLD_TURNS]
    assert all(s["engine_name"] == "trove" for s in old_turns)
    assert old_turns[-1]["compression_count"] >= 1, [s["compression_count"] for s in old_turns]
    depth = _db(new_run, "SELECT MAX(depth) FROM summary_nodes WHERE session_id = ?", (new_run["old"],))[0][0]
    assert depth is not None and depth >= RETAIN_DEPTH


def test_new_gives_the_cli_agent_and_engine_a_different_session_id(new_run):
    step, last = new_run["new_step"], new_run["last_step"]
    assert step["kind"] == "command" and step["keep_running"] is True
    assert "New session started" in step["output"]
    assert new_run["old"] and new_run["new"] and new_run["new"] != new_run["old"]
    assert step["agent_session_id"] == step["engine_session_id"] == new_run["new"]
    assert last["session_id"] == last["engine_session_id"] == new_run["new"]
    assert new_run["result"]["final_session_id"] == new_run["new"]
    sessions = {r[0] for r in _db(new_run, "SELECT session_id FROM sessions")}
    assert sessions == {new_run["old"], new_run["new"]}


def test_the_new_session_carries_exactly_the_old_frontier_nodes_of_the_retained_depth(new_run):
    carried = _db(new_run, "SELECT c.node_id, n.depth, c.from_session_id, n.session_id FROM carried_nodes c "
                           "JOIN summary_nodes n ON n.node_id = c.node_id WHERE c.session_id = ?", (new_run["new"],))
    assert carried, "no summary node was carried into the new session"
    assert all(depth >= RETAIN_DEPTH for _, depth, _, _ in carried), carried
    assert all(src == owner == new_run["old"] for _, _, src, owner in carried), carried
    old_frontier = _db(new_run, "SELECT n.node_id FROM session_frontier f JOIN summary_nodes n "
                                "ON n.node_id = f.node_id WHERE f.session_id = ? AND n.depth >= ?",
                       (new_run["old"], RETAIN_DEPTH))
    assert sorted(r[0] for r in carried) == sorted(r[0] for r in old_frontier)
    owned = _db(new_run, "SELECT COUNT(*) FROM summary_nodes WHERE session_id = ?", (new_run["new"],))
    assert owned[0][0] == 0


def test_the_new_turn_is_stored_under_the_new_session_only(new_run):
    rows = _db(new_run, "SELECT role, content, tool_calls FROM messages WHERE session_id = ? ORDER BY store_id",
               (new_run["new"],))
    assert [r[0] for r in rows] == ["user", "assistant", "tool", "assistant"], rows
    assert rows[0][1] == NEW_TURN
    assert "trove_describe" in rows[1][2]
    assert rows[3][1].startswith("TOOL-RESULT-SEEN")
    elsewhere = _db(new_run, "SELECT session_id FROM messages WHERE content = ?", (NEW_TURN,))
    assert elsewhere == [(new_run["new"],)]


def test_the_old_session_messages_are_stored_once_and_not_copied_into_the_new_one(new_run):
    old_rows = _db(new_run, "SELECT role, content FROM messages WHERE session_id = ? ORDER BY store_id",
                   (new_run["old"],))
    assert [c for r, c in old_rows if r == "user"] == OLD
    assert len(old_rows) == 2 * OLD_TURNS  # each turn: the user message and one reply
    for text in OLD:
        assert _db(new_run, "SELECT COUNT(*) FROM messages WHERE content = ?", (text,))[0][0] == 1
    new_contents = {c for (c,) in _db(new_run, "SELECT content FROM messages WHERE session_id = ?",
                                      (new_run["new"],))}
    assert not new_contents & {c for _, c in old_rows}


def test_the_first_new_session_request_carries_no_old_raw_turns_and_a_summary_only_if_compacted(new_run):
    """The host runs no preflight compaction on a one-message session, so the engine is never
    asked to assemble a prompt there; the carried summaries then stay on disk until asked for
    (next test). If the host did compact, the summary message must be the trove one."""
    bodies = _new_session_bodies(new_run)
    assert len(bodies) == 2  # the describe call, then the answer
    first = bodies[0]["messages"]
    assert not [m for m in first if any(text in str(m.get("content")) for text in OLD)]
    summaries = [m for m in first if str(m.get("content") or "").startswith("[trove summary")]
    if not summaries:
        assert new_run["last_step"]["compression_count"] == 0
        assert [m.get("role") for m in first] == ["system", "user"]
    else:
        carried = {r[0] for r in _db(new_run, "SELECT node_id FROM carried_nodes WHERE session_id = ?",
                                     (new_run["new"],))}
        assert all(f"node {n} |" in summaries[0]["content"] for n in carried)


def test_trove_describe_in_the_new_session_reports_the_carried_nodes(new_run):
    bodies = _new_session_bodies(new_run)
    calls = [c for m in bodies[1]["messages"] if m.get("role") == "assistant" for c in m.get("tool_calls") or []
             if c["function"]["name"] == "trove_describe"]
    assert len(calls) == 1
    tool = [m for m in bodies[1]["messages"] if m.get("role") == "tool" and m.get("tool_call_id") == calls[0]["id"]]
    payload = json.loads(tool[0]["content"])
    assert payload["session_id"] == new_run["new"]
    carried = sorted(r[0] for r in _db(new_run, "SELECT node_id FROM carried_nodes WHERE session_id = ?",
                                       (new_run["new"],)))
    assert sorted(payload["frontier_node_ids"]) == carried
    listed = {n["node_id"]: n for level in payload["depths"].values() for n in level["nodes"]}
    assert sorted(listed) == carried
    assert all(n["carried"] is True and n["depth"] >= RETAIN_DEPTH for n in listed.values()), listed
    assert payload["store_message_count"] == 2  # the new turn so far: the user message and the call


def test_the_lifecycle_run_touches_only_loopback(new_run):
    assert new_run["home"].guarded_processes
    assert new_run["home"].netlog.read_text(encoding="utf-8") == ""


@pytest.fixture(scope="module")
def new_then_exit(make_home) -> dict[str, Any]:
    """Two turns, ``/new --yes``, then the CLI's exit with no turn in the new session: the host's exit
    cleanup hands ``on_session_end(<new id>, …)`` the agent's last list, the old session's transcript."""
    home = make_home()
    steps = [{"chat": "first turn: the harbor gate code is 5813"}, {"chat": "second turn: noted?"},
             {"command": "/new --yes"}]
    result = home.run_cli_steps(steps, "new-then-exit")
    step = result["steps"][2]
    return {"home": home, "result": result, "old": step["session_before"], "new": step["session_id"]}


def test_an_exit_right_after_new_stores_the_old_transcript_once_and_ends_the_new_session(new_then_exit):
    run = new_then_exit
    assert run["old"] and run["new"] and run["new"] != run["old"]
    assert run["result"]["final_session_id"] == run["new"]
    counts = dict(_db(run, "SELECT session_id, COUNT(*) FROM messages GROUP BY session_id"))
    assert counts.get(run["new"], 0) == 0 and counts[run["old"]] >= 4, counts
    assert _db(run, "SELECT COUNT(*) FROM messages WHERE content LIKE '%harbor gate code is 5813%'") == [(1,)]
    ended = dict(_db(run, "SELECT session_id, ended_at IS NOT NULL FROM sessions"))
    assert ended == {run["old"]: 1, run["new"]: 1}, ended


@pytest.fixture(scope="module")
def resume_then_exit(make_home) -> dict[str, Any]:
    """A session, ``/new`` and a turn in a second one, ``/resume`` of the first, then the CLI's exit with
    no turn in it: the exit hands ``on_session_end(<first id>, …)`` the agent's last list, the second
    session's transcript."""
    home = make_home()
    steps = [{"chat": "first session: the boathouse key hangs on hook 7"}, {"chat": "first session, noted?"},
             {"command": "/new --yes"}, {"chat": "second session: the kiln runs at 1240 degrees"},
             {"command": "/resume 1"}]
    result = home.run_cli_steps(steps, "resume-then-exit")
    return {"home": home, "result": result, "first": result["steps"][2]["session_before"],
            "second": result["steps"][3]["session_id"], "resumed": result["steps"][4]["session_id"]}


def test_an_exit_right_after_resume_leaves_each_session_with_its_own_turns(resume_then_exit):
    run = resume_then_exit
    assert run["first"] != run["second"] and run["resumed"] == run["first"], run["result"]["steps"][4]["output"]
    kiln = _db(run, "SELECT session_id, COUNT(*) FROM messages WHERE content LIKE '%kiln runs at 1240%' GROUP BY 1")
    assert kiln == [(run["second"], 1)], kiln
    boathouse = _db(run, "SELECT session_id, COUNT(*) FROM messages WHERE content LIKE '%boathouse key%' GROUP BY 1")
    assert boathouse == [(run["first"], 1)], boathouse


@pytest.fixture(scope="module")
def resume_twice_then_exit(make_home) -> dict[str, Any]:
    """Three sessions (``/new`` between them), two ``/resume``s with no turn after either, then the CLI's
    exit: it hands ``on_session_end(<second resumed id>, …)`` the third session's transcript."""
    home = make_home()
    facts = ["the boathouse key hangs on hook 7", "the kiln runs at 1240 degrees", "the ferry leaves at 6:15"]
    steps = [{"chat": f"first session: {facts[0]}"}, {"command": "/new --yes"},
             {"chat": f"second session: {facts[1]}"}, {"command": "/new --yes"},
             {"chat": f"third session: {facts[2]}"}, {"command": "/resume 2"}, {"command": "/resume 2"}]
    result = home.run_cli_steps(steps, "resume-twice")
    ids = [result["steps"][i]["session_id"] for i in (0, 2, 4, 5, 6)]
    return {"home": home, "result": result, "facts": facts, "ids": ids}


def test_an_exit_after_two_resumes_leaves_each_session_with_its_own_turns(resume_twice_then_exit):
    run = resume_twice_then_exit
    first, second, third, resumed, last = run["ids"]
    assert len({first, second, third}) == 3 and len({resumed, last, third}) == 3, run["result"]["steps"][5:]
    for fact, sid in zip(run["facts"], (first, second, third), strict=True):
        rows = _db(run, "SELECT session_id, COUNT(*) FROM messages WHERE content LIKE ? GROUP BY 1", (f"%{fact}%",))
        assert rows == [(sid, 1)], (fact, rows)
