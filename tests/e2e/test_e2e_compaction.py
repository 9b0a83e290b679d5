"""Compaction under the real host: a long conversation in a 64K window, then a forced
``/compress``-style compaction with a focus topic.

Thirty turns of about 3,000 tokens each (far more than the 32,000-token trigger) run in
one host process; the fake server also answers the summarizer's auxiliary calls (requests
without tools). Afterwards the host's manual-compaction entry point runs with a focus.
"""
from __future__ import annotations

import json
from typing import Any

import pytest

from .harness import ROOT, aux_requests, query, request_tokens

CONTEXT_LENGTH = 64000
THRESHOLD = 0.5
TURNS = 30
TURN_CHARS = 12000  # about 3,000 tokens at four characters per token
FOCUS = "keep the kiwi ledger FOCUS-KIWI-42"
WORDS = ("amber", "basalt", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper")


def turn_text(i: int) -> str:
    head = f"turn {i:02d} about {WORDS[i % len(WORDS)]}-{i}: "
    filler = " ".join(f"{WORDS[(i + k) % len(WORDS)]}{k % 97}" for k in range(TURN_CHARS // 8))
    return (head + filler)[:TURN_CHARS]


@pytest.fixture(scope="module")
def long_run(make_home, fake_llm) -> dict[str, Any]:
    home = make_home(context_length=CONTEXT_LENGTH, TROVE_CONTEXT_THRESHOLD=str(THRESHOLD),
                     TROVE_FRESH_TAIL_COUNT="6", TROVE_LEAF_CHUNK_TOKENS="6000")
    start = len(fake_llm.requests())
    result = home.run_driver({"turns": [turn_text(i) for i in range(1, TURNS + 1)], "compress_focus": FOCUS,
                              "turns_after_compress": ["one more turn after the forced compaction"],
                              "max_iterations": 4}, "long", timeout=900)
    return {"home": home, "result": result, "requests": fake_llm.requests()[start:]}


def _policy_tokens() -> int:
    policy = ROOT / "skills" / "hermes-trove" / "references" / "recall-policy.md"
    return len(policy.read_text(encoding="utf-8")) // 4 if policy.exists() else 0


def test_the_long_run_used_the_trove_engine_and_compacted(long_run):
    result = long_run["result"]
    assert result["engine_name"] == "trove"
    assert result["context_length"] == CONTEXT_LENGTH
    assert result["threshold_tokens"] <= int(CONTEXT_LENGTH * THRESHOLD)
    assert result["compression_count"] and result["compression_count"] >= 1, result["turns"][-3:]


def test_the_summarizer_calls_reached_the_fake_model_and_left_summary_nodes(long_run):
    assert aux_requests(long_run["requests"]), "no auxiliary (summary) request reached the server"
    session_id = long_run["result"]["session_id"]
    nodes = query(long_run["home"].db_path, "SELECT COUNT(*) FROM summary_nodes WHERE session_id = ?", (session_id,))
    assert nodes[0][0] > 0


def test_every_main_request_after_compaction_starts_stays_under_the_threshold(long_run):
    """The bound is the engine's threshold plus a margin for what the host's trigger does not
    see: the recall policy appended to the current user message after preflight, and the
    difference between JSON and the host's repr-based character count (5% of the threshold)."""
    threshold = int(long_run["result"]["threshold_tokens"])
    limit = threshold + int(threshold * 0.05) + _policy_tokens()
    requests = [r for r in long_run["requests"] if r["path"].endswith("/chat/completions")]
    first_aux = next((r["n"] for r in requests if not r["body"].get("tools")), None)
    assert first_aux is not None, "compaction never started"
    after = [r["body"] for r in requests if r["body"].get("tools") and r["n"] > first_aux]
    assert len(after) >= 5
    sizes = [request_tokens(b) for b in after]
    assert max(sizes) <= limit, f"request sizes after compaction began: {sizes} (limit {limit})"


def test_the_raw_transcript_survives_compaction_once_per_message(long_run):
    session_id = long_run["result"]["session_id"]
    rows = query(long_run["home"].db_path, "SELECT content, COUNT(*) FROM messages WHERE session_id = ? "
                                           "AND role = 'user' GROUP BY content", (session_id,))
    counts = dict(rows)
    for i in range(1, TURNS + 1):
        assert counts.get(turn_text(i)) == 1, f"turn {i} stored {counts.get(turn_text(i))} times"


def test_a_forced_compaction_sends_its_focus_topic_to_the_summarizer(long_run):
    forced = long_run["result"].get("forced_compaction")
    assert forced is not None
    with_focus = [b for b in aux_requests(long_run["requests"]) if "FOCUS-KIWI-42" in json.dumps(b)]
    assert with_focus, "the focus topic reached no summarizer prompt"


def test_the_conversation_continues_after_the_forced_compaction(long_run):
    last = long_run["result"]["turns"][-1]
    assert last["final"].startswith("ack #")
    assert long_run["home"].guarded_processes
    assert long_run["home"].netlog.read_text(encoding="utf-8") == ""
