"""PostgreSQL mode end to end on a real server: selection, the outbox, shipping exactly once,
an outage mid-run, and the engine compacting against the server."""
from __future__ import annotations

import copy
import dataclasses
import json
import sys
import threading
import time

import psycopg
import pytest
from conftest import assistant, make_engine, tool_call, tool_result, user
from pg_proxy import PgProxy
from psycopg.conninfo import make_conninfo

from hermes_trove.hooks import make_hooks
from hermes_trove.ops.maintenance import drop_unstored_row
from hermes_trove.outbox import _SHIPPERS, Outbox, ServerUnreachableError, ship_batch
from hermes_trove.pgdb import PgDatabase, StoreSelectionError, check_url, translate
from hermes_trove.runtime import build_runtime
from hermes_trove.store import SessionKey


@pytest.fixture
def pg_config(config, pg_database_url):
    return dataclasses.replace(config, database_url=pg_database_url)


def server_rows(url: str, sql: str, *args):
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, args).fetchall()


def turns(n: int, tag: str = "t"):
    out = []
    for i in range(n):
        out += [user(f"{tag} question {i} about kiln{i}"),
                assistant(f"{tag} answer {i}", [tool_call(f"c{tag}{i}", "terminal")]),
                tool_result(f"c{tag}{i}", f"{tag} output {i} " + "x" * 50), assistant(f"{tag} done {i}")]
    return out


# -- selection -------------------------------------------------------------------------------

@pytest.mark.parametrize("url, words", [
    ("mysql://u@h/db", "not a PostgreSQL URL"),
    ("trove", "neither a postgresql:// URL nor a libpq key=value"),
    ("postgresql://u@h:notaport/db", "malformed"),
    ("host=x port", "malformed"),
    ("   ", "empty"),
])
def test_a_bad_database_url_is_a_clear_load_error(url, words):
    with pytest.raises(StoreSelectionError, match=words):
        check_url(url)


def test_a_password_never_appears_in_the_error():
    with pytest.raises(StoreSelectionError) as err:
        check_url("mysql://u:hunter2@h/db")
    assert "hunter2" not in str(err.value)


def test_a_missing_driver_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(StoreSelectionError, match=r"hermes-trove\[postgres\]"):
        check_url("postgresql://u@127.0.0.1/db")


def test_a_served_profile_whose_env_selects_no_store_is_named_once_and_its_hooks_stay_quiet(config, tmp_path,
                                                                                             monkeypatch, caplog):
    from hermes_trove import hooks

    runtime = build_runtime(config)
    home = tmp_path / "profiles" / "broken"
    home.mkdir(parents=True)
    (home / ".env").write_text("TROVE_DATABASE_URL=mysql://u:hunter2@h/db\n", encoding="utf-8")
    for _ in range(2):  # an agent copy, then another: the .env is read once, the error said once
        with pytest.raises(StoreSelectionError, match="profile 'broken': .*not a PostgreSQL URL"):
            runtime.for_home(str(home))
    monkeypatch.setattr(hooks, "scoped_home", lambda: str(home))
    assert hooks.make_hooks(runtime)["post_llm_call"](session_id="s1", conversation_history=[user("hi")]) is None
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and str(home / ".env") in errors[0] and "built-in compressor" in errors[0], errors
    assert "hunter2" not in caplog.text


def test_a_server_down_at_load_is_not_a_load_failure(config):
    cfg = dataclasses.replace(config, database_url="postgresql://postgres@127.0.0.1:1/none?connect_timeout=1")
    runtime = build_runtime(cfg)  # no network at load
    assert runtime.store.local_writes
    assert runtime.db.path.startswith("postgresql://")


def test_the_operators_libpq_options_are_kept_and_a_statement_timeout_added(pg_url, pg_schema, monkeypatch):
    monkeypatch.setenv("PGOPTIONS", f"-csearch_path={pg_schema},public")  # as a service file's options would
    db = PgDatabase(pg_url)
    conn = db.read()
    assert conn.execute("SELECT current_schema(), current_setting('statement_timeout')").fetchone()[:] == \
        (pg_schema, "1min")
    assert server_rows(pg_url, "SELECT COUNT(*) FROM pg_tables WHERE schemaname = %s AND tablename = 'messages'",
                       pg_schema)[0][0] == 1
    db.close()
    db = PgDatabase(make_conninfo(pg_url, options=f"-csearch_path={pg_schema},public -cstatement_timeout=5000"))
    assert db.read().execute("SHOW statement_timeout").fetchone()[0] == "5s"  # the operator's own is kept
    db.close()


def test_a_store_connection_plans_without_jit_unless_the_operator_set_it(pg_url, pg_schema, monkeypatch):
    """JIT compiling costs tens of milliseconds, more than any search it would speed up."""
    monkeypatch.setenv("PGOPTIONS", f"-csearch_path={pg_schema},public")
    db = PgDatabase(pg_url)
    assert db.read().execute("SHOW jit").fetchone()[0] == "off"
    db.close()
    db = PgDatabase(make_conninfo(pg_url, options=f"-csearch_path={pg_schema},public -cjit=on"))
    assert db.read().execute("SHOW jit").fetchone()[0] == "on"  # the operator's own is kept
    db.close()


def index_after_upgrade(url: str, monkeypatch, last: str, row: str, index: str) -> str:
    """The definition of ``index`` once a schema the build before ``last`` left (holding ``row``) is opened."""
    from hermes_trove import pgschema
    from hermes_trove.pgdb import close_connections

    full = pgschema.migrations()
    monkeypatch.setattr(pgschema, "migrations", lambda: full[:[name for name, _ in full].index(last)])
    PgDatabase(url).connect().execute(row)
    close_connections()
    monkeypatch.undo()
    db = PgDatabase(url)
    assert last in db.applied_migrations()
    found = db.connect().execute("SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema()"
                                 " AND indexname = ?", (index,)).fetchone()
    assert found is not None, index
    return str(found[0])


def test_a_schema_of_the_previous_build_gets_the_chat_index(pg_database_url, monkeypatch):
    definition = index_after_upgrade(
        pg_database_url, monkeypatch, "pg0007_sessions_by_conversation",
        "INSERT INTO sessions(session_id, conversation_id, created_at, updated_at) VALUES ('s1', 'chat-1', 0, 0)",
        "sessions_conversation")
    assert "(conversation_id, updated_at)" in definition, definition


def test_a_schema_of_the_previous_build_gets_the_index_of_the_sessions_that_follow_a_session(pg_database_url,
                                                                                          monkeypatch):
    definition = index_after_upgrade(
        pg_database_url, monkeypatch, "pg0009_sessions_by_previous",
        "INSERT INTO sessions(session_id, previous_session_id, created_at, updated_at) VALUES ('s2', 's1', 0, 0)",
        "sessions_previous")
    assert "(previous_session_id) WHERE (previous_session_id IS NOT NULL)" in definition, definition


@pytest.mark.parametrize("sql, want", [
    ("SELECT ? , :name", "SELECT %s , %(name)s"),
    ("x LIKE '%;base64,%' AND y = ?", "x LIKE '%%;base64,%%' AND y = %s"),
    ("SELECT '?', ':x', a::text", "SELECT '?', ':x', a::text"),
    ('SELECT "we?ird"', 'SELECT "we?ird"'),
    ("mod(a, 3) % 2", "mod(a, 3) %% 2"),
])
def test_placeholders_translate_outside_quotes(sql, want):
    assert translate(sql) == want


# -- the outbox --------------------------------------------------------------------------------

def test_a_turn_writes_the_outbox_and_the_shipper_moves_it_exactly_once(pg_config, pg_database_url):
    runtime = build_runtime(pg_config)
    key = SessionKey("s1", "", "cli")
    history = turns(5)
    result = runtime.store.ingest(key, history)
    assert len(result.store_ids) == 20
    runtime.store.settle()
    rows = server_rows(pg_database_url, "SELECT session_id, role, content FROM messages ORDER BY store_id")
    assert [r[2] for r in rows] == [m.get("content") or "" for m in history]
    # the same transcript again, and a grown one: only the new rows ship
    runtime.store.ingest(key, history)
    runtime.store.ingest(key, history + turns(1, "u"))
    runtime.store.settle()
    assert server_rows(pg_database_url, "SELECT COUNT(*) FROM messages")[0][0] == 24
    assert runtime.store.outbox.pending() == 0


def test_a_replayed_batch_adds_nothing(pg_config, pg_database_url):
    runtime = build_runtime(pg_config)
    runtime.store.ingest(SessionKey("s1", "", "cli"), turns(3))
    outbox = runtime.store.outbox
    rows, sessions, _, _, _ = outbox.batch()
    conn = PgDatabase(pg_database_url).connect()
    ship_batch(conn, outbox.origin(), rows, sessions)  # the background shipper may have shipped it already
    assert ship_batch(conn, outbox.origin(), rows, sessions) == 0  # a crash before the cursor moved
    assert server_rows(pg_database_url, "SELECT COUNT(*) FROM messages")[0][0] == 12


def test_ids_stay_in_session_order_across_interleaved_sessions(pg_config, pg_database_url):
    runtime = build_runtime(pg_config)
    a, b = SessionKey("a", "", "cli"), SessionKey("b", "", "cli")
    ha, hb = [], []
    for i in range(6):
        ha += turns(1, f"a{i}")
        hb += turns(1, f"b{i}")
        runtime.store.ingest(a, ha)
        runtime.store.ingest(b, hb)
    runtime.store.settle()
    for sid, hist in (("a", ha), ("b", hb)):
        got = server_rows(pg_database_url, "SELECT content FROM messages WHERE session_id=%s ORDER BY store_id", sid)
        assert [r[0] for r in got] == [m.get("content") or "" for m in hist]


def test_an_outage_keeps_every_row_on_disk_and_the_return_drains_it_once(config, pg_database_url):
    proxy = PgProxy(pg_database_url).start()
    runtime = build_runtime(dataclasses.replace(config, database_url=proxy.url))
    key = SessionKey("s1", "", "telegram:1")
    history = turns(2)
    runtime.store.ingest(key, history)
    runtime.store.settle()
    proxy.down()
    for i in range(5):  # turns go on while the server is away
        history += turns(1, f"down{i}")
        assert runtime.store.ingest(key, history).store_ids
    with pytest.raises(ServerUnreachableError):
        runtime.store.settle(timeout_s=2)
    with pytest.raises(ServerUnreachableError):  # known down: fails at once, no network wait
        runtime.store.settle()
    status = runtime.store.shipper.status()
    assert status["pending"] == 20 and not status["reachable"]
    proxy.up()
    runtime.store.shipper.state.last_error_at = 0.0  # the grace period is over
    runtime.store.settle()
    got = server_rows(pg_database_url, "SELECT content, COUNT(*) FROM messages GROUP BY content HAVING COUNT(*) > 1")
    assert got == []
    assert server_rows(pg_database_url, "SELECT COUNT(*) FROM messages")[0][0] == len(history)
    proxy.down()


def test_a_new_process_ships_what_an_earlier_one_left(pg_config, pg_database_url):
    first = build_runtime(dataclasses.replace(pg_config, database_url="postgresql://postgres@127.0.0.1:1/x"))
    first.store.ingest(SessionKey("s1", "", "cli"), turns(4))
    second = build_runtime(pg_config)  # same HERMES_HOME, so the same outbox file
    assert second.store.outbox.pending() == 16
    second.store.settle()
    assert server_rows(pg_database_url, "SELECT COUNT(*) FROM messages")[0][0] == 16


# -- the engine on the server ------------------------------------------------------------------

def test_the_engine_compacts_on_the_server_and_grep_finds_a_canary(pg_config, pg_database_url):
    runtime = build_runtime(pg_config)
    engine = make_engine(runtime, complete=lambda messages, model, timeout_s, max_tokens: "summary of kiln work",
                         context_length=8000)
    history = []
    for i in range(40):
        history += [user(f"step {i} " + "word " * 60), assistant(f"reply {i} " + "text " * 60)]
    history += [user("the canary is zebra-4471"), assistant("noted")]
    engine.ingest(history)
    out = engine.compress(history, current_tokens=7000, force=True)
    assert len(out) < len(history)
    nodes = server_rows(pg_database_url, "SELECT COUNT(*) FROM summary_nodes")[0][0]
    assert nodes >= 1
    reply = engine.handle_tool_call("trove_grep", {"query": "zebra-4471", "session_scope": "all"})
    assert "zebra" in reply


def test_while_the_server_is_down_each_turn_still_gets_the_recall_policy_and_logs_no_traceback(config, caplog):
    """The hook that adds context before the model answers reads the session's summaries from the server;
    with the server down that read must not take the policy with it, nor log a traceback every turn."""
    runtime = build_runtime(dataclasses.replace(config, database_url="postgresql://postgres@127.0.0.1:1/x"))
    engine = make_engine(runtime)
    hooks = make_hooks(runtime)
    history: list[dict] = []
    with caplog.at_level("INFO", logger="hermes_trove"):
        for i in range(3):
            history += [user(f"turn {i}: the spare key is under the heron"), assistant(f"noted {i}")]
            hooks["post_llm_call"](session_id=engine.session_id, conversation_history=list(history), platform="cli")
            injected = hooks["pre_llm_call"](session_id=engine.session_id, conversation_history=list(history),
                                             user_message="next", platform="cli")
            assert injected and "trove_recall" in injected["context"], injected
    assert not [r.getMessage() for r in caplog.records if r.exc_info], "a traceback per turn while the server is down"
    # known down after the first turn's shipping failed: no summary read is even tried (no wait on the network)
    assert not [r for r in caplog.records if "no summary context" in r.getMessage()]
    assert runtime.store.outbox.pending() == len(history)  # every turn waits in the outbox


def test_a_server_gone_but_not_yet_known_down_leaves_only_the_summary_out(config, pg_database_url, caplog):
    """A server that went away since the last shipping is not known down yet: the summary read itself fails,
    and only the summary is left out (one warning line, no traceback), the policy still goes."""
    proxy = PgProxy(pg_database_url).start()
    runtime = build_runtime(dataclasses.replace(config, database_url=proxy.url))
    engine = make_engine(runtime)
    engine.ingest(turns(2))
    runtime.store.settle()
    proxy.down()
    assert runtime.offline_view() is None
    with caplog.at_level("INFO", logger="hermes_trove"):
        injected = make_hooks(runtime)["pre_llm_call"](session_id=engine.session_id, platform="cli",
                                                       conversation_history=[user("hi")], user_message="hi")
    assert injected and "trove_recall" in injected["context"], injected
    assert [r for r in caplog.records if "no summary context" in r.getMessage() and not r.exc_info]
    # the hook's own lines only: a background pass that the outage meets on its own thread may log its own
    assert not [r for r in caplog.records if r.exc_info and r.name == "hermes_trove.hooks"]


def test_a_server_gone_mid_turn_leaves_only_the_kept_exchanges_out(config, pg_database_url, caplog):
    """The kept rows are read from the server: one that went away since the turn began costs this block
    (one warning line, no traceback), not the whole hook context, and the record waits for the next turn."""
    from hermes_trove.keptail import HEADER

    proxy = PgProxy(pg_database_url).start()
    try:
        runtime = build_runtime(dataclasses.replace(config, database_url=proxy.url))
        engine = make_engine(runtime)
        chat = [m for i in range(8) for m in (user(f"turn {i}: the lantern code is {1000 + i}"), assistant(f"ok {i}"))]
        engine.ingest(chat)
        out = engine.compress(chat[:12], current_tokens=2000, force=True)  # /compress here 2: four messages kept
        assert engine.state.last_status == "compacted" and runtime.compactions.kept_tail("s1") is not None
        runtime.store.settle()
        proxy.down()
        assert runtime.offline_view() is None  # not known down yet
        reloaded = [dict(out[0]), user("what did we say?")]
        with caplog.at_level("INFO", logger="hermes_trove"):
            injected = make_hooks(runtime)["pre_llm_call"](session_id="s1", platform="cli",
                                                           conversation_history=reloaded, user_message="hi")
        assert injected and "trove_recall" in injected["context"], injected
        assert HEADER not in injected["context"]
        noisy = ("hermes_trove.hooks", "hermes_trove.keptail")
        assert not [r for r in caplog.records if r.exc_info and r.name in noisy]
        assert [r for r in caplog.records if "no kept exchanges" in r.getMessage()]
        assert runtime.compactions.kept_tail("s1") is not None
    finally:
        proxy.down()


def long_turns(n: int, tag: str) -> list[dict]:
    """``n`` exchanges of about 150 words each, tagged so a test can find them."""
    return [m for i in range(n) for m in (user(f"{tag} question {i} " + "word " * 150),
                                          assistant(f"{tag} answer {i} " + "text " * 150))]


def test_what_the_built_in_compressor_drops_while_the_server_is_away_is_in_the_outbox_at_once(config,
                                                                                              pg_database_url):
    """A compaction handed to the host's compressor during an outage (the store known unusable, so trove
    does not even try) drops the middle of the transcript: what no post-turn hook stored yet goes to the
    outbox then, not only to memory, so the next process ships it even when this one exits before a retry."""
    proxy = PgProxy(pg_database_url).start()
    runtime = build_runtime(dataclasses.replace(config, database_url=proxy.url))
    engine = make_engine(runtime, context_length=8000)
    proxy.down()
    history = long_turns(8, "early")
    engine.ingest(history)  # the earlier turns, as the post-turn hook stored them
    history = engine.compress(history, current_tokens=7900, force=True)  # needs the server: delegated
    assert engine.state.last_status == "delegated" and not runtime.health.usable
    mid = long_turns(4, "mid")  # a long turn's messages, not stored yet when it compacts
    out = engine.compress(history + mid + long_turns(6, "late"), current_tokens=7900, force=True)
    assert engine.state.last_status == "delegated"  # in the backoff: handed over at once
    assert not [m for m in out if m in mid]  # the host's compressor dropped them
    proxy.up()
    later = build_runtime(dataclasses.replace(config, database_url=proxy.url))  # the next process
    later.store.settle()
    stored = [r[0] for r in server_rows(pg_database_url, "SELECT content FROM messages ORDER BY store_id")]
    texts = [m["content"] for m in mid]
    assert [c for c in stored if c in texts] == texts  # each once, in the order the turn made them
    proxy.down()


def test_what_the_built_in_compressor_drops_is_held_when_the_outbox_cannot_take_it_either(config, pg_database_url):
    """The server away and the outbox's disk full: the dropped messages stay held in memory (as before an
    outbox took them) and reach the server once both are back, instead of being neither written nor held."""
    proxy = PgProxy(pg_database_url).start()
    runtime = build_runtime(dataclasses.replace(config, database_url=proxy.url))
    engine = make_engine(runtime, context_length=8000)
    proxy.down()
    history = long_turns(8, "early")
    engine.ingest(history)
    history = engine.compress(history, current_tokens=7900, force=True)
    assert engine.state.last_status == "delegated" and not runtime.health.usable
    box = runtime.store.outbox.db.connect()
    box.execute(f"PRAGMA max_page_count={box.execute('PRAGMA page_count').fetchone()[0]}")  # its disk is full
    mid = long_turns(4, "mid")
    out = engine.compress(history + mid + long_turns(6, "late"), current_tokens=7900, force=True)
    assert engine.state.last_status == "delegated" and not [m for m in out if m in mid]
    assert runtime.unstored.count >= len(mid)  # held, since nothing took them
    box.execute("PRAGMA max_page_count=1073741823")  # room again
    proxy.up()
    assert runtime.store.shipper.probe() == ""  # the server answers again (as status finds)
    runtime.health.retry_at = 0.0  # the backoff has passed
    assert runtime.store_usable(engine.state.key) and runtime.unstored.count == 0
    runtime.store.settle()
    stored = [r[0] for r in server_rows(pg_database_url, "SELECT content FROM messages ORDER BY store_id")]
    texts = [m["content"] for m in mid]
    assert [c for c in stored if c in texts] == texts
    proxy.down()


def test_tools_answer_from_the_outbox_and_say_so_while_the_server_is_down(config, pg_database_url):
    proxy = PgProxy(pg_database_url).start()
    runtime = build_runtime(dataclasses.replace(config, database_url=proxy.url))
    engine = make_engine(runtime)
    history = turns(2) + [user("the spare key is under the blue heron statue"), assistant("noted")]
    engine.ingest(history)
    runtime.store.settle()
    proxy.down()
    history += [user("where is the spare key?")]
    reply = json.loads(engine.handle_tool_call("trove_grep", {"query": "blue heron", "session_scope": "all"},
                                               messages=history))
    assert "unreachable" in reply["degraded"]
    assert any("heron" in json.dumps(hit) for hit in reply["results"])
    proxy.up()
    runtime.store.shipper.state.last_error_at = 0.0  # past the grace period: the server answers again
    runtime.store.settle()
    reply = json.loads(engine.handle_tool_call("trove_grep", {"query": "blue heron", "session_scope": "all"}))
    assert "degraded" not in reply and reply["results"]
    proxy.down()


def test_the_shipper_keeps_the_search_statistics_current_under_a_lease(pg_config, pg_database_url):
    runtime = build_runtime(pg_config)
    runtime.store.ingest(SessionKey("s1", "", "cli"), turns(3))
    runtime.store.settle()
    shipper = runtime.store.shipper
    woken = _SHIPPERS.threads.get(runtime.store.outbox.path)  # the pass the ingest woke refreshes once too
    if woken is not None:  # (this outbox's only: another test's pass left retrying is not waited for)
        woken.join(30)
    shipper._stats_at = -3600.0
    shipper.refresh_stats()
    docs = server_rows(pg_database_url, "SELECT corpus, docs FROM search_stats ORDER BY corpus")
    assert dict(docs)["messages"] == 12
    runtime.store.ingest(SessionKey("s1", "", "cli"), turns(4))
    runtime.store.settle()
    shipper.refresh_stats()  # within STATS_EVERY_S: not again
    assert dict(server_rows(pg_database_url, "SELECT corpus, docs FROM search_stats"))["messages"] == 12
    shipper._stats_at -= 3600
    shipper.refresh_stats()
    assert dict(server_rows(pg_database_url, "SELECT corpus, docs FROM search_stats"))["messages"] == 16
    assert server_rows(pg_database_url, "SELECT COUNT(*) FROM work_leases WHERE name = 'search-stats'")[0][0] == 0


def test_the_post_turn_hook_writes_the_outbox_without_reaching_the_server(pg_config, monkeypatch):
    runtime = build_runtime(pg_config)
    make_engine(runtime)  # binds s1: its row is in the outbox
    runtime.store.settle()
    from hermes_trove import pgdb

    here, calls = threading.get_ident(), []
    real = pgdb.PgConnection.execute

    def execute(self, sql, params=()):
        if threading.get_ident() == here:  # the turn's own thread (the shipper runs on another)
            calls.append(sql)
        return real(self, sql, params)

    monkeypatch.setattr(pgdb.PgConnection, "execute", execute)
    make_hooks(runtime)["post_llm_call"](session_id="s1", platform="cli", conversation_history=turns(2))
    assert calls == [] and runtime.store.outbox.store.count("s1") == 8


def test_a_server_that_stops_answering_holds_no_turn_and_loses_nothing(config, pg_database_url, monkeypatch):
    from hermes_trove import pgdb

    monkeypatch.setattr(pgdb, "STALL_S", 3.0)  # the server's 60 s statement timeout plus 5 s, shortened
    proxy = PgProxy(pg_database_url).start()
    runtime = build_runtime(dataclasses.replace(config, database_url=proxy.url))
    engine = make_engine(runtime, complete=lambda messages, model, timeout_s, max_tokens: "summary",
                         context_length=8000)
    history = [m for i in range(30) for m in (user(f"step {i} " + "word " * 60), assistant(f"reply {i} " + "y " * 60))]
    engine.ingest(history)
    runtime.store.settle()
    assert runtime.store.count() == len(history)  # this thread's own connection is open too
    proxy.stalled = True  # every connection stays open; nothing comes back
    history += turns(2, "hung")
    engine.ingest(history)  # the pass this wakes sends its batch into the stalled connection
    answers: list = []
    turn = threading.Thread(target=lambda: answers.extend([
        engine.handle_tool_call("trove_grep", {"query": "kiln1", "session_scope": "all"}, messages=history),
        engine.compress(history, current_tokens=7000, force=True)]), daemon=True)
    turn.start()
    turn.join(120)  # a guard against a hang, not a timing: unguarded, this turn waited for good
    assert not turn.is_alive() and len(answers) == 2
    assert engine.state.last_status == "delegated"
    proxy.stalled = False  # the held batch reaches the server now, its reply to a closed socket
    runtime.store.shipper.state.last_error_at = 0.0
    runtime.store.settle()
    assert server_rows(pg_database_url, "SELECT COUNT(*), COUNT(DISTINCT content) FROM messages")[0] == \
        (len(history), len(history))
    proxy.down()


def test_a_summary_read_the_server_stopped_answering_makes_it_known_down_so_later_turns_do_not_wait(
        config, pg_database_url, monkeypatch, caplog):
    """The hook before each answer reads the session's summaries from the server. One that a stalled server
    fails (after the watchdog) makes the server known down: the next turns read nothing from it, rather
    than each waiting out a new connection's timeout while the outage lasts."""
    from hermes_trove import pgdb

    monkeypatch.setattr(pgdb, "STALL_S", 3.0)  # the server's 60 s statement timeout plus 5 s, shortened
    proxy = PgProxy(pg_database_url).start()
    runtime = build_runtime(dataclasses.replace(config, database_url=proxy.url))
    engine = make_engine(runtime)
    hooks = make_hooks(runtime)
    history = turns(2)
    hooks["post_llm_call"](session_id=engine.session_id, conversation_history=list(history), platform="cli")
    runtime.store.settle()  # shipped: no shipment of its own would find the outage
    proxy.stalled = True
    with caplog.at_level("WARNING", logger="hermes_trove"):
        for i in range(3):
            history += [user(f"question {i} while the server hangs")]
            injected = hooks["pre_llm_call"](session_id=engine.session_id, conversation_history=list(history),
                                             user_message=f"question {i}", platform="cli")
            assert injected and "trove_recall" in injected["context"], injected  # the policy still goes
            history += [assistant(f"answer {i}")]
    failed_reads = [r for r in caplog.records if "no summary context" in r.getMessage()]
    assert len(failed_reads) == 1, [r.getMessage() for r in failed_reads]  # the first turn's; none after
    assert runtime.store.shipper.state.down_recently()
    proxy.stalled = False
    proxy.down()


def test_a_read_the_server_stops_answering_fails_and_the_next_one_reconnects(config, pg_database_url, monkeypatch):
    from hermes_trove import pgdb

    monkeypatch.setattr(pgdb, "STALL_S", 2.0)
    proxy = PgProxy(pg_database_url).start()
    runtime = build_runtime(dataclasses.replace(config, database_url=proxy.url))
    runtime.store.ingest(SessionKey("s1", "", "cli"), turns(1))
    runtime.store.settle()
    stalled, resumed, outcome = threading.Event(), threading.Event(), []

    def reads() -> None:  # one thread, so every read uses its one connection
        outcome.append(runtime.store.count())  # nothing waits to ship: the read goes straight to the server
        stalled.wait()
        try:
            outcome.append(runtime.store.count())
        except psycopg.OperationalError as exc:
            outcome.append(exc)
        resumed.wait()
        outcome.append(runtime.store.count())

    reader = threading.Thread(target=reads, daemon=True)
    reader.start()
    for _ in range(1200):  # guards against a hang (at most 60 s), not timings
        if outcome:
            break
        reader.join(0.05)
    proxy.stalled = True
    stalled.set()
    for _ in range(1200):  # unguarded, the held read waited for good
        if len(outcome) > 1:
            break
        reader.join(0.05)
    proxy.stalled = False
    resumed.set()
    reader.join(60)
    assert outcome[0] == 4 and isinstance(outcome[1], psycopg.OperationalError) and outcome[2] == 4
    proxy.down()


def test_connections_a_server_restart_ended_are_replaced_before_use(pg_config, pg_database_url):
    runtime = build_runtime(pg_config)
    runtime.store.ingest(SessionKey("s1", "", "cli"), turns(1))
    runtime.store.settle()
    assert runtime.store.count() == 4  # this thread's connection and the shipper's are both open now
    pids = [runtime.db.read().raw.info.backend_pid, runtime.store.shipper._conn.raw.info.backend_pid]
    with psycopg.connect(pg_database_url, autocommit=True) as admin:  # what a restart does to every session
        admin.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", (pids,))
        for _ in range(200):  # until both sessions have ended (at most 10 s)
            if not admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,)).fetchone():
                break
            time.sleep(0.05)
    runtime.store.ingest(SessionKey("s1", "", "cli"), turns(2))
    runtime.store.settle()  # the shipper's connection: a failed shipment would mark the server down for a minute
    assert runtime.store.shipper.state.reachable and runtime.store.count() == 8


def test_a_nul_in_a_message_ships_as_a_replacement_character_and_blocks_nothing(pg_config, pg_database_url):
    runtime = build_runtime(pg_config)
    key = SessionKey("s1", "", "cli")
    history = [user("binary junk \x00 in a terminal output"), tool_result("c\x001", "out \x00", name="t\x00x")]
    runtime.store.ingest(key, history)
    runtime.store.ingest(key, history + turns(1))
    runtime.store.settle()
    assert runtime.store.shipper.state.reachable and runtime.store.outbox.pending() == 0
    rows = server_rows(pg_database_url, "SELECT content, tool_call_id, tool_name FROM messages ORDER BY store_id")
    assert rows[:2] == [("binary junk \ufffd in a terminal output", None, None), ("out \ufffd", "c\ufffd1", "t\ufffdx")]
    assert len(rows) == 6
    assert "junk" in runtime.store.get_many([1])[0].content


def test_a_shipment_that_is_merely_busy_is_waited_for_even_as_a_deadline_runs_out(pg_config):
    runtime = build_runtime(pg_config)
    runtime.store.ingest(SessionKey("s1", "", "cli"), turns(1))
    shipper = runtime.store.shipper
    shipper.drain()
    shipper._lock.acquire()  # another thread's shipment, answered after half a second
    threading.Timer(0.5, shipper._lock.release).start()
    assert shipper.ship_once(wait_s=0.01) == 0  # it waited for that shipment
    assert shipper.state.reachable and not shipper.state.down_recently()


def test_a_connection_whose_descriptor_is_past_1023_is_still_checked_before_use(pg_config):
    import os
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1100:
        pytest.skip(f"this process may open {hard} files, fewer than the test needs")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1100), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1030)]  # a long-lived host holds many files
    try:
        runtime = build_runtime(pg_config)
        assert runtime.store.count() == 0
        assert runtime.db.read().raw.fileno() > 1023 and runtime.store.count() == 0  # the second use checks it
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def lock_waiters(url: str) -> int:
    """Server backends of this database waiting on a row lock just now."""
    return int(server_rows(url, "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                           " AND datname = current_database()")[0][0])


def test_dropping_an_empty_row_waits_for_a_shipment_in_flight_and_keeps_what_it_brought(pg_config, pg_database_url,
                                                                                        tmp_path):
    # Another machine ships the first messages of a session whose row is empty on the server. The
    # empty-row delete (a side agent's row, or the lifecycle GC) starts while that shipment holds
    # the row: it must see the messages once they commit, not delete the row under them.
    runtime = build_runtime(pg_config)
    key = SessionKey("20260301_093000_c0ffee", "", "cli")
    runtime.store.ensure_session(key)
    runtime.store.settle()
    other = Outbox(tmp_path / "other-machine.db")
    other.store.ingest(key, [user("the kiln code is 4471"), assistant("noted")])
    rows, sessions, _, _, _ = other.batch()
    shipping, release = threading.Event(), threading.Event()

    def ship() -> None:
        with PgDatabase(pg_database_url).transaction() as conn:
            ship_batch(conn, other.origin(), rows, sessions)
            shipping.set()
            release.wait(30)

    shipper = threading.Thread(target=ship)
    shipper.start()
    assert shipping.wait(30)
    deleted: list[bool] = []
    dropper = threading.Thread(target=lambda: deleted.append(drop_unstored_row(runtime, key.session_id)))
    dropper.start()
    for _ in range(600):  # until the delete waits on the shipment's row lock
        if lock_waiters(pg_database_url) or not dropper.is_alive():
            break
        time.sleep(0.05)
    release.set()
    shipper.join(30)
    dropper.join(30)
    assert deleted == [False]
    assert server_rows(pg_database_url, "SELECT session_id FROM sessions") == [(key.session_id,)]
    assert server_rows(pg_database_url, "SELECT COUNT(*) FROM messages WHERE session_id = %s",
                       key.session_id)[0][0] == 2


def test_dropping_an_empty_row_waits_for_this_processs_shipment_in_flight(pg_config, pg_database_url, monkeypatch):
    # The curator's agent binds as an ordinary session (its row goes to the outbox and a shipment
    # starts), then says platform "curator" and its row is dropped. A shipment that read the row
    # before the drop must not put it back on the server after it.
    runtime = build_runtime(pg_config)
    runtime.store.settle()
    outbox, read, go = runtime.store.outbox, threading.Event(), threading.Event()
    real_batch = outbox.batch

    def batch_then_wait():
        got = real_batch()
        if got[1] and not read.is_set():  # the session's row is read: hold the shipment here
            read.set()
            go.wait(30)
        return got

    monkeypatch.setattr(outbox, "batch", batch_then_wait)
    sid = "20260301_093000_c0ffee"
    runtime.store.ensure_session(SessionKey(sid, "", "cli"))
    assert read.wait(30)
    dropper = threading.Thread(target=drop_unstored_row, args=(runtime, sid))
    dropper.start()
    dropper.join(1.0)  # without waiting for the shipment, the drop is over by now
    go.set()
    dropper.join(30)
    runtime.store.settle()
    assert runtime.store.session(sid) is None
    assert server_rows(pg_database_url, "SELECT COUNT(*) FROM sessions WHERE session_id = %s", sid)[0][0] == 0


def test_a_curator_starting_while_the_server_is_away_leaves_the_store_usable(config, pg_database_url):
    # The curator's agent binds as an ordinary session, then says platform "curator": dropping the
    # empty row it got is a tidy-up, and a server away must not make the chat's store unusable.
    proxy = PgProxy(pg_database_url).start()
    runtime = build_runtime(dataclasses.replace(config, database_url=proxy.url))
    chat = make_engine(runtime, session="20260301_090000_abc123")
    history = turns(1)
    chat.ingest(history)
    runtime.store.settle()
    proxy.down()
    curator = copy.deepcopy(chat)
    curator.state.key = None  # a fresh copy, as the host makes one per agent
    curator.bind_session_state(None, "20260301_093000_c0ffee")
    curator.on_session_start("20260301_093000_c0ffee", platform="curator", conversation_id=None)
    assert curator.state.mode == "stateless"
    assert runtime.health.usable, runtime.health.reason
    history += turns(1, "away")
    assert chat.ingest(history) == 4  # the chat's turns still go to the outbox
    proxy.up()
    runtime.store.shipper.state.last_error_at = 0.0  # the grace period is over
    runtime.store.settle()
    assert server_rows(pg_database_url, "SELECT session_id FROM sessions") == [("20260301_090000_abc123",)]
    assert server_rows(pg_database_url, "SELECT COUNT(*) FROM messages")[0][0] == len(history)
    proxy.down()


def test_a_session_starting_while_the_server_is_away_leaves_the_store_usable(config, pg_database_url):
    # The empty-row GC at a session's start counts the server's rows: away, it waits for a later start.
    proxy = PgProxy(pg_database_url).start()
    runtime = build_runtime(dataclasses.replace(config, database_url=proxy.url))
    make_engine(runtime, session="20260301_090000_abc123").ingest(turns(1))
    runtime.store.settle()
    proxy.down()
    fresh = make_engine(runtime, session="20260301_100000_def456")
    assert runtime.health.usable, runtime.health.reason
    assert fresh.ingest(turns(1, "away")) == 4
    proxy.up()  # back: the turns kept meanwhile ship (and the retrying background pass ends)
    for attempt in range(150):  # up to about 30 s of retries: the background pass may still hold the outbox
        try:
            runtime.store.settle()
            break
        except ServerUnreachableError:
            assert attempt < 149, "the outbox never shipped after the server came back"
            time.sleep(0.2)
    for thread in list(_SHIPPERS.threads.values()):
        thread.join(30)
    assert server_rows(pg_database_url, "SELECT COUNT(*) FROM messages WHERE session_id = %s",
                       "20260301_100000_def456")[0][0] == 4
    proxy.down()


def test_turning_on_an_opt_in_set_sends_its_own_statements_and_leaves_the_ledger_table_alone(
        pg_database_url, monkeypatch):
    """The core set creates the ledger; an opt-in set's transaction only locks, reads it, migrates and records."""
    from hermes_trove import pgdb, pgschema

    db = PgDatabase(pg_database_url)
    db.connect()  # the core set, the ledger with it
    sent: list[str] = []
    run = pgdb.PgConnection.run

    def recording(self, sql, params=(), prepare=None):
        sent.append(sql)
        return run(self, sql, params, prepare)

    monkeypatch.setattr(pgdb.PgConnection, "run", recording)
    assert db.ensure_optional("state") == ["pg0006_assertions"]
    assert any("pg_advisory_xact_lock" in s for s in sent)
    assert not any(s.startswith("CREATE TABLE IF NOT EXISTS schema_migrations") for s in sent)
    assert len([s for s in sent if s in pgschema.OPTIONAL["state"][0][1]]) == len(pgschema.OPTIONAL["state"][0][1])
    assert db.ensure_optional("state") == [] and db.has_optional("state")
    db.close()


def test_asking_for_no_rows_reads_nothing_so_a_server_that_is_down_is_not_asked():
    from hermes_trove.store import MessageStore

    store = MessageStore(PgDatabase("postgresql://trove@127.0.0.1:1/trove"))  # nothing listens on port 1
    assert store.get_many([]) == [] and store.get_many(()) == []
    with pytest.raises(psycopg.OperationalError, match="127.0.0.1"):  # a row asked for is asked of the server
        store.get_many([1])
