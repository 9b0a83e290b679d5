from __future__ import annotations

import dataclasses
import json
import sys
import threading
from types import SimpleNamespace

import pytest
from conftest import assistant, tool_call, tool_result, user

from hermes_trove.engine import TroveEngine
from hermes_trove.models import host_complete
from hermes_trove.store import SessionKey
from hermes_trove.tools import dispatch

BACKENDS = ("sqlite", "postgresql")  # every test here runs on the file and on a server

KEY = SessionKey("s1", platform="cli")


def call(engine, name, **args):
    return json.loads(dispatch(engine.tool_context(), name, args))


def leaf(rt, session, ids, text="summary", **kw):
    return rt.dag.add_leaf(session, text, ids, token_count=len(text) // 4 + 1, source_token_count=100,
                           earliest_at=kw.get("earliest_at", 1_700_000_000.0),
                           latest_at=kw.get("latest_at", 1_700_000_600.0))


@pytest.fixture
def tree(engine):
    """Two leaves of three messages each under one depth-1 node."""
    rt = engine.runtime
    ids = rt.store.append(KEY, [user(f"message number {i} about topic {i}") for i in range(6)])
    a = leaf(rt, "s1", ids[:3], "first three messages")
    b = leaf(rt, "s1", ids[3:], "last three messages")
    top = rt.dag.add_condensed("s1", 1, "all six messages", [a, b], token_count=5, source_token_count=12,
                               earliest_at=1.0, latest_at=2.0)
    return {"ids": ids, "a": a, "b": b, "top": top}


# -- trove_describe -----------------------------------------------------------------
def test_describe_without_arguments_gives_the_session_dag_overview(engine, tree):
    out = call(engine, "trove_describe")
    assert out["session_id"] == "s1" and out["store_message_count"] == 6
    assert out["depths"]["d0"]["count"] == 2 and out["depths"]["d1"]["count"] == 1
    assert out["frontier_node_ids"] == [tree["top"]]
    assert [n["node_id"] for n in out["depths"]["d0"]["nodes"]] == [tree["a"], tree["b"]]


def test_describe_samples_at_most_twenty_nodes_per_depth(engine):
    rt = engine.runtime
    ids = rt.store.append(KEY, [user(f"m{i}") for i in range(30)])
    for i in ids:
        leaf(rt, "s1", [i])
    d0 = call(engine, "trove_describe")["depths"]["d0"]
    assert d0["count"] == 30 and len(d0["nodes"]) == 20 and d0["more_nodes"] == 10


def test_describe_node_lists_metadata_and_children_without_content(engine, tree):
    out = call(engine, "trove_describe", node_id=tree["top"])
    assert out["depth"] == 1 and out["num_sources"] == 2 and out["source_type"] == "nodes"
    assert out["descendant_message_count"] == 6
    assert [c["node_id"] for c in out["children"]] == [tree["a"], tree["b"]]
    leaf_out = call(engine, "trove_describe", node_id=tree["a"])
    assert leaf_out["parent_node_id"] == tree["top"]
    assert [c["store_id"] for c in leaf_out["children"]] == tree["ids"][:3]
    assert all("content" not in c and c["content_chars"] == 30 for c in leaf_out["children"])
    assert "message number" not in json.dumps(leaf_out)


def test_describe_refuses_a_node_of_another_session(engine):
    rt = engine.runtime
    ids = rt.store.append(SessionKey("other"), [user("secret elsewhere")])
    foreign = leaf(rt, "other", ids)
    assert "not visible in the current session" in call(engine, "trove_describe", node_id=foreign)["error"]
    assert "not visible" in call(engine, "trove_describe", node_id=99999)["error"]


def test_describe_rejects_both_selectors_at_once(engine, tree):
    out = call(engine, "trove_describe", node_id=tree["a"], externalized_ref="trove-x.json")
    assert "not both" in out["error"]


def test_describe_bad_externalized_ref_is_a_clear_error(engine):
    out = call(engine, "trove_describe", externalized_ref="../../etc/passwd")
    assert out["error"].startswith("externalized")


# -- trove_expand: node mode ----------------------------------------------------------
def test_expand_leaf_returns_its_raw_messages_in_order(engine, tree):
    out = call(engine, "trove_expand", node_id=tree["a"])
    assert out["source_type"] == "messages"
    assert [m["store_id"] for m in out["expanded"]] == tree["ids"][:3]
    assert out["expanded"][0]["content"] == "message number 0 about topic 0"
    assert out["pagination"]["has_more"] is False and out["pagination"]["total_sources"] == 3


def test_expand_condensed_node_returns_child_summaries(engine, tree):
    out = call(engine, "trove_expand", node_id=tree["top"])
    assert out["source_type"] == "nodes"
    assert [c["node_id"] for c in out["expanded"]] == [tree["a"], tree["b"]]
    assert out["expanded"][1]["content"] == "last three messages"


def test_expand_pages_sources_with_offset_and_limit(engine, tree):
    first = call(engine, "trove_expand", node_id=tree["a"], source_limit=2)
    assert [m["source_index"] for m in first["expanded"]] == [0, 1]
    assert first["pagination"]["next_source_offset"] == 2 and first["pagination"]["remaining_sources"] == 1
    rest = call(engine, "trove_expand", node_id=tree["a"], source_offset=2)
    assert [m["store_id"] for m in rest["expanded"]] == [tree["ids"][2]]
    assert rest["pagination"]["has_more"] is False


def test_expand_budget_splits_an_oversized_message_and_continues_exactly(engine):
    rt = engine.runtime
    big = "".join(f"line {i:05d} of the build log\n" for i in range(3000))
    ids = rt.store.append(KEY, [user("run the build"), tool_result("c1", big), assistant("done")])
    node = leaf(rt, "s1", ids)
    pages, args = [], {"node_id": node, "max_tokens": 1000}
    for _ in range(200):
        out = call(engine, "trove_expand", **args)
        pages.append(out)
        if not out["pagination"]["has_more"]:
            break
        args = {"node_id": node, "max_tokens": 1000, **{k: v for k, v in out["expand_args"].items() if k != "node_id"}}
    text = "".join(m["content"] for p in pages for m in p["expanded"] if m["store_id"] == ids[1])
    assert text == big
    assert [m["store_id"] for p in pages for m in p["expanded"]].count(ids[2]) == 1


def test_expand_node_page_is_bounded_by_its_rows_cap_not_the_default(engine):
    text = " ".join(f"word{i}" for i in range(3000))
    ids = engine.runtime.store.append(KEY, [user(f"{n} {text}") for n in range(8)])
    node = leaf(engine.runtime, "s1", ids)
    raw = dispatch(engine.tool_context(), "trove_expand", {"node_id": node, "max_tokens": 16000})
    out = json.loads(raw)
    assert 32000 < len(raw) <= 90000
    assert out["pagination"]["has_more"] is True and "response_truncated" not in out


def test_expand_returns_at_least_one_character_even_with_a_tiny_budget(engine):
    ids = engine.runtime.store.append(KEY, [user("x" * 500)])
    node = leaf(engine.runtime, "s1", ids)
    out = call(engine, "trove_expand", node_id=node, max_tokens=1)
    item = out["expanded"][0]
    assert item["content_returned_chars"] >= 1 and item["content_truncated"] is True
    assert item["next_content_offset"] == item["content_returned_chars"]


def test_expand_refuses_an_invisible_node(engine):
    ids = engine.runtime.store.append(SessionKey("other"), [user("elsewhere")])
    foreign = leaf(engine.runtime, "other", ids)
    assert "not visible" in call(engine, "trove_expand", node_id=foreign)["error"]


@pytest.mark.parametrize("args", [{}, {"node_id": 1, "store_id": 1}, {"store_id": 1, "externalized_ref": "x"}])
def test_expand_needs_exactly_one_selector(engine, args):
    assert "exactly one" in call(engine, "trove_expand", **args)["error"]


def test_expand_carried_node_recovers_raw_messages_of_the_previous_session(tmp_path, runtime):
    old = TroveEngine(runtime)
    old.on_session_start("old", platform="cli")
    ids = runtime.store.append(SessionKey("old", platform="cli"), [user("the vault path is /srv/vault-7"),
                                                                   assistant("stored")])
    node = leaf(runtime, "old", ids, "vault path decided")
    new = TroveEngine(runtime)
    new.on_session_start("new", platform="cli")
    assert runtime.dag.carry_over("old", "new", 0) == [node]
    out = call(new, "trove_expand", node_id=node)
    assert out["carried"] is True
    assert [m["store_id"] for m in out["expanded"]] == ids
    assert out["expanded"][0]["from_current_session"] is False
    assert out["expanded"][0]["content"] == "the vault path is /srv/vault-7"
    grep = call(new, "trove_grep", query="vault path")
    assert [h["node_id"] for h in grep["results"] if h["type"] == "summary"] == [node]


# -- trove_expand: store_id mode -------------------------------------------------------
def test_expand_store_id_reads_a_message_from_any_session(engine):
    ids = engine.runtime.store.append(SessionKey("other", platform="cli"), [user("cross-session fact")])
    out = call(engine, "trove_expand", store_id=ids[0])
    assert out["content"] == "cross-session fact" and out["from_current_session"] is False
    assert out["session_id"] == "other" and out["has_more"] is False


def test_expand_store_id_continues_oversized_content_with_content_offset(engine):
    text = "".join(chr(ord("a") + i % 26) for i in range(50000))
    ids = engine.runtime.store.append(KEY, [tool_result("c9", text)])
    got, offset = "", 0
    while True:
        out = call(engine, "trove_expand", store_id=ids[0], max_tokens=2000, content_offset=offset,
                   include_exact_ref=True)
        assert out["exact_ref"] == f"trove:{ids[0]}:{offset}-{offset + out['content_returned_chars']}"
        got += out["content"]
        if not out["has_more"]:
            break
        offset = out["next_content_offset"]
    assert got == text


def test_expand_store_id_can_read_long_tool_call_arguments(engine):
    args = json.dumps({"path": "big.txt", "content": "z" * 9000})
    ids = engine.runtime.store.append(KEY, [assistant("writing", [tool_call("c1", "write_file", args)])])
    out = call(engine, "trove_expand", store_id=ids[0])
    assert out["tool_calls_truncated"] is True and out["tool_calls_expand_args"]["part"] == "tool_calls"
    full = call(engine, "trove_expand", store_id=ids[0], part="tool_calls", max_tokens=16000)
    assert json.loads(full["content"])[0]["function"]["arguments"] == args


def test_expand_store_id_errors(engine):
    assert "no stored message" in call(engine, "trove_expand", store_id=424242)["error"]
    ids = engine.runtime.store.append(KEY, [user("short")])
    assert "past the end" in call(engine, "trove_expand", store_id=ids[0], content_offset=99)["error"]


def test_expand_max_tokens_is_clamped_and_reported(engine):
    ids = engine.runtime.store.append(KEY, [user("short")])
    out = call(engine, "trove_expand", store_id=ids[0], max_tokens=10 ** 6)
    assert out["max_tokens_clamped_from"] == 10 ** 6


# -- trove_expand_query --------------------------------------------------------------------
def fake_aux(engine, reply="The key lives in /etc/keys [store 2].", fail=None, seen=None):
    def complete(messages, model, timeout_s, max_tokens):
        if seen is not None:
            seen.append({"messages": messages, "model": model, "timeout_s": timeout_s, "max_tokens": max_tokens})
        if fail:
            raise fail
        return reply

    engine.complete = complete


def test_expand_query_answers_from_gathered_evidence_and_reports_refs(engine, tree):
    seen: list = []
    fake_aux(engine, reply="<think>hmm</think>Topic 4 was discussed [store 5].", seen=seen)
    out = call(engine, "trove_expand_query", prompt="What was said about topic 4?", query="topic 4")
    assert out["answer"] == "Topic 4 was discussed [store 5]."
    assert "degraded" not in out
    assert tree["ids"][4] in out["store_ids"]
    assert seen and "topic 4" in seen[0]["messages"][1]["content"]
    assert seen[0]["max_tokens"] == 2000 and seen[0]["timeout_s"] == 120.0


def test_expand_query_descends_from_node_ids_to_leaf_messages(engine, tree):
    seen: list = []
    fake_aux(engine, seen=seen)
    out = call(engine, "trove_expand_query", prompt="summarise", node_ids=[tree["top"]])
    assert out["node_ids"] == [tree["top"]]
    assert sorted(out["store_ids"]) == tree["ids"]
    assert "message number 5 about topic 5" in seen[0]["messages"][1]["content"]


def test_expand_query_small_context_budget_reports_truncation_and_pagination(engine, tree):
    fake_aux(engine)
    out = call(engine, "trove_expand_query", prompt="everything", node_ids=[tree["top"]], context_max_tokens=256)
    big = engine.runtime.store.append(KEY, [user("topic " + "y" * 20000)])
    leaf(engine.runtime, "s1", big, "huge topic message")
    out = call(engine, "trove_expand_query", prompt="topic?", query="topic", context_max_tokens=256)
    assert out["context_truncated"] is True
    assert out["context_pagination"] and "expand_args" in out["context_pagination"][0]


def test_expand_query_degrades_with_refs_when_no_model_is_available(engine, tree):
    out = call(engine, "trove_expand_query", prompt="What about topic 2?")
    assert out["degraded"] is True and "error" in out and out["answer"] is None
    assert out["store_ids"] or out["node_ids"]


def test_expand_query_degrades_on_timeout(engine, tree):
    import dataclasses

    engine.runtime.config = dataclasses.replace(engine.runtime.config, expansion_timeout_ms=1000)
    release = threading.Event()

    def stuck(messages, model, timeout_s, max_tokens):  # answers only once the tool has replied
        release.wait(30)
        return "too late"

    engine.complete = stuck
    try:
        out = call(engine, "trove_expand_query", prompt="topic 1?")
    finally:
        release.set()
    # the reply came while the model was still stuck; how soon: bench/bench_bounds.py (deadlines)
    assert out["degraded"] is True and "timed out" in out["error"] and out["timeout_seconds"] == 1.0


def test_expand_query_degrades_on_an_empty_answer(engine, tree):
    fake_aux(engine, reply="<think>nothing useful</think>")
    out = call(engine, "trove_expand_query", prompt="topic 1?")
    assert out["degraded"] is True and "empty answer" in out["error"]


def test_expand_query_rejects_invisible_node_ids_and_requires_a_prompt(engine, tree):
    fake_aux(engine)
    assert call(engine, "trove_expand_query")["error"] == "prompt is required"
    out = call(engine, "trove_expand_query", prompt="x", node_ids=[987654])
    assert out["rejected_node_ids"] == [987654] and out["degraded"] is True


def test_expand_query_uses_the_configured_expansion_model(engine, tree):
    engine.runtime.config = dataclasses.replace(engine.runtime.config, expansion_model="big-model")
    seen: list = []
    fake_aux(engine, seen=seen)
    call(engine, "trove_expand_query", prompt="topic 3?", max_tokens=300)
    assert seen[0]["model"] == "big-model" and seen[0]["max_tokens"] == 300


def expand_query_through_host(engine, complete, **args):
    """Call trove_expand_query with the host completion function in place of the engine's."""
    ctx = dataclasses.replace(engine.tool_context(), complete=complete)
    return json.loads(dispatch(ctx, "trove_expand_query", args))


def test_expand_query_max_tokens_reaches_the_hosts_auxiliary_client(engine, tree, monkeypatch):
    aux = pytest.importorskip("agent.auxiliary_client")
    received: list = []

    def call_llm(task=None, **kwargs):
        received.append(dict(kwargs, task=task))
        return {"text": "Topic 2 [store 3]."}

    monkeypatch.setattr(aux, "call_llm", call_llm)
    monkeypatch.setattr(aux, "extract_content_or_reasoning", lambda resp: resp["text"])
    complete = host_complete(lambda: {"model": "main"}, None, task="expand_query")
    out = expand_query_through_host(engine, complete, prompt="topic 2?", max_tokens=321)
    assert out["answer"] == "Topic 2 [store 3]."
    assert received[0]["max_tokens"] == 321 and received[0]["task"] == "expand_query"


def test_expand_query_max_tokens_reaches_the_plugin_llm_without_an_auxiliary_client(engine, tree, monkeypatch):
    monkeypatch.setitem(sys.modules, "agent.auxiliary_client", None)  # the import fails: no host client
    received: list = []

    class PluginLlm:
        def complete(self, messages, **kwargs):
            received.append(kwargs)
            return SimpleNamespace(text="Topic 2 [store 3].")

    out = expand_query_through_host(engine, host_complete(dict, PluginLlm()), prompt="topic 2?", max_tokens=77)
    assert out["answer"] == "Topic 2 [store 3]."
    assert received[0]["max_tokens"] == 77


def test_children_of_a_carried_node_are_reachable_but_unrelated_nodes_are_not(runtime):
    ids = runtime.store.append(SessionKey("old"), [user(f"old fact {i}") for i in range(4)])
    a = leaf(runtime, "old", ids[:2], "first half")
    b = leaf(runtime, "old", ids[2:], "second half")
    top = runtime.dag.add_condensed("old", 1, "both halves", [a, b], token_count=3, source_token_count=8,
                                    earliest_at=None, latest_at=None)
    stray_ids = runtime.store.append(SessionKey("stray"), [user("unrelated")])
    stray = leaf(runtime, "stray", stray_ids, "unrelated")
    eng = TroveEngine(runtime)
    eng.on_session_start("new", platform="cli")
    runtime.dag.carry_over("old", "new", 1)
    assert [c["node_id"] for c in call(eng, "trove_expand", node_id=top)["expanded"]] == [a, b]
    child = call(eng, "trove_expand", node_id=b)
    assert [m["content"] for m in child["expanded"]] == ["old fact 2", "old fact 3"]
    assert call(eng, "trove_describe", node_id=a)["depth"] == 0
    assert "not visible" in call(eng, "trove_expand", node_id=stray)["error"]
