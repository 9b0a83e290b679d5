"""Active-replay stubbing wired into compaction and the tool-result hook."""
from __future__ import annotations

import json

import pytest
from conftest import assistant, make_config, make_engine, tool_call, tool_result, user

from hermes_trove import tokens
from hermes_trove.hooks import make_hooks
from hermes_trove.payloads import sidecar as payloads
from hermes_trove.runtime import build_runtime

ON = dict(large_output_externalization_enabled=True, large_output_active_replay_stubbing_enabled=True,
          large_output_active_replay_stub_threshold_tokens=2000)


def session_with_big_results(tmp_path, **cfg):
    rt = build_runtime(make_config(tmp_path, fresh_tail_count=4, **cfg))
    eng = make_engine(rt, context_length=200000)
    msgs = []
    for i in range(6):
        body = f"result {i}\n" + ("line of build output " * 2000)
        msgs += [user(f"run step {i}"), assistant("", [tool_call(f"c{i}", "terminal")]), tool_result(f"c{i}", body),
                 assistant(f"step {i} done")]
    return eng, msgs


def test_historical_results_outside_the_tail_are_stubbed_and_rows_stay_raw(tmp_path):
    eng, msgs = session_with_big_results(tmp_path, **ON)
    eng.ingest(msgs)
    out = eng.compress(msgs, current_tokens=tokens.count_messages(msgs), force=False)
    stubs = [m for m in out if m.get("role") == "tool" and str(m["content"]).startswith("[trove:externalized")]
    assert stubs, "big tool results before the tail are replaced by refs"
    assert tokens.count_messages(out) < tokens.count_messages(msgs) // 2
    ref = payloads.refs_in(stubs[0]["content"])[0]
    got = payloads.read_ref(eng.runtime, ref, 0, 10 ** 6, session_id="s1")
    assert got["content"].startswith("result ") and "line of build output" in got["content"]
    rows = [r for r in eng.runtime.store.page("s1", 0, 100) if r.role == "tool"]
    assert all("line of build output" in r.content for r in rows)  # raw rows not rewritten


def test_stubbing_off_keeps_everything_inline(tmp_path):
    eng, msgs = session_with_big_results(tmp_path)
    eng.ingest(msgs)
    out = eng.compress(msgs, current_tokens=tokens.count_messages(msgs))
    assert not any(str(m.get("content")).startswith("[trove:externalized") for m in out)


def test_tool_result_hook_stubs_new_giant_results_immediately(tmp_path):
    eng, _ = session_with_big_results(tmp_path, **ON)
    hook = make_hooks(eng.runtime)["transform_tool_result"]
    big = "x" * 40000
    stub = hook(tool_name="terminal", result=big, session_id="s1", tool_call_id="c9")
    assert stub.startswith("[trove:externalized") and len(stub) < 2000
    ref = payloads.refs_in(stub)[0]
    assert payloads.read_ref(eng.runtime, ref, 0, 10 ** 6)["content"] == big
    assert hook(tool_name="trove_expand", result=big, session_id="s1") is None
    assert hook(tool_name="terminal", result="small", session_id="s1") is None
    assert hook(tool_name="terminal", result=big, session_id="not-ours") is None


def test_tool_result_hook_is_inert_when_disabled(tmp_path):
    eng, _ = session_with_big_results(tmp_path)
    hook = make_hooks(eng.runtime)["transform_tool_result"]
    assert hook(tool_name="terminal", result="x" * 40000, session_id="s1") is None


def test_recall_policy_is_injected_once_while_it_rides_in_the_transcript(tmp_path):
    eng, _ = session_with_big_results(tmp_path)
    pre = make_hooks(eng.runtime)["pre_llm_call"]
    first = pre(session_id="s1", conversation_history=[user("hi")])
    assert first and first["context"]
    again = pre(session_id="s1", conversation_history=[dict(user("hi"), api_content="hi\n\n" + first["context"])])
    assert again is None
    assert pre(session_id="someone-else", conversation_history=[]) is None
    json.dumps(first)


def test_new_session_sees_carried_summaries_once_before_its_first_compaction(tmp_path):
    from conftest import make_config
    from simulate import HostLoop, build_conversation

    rt = build_runtime(make_config(tmp_path, leaf_chunk_tokens=600, condensation_fanin=2, fresh_tail_count=2))
    eng = make_engine(rt, session="old", context_length=64000)
    loop = HostLoop(eng)
    for turn in build_conversation(40, seed=2):
        loop.run_turn(turn)
    eng.on_session_end("old", loop.messages)
    eng.on_session_reset()
    eng.bind_session_state(None, "new")
    assert rt.store.session("new").previous_session_id == "old"
    assert rt.store.session("old").ended_at is not None
    pre = make_hooks(rt)["pre_llm_call"]
    got = pre(session_id="new", conversation_history=[user("what did we decide?")])
    carried = [n.node_id for n in rt.dag.frontier("new")]
    assert carried and "[trove summary]" in got["context"]
    assert any(f"node {i} " in got["context"] for i in carried)
    later = pre(session_id="new", conversation_history=[dict(user("what did we decide?"),
                                                             api_content="q\n\n" + got["context"])])
    assert later is None  # policy and summaries already ride in the transcript
    # once compaction writes its own summary message, the injected copy is dropped from the tail
    msgs = [dict(user("what did we decide?"), api_content="q\n\n" + got["context"]), assistant("ok")]
    eng.ingest(msgs)
    out = eng.compress(msgs, current_tokens=eng.threshold_tokens + 1, force=True)
    assert out[0]["content"].startswith("[trove summary")
    assert all("api_content" not in m for m in out[1:])


def test_hook_ingest_skips_and_counts_ignored_messages_like_the_engine(tmp_path):
    pytest.importorskip("regex")
    rt = build_runtime(make_config(tmp_path, ignore_message_patterns=("^Cronjob Response:",)))
    eng = make_engine(rt)
    post = make_hooks(rt)["post_llm_call"]
    post(session_id="s1", conversation_history=[user("Cronjob Response: disk 91%"), user("real question")])
    eng.ingest([user("Cronjob Response: load 3.2")])
    assert [r.content for r in rt.store.page("s1")] == ["real question"]
    assert rt.counters["ignored_message_count"] == 2  # one through the hook, one through the engine


def test_a_failing_hook_logs_and_answers_none(tmp_path, caplog):
    eng, _ = session_with_big_results(tmp_path)
    pre = make_hooks(eng.runtime)["pre_llm_call"]
    assert pre(session_id="s1", conversation_history=5) is None  # a history that is not a list
    assert "pre_llm_call hook failed for session s1" in caplog.text
