from __future__ import annotations

import copy

from conftest import assistant, make_config, tool_call, tool_result, user

from hermes_trove import tokens
from hermes_trove.payloads import replay
from hermes_trove.payloads import sidecar as payloads
from hermes_trove.runtime import build_runtime

REF = payloads.ref_for("s1", "x")


def by_chars(msg: dict) -> int:
    return len(replay.stub_source_text(msg) or "")


def session(*results: tuple[str, str, str]) -> list[dict]:
    msgs: list[dict] = [{"role": "system", "content": "sys"}]
    for call_id, name, text in results:
        msgs += [user(f"do {call_id}"), assistant("", [tool_call(call_id, name)]), tool_result(call_id, text, name)]
    return msgs


def test_plan_picks_big_textual_tool_results_before_the_protected_tail():
    msgs = session(("a", "terminal", "x" * 500), ("b", "terminal", "y" * 50), ("c", "read_file", "z" * 900))
    assert replay.plan_stubs(msgs, threshold_tokens=100, protect_from=len(msgs) - 3, count_tokens=by_chars) == [3]
    assert replay.plan_stubs(msgs, threshold_tokens=100, protect_from=len(msgs), count_tokens=by_chars) == [3, 9]


def test_threshold_is_strictly_above():
    msgs = session(("a", "terminal", "x" * 100))
    assert replay.plan_stubs(msgs, threshold_tokens=100, protect_from=len(msgs), count_tokens=by_chars) == []
    assert replay.plan_stubs(msgs, threshold_tokens=99, protect_from=len(msgs), count_tokens=by_chars) == [3]


def test_recovery_tool_results_are_never_stubbed_even_without_a_name_on_the_result():
    msgs = session(("a", "trove_expand", "x" * 500), ("b", "trove_describe", "y" * 500), ("c", "grep", "z" * 500))
    for m in msgs:
        m.pop("name", None)
    assert replay.plan_stubs(msgs, threshold_tokens=10, protect_from=len(msgs), count_tokens=by_chars) == [9]


def test_image_and_media_results_stay_inline():
    media = {"role": "tool", "tool_call_id": "a", "content": [
        {"type": "text", "text": "x" * 500}, {"type": "image_url", "image_url": {"url": "https://e/1.png"}}]}
    assert replay.plan_stubs([media], threshold_tokens=10, protect_from=1, count_tokens=lambda m: 10_000) == []
    assert replay.stub_message(media, REF, 50) == media


def test_already_stubbed_results_are_not_stubbed_again():
    stubbed = replay.stub_message(tool_result("a", "x" * 5000), REF, 100)
    assert replay.plan_stubs([stubbed], threshold_tokens=1, protect_from=1, count_tokens=by_chars) == []


def test_non_tool_messages_are_never_planned():
    msgs = [user("u" * 5000), assistant("a" * 5000)]
    assert replay.plan_stubs(msgs, threshold_tokens=1, protect_from=2, count_tokens=by_chars) == []


def test_stub_keeps_role_tool_call_id_and_name_and_does_not_touch_the_input():
    msg = {**tool_result("call-7", "line\n" * 3000, "terminal"), "extra_key": 1}
    before = copy.deepcopy(msg)
    stub = replay.stub_message(msg, REF, 40)
    assert msg == before
    assert stub["role"] == "tool" and stub["tool_call_id"] == "call-7" and stub["name"] == "terminal"
    assert stub["extra_key"] == 1
    assert stub["content"].startswith(f"[trove:externalized ref={REF} kind=tool_result chars=15000 ")
    assert f'trove_expand(externalized_ref="{REF}")' in stub["content"]
    assert "Preview:\n" + ("line\n" * 8) in stub["content"] and len(stub["content"]) < 400


def test_structured_text_blocks_keep_their_type_and_keys():
    msg = {"role": "tool", "tool_call_id": "a", "content": [
        {"type": "text", "text": "part one " * 300, "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "part two"}]}
    stub = replay.stub_message(msg, REF, 20)
    assert len(stub["content"]) == 1
    block = stub["content"][0]
    assert block["type"] == "text" and block["cache_control"] == {"type": "ephemeral"}
    assert block["text"].startswith(f"[trove:externalized ref={REF}")
    assert replay.stub_source_text(msg) == "part one " * 300 + "\npart two"


def test_apply_replay_stubs_externalizes_and_recovers_exactly(tmp_path):
    rt = build_runtime(make_config(tmp_path, large_output_externalization_enabled=True,
                                   large_output_active_replay_stubbing_enabled=True,
                                   large_output_active_replay_stub_threshold_tokens=1000))
    big = "".join(f"row {i}\n" for i in range(3000))
    msgs = session(("a", "terminal", big), ("b", "terminal", big + "tail"))
    out, n = replay.apply_replay_stubs(rt, "s1", msgs, protect_from=len(msgs) - 1)
    assert n == 1 and out[6] is msgs[6] and out[3]["content"] != big
    assert tokens.count_messages(out) < tokens.count_messages(msgs) - tokens.count_message(msgs[3]) + 300
    ref = payloads.refs_in(out[3]["content"])[0]
    assert payloads.read_ref(rt, ref, max_chars=200000, session_id="s1")["content"] == big


def test_apply_replay_stubs_is_a_no_op_unless_both_opt_ins_are_on(tmp_path):
    rt = build_runtime(make_config(tmp_path, large_output_active_replay_stubbing_enabled=True,
                                   large_output_active_replay_stub_threshold_tokens=100))
    msgs = session(("a", "terminal", "x" * 10000))
    assert replay.apply_replay_stubs(rt, "s1", msgs, protect_from=len(msgs)) == (msgs, 0)


def test_apply_replay_stubs_keeps_the_payload_inline_when_durability_fails(tmp_path, monkeypatch):
    rt = build_runtime(make_config(tmp_path, large_output_externalization_enabled=True,
                                   large_output_active_replay_stubbing_enabled=True,
                                   large_output_active_replay_stub_threshold_tokens=100))
    monkeypatch.setattr(payloads.os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(5, "I/O error")))
    msgs = session(("a", "terminal", "x" * 10000))
    out, n = replay.apply_replay_stubs(rt, "s1", msgs, protect_from=len(msgs))
    assert n == 0 and out == msgs
