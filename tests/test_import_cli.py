"""The import command: dry runs write nothing, bad sources fail clearly, applies are all-or-nothing."""
from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_trove.importer import ImportOptions, cli, run_import, target

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "import_lossless_claw.py"
REPORT_KEYS = {"scanned", "eligible", "would_import", "imported", "skipped_existing", "skipped_empty", "invalid_rows",
               "warnings", "summaries_scanned", "summaries_would_import", "summaries_imported",
               "summaries_skipped_existing", "summaries_skipped_unresolved", "backup_path", "import_id"}


def make_source(path: Path, n: int = 3, parts: bool = True) -> Path:
    """A minimal current-shape lossless-claw database with one conversation."""
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE conversations (conversation_id INTEGER PRIMARY KEY, session_id TEXT NOT NULL, session_key TEXT,
            created_at TEXT NOT NULL DEFAULT (datetime('now')));
        CREATE TABLE messages (message_id INTEGER PRIMARY KEY, conversation_id INTEGER NOT NULL, seq INTEGER NOT NULL,
            role TEXT NOT NULL, content TEXT NOT NULL, token_count INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL DEFAULT (datetime('now')));
        CREATE TABLE message_parts (part_id TEXT PRIMARY KEY, message_id INTEGER NOT NULL, session_id TEXT NOT NULL,
            part_type TEXT NOT NULL, ordinal INTEGER NOT NULL, text_content TEXT, metadata TEXT);
    """)
    conn.execute("INSERT INTO conversations(conversation_id, session_id, session_key)"
                 " VALUES (1, 'sess-1', 'agent:a:main')")
    for i in range(1, n + 1):
        role = "user" if i % 2 else "assistant"
        conn.execute("INSERT INTO messages VALUES (?, 1, ?, ?, ?, 0, '2026-03-02 09:00:00')",
                     (i, i, role, f"message number {i}"))
        if parts:
            conn.execute("INSERT INTO message_parts VALUES (?, ?, 'sess-1', 'text', 0, ?, NULL)",
                         (f"p{i}", i, f"message number {i}"))
    conn.commit()
    conn.close()
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main(*args: str) -> int:
    return cli.main(list(args))


def test_dry_run_creates_no_target(tmp_path, capsys):
    src = make_source(tmp_path / "lcm.db")
    assert main("--source-db", str(src), "--target-db", str(tmp_path / "trove.db"), "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert REPORT_KEYS <= set(report)
    assert (report["mode"], report["would_import"], report["imported"]) == ("dry-run", 3, 0)
    assert not list(tmp_path.glob("trove.db*"))


def test_dry_run_leaves_an_existing_target_byte_identical(tmp_path, capsys):
    src = make_source(tmp_path / "lcm.db")
    tgt = tmp_path / "trove.db"
    assert main("--source-db", str(src), "--target-db", str(tgt), "--apply", "--import-id", "one") == 0
    before = digest(tgt)
    files_before = sorted(p.name for p in tmp_path.iterdir())
    assert main("--source-db", str(src), "--target-db", str(tgt), "--import-id", "two", "--json") == 0
    capsys.readouterr()
    assert digest(tgt) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == files_before


def test_the_source_database_is_never_modified(tmp_path):
    src = make_source(tmp_path / "lcm.db")
    before = digest(src)
    assert main("--source-db", str(src), "--target-db", str(tmp_path / "trove.db"), "--apply") == 0
    assert digest(src) == before


def test_apply_backs_up_an_existing_target_with_the_online_backup_api(tmp_path):
    src = make_source(tmp_path / "lcm.db")
    tgt = tmp_path / "trove.db"
    run_import(ImportOptions(target_db=str(tgt), source_db=str(src), apply=True, import_id="a"), env={})
    report = run_import(ImportOptions(target_db=str(tgt), source_db=str(src), apply=True, import_id="b"), env={})
    backup = Path(report.backup_path)
    assert backup.name.startswith("trove.db.backup-")
    with sqlite3.connect(backup) as conn:
        assert conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 3


def test_default_import_id_follows_the_resolved_source_path(tmp_path):
    src = make_source(tmp_path / "lcm.db")
    a = run_import(ImportOptions(target_db=str(tmp_path / "t.db"), source_db=str(src)), env={})
    b = run_import(ImportOptions(target_db=str(tmp_path / "t.db"), source_db=str(tmp_path / "." / "lcm.db")), env={})
    assert a.import_id == b.import_id == target.default_import_id([src.resolve()])


def test_a_missing_source_fails_with_a_clear_message(tmp_path, capsys):
    assert main("--source-db", str(tmp_path / "absent.db"), "--target-db", str(tmp_path / "trove.db")) == 1
    assert "source database not found" in capsys.readouterr().err
    assert not (tmp_path / "trove.db").exists()


def test_a_non_sqlite_source_fails_with_a_clear_message(tmp_path, capsys):
    junk = tmp_path / "notes.db"
    junk.write_text("this is not a database\n" * 10)
    assert main("--source-db", str(junk), "--target-db", str(tmp_path / "trove.db"), "--apply") == 1
    assert "not a SQLite database" in capsys.readouterr().err
    assert not (tmp_path / "trove.db").exists()


def test_an_unknown_schema_fails_and_names_what_is_missing(tmp_path, capsys):
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    assert main("--source-db", str(other), "--target-db", str(tmp_path / "trove.db")) == 1
    err = capsys.readouterr().err
    assert "does not look like a lossless-claw database" in err and "conversations.session_id" in err


def test_a_source_locked_by_a_running_openclaw_fails_without_touching_the_target(tmp_path, capsys):
    src = make_source(tmp_path / "lcm.db")
    holder = sqlite3.connect(src, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("INSERT INTO messages VALUES (99, 1, 99, 'user', 'in flight', 0, '2026-03-02 09:00:00')")
    try:
        code = main("--source-db", str(src), "--target-db", str(tmp_path / "trove.db"), "--apply",
                    "--busy-timeout", "0.2")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert code == 1
    assert "locked by another process" in capsys.readouterr().err
    assert not (tmp_path / "trove.db").exists()


def test_contradictory_flags_are_refused(tmp_path, capsys):
    src = make_source(tmp_path / "lcm.db")
    j = tmp_path / "a.jsonl"
    j.write_text('{"role": "user", "content": "hi"}\n')
    # Flags that contradict each other are a usage error (exit 2), as the import guide's exit codes say;
    # exit 1 is kept for a run that could import nothing.
    assert main("--source-db", str(src), "--source-jsonl", str(j), "--target-db", str(tmp_path / "t.db")) == 2
    assert "exactly one kind of source" in capsys.readouterr().err
    assert main("--target-db", str(tmp_path / "t.db")) == 2
    assert main("--source-jsonl", str(j), "--target-db", str(tmp_path / "t.db"), "--include-summaries") == 2
    assert "--include-summaries needs --source-db" in capsys.readouterr().err
    assert main("--source-jsonl", str(j), "--target-db", str(tmp_path / "t.db"),
                "--session-identity", "session_key", "--apply") == 2
    assert main("--source-db", str(src), "--target-db", str(tmp_path / "t.db"), "--agent", "a:b", "--apply") == 2
    assert not (tmp_path / "t.db").exists()
    with pytest.raises(SystemExit):
        main("--source-db", str(src), "--target-db", str(tmp_path / "t.db"), "--state-dir-remap", "nonsense")


def test_every_row_invalid_exits_non_zero(tmp_path, capsys):
    j = tmp_path / "garbage.jsonl"
    j.write_text("{oops\n[]\n")
    assert main("--source-jsonl", str(j), "--target-db", str(tmp_path / "t.db"), "--apply") == 1
    captured = capsys.readouterr()
    assert "every source row was invalid" in captured.err and "invalid_rows" in captured.out
    assert not (tmp_path / "t.db").exists()


def test_a_failure_mid_apply_rolls_back_every_row(tmp_path, monkeypatch):
    src = make_source(tmp_path / "lcm.db", n=1200)
    tgt = tmp_path / "trove.db"
    run_import(ImportOptions(target_db=str(tgt), source_db=str(make_source(tmp_path / "small.db", n=2)),
                             apply=True), env={})
    calls = {"n": 0}
    original = target.Writer.append

    def failing_append(self, key, rows):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("disk went away")
        return original(self, key, rows)

    monkeypatch.setattr(target.Writer, "append", failing_append)
    with pytest.raises(RuntimeError, match="disk went away"):
        run_import(ImportOptions(target_db=str(tgt), source_db=str(src), apply=True), env={})
    with sqlite3.connect(tgt) as conn:
        assert conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 2
        assert conn.execute("SELECT COUNT(*) FROM imported_messages").fetchone()[0] == 2


def test_the_script_runs_from_a_checkout(tmp_path):
    src = make_source(tmp_path / "lcm.db")
    out = subprocess.run([sys.executable, str(SCRIPT), "--source-db", str(src), "--target-db",
                          str(tmp_path / "trove.db"), "--json", "--agent", "sammy"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["would_import"] == 3 and report["namespace"] == "openclaw-trove"
    assert not (tmp_path / "trove.db").exists()


def test_provenance_uses_agent_and_namespace(tmp_path):
    src = make_source(tmp_path / "lcm.db")
    run_import(ImportOptions(target_db=str(tmp_path / "trove.db"), source_db=str(src), agent="sammy", apply=True),
               env={})
    run_import(ImportOptions(target_db=str(tmp_path / "trove.db"), source_db=str(src), agent="sammy",
                             namespace="archive", import_id="other", apply=True, allow_duplicate_sources=True),
               env={})
    with sqlite3.connect(tmp_path / "trove.db") as conn:
        pairs = sorted(set(conn.execute("SELECT session_id, source FROM messages")))
    assert pairs == [("archive:agent:sammy:sess-1", "archive:agent:sammy:sess-1"),
                     ("openclaw-trove:agent:sammy:sess-1", "openclaw-trove:agent:sammy:sess-1")]


# -- the importer as a command ---------------------------------------------------------------

FIXTURES = ROOT.parent / "shared" / "fixtures"
needs_fixtures = pytest.mark.skipif(not (FIXTURES / "openclaw-jsonl").is_dir(), reason="shared fixtures missing")


def claw_copy(tmp_path: Path) -> Path:
    import shutil

    head = tmp_path / "head"
    shutil.copytree(FIXTURES / "lossless-claw" / "head", head, ignore=shutil.ignore_patterns("*.sql", "generator*"))
    return head


@needs_fixtures
def test_the_same_sessions_from_sqlite_and_jsonl_are_detected_and_not_duplicated(tmp_path, capsys):
    head = claw_copy(tmp_path)
    db = str(tmp_path / "trove.db")
    assert main("--source-db", str(head / "lcm.db"), "--target-db", db, "--apply", "--json") == 0
    capsys.readouterr()
    assert main("--source-jsonl-dir", str(FIXTURES / "openclaw-jsonl"), "--target-db", db, "--apply", "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["skipped_duplicate_sessions"] == 4 and report["imported"] == 0
    # what it read is still reported: every eligible row counts as already there
    assert (report["conversations"], report["scanned"], report["skipped_empty"]) == (4, 47, 3)
    assert (report["eligible"], report["skipped_existing"], report["would_import"]) == (44, 44, 0)
    assert any("--allow-duplicate-sources" in w and "already imported as 'openclaw-trove:" in w
               for w in report["warnings"])
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 44
    assert main("--source-jsonl-dir", str(FIXTURES / "openclaw-jsonl"), "--target-db", db, "--apply", "--json",
                "--allow-duplicate-sources") == 0
    assert json.loads(capsys.readouterr().out)["imported"] == 44  # the override imports the second copy


@needs_fixtures
def test_imported_sessions_keep_their_original_times_in_retention_and_status(tmp_path, capsys):
    from hermes_trove.config import load_config
    from hermes_trove.ops import hygiene
    from hermes_trove.runtime import build_runtime

    db = tmp_path / "trove.db"
    assert main("--source-jsonl-dir", str(FIXTURES / "openclaw-jsonl"), "--target-db", str(db), "--apply") == 0
    rt = build_runtime(load_config({}, hermes_home=str(tmp_path)))
    sessions = rt.store.sessions()
    first = min(s.created_at for s in sessions)
    last = max(s.updated_at for s in sessions)
    assert last - first < 86400 and first < 1780000000  # March 2026, the fixtures' own times
    for s in sessions:
        times = [r.created_at for r in rt.store.page(s.session_id, 0, 1000)]
        assert (s.created_at, s.updated_at) == (min(times), max(times))
    report = hygiene.retention_report(rt, now=last + 10 * 86400)
    ages = [row["age_days"] for row in report["largest_sessions"]]
    assert ages and all(9.9 <= a <= 10.1 for a in ages) and report["stale_30d"]["sessions"] == 0


def test_python_dash_m_import_and_a_copied_script_work_from_an_installed_layout(tmp_path):
    src = make_source(tmp_path / "lcm.db")
    site = tmp_path / "site"
    site.mkdir()
    (site / "hermes_trove").symlink_to(ROOT, target_is_directory=True)
    lone = tmp_path / "bin"
    lone.mkdir()
    (lone / "import_lossless_claw.py").write_bytes(SCRIPT.read_bytes())  # copied alone, no helper beside it
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site), "HOME": str(tmp_path)}
    for argv in (["-m", "hermes_trove", "import"], [str(lone / "import_lossless_claw.py")]):
        out = subprocess.run([sys.executable, *argv, "--source-db", str(src), "--target-db",
                              str(tmp_path / "trove.db"), "--json"], capture_output=True, text=True, timeout=120,
                             cwd=tmp_path, env=env)
        assert out.returncode == 0, (argv, out.stderr)
        assert json.loads(out.stdout)["would_import"] == 3
    assert not (tmp_path / "trove.db").exists()


def test_progress_shows_messages_per_second_on_a_terminal_only(tmp_path):
    import io

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert cli.wants_progress(False, False, Tty()) and not cli.wants_progress(True, False, Tty())
    assert not cli.wants_progress(False, False, io.StringIO()) and not cli.wants_progress(False, True, Tty())
    stream = Tty()
    bar = cli.Progress(stream, "apply")
    bar.drawn -= 1  # the next call redraws
    bar(1200)
    bar.done()
    text = stream.getvalue()
    assert "1200 messages" in text and "messages/s" in text and text.endswith("\n")


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
def test_a_target_that_is_a_databases_sqlite_sidecar_is_refused_untouched(tmp_path, capsys, suffix):
    # SQLite deletes or truncates the store's -wal/-shm/-journal at a checkpoint or close: an import
    # written there would vanish, so it is a usage error before anything is opened
    src = make_source(tmp_path / "lcm.db")
    store = tmp_path / "trove.db"
    sqlite3.connect(store).close()
    link = tmp_path / "via-link.db"
    link.symlink_to(f"{store}{suffix}")
    for target_db in (f"{store}{suffix}", str(link)):
        assert main("--source-db", str(src), "--target-db", target_db, "--apply") == 2
        assert f"file SQLite keeps beside the database {store}" in capsys.readouterr().err
    assert not Path(f"{store}{suffix}").exists()
