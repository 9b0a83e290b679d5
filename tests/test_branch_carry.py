"""``/branch`` continues the parent's conversation: the branch carries every summary on the parent's
frontier (a ``/new`` carries only the deep ones). Hermes marks a branch's session row in its own
state.db (``model_config`` ``_branched_from``), in the CLI and in the gateway alike."""
from __future__ import annotations

import json

from conftest import make_config, no_model
from simulate import HostLoop, build_conversation

from hermes_trove.engine import TroveEngine
from hermes_trove.hostbase import branched_from
from hermes_trove.runtime import build_runtime

KEY = "agent:main:telegram:dm:1"


class HostSessions:
    """The host's SessionDB as the engine reads it: one row per session."""

    def __init__(self, rows):
        self.rows = rows

    def get_session(self, session_id):
        return self.rows.get(session_id)


def gateway_agent(runtime, host, session):
    """The engine of the agent the gateway builds for a chat's message (init order of the host)."""
    eng = TroveEngine(runtime, complete=no_model)
    eng.update_model(model="m", context_length=64000)
    eng.bind_session_state(session_db=host, session_id=session)
    eng.on_session_start(session, platform="telegram", context_length=64000, conversation_id=KEY)
    return eng


def compacted_parent(tmp_path):
    runtime = build_runtime(make_config(tmp_path, leaf_chunk_tokens=600, condensation_fanin=2))
    host = HostSessions({"p1": {"source": "telegram", "session_key": KEY, "model_config": None},
                         "b1": {"source": "telegram", "model_config": json.dumps({"_branched_from": "p1"}),
                                "parent_session_id": "p1"},
                         "n1": {"source": "telegram", "session_key": KEY, "model_config": None}})
    eng = gateway_agent(runtime, host, "p1")
    loop = HostLoop(eng)
    for turn in build_conversation(60, seed=9):
        loop.run_turn(turn)
    frontier = [n.node_id for n in runtime.dag.frontier("p1")]
    assert [n for n in runtime.dag.frontier("p1") if n.depth < 2], "the scenario needs shallow frontier nodes"
    return runtime, host, frontier


def test_a_gateway_branch_carries_the_parents_whole_frontier_and_new_only_the_deep_part(tmp_path):
    runtime, host, frontier = compacted_parent(tmp_path)
    gateway_agent(runtime, host, "b1")  # /branch: a new session holding a copy, a new agent
    assert sorted(n.node_id for n in runtime.dag.frontier("b1")) == sorted(frontier)
    assert runtime.store.session("b1").previous_session_id == "p1"
    gateway_agent(runtime, host, "n1")  # /new later in the same chat: its newest other session is the branch
    assert all(n.depth >= 2 for n in runtime.dag.frontier("n1"))


def test_a_cli_branch_carries_the_parents_whole_frontier(tmp_path):
    runtime, host, frontier = compacted_parent(tmp_path)
    eng = TroveEngine(runtime, complete=no_model)
    eng.update_model(model="m", context_length=64000)
    eng.bind_session_state(session_db=host, session_id="p1")
    eng.on_session_reset()  # the CLI's /branch: reset and bind the new id, no on_session_end
    eng.bind_session_state(session_db=host, session_id="b1")
    assert sorted(n.node_id for n in runtime.dag.frontier("b1")) == sorted(frontier)


def test_only_a_readable_branch_mark_counts():
    assert branched_from(None, "b1") == ""
    rows = {"a": {"model_config": "{not json"}, "b": {"model_config": {"_branched_from": "p"}},
            "c": {"model_config": json.dumps({"_branched_from": "c"})}, "d": {"model_config": "[]"}}
    host = HostSessions(rows)
    assert [branched_from(host, s) for s in ("a", "b", "c", "d", "missing")] == ["", "p", "", "", ""]
