"""The real Hermes 0.19.0 loop (Python API) with hermes-trove installed as a directory plugin.

One scratch home, one conversation: six turns in a first host process (the fake model calls
the host's ``todo`` tool in turn 2 and ``trove_grep`` in turn 4), then two more turns of the
same session in a second host process that resumes from the saved transcript.
"""
from __future__ import annotations

import json
from typing import Any

import pytest

from .harness import FALLBACK_WARNING, chat_requests, query, tool_names

TODO_ARGS = json.dumps({"todos": [{"id": "1", "content": "water the ferns", "status": "pending"}]})
GREP_ARGS = json.dumps({"query": "zebra17"})
FIRST_TURNS = [
    "turn 1: remember the code word zebra17 for later",
    f"turn 2: plan the chores <<tool:todo {TODO_ARGS}>>",
    "turn 3: the weather is mild today",
    f"turn 4: what was the code word? <<tool:trove_grep {GREP_ARGS}>>",
    "turn 5: thanks, noted",
    "turn 6: one more plain message",
]
RESUMED_TURNS = ["turn 7: back again after a restart", "turn 8: last words"]


@pytest.fixture(scope="module")
def conversation(make_home, fake_llm) -> dict[str, Any]:
    home = make_home()
    start = len(fake_llm.requests())
    history = str(home.root / "history.json")
    first = home.run_driver({"turns": FIRST_TURNS, "history_out": history}, "first")
    after_first = _rows(home.db_path, first["session_id"])
    mid = len(fake_llm.requests())
    second = home.run_driver({"turns": RESUMED_TURNS, "session_id": first["session_id"],
                              "history_in": history, "history_out": history}, "resumed")
    with open(history, encoding="utf-8") as fh:
        final_history = json.load(fh)
    return {"home": home, "first": first, "second": second, "after_first": after_first,
            "history": final_history, "first_requests": fake_llm.requests()[start:mid],
            "requests": fake_llm.requests()[start:]}


def _rows(db_path, session_id: str) -> list[tuple[Any, ...]]:
    return query(db_path, "SELECT role, content, tool_call_id, tool_calls FROM messages WHERE session_id = ? "
                          "ORDER BY store_id", (session_id,))


def _identity(role: Any, content: Any, tool_call_id: Any, tool_calls: Any) -> tuple[str, str, str, str]:
    """What tells two transcript messages apart: role, text, and the tool-call ids they carry."""
    if isinstance(tool_calls, str) and tool_calls:
        try:
            tool_calls = json.loads(tool_calls)
        except ValueError:
            pass
    ids = ",".join(str(c.get("id", "")) for c in tool_calls or [] if isinstance(c, dict))
    text = content if isinstance(content, str) else json.dumps(content) if content else ""
    return str(role), text, str(tool_call_id or ""), ids


def _counts(rows: list[tuple[Any, ...]]) -> dict[tuple[str, str, str, str], int]:
    counts: dict[tuple[str, str, str, str], int] = {}
    for row in rows:
        key = _identity(*row)
        counts[key] = counts.get(key, 0) + 1
    return counts


def _history_identities(history: list[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    return [_identity(m.get("role"), m.get("content"), m.get("tool_call_id"), m.get("tool_calls"))
            for m in history if m.get("role") != "system"]


def test_the_host_selects_the_trove_engine_from_the_directory_plugin(conversation):
    for run in (conversation["first"], conversation["second"]):
        assert run["engine_name"] == "trove"
        assert run["engine_class"].endswith(".engine.TroveEngine")
        assert run["plugin_source"].startswith("user:"), run["plugin_source"]
        assert run["context_length"] == 128000
        assert not [w for w in run["warnings"] if FALLBACK_WARNING in w], run["warnings"]
        assert FALLBACK_WARNING not in run["stderr"]
    assert FALLBACK_WARNING not in conversation["home"].host_logs()


def test_the_resumed_run_keeps_the_same_session(conversation):
    first, second = conversation["first"], conversation["second"]
    assert second["session_id"] == first["session_id"]
    assert [t["session_id"] for t in second["turns"]] == [first["session_id"]] * len(RESUMED_TURNS)


def test_the_fake_model_tool_call_ran_in_the_host(conversation):
    tool_messages = [m for m in conversation["history"] if m.get("role") == "tool"]
    todo_results = [m for m in tool_messages if "water the ferns" in str(m.get("content"))]
    assert todo_results, tool_messages


def test_every_message_is_stored_exactly_once_after_the_first_run(conversation):
    first_run_history = _history_identities(conversation["history"])[:_first_run_length(conversation)]
    counts = _counts(conversation["after_first"])
    missing = [m for m in first_run_history if counts.get(m, 0) == 0]
    assert not missing, missing
    duplicated = {k: n for k, n in counts.items() if n != 1}
    assert not duplicated, duplicated
    assert len(conversation["after_first"]) == len(first_run_history)


def test_every_message_is_stored_exactly_once_after_resuming_the_session(conversation):
    rows = _rows(conversation["home"].db_path, conversation["first"]["session_id"])
    expected = _history_identities(conversation["history"])
    counts = _counts(rows)
    assert sorted(counts) == sorted(set(expected))
    assert all(n == 1 for n in counts.values()), {k: n for k, n in counts.items() if n != 1}
    assert len(rows) == len(expected)
    assert [r[1] for r in rows if r[0] == "user"] == FIRST_TURNS + RESUMED_TURNS


def test_nothing_reached_the_network_beyond_loopback(conversation):
    home = conversation["home"]
    assert len(home.guarded_processes) >= 2  # both host runs had the loopback guard installed
    assert home.netlog.read_text(encoding="utf-8") == ""


def test_every_main_request_offers_the_trove_tools(conversation):
    bodies = chat_requests(conversation["requests"])
    assert len(bodies) >= len(FIRST_TURNS) + len(RESUMED_TURNS)
    for body in bodies:
        names = tool_names(body)
        assert "trove_grep" in names, names
        assert "todo" in names
        assert len(names) == len(set(names))


def test_a_model_call_to_trove_grep_reaches_the_engine_and_its_json_comes_back(conversation):
    bodies = chat_requests(conversation["first_requests"])
    calls = [(i, c) for i, b in enumerate(bodies) for m in b["messages"] if m.get("role") == "assistant"
             for c in m.get("tool_calls") or [] if c["function"]["name"] == "trove_grep"]
    assert calls, "the fake model never called trove_grep (was the schema offered?)"
    index, call = calls[0]
    results = [m for m in bodies[index]["messages"] if m.get("role") == "tool" and m.get("tool_call_id") == call["id"]]
    assert len(results) == 1
    payload = json.loads(results[0]["content"])  # the engine answered with JSON, not host error text
    assert isinstance(payload, dict)
    assert "error" not in payload, payload
    assert "zebra17" in results[0]["content"]
    turn4 = conversation["first"]["turns"][3]["final"]
    assert turn4.startswith("TOOL-RESULT-SEEN")


def _first_run_length(conversation: dict[str, Any]) -> int:
    return conversation["first"]["turns"][-1]["messages"]
