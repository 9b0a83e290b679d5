"""A lock wait that runs out on the server (lock_not_available) rolls back and keeps the connection;
any other operational error still closes it, to be reopened on next use."""
from __future__ import annotations

import pytest

from hermes_trove.backend import settled_heads
from hermes_trove.pgdb import PgDatabase


def backend_pid(db: PgDatabase) -> int:
    return int(db.connect().execute("SELECT pg_backend_pid()").fetchone()[0])


def test_a_busy_settle_rolls_back_and_keeps_the_connection(pg_database_url):
    db = PgDatabase(pg_database_url)
    conn = db.connect()
    pid = backend_pid(db)
    # deadlock_timeout read as 0 on this connection only (a temporary view stands in for pg_settings):
    # the pass waits SETTLE_WAIT_MS for the writer below, then answers busy
    conn.execute("CREATE TEMPORARY VIEW pg_settings AS SELECT 'deadlock_timeout'::text AS name, '0'::text AS setting")
    writer = db.open_connection()
    try:
        with writer.raw.transaction():
            writer.execute("INSERT INTO messages(session_id, role, content, created_at, ingested_at)"
                           " VALUES ('s1', 'user', 'a note still being written', 1.0, 1.0)")
            assert settled_heads(db, ("messages", "store_id")) is None  # busy
            assert db.connect() is conn and not conn.raw.closed and not conn.in_transaction
            assert backend_pid(db) == pid  # the same server session: no reconnect
    finally:
        writer.close()
    # the session kept its temporary view, and the next pass reads the heads through it
    assert settled_heads(db, ("messages", "store_id")) == (1,)
    assert db.connect() is conn and backend_pid(db) == pid


def test_any_other_operational_error_still_closes_the_connection(pg_database_url):
    import psycopg

    db = PgDatabase(pg_database_url)
    conn = db.connect()
    with pytest.raises(psycopg.OperationalError) as caught, db.transaction() as tx:
        tx.execute("SET LOCAL statement_timeout = '10ms'")
        tx.execute("SELECT pg_sleep(5)")
    assert caught.value.sqlstate == "57014"  # query_canceled, not a lock wait
    assert conn.raw.closed and db.connect() is not conn
    assert db.connect().execute("SELECT 1").fetchone()[0] == 1  # reopened on next use
