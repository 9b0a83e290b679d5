"""``trove_retrieve``: the controller's state machine (every illegal move refused), its caps,
refs accepted only when observed, persisted views and traces; and the pre-answer evidence
block, fenced so it never enters the store as user content."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest
from conftest import make_config, make_engine

from hermes_trove import hooks, tools
from hermes_trove.ingest import EVIDENCE_CLOSE, EVIDENCE_OPEN, is_synthetic
from hermes_trove.runtime import build_runtime
from hermes_trove.state import retrieve
from hermes_trove.state.assertion_store import AssertionStore
from hermes_trove.store import SessionKey
from hermes_trove.toolkit import ToolContext
from hermes_trove.tools import dispatch

BACKENDS = ("sqlite", "postgresql")

START = {"action": "start", "question": "Which city does the user live in now?",
         "identity": {"intent_type": "current_state", "subject_key": "user:self"},
         "requirements": [{"slot_id": "city", "description": "the city", "minimum_refs": 1}]}


@pytest.fixture
def runtime(tmp_path):
    rt = build_runtime(make_config(tmp_path, adaptive_retrieval_enabled=True))
    rt.store.append(SessionKey("s1"), [{"role": "user", "content": f"note {i}: the kiln batch KX{i} is ready"}
                                       for i in range(60)] + [{"role": "user", "content": "I live in Lisbon"}])
    return rt


def call(runtime, **args):
    return json.loads(dispatch(ToolContext(runtime=runtime), "trove_retrieve", args))


def test_off_by_default_it_answers_disabled_and_creates_nothing(tmp_path):
    rt = build_runtime(make_config(tmp_path))
    out = call(rt, **START)
    assert out["status"] == "disabled" and "TROVE_ADAPTIVE_RETRIEVAL_ENABLED" in out["reason"]
    assert not AssertionStore(rt.db).present()


def test_a_full_episode_searches_finishes_on_observed_refs_and_persists_its_view(runtime):
    rid = call(runtime, **START)["retrieval_id"]
    found = call(runtime, action="search", retrieval_id=rid, missing_slot="city", tool="trove_grep",
                 tool_args={"query": "Lisbon", "session_scope": "all"})
    assert found["round"] == 1 and found["observed"], found
    ref = found["observed"][0]
    assert ref["quote"] == "I live in Lisbon" and ref["ref"].startswith("trove:")
    done = call(runtime, action="finish", retrieval_id=rid, selected_refs=[ref["ref"]], resolved_slots=["city"])
    assert done["status"] == "finished" and done["evidence_view"]["selected"][0]["quote"] == "I live in Lisbon"
    assert "answer" not in done["evidence_view"]  # evidence, never prose
    st = call(runtime, action="status", retrieval_id=rid)
    assert st["status"] == "finished" and [e["action"] for e in st["trace"]] == ["start", "search", "finish"]
    assert st["evidence_view"]["slot_coverage"] == {"city": 1}


def test_every_illegal_transition_is_refused(runtime):
    assert "retrieval_id" in call(runtime, action="search", missing_slot="city", tool="trove_grep")["error"]
    assert "no retrieval episode" in call(runtime, action="finish", retrieval_id="ret_nope",
                                          selected_refs=["trove:1:0-4"])["error"]
    assert "action" in call(runtime, action="jump")["error"]
    rid = call(runtime, **START)["retrieval_id"]
    assert "does not take retrieval_id" in call(runtime, **START, retrieval_id=rid)["error"]
    call(runtime, action="abandon", retrieval_id=rid)
    for action, extra in (("search", {"missing_slot": "city", "tool": "trove_grep", "tool_args": {"query": "x"}}),
                          ("finish", {"selected_refs": ["trove:1:0-4"]}), ("abandon", {})):
        err = call(runtime, action=action, retrieval_id=rid, **extra)["error"]
        assert "illegal transition" in err and "abandoned" in err
    rid2 = call(runtime, **START)["retrieval_id"]
    g = call(runtime, action="search", retrieval_id=rid2, missing_slot="city", tool="trove_grep",
             tool_args={"query": "Lisbon", "session_scope": "all"})
    call(runtime, action="finish", retrieval_id=rid2, selected_refs=[g["observed"][0]["ref"]])
    for action in ("search", "finish", "abandon"):
        assert "finished" in call(runtime, action=action, retrieval_id=rid2)["error"]
    assert call(runtime, action="status", retrieval_id=rid2)["status"] == "finished"


def test_unknown_arguments_bad_slots_and_tools_are_rejected(runtime):
    assert "does not take" in call(runtime, **START, bogus=1)["error"]
    assert "identity" in call(runtime, **dict(START, identity={"intent_type": "x"}))["error"]
    assert "identity does not take" in call(runtime, **dict(START, identity={"intent_type": "lookup",
                                                                              "mood": "x"}))["error"]
    assert "requirements" in call(runtime, **dict(START, requirements=[]))["error"]
    assert "unique" in call(runtime, **dict(START, requirements=[{"slot_id": "a"}, {"slot_id": "a"}]))["error"]
    rid = call(runtime, **START)["retrieval_id"]
    assert "missing_slot" in call(runtime, action="search", retrieval_id=rid, missing_slot="zzz",
                                  tool="trove_grep")["error"]
    assert "tool must be" in call(runtime, action="search", retrieval_id=rid, missing_slot="city",
                                  tool="trove_doctor")["error"]
    big = {"query": "x" * 3000}
    assert "tool_args" in call(runtime, action="search", retrieval_id=rid, missing_slot="city", tool="trove_grep",
                               tool_args=big)["error"]


@pytest.mark.parametrize("value", [["city"], {"city": 1}, [], {}], ids=["list", "object", "empty-list", "empty-object"])
@pytest.mark.parametrize("argument", ["action", "missing_slot", "resolved_slots item"])
def test_a_list_or_object_where_a_name_belongs_is_refused_by_name(runtime, argument, value):
    rid = call(runtime, **START)["retrieval_id"]
    found = call(runtime, action="search", retrieval_id=rid, missing_slot="city", tool="trove_grep",
                 tool_args={"query": "Lisbon", "session_scope": "all"})
    args = {"action": "finish", "retrieval_id": rid, "selected_refs": [found["observed"][0]["ref"]],
            "resolved_slots": ["city"]}
    if argument == "action":
        args["action"] = value
    elif argument == "missing_slot":
        args = {"action": "search", "retrieval_id": rid, "missing_slot": value, "tool": "trove_grep",
                "tool_args": {"query": "Lisbon"}}
    else:
        args["resolved_slots"] = [value]
    err = call(runtime, **args)["error"]
    assert argument.split()[0] in err and "failed" not in err, err
    assert call(runtime, action="status", retrieval_id=rid)["status"] == "open"


def test_rounds_candidates_and_context_are_capped_and_unobserved_refs_refused(runtime):
    rid = call(runtime, **START)["retrieval_id"]
    total = 0
    for _ in range(retrieve.MAX_ROUNDS):
        out = call(runtime, action="search", retrieval_id=rid, missing_slot="city", tool="trove_grep",
                   tool_args={"query": "kiln", "session_scope": "all", "limit": 50})
        total += len(out["observed"])
        assert out["limits"]["candidates"] <= retrieve.MAX_CANDIDATES
        assert out["limits"]["context_chars"] <= retrieve.MAX_CONTEXT_CHARS
    assert total == retrieve.MAX_CANDIDATES
    assert "illegal transition" in call(runtime, action="search", retrieval_id=rid, missing_slot="city",
                                        tool="trove_grep", tool_args={"query": "kiln"})["error"]
    lisbon = runtime.store.search('"Lisbon"', limit=1)[0][0]
    err = call(runtime, action="finish", retrieval_id=rid, selected_refs=[f"trove:{lisbon.store_id}:0-16"])["error"]
    assert "not observed" in err
    seen = call(runtime, action="status", retrieval_id=rid)["observed"][0]["ref"]
    forged = {"ref": seen, "quote": "something else"}
    assert "not observed" in call(runtime, action="finish", retrieval_id=rid, selected_refs=[forged])["error"]


def test_finish_can_compute_over_observed_refs_only(runtime):
    rid = call(runtime, **dict(START, identity={"intent_type": "count"}))["retrieval_id"]
    out = call(runtime, action="search", retrieval_id=rid, missing_slot="city", tool="trove_grep",
               tool_args={"query": "KX1", "session_scope": "all"})
    refs = [o["ref"] for o in out["observed"][:2]]
    ops = [{"ref": r, "key": f"k{i}"} for i, r in enumerate(refs)]
    done = call(runtime, action="finish", retrieval_id=rid, selected_refs=refs,
                computation={"operands": ops, "operation": "count_distinct"})
    assert done["status"] == "finished" and done["evidence_view"]["computation"]["status"]
    rid2 = call(runtime, **START)["retrieval_id"]
    call(runtime, action="search", retrieval_id=rid2, missing_slot="city", tool="trove_grep",
         tool_args={"query": "Lisbon", "session_scope": "all"})
    st = call(runtime, action="status", retrieval_id=rid2)
    err = call(runtime, action="finish", retrieval_id=rid2, selected_refs=[st["observed"][0]["ref"]],
               computation={"operands": [{"store_id": 1, "span_start": 0, "span_end": 4}]})["error"]
    assert "observed" in err


# -- pre-answer evidence ------------------------------------------------------------------------

def test_the_evidence_block_is_fenced_bounded_and_never_stored_as_user_content(tmp_path):
    rt = build_runtime(make_config(tmp_path, preanswer_evidence_enabled=True))
    engine = make_engine(rt)
    rt.store.append(SessionKey("old"), [{"role": "user", "content": "My passport number ends in 7781, keep it."}])
    hook = hooks.make_hooks(rt)
    question = "what is my passport number?"
    history = [{"role": "user", "content": question}]
    out = hook["pre_llm_call"](session_id="s1", user_message=question, conversation_history=history)
    block = out["context"][out["context"].index(EVIDENCE_OPEN):]
    assert block.startswith(EVIDENCE_OPEN) and block.endswith(EVIDENCE_CLOSE) and "7781" in block
    assert len(block) <= 2000
    # the host appends the block to the user message: wherever it lands, ingest strips it
    turn = [{"role": "user", "content": question + "\n\n" + block, "api_content": question + "\n\n" + out["context"]},
            {"role": "assistant", "content": "It ends in 7781."}]
    engine.ingest(turn)
    stored = [r.content for r in rt.store.page("s1")]
    assert stored == [question, "It ends in 7781."]
    assert is_synthetic({"role": "user", "content": block})
    assert not is_synthetic({"role": "user", "content": question + "\n\n" + block})


def test_the_evidence_block_is_off_by_default_and_fails_open(tmp_path, monkeypatch):
    rt = build_runtime(make_config(tmp_path))
    make_engine(rt)
    rt.store.append(SessionKey("old"), [{"role": "user", "content": "My passport number ends in 7781."}])
    hook = hooks.make_hooks(rt)
    args = {"session_id": "s1", "user_message": "passport number?", "conversation_history": []}
    assert EVIDENCE_OPEN not in str(hook["pre_llm_call"](**args))
    on = build_runtime(make_config(tmp_path, preanswer_evidence_enabled=True))
    make_engine(on)
    from hermes_trove.state import preanswer

    def boom(*a, **k):
        raise RuntimeError("search broke")

    monkeypatch.setattr(preanswer, "evidence_block", boom)
    out = hooks.make_hooks(on)["pre_llm_call"](**args)
    assert out is not None and EVIDENCE_OPEN not in out["context"]  # the policy still arrives


def test_a_search_refuses_arguments_the_called_tool_does_not_take(runtime):
    rid = call(runtime, **START)["retrieval_id"]
    err = call(runtime, action="search", retrieval_id=rid, missing_slot="city", tool="trove_grep",
               tool_args={"query": "Lisbon", "pattern": "x"})["error"]
    assert "trove_grep does not take pattern" in err
    assert call(runtime, action="status", retrieval_id=rid)["limits"]["rounds_used"] == 0  # a refused step is free


# -- a search step reaches its tool through dispatch (ToolContext.call) ------------------------
def _patch(monkeypatch, name, handler):
    monkeypatch.setitem(tools.TOOLS_BY_NAME, name, replace(tools.TOOLS_BY_NAME[name], handler=handler))


def test_a_search_step_gets_the_called_tools_own_argument_checks(runtime):
    rid = call(runtime, **START)["retrieval_id"]
    err = call(runtime, action="search", retrieval_id=rid, missing_slot="city", tool="trove_grep",
               tool_args={"query": "Lisbon", "session_scope": "all", "limit": 0})["error"]
    assert err.startswith("trove_grep refused its arguments: limit must be an integer from 1"), err
    assert call(runtime, action="status", retrieval_id=rid)["limits"]["rounds_used"] == 0


def test_the_called_tool_runs_under_its_own_cap_with_the_callers_session_and_scope(runtime, monkeypatch):
    seen = []

    def spy(ctx, args):
        seen.append(ctx)
        return {"results": []}

    _patch(monkeypatch, "trove_grep", spy)
    key = SessionKey("s1")
    rid = json.loads(dispatch(ToolContext(runtime=runtime, session=key), "trove_retrieve", START))["retrieval_id"]
    out = json.loads(dispatch(ToolContext(runtime=runtime, session=key), "trove_retrieve",
                              {"action": "search", "retrieval_id": rid, "missing_slot": "city", "tool": "trove_grep",
                               "tool_args": {"query": "Lisbon"}}))
    assert out["round"] == 1, out
    inner = seen[0]
    assert inner.response_cap == tools.TOOLS_BY_NAME["trove_grep"].response_cap
    assert inner.calling == ("trove_retrieve", "trove_grep")
    assert inner.session == key and inner.runtime is runtime and inner.visible == runtime.visibility(key)


def test_a_tool_calling_itself_is_refused_without_recursing(runtime, monkeypatch):
    replies = []

    def loop(ctx, args):
        replies.append(ctx.call("trove_retrieve", {"action": "status", "retrieval_id": "ret_x"}))
        replies.append(ctx.call("trove_grep", {"query": "Lisbon", "session_scope": "all"}))
        return {"results": []}

    _patch(monkeypatch, "trove_grep", loop)
    rid = call(runtime, **START)["retrieval_id"]
    call(runtime, action="search", retrieval_id=rid, missing_slot="city", tool="trove_grep",
         tool_args={"query": "Lisbon", "session_scope": "all"})
    assert "trove_retrieve is already running in this call (trove_retrieve -> trove_grep -> trove_retrieve)" \
        in replies[0]["error"]
    assert "trove_grep is already running" in replies[1]["error"]


def test_a_called_tools_failure_comes_back_as_an_error_never_a_raise(runtime, monkeypatch):
    def boom(ctx, args):
        raise RuntimeError("search broke")

    _patch(monkeypatch, "trove_grep", boom)
    rid = call(runtime, **START)["retrieval_id"]
    err = call(runtime, action="search", retrieval_id=rid, missing_slot="city", tool="trove_grep",
               tool_args={"query": "Lisbon", "session_scope": "all"})["error"]
    assert err == "trove_grep refused its arguments: trove_grep failed: RuntimeError: search broke"
    assert call(runtime, action="status", retrieval_id=rid)["limits"]["rounds_used"] == 0
    assert "not made by tools.dispatch" in ToolContext(runtime=runtime).call("trove_grep", {"query": "x"})["error"]
    assert "unknown tool" in tools.call_tool(ToolContext(runtime=runtime), "trove_nope", {})["error"]


def test_finish_computes_through_dispatch_and_a_refusal_leaves_the_episode_open(runtime):
    rid = call(runtime, **dict(START, identity={"intent_type": "count"}))["retrieval_id"]
    out = call(runtime, action="search", retrieval_id=rid, missing_slot="city", tool="trove_grep",
               tool_args={"query": "KX1", "session_scope": "all"})
    refs = [o["ref"] for o in out["observed"][:2]]
    ops = [{"ref": r, "key": f"k{i}"} for i, r in enumerate(refs)]
    err = call(runtime, action="finish", retrieval_id=rid, selected_refs=refs,
               computation={"operands": ops, "operation": "no_such_operation"})["error"]
    assert err.startswith("operation must be one of"), err  # trove_compute's own check, its own words
    assert call(runtime, action="status", retrieval_id=rid)["status"] == "open"
