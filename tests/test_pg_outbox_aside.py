"""A PostgreSQL store's outbox row the server refuses for its own values is set aside (kept whole in the
file) and the rows after it ship in order, exactly once; an outage sets nothing aside; status and doctor
say so; ``doctor outbox retry`` ships it after the repair. On a real server."""
from __future__ import annotations

import dataclasses
import json
import sqlite3

import psycopg
import pytest
from conftest import assistant, make_engine, user
from pg_proxy import PgProxy
from test_command import shippers_finish  # noqa: F401  (autouse: background shipping ends with the test)

from hermes_trove import command
from hermes_trove.ops import doctor, status
from hermes_trove.outbox import ServerUnreachableError
from hermes_trove.outboxaside import row_fault
from hermes_trove.runtime import build_runtime
from hermes_trove.store import SessionKey


@pytest.fixture
def pg_config(config, pg_database_url):
    return dataclasses.replace(config, database_url=pg_database_url)


def chat(tag: str, n: int) -> list[dict]:
    return [m for i in range(n) for m in (user(f"{tag} question {i}"), assistant(f"{tag} answer {i}"))]


def write(rt, sid: str, messages: list[dict]) -> list[int]:
    """What a turn writes, straight to the outbox (no background pass: the test ships)."""
    return list(rt.store.outbox.store.ingest(SessionKey(sid, "", "cli"), messages).store_ids)


def damage(rt, sql: str, *args) -> None:
    with rt.store.outbox.db.transaction() as c:
        c.execute(sql, args)


def on_server(url: str) -> list[tuple[str, int, str]]:
    """(session, local id, content) of every shipped message, in the server's id order."""
    with psycopg.connect(url, autocommit=True) as conn:
        return [tuple(r) for r in conn.execute(
            "SELECT m.session_id, o.origin_id, m.content FROM messages m JOIN message_origins o USING (store_id)"
            " ORDER BY m.store_id").fetchall()]


def server_sessions(url: str) -> set[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        return {r[0] for r in conn.execute("SELECT session_id FROM sessions").fetchall()}


def marks(rt) -> list[tuple[str, str, str]]:
    return [(m.kind, m.key, m.reason) for m in rt.store.outbox.set_aside()]


def test_a_damaged_message_is_set_aside_and_the_rows_before_and_after_it_ship_in_order_once(pg_config,
                                                                                          pg_database_url):
    rt = build_runtime(pg_config)
    ids = write(rt, "s1", chat("one", 3)) + write(rt, "s2", chat("two", 2)) + write(rt, "s1", chat("three", 2))
    bad = ids[3]
    damage(rt, "UPDATE messages SET token_count = 'many' WHERE store_id = ?", bad)
    rt.store.shipper.drain()
    shipped = on_server(pg_database_url)
    assert [r[1] for r in shipped] == [i for i in ids if i != bad]  # in order, each once, all but the bad one
    assert [(k, key) for k, key, _ in marks(rt)] == [("message", str(bad))]
    assert marks(rt)[0][2].startswith("InvalidTextRepresentation: invalid input syntax") and "\n" not in marks(rt)[0][2]
    with sqlite3.connect(rt.store.outbox.path) as conn:  # kept whole in the file
        assert conn.execute("SELECT token_count FROM messages WHERE store_id = ?", (bad,)).fetchone() == ("many",)
    later = write(rt, "s2", chat("four", 1))
    rt.store.shipper.drain()
    assert [r[1] for r in on_server(pg_database_url)] == [i for i in ids if i != bad] + later
    assert rt.store.outbox.pending() == 0 and len(marks(rt)) == 1


@pytest.mark.parametrize("column", ["created_at", "updated_at"])
def test_a_damaged_session_row_sets_aside_its_messages_now_and_later_while_other_sessions_ship(
        pg_config, pg_database_url, column):
    rt = build_runtime(pg_config)
    first = write(rt, "s1", chat("one", 2))
    other = write(rt, "s2", chat("two", 2))
    damage(rt, f"UPDATE sessions SET {column} = 'garbage' WHERE session_id = 's1'")
    rt.store.shipper.drain()
    assert [r[1] for r in on_server(pg_database_url)] == other and server_sessions(pg_database_url) == {"s2"}
    got = marks(rt)
    assert got[0][:2] == ("session", "s1") and "garbage" in got[0][2]
    assert [(k, key, r) for k, key, r in got[1:]] == [("message", str(i), "its session s1 is set aside")
                                                     for i in first]
    more = write(rt, "s1", chat("three", 1))  # a later turn of that session: held back too
    other += write(rt, "s2", chat("four", 1))
    rt.store.shipper.drain()
    assert [r[1] for r in on_server(pg_database_url)] == other
    assert [key for k, key, _ in marks(rt) if k == "message"] == [str(i) for i in first + more]
    assert rt.store.outbox.pending() == 0


def test_an_outage_sets_nothing_aside_even_with_a_damaged_row_waiting(config, pg_database_url):
    proxy = PgProxy(pg_database_url).start()
    try:
        rt = build_runtime(dataclasses.replace(config, database_url=proxy.url))
        ids = write(rt, "s1", chat("one", 3))
        damage(rt, "UPDATE messages SET token_count = 'many' WHERE store_id = ?", ids[1])
        proxy.down()
        for _ in range(2):
            with pytest.raises(ServerUnreachableError):
                rt.store.shipper.ship_once()
        assert marks(rt) == [] and rt.store.outbox.pending() == len(ids)
        assert rt.store.shipper.status()["set_aside"] == {"rows": 0}
        proxy.up()
        rt.store.shipper.drain()
        assert [r[1] for r in on_server(pg_database_url)] == [i for i in ids if i != ids[1]]
        assert [key for _, key, _ in marks(rt)] == [str(ids[1])]
    finally:
        proxy.down()


def test_a_server_that_refuses_every_row_is_an_outage_not_a_fault_of_each_row(pg_config, pg_database_url):
    """A constraint every row breaks (as a newer schema's column or check would be) sets nothing aside: the
    rows wait, in order, and ship once the server takes them again; a lone damaged row waits for a row that
    goes through beside it."""
    rt = build_runtime(pg_config)
    assert rt.store.shipper.probe() == ""  # the server's tables made
    with psycopg.connect(pg_database_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE messages ADD CONSTRAINT newer_schema CHECK (false) NOT VALID")
    ids = write(rt, "s1", chat("one", 2)) + write(rt, "s2", chat("two", 1))
    try:
        for _ in range(2):
            with pytest.raises(ServerUnreachableError, match="refused every message"):
                rt.store.shipper.ship_once()
        assert marks(rt) == [] and rt.store.outbox.pending() == len(ids)
    finally:
        with psycopg.connect(pg_database_url, autocommit=True) as conn:
            conn.execute("ALTER TABLE messages DROP CONSTRAINT IF EXISTS newer_schema")
    rt.store.shipper.drain()
    assert [r[1] for r in on_server(pg_database_url)] == ids and marks(rt) == []
    lone = write(rt, "s3", [user("three question")])
    damage(rt, "UPDATE messages SET token_count = 'many' WHERE store_id = ?", lone[0])
    with pytest.raises(ServerUnreachableError):
        rt.store.shipper.drain()
    assert marks(rt) == [] and rt.store.outbox.pending() == 1
    rt.store.shipper.state.last_error = ""  # the next turn ships beside it
    later = write(rt, "s3", chat("four", 1))
    rt.store.shipper.drain()
    assert [key for _, key, _ in marks(rt)] == [str(lone[0])]
    assert [r[1] for r in on_server(pg_database_url)] == [*ids, *later]


def test_only_a_rows_own_values_count_as_its_fault():
    assert row_fault(psycopg.errors.InvalidTextRepresentation("bad")) and row_fault(psycopg.DataError("mixed"))
    assert row_fault(psycopg.errors.NotNullViolation("null")) and row_fault(ValueError("not a number"))
    assert row_fault(psycopg.errors.ProgramLimitExceeded("string is too long for tsvector"))
    for away in (psycopg.OperationalError("connection refused"), psycopg.errors.InsufficientPrivilege("denied"),
                 psycopg.errors.UndefinedColumn("newer schema"), psycopg.InterfaceError("closed"),
                 psycopg.errors.QueryCanceled("statement timeout"), psycopg.errors.AdminShutdown("restart"),
                 psycopg.errors.ReadOnlySqlTransaction("a standby"), psycopg.errors.DiskFull("full"),
                 psycopg.errors.SerializationFailure("retry"), psycopg.errors.LockNotAvailable("locked"),
                 sqlite3.OperationalError("database is locked"), OSError("disk"), ConnectionError("down")):
        assert not row_fault(away), away


def test_status_and_doctor_show_set_aside_rows_with_the_fix_and_export_them_whole(pg_config, pg_database_url):
    rt = build_runtime(pg_config)
    ids = write(rt, "s1", chat("one", 2))
    damage(rt, "UPDATE messages SET token_count = 'many' WHERE store_id = ?", ids[2])
    rt.store.shipper.drain()
    aside = status.build_status(rt)["runtime"]["outbox"]["set_aside"]
    assert aside["rows"] == 1 and aside["sessions"] == ["s1"] and aside["oldest_at"] > 0
    assert "set aside" in aside["warning"] and "doctor outbox retry" in aside["fix"]
    report = doctor.run_doctor(rt)
    check = next(c for c in report["checks"] if c["check"] == "outbox")
    assert check["status"] == "warn" and "1 outbox row(s)" in check["detail"] and "s1" in check["detail"]
    assert any("doctor outbox retry" in g for g in report["guidance"]) and report["overall"] != "unhealthy"
    name, listed = command.run(rt, ["doctor", "outbox"])
    assert name == "doctor outbox" and command.exit_code(listed) == 0 and listed["set_aside"] == 1
    row = json.loads(json.dumps(listed["rows"]))[0]  # --json prints it: every column, the text readable
    assert row["key"] == str(ids[2]) and row["row"]["token_count"] == "many"
    assert row["row"]["content"] == "one question 1"


def test_retry_after_the_repair_ships_what_was_set_aside_and_keeps_what_still_cannot(pg_config, pg_database_url):
    rt = build_runtime(pg_config)
    ids = write(rt, "s1", chat("one", 2)) + write(rt, "s2", chat("two", 1))
    damage(rt, "UPDATE messages SET token_count = 'many' WHERE store_id = ?", ids[1])
    damage(rt, "UPDATE sessions SET created_at = 'garbage' WHERE session_id = 's2'")
    rt.store.shipper.drain()
    assert len(marks(rt)) == 4  # one message, s2 and its two messages
    _, still = command.run(rt, ["doctor", "outbox", "retry"])  # nothing repaired yet
    assert still["status"] == "error" and still["still_aside"] == 4 and command.exit_code(still) == 1
    damage(rt, "UPDATE messages SET token_count = 3 WHERE store_id = ?", ids[1])
    _, part = command.run(rt, ["doctor", "outbox", "retry"])
    assert part["added"] == 1 and part["still_aside"] == 3 and command.exit_code(part) == 1
    damage(rt, "UPDATE sessions SET created_at = 1.0 WHERE session_id = 's2'")
    _, done = command.run(rt, ["doctor", "outbox", "retry"])
    assert done == {"status": "ok", "retried": 3, "added": 2, "still_aside": 0} and command.exit_code(done) == 0
    shipped = [r[1] for r in on_server(pg_database_url)]
    assert sorted(shipped) == ids and len(set(shipped)) == len(shipped)  # each exactly once
    assert [i for i in shipped if i in ids[4:]] == ids[4:]  # a session's retried rows keep their order
    assert marks(rt) == [] and server_sessions(pg_database_url) == {"s1", "s2"}
    later = write(rt, "s2", chat("three", 1))  # the session ships again like any other
    rt.store.shipper.drain()
    assert [r[1] for r in on_server(pg_database_url)][-2:] == later
    _, again = command.run(rt, ["doctor", "outbox", "retry"])
    assert again == {"status": "ok", "retried": 0, "added": 0, "still_aside": 0}


def test_retry_while_the_server_is_away_is_refused_and_sets_nothing_new_aside(config, pg_database_url):
    proxy = PgProxy(pg_database_url).start()
    try:
        rt = build_runtime(dataclasses.replace(config, database_url=proxy.url))
        ids = write(rt, "s1", chat("one", 2))
        damage(rt, "UPDATE messages SET token_count = 'many' WHERE store_id = ?", ids[0])
        rt.store.shipper.drain()
        damage(rt, "UPDATE messages SET token_count = 1 WHERE store_id = ?", ids[0])
        proxy.down()
        _, answer = command.run(rt, ["doctor", "outbox", "retry"])
        assert answer["status"] == "refused" and command.exit_code(answer) == 1
        assert [key for _, key, _ in marks(rt)] == [str(ids[0])]  # still set aside, its old reason kept
        assert "invalid input syntax" in marks(rt)[0][2]
    finally:
        proxy.down()


def test_doctor_outbox_on_a_sqlite_store_says_there_is_none(config):
    rt = build_runtime(config)
    _, listed = command.run(rt, ["doctor", "outbox"])
    _, retried = command.run(rt, ["doctor", "outbox", "retry"])
    assert listed["set_aside"] == 0 and command.exit_code(listed) == 0
    assert retried["status"] == "refused" and command.exit_code(retried) == 1


def long_turns(n: int, tag: str) -> list[dict]:
    return [m for i in range(n) for m in (user(f"{tag} question {i} " + "word " * 150),
                                          assistant(f"{tag} answer {i} " + "text " * 150))]


@pytest.mark.parametrize("damaged", ["session", "message"])
def test_a_session_with_rows_set_aside_is_compacted_by_the_host_compressor_not_dropped(pg_config, damaged):
    """The server lacks that session's set-aside rows: a trove compaction reading it would drop them from
    the prompt unsummarised; the call goes to the built-in compressor (as during an outage) until they ship."""
    rt = build_runtime(pg_config)
    write(rt, "s0", chat("another", 1))  # a sound session beside it: a refusal of s1 alone is its own
    eng = make_engine(rt, lambda *a, **k: "a summary of the early turns", context_length=8000)
    history = long_turns(3, "early")
    ids = list(rt.store.outbox.store.ingest(eng.state.key, history).store_ids)
    damage(rt, *(("UPDATE sessions SET created_at = 'garbage' WHERE session_id = 's1'",) if damaged == "session"
                 else ("UPDATE messages SET token_count = 'many' WHERE store_id = ?", ids[1])))
    history += long_turns(6, "late")
    eng.ingest(history)
    eng.compress(history, current_tokens=7900, force=True)
    assert eng.state.last_status == "delegated" and "set aside" in eng.state.last_reason
    assert rt.health.usable  # one session's rows, not the store: other sessions compact as usual
    damage(rt, *(("UPDATE sessions SET created_at = 1.0 WHERE session_id = 's1'",) if damaged == "session"
                 else ("UPDATE messages SET token_count = 3 WHERE store_id = ?", ids[1])))
    assert command.run(rt, ["doctor", "outbox", "retry"])[1]["status"] == "ok"
    eng.compress(history, current_tokens=7900, force=True)
    assert eng.state.last_status != "delegated"


def test_a_retry_of_more_rows_than_a_batch_ships_each_once_in_order_beside_one_still_damaged(pg_config,
                                                                                            pg_database_url):
    rt = build_runtime(pg_config)
    sound = write(rt, "s0", chat("another", 1))  # a session the server takes: s1's refusal is its own
    ids = write(rt, "s1", chat("one", 650))  # 1,300 messages: three shipping batches
    damage(rt, "UPDATE sessions SET created_at = 'garbage' WHERE session_id = 's1'")
    rt.store.shipper.drain()
    assert len(marks(rt)) == 1 + len(ids) and [r[1] for r in on_server(pg_database_url)] == sound
    damage(rt, "UPDATE sessions SET created_at = 1.0 WHERE session_id = 's1'")
    damage(rt, "UPDATE messages SET token_count = 'many' WHERE store_id = ?", ids[700])  # still refused
    _, done = command.run(rt, ["doctor", "outbox", "retry"])
    assert (done["added"], done["still_aside"]) == (len(ids) - 1, 1)
    assert [r[1] for r in on_server(pg_database_url)] == sound + [i for i in ids if i != ids[700]]
    assert [key for _, key, _ in marks(rt)] == [str(ids[700])]


def test_a_compaction_handed_over_for_rows_set_aside_logs_one_warning_and_no_traceback(pg_config, caplog):
    """Rows set aside are an expected state until they ship: each compaction of that session says so in one
    line, not as a failure of trove's with a traceback."""
    rt = build_runtime(pg_config)
    eng = make_engine(rt, lambda *a, **k: "a summary of the early turns", context_length=8000)
    history = long_turns(3, "early")
    ids = list(rt.store.outbox.store.ingest(eng.state.key, history).store_ids)
    damage(rt, "UPDATE messages SET token_count = 'many' WHERE store_id = ?", ids[1])
    history += long_turns(6, "late")
    eng.ingest(history)
    with caplog.at_level("INFO", logger="hermes_trove"):
        eng.compress(history, current_tokens=7900, force=True)
    assert eng.state.last_status == "delegated"
    assert eng.state.last_reason.startswith("1 row(s) of session s1 are set aside")
    assert not [r.getMessage() for r in caplog.records if r.exc_info], "a traceback for rows set aside"
    assert [r for r in caplog.records if r.levelname == "WARNING" and "set aside" in r.getMessage()]
