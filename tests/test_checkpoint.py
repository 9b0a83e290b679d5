"""WAL checkpoints leave the committing turn: a passive one runs on a background thread."""
from __future__ import annotations

import sqlite3

from hermes_trove import db as dbmod
from hermes_trove.db import Database


def _write(db: Database, rows: int) -> None:
    with db.transaction() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS t (v TEXT)")
        conn.executemany("INSERT INTO t(v) VALUES (?)", [("x" * 200,)] * rows)


def test_connections_raise_the_autocheckpoint_to_the_safety_net(tmp_path):
    conn = Database(tmp_path / "t.db").connect()
    assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == dbmod.SAFETY_NET_PAGES


def test_small_wal_starts_no_checkpoint(tmp_path):
    db = Database(tmp_path / "t.db")
    _write(db, 10)
    assert db.path not in dbmod._CHECKPOINTS.threads


def test_grown_wal_is_checkpointed_in_the_background(tmp_path, monkeypatch):
    monkeypatch.setattr(dbmod, "CHECKPOINT_WAL_BYTES", 1)
    db = Database(tmp_path / "t.db")
    _write(db, 500)
    thread = dbmod._CHECKPOINTS.threads[db.path]
    thread.join()
    busy, frames, done = sqlite3.connect(db.path).execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    assert busy == 0 and frames == done  # the background pass left nothing behind
    assert db.read().execute("SELECT COUNT(*) FROM t").fetchone()[0] == 500


def test_checkpoint_never_waits_for_an_open_reader(tmp_path):
    db = Database(tmp_path / "t.db")
    _write(db, 500)
    reader = sqlite3.connect(db.path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM t").fetchone()  # pins a snapshot
    _write(db, 500)
    db.checkpoint()  # passive: returns at once with what it could copy
    reader.execute("COMMIT")
    reader.close()
