"""``trove_recent`` under the real host: the fake model asks for ``yesterday`` and the tool
result the host hands back holds the previous day's material, and nothing from other days.

The host stamps every message it stores with the time of the run, so yesterday's history
cannot come from a live turn. Before the session starts, the test writes it into the home's
trove.db through the package's own store and DAG (as an import or an earlier process would
have): a session from yesterday with raw messages and a leaf summary over them, plus rows
from the day before yesterday. Rollups stay off, so the leaf summary serves the window.
"""
from __future__ import annotations

import dataclasses
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hermes_trove.config import load_config
from hermes_trove.runtime import build_runtime
from hermes_trove.store import SessionKey

from .harness import chat_requests

YESTERDAY_CANARY = "YESTERDAY-KILN-4417"
OLDER_CANARY = "OLDER-GLAZE-9020"
ARGS = json.dumps({"period": "yesterday"})
QUESTION = f"what did we do yesterday? <<tool:trove_recent {ARGS}>>"


def _seed(db_path: str) -> dict[str, Any]:
    now = datetime.now(UTC)
    if (now + timedelta(minutes=2)).date() != now.date():  # do not straddle midnight UTC
        time.sleep(180)
        now = datetime.now(UTC)
    midnight = datetime.combine(now.date(), datetime.min.time(), tzinfo=UTC)
    yesterday, older = (midnight - timedelta(hours=14)).timestamp(), (midnight - timedelta(hours=38)).timestamp()
    config = dataclasses.replace(load_config({}), database_path=db_path)
    runtime = build_runtime(config)
    ids = runtime.store.append(SessionKey("seed-yesterday", platform="cli"), [
        {"role": "user", "content": f"fire the test tiles, batch {YESTERDAY_CANARY}", "timestamp": yesterday},
        {"role": "assistant", "content": "Kiln scheduled for cone 6.", "timestamp": yesterday + 60}])
    node = runtime.dag.add_leaf("seed-yesterday", f"Fired test tiles (batch {YESTERDAY_CANARY}) at cone 6.", ids,
                                token_count=20, source_token_count=40, earliest_at=yesterday, latest_at=yesterday + 60)
    runtime.store.append(SessionKey("seed-older", platform="cli"),
                         [{"role": "user", "content": f"mixed glaze {OLDER_CANARY}", "timestamp": older}])
    runtime.db.close()
    return {"node_id": node, "day": (midnight - timedelta(days=1)).date().isoformat()}


@pytest.fixture(scope="module")
def recent_run(make_home, fake_llm) -> dict[str, Any]:
    home = make_home()
    seeded = _seed(str(home.db_path))
    start = len(fake_llm.requests())
    result = home.run_driver({"turns": [QUESTION], "max_iterations": 4}, "recent", timeout=600)
    return {"home": home, "result": result, "seeded": seeded, "requests": fake_llm.requests()[start:]}


def _tool_result(run: dict[str, Any]) -> dict[str, Any]:
    for body in chat_requests(run["requests"]):
        calls = [c for m in body["messages"] if m.get("role") == "assistant" for c in m.get("tool_calls") or []
                 if (c.get("function") or {}).get("name") == "trove_recent"]
        if calls:
            found = [m for m in body["messages"] if m.get("role") == "tool" and m.get("tool_call_id") == calls[0]["id"]]
            assert len(found) == 1
            assert json.loads(calls[0]["function"]["arguments"]) == {"period": "yesterday"}
            return json.loads(found[0]["content"])
    raise AssertionError("the fake model never called trove_recent")


def test_the_host_offers_trove_recent(recent_run):
    assert recent_run["result"]["engine_name"] == "trove"
    assert "trove_recent" in recent_run["result"]["tools"]


def test_yesterday_returns_the_previous_days_summary_and_nothing_older(recent_run):
    payload = _tool_result(recent_run)
    assert "error" not in payload, payload
    assert payload["mode"] == "summaries"
    assert payload["period"]["label"] == f"yesterday ({recent_run['seeded']['day']})"
    assert [i["node_id"] for i in payload["items"]] == [recent_run["seeded"]["node_id"]]
    text = json.dumps(payload)
    assert YESTERDAY_CANARY in text and OLDER_CANARY not in text
    assert payload["items"][0]["expand"].startswith("trove_load_session(session_id='seed-yesterday'")
    final = recent_run["result"]["turns"][-1]["final"]
    assert final.startswith("TOOL-RESULT-SEEN") and '"mode":"summaries"' in final  # the model read the result


def test_the_recent_run_touches_only_loopback(recent_run):
    assert recent_run["home"].guarded_processes
    assert recent_run["home"].netlog.read_text(encoding="utf-8") == ""
