"""Many short chats in one gateway process: what the process holds does not grow with them.

Six Telegram chats take turns for several rounds in one gateway process. After each round half the
chats send ``/compress`` (a temporary agent without the trove_* tools compacts on the chat's session), some
chats start over with ``/new`` (the agent's cleanup ends the session), some lose their cached
agent with no cleanup at all (an idle eviction: no end call ever comes), and the rest ask
``/trove status``; every new agent gets its own deep copy of the engine. The process is probed
after the first round and after the last: open descriptors on trove.db, trove's own threads, and
the per-session structures of the runtime every copy shares must not have grown with the rounds.
"""
from __future__ import annotations

from typing import Any

import pytest

from .harness import GATEWAY_DRIVER

WINDOW = 64000
CHATS = {f"c{i}": {"platform": "telegram", "user": f"70{i}", "key": f"agent:main:telegram:dm:70{i}"}
         for i in range(6)}
ROUNDS = 4


def round_steps(r: int) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = [{"chat": c, "text": f"round {r} in {c}: note the parcel count {r * 7}"}
                                   for c in CHATS]
    steps += [{"chat": c, "command": "/compress"} for i, c in enumerate(CHATS) if (i + r) % 2 == 0]
    for i, c in enumerate(CHATS):
        steps.append([{"chat": c, "command": "/new"}, {"evict": c}, {"chat": c, "command": "/trove status"}][i % 3])
    return steps


@pytest.fixture(scope="module")
def soak(make_home, fake_llm) -> dict[str, Any]:
    home = make_home(context_length=WINDOW, TROVE_ENABLE_SLASH_COMMAND="1")
    steps = round_steps(0) + [{"probe": True}]
    for r in range(1, ROUNDS):
        steps += round_steps(r)
    steps.append({"probe": True})
    out = home.run_driver({"chats": CHATS, "state": str(home.root / "gw-state.json"), "steps": steps},
                          "gw-soak", script=GATEWAY_DRIVER, timeout=900)
    errors = [s for s in out["steps"] if "error" in s]
    assert not errors, errors[0]["error"]
    probes = [s["probe"] for s in out["steps"] if "probe" in s]
    return {"first": probes[0], "last": probes[-1], "turns": [s for s in out["steps"] if "final" in s]}


def test_every_turn_ran_on_trove(soak):
    assert len(soak["turns"]) == len(CHATS) * ROUNDS
    assert {t["engine_name"] for t in soak["turns"]} == {"trove"}


def test_no_database_connection_or_thread_piles_up(soak):
    first, last = soak["first"], soak["last"]
    assert 0 < last["db_fds"] <= first["db_fds"]
    assert len(last["threads"]) <= len(first["threads"]), (first["threads"], last["threads"])
    assert last["fds"] <= first["fds"]


def test_the_shared_per_session_structures_follow_the_live_chats_not_the_rounds(soak):
    first, last = soak["first"], soak["last"]
    # a /new ends a chat's session (its binding and marks go); an evicted agent's chat goes on in the same
    # session: at most one bound session per chat, and two marks per bound session, whatever the rounds
    assert last["bound"] <= len(CHATS) and first["bound"] <= len(CHATS)
    assert last["marks"] <= 2 * last["bound"]
    assert last["offers"] <= len(CHATS) * ROUNDS  # kept past a session's end by design, bounded by count


def test_no_session_is_left_doubted(soak):
    """The gateway's /compress builds a temporary agent without the trove_* tools on the chat's session: once it
    has asked (or compacted) no session reads as having no tools, so the chat's next prompt still names them."""
    assert soak["first"]["doubted"] == [] and soak["last"]["doubted"] == [], (soak["first"], soak["last"])
