"""The host's compaction scaffolding, as a transcript reloaded from Hermes' state.db shows it.

Hermes marks its own summaries and the todo snapshot it appends after a compaction with
underscore keys that never reach state.db, and it merges two consecutive user messages into one
(the current message and the snapshot right after it). A gateway reloads the transcript from
state.db every turn, so trove must know this scaffolding by its wording: nothing of it is stored
as conversation, and a user message it was merged into is the same message, stored once.
A user message of a turn that failed without a reply, joined by the host with the next one, is
stored once too: the joined part is stored as the second message.
"""
from __future__ import annotations

import pytest
from conftest import assistant, user
from test_compaction import engine_on

from hermes_trove import tokens
from hermes_trove.ingest import HOST_MAX_ITERATIONS, IngestCursor, is_synthetic, message_identity, plan_joined
from hermes_trove.store import SessionKey

BACKENDS = ("sqlite", "postgresql")

SNAPSHOT = ("[Your active task list was preserved across context compression]\n"
            "- [ ] 1. water the plants (pending)\n- [>] 2. book the dentist (in_progress)")
HERMES_SUMMARY = ("[CONTEXT COMPACTION — REFERENCE ONLY] Earlier turns were compacted into the summary "
                  "below.\n\nThe user asked about plants.")
MERGED_SUMMARY = ("[PRIOR CONTEXT — for reference only; not a new message]\nan older answer\n\n"
                  "[END OF PRIOR CONTEXT — COMPACTION SUMMARY BELOW]\n\n" + HERMES_SUMMARY)


def contents(runtime, session_id="s1"):
    return [r.content for r in runtime.store.page(session_id, 0, 10000)]


def test_a_user_message_the_host_merged_with_its_todo_snapshot_is_stored_once(runtime):
    key = SessionKey("s1", platform="telegram", conversation_id="agent:main:telegram:dm:1")
    typed = user("what is left on my list?")
    runtime.store.ingest(key, [user("hello"), assistant("hi"), typed])  # compaction ingests the turn
    merged = user(typed["content"] + "\n\n" + SNAPSHOT)  # then the host appends the snapshot and merges
    runtime.store.ingest(key, [user("hello"), assistant("hi"), merged, assistant("two things")])
    assert contents(runtime) == ["hello", "hi", typed["content"], "two things"]
    assert message_identity(merged) == message_identity(typed)


def test_a_merged_message_seen_first_is_stored_without_the_snapshot(runtime):
    key = SessionKey("s1")
    runtime.store.ingest(key, [user("plan my week\n\n" + SNAPSHOT + "\n\nand the weekend"), assistant("ok")])
    assert contents(runtime) == ["plan my week\n\nand the weekend", "ok"]


def test_reloaded_host_summaries_and_snapshots_are_not_stored_as_conversation(runtime):
    key = SessionKey("s1")
    reloaded = [user(HERMES_SUMMARY), assistant("earlier answer"), user(MERGED_SUMMARY), assistant("noted"),
                user("run the tool"), assistant("", calls=None), user(SNAPSHOT), user("real question")]
    assert [is_synthetic(m) for m in reloaded] == [True, False, True, False, False, False, True, False]
    runtime.store.ingest(key, reloaded)
    assert contents(runtime) == ["earlier answer", "noted", "run the tool", "", "real question"]


def test_words_a_user_writes_about_those_markers_are_kept():
    text = "why does my todo say [Your active task list was preserved across context compression]?"
    assert not is_synthetic(user(text))
    assert message_identity(user(text)) != message_identity(user("why does my todo say ?"))


def host_merge(messages: list[dict]) -> list[dict]:
    """What Hermes does to two user messages in a row before a request (and so what state.db
    gives back): one message, the second joined to the first after a blank line."""
    out: list[dict] = []
    for m in messages:
        if out and m["role"] == "user" and out[-1]["role"] == "user":
            out[-1] = {**out[-1], "content": out[-1]["content"] + "\n\n" + m["content"]}
        else:
            out.append(dict(m))
    return out


def test_a_message_the_host_merged_into_a_trove_summary_stays_the_users_message(tmp_path):
    eng = engine_on(tmp_path, fresh_tail_count=2)
    doc = "DOC-START please read this document " + "d" * 40000  # kept raw as the whole tail
    turns = [m for i in range(12) for m in (user(f"q{i} " + "w" * 6000), assistant(f"a{i} short"))]
    out = eng.compress(turns + [user(doc)], current_tokens=tokens.count_messages(turns + [user(doc)]) + 3000)
    assert [m["role"] for m in out] == ["user", "user"] and out[1]["content"] == doc
    live = host_merge(out) + [assistant("read it")]
    merged = live[0]
    stored = eng.runtime.store.count("s1")
    for i in range(20):  # the chat goes on until the next compaction
        live += [user(f"later {i} " + "y" * 4000), assistant(f"later answer {i}")]
        if eng.should_compress(tokens.count_messages(live) + 3000):
            break
    live.append(user("now what"))
    out = eng.compress(live, current_tokens=tokens.count_messages(live) + 3000)
    rt = eng.runtime
    assert rt.store.count("s1") == stored + len(live) - 1  # the merged message was not stored again
    row = next(r for r in rt.store.page("s1", 0, 1000) if r.content == doc)
    covered = {i for node in rt.dag.frontier("s1") for i in rt.dag.descendant_store_ids(node.node_id)}
    shown = [m for m in out if "DOC-START" in str(m["content"])]
    assert row.store_id in covered or shown  # summarised or still shown: never dropped unsummarised
    assert not [m for m in out[1:] if str(m["content"]).startswith("[trove summary")]
    assert not is_synthetic(merged) and message_identity(merged) == message_identity(user(doc))


def test_a_user_message_opening_with_a_hosts_tag_but_not_its_wording_is_stored(runtime):
    """Only the host's whole fixed opening marks its summary: a user's own message that starts with
    one of its bracket tags (a note typed that way, a legacy summary pasted into a new chat) and a
    checklist quoted under the snapshot line are the user's words, stored as written."""
    typed = ["[CONTEXT SUMMARY]: we are porting the billing service to Rust; carry on from the tests",
             "[CONTEXT COMPACTION — REFERENCE ONLY] is what my old chat printed, what does it mean?",
             "[PRIOR CONTEXT — for reference only; not a new message] my notes from yesterday",
             "my list:\n\n[Your active task list was preserved across context compression]\n"
             "- [x] ship the release\n- [ ] call Ana",
             "[Your active task list was preserved across context compression]\n- [ ] buy milk"]
    assert [is_synthetic(user(t)) for t in typed] == [False] * len(typed)
    runtime.store.ingest(SessionKey("s1"), [m for t in typed for m in (user(t), assistant("ok"))])
    assert [c for c in contents(runtime) if c != "ok"] == typed


def test_a_user_message_opening_with_the_trove_tag_is_stored(runtime):
    """Trove's own summary message opens with its whole header sentence; a user's message that
    only starts with the bracket tag is the user's, stored as written."""
    from hermes_trove.compaction.assembly import render_summary_text

    typed = "[trove summary] of my week: gym on Monday, dentist on Thursday"
    assert not is_synthetic(user(typed))
    assert is_synthetic(user(render_summary_text([])))  # a reloaded summary still is not conversation
    runtime.store.ingest(SessionKey("s1"), [user(typed), assistant("ok")])
    assert contents(runtime) == [typed, "ok"]


# Hermes appends this user-role request, word for word, when a turn hits its tool-call limit.
MAX_ITERATIONS = ("You've reached the maximum number of tool-calling iterations allowed. "
                  "Please provide a final response summarizing what you've found and accomplished so far, "
                  "without calling any more tools.")


def test_the_hosts_iteration_limit_request_is_not_stored_as_the_users_words(runtime):
    key = SessionKey("s1")
    turn = [user("find the invoices"), assistant("searching"), user(MAX_ITERATIONS), assistant("found three")]
    assert [is_synthetic(m) for m in turn] == [False, False, True, False]
    runtime.store.ingest(key, turn)
    assert contents(runtime) == ["find the invoices", "searching", "found three"]


def test_a_user_quoting_the_iteration_limit_request_is_kept(runtime):
    quoted = [MAX_ITERATIONS[:70], "why did I get: " + MAX_ITERATIONS, MAX_ITERATIONS + " What does that mean?"]
    assert [is_synthetic(user(text)) for text in quoted] == [False, False, False]
    assert not is_synthetic(assistant(MAX_ITERATIONS))  # the model repeating it is the model's words
    runtime.store.ingest(SessionKey("s1"), [user(text) for text in quoted])
    assert contents(runtime) == quoted


def test_the_iteration_limit_wording_is_the_installed_hosts():
    import ast
    import importlib.util
    spec = importlib.util.find_spec("agent.chat_completion_helpers") if importlib.util.find_spec("agent") else None
    if spec is None or spec.origin is None:
        pytest.skip("the host is not installed")
    tree = ast.parse(open(spec.origin, encoding="utf-8").read())
    handler = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "handle_max_iterations")
    literals = {n.value for n in ast.walk(handler) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert HOST_MAX_ITERATIONS == MAX_ITERATIONS and HOST_MAX_ITERATIONS in literals


def host_repair(messages: list[dict]) -> list[dict]:
    """Hermes' own merge of two user messages in a row (its sequence repair before a request), in place."""
    from agent.agent_runtime_helpers import repair_message_sequence
    repair_message_sequence(None, messages)
    return messages


@pytest.mark.parametrize(("first", "second"), [
    ("deploy the billing service", "did it work?"),
    ("line one\n\nline two", "and\n\nanother paragraph"),  # blank lines inside either message
    ("say \"hi\"\n\n\\ done", "\n\nstill here"),  # escapes, and a second message opening with a blank line
])
def test_a_failed_turns_message_the_host_merged_with_the_next_is_stored_once(runtime, first, second):
    key = SessionKey("s1")
    live = [user("hello"), assistant("hi"), user(first)]
    runtime.store.ingest(key, live)  # the turn is ingested, then fails with no reply
    live.append(user(second))
    host_repair(live)  # the next turn: the host joins the two user messages into one
    assert [m["content"] for m in live] == ["hello", "hi", first + "\n\n" + second]
    runtime.store.ingest(key, live)
    live.append(assistant("it worked"))
    runtime.store.ingest(key, live)
    assert contents(runtime) == ["hello", "hi", first, second, "it worked"]
    runtime.store.ingest(key, [user("hello"), assistant("hi"), live[2]])  # a stale copy of the transcript
    runtime.store.ingest(key, live + [user("next")])
    assert contents(runtime) == ["hello", "hi", first, second, "it worked", "next"]


def test_a_message_that_only_opens_with_an_earlier_one_is_stored_whole(runtime):
    key = SessionKey("s1")
    runtime.store.ingest(key, [user("hello"), assistant("hi"), user("deploy"), assistant("done")])
    runtime.store.ingest(key, [user("hello"), assistant("hi"), user("deploy"), assistant("done"),
                               user("deploy\n\nagain please")])
    runtime.store.ingest(key, [user("hello"), assistant("hi"), user("deploy x\n\nmore")])  # not the stored text
    assert contents(runtime) == ["hello", "hi", "deploy", "done", "deploy\n\nagain please", "deploy x\n\nmore"]


def test_the_hosts_iteration_limit_request_joined_to_a_stored_message_adds_nothing(runtime):
    key = SessionKey("s1")
    live = [user("hello"), assistant("hi"), user("search everything")]
    runtime.store.ingest(key, live)
    live.append(user(HOST_MAX_ITERATIONS))
    runtime.store.ingest(key, host_repair(live) + [assistant("summary so far")])
    assert contents(runtime) == ["hello", "hi", "search everything", "summary so far"]


def test_a_join_is_only_read_from_a_plain_user_message_at_the_cursor():
    first = message_identity(user("deploy"))
    cursor = IngestCursor(1, first)
    assert plan_joined([user("deploy\n\nnow")], cursor, [first]).parts == {0: user("now")}
    for shown in (["deploy\n\nnow"], [None], [assistant("deploy\n\nnow")], [user("deploy\n\n")],
                  [user("deploy now")], [{**user("deploy\n\nnow"), "tool_call_id": "c1"}]):
        assert plan_joined(shown, cursor, [first]) is None, shown
    assert plan_joined([user("deploy\n\nnow")], cursor, [first, "newer"]) is None  # not the newest stored


def test_a_user_quoting_the_summary_marker_keeps_the_context_injected_with_the_message():
    # The host sends a user message as its content then the hooks' context (api_content); a kept message
    # carrying the hook's summary block loses that copy when the compacted prompt shows the summary. A user
    # who quotes the marker in the message itself carried none: its injected evidence stays on replay.
    from hermes_trove.compaction.assembly import SUMMARY_MARKER, assemble, carries_injected_summary
    from hermes_trove.dag import NodeRow

    said = f"my log shows '{SUMMARY_MARKER}' then nothing; why?"
    quoted = {**user(said), "api_content": said + "\n\n[trove evidence]\nthe heron key\n[/trove evidence]"}
    injected = {**user("next"), "api_content": "next\n\n" + SUMMARY_MARKER + "\n\n[end of trove summary]"}
    assert not carries_injected_summary(quoted) and carries_injected_summary(injected)
    node = NodeRow(1, "s1", 0, "an earlier talk", 10, 100, 1e9, 1e9 + 1, "normal", "", "", 1e9)
    out, _ = assemble([node], [quoted, assistant("let me look")], [injected], target=4000)
    assert out[1]["api_content"] == quoted["api_content"] and "api_content" not in out[3], out


def test_a_user_message_opening_with_the_whole_summary_marker_is_stored(runtime):
    """A summary message runs from the marker sentence to the footer line; a user quoting the sentence at
    the start of a message (asking what it means) wrote that message, and it is stored as written."""
    from hermes_trove.compaction.assembly import SUMMARY_MARKER, render_summary_text

    typed = f"{SUMMARY_MARKER} is what my screen said after lunch; what happened to the chat?"
    assert not is_synthetic(user(typed))
    for tools in (True, False):  # reloaded summaries, with or without the tools named, still are not conversation
        assert is_synthetic(user(render_summary_text([], tools=tools)))
        assert is_synthetic(user(render_summary_text([], [3, 4], tools=tools) + "\n"))
    runtime.store.ingest(SessionKey("s1"), [user(typed), assistant("it was compacted")])
    assert contents(runtime) == [typed, "it was compacted"]
