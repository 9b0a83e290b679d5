"""One PostgreSQL store for several machines, under the real host.

Three Hermes homes (separate HERMES_HOMEs, separate host processes, each with its own outbox)
run tool-heavy sessions in a 64K window against one database while the server goes away and
comes back mid-run. A fourth home's new session then finds each one's canary through
``trove_grep session_scope='all'`` and ``trove_recall``; every message is on the server exactly
once, and no main request went over the window.
"""
from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest
from pg_proxy import PgProxy

from .harness import chat_requests, request_tokens
from .test_e2e_scope import tool_results

CONTEXT_LENGTH = 64000
TURNS = 10
FILLER = ("granite", "lantern", "meadow", "nickel", "orchid", "pepper", "quartz", "raven")


def turn(tag: str, i: int) -> str:
    words = " ".join(f"{FILLER[(i + k) % len(FILLER)]}{k % 97}" for k in range(3000))  # ~6,000 tokens
    todo = {"todos": [{"id": f"{tag}-{i}-{k}", "content": f"{tag} task {i}.{k} " + "detail " * 40,
                       "status": "pending"} for k in range(3)]}
    return f"{tag} turn {i}: {words} <<tool:todo {json.dumps(todo)}>>"


@pytest.fixture(scope="module")
def fleet(make_home, fake_llm, pg_url, tmp_path_factory) -> dict[str, Any]:
    from conftest import drop_schema, with_search_path
    from psycopg import sql

    schema = f"t_fleet_{int(time.time())}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    url = with_search_path(pg_url, schema, "public")
    proxy = PgProxy(url).start()
    canaries = {f"m{n}": f"CANARY-m{n}-{4400 + n * 17}" for n in range(3)}
    homes = {tag: make_home(context_length=CONTEXT_LENGTH, TROVE_DATABASE_URL=proxy.url) for tag in canaries}
    start = len(fake_llm.requests())

    def machine(tag: str) -> dict[str, Any]:
        turns = [turn(tag, i) for i in range(TURNS)]
        turns.insert(TURNS // 2, f"please remember: the {tag} canary is {canaries[tag]}.")  # canary_text
        return homes[tag].run_driver({"turns": turns, "max_iterations": 4, "wait_threads": ["trove-outbox"],
                                      "wait_seconds": 90}, f"fleet-{tag}", timeout=900)

    def outage() -> None:  # once the writers have shipped some turns, the server goes away for 6 s
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and stored(url) < 20:
            time.sleep(0.2)
        proxy.down()
        time.sleep(6.0)
        proxy.up()

    cut = threading.Thread(target=outage)
    cut.start()
    with ThreadPoolExecutor(3) as pool:
        runs = dict(zip(canaries, pool.map(machine, canaries), strict=True))
    cut.join()
    writers = fake_llm.requests()[start:]
    fourth = make_home(context_length=CONTEXT_LENGTH, TROVE_DATABASE_URL=url)
    asks = [f"find it <<tool:trove_grep {json.dumps({'query': c, 'session_scope': 'all'})}>>"
            for c in canaries.values()]
    asks += [f"recall it <<tool:trove_recall {json.dumps({'query': f'the {tag} canary'})}>>" for tag in canaries]
    start = len(fake_llm.requests())
    reader = fourth.run_driver({"turns": asks, "max_iterations": 4}, "fleet-reader", timeout=600)
    out = {"runs": runs, "reader": reader, "writers": writers, "reader_requests": fake_llm.requests()[start:],
           "canaries": canaries, "url": url}
    yield out
    proxy.down()
    drop_schema(pg_url, schema)


def server(url: str, query: str, *args: Any) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(query, args).fetchall()


def stored(url: str) -> int:
    try:
        return int(server(url, "SELECT COUNT(*) FROM messages")[0][0])
    except psycopg.Error:  # the first writer has not created the tables yet
        return 0


def canary_text(fleet: dict[str, Any], tag: str) -> str:
    return f"please remember: the {tag} canary is {fleet['canaries'][tag]}."


def canary_rows(fleet: dict[str, Any], tag: str) -> list[tuple]:
    """The store ids of the writer's canary message (a host summary may quote it too: not counted)."""
    return server(fleet["url"], "SELECT store_id FROM messages WHERE session_id = %s AND content = %s",
                  fleet["runs"][tag]["session_id"], canary_text(fleet, tag))


def test_every_writer_kept_trove_and_compacted(fleet):
    for tag, run in fleet["runs"].items():
        assert run["engine_name"] == "trove", (tag, run["engine_class"])
        assert run["compression_count"] and run["compression_count"] >= 1, (tag, run["turns"])


def test_the_outage_reached_the_writers(fleet):
    seen = [w for run in fleet["runs"].values() for w in run["warnings"] if "is unreachable" in w]
    assert seen, [run["warnings"] for run in fleet["runs"].values()]


def test_every_message_is_on_the_server_exactly_once(fleet):
    dupes = server(fleet["url"], "SELECT session_id, identity, COUNT(*) FROM messages"
                                 " GROUP BY session_id, identity HAVING COUNT(*) > 1")
    assert dupes == []
    for tag in fleet["canaries"]:  # the writer's own session holds its canary message once
        assert len(canary_rows(fleet, tag)) == 1, tag
    sessions = {run["session_id"] for run in fleet["runs"].values()}
    stored = {r[0] for r in server(fleet["url"], "SELECT DISTINCT session_id FROM messages")}
    assert sessions <= stored


def test_no_node_has_two_parents(fleet):
    assert server(fleet["url"], "SELECT child_id FROM node_children GROUP BY child_id HAVING COUNT(*) > 1") == []


def test_no_main_request_went_over_the_window(fleet):
    sizes = [request_tokens(b) for b in chat_requests(fleet["writers"])]
    assert sizes and max(sizes) < CONTEXT_LENGTH, sizes
    assert sum(len(turn("m0", 0)) // 4 for _ in range(TURNS)) > CONTEXT_LENGTH  # compaction was needed


def test_a_fourth_machine_finds_every_canary(fleet):
    results = tool_results(fleet["reader_requests"])
    grep, recall = "\n".join(results.get("trove_grep", [])), "\n".join(results.get("trove_recall", []))
    for tag, canary in fleet["canaries"].items():
        assert canary in grep, grep[:2000]
        (store_id,) = canary_rows(fleet, tag)[0]
        assert f'"ref":"store:{store_id}"' in recall.replace(" ", ""), recall[:2000]
