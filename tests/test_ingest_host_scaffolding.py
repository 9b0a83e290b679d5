"""The host's compaction scaffolding, as a transcript reloaded from Hermes' state.db shows it.

Hermes marks its own summaries and the todo snapshot it appends after a compaction with
underscore keys that never reach state.db, and it merges two consecutive user messages into one
(the current message and the snapshot right after it). A gateway reloads the transcript from
state.db every turn, so trove must know this scaffolding by its wording: nothing of it is stored
as conversation, and a user message it was merged into is the same message, stored once.
"""
from __future__ import annotations

from conftest import assistant, user

from hermes_trove.ingest import is_synthetic, message_identity
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
