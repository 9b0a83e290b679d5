"""Several machines on one PostgreSQL store (separate HERMES_HOMEs, separate processes): the server
goes away mid-run and comes back, processes die mid-shipment; afterwards every message is on the
server exactly once, no node has two parents, and a fourth machine finds each one's canary."""
from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from conftest import assistant, make_config, make_engine, tool_call, tool_result, user
from pg_proxy import PgProxy

from hermes_trove.dag import SummaryDAG
from hermes_trove.engine import TroveEngine
from hermes_trove.outbox import ServerUnreachableError
from hermes_trove.runtime import build_runtime

pytestmark = pytest.mark.reliability

CTX = multiprocessing.get_context("fork")


def _summary(messages, model, timeout_s, max_tokens):
    return "summary: " + " ".join(str(m.get("content", ""))[:40] for m in messages[-1:])


def _turn(tag: str, i: int) -> list[dict[str, Any]]:
    call = f"{tag}-c{i}"
    return [user(f"{tag} step {i}: run the build " + "please " * 30),
            assistant("", [tool_call(call, "terminal", json.dumps({"cmd": f"make {tag}-{i}"}))]),
            tool_result(call, f"{tag} build {i} output " + "log line " * 80),
            assistant(f"{tag} step {i} done " + "details " * 30)]


def _machine(home: str, url: str, tag: str, turns: int, done: Any) -> None:
    """One machine: a CLI session of tool-heavy turns, compacting as the host would, then it
    waits (bounded) for its outbox to drain."""
    config = dataclasses.replace(make_config(Path(home)), database_url=url)
    runtime = build_runtime(config)
    engine = make_engine(runtime, complete=_summary, session=f"{tag}-session", context_length=16000)
    history: list[dict[str, Any]] = []
    for i in range(turns):
        history += _turn(tag, i)
        if i == turns // 2:
            history += [user(f"remember the canary {tag}-canary-{os.getpid()}"), assistant("noted")]
        engine.ingest(history)
        if len(history) % 24 == 0:
            history = engine.compress(history, current_tokens=15000)
        time.sleep(0.01)
    deadline = time.monotonic() + 60
    while runtime.store.outbox.pending() and time.monotonic() < deadline:
        try:
            runtime.store.shipper.drain()
        except ServerUnreachableError:
            time.sleep(0.5)
    done.send((tag, os.getpid(), runtime.store.outbox.pending()))


def _server(url: str, sql: str, *args: Any) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, args).fetchall()


def test_three_machines_through_an_outage_then_a_fourth_finds_every_canary(tmp_path, pg_database_url):
    proxy = PgProxy(pg_database_url).start()
    parent, child = CTX.Pipe()
    procs = [CTX.Process(target=_machine, args=(str(tmp_path / f"home{n}"), proxy.url, f"m{n}", 30, child))
             for n in range(3)]
    for p in procs:
        p.start()
    time.sleep(1.0)
    proxy.down()  # the server goes away mid-run...
    time.sleep(2.0)
    proxy.up()    # ...and comes back
    results = [parent.recv() for _ in procs if parent.poll(180)]
    for p in procs:
        p.join(60)
    assert sorted(r[0] for r in results) == ["m0", "m1", "m2"] and all(r[2] == 0 for r in results)
    # every message once: identities are unique per session on the server
    dupes = _server(pg_database_url, "SELECT session_id, identity, COUNT(*) FROM messages"
                                     " GROUP BY session_id, identity HAVING COUNT(*) > 1")
    assert dupes == []
    per_session = dict(_server(pg_database_url, "SELECT session_id, COUNT(*) FROM messages GROUP BY session_id"))
    assert per_session == {f"m{n}-session": 30 * 4 + 2 for n in range(3)}
    with psycopg.connect(pg_database_url, autocommit=True) as conn:
        from hermes_trove.pgdb import PgConnection

        assert SummaryDAG.multi_parent_nodes(PgConnection(conn)) == []
    assert _server(pg_database_url, "SELECT COUNT(*) FROM summary_nodes")[0][0] > 0
    # a fourth machine: a new session finds each machine's canary
    fourth = build_runtime(dataclasses.replace(make_config(tmp_path / "home4"), database_url=pg_database_url))
    engine = TroveEngine(fourth, complete=_summary)
    engine.update_model("fake-model", 128000)
    engine.on_session_start("m4-session", platform="cli", conversation_id=None)
    for tag, pid, _ in results:
        canary = f"{tag}-canary-{pid}"
        grep = json.loads(engine.handle_tool_call("trove_grep", {"query": canary, "session_scope": "all"}))
        marked = [json.dumps(hit).replace(">>>", "").replace("<<<", "") for hit in grep["results"]]
        assert any(canary in hit for hit in marked), grep  # a snippet marks each matched part
        recall = json.loads(engine.handle_tool_call("trove_recall", {"query": f"the canary {canary}"}))
        assert canary in json.dumps(recall), recall
    proxy.down()


def _shipping_machine(home: str, url: str, ready: Any) -> None:
    config = dataclasses.replace(make_config(Path(home)), database_url=url)
    runtime = build_runtime(config)
    engine = make_engine(runtime, session="k-session")
    history: list[dict[str, Any]] = []
    for i in range(60):
        history += _turn("k", i)
        engine.ingest(history)
        if i == 5:
            ready.send("shipping")
    time.sleep(60)  # killed before this ends


@pytest.mark.parametrize("kill_after_s", [0.05, 0.2, 0.6])
def test_a_sigkill_while_shipping_loses_nothing_and_adds_nothing(tmp_path, pg_database_url, kill_after_s):
    proxy = PgProxy(pg_database_url, delay_s=0.01).start()  # slow shipments, so the kill lands in one
    parent, child = CTX.Pipe()
    proc = CTX.Process(target=_shipping_machine, args=(str(tmp_path), proxy.url, child))
    proc.start()
    assert parent.poll(60) and parent.recv() == "shipping"
    time.sleep(kill_after_s * random.uniform(0.8, 1.2))
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(30)
    assert proc.exitcode == -signal.SIGKILL
    # the next process on that machine ships what is left
    again = build_runtime(dataclasses.replace(make_config(tmp_path), database_url=pg_database_url))
    stored = again.store.outbox.store.count("k-session")
    again.store.settle(timeout_s=60)
    assert again.store.outbox.pending() == 0
    rows = _server(pg_database_url, "SELECT identity FROM messages WHERE session_id='k-session' ORDER BY store_id")
    assert len(rows) == stored and len({r[0] for r in rows}) == stored
    local = [r.identity for r in again.store.outbox.store.page("k-session", 0, 10000)]
    assert [r[0] for r in rows] == local  # the server's order is the machine's order
    proxy.down()
