"""The pre-answer context under the real host's cap on hook text (``hooks.output_spill.max_chars``).

Hermes replaces a ``pre_llm_call`` context longer than the cap with a head and tail preview and
writes the whole to ``<HERMES_HOME>/hook_outputs``, every turn. With a cap below the recall
policy's length (about 750 characters), trove leaves the policy out rather than have it cut; with
the host's default the policy goes in whole. Either way no spill file appears.
"""
from __future__ import annotations

import json
from typing import Any

import pytest

from .harness import FALLBACK_WARNING, chat_requests

POLICY = "TROVE recall policy"
PREVIEW = "hook_outputs"


@pytest.fixture(scope="module")
def runs(make_home, fake_llm) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, cap in (("low", 500), ("default", None)):
        home = make_home(context_length=64000)
        if cap is not None:
            with (home.home / "config.yaml").open("a", encoding="utf-8") as fh:
                fh.write(f"hooks:\n  output_spill:\n    max_chars: {cap}\n")
        start = len(fake_llm.requests())
        result = home.run_driver({"turns": ["first question", "second question"], "max_iterations": 3},
                                 f"hook-cap-{name}", timeout=300)
        out[name] = {"home": home, "result": result, "bodies": chat_requests(fake_llm.requests()[start:])}
    return out


def test_a_cap_below_the_policy_leaves_it_out_and_spills_nothing(runs):
    low = runs["low"]
    assert low["result"]["engine_name"] == "trove" and low["bodies"]
    text = json.dumps([b["messages"] for b in low["bodies"]])
    assert POLICY not in text and PREVIEW not in text, text[-1500:]
    assert not (low["home"].home / "hook_outputs").exists()


def test_the_default_cap_takes_the_policy_whole(runs):
    default = runs["default"]
    first = json.dumps(default["bodies"][0]["messages"])
    assert POLICY in first and PREVIEW not in first
    assert not (default["home"].home / "hook_outputs").exists()


def test_no_fallback_reaches_the_host(runs):
    for run in runs.values():
        logs = run["home"].host_logs()
        assert FALLBACK_WARNING not in logs and "failed (the host carries on)" not in logs
