"""A damaged outbox row under the real host: a PostgreSQL home whose ``trove-outbox.db`` holds a row the
server refuses (an earlier session's message with a count that is text) still ships the turns after it;
``hermes trove status`` and ``doctor`` warn about the row set aside, ``doctor outbox --json`` exports it,
and ``doctor outbox retry`` ships it after the repair."""
from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

import psycopg
import pytest

from .harness import status_json

TURN = "a turn after the damaged row: the token is 5813"


def server(url: str, sql: str, *args: Any) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, args).fetchall()


@pytest.fixture(scope="module")
def damaged(make_home, pg_url) -> dict[str, Any]:
    from conftest import drop_schema, with_search_path
    from psycopg import sql

    from hermes_trove.outbox import Outbox
    from hermes_trove.store import SessionKey

    schema = f"t_aside_{int(time.time())}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    url = with_search_path(pg_url, schema, "public")
    home = make_home(TROVE_DATABASE_URL=url)
    box = Outbox(home.home / "trove-outbox.db")  # what an earlier process left: one row no server takes
    ids = box.store.ingest(SessionKey("earlier", "", "cli"), [{"role": "user", "content": "refused row"},
                                                              {"role": "assistant", "content": "fine row"}]).store_ids
    with box.db.transaction() as c:
        c.execute("UPDATE messages SET token_count = 'many' WHERE store_id = ?", (ids[0],))
    box.db.close()
    chat = home.hermes("chat", "-Q", "-q", TURN)
    status = home.hermes("trove", "status", "--json")  # ships what waits first
    yield {"home": home, "url": url, "chat": chat, "status": status, "bad": ids[0],
           "outbox": home.home / "trove-outbox.db"}
    drop_schema(pg_url, schema)


def test_the_turns_after_the_damaged_row_reach_the_server(damaged):
    assert damaged["chat"].returncode == 0, damaged["chat"].stderr[-3000:]
    contents = [r[0] for r in server(damaged["url"], "SELECT content FROM messages ORDER BY store_id")]
    assert "fine row" in contents and TURN in contents and "refused row" not in contents
    assert contents.count(TURN) == 1


def test_status_and_doctor_warn_with_the_fix_and_the_retry_ships_it_after_the_repair(damaged):
    home = damaged["home"]
    assert damaged["status"].returncode == 0, damaged["status"].stdout[-2000:] + damaged["status"].stderr[-2000:]
    aside = status_json(damaged["status"])["runtime"]["outbox"]["set_aside"]
    assert aside["rows"] == 1 and aside["sessions"] == ["earlier"] and "doctor outbox retry" in aside["fix"]
    doctor = home.hermes("trove", "doctor")
    assert doctor.returncode == 0, doctor.stdout[-2000:]  # a warning: exit 0, as the operator guide says
    assert "[WARN] outbox: 1 outbox row(s)" in doctor.stdout and "doctor outbox retry" in doctor.stdout
    listed = home.hermes("trove", "doctor", "outbox", "--json")
    assert listed.returncode == 0
    rows = json.loads(listed.stdout)["rows"]
    assert [(r["key"], r["row"]["content"]) for r in rows] == [(str(damaged["bad"]), "refused row")]
    failed = home.hermes("trove", "doctor", "outbox", "retry")
    assert failed.returncode == 1  # not repaired yet: still set aside
    with sqlite3.connect(damaged["outbox"]) as conn:
        conn.execute("UPDATE messages SET token_count = 2 WHERE store_id = ?", (damaged["bad"],))
    conn.close()
    done = home.hermes("trove", "doctor", "outbox", "retry")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    got = server(damaged["url"], "SELECT COUNT(*) FROM messages WHERE content = 'refused row'")
    assert got == [(1,)]
    assert home.hermes("trove", "doctor").stdout.count("set aside") == 0
