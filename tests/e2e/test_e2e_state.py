"""Remembered state under the real host: a fact changes during the conversation and
``trove_query_state`` answers with the newest value, both refs, the old one superseded.

With ``TROVE_ASSERTIONS_ENABLED`` on, the user says "my editor is vim" and later "I switched my
editor to helix"; the last turn makes the fake model call ``trove_query_state``. Extraction goes
through the plugin's own path: the host's auxiliary client carries the extraction prompt to the
fake server, whose answer is read from the messages that prompt showed it (``extract_assertions``);
the plugin verifies each quote against the stored row before keeping it.
"""
from __future__ import annotations

import json
from typing import Any

import pytest

from hermes_trove.state import contract

from .fake_llm import EXTRACTION_MARKER, decide, extract_assertions
from .harness import aux_requests, chat_requests, query

OLD_FACT = "For the record: my editor is vim, for everything."
FILLER = "Unrelated: the build on main is green again."
NEW_FACT = "Update: I switched my editor to helix."
ARGS = json.dumps({"subject_key": "user:self", "predicate_key": "prefers_editor"})
QUESTION = f"which editor do I use now? <<tool:trove_query_state {ARGS}>>"


@pytest.fixture(scope="module")
def state_run(make_home, fake_llm) -> dict[str, Any]:
    home = make_home(TROVE_ASSERTIONS_ENABLED="true")
    start = len(fake_llm.requests())
    result = home.run_driver({"turns": [OLD_FACT, FILLER, NEW_FACT, QUESTION], "max_iterations": 4}, "state",
                             timeout=600)
    return {"home": home, "result": result, "requests": fake_llm.requests()[start:]}


def test_the_fake_extractor_reads_only_user_messages_it_was_shown():
    assert EXTRACTION_MARKER == contract.MARKER
    prompt = contract.PROMPT + ("<messages>\n--- message store_id=7 role=user ---\nso my editor is vim\n"
                                "--- message store_id=8 role=assistant ---\nmy editor is emacs\n</messages>")
    assert extract_assertions(prompt) == {"assertions": [
        {"store_id": 7, "quote": "my editor is vim", "subject": "user:self", "predicate": "prefers_editor",
         "value": "vim", "kind": "preference", "polarity": "positive", "confidence": 0.9}]}
    answer = decide({"messages": [{"role": "user", "content": prompt}]}, 1)
    assert json.loads(answer["text"])["assertions"][0]["store_id"] == 7
    assert decide({"messages": [{"role": "user", "content": "summarise"}]}, 2)["text"].startswith("FAKE-SUMMARY")


def _query_result(run: dict[str, Any]) -> dict[str, Any]:
    for body in chat_requests(run["requests"]):
        calls = [c for m in body["messages"] if m.get("role") == "assistant" for c in m.get("tool_calls") or []
                 if (c.get("function") or {}).get("name") == "trove_query_state"]
        if calls:
            found = [m for m in body["messages"] if m.get("role") == "tool" and m.get("tool_call_id") == calls[0]["id"]]
            assert len(found) == 1
            return json.loads(found[0]["content"])
    raise AssertionError("the fake model never called trove_query_state")


def test_the_host_offers_trove_query_state(state_run):
    assert state_run["result"]["engine_name"] == "trove"
    assert "trove_query_state" in state_run["result"]["tools"]


def test_extraction_went_through_the_hosts_auxiliary_client(state_run):
    prompts = [m["content"] for body in aux_requests(state_run["requests"]) for m in body.get("messages") or []
               if EXTRACTION_MARKER in str(m.get("content"))]
    assert prompts, "no extraction request reached the model server"
    shown = "\n".join(prompts)
    assert OLD_FACT in shown and NEW_FACT in shown
    db = state_run["home"].db_path
    rows = query(db, "SELECT value_text, quote, speaker_role, extractor FROM assertions ORDER BY observed_at")
    assert rows == [("vim", "my editor is vim", "user", contract.VERSION),
                    ("helix", "my editor to helix", "user", contract.VERSION)]
    batches = query(db, "SELECT COALESCE(SUM(model_calls), 0), COALESCE(SUM(stored), 0) FROM assertion_batches"
                        " WHERE outcome = 'ok'")
    assert batches[0][0] >= 1 and batches[0][1] == 2


def test_query_state_returns_the_newest_value_with_both_refs(state_run):
    payload = _query_result(state_run)
    assert payload["status"] == "ok", payload
    items = payload["assertions"]
    assert [i["value_text"] for i in items] == ["helix", "vim"]
    new, old = items
    assert new["active"] is True and old["active"] is False
    assert payload["active_assertion_ids"] == [new["assertion_id"]]
    assert payload["conflict_assertion_ids"] == []
    assert [(r["from"], r["to"]) for r in payload["relations"] if r["relation"] == "supersedes"] == \
        [(new["assertion_id"], old["assertion_id"])]
    db = state_run["home"].db_path
    for it, text in ((new, NEW_FACT), (old, OLD_FACT)):
        ref = it["source_ref"]
        assert ref["ref"] == f"trove:{ref['store_id']}:{ref['span_start']}-{ref['span_end']}"
        stored = query(db, "SELECT role, content FROM messages WHERE store_id = ?", (ref["store_id"],))
        assert stored == [("user", text)]
        assert text[ref["span_start"]:ref["span_end"]] == ref["quote"]
    final = state_run["result"]["turns"][-1]["final"]
    assert final.startswith("TOOL-RESULT-SEEN")  # the model read the result


def test_the_state_run_touches_only_loopback(state_run):
    assert state_run["home"].guarded_processes
    assert state_run["home"].netlog.read_text(encoding="utf-8") == ""
