"""Summaries routed to a model with a smaller window than the chat model's, on a wire that carries
the answer allowance.

The chat model has 128K. ``TROVE_SUMMARY_MODEL`` names ``fake-summary-small`` and
``TROVE_SUMMARY_CONTEXT_LENGTH`` gives its 16K window; the fake server refuses any request to it
whose prompt plus ``max_tokens`` passes 16K, as a provider does. The host's auxiliary client sends
``max_tokens`` only to endpoints it treats as Anthropic-compatible (a ``/anthropic`` base path)
and leaves it out elsewhere, so the auxiliary route here points at such a path on the fake server.
Thirty turns of about 1,200 tokens make a backlog larger than one default 20,000-token leaf chunk:
cut by the chat window, the first leaf request would be refused twice and the route's circuit breaker
would leave the rest to deterministic truncation.
"""
from __future__ import annotations

from typing import Any

import pytest

from .fake_llm import estimate_prompt_tokens, requested_answer_tokens
from .harness import aux_requests, query

SUMMARY_MODEL, SUMMARY_WINDOW = "fake-summary-small", 16000
WORDS = ("amber", "basalt", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper")
TURNS = [f"summary-window turn {i:02d}: " + " ".join(f"{WORDS[(i + k) % 10]}{k % 97}" for k in range(600))
         for i in range(1, 31)]


@pytest.fixture(scope="module")
def routed(make_home, fake_llm) -> dict[str, Any]:
    home = make_home(context_length=128000, TROVE_SUMMARY_MODEL=SUMMARY_MODEL,
                     TROVE_SUMMARY_CONTEXT_LENGTH=str(SUMMARY_WINDOW), TROVE_CONTEXT_THRESHOLD="0.25")
    config = home.home / "config.yaml"
    proxy = home.base_url.rsplit("/v1", 1)[0] + "/anthropic-proxy/v1"
    config.write_text(config.read_text(encoding="utf-8").replace(
        "  compression:\n", f"  compression:\n    provider: custom\n    base_url: {proxy}\n    api_key: sk-fake\n", 1),
        encoding="utf-8")
    start, refused = len(fake_llm.requests()), len(fake_llm.refused)
    fake_llm.model_limits[SUMMARY_MODEL] = SUMMARY_WINDOW
    try:
        result = home.run_driver({"turns": TURNS, "max_iterations": 2}, "summary-window", timeout=900)
    finally:
        fake_llm.model_limits.clear()
    return {"home": home, "result": result, "requests": fake_llm.requests()[start:],
            "refused": fake_llm.refused[refused:]}


def test_every_summary_request_and_its_answer_allowance_fit_the_summary_models_window(routed):
    summaries = [b for b in aux_requests(routed["requests"]) if b.get("model") == SUMMARY_MODEL]
    assert routed["result"]["compression_count"] >= 1 and summaries
    assert all(requested_answer_tokens(b) > 0 for b in summaries)  # the wire carried the allowance
    needs = [estimate_prompt_tokens(b) + requested_answer_tokens(b) for b in summaries]
    assert max(needs) <= SUMMARY_WINDOW, needs
    assert [r for r in routed["refused"] if r["model"] == SUMMARY_MODEL] == [], routed["refused"]


def test_the_summaries_came_from_the_model_not_from_truncation(routed):
    levels = query(routed["home"].db_path, "SELECT level, COUNT(*) FROM summary_nodes GROUP BY level")
    assert levels and dict(levels).get("deterministic", 0) == 0 and dict(levels).get("normal", 0) >= 1, levels
