"""A search's ranks and rows are read in one snapshot on SQLite.

``ftsbound._first_passing`` reads the ranked ids in one statement and their rows in the next. A
payload clean-up that rewrites a row between the two, or a deletion, must not give a row with a
rank its text no longer has, nor drop a ranked row from the pool: the reads see one state of the file.
"""
from __future__ import annotations

import sqlite3
import threading

import pytest
from conftest import assistant, user

from hermes_trove import ftsbound
from hermes_trove.store import SessionKey


class Meanwhile:
    """The store's connection, running ``write`` on another thread (its own connection) just after the
    ranked read has been fetched, before the next statement."""

    def __init__(self, conn: sqlite3.Connection, write) -> None:
        self.conn, self.write, self.ranked, self.wrote = conn, write, False, False

    def execute(self, sql: str, args=()):
        if self.ranked and not self.wrote:
            self.wrote = True
            worker = threading.Thread(target=self.write)
            worker.start()
            worker.join(timeout=30)
            assert not worker.is_alive()
        self.ranked = self.ranked or "bm25(" in sql
        return self.conn.execute(sql, args)

    def __getattr__(self, name: str):
        return getattr(self.conn, name)


@pytest.mark.parametrize("limit", [3, 8, -1])
def test_rows_rewritten_or_deleted_between_the_ranked_read_and_the_look_up_come_as_they_were(runtime, limit):
    """SQLite's only (a server ranks and reads its rows in one statement)."""
    ids = runtime.store.append(SessionKey("s1"), [(user if i % 2 else assistant)(
        f"harbour {'harbour ' * (i % 4)}note {i}") for i in range(12)])
    conn = runtime.db.read()
    fts_where, fts_args, filters = ["messages_fts MATCH ?"], ['"harbour"'], " WHERE m.role <> ?"
    before = [tuple(r) for r in ftsbound._best(conn, fts_where, fts_args, filters, ["tool"], -1, limit)]
    assert before and len(before) == (12 if limit < 0 else limit)
    best, second = int(before[0][0]), int(before[1][0])

    def write() -> None:  # another thread: its own connection, as the background payload pass runs
        old = runtime.store.get(best)
        assert old is not None and runtime.store.replace_contents([(best, str(old.content), "[payload moved]")]) == 1
        with runtime.db.transaction() as other:
            other.execute("DELETE FROM messages WHERE store_id = ?", (second,))

    watched = Meanwhile(conn, write)
    got = [tuple(r) for r in ftsbound._best(watched, fts_where, fts_args, filters, ["tool"], -1, limit)]
    assert watched.wrote
    assert got == before  # the state the ranks were read in: the old text, the deleted row still there
    assert not conn.in_transaction  # the read transaction is over
    after = [tuple(r) for r in ftsbound._best(conn, fts_where, fts_args, filters, ["tool"], -1, limit)]
    assert second not in [r[0] for r in after] and best not in [r[0] for r in after]  # the new state, read whole
    assert len(ids) == 12


def test_inside_a_callers_transaction_the_reads_join_it_and_leave_it_open(runtime):
    runtime.store.append(SessionKey("s1"), [user(f"harbour note {i}") for i in range(5)])
    with runtime.db.transaction() as conn:
        conn.execute("DELETE FROM messages WHERE store_id = (SELECT MAX(store_id) FROM messages)")
        rows = ftsbound._best(conn, ["messages_fts MATCH ?"], ['"harbour"'], "", [], -1, 10)
        assert conn.in_transaction and len(rows) == 4  # its own uncommitted delete is seen, nothing ended
    assert runtime.store.count() == 4
