"""Through the real host: bad TROVE_* values never stop Hermes from starting.

Runs the real Hermes loop (the e2e harness: a scratch home, the fake model on 127.0.0.1);
marked ``e2e`` as well, so ``-m "not e2e"`` leaves it out with the rest of the host suite.
"""
from __future__ import annotations

import subprocess

import pytest
from e2e.conftest import fake_llm, host_python, make_home  # noqa: F401  (fixtures)
from e2e.harness import host_script

pytestmark = [pytest.mark.reliability, pytest.mark.e2e]

TURNS = ["turn 1: remember the code word walnut42", "turn 2: and one more plain message"]

MATRIX = {
    "nan threshold": {"TROVE_CONTEXT_THRESHOLD": "nan"},
    "every numeric knob hostile": {
        "TROVE_CONTEXT_THRESHOLD": "inf", "TROVE_L2_BUDGET_RATIO": "nan", "TROVE_RESERVE_TOKENS_FLOOR": "999999999",
        "TROVE_FRESH_TAIL_COUNT": "-5", "TROVE_LEAF_CHUNK_TOKENS": "1e999", "TROVE_DYNAMIC_LEAF_CHUNK_MAX": "1",
        "TROVE_SUMMARY_TIMEOUT_MS": "99999999999999999999999", "TROVE_FTS_INTEGRITY_CHECK_INTERVAL_HOURS": "-inf",
        "TROVE_ENABLE_SLASH_COMMAND": "maybe", "TROVE_SENSITIVE_PATTERNS": ",,,nope,",
    },
    "reserve floor above the window": {"TROVE_RESERVE_TOKENS_FLOOR": "500000"},
}


@pytest.mark.parametrize("name", sorted(MATRIX))
def test_the_host_starts_and_answers_with_bad_numeric_values(make_home, name):  # noqa: F811
    home = make_home(**MATRIX[name])
    result = home.run_driver({"turns": TURNS}, name.replace(" ", "-"))
    assert result["engine_name"] == "trove"
    assert len(result["turns"]) == len(TURNS) and all(t["final"] for t in result["turns"])
    if name == "reserve floor above the window":
        return  # valid on its own; the engine ignores it for a window it does not fit (unit-tested)
    # the operator sees every refused value, named, and the doctor fails on them
    done = subprocess.run([host_script(home.python, "hermes"), "trove", "doctor", "--json"], env=home.env(),
                          cwd=str(home.root), capture_output=True, text=True, timeout=120)
    out = done.stdout + done.stderr
    for var in MATRIX[name]:
        if var not in ("TROVE_ENABLE_SLASH_COMMAND", "TROVE_SENSITIVE_PATTERNS"):
            assert var in out, f"the doctor does not name {var}: {out[-1500:]}"
    assert '"config_validation"' in out and '"fail"' in out


def test_the_host_starts_when_the_database_path_is_a_directory(make_home, tmp_path):  # noqa: F811
    bad = tmp_path / "db-is-a-directory"
    bad.mkdir()
    home = make_home(TROVE_DATABASE_PATH=str(bad))
    result = home.run_driver({"turns": TURNS}, "db-directory")
    # Hermes starts and answers on its built-in compressor; the message naming the path and
    # TROVE_DATABASE_PATH is checked in test_storage_paths (the host does not keep plugin logs).
    assert len(result["turns"]) == len(TURNS) and all(t["final"] for t in result["turns"])
