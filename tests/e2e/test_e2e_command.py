"""``/trove status`` through the real CLI's slash-command dispatch.

The interactive CLI object (``cli.HermesCLI``) runs in one host process and receives
``/trove status`` before any turn, then a normal chat turn, then ``/trove status`` again,
all through ``HermesCLI.process_command`` (the path a typed command takes). A second home
without ``TROVE_ENABLE_SLASH_COMMAND`` shows the command is not registered at all.
"""
from __future__ import annotations

import re
from typing import Any

import pytest

from .harness import FALLBACK_WARNING, query

CONTEXT_LENGTH = 128000
THRESHOLD = 0.4
EXPECTED_THRESHOLD_TOKENS = int(CONTEXT_LENGTH * THRESHOLD)
STEPS = [
    {"command": "/trove status"},
    {"chat": "command turn 1: the locker number is 5521"},
    {"command": "/trove status"},
    {"chat": "command turn 2: the gate code is 1187"},
    {"chat": "command turn 3: the bike lock is 4410"},
    {"command": "/compress"},
    {"command": "/trove doctor"},
    {"command": "/trove status"},
]


@pytest.fixture(scope="module")
def with_command(make_home) -> dict[str, Any]:
    home = make_home(context_length=CONTEXT_LENGTH, TROVE_ENABLE_SLASH_COMMAND="1",
                     TROVE_CONTEXT_THRESHOLD=str(THRESHOLD), TROVE_FRESH_TAIL_COUNT="2")
    return {"home": home, "result": home.run_driver({"mode": "cli", "steps": STEPS}, "command-on")}


@pytest.fixture(scope="module")
def without_command(make_home) -> dict[str, Any]:
    home = make_home(context_length=CONTEXT_LENGTH)
    return {"home": home, "result": home.run_driver({"mode": "cli", "steps": STEPS}, "command-off")}


def _field(output: str, name: str) -> list[str]:
    """Values of every ``name: value`` line of a rendered status."""
    return re.findall(rf"^\s*{re.escape(name)}: (.*)$", output, flags=re.M)


def test_before_any_turn_the_status_says_plainly_that_no_session_is_bound(with_command):
    before = with_command["result"]["steps"][0]
    assert before["agent_session_id"] is None  # the CLI builds its agent on the first turn
    out = before["output"]
    assert out.lstrip().startswith("trove status:"), out[:500]
    assert _field(out, "session_id") == ["(unbound)", "(unbound)"], out[:1500]
    assert _field(out, "bound") == ["False"]
    assert "no engine has bound a session in this process" in out
    assert "Unknown command" not in out
    # Typed inside Hermes: the verdict must not tell the user to go and start Hermes.
    assert _field(out, "verdict") == ["selected: context.engine is trove; no session bound yet in this process"]
    assert _field(out, "in_host") == ["True"]


def test_after_a_turn_the_status_names_the_bound_session_and_the_threshold(with_command):
    result = with_command["result"]
    chat, after = result["steps"][1], result["steps"][2]
    assert chat["reply"].startswith("ack #"), chat
    assert chat["engine_name"] == "trove"
    session_id = chat["session_id"]
    assert session_id and chat["agent_session_id"] == session_id == after["session_id"]
    out = after["output"]
    assert out.lstrip().startswith("trove status:"), out[:500]
    assert "(unbound)" not in out
    # top level and the engine section both name the CLI's own session
    assert _field(out, "session_id")[:2] == [session_id, session_id], out[:1500]
    assert _field(out, "bound") == ["True"]
    assert after["threshold_tokens"] == EXPECTED_THRESHOLD_TOKENS
    # the engine section and the context-pressure section both report the threshold
    assert _field(out, "threshold_tokens") == [str(EXPECTED_THRESHOLD_TOKENS)] * 2, out[:3000]
    assert _field(out, "context_length")[0] == str(CONTEXT_LENGTH)
    assert re.search(rf"TROVE_CONTEXT_THRESHOLD = {THRESHOLD}\s+\[env\]", out)
    stored = query(with_command["home"].db_path, "SELECT session_id FROM sessions")
    assert [r[0] for r in stored] == [session_id]


def test_right_after_a_compaction_the_pressure_says_not_measured_instead_of_minus_one(with_command):
    """The host writes -1 into last_prompt_tokens after a compaction, until the next answer reports usage."""
    steps = with_command["result"]["steps"]
    compress, doctor_out, status_out = steps[5], steps[6]["output"], steps[7]["output"]
    assert compress["compression_count"] == 1, compress
    line = next(x for x in doctor_out.splitlines() if "context_pressure:" in x)
    assert "no prompt measured since" in line and "-1/" not in line and "-0%" not in line, line
    pressure = status_out.split("context_pressure:", 1)[1]
    assert _field(pressure, "measured")[0] == "False" and _field(pressure, "ratio")[0] == "null", pressure[:400]


def test_the_command_is_registered_with_the_host_when_enabled(with_command):
    result = with_command["result"]
    assert "trove" in result["plugin_commands"]
    assert result["plugin_source"].startswith("user:"), result["plugin_source"]
    assert not [w for w in result["warnings"] if FALLBACK_WARNING in w], result["warnings"]


def test_without_the_setting_the_host_knows_no_trove_command(without_command):
    result = without_command["result"]
    assert result["engine_name"] == "trove"  # the plugin itself did load and serve the turn
    assert result["steps"][1]["reply"].startswith("ack #")
    assert "trove" not in result["plugin_commands"]
    for step in (result["steps"][0], result["steps"][2], result["steps"][7]):
        assert "Unknown command: /trove status" in step["output"], step["output"][:500]
        assert "trove status:" not in step["output"]


def test_the_command_runs_touch_only_loopback(with_command, without_command):
    for run in (with_command, without_command):
        assert run["home"].guarded_processes
        assert run["home"].netlog.read_text(encoding="utf-8") == ""
