"""``python -m hermes_trove ...``: text and JSON output, exit codes, never creating a database."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, assistant, make_config, user

from hermes_trove.__main__ import main
from hermes_trove.runtime import build_runtime
from hermes_trove.store import SessionKey


@pytest.fixture
def db(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    for name in [k for k in os.environ if k.startswith("TROVE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("TROVE_FRESH_TAIL_COUNT", "2")  # the CLI reads its config from the environment
    rt = build_runtime(make_config(tmp_path, fresh_tail_count=2))
    rt.store.append(SessionKey("chat-1", platform="cli"),
                    [user(f"q{i}") if i % 2 == 0 else assistant(f"a{i}") for i in range(6)])
    return Path(rt.db.path)


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


def test_status_json_outside_hermes_is_unbound_and_counts_rows(db):
    code, out = run("status", "--db", str(db), "--json")
    data = json.loads(out)
    assert code == 0 and data["session_id"] == "(unbound)" and data["store"]["total_messages"] == 6


def test_status_text_for_a_named_session(db):
    code, out = run("--db", str(db), "--session", "chat-1")
    assert code == 0 and out.startswith("trove status:") and "session_id: chat-1" in out


def test_doctor_exit_code_follows_health(db):
    assert run("doctor", "--db", str(db))[0] == 0
    import sqlite3

    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO messages_fts(rowid, content) VALUES (777, 'phantom')")
    conn.commit()
    conn.close()
    code, out = run("doctor", "--db", str(db))
    assert code == 1 and "FAIL" in out
    code, out = run("doctor", "repair", "apply", "--db", str(db), "--json")
    assert code == 0 and json.loads(out)["status"] == "repaired"
    assert run("doctor", "--db", str(db))[0] == 0


def test_rotate_from_the_cli_needs_a_session_and_then_applies(db, tmp_path):
    code, out = run("rotate", "apply", "--db", str(db), "--json")
    assert code == 1 and json.loads(out)["status"] == "refused"
    code, out = run("rotate", "apply", "--db", str(db), "--session", "chat-1", "--json")
    data = json.loads(out)
    assert code == 0 and data["status"] == "rotated"
    assert Path(data["backup"]).parent == tmp_path / "backups" / "trove"


def test_backup_from_the_cli_lands_under_hermes_home(db, tmp_path):
    code, out = run("backup", "--db", str(db), "--json")
    assert code == 0 and Path(json.loads(out)["path"]).parent == tmp_path / "backups" / "trove"


def test_a_missing_database_is_an_error_and_is_not_created(tmp_path):
    missing = tmp_path / "nope.db"
    assert run("status", "--db", str(missing))[0] == 2
    assert not missing.exists()


def test_help_and_unknown_words(db):
    code, out = run("help", "--db", str(db))
    assert code == 0 and "python -m hermes_trove rotate apply" in out
    code, out = run("frobnicate", "--db", str(db))
    assert code == 2 and out.startswith("unknown subcommand: frobnicate")


def test_python_dash_m_runs_from_an_installed_package_layout(db, tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "hermes_trove").symlink_to(ROOT, target_is_directory=True)
    env = {**os.environ, "PYTHONPATH": str(site), "HERMES_HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "hermes_trove", "doctor", "--db", str(db), "--json"],
                          capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["overall"] == "healthy"
