"""Pure conversion helpers of the importer: timestamps, content blocks, branches, remaps."""
from __future__ import annotations

from pathlib import Path

import pytest

from hermes_trove.importer.convert import build_message, expand_hint, is_empty, summary_level, to_epoch, whole_reference
from hermes_trove.importer.files import FileRef, candidate_paths, parse_remap
from hermes_trove.importer.jsonl import active_branch


@pytest.mark.parametrize("value, expected", [
    ("2026-03-02 09:00:00", 1772442000.0),
    ("2026-03-02T09:00:00.000Z", 1772442000.0),
    ("2026-03-02T10:00:00+01:00", 1772442000.0),
    (1772442000000, 1772442000.0),
    (1772442000, 1772442000.0),
    ("1772442000000", 1772442000.0),
    ("", None), ("yesterday", None), (None, None), (True, None),
])
def test_every_timestamp_shape_becomes_utc_epoch_seconds(value, expected):
    assert to_epoch(value) == expected


def test_tool_calls_without_ids_get_stable_synthetic_ids():
    msg = build_message("assistant", [{"type": "toolCall", "name": "read", "arguments": {"p": 1}}],
                        call_id_prefix="openclaw_call_7")
    assert msg["tool_calls"][0]["id"] == "openclaw_call_7_0"
    assert msg["tool_calls"][0]["function"] == {"name": "read", "arguments": '{"p":1}'}


def test_redacted_thinking_is_not_stored_as_reasoning():
    msg = build_message("assistant", [{"type": "thinking", "thinking": "secret", "redacted": True},
                                      {"type": "text", "text": "done"}])
    assert "reasoning" not in msg and msg["content"] == "done"


def test_tool_result_role_maps_to_tool_with_its_call_id():
    msg = build_message("toolResult", [{"type": "text", "text": "ok"}], tool_call_id="c9", tool_name="exec",
                        timestamp=5.0)
    assert msg == {"role": "tool", "content": "ok", "tool_call_id": "c9", "name": "exec", "timestamp": 5.0}


def test_emptiness_counts_tool_calls_and_parts():
    assert is_empty({"role": "assistant", "content": "  "})
    assert not is_empty({"role": "assistant", "content": "", "tool_calls": [{"id": "x"}]})
    assert not is_empty({"role": "user", "content": [{"type": "image_url"}]})
    assert not is_empty({"role": "assistant", "content": "", "reasoning": "thinking only"})


def test_whole_payload_references_are_recognised():
    assert whole_reference("[LCM Tool Output: file_3cfd4ddf04284f7f | tool=exec | 17,311 bytes]\n...") == \
        "file_3cfd4ddf04284f7f"
    assert whole_reference("see [LCM Tool Output: file_3cfd4ddf04284f7f]") is None


def test_fallback_summaries_are_marked_deterministic_and_hints_are_extracted():
    assert summary_level("[2026-11-29 20:49 UTC]\n[Truncated from 6 tokens]") == "deterministic"
    assert summary_level("a fine summary") == "normal"
    assert expand_hint("text\nExpand for details about: exact commands, paths") == "exact commands, paths"


def test_the_active_branch_follows_parents_from_the_last_entry():
    entries = [(2, {"id": "a"}), (3, {"id": "b", "parentId": "a"}), (4, {"id": "c", "parentId": "a"}),
               (5, {"id": "d", "parentId": "c"})]
    assert active_branch(entries) == {2, 4, 5}
    assert active_branch([(1, {"id": "a"}), (2, {"role": "user"})]) is None


def test_a_parent_cycle_does_not_loop_forever():
    assert active_branch([(1, {"id": "a", "parentId": "b"}), (2, {"id": "b", "parentId": "a"})]) == {1, 2}


def test_remaps_rewrite_prefixes_and_fall_back_to_the_lcm_files_layout(tmp_path):
    old, new = parse_remap(f"/home/agent/.openclaw={tmp_path}")
    ref = FileRef("file_0123456789abcdef", 2, "/home/agent/.openclaw/lcm-files/2/file_0123456789abcdef.txt", "x.txt")
    paths = candidate_paths(ref, [(old, new)], [Path("/srv/copy")])
    assert paths[0] == tmp_path / "lcm-files" / "2" / "file_0123456789abcdef.txt"
    assert Path("/srv/copy/lcm-files/2/file_0123456789abcdef.txt") in paths
    with pytest.raises(ValueError, match="OLD=NEW"):
        parse_remap("just-a-path")


def test_ledger_provenance_is_compact_meta_of_the_same_fields():
    import json

    from hermes_trove.importer.claw_db import Conversation, _provenance
    from hermes_trove.importer.convert import compact_meta

    convs = [Conversation(3, "s", key, None, False) for key in ("agent:main:x", None, "", "k\u00e9y \"q\"", 7)]
    rows = [(9, 3, seq, "user", "", None, entry, sender, None)
            for seq in (1, 0, "2", None) for entry in ("e1", None, "", "\u6771 \"x\"", 5)
            for sender in (None, "", '{"name": "Ann"}', "not json")]
    for conv in convs:
        for r in rows:
            for flags in ({}, {"lossy": "no message_parts"}, {"model": "m", "is_error": True}):
                got = _provenance(conv, r, 9, dict(flags))
                sender = json.loads(r[7]) if r[7] and r[7].startswith("{") else None
                want = compact_meta({"conversation_id": 3, "seq": r[2], "message_id": 9, "transcript_entry_id": r[6],
                                     "session_key": conv.session_key, "sender": sender, **flags})
                assert got == want, (conv, r, flags)


def test_a_summary_waits_for_every_source_and_skips_only_deliberately_skipped_messages():
    from hermes_trove.importer import run
    from hermes_trove.importer.rows import SourceSummary

    def leaf(*message_ids: int) -> SourceSummary:
        return SourceSummary("k", "s1", 0, "text", None, None, "", message_ids, ())

    states = {1: 11, 2: run.SKIPPED, 3: 13}
    assert run._resolve(leaf(1, 2, 3), states, {}) == (0, [11, 13])  # the skipped one is left out
    assert run._resolve(leaf(1, 4), states, {}) is None  # message 4 is not in the target
    assert run._resolve(leaf(2), states, {}) is None  # nothing left to summarise
    assert run._resolve(leaf(), states, {}) is None
    condensed = SourceSummary("k2", "s2", 1, "text", None, None, "", (), ("a", "b"))
    assert run._resolve(condensed, states, {"a": (5, 0), "b": (6, 1)}) == (2, [5, 6])
    assert run._resolve(condensed, states, {"a": (5, 0)}) is None
