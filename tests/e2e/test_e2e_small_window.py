"""A 64K window with the host's real tool schemas: summaries stay visible and compaction
does not run on every turn.

The CLI's own toolsets (``hermes-cli`` plus trove's tools) make the fixed part of every
request (system prompt and tool schemas) about 17,000 tokens, most of the default trigger
(35% of 64,000 = 22,400). Twelve turns of about 2,500 tokens each run in one host process,
then three more in a resumed process. Per turn the test reads, from the fake server's log,
whether a summary call ran, how many summary nodes the main request showed and its size.
"""
from __future__ import annotations

import json
import re
from typing import Any

import pytest

from .fake_llm import estimate_prompt_tokens
from .harness import aux_requests

CONTEXT_LENGTH = 64000
TURNS = 12
RESUMED = 3
TURN_CHARS = 10000  # about 2,500 tokens at four characters per token
TOOLSETS = ["hermes-cli", "context_engine"]
WORDS = ("amber", "basalt", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper")
NODE_LABEL = re.compile(r"\[d\d+ node \d+ \|")
TURN_TAG = re.compile(r"small-window turn (\d+):")


def turn_text(i: int) -> str:
    head = f"small-window turn {i:02d}: about {WORDS[i % len(WORDS)]}-{i}. "
    filler = " ".join(f"{WORDS[(i + k) % len(WORDS)]}{k % 89}" for k in range(TURN_CHARS // 8))
    return (head + filler)[:TURN_CHARS]


def _text(body: dict[str, Any]) -> str:
    return json.dumps(body.get("messages") or [])


def per_turn(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per turn: summary calls before its main request, visible nodes, prompt size."""
    rows: list[dict[str, Any]] = []
    pending_aux = 0
    for r in requests:
        body = r["body"]
        if not r["path"].endswith("/chat/completions"):
            continue
        if not body.get("tools"):
            pending_aux += 1
            continue
        users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
        found = TURN_TAG.search(str(users[-1].get("content") if users else ""))
        if not found:
            continue
        text = _text(body)
        rows.append({"turn": int(found.group(1)), "summary_calls": pending_aux,
                     "visible_nodes": len(NODE_LABEL.findall(text)),
                     "omitted_note": "older summary nodes are not shown" in text,
                     "prompt_tokens": estimate_prompt_tokens(body)})
        pending_aux = 0
    return rows


@pytest.fixture(scope="module")
def small_window(make_home, fake_llm, tmp_path_factory) -> dict[str, Any]:
    home = make_home(context_length=CONTEXT_LENGTH)
    start = len(fake_llm.requests())
    history = tmp_path_factory.mktemp("small-window") / "history.json"
    first = home.run_driver({"turns": [turn_text(i) for i in range(1, TURNS + 1)], "toolsets": TOOLSETS,
                             "max_iterations": 3, "history_out": str(history)}, "small-window", timeout=900)
    second = home.run_driver({"turns": [turn_text(i) for i in range(TURNS + 1, TURNS + RESUMED + 1)],
                              "toolsets": TOOLSETS, "max_iterations": 3, "session_id": first["session_id"],
                              "history_in": str(history)}, "small-window-resumed", timeout=900)
    requests = fake_llm.requests()[start:]
    rows = per_turn(requests)
    print("\nsmall window per turn:", json.dumps(rows))
    return {"first": first, "second": second, "rows": rows, "requests": requests}


def test_the_runs_used_trove_with_the_real_tool_schemas(small_window):
    for run in (small_window["first"], small_window["second"]):
        assert run["engine_name"] == "trove"
        assert run["context_length"] == CONTEXT_LENGTH
        assert len(run["tools"]) > 25, run["tools"]
    assert aux_requests(small_window["requests"]), "the conversation never compacted"


def test_compaction_does_not_run_on_every_turn(small_window):
    rows = small_window["rows"]
    assert [r["turn"] for r in rows] == list(range(1, TURNS + RESUMED + 1))
    compacting = [r["turn"] for r in rows if r["summary_calls"]]
    assert compacting, "no turn compacted"
    # A compaction frees room for several turns of this size: at least two quiet turns follow it
    # (with the default trigger every other turn compacted).
    gaps = [b - a for a, b in zip(compacting, compacting[1:], strict=False)]
    assert gaps and all(gap >= 3 for gap in gaps), rows
    resumed = [r for r in rows if r["turn"] > TURNS]
    assert sum(1 for r in resumed if r["summary_calls"]) < RESUMED, rows


def test_summaries_stay_visible_after_compaction(small_window):
    rows = small_window["rows"]
    first = next(r["turn"] for r in rows if r["summary_calls"])
    after = [r for r in rows if r["turn"] >= first]
    assert all(r["visible_nodes"] > 0 for r in after), rows
    assert not any(r["omitted_note"] and not r["visible_nodes"] for r in after), rows


def test_no_prompt_outgrows_the_raised_trigger_ceiling(small_window):
    sizes = [r["prompt_tokens"] for r in small_window["rows"]]
    assert max(sizes) < int(CONTEXT_LENGTH * 0.6), sizes
