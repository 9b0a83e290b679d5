"""An agent whose toolsets leave out ``context_engine`` under the real host.

Hermes gives an agent the context engine's tools only when its ``enabled_toolsets`` is unset or
lists ``context_engine`` (a gateway platform with ``platform_toolsets: <platform>: []``, or
``--toolsets`` without it, leaves them out), and asks the engine copy for them only then. Such an
agent on an ordinary platform (cli) must be told no recall policy naming trove_* tools, and its
compacted summaries must name none of them; an agent given the toolset still gets the policy.
"""
from __future__ import annotations

import json
from typing import Any

import pytest

from .harness import FALLBACK_WARNING, chat_requests, tool_names

POLICY = "TROVE recall policy"
TURNS = [f"turn {i}: note the tern count {i * 7} " + " ".join(f"w{k}" for k in range(600)) for i in range(8)]


@pytest.fixture(scope="module")
def runs(make_home, fake_llm) -> dict[str, Any]:
    home = make_home(context_length=64000, TROVE_FRESH_TAIL_COUNT="2", TROVE_LEAF_CHUNK_TOKENS="1500")
    out: dict[str, Any] = {"home": home}
    for name, toolsets in (("without", ["todo"]), ("with", ["todo", "context_engine"])):
        start = len(fake_llm.requests())
        result = home.run_driver({"turns": TURNS, "toolsets": toolsets, "compress_focus": "",
                                  "turns_after_compress": ["one more turn after the compaction"],
                                  "max_iterations": 4}, f"toolsets-{name}", timeout=600)
        out[name] = {"result": result, "bodies": chat_requests(fake_llm.requests()[start:])}
    return out


def test_an_agent_without_the_context_engine_toolset_is_told_no_policy_and_no_tool_names(runs):
    without = runs["without"]
    assert without["result"]["engine_name"] == "trove"
    assert not [t for t in without["result"]["tools"] if t.startswith("trove_")], without["result"]["tools"]
    bodies = without["bodies"]
    assert bodies and all(not any(n.startswith("trove_") for n in tool_names(b)) for b in bodies)
    assert not [b for b in bodies if POLICY in json.dumps(b["messages"])]
    assert without["result"]["forced_compaction"]["compression_count"] >= 1, without["result"]["forced_compaction"]
    after = json.dumps([m for m in bodies[-1]["messages"] if m.get("role") != "system"])
    assert "[trove summary] Earlier conversation, compacted." in after, after[:600]
    # the header names no tool (a node's own text may still say where a cut's full text is kept)
    assert "compacted. Nothing is lost" not in after and "trove_describe" not in after, after[:600]


def test_an_agent_given_the_toolset_still_gets_the_policy_and_the_tools(runs):
    given = runs["with"]
    assert "trove_grep" in given["result"]["tools"]
    assert POLICY in json.dumps(given["bodies"][0]["messages"])


def test_no_fallback_reaches_the_host(runs):
    logs = runs["home"].host_logs()
    assert FALLBACK_WARNING not in logs and "failed (the host carries on)" not in logs
