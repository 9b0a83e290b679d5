"""Degraded states under the real host.

1. An unusable store: ``TROVE_DATABASE_PATH`` lies under a regular file. Trove stays the
   selected engine and hands compaction to the host's built-in compressor: ten turns of about
   7,000 tokens in a 64K window must compact, and every main request stays under the window.
   ``hermes trove status`` exits 1 and names the reason.
2. A load failure: a copy of the plugin directory whose ``engine.py`` imports the package by
   its pip name (``hermes_trove``, not importable in the host venv). The host keeps its
   compressor, the log says what to do, and ``hermes trove doctor``/``status`` report the
   error, the module and the fix, exiting 1.
3. Held turns outlive the process: two ``hermes chat`` runs (a session and its resume) while the
   store is unusable, each exiting before it recovers; once the path is fixed, ``hermes trove
   status`` (loading the plugin) stores both runs' turns exactly once and marks the session ended
   (the second run's exit ended it), and a third run resumes the session without storing anything twice.
"""
from __future__ import annotations

import re
import shutil
from typing import Any

import pytest

from .harness import ROOT, SNAPSHOT_IGNORE, aux_requests, chat_requests, query, request_tokens, status_json

CONTEXT_LENGTH = 64000
TURNS = 10
TURN_CHARS = 28000  # about 7,000 tokens a turn: ten of them overflow the window twice over
WORDS = ("amber", "basalt", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper")


def turn_text(i: int) -> str:
    filler = " ".join(f"{WORDS[(i + k) % len(WORDS)]}{k % 89}" for k in range(TURN_CHARS // 7))
    return (f"degraded turn {i:02d}: " + filler)[:TURN_CHARS]


@pytest.fixture(scope="module")
def unusable_run(make_home, fake_llm, tmp_path_factory) -> dict[str, Any]:
    blocker = tmp_path_factory.mktemp("blocker") / "afile"
    blocker.write_text("a regular file where the database directory should be\n", encoding="utf-8")
    db_path = blocker / "trove.db"
    home = make_home(context_length=CONTEXT_LENGTH, TROVE_DATABASE_PATH=str(db_path))
    start = len(fake_llm.requests())
    result = home.run_driver({"turns": [turn_text(i) for i in range(1, TURNS + 1)], "max_iterations": 4},
                             "unusable", timeout=900)
    return {"home": home, "result": result, "requests": fake_llm.requests()[start:], "blocker": blocker,
            "db_path": db_path}


def test_trove_stays_selected_and_the_built_in_compressor_compacts(unusable_run):
    result = unusable_run["result"]
    assert result["engine_name"] == "trove", result["engine_class"]
    assert not any("falling back to built-in compressor" in w for w in result["warnings"])
    assert result["compression_count"] and result["compression_count"] >= 1, result["turns"]
    assert aux_requests(unusable_run["requests"]), "the built-in compressor's summary call never reached the model"
    errors = [w for w in result["warnings"] if w.startswith("ERROR") and "is unusable" in w]
    assert errors and str(unusable_run["blocker"]) in errors[0] and "TROVE_DATABASE_PATH" in errors[0]


def test_every_main_request_stays_under_the_window(unusable_run):
    bodies = chat_requests(unusable_run["requests"])
    assert len(bodies) >= TURNS
    sizes = [request_tokens(b) for b in bodies]
    assert max(sizes) < CONTEXT_LENGTH, f"request sizes: {sizes}"
    assert sum(len(turn_text(1)) // 4 for _ in range(TURNS)) > CONTEXT_LENGTH  # compaction was needed


def test_status_exits_1_naming_the_reason(unusable_run):
    home, blocker = unusable_run["home"], unusable_run["blocker"]
    done = home.hermes("trove", "status")
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert "UNHEALTHY" in done.stdout and f"its parent {blocker} is not a directory" in done.stdout
    as_json = home.hermes("trove", "status", "--json")
    assert as_json.returncode == 1
    health = status_json(as_json)["store_health"]
    assert health["usable"] is False and health["reason"] == f"its parent {blocker} is not a directory"
    assert "TROVE_DATABASE_PATH" in health["fix"]
    assert blocker.is_file() and not unusable_run["db_path"].exists()


# -- a plugin that fails to load --------------------------------------------------------------------

@pytest.fixture(scope="module")
def broken_home(make_home):
    home = make_home()
    home.plugin_dir.unlink()  # the harness links the checkout; this home gets a broken copy instead
    shutil.copytree(ROOT, home.plugin_dir, symlinks=True,
                    ignore=lambda where, names: {*SNAPSHOT_IGNORE(where, names), *({"tests", "docs"} & set(names))})
    engine = home.plugin_dir / "engine.py"
    source = engine.read_text(encoding="utf-8")
    head, rest = source.split("from __future__ import annotations\n", 1)
    engine.write_text(f"{head}from __future__ import annotations\nfrom hermes_trove.config import load_config\n{rest}",
                      encoding="utf-8")
    return home


def test_a_failed_load_logs_what_to_do_and_the_host_keeps_its_compressor(broken_home):
    result = broken_home.run_driver({"turns": ["one turn with a broken plugin"]}, "broken")
    assert result["engine_name"] != "trove"
    errors = [w for w in result["warnings"] if w.startswith("ERROR") and "hermes-trove failed to load" in w]
    assert errors, result["warnings"]
    assert "No module named 'hermes_trove'" in errors[0] and "Fix:" in errors[0]
    assert "hermes plugins update hermes-trove" in errors[0] and "hermes trove doctor" in errors[0]


def test_doctor_and_status_report_the_load_error_and_exit_1(broken_home):
    doctor = broken_home.hermes("trove", "doctor")
    assert doctor.returncode == 1, doctor.stdout[-2000:] + doctor.stderr[-2000:]
    out = doctor.stdout
    assert "hermes trove doctor: hermes-trove FAILED TO LOAD" in out
    assert "ModuleNotFoundError: No module named 'hermes_trove'" in out
    assert "hermes_plugins.hermes_trove.engine" in out and "engine.py" in out
    assert "from hermes_trove.config import load_config" in out and "hermes plugins update hermes-trove" in out
    status = broken_home.hermes("trove", "status", "--json")
    assert status.returncode == 1
    failure = status_json(status)["load_error"]
    assert failure["exception"] == "ModuleNotFoundError" and failure["missing_module"] == "hermes_trove"
    assert failure["imported_by"].endswith(f"engine.py:{failure['line']}")


# -- held turns outlive a Hermes that exits before the store is usable ---------------------------------

HELD_TURNS = ["held turn 1: the locker code is 5182", "held turn 2: the bike is the blue one",
              "held turn 3: back with a working store"]


def test_turns_of_runs_that_exited_while_the_store_was_unusable_are_stored_later(make_home, tmp_path_factory):
    blocker = tmp_path_factory.mktemp("held") / "afile"
    blocker.write_text("a regular file where the database directory should be\n", encoding="utf-8")
    db_path = blocker / "trove.db"
    home = make_home(TROVE_DATABASE_PATH=str(db_path))
    first = home.run_cli(["chat", "-Q", "-q", HELD_TURNS[0]])
    found = re.search(r"session_id:\s*(\S+)", first.stdout + first.stderr)
    assert found, first.stdout + first.stderr
    session_id = found.group(1)
    home.run_cli(["chat", "-Q", "-q", HELD_TURNS[1], "--resume", session_id])
    spilled = list((home.home / "trove-held").glob("*.jsonl"))
    assert len(spilled) == 1 and not db_path.exists()
    blocker.unlink()
    blocker.mkdir()  # the operator fixes the path; no Hermes runs meanwhile
    done = home.hermes("trove", "status")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    sql = "SELECT role, content FROM messages WHERE session_id = ? ORDER BY store_id"
    rows = query(db_path, sql, (session_id,))
    assert [c for r, c in rows if r == "user"] == HELD_TURNS[:2] and len(rows) == 4, rows
    assert not list((home.home / "trove-held").glob("*.jsonl"))
    # the second run's exit ended the session, as it would have with a usable store
    assert query(db_path, "SELECT ended_at IS NOT NULL FROM sessions WHERE session_id = ?", (session_id,)) == [(1,)]
    home.run_cli(["chat", "-Q", "-q", HELD_TURNS[2], "--resume", session_id])
    rows = query(db_path, sql, (session_id,))
    assert [c for r, c in rows if r == "user"] == HELD_TURNS and len(rows) == 6, rows


# 4. A PostgreSQL setting removed before its outbox shipped: the turn waits in trove-outbox.db only.
UNREACHABLE = "postgresql://trove@127.0.0.1:1/trove"  # nothing listens on port 1: refused at once


@pytest.fixture(scope="module")
def left_outbox(make_home) -> dict[str, Any]:
    home = make_home(TROVE_DATABASE_URL=UNREACHABLE)
    turn = home.hermes("chat", "-Q", "-q", "a turn for a server that never answered: the token is 4471")
    home.env_overrides.pop("TROVE_DATABASE_URL")  # the operator gives up on the server
    before = home.hermes("trove", "doctor")  # the turn went to the outbox: no trove.db yet
    later = home.hermes("chat", "-Q", "-q", "a turn on the SQLite store")  # creates trove.db
    assert later.returncode == 0 and home.db_path.is_file(), later.stderr[-2000:]
    return {"home": home, "turn": turn, "before": before, "doctor": home.hermes("trove", "doctor")}


def test_with_no_store_yet_the_doctor_does_not_say_nothing_was_stored(left_outbox):
    before = left_outbox["before"]
    assert before.returncode == 2, before.stdout[-2000:] + before.stderr[-2000:]
    assert "has not stored anything" not in before.stderr
    assert "written while TROVE_DATABASE_URL was set" in before.stderr and "trove-outbox.db" in before.stderr


def test_a_turn_left_in_the_outbox_after_the_server_setting_goes_is_named_by_the_doctor(left_outbox):
    home, doctor = left_outbox["home"], left_outbox["doctor"]
    assert left_outbox["turn"].returncode == 0, left_outbox["turn"].stderr[-2000:]
    outbox = home.home / "trove-outbox.db"
    assert query(outbox, "SELECT COUNT(*) FROM messages")[0][0] >= 2  # the turn is there, and only there
    assert doctor.returncode == 0, doctor.stdout[-2000:] + doctor.stderr[-2000:]  # a warning, not a failure
    line = next((x for x in doctor.stdout.splitlines() if "outbox:" in x and "[WARN]" in x), "")
    assert "written while TROVE_DATABASE_URL was set" in line and str(outbox) in line, doctor.stdout[-3000:]
    assert "set TROVE_DATABASE_URL to that server again" in doctor.stdout
