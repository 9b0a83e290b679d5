"""A new target is built in a private staging file and moved into place only when complete."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from test_import_cli import make_source

from hermes_trove.db import Database
from hermes_trove.importer import ImportFailure, ImportOptions, run, run_import


def apply(source: Path, target: Path, **kw):
    return run_import(ImportOptions(target_db=str(target), source_db=str(source), apply=True, **kw), env={})


def leftovers(target: Path) -> list[Path]:
    return list(target.parent.glob(f".{target.name}.*"))


@pytest.mark.parametrize("reader_process", [True, False])
def test_a_new_target_appears_complete_in_wal_mode_with_no_staging_files_left(tmp_path, reader_process):
    target = tmp_path / "home" / "trove.db"
    report = apply(make_source(tmp_path / "lcm.db", n=40), target, reader_process=reader_process)
    assert report.imported == 40 and report.backup_path is None
    assert leftovers(target) == []
    conn = sqlite3.connect(target)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 40
    assert conn.execute("SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH 'number'").fetchone()[0] == 40
    conn.close()
    runtime_db = Database(target)
    assert runtime_db.connect().execute("SELECT COUNT(*) FROM imported_messages").fetchone()[0] == 40
    runtime_db.close()


def test_an_existing_target_is_backed_up_and_written_in_place(tmp_path):
    target = tmp_path / "trove.db"
    Database(target).connect()
    Database(target).close()
    inode = target.stat().st_ino
    report = apply(make_source(tmp_path / "lcm.db"), target)
    assert report.imported == 3 and report.backup_path and Path(report.backup_path).exists()
    assert target.stat().st_ino == inode and leftovers(target) == []


def test_a_target_that_appears_during_the_import_is_never_replaced(tmp_path, monkeypatch):
    target = tmp_path / "trove.db"
    original = run._apply

    def meanwhile(*args, **kw):
        original(*args, **kw)
        target.write_bytes(b"somebody else's database")

    monkeypatch.setattr(run, "_apply", meanwhile)
    with pytest.raises(ImportFailure, match="appeared while the import ran"):
        apply(make_source(tmp_path / "lcm.db"), target)
    assert target.read_bytes() == b"somebody else's database"
    assert leftovers(target) == []


def test_a_failed_import_into_a_new_target_leaves_nothing_behind(tmp_path, monkeypatch):
    target = tmp_path / "trove.db"

    def broken(*args, **kw):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(run.Writer, "append", broken)
    with pytest.raises(RuntimeError, match="disk on fire"):
        apply(make_source(tmp_path / "lcm.db"), target)
    assert not target.exists() and leftovers(target) == []


def test_the_background_sync_runs_while_the_file_grows_and_stops_cleanly(tmp_path, monkeypatch):
    import os
    import threading
    import time

    from hermes_trove.importer.target import BackgroundSync

    synced: list[int] = []
    real = getattr(os, "fdatasync", os.fsync)
    monkeypatch.setattr(os, "fdatasync", lambda fd: (synced.append(fd), real(fd)), raising=False)
    path = tmp_path / "staged"
    path.write_bytes(b"x")
    sync = BackgroundSync(path, interval_s=0.01)
    with path.open("ab") as fh:
        for _ in range(20):
            fh.write(b"y" * 4096)
            fh.flush()
            time.sleep(0.005)
    sync.stop()
    assert synced
    assert not [t for t in threading.enumerate() if t.name == "trove-import-sync"]


def test_a_target_that_cannot_be_created_fails_with_a_clear_message(tmp_path):
    (tmp_path / "not-a-dir").write_text("a file where the target's directory should be")
    target = tmp_path / "not-a-dir" / "trove.db"
    with pytest.raises(ImportFailure, match="cannot create the target database"):
        apply(make_source(tmp_path / "lcm.db"), target)
