"""The host's provider fallback, mid-session, onto a model with a much smaller window, and back.

The primary ``fake-model`` has a 128K window; the fallback chain holds ``fake-model-small``,
whose 32K window comes from ``custom_providers`` in config.yaml. Five turns of about 5,000
tokens each run on the primary (nothing compacts). The next two turns carry the fake server's
down marker: the primary answers them with HTTP 503 (overloaded), the host retries, activates the
fallback and hands its window to the engine through ``update_model``. The fallback refuses any
request past its 32K, as a provider does. The turns after that reach the primary again (the host
restores it at the start of each turn), and ``trove_grep`` still finds the first turn.

Then a primary that answers HTTP 429: the host falls back at once, to a 16K window, and stays
there for its 60-second rate-limit cooldown (the turns after the failing one too). And forty
short turns before the same 429, so the backlog trove must summarise on the 16K fallback is larger
than one default leaf chunk: every summary request must fit the fallback's window too.
"""
from __future__ import annotations

import json
from typing import Any

import pytest

from .fake_llm import DOWN_MARKER, estimate_prompt_tokens
from .harness import FALLBACK_WARNING, aux_requests, chat_requests, content_counts, query

BIG, SMALL = 128000, 32000
PRIMARY, FALLBACK = "fake-model", "fake-model-small"
TURN_CHARS = 20000  # about 5,000 tokens
WORDS = ("amber", "basalt", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper")
GREP = json.dumps({"query": "KV-7731"})


def turn_text(i: int, marker: str = "") -> str:
    head = f"fallback turn {i:02d}: {marker}" + ("the gate code is KV-7731. " if i == 1 else "")
    body = " ".join(f"{WORDS[(i + k) % len(WORDS)]}{k % 83}" for k in range(TURN_CHARS // 7))
    return (head + body)[:TURN_CHARS].rstrip()  # the host strips a trailing space off what it sends


ON_PRIMARY = [turn_text(i) for i in range(1, 6)]
WHILE_DOWN = [turn_text(i, DOWN_MARKER + " ") for i in range(6, 8)]
BACK = ["back on the primary: short question", f"what was the gate code? <<tool:trove_grep {GREP}>>"]


def run_with_fallback(make_home, fake_llm, window: int, fault: str, turns: list[str], label: str) -> dict[str, Any]:
    """A home whose primary answers with HTTP ``fault`` while the newest message carries DOWN_MARKER, and
    whose ``fallback_model`` chain names FALLBACK with a ``window`` from config.yaml ``custom_providers``
    (the fake server refuses FALLBACK requests past it)."""
    home = make_home(context_length=BIG)
    with (home.home / "config.yaml").open("a", encoding="utf-8") as fh:
        fh.write(f"custom_providers:\n  - name: fake\n    base_url: {home.base_url}\n    api_key: sk-fake\n"
                 f"    models:\n      {FALLBACK}:\n        context_length: {window}\n")
    chain = [{"provider": "custom", "model": FALLBACK, "base_url": home.base_url, "api_key": "sk-fake"}]
    start = len(fake_llm.requests())
    fake_llm.model_faults[PRIMARY] = fault
    fake_llm.model_limits[FALLBACK] = window
    try:
        result = home.run_driver({"turns": turns, "fallback_model": chain, "max_iterations": 4}, label, timeout=600)
    finally:
        fake_llm.model_faults.clear()
        fake_llm.model_limits.clear()
    return {"home": home, "result": result, "requests": fake_llm.requests()[start:]}


@pytest.fixture(scope="module")
def fell_back(make_home, fake_llm) -> dict[str, Any]:
    return run_with_fallback(make_home, fake_llm, SMALL, "503", ON_PRIMARY + WHILE_DOWN + BACK, "fallback")


def _main(requests: list[dict[str, Any]], model: str) -> list[dict[str, Any]]:
    return [b for b in chat_requests(requests) if b.get("model") == model]


def test_the_fallback_window_reached_trove_and_the_primary_window_came_back(fell_back):
    result = fell_back["result"]
    assert result["engine_name"] == "trove" and not [w for w in result["warnings"] if FALLBACK_WARNING in w]
    turns = result["turns"]
    assert [t["model"] for t in turns] == [PRIMARY] * 5 + [FALLBACK] * 2 + [PRIMARY] * 2, [t["model"] for t in turns]
    assert {t["context_length"] for t in turns[5:7]} == {SMALL}
    assert max(t["threshold_tokens"] for t in turns[5:7]) < SMALL
    assert {(t["context_length"], t["threshold_tokens"]) for t in turns[7:]} == {(BIG, turns[0]["threshold_tokens"])}
    assert turns[4]["compression_count"] == 0  # nothing compacted on the big window


def test_every_fallback_request_fits_its_window_after_at_most_one_refusal(fell_back):
    sizes = [estimate_prompt_tokens(b) for b in _main(fell_back["requests"], FALLBACK)]
    assert sizes, "the fallback model was never asked"
    refused = [s for s in sizes if s > SMALL]
    # The host re-sends the request the primary failed on, unchanged, to the fallback: that one
    # request may be past the new window; after the refusal trove compacts and every request fits.
    assert len(refused) <= 1 and refused == sizes[:len(refused)], sizes
    assert max(sizes[len(refused):]) < SMALL, sizes
    if refused:  # the very request the primary failed on (the user's turn 6), not one trove assembled
        primary = [b for b in _main(fell_back["requests"], PRIMARY)
                   if b["messages"][-1].get("content") == WHILE_DOWN[0]]
        # the same messages; only the system prompt's model identity now names the fallback
        sent = estimate_prompt_tokens(primary[0])
        assert abs(sent - refused[0]) <= 8, (sent, refused)
    assert fell_back["result"]["turns"][6]["compression_count"] >= 1


def test_each_turn_is_stored_once_and_the_frontier_is_sound(fell_back):
    home, session = fell_back["home"], fell_back["result"]["session_id"]
    counts = content_counts(home.db_path, session)
    assert [counts.get(("user", t)) for t in ON_PRIMARY + WHILE_DOWN + BACK] == [1] * 9
    assert all(n == 1 for (role, _), n in counts.items() if role == "user"), counts
    sessions = query(home.db_path, "SELECT COUNT(*) FROM sessions")[0][0]
    assert sessions == 1  # the fallback did not start a session of its own
    frontier = query(home.db_path, "SELECT f.node_id FROM session_frontier f JOIN summary_nodes n"
                                   " ON n.node_id = f.node_id WHERE f.session_id = ? AND n.session_id = ?",
                     (session, session))
    assert frontier
    foreign = query(home.db_path, "SELECT COUNT(*) FROM node_messages nm JOIN messages m ON m.store_id = nm.store_id"
                                  " JOIN summary_nodes n ON n.node_id = nm.node_id WHERE m.session_id != n.session_id")
    assert foreign[0][0] == 0
    done = home.hermes("trove", "doctor", "--json")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert [c for c in json.loads(done.stdout)["checks"] if c["status"] == "fail"] == []


def test_back_on_the_primary_grep_finds_the_first_turn(fell_back):
    primary_after = _main(fell_back["requests"], PRIMARY)[-2:]
    assert all(DOWN_MARKER not in json.dumps(b["messages"][-1:]) for b in primary_after)
    tool_results = [m for b in primary_after for m in b["messages"] if m.get("role") == "tool"]
    assert tool_results, "trove_grep never ran"
    found = json.loads(tool_results[-1]["content"])
    first_id = query(fell_back["home"].db_path, "SELECT MIN(store_id) FROM messages WHERE session_id = ?",
                     (fell_back["result"]["session_id"],))[0][0]
    assert first_id in [r.get("store_id") for r in found["results"]], found["results"]



# -- rate limited (HTTP 429): the host stays on a 16K fallback for its cooldown ------------------

TINY = 16000
LIMITED = [turn_text(i, DOWN_MARKER + " ") if i == 5 else turn_text(i) for i in range(1, 8)]


@pytest.fixture(scope="module")
def rate_limited(make_home, fake_llm) -> dict[str, Any]:
    return run_with_fallback(make_home, fake_llm, TINY, "429", LIMITED, "limited")


def test_after_a_429_every_turn_of_the_cooldown_fits_the_16k_fallback(rate_limited):
    turns = rate_limited["result"]["turns"]
    assert [t["model"] for t in turns] == [PRIMARY] * 4 + [FALLBACK] * 3, [t["model"] for t in turns]
    assert {t["context_length"] for t in turns[4:]} == {TINY}
    sizes = [estimate_prompt_tokens(b) for b in _main(rate_limited["requests"], FALLBACK)]
    refused = [s for s in sizes if s > TINY]
    assert len(refused) <= 1 and refused == sizes[:len(refused)], sizes
    assert sizes[len(refused):] and max(sizes[len(refused):]) < TINY, sizes
    counts = content_counts(rate_limited["home"].db_path, rate_limited["result"]["session_id"])
    assert [counts.get(("user", t)) for t in LIMITED] == [1] * len(LIMITED)


# -- many short turns, then a fallback whose window is smaller than one default leaf chunk ------

SHORT = [f"short turn {i:02d}: " + " ".join(f"{WORDS[(i + k) % len(WORDS)]}{k % 71}" for k in range(340))
         for i in range(1, 41)]  # about 650 tokens each, 26,000 in all: no compaction on the primary
AFTER_SHORT = [f"short turn 41: {DOWN_MARKER} the primary is down now", "short turn 42: still on the fallback"]


@pytest.fixture(scope="module")
def short_backlog(make_home, fake_llm) -> dict[str, Any]:
    return run_with_fallback(make_home, fake_llm, TINY, "429", SHORT + AFTER_SHORT, "short-backlog")


def test_summary_requests_fit_the_small_fallback_window(short_backlog):
    summaries = aux_requests(short_backlog["requests"])
    assert summaries and {b.get("model") for b in summaries} == {FALLBACK}
    sizes = [estimate_prompt_tokens(b) for b in summaries]
    assert max(sizes) < TINY, sizes
    db, session = short_backlog["home"].db_path, short_backlog["result"]["session_id"]
    levels = [lv for (lv,) in query(db, "SELECT level FROM summary_nodes WHERE session_id = ? AND depth = 0",
                                    (session,))]
    assert levels and "deterministic" not in levels, levels
    main = [estimate_prompt_tokens(b) for b in _main(short_backlog["requests"], FALLBACK)]
    assert main[1:] and max(main[1:]) < TINY, main  # after the one request the host re-sent
    counts = content_counts(db, session)
    assert [counts.get(("user", t)) for t in SHORT + AFTER_SHORT] == [1] * (len(SHORT) + 2)
