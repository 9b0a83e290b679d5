"""Recall tools over state built by a real compaction (fake summarizer), then across /new."""
from __future__ import annotations

import json
import random

import pytest
from conftest import assistant, make_config, make_engine, user

from hermes_trove.runtime import build_runtime
from hermes_trove.tools import dispatch

BACKENDS = ("sqlite", "postgresql")  # every test here runs on the file and on a server

CANARY = "ORCHID-4417"


def call(engine, name, **args):
    return json.loads(dispatch(engine.tool_context(), name, args))


def summarizer(messages, model, timeout_s, max_tokens):
    return "Summary: earlier turns discussed filler topics and settings. Expand for exact detail."


def lorem(rng, n):
    words = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike".split()
    return " ".join(rng.choice(words) for _ in range(n))


@pytest.fixture
def compacted(tmp_path):
    rt = build_runtime(make_config(tmp_path, fresh_tail_count=4, leaf_chunk_tokens=1000,
                                   condensation_fanin=2, new_session_retain_depth=-1))
    eng = make_engine(rt, summarizer, session="first", context_length=64000)
    rng = random.Random(3)
    msgs = [user(f"Remember this: the launch code is {CANARY}."), assistant("Noted, I will keep it.")]
    for i in range(80):
        msgs += [user(f"question {i}: " + lorem(rng, 120)), assistant(f"answer {i}: " + lorem(rng, 160))]
    out = eng.compress(msgs, current_tokens=60000, force=True)
    assert len(out) < len(msgs), "compaction made no progress"
    return eng, msgs, out


def drill(engine, node_id, needle, budget=200):
    """Follow trove_expand from a node down to the raw message containing ``needle``."""
    pending = [node_id]
    while pending and budget:
        budget -= 1
        nid = pending.pop(0)
        args = {"node_id": nid, "max_tokens": 16000}
        while True:
            out = call(engine, "trove_expand", **args)
            for item in out["expanded"]:
                if out["source_type"] == "messages" and needle in item.get("content", ""):
                    return item
                if out["source_type"] == "nodes":
                    pending.append(item["node_id"])
            if not out["pagination"]["has_more"]:
                break
            args = {"max_tokens": 16000, **out["expand_args"]}
    return None


def test_grep_finds_early_detail_after_it_was_compacted_away(compacted):
    eng, msgs, out = compacted
    assert not any(CANARY in str(m.get("content")) for m in out)
    res = call(eng, "trove_grep", query=f"what was the launch code {CANARY}?")
    top = res["results"][0]
    assert top["type"] == "message" and CANARY in top["snippet"].replace(">>>", "").replace("<<<", "")


def test_describe_then_expand_leads_from_the_frontier_to_the_raw_message(compacted):
    eng, _, _ = compacted
    overview = call(eng, "trove_describe")
    assert overview["depths"]["d0"]["count"] >= 1
    found = None
    for nid in overview["frontier_node_ids"]:
        found = found or drill(eng, nid, CANARY)
    assert found is not None and found["from_current_session"] is True


def test_expand_query_answers_with_refs_after_compaction(compacted):
    eng, _, _ = compacted
    eng = make_engine(eng.runtime, lambda m, mo, t, mt: f"The code is {CANARY}.", session="first")
    res = call(eng, "trove_expand_query", prompt="What is the launch code?", query="launch code")
    assert res["answer"] == f"The code is {CANARY}."
    assert res["store_ids"] and not res.get("degraded")


def test_after_new_the_carried_summaries_still_expand_to_the_old_raw_messages(compacted):
    eng, msgs, out = compacted
    old = eng.session_id
    eng.on_session_end(old, out)
    eng.on_session_reset()
    eng.bind_session_state(None, "second")
    assert eng.session_id == "second"
    overview = call(eng, "trove_describe")
    carried = [n for d in overview["depths"].values() for n in d["nodes"] if n["carried"]]
    assert carried, overview
    found = None
    for nid in overview["frontier_node_ids"]:
        found = found or drill(eng, nid, CANARY)
    assert found is not None and found["from_current_session"] is False and found["session_id"] == old
    # the new session has no raw rows of its own yet; archive search still reaches the old one
    assert call(eng, "trove_grep", query=CANARY)["results"] == [] or all(
        h["type"] == "summary" for h in call(eng, "trove_grep", query=CANARY)["results"])
    archive = call(eng, "trove_grep", query=CANARY, session_scope="all")
    hit = archive["results"][0]
    assert hit["session_id"] == old and hit["from_current_session"] is False
    raw = call(eng, "trove_expand", store_id=hit["store_id"], include_exact_ref=True)
    assert CANARY in raw["content"] and raw["exact_ref"].startswith(f"trove:{hit['store_id']}:0-")
    page = call(eng, "trove_load_session", session_id=old, limit=2)
    assert CANARY in page["messages"][0]["content"] and page["has_more"] is True


def test_summaries_beneath_carried_nodes_are_searchable_after_new(tmp_path):
    from conftest import make_config

    from hermes_trove.runtime import build_runtime
    from hermes_trove.store import SessionKey

    rt = build_runtime(make_config(tmp_path))
    ids = rt.store.append(SessionKey("old"), [{"role": "user", "content": "x"}])
    leaf = rt.dag.add_leaf("old", "the quokka migration was approved", ids, token_count=5, source_token_count=5,
                           earliest_at=1.0, latest_at=2.0)
    parent = rt.dag.add_condensed("old", 1, "infrastructure decisions", [leaf], token_count=3, source_token_count=5,
                                  earliest_at=1.0, latest_at=2.0)
    rt.dag.carry_over("old", "new", 1)
    from hermes_trove.retrieval.query import build_match

    hits = rt.dag.search(build_match("quokka").expression, "new")
    assert [h[0].node_id for h in hits] == [leaf]
    assert rt.dag.search(build_match("quokka").expression, "unrelated") == []
    assert parent in [n.node_id for n in rt.dag.frontier("new")]
