"""The pre-LLM hook looks only at what is new in the host's list, and says what a whole look would say.

The reference below is the hook's earlier logic, which looked through every message each turn. Random
runs of turns, compactions, /undo cuts, reloaded lists (new dicts), the host's in-place writes (the
injected text on the turn's user message, a user message joined onto the one before) and new summary
nodes go through the real hooks on a real SQLite file; every turn's context must match the reference.
"""
from __future__ import annotations

import copy
import random
import time

import pytest
from conftest import assistant, make_config, make_engine, tool_call, tool_result, user

from hermes_trove.compaction import assembly
from hermes_trove.historymarks import held_chars
from hermes_trove.hooks import SUMMARY_CONTEXT_TOKENS, make_hooks, recall_policy, summary_context
from hermes_trove.runtime import HistoryMarks, build_runtime

SESSION = "s1"


def reference_context(runtime, policy: str, history: list) -> dict | None:
    """What the hook said when it looked through the whole list every turn."""
    dicts = [m for m in history if isinstance(m, dict)]
    parts = []
    if policy and not any(policy in str(m.get("api_content") or "") for m in dicts):
        parts.append(policy)
    if not any(assembly.shows_summary(m) for m in dicts):
        frontier = runtime.dag.frontier(SESSION)
        if frontier:
            parts.append(assembly.render_summary_text(*assembly.select_nodes(frontier, SUMMARY_CONTEXT_TOKENS)))
    return {"context": "\n\n".join(parts)} if parts else None


def add_summary(runtime, n: int) -> None:
    ids = [r.store_id for r in runtime.store.page(SESSION, limit=100_000)][-6:]
    if ids:
        runtime.dag.add_leaf(SESSION, f"Summary {n}: the parcels were counted.", ids, token_count=10,
                             source_token_count=60, earliest_at=time.time(), latest_at=time.time())


def drive(tmp_path, seed: int, steps: int = 120) -> int:
    """Random host behaviour; returns how many turns were compared."""
    rng = random.Random(seed)
    runtime = build_runtime(make_config(tmp_path))
    make_engine(runtime, session=SESSION)
    hooks = make_hooks(runtime)
    policy = recall_policy()
    assert policy
    messages: list = []
    compared = 0
    for step in range(steps):
        op = rng.choices(["turn", "compact", "undo", "reload", "drop", "summary", "noise"],
                         [10, 1, 1, 1, 1, 1, 1])[0]
        if op == "compact" and messages:  # a compaction writes a summary node, then the host takes its list
            add_summary(runtime, step)
            frontier = runtime.dag.frontier(SESSION)
            dicts = [m for m in messages if isinstance(m, dict)]
            keep = dicts[-rng.randint(1, len(dicts)):] if dicts else []  # up to all of it: as long as before
            messages = assembly.assemble(frontier, [], keep, 100_000)[0] if frontier else \
                [{k: v for k, v in m.items() if k != "api_content"} for m in keep]
        elif op == "undo" and messages:
            users = [i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user"]
            messages = messages[:rng.choice(users)] if users else []
        elif op == "reload":
            messages = copy.deepcopy(messages)
        elif op == "drop" and messages:  # the host drops a stale sidecar in place
            rng.choice([m for m in messages if isinstance(m, dict)] or [{}]).pop("api_content", None)
        elif op == "summary":
            add_summary(runtime, step)
        elif op == "noise":  # no dict: passed over
            messages.append(rng.choice([None, "stray", 7]))
        elif op == "turn":
            text = rng.choice([f"count parcel {step}", assembly.SUMMARY_HEADER + f" quoted {step}",
                               f"{assembly.SUMMARY_HEADER}\n\nold notes\n\n[end of trove summary]"])
            if messages and isinstance(messages[-1], dict) and messages[-1].get("role") == "user" \
                    and rng.random() < 0.5:  # the host joins two user messages in a row, in place
                messages[-1]["content"] = f"{messages[-1]['content']}\n\n{text}"
                request = messages[-1]
            else:
                request = user(text)
                messages.append(request)
            expected = reference_context(runtime, policy, messages)
            got = hooks["pre_llm_call"](session_id=SESSION, conversation_history=list(messages), platform="cli",
                                        user_message=text)
            assert got == expected, (seed, step)
            compared += 1
            if got:  # the host writes the injected text onto the turn's user message, in place
                request["api_content"] = f"{request['content']}\n\n{got['context']}"
            if rng.random() < 0.8:
                if rng.random() < 0.4:
                    messages += [assistant("", [tool_call(f"c{step}", "terminal")]),
                                 tool_result(f"c{step}", f"output {step}")]
                messages.append(assistant(f"done {step}"))
            hooks["post_llm_call"](session_id=SESSION, platform="cli",
                                   conversation_history=[m for m in messages if isinstance(m, dict)])
    return compared


@pytest.mark.parametrize("seed", range(10))
def test_the_hook_says_what_a_whole_look_says_every_turn(tmp_path, seed):
    assert drive(tmp_path, seed) > 40


def test_a_turn_looks_at_its_new_messages_only():
    marks, looked = HistoryMarks(), []

    def test(m):
        looked.append(m["content"])
        return "needle" in m["content"]

    history = [user(f"m{i}") if i % 2 == 0 else assistant(f"m{i}") for i in range(1000)]
    assert marks.any("s", "needle", history, test) is False
    assert len(looked) == 1000
    looked.clear()
    history += [assistant("m1000"), user("m1001")]
    assert marks.any("s", "needle", history, test) is False
    assert looked == ["m998", "m999", "m1000", "m1001"]  # from the newest user message the last look saw
    looked.clear()
    history += [assistant("needle here"), user("m1003")]
    assert marks.any("s", "needle", history, test) is True
    looked.clear()
    history += [assistant("m1004")]
    assert marks.any("s", "needle", history, test) is True
    assert looked == ["needle here"]  # the message that passed, checked again alone


def test_another_list_is_looked_through_whole():
    marks, looked = HistoryMarks(), []

    def test(m):
        looked.append(m)
        return bool(m.get("api_content"))

    history = [user(f"m{i}") for i in range(50)]
    assert marks.any("s", "t", history, test) is False
    reloaded = copy.deepcopy(history)
    reloaded[10]["api_content"] = "m10\n\ninjected"
    looked.clear()
    assert marks.any("s", "t", reloaded, test) is True  # new dicts: the marks are not trusted
    assert len(looked) == 11
    cut = reloaded[:5]
    assert marks.any("s", "t", cut, test) is False  # /undo cut the message that passed
    marks_b = HistoryMarks()
    assert marks_b.any("s", "t", [], test) is False
    assert marks_b.marks == {}


def test_a_reloaded_list_is_tested_again_at_the_index_that_passed():
    marks, looked = HistoryMarks(), []

    def test(m):
        looked.append(m["content"])
        return bool(m.get("api_content"))

    history = [user(f"m{i}") for i in range(1000)]
    history[3]["api_content"] = "m3\n\ninjected"
    assert marks.any("s", "t", history, test) is True
    looked.clear()
    reloaded = copy.deepcopy(history) + [user("m1000")]  # a gateway's reload: every dict new
    assert marks.any("s", "t", reloaded, test) is True
    assert looked == ["m3"]


class Untouchable(dict):
    """A message the hook must not read."""

    def get(self, *a, **kw):
        raise AssertionError("an old message was read")

    def __getitem__(self, key):
        raise AssertionError("an old message was read")


def test_with_nothing_to_show_a_reloaded_list_is_not_looked_through(tmp_path):
    runtime = build_runtime(make_config(tmp_path))
    make_engine(runtime, session=SESSION)
    history = [Untouchable(role="user", content=f"m{i}") for i in range(200)]  # no summary node: nothing to show
    assert summary_context(runtime, SESSION, history) == ""


def test_a_user_message_the_host_appends_after_the_turns_own_does_not_hide_it(tmp_path):
    """After a compaction the host appends a todo snapshot (a user message) after the turn's own message,
    then writes the injected text onto the turn's message: the next look must still see it."""
    runtime = build_runtime(make_config(tmp_path))
    make_engine(runtime, session=SESSION)
    hooks = make_hooks(runtime)
    policy = recall_policy()
    request = user("count the parcels")
    messages = [user("earlier"), assistant("noted"), request,
                {"role": "user", "content": "[todo] 1. count", "_todo_snapshot_synthetic": True}]
    got = hooks["pre_llm_call"](session_id=SESSION, conversation_history=list(messages), platform="cli",
                                user_message=request["content"])
    assert got == reference_context(runtime, policy, messages) and policy in got["context"]
    request["api_content"] = f"{request['content']}\n\n{got['context']}"  # the host's stamp, in place
    messages += [assistant("counted"), user("and the crates?")]
    expected = reference_context(runtime, policy, messages)
    assert expected is None  # the policy rides the earlier turn's message
    assert hooks["pre_llm_call"](session_id=SESSION, conversation_history=list(messages), platform="cli",
                                 user_message="and the crates?") == expected


def test_an_ended_session_leaves_no_message_held_by_the_marks(tmp_path):
    """The marks hold the list's first and last message: a session's end lets them go (a gateway serving
    many chats would otherwise keep up to 1,024 marks' messages of chats long over)."""
    runtime = build_runtime(make_config(tmp_path))
    engine = make_engine(runtime, session=SESSION)
    hooks = make_hooks(runtime)
    messages = [{"role": "user", "content": "a photo", "images": ["x" * 100_000]}, assistant("seen"),
                user("and now?")]
    hooks["pre_llm_call"](session_id=SESSION, conversation_history=list(messages), platform="cli",
                          user_message="and now?")
    assert any(key[0] == SESSION for key in runtime.marks.marks)
    engine.on_session_end(SESSION, messages)
    assert [key for key in runtime.marks.marks if key[0] == SESSION] == []


def held_by_marks(marks: HistoryMarks) -> int:
    """Characters of the distinct messages the marks keep alive."""
    held = {id(m): m for mark in marks.marks.values() for m in (mark.first, mark.last) if isinstance(m, dict)}
    return sum(len(m.get("content") or "") + len(m.get("api_content") or "") for m in held.values())


def test_sessions_that_never_end_keep_a_bounded_amount_of_text_alive(tmp_path):
    """A gateway whose chats paste large texts and never end (a crash, an evicted agent): the hook's marks
    hold on to at most their character budget (and the newest session's mark), not every session's paste."""
    from hermes_trove.historymarks import MAX_MARKED_CHARS

    runtime = build_runtime(make_config(tmp_path))
    hooks = make_hooks(runtime)
    paste = 200_000
    sessions = MAX_MARKED_CHARS // paste * 2  # twice what the budget holds, far under the count limit
    for i in range(sessions):
        make_engine(runtime, session=f"s{i}", platform="telegram")
        history = [user(f"session {i} pastes: " + "x" * paste)]
        hooks["pre_llm_call"](session_id=f"s{i}", conversation_history=history, platform="telegram",
                              user_message=history[0]["content"])
    assert held_by_marks(runtime.marks) <= MAX_MARKED_CHARS + 2 * paste
    assert any(key[0] == f"s{sessions - 1}" for key in runtime.marks.marks)  # the live session's look resumes


def test_a_mark_that_found_its_message_holds_no_message():
    marks = HistoryMarks()
    history = [user("a" * 1000), assistant("needle"), user("b" * 1000)]
    assert marks.any("s", "t", history, lambda m: m["content"] == "needle") is True
    assert held_by_marks(marks) == 0
    assert marks.any("s", "t", [*history, assistant("c")], lambda m: m["content"] == "needle") is True


def test_marks_past_their_budget_go_oldest_first_and_are_looked_through_again():
    marks = HistoryMarks(chars=2500)
    lists = {s: [user(s * 1000)] for s in "abc"}
    for s, history in lists.items():
        assert marks.any(s, "t", history, lambda m: False) is False
    assert [k[0] for k in marks.marks] == ["b", "c"] and marks.chars <= 2500
    looked = []
    assert marks.any("a", "t", lists["a"], lambda m: looked.append(m) or False) is False
    assert looked == lists["a"]  # its mark went: a whole look, with the same answer
    marks.forget("a")
    assert marks.chars == sum(mark.chars for mark in marks.marks.values())


def strings_in(value) -> int:
    """Characters of every string a message holds, however deep."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(strings_in(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(strings_in(v) for v in value)
    return 0


def test_photos_a_chat_opens_with_count_against_the_budget(tmp_path):
    """A gateway chat that opens with a photo holds it as a data URL inside the part's own ``image_url`` dict
    (the host's native image form) or as a tool call's arguments: those characters count, so sessions that
    never end keep no more than the budget of them alive."""
    from hermes_trove.historymarks import MAX_MARKED_CHARS

    runtime = build_runtime(make_config(tmp_path))
    hooks = make_hooks(runtime)
    photo = 200_000
    sessions = MAX_MARKED_CHARS // photo * 2
    for i in range(sessions):
        make_engine(runtime, session=f"p{i}", platform="telegram")
        url = f"data:image/png;base64,{i:06d}" + "A" * photo
        history = [{"role": "user", "content": [{"type": "text", "text": f"photo {i}"},
                                                {"type": "image_url", "image_url": {"url": url}}]}]
        hooks["pre_llm_call"](session_id=f"p{i}", conversation_history=history, platform="telegram",
                              user_message=f"photo {i}")
    held = {id(m): m for mark in runtime.marks.marks.values() for m in (mark.first, mark.last) if m is not None}
    assert sum(strings_in(m) for m in held.values()) <= MAX_MARKED_CHARS + 2 * photo
    assert any(key[0] == f"p{sessions - 1}" for key in runtime.marks.marks)
    call = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "write_file", "arguments": "x" * 5000}}]}
    assert held_chars(call) >= 5000
