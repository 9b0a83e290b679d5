"""The host's skill curator next to a live conversation, both ways the host runs it.

The home holds one skill the model wrote (``.usage.json`` marks it ``created_by: agent``) and
``curator.consolidate: true``, so a curator pass forks an agent (platform ``curator``) that sends
the curator's review prompt and the candidate list to the model. First the interactive CLI runs
two turns, starts the pass the way it does at startup when the curator is due (on the host's
``curator-review`` thread) and, once it has finished, asks ``/trove status`` and a third turn.
Then ``hermes curator run --consolidate`` runs the pass in the foreground of its own process.
Neither pass may leave a trove session, a stored row, a recall hit or an ended parent behind.
"""
from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from .harness import FALLBACK_WARNING, chat_requests, content_counts, query

CURATOR_PROMPT = "Agent-created skills ("
SKILL = "tidy-notes"
FACT = "curator turn 1: remember that the kiln schedule is KILN-4410."
TURNS = [FACT, "curator turn 2: a short remark about glazes"]
LAST = "curator turn 3: one more remark after the curator ran"
RECALL = f'a later session: what was the kiln schedule? <<tool:trove_recall {json.dumps({"query": "kiln schedule"})}>>'


def _prepare(home) -> None:
    with (home.home / "config.yaml").open("a", encoding="utf-8") as fh:
        fh.write("curator:\n  enabled: true\n  consolidate: true\n  interval_hours: 1\n  min_idle_hours: 0\n")
    skill = home.home / "skills" / SKILL
    skill.mkdir(parents=True, exist_ok=True)
    (skill / "SKILL.md").write_text(f"---\nname: {SKILL}\ndescription: Tidy a notes folder.\n---\n\n"
                                    "# Tidy notes\n\nSort the notes by date.\n", encoding="utf-8")
    (home.home / "skills" / ".usage.json").write_text(json.dumps({SKILL: {"created_by": "agent"}}), encoding="utf-8")
    due = (datetime.now(UTC) - timedelta(days=30)).isoformat()
    (home.home / "skills" / ".curator_state").write_text(json.dumps({"last_run_at": due}), encoding="utf-8")


@pytest.fixture(scope="module")
def curated(make_home, fake_llm) -> dict[str, Any]:
    home = make_home(TROVE_ENABLE_SLASH_COMMAND="1")
    _prepare(home)
    start = len(fake_llm.requests())
    steps: list[dict[str, Any]] = [{"chat": text} for text in TURNS]
    steps += [{"curator": True}, {"wait_threads": ["curator-review"], "seconds": 90},
              {"command": "/trove status"}, {"chat": LAST}]
    run = home.run_driver({"mode": "cli", "max_iterations": 4, "steps": steps}, "curator-cli", timeout=300)
    cli_requests = fake_llm.requests()[start:]
    start = len(fake_llm.requests())
    foreground = home.hermes("curator", "run", "--consolidate", timeout=300)
    run_requests = fake_llm.requests()[start:]
    start = len(fake_llm.requests())
    later = home.run_driver({"turns": [RECALL], "max_iterations": 4}, "curator-later")
    return {"home": home, "run": run, "parent": run["steps"][0]["session_id"], "cli_requests": cli_requests,
            "foreground": foreground, "run_requests": run_requests, "later": later,
            "later_requests": fake_llm.requests()[start:]}


def _curator_bodies(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [b for b in chat_requests(requests) if CURATOR_PROMPT in json.dumps(b["messages"])]


def test_both_curator_passes_reached_the_model(curated):
    started = next(s for s in curated["run"]["steps"] if s["kind"] == "curator")
    assert started["started"] is True
    assert all(s["still_running"] == 0 for s in curated["run"]["steps"] if s["kind"] == "wait")
    assert _curator_bodies(curated["cli_requests"]), "the background pass never asked the model"
    done = curated["foreground"]
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert _curator_bodies(curated["run_requests"]), "hermes curator run never asked the model"


def test_trove_stored_no_curator_session_and_no_curator_row(curated):
    db, parent, later = curated["home"].db_path, curated["parent"], curated["later"]["session_id"]
    assert sorted(query(db, "SELECT session_id FROM sessions")) == sorted([(parent,), (later,)])
    assert sorted(query(db, "SELECT DISTINCT session_id FROM messages")) == sorted([(parent,), (later,)])
    assert not query(db, "SELECT store_id FROM messages WHERE content LIKE ?", (f"%{CURATOR_PROMPT}%",))


def test_the_parent_rows_are_intact_and_the_parent_stayed_open(curated):
    db, parent = curated["home"].db_path, curated["parent"]
    rows = query(db, "SELECT role, content FROM messages WHERE session_id = ? ORDER BY store_id", (parent,))
    assert [c for r, c in rows if r == "user"] == TURNS + [LAST]
    assert [r for r, _ in rows] == ["user", "assistant"] * 3
    assert all(n == 1 for n in content_counts(db, parent).values())
    out = next(s for s in curated["run"]["steps"] if s["kind"] == "command")["output"]
    assert re.search(rf"^\s*session_id:\s*{parent}\s*$", out, re.M), out[:400]
    lifecycle = out[out.index("  lifecycle:"):]
    assert re.search(r"^\s*ended_at:\s*null\s*$", lifecycle, re.M), lifecycle[:600]


def test_a_later_recall_finds_the_parent_fact_and_nothing_of_the_curator(curated):
    bodies = [b for b in chat_requests(curated["later_requests"]) if b["messages"][-1].get("role") == "tool"]
    assert bodies, "trove_recall never ran"
    result = json.loads(bodies[0]["messages"][-1]["content"])
    first = query(curated["home"].db_path, "SELECT MIN(store_id) FROM messages WHERE session_id = ?",
                  (curated["parent"],))[0][0]
    assert any(h.get("store_id") == first and "4410" in str(h.get("snippet")) for h in result["hits"]), result["hits"]
    assert {h.get("session_id") for h in result["hits"]} == {curated["parent"]}, result["hits"]
    assert CURATOR_PROMPT not in json.dumps(result)


def test_no_exception_or_fallback_reaches_the_host(curated):
    logs = curated["home"].host_logs()
    assert FALLBACK_WARNING not in logs and "hook failed" not in logs
    assert not [w for w in curated["run"]["warnings"] if "trove" in w.lower()], curated["run"]["warnings"]
