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

from hermes_trove.command import main
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


def test_db_names_a_server_by_url_without_making_a_folder_of_it(db, tmp_path, monkeypatch):
    """``--db postgresql://...`` reads that server (here unreachable: status says so), also over
    another TROVE_DATABASE_URL, and makes no file or folder from the URL."""
    monkeypatch.chdir(tmp_path)
    unreachable = "postgresql://trove@127.0.0.1:1/nowhere?connect_timeout=2"
    code, out = run("status", "--db", unreachable, "--json")
    assert "no trove database" not in out and "127.0.0.1:1/nowhere" in out, out
    monkeypatch.setenv("TROVE_DATABASE_URL", "postgresql://trove@127.0.0.1:2/elsewhere?connect_timeout=2")
    code, out = run("status", "--db", unreachable, "--json")
    assert "127.0.0.1:1/nowhere" in out and "elsewhere" not in out, out
    assert not (tmp_path / "postgresql:").exists()


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


def test_doctor_outside_hermes_says_it_checks_the_store_only(db):
    """No session is bound outside Hermes, also when the store will not open: the header says so."""
    healthy = run("doctor", "--db", str(db))[1]
    os.truncate(db, 100)
    broken = run("doctor", "--db", str(db))[1]
    for out in (healthy, broken):
        head = out.splitlines()[0]
        assert head.endswith("(no session bound: the store only)") and "None" not in head, out


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
    seconds = run("backup", "--db", str(db))[1].split("seconds: ", 1)[1].split()[0]
    assert len(seconds.partition(".")[2]) <= 3, seconds  # read by people: no 16-digit float


def test_a_missing_database_is_an_error_and_is_not_created(tmp_path):
    missing = tmp_path / "nope.db"
    assert run("status", "--db", str(missing))[0] == 2
    assert not missing.exists()


def test_with_no_store_yet_the_module_cli_names_turns_waiting_in_an_outbox(tmp_path, monkeypatch, capsys):
    """`python -m hermes_trove doctor` (no host runtime to fall back on) says what `hermes trove doctor`
    says: turns written while TROVE_DATABASE_URL was set, never shipped, wait in trove-outbox.db."""
    from hermes_trove.outbox import Outbox

    for name in [k for k in os.environ if k.startswith("TROVE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    (tmp_path / "config.yaml").write_text("context:\n  engine: trove\n", encoding="utf-8")
    box = Outbox(tmp_path / "trove-outbox.db")
    box.store.append(SessionKey("s-pg", platform="cli"), [user("written for the server"), assistant("ok")])
    box.db.close()
    code, out = run("doctor")
    err = capsys.readouterr().err
    assert code == 2 and out == "" and "no trove database" in err, err
    assert "2 message(s) written while TROVE_DATABASE_URL was set" in err and str(box.path) in err, err
    assert not (tmp_path / "trove.db").exists()


@pytest.mark.parametrize("argv", [["status"], ["doctor"], ["doctor", "repair"], ["backup"], ["dag"],
                                  ["doctor", "retention"]], ids=" ".join)
def test_another_programs_sqlite_file_is_refused_and_left_as_it_was(tmp_path, argv):
    """A read-only command pointed at the wrong file (the host's own state.db, say) must not
    turn it into a trove store: no tables added, its journal mode kept."""
    import sqlite3

    foreign = tmp_path / "state.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT)")
        conn.execute("INSERT INTO notes(body) VALUES ('keep me')")
    before = foreign.read_bytes()
    code, out = run(*argv, "--db", str(foreign), "--json")
    assert code == 1 and "another program's SQLite database (tables notes), not trove's" in out, out
    assert foreign.read_bytes() == before and not Path(f"{foreign}-wal").exists()
    if argv == ["status"]:  # the health section agrees with the error
        health = json.loads(out)["store_health"]
        assert health["usable"] is False and "another program's SQLite database" in health["state"], health


@pytest.mark.parametrize("argv", [["status"], ["doctor", "repair"], ["backup"], ["dag"], ["doctor", "retention"],
                                  ["doctor", "clean"], ["embed"], ["embed", "status"], ["rollups"],
                                  ["assertions"]], ids=" ".join)
def test_a_truncated_store_file_is_reported_with_its_fix_and_no_traceback(db, argv, caplog):
    import sqlite3

    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    os.truncate(db, db.stat().st_size // 2)
    code, out = run(*argv, "--db", str(db), "--json")
    assert code == 1 and "malformed" in out, out
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    if argv == ["status"]:
        assert "restore a backup" in json.loads(out)["store_health"]["fix"]


@pytest.mark.parametrize("argv", [["doctor", "repair"], ["dag"], ["doctor", "retention"]], ids=" ".join)
def test_a_server_that_is_down_is_reported_without_a_traceback(db, argv, caplog):
    code, out = run(*argv, "--db", "postgresql://trove@127.0.0.1:1/nowhere?connect_timeout=2", "--json")
    assert code == 1 and json.loads(out)["status"] == "error", out
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"


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
    # the host runs trove here (with no config.yaml it runs its compressor, which doctor warns about)
    (tmp_path / "config.yaml").write_text("context:\n  engine: trove\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "hermes_trove", "doctor", "--db", str(db), "--json"],
                          capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["overall"] == "healthy"


# -- the CLI behaves like a CLI --------------------------------------------------------------

def hermes_cli(runtime):
    """``hermes trove`` as the host builds it: our parser under a subparser, ``args.func(args)``."""
    import argparse

    from hermes_trove import command

    parser = argparse.ArgumentParser(prog="hermes")
    sub = parser.add_subparsers(dest="command")
    trove = sub.add_parser("trove")
    command.setup_parser(trove)
    trove.set_defaults(func=command.cli_handler(runtime))
    return parser


def host_exit(parser, *argv: str) -> int:
    """Run the handler the way hermes_cli.main does (return value dropped) and read the exit code."""
    args = parser.parse_args(["trove", *argv])
    with pytest.raises(SystemExit) as done:
        args.func(args)
    return int(done.value.code or 0)


def test_hermes_trove_exits_0_1_2_although_the_host_drops_return_values(db, tmp_path, capsys):
    from hermes_trove.config import load_config

    rt = build_runtime(load_config(os.environ))
    parser = hermes_cli(rt)
    assert host_exit(parser, "doctor") == 0
    assert host_exit(parser, "frobnicate") == 2
    assert host_exit(parser, "rotate", "apply") == 1  # refused: no session outside Hermes
    assert host_exit(parser, "status", "--db", str(tmp_path / "missing.db")) == 2
    assert not (tmp_path / "missing.db").exists()


def test_a_session_given_to_a_whole_store_command_is_a_usage_error_not_ignored(db, tmp_path, capsys):
    from hermes_trove.config import load_config

    rt = build_runtime(load_config(os.environ))
    parser = hermes_cli(rt)
    backups = Path(rt.db.path).parent / "backups"
    for words in (("doctor",), ("backup",), ("doctor", "repair"), ("embed",)):
        capsys.readouterr()
        assert host_exit(parser, *words, "--session", "chat-1") == 2, words
        err = capsys.readouterr().err
        assert "takes no --session" in err and "status, dag, rotate and doctor clean" in err, err
    assert not backups.exists()  # nothing was written
    assert host_exit(parser, "status", "--session", "chat-1") == 0  # the commands that name a session still take it


def test_format_mermaid_for_a_command_that_has_no_drawing_is_a_usage_error(db, capsys):
    """--format is dag's: given to another subcommand it is refused (exit 2), not ignored with exit 0."""
    for words in (("status",), ("doctor",), ("backup",), ("migrate", "--to", str(db.parent / "copy.db"))):
        capsys.readouterr()
        code, out = run(*words, "--db", str(db), "--format", "mermaid")
        assert code == 2 and out == "" and "--format is only for dag" in capsys.readouterr().err, words
    assert not (db.parent / "backups").exists() and not (db.parent / "copy.db").exists()
    code, out = run("dag", "--db", str(db), "--session", "chat-1", "--format", "mermaid")
    assert code == 0, out


def test_wrong_words_for_a_subsystem_subcommand_exit_2_as_usage(db, capsys):
    from hermes_trove.config import load_config

    parser = hermes_cli(build_runtime(load_config(os.environ)))
    for words in (("rollups", "rebuild", "fortnight"), ("rollups", "rebuild", "day", "someday"),
                  ("rollups", "rebuild"), ("assertions", "frobnicate"), ("assertions", "rebuild", "--limit", "0")):
        capsys.readouterr()
        assert host_exit(parser, *words) == 2, (words, capsys.readouterr().out[-500:])
    assert host_exit(parser, "rollups", "rebuild", "day", "2026-01-01") == 0  # a right one still previews
    # a word an assertions action does not take was ignored: `drop aply` answered a dry run with exit 0
    for words in (("assertions", "status", "bogus"), ("assertions", "drop", "aply"),
                  ("assertions", "rebuild", "repair", "backup")):
        capsys.readouterr()
        assert host_exit(parser, *words) == 2, words
        assert f"assertions {words[1]} does not take" in capsys.readouterr().out
    for words in (("assertions", "status"), ("assertions", "drop"), ("assertions", "drop", "apply"),
                  ("assertions", "rebuild", "--limit", "3")):
        assert host_exit(parser, *words) == 0, words  # the words each action takes still work


def test_assertions_rebuild_takes_reset_on_the_command_line_as_in_a_chat(db, capsys):
    """docs/state.md: the /trove words work in the CLI too; --reset was an unrecognized argument (exit 2)."""
    code, out = run("--db", str(db), "--json", "assertions", "rebuild", "--reset")
    assert code == 0 and json.loads(out)["reset"] is True, out[-500:]
    code, out = run("--db", str(db), "--json", "assertions", "rebuild")
    assert code == 0 and json.loads(out)["reset"] is False, out[-500:]
    code, out = run("--db", str(db), "status", "--reset")  # a command that takes no --reset: usage
    assert code == 2 and "unknown subcommand" in out, out[-500:]


def test_import_as_a_subcommand_names_the_importer_script(db, capsys):
    code, out = run("import", "--db", str(db))
    assert code == 2 and out.startswith("unknown subcommand: import")
    assert "scripts/import_lossless_claw.py --help" in out and "docs/import.md" in out, out[:400]


def test_help_and_read_only_commands_never_create_a_database(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TROVE_")}
    env["HERMES_HOME"] = str(tmp_path)
    for argv in (["--help"], ["help"], ["status"], ["doctor"], ["dag"], ["doctor", "retention"], ["import", "--help"]):
        proc = subprocess.run([sys.executable, "-m", "hermes_trove", *argv], capture_output=True, text=True,
                              env=env, timeout=120, cwd=tmp_path)
        assert proc.returncode in (0, 2), (argv, proc.stderr)
        assert "Traceback" not in proc.stderr
    assert not (tmp_path / "trove.db").exists() and list(tmp_path.iterdir()) == []


def test_plugin_load_without_a_database_creates_none(tmp_path, monkeypatch):
    import hermes_trove

    monkeypatch.setenv("HERMES_HOME", str(tmp_path))

    class Ctx:
        def register_context_engine(self, engine):
            self.engine = engine

        def register_cli_command(self, *a, **k):
            pass

    hermes_trove.register(Ctx())
    assert not (tmp_path / "trove.db").exists()


def test_backups_of_an_explicit_db_land_beside_it_not_under_the_home(db, tmp_path, monkeypatch):
    other = tmp_path / "elsewhere"
    other.mkdir()
    moved = other / "x.db"
    import sqlite3

    with sqlite3.connect(db) as src, sqlite3.connect(moved) as dst:
        src.backup(dst)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HERMES_HOME", str(home))
    code, out = run("backup", "--db", str(moved), "--json")
    assert code == 0 and Path(json.loads(out)["path"]).parent == other / "backups" / "trove"
    code, out = run("rotate", "apply", "--db", str(moved), "--session", "chat-1", "--json")
    assert code == 0 and Path(json.loads(out)["backup"]).parent == other / "backups" / "trove"
    assert list(home.iterdir()) == []


def test_human_output_shows_iso_times_and_json_keeps_epochs(db):
    code, out = run("status", "--db", str(db), "--session", "chat-1")
    created = next(line for line in out.splitlines() if line.strip().startswith("created_at:"))
    assert code == 0 and created.strip().endswith("Z") and "T" in created
    data = json.loads(run("status", "--db", str(db), "--session", "chat-1", "--json")[1])
    assert isinstance(data["lifecycle"]["created_at"], float) and isinstance(data["generated_at"], float)


def test_a_closed_pipe_prints_no_traceback(db, tmp_path):
    env = {**os.environ, "HERMES_HOME": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "hermes_trove", "status", "--db", str(db)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    proc.stdout.close()  # like `| head -0`: the reader is gone before the first write
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    proc.stderr.close()
    assert "Traceback" not in err and "BrokenPipe" not in err
    assert proc.returncode == 0


@pytest.mark.parametrize("name", ["{db}-wal", "{db}-shm", "{db}-journal", "{home}/trove-outbox.db",
                                  "{home}/trove-outbox.db-wal", "{home}/trove-payloads/copy.db",
                                  "{home}/backups/trove/copy.db", "{link}"])
def test_migrate_refuses_a_target_sqlite_or_trove_uses_beside_the_store(db, tmp_path, name):
    # written there, a copy would be deleted or truncated by SQLite at a checkpoint or close (or
    # overwritten by trove), though the migrate said ok: refused before anything is written
    link = tmp_path / "elsewhere" / "copy.db"
    link.parent.mkdir()
    link.symlink_to(f"{db}-wal")  # a symlink to the WAL is the WAL
    target = name.format(db=db, home=tmp_path, link=link)
    def files() -> dict[str, bytes]:
        return {str(p): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}

    before = files()
    code, out = run("migrate", "--db", str(db), "--to", target)
    assert code == 2 and out == ""
    assert files() == before  # not a byte written, the WAL and the store included


def test_migrate_refusal_names_the_file_and_why(db, capsys):
    code, _ = run("migrate", "--db", str(db), "--to", f"{db}-wal")
    err = capsys.readouterr().err
    assert code == 2 and f"beside the database {db}" in err and "nothing was written" in err


def test_migrate_with_a_session_is_refused_not_a_copy_of_the_whole_store(db, tmp_path, capsys):
    """migrate copies every session: a --session that asks for one is a usage error, nothing copied."""
    target = tmp_path / "copies" / "one-session.db"
    code, out = run("migrate", "--db", str(db), "--to", str(target), "--session", "chat-1")
    assert code == 2 and out == "" and "takes no --session" in capsys.readouterr().err
    assert not target.exists() and not target.parent.exists()


def test_migrate_to_a_file_of_its_own_still_copies(db, tmp_path):
    code, out = run("migrate", "--db", str(db), "--to", str(tmp_path / "copies" / "trove-copy.db"), "--json")
    assert code == 0 and json.loads(out)["status"] == "ok"


@pytest.mark.parametrize("argv", [(), ("--db", "{db}")])
def test_a_managed_scope_env_wins_over_the_homes_and_the_shells(db, tmp_path, monkeypatch, argv):
    # Hermes applies $HERMES_MANAGED_DIR/.env (else /etc/hermes/.env) last, over $HERMES_HOME/.env and
    # the shell's exports; `hermes trove` and `python -m hermes_trove` read their settings the same way
    managed = tmp_path / "managed"
    managed.mkdir()
    (managed / ".env").write_text("# pinned by the administrator\nexport TROVE_FRESH_TAIL_COUNT='7'\nOTHER=1\n")
    (tmp_path / ".env").write_text("TROVE_FRESH_TAIL_COUNT=9\nTROVE_LEAF_CHUNK_TOKENS=3000\n")
    monkeypatch.setenv("TROVE_FRESH_TAIL_COUNT", "5")
    monkeypatch.setenv("HERMES_MANAGED_DIR", str(managed))
    code, out = run("status", "--json", *(a.format(db=db) for a in argv))
    config = json.loads(out)["config"]
    assert code == 0 and config["TROVE_FRESH_TAIL_COUNT"]["value"] == 7
    assert config["TROVE_LEAF_CHUNK_TOKENS"]["value"] == 3000  # what the managed file leaves alone stays the home's
    monkeypatch.delenv("HERMES_MANAGED_DIR")
    code, out = run("status", "--json")
    assert json.loads(out)["config"]["TROVE_FRESH_TAIL_COUNT"]["value"] == 9


def test_a_served_profile_takes_the_managed_scope_env_over_its_own(tmp_path, monkeypatch):
    from hermes_trove.config import load_config, profile_environ

    managed, profile = tmp_path / "managed", tmp_path / "profiles" / "work"
    managed.mkdir()
    profile.mkdir(parents=True)
    (managed / ".env").write_text("TROVE_CONTEXT_THRESHOLD=0.5\n")
    (profile / ".env").write_text("TROVE_CONTEXT_THRESHOLD=0.9\nTROVE_FRESH_TAIL_COUNT=11\n")
    monkeypatch.setenv("HERMES_MANAGED_DIR", str(managed))
    monkeypatch.setenv("TROVE_CONTEXT_THRESHOLD", "0.6")  # the default profile's, which a served profile drops
    config = load_config(profile_environ(str(profile)), hermes_home=str(profile))
    assert (config.context_threshold, config.fresh_tail_count) == (0.5, 11)
    monkeypatch.setenv("HERMES_MANAGED_DIR", str(tmp_path / "no-such-folder"))  # no managed scope: the profile's
    assert load_config(profile_environ(str(profile)), hermes_home=str(profile)).context_threshold == 0.9


def test_a_managed_env_value_with_a_trailing_comment_reads_as_hermes_reads_it(db, tmp_path, monkeypatch):
    # Hermes loads the managed .env with python-dotenv, where `KEY=7  # note` is 7: trove reads the
    # same value instead of rejecting "7  # note" and falling back to the default
    managed = tmp_path / "managed"
    managed.mkdir()
    (managed / ".env").write_text("TROVE_FRESH_TAIL_COUNT=7   # pinned by the administrator\n"
                                  "TROVE_LEAF_CHUNK_TOKENS=\"3000\" # quoted, then a note\n")
    monkeypatch.setenv("HERMES_MANAGED_DIR", str(managed))
    monkeypatch.setenv("TROVE_FRESH_TAIL_COUNT", "7")  # what Hermes itself exported from that file
    code, out = run("status", "--json")
    config = json.loads(out)["config"]
    assert code == 0 and config["TROVE_FRESH_TAIL_COUNT"]["value"] == 7
    assert config["TROVE_LEAF_CHUNK_TOKENS"]["value"] == 3000
