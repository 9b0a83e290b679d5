"""Two gateway chats in one process compacting at the same moment, on engine copies sharing one runtime.

A Telegram chat and a Discord chat each send six turns of about 3,500 tokens, on their own
threads, in one gateway process with a 64K window. The fake server holds every summary request
until it has received one from each chat: both compactions are then in flight together (trove's
summarizer call of one chat does not wait for the other's). Each chat's summaries must cover only
its own rows, no lock or storage error may reach the log, every message is stored once, and no
request passes the window. The same runs on a PostgreSQL store (one schema of the test server),
where both chats' rows go through the process's one outbox.
"""
from __future__ import annotations

import json
import time
from typing import Any

import pytest

from .harness import GATEWAY_DRIVER, aux_requests, chat_requests, query, request_tokens, stored_text

WINDOW = 64000
CHATS = {name: {"platform": platform, "user": user, "key": f"agent:main:{platform}:dm:{user}"}
         for name, platform, user in (("A", "telegram", "5151"), ("B", "discord", "6262"))}
FILLER = " ".join(["words about tides, sails and the harbour wall"] * 300)  # about 3,500 tokens
TURNS = 6


def text(chat: str, i: int) -> str:
    return f"{chat}-chat turn {i}: {FILLER}"


def _summary_from(body: dict[str, Any], chat: str) -> bool:
    return f"{chat}-chat turn" in json.dumps(body.get("messages") or [])


def rows(parallel: dict[str, Any], sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """``sql`` (``?`` placeholders) against the run's store: trove.db, or the PostgreSQL schema."""
    if parallel["url"]:
        import psycopg

        with psycopg.connect(parallel["url"], autocommit=True) as conn:
            return [tuple(r) for r in conn.execute(sql.replace("?", "%s"), params).fetchall()]
    return query(parallel["home"].db_path, sql, params)


def counts(parallel: dict[str, Any], session_id: str) -> dict[tuple[str, str], int]:
    found: dict[tuple[str, str], int] = {}
    for role, content in rows(parallel, "SELECT role, content FROM messages WHERE session_id = ?", session_id):
        key = (role, stored_text(bytes(content) if isinstance(content, memoryview) else content))
        found[key] = found.get(key, 0) + 1
    return found


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def parallel(request, make_home, fake_llm) -> Any:
    url, schema = "", ""
    env = {"TROVE_FRESH_TAIL_COUNT": "4", "TROVE_LEAF_CHUNK_TOKENS": "1500"}
    if request.param == "postgresql":
        import psycopg
        from conftest import drop_schema, with_search_path
        from psycopg import sql

        pg_url = request.getfixturevalue("pg_url")
        schema = f"t_gwpar_{int(time.time())}"
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        url = env["TROVE_DATABASE_URL"] = with_search_path(pg_url, schema, "public")
    home = make_home(context_length=WINDOW, **env)
    steps = [{"parallel": [{"seq": [{"chat": c, "text": text(c, i)} for i in range(TURNS)]} for c in CHATS]}]
    start = len(fake_llm.requests())
    fake_llm.hold_summaries.set()
    both_held = False
    proc = home.start_driver({"chats": CHATS, "state": str(home.root / "gw-state.json"), "steps": steps},
                             "gw-parallel", script=GATEWAY_DRIVER)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            held = aux_requests(fake_llm.requests()[start:])
            if all(any(_summary_from(b, c) for b in held) for c in CHATS):
                both_held = True
                break
            time.sleep(0.1)
    finally:
        fake_llm.hold_summaries.clear()
    stdout, stderr = proc.communicate(timeout=300)
    result = json.loads((home.root / "gw-parallel.result.json").read_text(encoding="utf-8"))
    assert proc.returncode == 0 and "error" not in result, (result.get("error"), stderr[-3000:])
    yield {"home": home, "result": result, "both_held": both_held, "requests": fake_llm.requests()[start:],
           "stderr": stderr, "url": url}
    if schema:
        drop_schema(request.getfixturevalue("pg_url"), schema)


def _turns(parallel: dict[str, Any], chat: str) -> list[dict[str, Any]]:
    seqs = parallel["result"]["steps"][0]["parallel"]
    return [s for seq in seqs for s in seq["seq"] if s["step"]["chat"] == chat]


def test_both_chats_were_compacting_at_the_same_time(parallel):
    assert parallel["both_held"], "the two chats' summary requests were never in flight together"
    for chat in CHATS:
        turns = _turns(parallel, chat)
        assert len(turns) == TURNS and all("error" not in t for t in turns)
        assert max(t["compression_count"] for t in turns) >= 1, chat


def test_each_chats_summaries_cover_only_its_own_rows(parallel):
    sessions = {chat: _turns(parallel, chat)[0]["session_id"] for chat in CHATS}
    assert len(set(sessions.values())) == 2
    for chat, sid in sessions.items():
        nodes = rows(parallel, "SELECT COUNT(*) FROM summary_nodes WHERE session_id = ?", sid)[0][0]
        assert nodes >= 1, chat
        covered = rows(parallel, "SELECT DISTINCT m.session_id FROM node_messages nm JOIN messages m"
                                 " ON m.store_id = nm.store_id JOIN summary_nodes n ON n.node_id = nm.node_id"
                                 " WHERE n.session_id = ?", sid)
        assert covered == [(sid,)], (chat, covered)
        summaries = [b for b in aux_requests(parallel["requests"]) if _summary_from(b, chat)]
        other = next(c for c in CHATS if c != chat)
        assert summaries and not [b for b in summaries if _summary_from(b, other)], chat


def test_the_two_chats_built_the_same_summary_dag_as_their_inputs_are_alike(parallel):
    # Both chats send the same number of turns of the same size: whichever ran its compaction first,
    # neither lost summary calls, nodes or levels to the other.
    shapes = [rows(parallel, "SELECT level, depth, COUNT(*) FROM summary_nodes WHERE session_id = ? GROUP BY 1, 2"
                             " ORDER BY 1, 2", _turns(parallel, chat)[0]["session_id"]) for chat in CHATS]
    assert shapes[0] == shapes[1], shapes
    assert any(level == "normal" for level, _, _ in shapes[0]), shapes


def test_every_message_is_stored_once_and_no_lock_error_was_logged(parallel):
    for chat in CHATS:
        found = counts(parallel, _turns(parallel, chat)[0]["session_id"])
        assert [found.get(("user", text(chat, i))) for i in range(TURNS)] == [1] * TURNS, chat
        assert all(n == 1 for (role, _), n in found.items() if role == "user")
    logs = parallel["home"].host_logs() + parallel["stderr"] + "\n".join(parallel["result"]["warnings"])
    for bad in ("database is locked", "falling back", "Traceback", "storage error"):
        assert bad not in logs, bad


def test_no_request_passes_the_window(parallel):
    bodies = chat_requests(parallel["requests"])
    assert bodies
    for body in bodies:
        tools = len(json.dumps(body.get("tools") or [])) // 4
        assert request_tokens(body) + tools < WINDOW, (request_tokens(body), tools)
