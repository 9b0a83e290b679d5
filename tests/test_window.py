"""The window plan: the trigger and the compaction target account for the host's fixed overhead
(system prompt and tool schemas), so a small window still leaves the conversation room."""
from __future__ import annotations

import re

import pytest
from conftest import make_config, make_engine, tool_call, tool_result, user
from simulate import HostLoop, build_conversation

from hermes_trove import tokens
from hermes_trove.compaction.window import measure_overhead, plan_target, plan_trigger
from hermes_trove.runtime import build_runtime

NODE_LABEL = re.compile(r"\[d\d+ node \d+ \|")


@pytest.mark.parametrize(("window", "ratio", "overhead", "caps", "trigger", "target"), [
    # overhead unknown: exactly TROVE_CONTEXT_THRESHOLD of the window, as before
    (64000, 0.35, 0, (), 22400, 15679),
    # a 64K window with the host's ~17K of tool schemas and system prompt: the conversation gets a fifth
    (64000, 0.35, 17200, (), 30000, 6400),
    # a heavier overhead: the raise stops at 60% of the window
    (64000, 0.35, 30000, (), 38400, 4200),
    # an overhead past the ceiling: no raise can make room; the trigger stays, the target is its floor
    (64000, 0.35, 60000, (), 22400, 512),
    (64000, 0.35, 38400, (), 22400, 512),
    # ordinary windows: nothing changes (trigger = ratio x window, target = 70% of it minus the overhead)
    (128000, 0.35, 17200, (), 44800, 14159),
    (200000, 0.35, 17200, (), 70000, 31800),
    (1000000, 0.35, 17200, (), 350000, 227799),
    # an operator's higher ratio is never lowered
    (64000, 0.7, 17200, (), 44800, 14159),
    # the operator's hard caps (TROVE_MAX_ASSEMBLY_TOKENS, the reserve floor) always win
    (64000, 0.35, 17200, (25000,), 25000, 3900),
    (64000, 0.35, 17200, (0, 26000), 26000, 4400),
])
def test_the_window_plan_table(window, ratio, overhead, caps, trigger, target):
    assert plan_trigger(window, ratio, overhead, caps) == trigger
    assert plan_target(trigger, overhead) == target


def test_an_ordinary_window_keeps_the_old_target_rule():
    for window in (128000, 200000, 400000):
        for overhead in (0, 2000, 8000, 17000):
            trigger = plan_trigger(window, 0.35, overhead)
            assert trigger == int(window * 0.35)
            assert plan_target(trigger, overhead) == max(512, int(trigger * 0.7) - overhead)


@pytest.mark.parametrize(("prompt", "counts", "window", "expected"), [
    (24000, (6000,), 64000, 18000),
    (24000, (6000, 6600), 64000, 17400),   # the larger message count wins: overhead never inflated
    (5000, (6000,), 64000, 0),             # a count below the messages' size: no overhead
    (900000, (1000,), 64000, 64000),       # clamped to the window
])
def test_measured_overhead(prompt, counts, window, expected):
    assert measure_overhead(prompt, counts, window) == expected


def _engine(tmp_path, calls, context=64000, **cfg):
    def complete(messages, model, timeout_s, max_tokens):
        calls.append(messages[0]["content"])
        return "Summary of the segment: numbered topics were discussed."

    return make_engine(build_runtime(make_config(tmp_path, **cfg)), complete, context_length=context)


def test_a_64k_window_with_a_large_overhead_keeps_summaries_visible_and_compacts_rarely(tmp_path):
    calls: list[str] = []
    eng = _engine(tmp_path, calls)
    loop = HostLoop(eng, overhead_tokens=17500)
    visible, compacted_turns = [], []
    for turn in build_conversation(60, seed=5, big_output_chars=4000):
        before = loop.stats.compactions
        loop.run_turn(turn)
        compacted_turns.append(loop.stats.compactions > before)
        summary = next((m for m in loop.messages if m.get("_trove_summary")), None)
        if summary is not None:
            visible.append(len(NODE_LABEL.findall(summary["content"])))
    assert 16000 <= eng.overhead_tokens <= 17500  # the host's rough count may see the messages larger
    assert eng.threshold_tokens > 22400
    assert visible and min(visible) > 0, visible
    assert sum(compacted_turns) * 3 < len(compacted_turns), compacted_turns
    assert max(loop.stats.prompts) < int(64000 * 0.6)


def test_a_fresh_copy_learns_the_overhead_and_defers_instead_of_compacting(tmp_path):
    calls: list[str] = []
    eng = _engine(tmp_path, calls, fresh_tail_count=4, leaf_chunk_tokens=1000)
    msgs = []
    for i in range(12):
        msgs += [user(f"question {i} " + "lorem ipsum dolor " * 120), {"role": "assistant", "content": f"answer {i}"}]
    size = tokens.count_messages(msgs)
    prompt = 17500 + size  # the host's count: its system prompt and tool schemas, then the messages
    assert eng.threshold_tokens == 22400 and prompt >= 22400
    assert eng.should_compress(prompt)  # the overhead is not known yet
    out = eng.compress(msgs, current_tokens=prompt)
    assert out is msgs and not calls and not eng._last_compression_made_progress
    assert 16000 <= eng.overhead_tokens <= 17500
    assert eng.threshold_tokens == eng.overhead_tokens + 12800 > prompt
    assert not eng.should_compress(prompt)
    assert eng.state.no_progress_tokens == 0  # a deferral is not a failed compaction
    forced = eng.compress(msgs, current_tokens=prompt, force=True)
    assert calls and forced != msgs


def test_a_retry_under_a_trigger_that_stood_still_compacts(tmp_path):
    """The host's overflow and payload-too-large retries call compress() without force and with a
    count under the trigger: once the overhead is known, such a call compacts, it is not deferred."""
    calls: list[str] = []
    eng = _engine(tmp_path, calls, fresh_tail_count=4, leaf_chunk_tokens=1000)
    msgs = []
    for i in range(12):
        msgs += [user(f"question {i} " + "lorem ipsum dolor " * 120), {"role": "assistant", "content": f"answer {i}"}]
    prompt = 17500 + tokens.count_messages(msgs)
    assert eng.compress(msgs, current_tokens=prompt) is msgs and not calls  # learns the overhead, defers
    raised = eng.threshold_tokens
    assert prompt < raised
    out = eng.compress(msgs, current_tokens=prompt)  # a 413 retry: the same count, the trigger unchanged
    assert calls and out != msgs and eng._last_compression_made_progress
    assert eng.threshold_tokens == raised


def test_a_large_window_is_untouched_by_the_overhead(tmp_path):
    calls: list[str] = []
    eng = _engine(tmp_path, calls, context=128000)
    msgs = [user("hello " * 400), {"role": "assistant", "content": "hi"}]
    eng.compress(msgs, current_tokens=17500 + tokens.count_messages(msgs))
    assert 16000 <= eng.overhead_tokens <= 17500 and eng.threshold_tokens == 44800


def test_a_long_newest_message_leaves_room_for_the_summary_under_the_trigger(tmp_path):
    """A pasted message of about 6,000 tokens in a 64K window with the host's ~17K overhead fills
    the compaction target on its own; the summary of the earlier turns must still be shown (the
    prompt stays under the trigger with it), not replaced by an "omitted" note."""
    calls: list[str] = []
    eng = _engine(tmp_path, calls, fresh_tail_count=4)
    paste = " ".join(f"pasted{k % 97} line{k}" for k in range(1700))
    msgs = [user("the ferry to Naxos leaves at 7am " + paste), {"role": "assistant", "content": "noted"},
            user("second paste " + paste)]
    prompt = 17500 + tokens.count_messages(msgs)
    eng.compress(msgs, current_tokens=prompt)  # learns the overhead (the host's first call defers)
    out = eng.compress(msgs, current_tokens=prompt, force=True)
    assert calls, "nothing was summarised"
    summary = next(m for m in out if m.get("_trove_summary"))
    assert len(NODE_LABEL.findall(summary["content"])) == 1, summary["content"][:400]
    assert "not shown to save space" not in summary["content"]
    assert eng.overhead_tokens + tokens.count_messages(out) < eng.threshold_tokens


def test_the_compactor_measures_the_overhead_as_the_trigger_does(tmp_path, monkeypatch):
    """The host's rough count also reads a message's ``api_content`` (the bytes it sent, the
    recall note included), so on a resumed transcript it counts a long message twice. The trigger
    takes the larger of the two counts; the compactor must take the same overhead, or it believes
    the host's fixed part is a whole paste bigger and hides the summary it just wrote."""
    from hermes_trove import engine as engine_module

    monkeypatch.setattr(engine_module, "host_message_tokens", lambda msgs: len(str(msgs)) // 4)
    calls: list[str] = []
    eng = _engine(tmp_path, calls, fresh_tail_count=4)
    paste = " ".join(f"pasted{k % 97} line{k}" for k in range(1700))
    sent = {"role": "user", "content": "the ferry leaves at 7am " + paste, "api_content": "the ferry leaves at 7am "
            + paste + "\n\nTROVE recall policy"}
    msgs = [sent, {"role": "assistant", "content": "noted"}, user("second paste " + paste)]
    prompt = 17500 + len(str(msgs)) // 4  # the host's estimate of the request
    out = eng.compress(msgs, current_tokens=prompt)
    if out is msgs:  # the first call only learned the overhead
        out = eng.compress(msgs, current_tokens=prompt)
    assert calls and out is not msgs
    assert abs(eng.state.last_result["overhead_tokens"] - eng.overhead_tokens) <= 1, eng.state.last_result
    summary = next(m for m in out if m.get("_trove_summary"))
    assert len(NODE_LABEL.findall(summary["content"])) == 1, summary["content"][:400]


def test_a_paste_past_the_trigger_still_shows_the_summary_while_the_window_has_room(tmp_path):
    """A 128K window and one pasted message bigger than the whole trigger (44,800): the prompt is
    past the trigger whatever is shown, but far under the window; the earlier turns' summary must
    stay in view (up to 60% of the window, the trigger's own ceiling), not vanish with the paste."""
    calls: list[str] = []
    eng = _engine(tmp_path, calls, context=128000, fresh_tail_count=4)
    msgs = []
    for i in range(6):
        msgs += [user(f"question {i} about the Naxos ferry " + "lorem ipsum dolor " * 60),
                 {"role": "assistant", "content": f"answer {i}"}]
    msgs.append(user("PASTE " + " ".join(f"pasted{k % 97} line{k}" for k in range(11000))))
    prompt = 4000 + tokens.count_messages(msgs)
    assert prompt > eng.threshold_tokens and tokens.count_message(msgs[-1]) > eng.threshold_tokens
    out = eng.compress(msgs, current_tokens=prompt)
    assert calls and out is not msgs
    summary = next(m for m in out if m.get("_trove_summary"))
    assert NODE_LABEL.search(summary["content"]), summary["content"][:400]
    assert 4000 + tokens.count_messages(out) < int(128000 * 0.6)


def test_a_summary_the_host_merged_with_the_question_keeps_the_question_in_the_next_compaction(tmp_path):
    """When the kept tail starts with a user message, Hermes merges trove's summary message and that
    message into one (in place, in its transcript: its repair of consecutive user turns). A second
    compaction in the same turn (after a tool batch) must keep the question in the prompt, not drop
    it with the old summary it now shares a message with."""
    calls: list[str] = []
    eng = _engine(tmp_path, calls, fresh_tail_count=1)
    filler = " ".join(f"pasted{k % 97} line{k}" for k in range(1500))
    msgs = []
    for i in range(4):
        msgs += [user(f"turn {i}: " + filler), {"role": "assistant", "content": f"answer {i}"}]
    msgs.append(user("QUESTION-Z: what does the build script print?"))
    out = eng.compress(msgs, current_tokens=eng.threshold_tokens + 1, force=True)
    assert out[0].get("_trove_summary") and out[1]["content"].startswith("QUESTION-Z")
    merged = out[0]  # the host's merge: the summary dict gets the question appended, flags kept
    merged["content"] = merged["content"] + "\n\n" + out[1]["content"]
    transcript = [merged, *out[2:],
                  {"role": "assistant", "content": "", "tool_calls": [tool_call("c1", "terminal")]},
                  tool_result("c1", "build output " + filler)]
    again = eng.compress(transcript, current_tokens=eng.threshold_tokens + 1, force=True)
    text = "\n".join(str(m.get("content")) for m in again)
    assert "QUESTION-Z" in text, [str(m.get("content"))[:80] for m in again]
    assert text.count("[trove summary]") == 1


def test_a_compaction_between_tool_calls_keeps_the_question_of_the_turn(tmp_path):
    """Mid-turn (after a tool batch) the tail budget may leave only the newest tool group; the user
    message the turn answers must stay in view after the summary, not be folded out of the prompt."""
    calls: list[str] = []
    eng = _engine(tmp_path, calls)
    filler = " ".join(f"pasted{k % 97} line{k}" for k in range(1500))
    msgs = []
    for i in range(3):
        msgs += [user(f"turn {i}: " + filler), {"role": "assistant", "content": f"answer {i}"}]
    msgs.append(user("QUESTION-Z: what does the build script print? " + filler))
    for c in ("c1", "c2"):
        msgs += [{"role": "assistant", "content": "", "tool_calls": [tool_call(c, "terminal")]},
                 tool_result(c, f"build output {c} " + filler)]
    out = eng.compress(msgs, current_tokens=eng.threshold_tokens + 1, force=True)
    assert calls and out is not msgs
    users = [m for m in out if m["role"] == "user" and not m.get("_trove_summary")]
    assert [m["content"][:10] for m in users] == ["QUESTION-Z"], [str(m.get("content"))[:40] for m in out]
    assert out[0].get("_trove_summary") and out[1] is not msgs[6] and out[1]["content"] == msgs[6]["content"]


def test_the_kept_request_takes_its_room_from_the_summary_not_from_the_trigger(tmp_path):
    """An 8K window, a long request and a long newest tool result: the request kept after the summary
    counts against the same room as the summary, so the prompt a compaction gives back is under the
    trigger (else the host compacts again after every tool batch of the turn)."""
    def complete(messages, model, timeout_s, max_tokens):
        return "Summary: " + " ".join(f"fact{k % 89} item{k}" for k in range(400))  # about 1,500 tokens

    eng = make_engine(build_runtime(make_config(tmp_path)), complete, context_length=8192)
    text = lambda n: " ".join(f"w{k % 97}x{k}" for k in range(n))  # noqa: E731
    msgs = []
    for i in range(20):
        msgs += [user(f"turn {i}: " + text(300)), {"role": "assistant", "content": f"answer {i}"}]
    msgs.append(user("QUESTION-Z: what does the build print? " + text(500)))
    for c in ("c1", "c2"):
        msgs += [{"role": "assistant", "content": "", "tool_calls": [tool_call(c, "terminal")]},
                 tool_result(c, f"build output {c} " + text(480))]
    out = eng.compress(msgs, current_tokens=tokens.count_messages(msgs), force=True)
    assert out is not msgs and out[0].get("_trove_summary")
    assert [m["content"][:10] for m in out if m["role"] == "user" and not m.get("_trove_summary")] == ["QUESTION-Z"]
    assert tokens.count_messages(out) < eng.threshold_tokens, [tokens.count_message(m) for m in out]


def test_the_kept_request_never_takes_a_tail_past_the_trigger_further_than_the_ceiling(tmp_path):
    """A tool result that alone is past the trigger: the request comes back only if the two stay
    within the ceiling the compaction sizes for (60% of the window); else its summary carries it."""
    calls: list[str] = []
    eng = _engine(tmp_path, calls)
    text = lambda n: " ".join(f"w{k % 97}x{k}" for k in range(n))  # noqa: E731
    msgs = []
    for i in range(6):
        msgs += [user(f"turn {i}: " + text(600)), {"role": "assistant", "content": f"answer {i}"}]
    msgs += [user("QUESTION-Z " + text(4000)),
             {"role": "assistant", "content": "", "tool_calls": [tool_call("c1", "terminal")]},
             tool_result("c1", "log " + text(16500))]
    assert tokens.count_message(msgs[-1]) > eng.threshold_tokens
    out = eng.compress(msgs, current_tokens=tokens.count_messages(msgs), force=True)
    assert calls and out is not msgs
    assert tokens.count_messages(out) <= int(64000 * 0.6), [tokens.count_message(m) for m in out]
