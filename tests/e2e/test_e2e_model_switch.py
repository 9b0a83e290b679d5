"""``/model`` to a model with a much smaller window, mid-session, while the auxiliary model fails.

The session starts on a 256K window and grows to about 74,000 tokens (under its trigger, so
nothing compacts). The host's own ``switch_model`` then moves it to ``fake-model-small``, whose
64K window comes from ``custom_providers`` in config.yaml. The summary requests that follow get a
timeout (the host's client retries it once), an HTTP 500, an empty reply and an unfinished
reasoning block, in that order, until the route's circuit breaker opens: the summaries degrade
to the deterministic level and nothing is lost. The prompt must fit the new
window from the first request after the switch, and ``trove_grep`` still finds the first turn.

Then the same shrink the other way round: config.yaml says 256K, the provider refuses the first
request past 64K naming its limit, the host hands that limit to the engine and compacts, and
every later request fits.
"""
from __future__ import annotations

import json
from typing import Any

import pytest

from .fake_llm import estimate_prompt_tokens
from .harness import FALLBACK_WARNING, chat_requests, query, request_tokens

BIG, SMALL = 256000, 64000
TURNS = 8
TURN_CHARS = 36000  # about 9,000 tokens
WORDS = ("amber", "basalt", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper")
GREP = json.dumps({"query": "QX-5182"})
FAULTS = ["slow:4", "500", "empty", "garbage"]


def turn_text(i: int) -> str:
    head = f"switch turn {i:02d}: " + ("the locker code is QX-5182. " if i == 1 else "")
    body = " ".join(f"{WORDS[(i + k) % len(WORDS)]}{k % 89}" for k in range(TURN_CHARS // 7))
    return (head + body)[:TURN_CHARS]


AFTER = ["after the switch: short question one", f"what was the locker code? <<tool:trove_grep {GREP}>>",
         "after the switch: short question three"]


@pytest.fixture(scope="module")
def switched(make_home, fake_llm) -> dict[str, Any]:
    home = make_home(context_length=BIG, TROVE_SUMMARY_TIMEOUT_MS="1500")
    with (home.home / "config.yaml").open("a", encoding="utf-8") as fh:
        fh.write(f"custom_providers:\n  - name: fake\n    base_url: {home.base_url}\n    api_key: sk-fake\n"
                 f"    models:\n      fake-model-small:\n        context_length: {SMALL}\n")
    start = len(fake_llm.requests())
    fake_llm.summary_faults[:] = list(FAULTS)
    try:
        turns: list[Any] = [turn_text(i) for i in range(1, TURNS + 1)]
        turns += [{"switch_model": "fake-model-small"}, *AFTER]
        result = home.run_driver({"turns": turns, "max_iterations": 4}, "switch", timeout=600)
    finally:
        left = list(fake_llm.summary_faults)
        fake_llm.summary_faults[:] = []
    requests = fake_llm.requests()[start:]
    marker = next(i for i, r in enumerate(requests) if AFTER[0] in json.dumps(r["body"].get("messages")))
    return {"home": home, "result": result, "before": requests[:marker], "after": requests[marker:],
            "faults_left": left}


def test_the_switch_reached_trove(switched):
    result = switched["result"]
    assert result["engine_name"] == "trove" and result["context_length"] == BIG
    assert not [w for w in result["warnings"] if FALLBACK_WARNING in w]
    switch = next(t for t in result["turns"] if t.get("switched"))
    assert switch["context_length"] == SMALL and switch["threshold_tokens"] <= int(SMALL * 0.6), switch
    assert result["turns"][TURNS - 1]["compression_count"] == 0  # nothing compacted on the big window


def test_every_request_after_the_switch_fits_the_new_window(switched):
    before = [request_tokens(b) for b in chat_requests(switched["before"])]
    after = [request_tokens(b) for b in chat_requests(switched["after"])]
    assert max(before) > SMALL, before  # the transcript alone no longer fit the new window
    assert after and max(after) < int(SMALL * 0.6), after


def test_summaries_degraded_and_nothing_was_lost(switched):
    assert len(switched["faults_left"]) <= len(FAULTS) - 2, switched["faults_left"]
    db, session = switched["home"].db_path, switched["result"]["session_id"]
    levels = {level for (level,) in query(db, "SELECT level FROM summary_nodes WHERE session_id = ?", (session,))}
    assert "deterministic" in levels, levels
    counts = dict(query(db, "SELECT content, COUNT(*) FROM messages WHERE session_id = ? AND role = 'user' "
                            "GROUP BY content", (session,)))
    assert [counts.get(turn_text(i)) for i in range(1, TURNS + 1)] == [1] * TURNS
    assert all(counts.get(text) == 1 for text in AFTER)


def test_grep_finds_the_first_turn_after_compaction(switched):
    tool_results = [m for b in chat_requests(switched["after"]) for m in b["messages"] if m.get("role") == "tool"]
    assert tool_results, "trove_grep never ran"
    found = json.loads(tool_results[-1]["content"])
    assert found["total_results"] >= 1
    first_id = query(switched["home"].db_path, "SELECT MIN(store_id) FROM messages WHERE session_id = ?",
                     (switched["result"]["session_id"],))[0][0]
    assert first_id in [r.get("store_id") for r in found["results"]], found["results"]


# -- the provider refuses a request past its real window (config.yaml says 256K) ----------------

OVERFLOW_TURNS = [f"overflow turn {i}: " + " ".join(f"w{k}x{i}" for k in range(6000)) for i in range(1, 8)]


@pytest.fixture(scope="module")
def refused(make_home, fake_llm) -> dict[str, Any]:
    home = make_home(context_length=BIG)
    start = len(fake_llm.requests())
    fake_llm.context_limit = SMALL
    try:
        result = home.run_driver({"turns": OVERFLOW_TURNS, "max_iterations": 4}, "refused", timeout=600)
    finally:
        fake_llm.context_limit = 0
    return {"home": home, "result": result, "requests": fake_llm.requests()[start:]}


def test_a_provider_refusal_shrinks_the_window_and_trove_compacts_under_it(refused):
    result = refused["result"]
    assert result["engine_name"] == "trove" and not [w for w in result["warnings"] if FALLBACK_WARNING in w]
    assert any("maximum context length is 64000" in w for w in result["warnings"])
    assert result["compression_count"] >= 1
    sizes = [estimate_prompt_tokens(b) for b in chat_requests(refused["requests"])]
    refusals = [s for s in sizes if s > SMALL]
    assert len(refusals) == 1, sizes  # one refusal, then every request fits the reported window
    assert max(sizes[sizes.index(refusals[0]) + 1:]) < SMALL, sizes
    counts = dict(query(refused["home"].db_path, "SELECT content, COUNT(*) FROM messages WHERE session_id = ? "
                                                 "AND role = 'user' GROUP BY content", (result["session_id"],)))
    assert [counts.get(t) for t in OVERFLOW_TURNS] == [1] * len(OVERFLOW_TURNS)
