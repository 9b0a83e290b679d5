"""An apply converts a SQLite source in a forked reader process: same rows, clean failures."""
from __future__ import annotations

import multiprocessing
import os
import sqlite3
from pathlib import Path

import pytest
from test_import_cli import make_source

from hermes_trove.db import Database
from hermes_trove.importer import ImportFailure, ImportOptions, pipe, run_import
from hermes_trove.importer.claw_db import ClawSource
from hermes_trove.store import MessageStore

pytestmark = pytest.mark.skipif(not pipe.available(), reason="no fork start method on this platform")


def two_conversations(path: Path, n: int = 700) -> Path:
    """``make_source`` plus a second conversation, so batches and conversation order both matter."""
    make_source(path, n=n)
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO conversations(conversation_id, session_id) VALUES (2, 'sess-2')")
    for i in range(n + 1, n + 40):
        conn.execute("INSERT INTO messages VALUES (?, 2, ?, 'user', ?, 0, '2026-03-03 10:00:00')",
                     (i, i, f"second {i}"))
        conn.execute("INSERT INTO message_parts VALUES (?, ?, 'sess-2', 'text', 0, ?, NULL)",
                     (f"p{i}", i, f"second {i}"))
    conn.commit()
    conn.close()
    return path


def written(db: Path) -> tuple[list[tuple], list[tuple]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT store_id, session_id, role, content, tool_calls, tool_call_id, extra, token_count,"
                            " identity, created_at FROM messages ORDER BY store_id").fetchall()
        ledger = conn.execute("SELECT source_key, store_id, meta FROM imported_messages ORDER BY source_key").fetchall()
    return rows, ledger


def nothing_written(target: Path, existed: bool) -> bool:
    """An existing target holds no imported rows; a new one was never created, nor left staged."""
    if existed:
        return written(target) == ([], [])
    return not target.exists() and not list(target.parent.glob(f".{target.name}.*"))


@pytest.fixture(params=["new target", "existing target"])
def target(request, tmp_path) -> tuple[Path, bool]:
    path = tmp_path / "t.db"
    existed = request.param == "existing target"
    if existed:
        Database(path).connect()
        Database(path).close()
    return path, existed


def apply(source: Path, target: Path, **kw):
    return run_import(ImportOptions(target_db=str(target), source_db=str(source), apply=True, batch_size=250, **kw),
                      env={})


def test_the_reader_process_writes_exactly_what_the_in_process_reader_writes(tmp_path):
    src = two_conversations(tmp_path / "lcm.db")
    forked = apply(src, tmp_path / "a.db")
    inline = apply(src, tmp_path / "b.db", reader_process=False)
    assert forked.imported == inline.imported == 739
    assert written(tmp_path / "a.db") == written(tmp_path / "b.db")
    assert (forked.sessions, forked.warnings) == (inline.sessions, inline.warnings)


def test_no_reader_process_outlives_the_import(tmp_path):
    apply(two_conversations(tmp_path / "lcm.db"), tmp_path / "t.db")
    assert multiprocessing.active_children() == []


def test_an_error_in_the_reader_is_raised_here_and_nothing_is_written(tmp_path, monkeypatch, target):
    src = two_conversations(tmp_path / "lcm.db")
    original = ClawSource._convert

    def failing(self, r, parts, conv):
        if r[0] == 600:  # in the child, after earlier batches were already written
            raise RuntimeError("bad row in the source")
        return original(self, r, parts, conv)

    monkeypatch.setattr(ClawSource, "_convert", failing)
    with pytest.raises(RuntimeError, match="bad row in the source"):
        apply(src, target[0])
    assert nothing_written(*target)
    assert multiprocessing.active_children() == []


def test_a_reader_that_dies_fails_the_import_cleanly(tmp_path, monkeypatch, target):
    src = two_conversations(tmp_path / "lcm.db")
    original = ClawSource._convert

    def dying(self, r, parts, conv):
        if r[0] == 600:
            os._exit(3)
        return original(self, r, parts, conv)

    monkeypatch.setattr(ClawSource, "_convert", dying)
    with pytest.raises(ImportFailure, match="reader process stopped"):
        apply(src, target[0])
    assert nothing_written(*target)


def test_a_conversation_gone_before_the_reader_reached_it_fails_the_import(tmp_path, monkeypatch, target):
    src = two_conversations(tmp_path / "lcm.db")
    original = ClawSource.conversations

    def fewer(self):
        convs = original(self)
        return convs[:1] if os.getpid() != parent else convs

    parent = os.getpid()
    monkeypatch.setattr(ClawSource, "conversations", fewer)
    with pytest.raises(ImportFailure, match="conversation 2 disappeared"):
        apply(src, target[0])
    assert nothing_written(*target)


def test_the_pipe_from_the_reader_holds_several_batches(tmp_path):
    fcntl = pytest.importorskip("fcntl")
    if not hasattr(fcntl, "F_GETPIPE_SZ"):
        pytest.skip("pipe buffers cannot be sized on this platform")
    store = MessageStore(Database(tmp_path / "never-opened.db"))
    reader = pipe.ForkedReader(str(two_conversations(tmp_path / "lcm.db")), [(1, "s1"), (2, "s2")], store)
    try:
        assert fcntl.fcntl(reader._recv.fileno(), fcntl.F_GETPIPE_SZ) >= pipe.PIPE_BYTES
        first = list(reader.messages(1))
        assert first and all(m.row is not None and m.message is None for m in first if not m.skip)
    finally:
        reader.close()
    assert not (tmp_path / "never-opened.db").exists()
