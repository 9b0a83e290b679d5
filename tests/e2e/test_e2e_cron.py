"""A Hermes cron job run offline through the host's own scheduler (``cron.scheduler.run_job``).

The owner's CLI session stores a fact first. The cron job (platform ``cron``, session id
``cron_<job>_<time>``, its own engine copy) states a fact of its own and calls ``trove_recall``
for the owner's. A later CLI session then recalls the cron job's fact. Trove keeps cron sessions
stateless: it stores nothing for them, and a cron session has no owner scope, so its cross-session
reads see only itself, like any unscoped session (docs/operator-guide.md, "Sessions the host runs
on the side" and "Who sees which sessions"). A second job hands its work to a ``delegate_task``
child: the child is stateless like the job, so trove stores nothing of either. A third job's child
fills its 64K window until the host compacts it (the host's own compressor: the child is stateless),
which ends the child's session before it announces the compaction boundary; the child stays
stateless past that boundary, through its later turns and its real end.
"""
from __future__ import annotations

import json
from typing import Any

import pytest

from .harness import FALLBACK_WARNING, HERE, aux_requests, chat_requests, query, tool_names
from .test_e2e_delegate import delegate

FACT = "please remember: the greenhouse alarm code is PLOVER-6612."
CRON_FACT = "cron job note: the nightly report id is WREN-8840."
CRON_PROMPT = f'{CRON_FACT} <<tool:trove_recall {json.dumps({"query": "greenhouse alarm code"})}>>'
CHILD_TASK = "child of the cron job: note the kite count KITE-4417."
LATER = f'<<tool:trove_recall {json.dumps({"query": "nightly report id WREN-8840"})}>>'


@pytest.fixture(scope="module")
def cron(make_home, fake_llm) -> dict[str, Any]:
    home = make_home()
    owner = home.run_driver({"turns": [FACT, "thanks"]}, "cron-owner")
    start = len(fake_llm.requests())
    ran = home.run_driver({"jobs": [{"prompt": CRON_PROMPT, "name": "nightly"}]}, "cron-run",
                          script=HERE / "cron_driver.py")
    cron_requests = fake_llm.requests()[start:]
    start = len(fake_llm.requests())
    later = home.run_driver({"turns": [LATER], "max_iterations": 4}, "cron-later")
    return {"home": home, "owner": owner, "ran": ran, "cron_requests": cron_requests, "later": later,
            "later_requests": fake_llm.requests()[start:]}


def tool_result(requests: list[dict[str, Any]]) -> dict[str, Any]:
    bodies = [b for b in chat_requests(requests) if b["messages"][-1].get("role") == "tool"]
    assert bodies, "no request carried a tool result"
    return json.loads(str(bodies[0]["messages"][-1]["content"]))


def test_the_job_ran_through_the_host_scheduler_with_the_trove_tools(cron):
    [run] = cron["ran"]["runs"]
    assert run["ok"] and run["error"] is None, run
    bodies = chat_requests(cron["cron_requests"])
    assert len(bodies) == 2 and all("trove_recall" in tool_names(b) for b in bodies)
    assert "scheduled cron job" in str(bodies[0]["messages"][1]["content"])  # the host's cron framing


def test_trove_stores_nothing_for_the_cron_session(cron):
    db = cron["home"].db_path
    sessions = [sid for (sid,) in query(db, "SELECT session_id FROM sessions")]
    assert sorted(sessions) == sorted([cron["owner"]["session_id"], cron["later"]["session_id"]])
    assert not [s for s in sessions if s.startswith("cron_")]
    assert not query(db, "SELECT store_id FROM messages WHERE content LIKE '%WREN-8840%' AND session_id != ?",
                     (cron["later"]["session_id"],))
    owner_rows = query(db, "SELECT role, content FROM messages WHERE session_id = ? ORDER BY store_id",
                       (cron["owner"]["session_id"],))
    assert [c for r, c in owner_rows if r == "user"] == [FACT, "thanks"] and len(owner_rows) == 4


def test_the_cron_sessions_recall_sees_no_other_sessions_text(cron):
    result = tool_result(cron["cron_requests"])
    assert "error" not in result and result["total_hits"] == 0, result
    assert "PLOVER-6612" not in json.dumps([b["messages"] for b in chat_requests(cron["cron_requests"])])


def test_a_later_session_recalls_nothing_of_the_cron_job(cron):
    result = tool_result(cron["later_requests"])
    assert "error" not in result and "WREN-8840" not in json.dumps(result["hits"]), result


def test_no_exception_or_fallback_reaches_the_host(cron):
    logs = cron["home"].host_logs()
    assert FALLBACK_WARNING not in logs and "failed (the host carries on)" not in logs
    for part in ("ran", "owner", "later"):
        assert not [w for w in cron[part]["warnings"] if "trove" in w.lower()], cron[part]["warnings"]



@pytest.fixture(scope="module")
def cron_delegating(make_home, fake_llm) -> dict[str, Any]:
    """A cron job that hands its work to a ``delegate_task`` child (the host runs it synchronously)."""
    home = make_home()
    start = len(fake_llm.requests())
    ran = home.run_driver({"jobs": [{"prompt": delegate(CHILD_TASK), "name": "delegating",
                                     "toolsets": ["todo", "context_engine", "delegation"]}]}, "cron-delegating",
                          script=HERE / "cron_driver.py")
    return {"home": home, "ran": ran, "requests": fake_llm.requests()[start:]}


def test_the_subagent_of_a_cron_job_is_stateless_like_the_job(cron_delegating):
    [run] = cron_delegating["ran"]["runs"]
    assert run["ok"] and '"status": "completed"' in run["final"], run
    child_bodies = [b for b in chat_requests(cron_delegating["requests"])
                    if CHILD_TASK in str(b["messages"][1].get("content"))]
    assert child_bodies  # the child ran and asked the model
    db = cron_delegating["home"].db_path
    assert query(db, "SELECT COUNT(*) FROM messages") == [(0,)]
    assert query(db, "SELECT COUNT(*) FROM summary_nodes") == [(0,)]
    assert not [s for (s,) in query(db, "SELECT session_id FROM sessions") if s.startswith("cron_")]
    assert not [w for w in cron_delegating["ran"]["warnings"] if "trove" in w.lower()]


COMPACTING_NOTE = "OSPREY-3071"
# A cron job runs without a user to approve a flagged command (``python3 -c`` is), so the child's filler
# comes from ``seq``: about 9,500 tokens a call, each word carrying the note.
COMPACTING_GOAL = ("child task: keep noting. <<loop>> <<tool:terminal "
                   + json.dumps({"command": f"seq -s ' ' -f '{COMPACTING_NOTE}-%g' 0 2299"}) + ">>")


@pytest.fixture(scope="module")
def cron_child_compacts(make_home, fake_llm) -> dict[str, Any]:
    """A cron job whose ``delegate_task`` child runs ``terminal`` until the host compacts its window."""
    home = make_home(context_length=64000)
    with (home.home / "config.yaml").open("a", encoding="utf-8") as fh:
        fh.write("delegation:\n  max_iterations: 9\n")
    start = len(fake_llm.requests())
    ran = home.run_driver({"jobs": [{"prompt": delegate(COMPACTING_GOAL), "name": "compacting",
                                     "toolsets": ["todo", "terminal", "context_engine", "delegation"]}]},
                          "cron-child-compacts", script=HERE / "cron_driver.py", timeout=240)
    return {"home": home, "ran": ran, "requests": fake_llm.requests()[start:]}


def test_the_subagent_of_a_cron_job_stays_stateless_across_its_compaction(cron_child_compacts):
    [run] = cron_child_compacts["ran"]["runs"]
    assert run["ok"], run
    requests = cron_child_compacts["requests"]
    assert [b for b in aux_requests(requests) if COMPACTING_NOTE in json.dumps(b)]  # the host summarised the child
    child = [b for b in chat_requests(requests) if COMPACTING_NOTE in json.dumps(b["messages"])]
    sizes = [len(json.dumps(b["messages"])) for b in child]
    assert max(sizes) > sizes[-1] and sizes.index(max(sizes)) < len(sizes) - 1  # turns ran after the compaction
    db = cron_child_compacts["home"].db_path
    assert query(db, "SELECT COUNT(*) FROM messages") == [(0,)]
    assert query(db, "SELECT COUNT(*) FROM summary_nodes") == [(0,)]
    assert query(db, "SELECT session_id FROM sessions") == []
    assert not [w for w in cron_child_compacts["ran"]["warnings"] if "trove" in w.lower()]
