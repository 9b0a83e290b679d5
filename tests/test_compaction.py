from __future__ import annotations

import collections
import copy
import dataclasses
import json
import random
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT, assistant, make_config, make_engine, tool_call, tool_result, user
from simulate import HostLoop, build_conversation

from hermes_trove import tokens
from hermes_trove.compaction import policy
from hermes_trove.engine import TroveEngine
from hermes_trove.lastcompaction import LastCompactions
from hermes_trove.ops import status
from hermes_trove.runtime import build_runtime

BACKENDS = ("sqlite", "postgresql")  # every test here runs on the file and on a server


def fake_model(behaviour="good", log=None):
    """A completion function standing in for the host's auxiliary model."""
    rng = random.Random(1)

    def complete(messages, model, timeout_s, max_tokens):
        prompt = messages[0]["content"]
        if log is not None:
            log.append(prompt)
        mode = behaviour if behaviour != "random" else rng.choice(["good", "fail", "bloat", "think"])
        if mode == "fail":
            raise TimeoutError("aux timed out")
        if mode == "bloat":
            return prompt + prompt
        if mode == "think":
            return "<think>only reasoning</think>"
        return f"Summary: {prompt[-200:]}\nExpand for details about: the segment"

    return complete


def engine_on(tmp_path, context=64000, behaviour="good", log=None, session="s1", complete=None, **cfg):
    """An engine on a fresh database whose model is ``complete`` or ``fake_model(behaviour)``."""
    rt = build_runtime(make_config(tmp_path, **cfg))
    return make_engine(rt, complete or fake_model(behaviour, log), session=session, context_length=context)


def assert_lossless(eng, session="s1"):
    """Every stored raw message is past the frontier or beneath a node; none stored twice."""
    rt = eng.runtime
    rows = rt.store.page(session, 0, 10 ** 6)
    dupes = collections.Counter((r.role, r.content, r.tool_calls, r.tool_call_id) for r in rows)
    assert max(dupes.values(), default=1) == 1
    frontier = rt.store.session(session).frontier_store_id
    covered = set()
    for node in rt.dag.frontier(session):
        covered.update(rt.dag.descendant_store_ids(node.node_id))
    for r in rows:
        assert r.store_id > frontier or r.store_id in covered, f"store_id {r.store_id} unreachable"


@pytest.mark.parametrize("behaviour", ["good", "fail", "bloat", "think", "random"])
def test_long_conversation_stays_under_threshold_and_loses_nothing(tmp_path, behaviour):
    eng = engine_on(tmp_path, behaviour=behaviour, leaf_chunk_tokens=4000)
    loop = HostLoop(eng)
    for turn in build_conversation(120, seed=11):
        loop.run_turn(turn)
    assert loop.stats.compactions > 0
    assert max(loop.stats.prompts) < eng.threshold_tokens
    assert_lossless(eng)
    assert eng.runtime.dag.depth_stats("s1").get(1)


@pytest.mark.parametrize(("said", "stored"), [("Summary \ud83d of the turns", "Summary \ufffd of the turns"),
                                              ("Summary \ud83d\ude00 of the turns", "Summary \U0001F600 of the turns")],
                         ids=["lone-surrogate", "split-pair"])
def test_a_summary_with_surrogates_is_stored_as_utf8_not_handed_to_the_host(tmp_path, said, stored):
    """A streamed reply can carry an emoji's surrogates apart (or only one of them)."""
    eng = engine_on(tmp_path, context=32000, complete=lambda *a: said, fresh_tail_count=4, leaf_chunk_tokens=1000)
    rng = random.Random(1)
    words = "abcdefgh"
    msgs = [m for i in range(60) for m in (user(f"question {i}: " + " ".join(rng.choice(words) * 5 for _ in range(80))),
                                         assistant(f"answer {i}"))]
    out = eng.compress(msgs, current_tokens=30000, force=True)
    assert eng.state.last_status == "compacted", eng.state.last_reason
    assert len(out) < len(msgs)
    assert eng.runtime.dag.get(1).summary == stored  # the first leaf, as the model wrote it
    assert_lossless(eng)


@pytest.mark.parametrize("seed", range(6))
def test_compaction_converges_under_random_configs(tmp_path, seed):
    rng = random.Random(seed)
    eng = engine_on(tmp_path, behaviour="random", fresh_tail_count=rng.choice([2, 8, 32, 64]),
                      fresh_tail_max_tokens=rng.choice([0, 3000]), leaf_chunk_tokens=rng.choice([800, 3000, 20000]),
                      dynamic_leaf_chunk_enabled=rng.choice([True, False]),
                      incremental_max_depth=rng.choice([-1, 0, 1, 3]), condensation_fanin=rng.choice([2, 4]),
                      threshold_full_sweep_enabled=rng.choice([True, False]))
    loop = HostLoop(eng)
    for turn in build_conversation(60, seed=seed, big_output_chars=rng.choice([5000, 30000])):
        loop.run_turn(turn)
    assert max(loop.stats.prompts) < eng.threshold_tokens
    assert_lossless(eng)


def test_compress_returns_new_valid_dicts_without_host_markers(tmp_path):
    eng = engine_on(tmp_path, fresh_tail_count=4)
    msgs = []
    for i in range(30):
        msgs += [dict(user(f"q{i} " + "w" * 400), _db_persisted=True, api_content="x"),
                 assistant("", [tool_call(f"c{i}", "terminal")]), tool_result(f"c{i}", "r" * 800),
                 assistant(f"a{i}")]
    original = copy.deepcopy(msgs)
    out = eng.compress(msgs, current_tokens=30000, force=True)
    assert msgs == original  # input untouched
    assert out[0]["role"] == "user" and out[0]["content"].startswith("[trove summary")
    assert all("_db_persisted" not in m for m in out)
    assert all(m["role"] != "system" for m in out)
    ids = set()
    for m in out:
        for c in m.get("tool_calls") or []:
            ids.add(c["id"])
        if m["role"] == "tool":
            assert m["tool_call_id"] in ids
    assert eng.compression_count == 1
    assert "node" in out[0]["content"]


def test_entries_that_are_not_messages_do_not_stop_compaction(tmp_path):
    eng = engine_on(tmp_path, context=4000)
    msgs = []
    for i in range(40):
        msgs += [user(f"question {i} " + "x " * 60), assistant(f"answer {i} " + "y " * 60)]
    msgs[5:5], msgs[20:20] = [None], ["junk"]  # the host's list may hold an entry that is no message
    out = eng.compress(msgs, current_tokens=10000)
    assert eng.snapshot()["last_compression_status"] == "compacted", eng.snapshot()["last_compression_reason"]
    assert len(out) < len(msgs) and out[0]["content"].startswith("[trove summary")
    assert_lossless(eng)


def test_compress_with_nothing_to_compact_is_a_no_op_and_does_not_thrash(tmp_path):
    # The cap holds the trigger where it is whatever overhead the host's count implies (window.py).
    eng = engine_on(tmp_path, max_assembly_tokens=int(64000 * 0.35))
    msgs = [user("hello"), assistant("hi")]
    out = eng.compress(msgs, current_tokens=eng.threshold_tokens + 10)
    assert out == msgs and eng._last_compression_made_progress is False
    assert eng.compression_count == 0
    assert eng.should_compress(eng.threshold_tokens + 10) is False
    assert eng.should_compress(int((eng.threshold_tokens + 10) * 1.2)) is True


def test_dropping_the_hosts_persisted_flags_alone_is_no_progress(tmp_path):
    """The host marks each message it saved with ``_db_persisted`` and asks again (up to three times a
    turn) while a compaction reports progress; a result that only drops those flags changed nothing."""
    eng = engine_on(tmp_path, max_assembly_tokens=int(64000 * 0.35))
    msgs = [{**user("hello"), "_db_persisted": True}, {**assistant("hi"), "_db_persisted": True}]
    pressure, results = eng.threshold_tokens + 10, []
    for _attempt in range(3):  # conversation_loop: should_compress, then compress, while attempts < 3
        if eng.should_compress(pressure):
            results.append((eng.compress(msgs, current_tokens=pressure), eng._last_compression_made_progress))
    assert results == [(msgs, False)] and eng.compression_count == 0


def test_a_real_change_with_the_persisted_flags_is_still_progress(tmp_path):
    eng = engine_on(tmp_path, fresh_tail_count=2)
    msgs = [{**(user("m" * 2000) if i % 2 == 0 else assistant("n" * 2000)), "_db_persisted": True} for i in range(12)]
    out = eng.compress(msgs, current_tokens=25000, force=True)
    assert eng._last_compression_made_progress is True and len(out) < len(msgs)
    assert not any("_db_persisted" in m for m in out)


def test_focus_topic_reaches_the_summary_prompt(tmp_path):
    log = []
    eng = engine_on(tmp_path, log=log, fresh_tail_count=2)
    msgs = [user("m" * 2000) if i % 2 == 0 else assistant("n" * 2000) for i in range(12)]
    eng.compress(msgs, current_tokens=25000, focus_topic="keep the invoice ids", force=True)
    assert log and any("keep the invoice ids" in p for p in log)


def test_the_host_hears_of_a_summary_fallback_only_when_a_model_failed(tmp_path):
    """The host tells the user "summary generation failed" when ``_last_summary_fallback_used`` is
    set: a source too small for a model call is shortened by design and is no such failure."""
    small = [user(f"short note {i}") if i % 2 == 0 else assistant("ok") for i in range(8)]
    good = engine_on(tmp_path / "good", fresh_tail_count=2)
    assert good.compress(small, current_tokens=30000, force=True) != small
    assert "deterministic" in good.state.last_result["levels"]
    assert good._last_summary_fallback_used is False
    failing = engine_on(tmp_path / "failing", behaviour="fail", fresh_tail_count=2)
    big = [user("m" * 3000) if i % 2 == 0 else assistant("n" * 3000) for i in range(10)]
    assert failing.compress(big, current_tokens=30000, force=True) != big
    assert failing._last_summary_fallback_used is True


def test_summary_model_and_fallbacks_are_tried_in_order_then_deterministic(tmp_path):
    seen = []

    def complete(messages, model, timeout_s, max_tokens):
        seen.append(model)
        raise RuntimeError("down")

    eng = engine_on(tmp_path, complete=complete, fresh_tail_count=2, summary_model="primary",
                    summary_fallback_models=("backup",))
    from hermes_trove.compaction.summarize import BREAKERS

    msgs = [user("m" * 3000) if i % 2 == 0 else assistant("n" * 3000) for i in range(10)]
    out = eng.compress(msgs, current_tokens=30000, force=True)
    assert seen[:2] == ["primary", "backup"]
    assert out != msgs and eng.state.last_result["levels"][0] == "deterministic"
    # two failures each: both routes' breakers are now open and skipped
    assert BREAKERS.is_open("primary", __import__("time").time())


def test_engine_survives_deepcopy_and_copies_share_the_database(tmp_path):
    eng = engine_on(tmp_path)
    clone = copy.deepcopy(eng)
    clone.ingest([user("from the clone")])
    assert eng.runtime.store.count("s1") == 1
    assert clone.runtime is eng.runtime and clone.state is not eng.state
    assert clone.complete is eng.complete  # the injected model survives the host's deep copy


def test_new_session_carries_deep_nodes_and_they_expand_to_original_messages(tmp_path):
    eng = engine_on(tmp_path, leaf_chunk_tokens=600, condensation_fanin=2, fresh_tail_count=2)
    loop = HostLoop(eng)
    for turn in build_conversation(40, seed=2):
        loop.run_turn(turn)
    old_frontier = eng.runtime.dag.frontier("s1")
    assert any(n.depth >= 2 for n in old_frontier)
    eng.on_session_end("s1", loop.messages)
    eng.on_session_reset()
    eng.bind_session_state(None, "s2")
    carried = eng.runtime.dag.frontier("s2")
    assert carried and all(n.depth >= 2 for n in carried)
    assert {n.node_id for n in carried} == {n.node_id for n in old_frontier if n.depth >= 2}
    raw = eng.runtime.dag.descendant_store_ids(carried[0].node_id)
    assert raw and all(eng.runtime.store.get(i).session_id == "s1" for i in raw)


def test_retain_depth_zero_carries_nothing(tmp_path):
    eng = engine_on(tmp_path, leaf_chunk_tokens=600, new_session_retain_depth=0, fresh_tail_count=2)
    loop = HostLoop(eng)
    for turn in build_conversation(20, seed=2):
        loop.run_turn(turn)
    eng.on_session_reset()
    eng.bind_session_state(None, "s2")
    assert eng.runtime.dag.frontier("s2") == []


def test_on_session_end_is_idempotent_and_tolerates_empty_lists(tmp_path):
    eng = engine_on(tmp_path)
    msgs = [user("a"), assistant("b")]
    eng.on_session_end("s1", msgs)
    eng.on_session_end("s1", msgs)
    eng.on_session_end("s1", [])
    eng.on_session_end("other", [])
    assert eng.runtime.store.count("s1") == 2


def test_restart_resumes_the_session_from_the_database(tmp_path):
    eng = engine_on(tmp_path, fresh_tail_count=4, leaf_chunk_tokens=1500)
    loop = HostLoop(eng)
    turns = list(build_conversation(60, seed=4))
    for turn in turns[:30]:
        loop.run_turn(turn)
    frontier = eng.runtime.store.session("s1").frontier_store_id
    assert frontier > 0
    rt2 = build_runtime(eng.runtime.config)
    eng2 = make_engine(rt2, eng.complete, context_length=64000)
    loop.engine = eng2
    for turn in turns[30:]:
        loop.run_turn(turn)
    assert rt2.store.session("s1").frontier_store_id > frontier
    assert max(loop.stats.prompts) < eng2.threshold_tokens
    assert_lossless(eng2)


def test_two_engine_copies_never_summarise_the_same_messages_twice(tmp_path):
    eng = engine_on(tmp_path, fresh_tail_count=2)
    other = copy.deepcopy(eng)
    msgs = [user("m" * 3000) if i % 2 == 0 else assistant("n" * 3000) for i in range(10)]
    eng.compress(msgs, current_tokens=30000, force=True)
    other.compress(msgs, current_tokens=30000, force=True)
    covered = collections.Counter()
    for node in eng.runtime.dag.visible("s1"):
        if node.depth == 0:
            covered.update(eng.runtime.dag.source_ids(node))
    assert covered and max(covered.values()) == 1


def test_ignored_sessions_store_nothing_and_still_get_bounded(tmp_path):
    eng = engine_on(tmp_path, session="cron_1", ignore_session_patterns=("cron_*",))
    rt = build_runtime(make_config(tmp_path, ignore_session_patterns=("cron_*",)))
    eng = TroveEngine(rt)
    eng.update_model("m", 64000)
    eng.on_session_start("cron_1", platform="cron")
    msgs = [user("x" * 4000) for _ in range(40)]
    eng.ingest(msgs)
    out = eng.compress(msgs, current_tokens=50000)
    assert rt.store.count() == 0
    assert tokens.count_messages(out) < eng.threshold_tokens


def test_stateless_sessions_are_read_only(tmp_path):
    rt = build_runtime(make_config(tmp_path, stateless_session_patterns=("telegram:*",)))
    eng = TroveEngine(rt)
    eng.update_model("m", 64000)
    eng.on_session_start("chat9", platform="telegram")
    assert eng.snapshot()["session_mode"] == "stateless"
    eng.ingest([user("hello")])
    eng.on_session_end("chat9", [user("hello")])
    assert rt.store.count() == 0


def test_ignore_message_patterns_skip_and_count(tmp_path):
    pytest.importorskip("regex")
    eng = engine_on(tmp_path, ignore_message_patterns=("^Cronjob Response:", "([unclosed"))
    assert eng.runtime.filters.invalid_patterns == ("([unclosed",)
    eng.ingest([user("Cronjob Response: disk 91%"), user("real question")])
    assert [r.content for r in eng.runtime.store.page("s1")] == ["real question"]
    assert eng.runtime.counters["ignored_message_count"] == 1


def test_session_globs_match_id_platform_and_both():
    from hermes_trove.filters import SessionFilters

    f = SessionFilters.build(ignore=("cron:*",), stateless=("**:secret*",))
    assert f.ignored_by("abc", "cron") == "cron:*"
    assert f.ignored_by("abc", "cli") is None
    assert f.stateless_by("secret-1", "telegram") == "**:secret*"
    assert SessionFilters.build(ignore=("a*",)).ignored_by("a:b", "") is None


def test_threshold_follows_update_model_and_assembly_caps(tmp_path):
    eng = engine_on(tmp_path, context=100000, max_assembly_tokens=20000)
    assert eng.threshold_tokens == 20000
    eng.update_model("m", 200000)
    assert eng.threshold_tokens == 20000
    eng2 = engine_on(tmp_path / "b", context=100000)
    assert eng2.threshold_tokens == 35000


def test_crash_between_summary_call_and_commit_loses_nothing(tmp_path):
    """A process killed inside the summary call leaves raw rows intact; the next run continues."""
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(ROOT / 'tests')!r})
        import conftest
        from conftest import make_config, user, assistant
        from pathlib import Path
        from hermes_trove.runtime import build_runtime
        from hermes_trove.engine import TroveEngine
        rt = build_runtime(make_config(Path({str(tmp_path)!r}), fresh_tail_count=2, leaf_chunk_tokens=800))
        calls = []
        def complete(messages, model, timeout_s, max_tokens):
            calls.append(1)
            if len(calls) == 3:
                os._exit(9)  # killed mid-compaction, after two committed leaves
            return "short summary"
        eng = TroveEngine(rt, complete=complete); eng.update_model("m", 64000); eng.on_session_start("s1")
        msgs = [user(f"m{{i}} " + "m" * 3000) if i % 2 == 0 else assistant(f"n{{i}} " + "n" * 3000)
                for i in range(12)]
        eng.compress(msgs, current_tokens=40000, force=True)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 9, proc.stderr
    rt = build_runtime(make_config(tmp_path, fresh_tail_count=2, leaf_chunk_tokens=800))
    assert rt.store.count("s1") == 12
    leaves = [n for n in rt.dag.visible("s1") if n.depth == 0]
    assert len(leaves) == 2
    frontier = rt.store.session("s1").frontier_store_id
    assert frontier == max(max(rt.dag.source_ids(n)) for n in leaves)
    eng = TroveEngine(rt, complete=fake_model())
    eng.update_model("m", 64000)
    eng.on_session_start("s1")
    msgs = [user(f"m{i} " + "m" * 3000) if i % 2 == 0 else assistant(f"n{i} " + "n" * 3000) for i in range(12)]
    out = eng.compress(msgs, current_tokens=40000, force=True)
    assert out != msgs
    assert_lossless(eng)
    if rt.db.kind == "sqlite":  # the file's own check; a server has no file to check
        with rt.db.transaction() as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_rotate_style_frontier_drops_pre_frontier_messages_from_the_prompt(tmp_path):
    eng = engine_on(tmp_path, fresh_tail_count=4)
    msgs = [user(f"q{i}") if i % 2 == 0 else assistant(f"a{i}") for i in range(20)]
    eng.ingest(msgs)
    rows = eng.runtime.store.page("s1", 0, 100)
    eng.runtime.store.advance_frontier("s1", rows[15].store_id)
    out = eng.compress(msgs, current_tokens=eng.threshold_tokens + 1, force=True)
    assert [m["content"] for m in out if not m.get("_trove_summary")] == [m["content"] for m in msgs[16:]]


def test_config_replace_keeps_frozen_contract(tmp_path):
    cfg = make_config(tmp_path)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.fresh_tail_count = 3  # type: ignore[misc]


def test_a_session_whose_messages_were_all_filtered_keeps_its_prompt(tmp_path):
    pytest.importorskip("regex")
    eng = engine_on(tmp_path, ignore_message_patterns=("^noise",), fresh_tail_count=2)
    msgs = [user(f"noise {i} " + "x" * 3000) for i in range(12)]
    out = eng.compress(msgs, current_tokens=40000, force=True)
    assert eng.runtime.store.count("s1") == 0
    assert out and out[-1] == msgs[-1]


def test_compressing_only_a_head_of_the_transcript_summarises_it_without_gaps(tmp_path):
    """The gateway's /compress here hands a temporary agent only the head of the live transcript
    and keeps the rest itself: the head is compacted whole, with no tail of trove's inside it."""
    eng = engine_on(tmp_path, fresh_tail_count=4)
    msgs = [user(f"q{i} " + "w" * 2000) if i % 2 == 0 else assistant(f"a{i} " + "v" * 2000) for i in range(40)]
    eng.ingest(msgs)
    head = msgs[:30]
    out = eng.compress(head, current_tokens=tokens.count_messages(head) + 1500, force=True)
    assert [m["content"][:15] for m in out] == ["[trove summary]"]
    assert_lossless(eng)
    frontier = eng.runtime.store.session("s1").frontier_store_id
    rows = eng.runtime.store.page("s1", 0, 100)
    assert frontier == rows[29].store_id  # the whole head, nothing after it
    eng.ingest(msgs + [user("after")])
    assert eng.runtime.store.count("s1") == 41


def test_a_long_history_keeps_the_frontier_bounded_and_its_lineage_whole(tmp_path):
    """A history whose depth-3 nodes alone overflow the frontier bound condenses past the cap,
    one full group at a time, until the bound holds; every message stays reachable once."""
    from hermes_trove.compaction import policy
    from hermes_trove.compaction.compactor import CompactionLimits, Compactor
    from hermes_trove.compaction.summarize import Summarizer
    from hermes_trove.store import SessionKey

    eng = engine_on(tmp_path)
    rt, key = eng.runtime, SessionKey("s1", platform="cli")
    tops = policy.FRONTIER_BOUND + 12
    with rt.db.transaction() as conn:
        ids = rt.store.append_bulk(key, [user(f"old message {i}") for i in range(tops * 64)], conn=conn)
        level = [rt.dag.add_leaf("s1", f"leaf {i}", [i], token_count=5, source_token_count=5, earliest_at=i,
                                 latest_at=i, conn=conn) for i in ids]
        for depth in (1, 2, 3):
            level = [rt.dag.add_condensed("s1", depth, f"d{depth}", level[j:j + 4], token_count=5,
                                          source_token_count=20, earliest_at=0, latest_at=0, conn=conn)
                     for j in range(0, len(level), 4)]
        rt.store.advance_frontier("s1", ids[-1])
    assert len(rt.dag.frontier("s1")) == tops
    for _ in range(3):
        Compactor(rt, key, CompactionLimits(eng.threshold_tokens, eng.context_length),
                  Summarizer(rt.config, fake_model())).run([user("now")])
    frontier = rt.dag.frontier("s1")
    assert len(frontier) <= policy.FRONTIER_BOUND and max(n.depth for n in frontier) == 4
    with rt.db.transaction() as conn:
        assert rt.dag.multi_parent_nodes(conn) == [] and rt.dag.overlapping_frontier(conn) == {}
    assert_lossless(eng)
    covered = [s for n in frontier for s in rt.dag.descendant_store_ids(n.node_id)]
    assert sorted(covered) == ids  # each message beneath exactly one frontier node


def host_attempts(eng, msgs, pressure, attempts=3):
    """conversation_compression's order: should_compress, compress, a result equal to the list before is
    no progress (nothing rewritten); otherwise the list is rewritten and saved again (flags set anew)."""
    seen = []
    for _attempt in range(attempts):
        if not eng.should_compress(pressure):
            break
        before = copy.deepcopy(msgs)
        out = eng.compress(msgs, current_tokens=pressure)
        seen.append((out != before, eng._last_compression_made_progress))
        if out != before:
            assert not any("_db_persisted" in m for m in out)  # a rewritten list is saved anew
            msgs = [{**m, "_db_persisted": True} for m in out]
    return msgs, seen


def test_a_repair_among_saved_messages_is_progress_once_then_no_progress(tmp_path):
    """An orphan tool result and an injected summary block riding in api_content are real changes
    even when every message carries the host's saved flag; the repaired list, saved again, is no
    progress, so the host stops asking."""
    from hermes_trove.compaction.assembly import SUMMARY_HEADER
    eng = engine_on(tmp_path, max_assembly_tokens=int(64000 * 0.35))
    msgs = [{**m, "_db_persisted": True} for m in (
        tool_result("gone", "an orphan result"), {**user("hello"), "api_content": SUMMARY_HEADER + " old\n\nhello"},
        assistant("hi"))]
    out, seen = host_attempts(eng, msgs, eng.threshold_tokens + 10)
    assert seen == [(True, True), (False, False)]
    assert [m["role"] for m in out] == ["user", "assistant"] and "api_content" not in out[0]


def test_after_a_switch_to_a_small_window_each_summary_input_fits_half_of_it(tmp_path):
    # A fallback model with a 16K window gets the summary requests too: a default 20,000-token leaf
    # chunk would be refused there, and every leaf would fall to the deterministic level.
    seen: list[int] = []

    def complete(messages, model, timeout_s, max_tokens):
        seen.append(tokens.count(messages[0]["content"]))
        return "summary of the segment"

    rt = build_runtime(make_config(tmp_path))
    eng = make_engine(rt, complete, context_length=128000)
    msgs = [m for i in range(40) for m in (user(f"turn {i} " + "word " * 500), assistant(f"reply {i}"))]
    eng.ingest(msgs)
    eng.update_model("fake-model-small", 16000)
    eng.compress(msgs, current_tokens=tokens.count_messages(msgs))
    assert seen and max(seen) <= 8000 + 1000, seen  # half the window, plus the summary instructions
    levels = {n.level for n in rt.dag.visible("s1")}
    assert levels and "deterministic" not in levels, levels


def test_on_a_16k_window_every_summary_request_leaves_room_for_its_answer(tmp_path):
    # A provider refuses a request whose record plus its answer allowance (max_tokens) passes the
    # window. Four depth-2 summaries asked a 4,000-token depth-3 summary (8,000 allowed) of a 16K
    # model: refused, and every refusal counts toward the route's circuit breaker.
    window, refused, asked = 16384, [], []

    def complete(messages, model, timeout_s, max_tokens):
        need = tokens.count(messages[0]["content"]) + max_tokens
        asked.append(need)
        if need > window:
            refused.append(need)
            raise RuntimeError(f"maximum context length is {window} tokens, {need} requested")
        return " ".join(f"w{i}" for i in range(max_tokens // 2))  # a long answer, inside its allowance

    rt = build_runtime(make_config(tmp_path))
    eng = make_engine(rt, complete, context_length=window)
    rng = random.Random(1)
    history: list[dict] = []
    for t in range(400):
        history += [user(f"turn {t} " + " ".join(f"t{rng.randint(0, 999)}" for _ in range(300))),
                    assistant(f"reply {t} " + "ok " * 100)]
        eng.ingest(history)
        if tokens.count_messages(history) > eng.threshold_tokens:
            history = eng.compress(history, current_tokens=tokens.count_messages(history))
    assert max(n.depth for n in rt.dag.visible("s1")) >= 3  # condensed three times over
    assert asked and refused == [], refused
    assert {n.level for n in rt.dag.visible("s1")} == {"normal"}


def test_a_record_the_window_cannot_hold_is_cut_without_asking_and_the_rest_are_summarised(tmp_path):
    # Eight long tool results in one group make a record of about 12,000 tokens for an 8K model:
    # asking would be refused twice, open the route's circuit breaker, and leave every later leaf
    # (which would fit) to the deterministic level too.
    window, refused = 8192, []

    def complete(messages, model, timeout_s, max_tokens):
        need = tokens.count(messages[0]["content"]) + max_tokens
        if need > window:
            refused.append(need)
            raise RuntimeError(f"maximum context length is {window} tokens, {need} requested")
        return "point " * (max_tokens // 2)

    rt = build_runtime(make_config(tmp_path))
    eng = make_engine(rt, complete, context_length=window)
    calls = [tool_call(f"c{i}", "terminal") for i in range(8)]
    results = [tool_result(f"c{i}", f"out{i} " + " ".join(f"v{i}x{j}" for j in range(1500))) for i in range(8)]
    history = [user("run the eight checks"), assistant("running", calls), *results, assistant("done")]
    history += [m for t in range(60) for m in (user(f"turn {t} " + "word " * 200), assistant(f"reply {t}"))]
    eng.ingest(history)
    eng.compress(history, current_tokens=tokens.count_messages(history))
    levels = collections.Counter(n.level for n in rt.dag.visible("s1"))
    assert refused == [], refused
    assert levels["deterministic"] and levels["normal"] >= 3, levels


def refusing_model(window, refused, asked=None):
    """A model with a ``window``-token context: a request whose prompt plus ``max_tokens`` passes it is
    refused, as a provider does; any other gets an answer of about half its allowance."""

    def complete(messages, model, timeout_s, max_tokens):
        need = tokens.count(messages[0]["content"]) + max_tokens
        if asked is not None:
            asked.append(need)
        if need > window:
            refused.append(need)
            raise RuntimeError(f"maximum context length is {window} tokens, {need} requested")
        return "point " * max(1, max_tokens // 4)

    return complete


def test_a_summary_model_with_a_smaller_window_gets_requests_that_fit_it(tmp_path):
    # The chat model has 128K; TROVE_SUMMARY_MODEL names a 16K model and TROVE_SUMMARY_CONTEXT_LENGTH
    # says so. A default 20,000-token leaf chunk sized by the chat window would be refused there.
    refused, asked = [], []
    rt = build_runtime(make_config(tmp_path, summary_model="small-summariser", summary_context_length=16000))
    eng = make_engine(rt, refusing_model(16000, refused, asked), context_length=128000)
    msgs = [m for i in range(60) for m in (user(f"turn {i} " + " ".join(f"w{i}x{j}" for j in range(700))),
                                           assistant(f"reply {i}"))]
    eng.ingest(msgs)
    eng.compress(msgs, current_tokens=tokens.count_messages(msgs), force=True)
    assert asked and refused == [], refused
    assert max(asked) <= 16000
    levels = collections.Counter(n.level for n in rt.dag.visible("s1"))
    assert levels and set(levels) == {"normal"}, levels


@pytest.mark.parametrize("window,level", [(1424, "deterministic"), (2000, "normal"), (16000, "normal")])
def test_a_leaf_says_which_message_its_summarizer_read_only_in_part(tmp_path, window, level):
    # A record shows a message's first and last 3,000 characters; the middle of a 20,000-character
    # paste never reaches the summarizer, whether a model summarises the record or (a window too
    # small for it) the record is shortened without one. The leaf names the message and where the
    # whole text is; leaves of ordinary messages carry no such line.
    refused = []
    rt = build_runtime(make_config(tmp_path, summary_context_length=window))
    eng = make_engine(rt, refusing_model(window, refused), context_length=128000)
    paste = "START " + " ".join(f"b{j}" for j in range(4000)) + " END"
    msgs = [user("hello"), assistant("ok"), user(paste), assistant("noted")]
    msgs += [m for t in range(30) for m in (user(f"turn {t} " + "word " * 200), assistant(f"reply {t}"))]
    eng.ingest(msgs)
    eng.compress(msgs, current_tokens=tokens.count_messages(msgs), force=True)
    assert refused == [], refused
    paste_id = next(r.store_id for r in rt.store.backlog("s1", 0) if r.content == paste)
    noted = []
    for node in rt.dag.visible("s1"):
        if node.depth:
            continue
        covers = paste_id in rt.dag.descendant_store_ids(node.node_id)
        has_note = "[Read in part:" in node.summary
        assert has_note is covers, (node.node_id, node.summary[-200:])
        if covers:
            noted.append(node)
    [leaf] = noted
    assert leaf.level == level
    assert f"store_id {paste_id} ({len(paste):,} characters)" in leaf.summary
    assert "Read in part" not in (leaf.expand_hint or "")
    assert leaf.token_count == tokens.count(leaf.summary)


def test_a_leaf_of_many_long_tool_outputs_names_a_few_and_counts_the_rest(tmp_path):
    # An agent session reads many files of over 6,000 characters. Each leaf's read-in-part line
    # names the three longest of them and counts the others, so its size does not grow with the
    # number of long outputs a leaf covers (it is on every later prompt and every merge's input).
    rt = build_runtime(make_config(tmp_path))
    eng = make_engine(rt, refusing_model(128000, []), context_length=128000)
    msgs = [user("read the files")]
    for i in range(6):
        body = "\n".join(f"line {i}.{j}: " + "x" * 60 for j in range(100 + 5 * i))  # 7,000-9,000 characters
        msgs += [assistant("", [tool_call(f"c{i}", "read_file", f'{{"path": "f{i}.py"}}')]),
                 tool_result(f"c{i}", body, "read_file")]
    msgs += [assistant("done")] + [m for t in range(30) for m in (user(f"q {t} " + "word " * 200), assistant(f"a {t}"))]
    eng.ingest(msgs)
    eng.compress(msgs, current_tokens=tokens.count_messages(msgs), force=True)
    long_rows = [r for r in rt.store.backlog("s1", 0) if r.role == "tool"]
    assert len(long_rows) == 6 and all(len(r.content) > 6000 for r in long_rows)
    leaves = [n for n in rt.dag.visible("s1") if n.depth == 0 and "[Read in part:" in n.summary]
    assert len(leaves) == 1, [(n.depth, n.summary[-300:]) for n in rt.dag.visible("s1")]
    [leaf] = leaves
    assert {r.store_id for r in long_rows} <= set(rt.dag.descendant_store_ids(leaf.node_id))
    note = leaf.summary[leaf.summary.index("[Read in part:"):]
    longest = sorted(long_rows, key=lambda r: -len(r.content))[:3]
    assert note.count("store_id ") == 3, note
    assert all(f"store_id {r.store_id} ({len(r.content):,} characters)" in note for r in longest), note
    assert "and 3 more messages over 6,000 characters" in note and "trove_expand(node_id=N)" in note, note
    assert leaf.token_count == tokens.count(leaf.summary)


def test_a_merge_that_keeps_a_leafs_read_in_part_line_keeps_it_out_of_its_expand_hint(tmp_path):
    # Leaves of long tool outputs end with their topics and then the read-in-part line. A merge the
    # model cannot write is cut from its children's text, head and tail: the tail is a leaf's topics
    # and that line. The merge's expand hint (shown by the tools for each node) is the topics alone.
    def model(messages, name, timeout_s, max_tokens):
        if "[d0 node " in messages[0]["content"]:
            raise RuntimeError("the merge model is down")
        return "point " * max(1, max_tokens // 8) + "\nExpand for details about: file reads"

    rt = build_runtime(make_config(tmp_path))
    eng = make_engine(rt, model, context_length=128000)
    msgs = [user("read the files")]
    for i in range(60):
        body = "\n".join(f"line {i}.{j}: " + "x" * 60 for j in range(110))  # about 7,900 characters
        msgs += [assistant("", [tool_call(f"c{i}", "read_file", f'{{"path": "f{i}.py"}}')]),
                 tool_result(f"c{i}", body, "read_file")]
    msgs += [assistant("done")] + [m for t in range(10) for m in (user(f"q {t}"), assistant(f"a {t}"))]
    eng.ingest(msgs)
    eng.compress(msgs, current_tokens=tokens.count_messages(msgs), force=True)
    nodes = rt.dag.visible("s1")
    merged = [n for n in nodes if n.depth >= 1 and n.level == "deterministic" and "[Read in part:" in n.summary]
    assert merged, [(n.depth, n.level, n.summary[-120:]) for n in nodes]
    for n in merged:
        assert n.expand_hint == "file reads", n.expand_hint


def test_the_summary_window_comes_from_the_knob_else_the_hosts_auxiliary_setting(tmp_path, monkeypatch):
    from hermes_trove.compaction.summarize import Summarizer

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HERMES_HOME", str(home))
    (home / "config.yaml").write_text("auxiliary:\n  compression:\n    context_length: 24000\n", encoding="utf-8")
    cfg = make_config(home)
    assert Summarizer(cfg, None).window(128000) == 24000  # the host's auxiliary route and its window
    assert Summarizer(cfg, None).window(16000) == 16000  # never more than the chat model's
    named = dataclasses.replace(cfg, summary_model="other-model")
    assert Summarizer(named, None).window(128000) == 128000  # the host's setting is for another model
    assert Summarizer(dataclasses.replace(named, summary_context_length=20000), None).window(128000) == 20000
    (home / "config.yaml").write_text("auxiliary:\n  compression:\n    context_length: lots\n", encoding="utf-8")
    assert Summarizer(cfg, None).window(128000) == 128000  # a value that is no number: unknown


def test_the_hosts_summary_window_is_read_from_the_runtimes_profile_on_any_thread(tmp_path, monkeypatch):
    # A gateway serving several profiles scopes each turn to its profile's home; a background pass
    # (a rollup) runs on a thread of its own that carries no such scope. The host's setting is read
    # from the runtime's own home either way, never from the process's default home.
    import threading

    from hermes_trove.compaction.summarize import Summarizer

    default, profile = tmp_path / "default", tmp_path / "profiles" / "work"
    for home, window in ((default, 24000), (profile, 12000)):
        home.mkdir(parents=True)
        (home / "config.yaml").write_text(f"auxiliary:\n  compression:\n    context_length: {window}\n",
                                          encoding="utf-8")
    monkeypatch.setenv("HERMES_HOME", str(default))
    summarizer = Summarizer(make_config(profile), None)
    seen = []
    worker = threading.Thread(target=lambda: seen.append(summarizer.window(128000)))
    worker.start()
    worker.join()
    assert seen == [12000] and summarizer.window(128000) == 12000
    assert Summarizer(make_config(default), None).window(128000) == 24000


def test_reading_the_hosts_summary_window_creates_no_home_where_the_runtime_has_none(tmp_path, monkeypatch):
    # The host's config read creates a Hermes home (folders, SOUL.md) for the home it reads; a runtime
    # whose home is no folder (a path that was never a profile) reads the setting as unknown instead.
    from hermes_trove.compaction.summarize import Summarizer

    default = tmp_path / "default"
    default.mkdir()
    (default / "config.yaml").write_text("auxiliary:\n  compression:\n    context_length: 24000\n", encoding="utf-8")
    monkeypatch.setenv("HERMES_HOME", str(default))
    nowhere = tmp_path / "nowhere" / "home"
    assert Summarizer(make_config(nowhere), None).window(128000) == 128000
    assert not (tmp_path / "nowhere").exists()


def test_a_compaction_over_a_config_yaml_that_does_not_parse_writes_no_copy_and_prints_nothing(tmp_path, monkeypatch,
                                                                                               capfd):
    # The host's config loader, given a config.yaml it cannot parse, copies it aside (config.yaml.bak-...)
    # and prints a warning; a compaction reads the host's auxiliary window from that file, so it left a new
    # copy and a printed warning behind. Trove's read checks that the file parses first: neither happens,
    # and the window reads as unknown.
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HERMES_HOME", str(home))
    (home / "config.yaml").write_text("auxiliary:\n  compression:\n    context_length: 24000\n bad: [\n",
                                      encoding="utf-8")
    before = sorted(p.name for p in home.iterdir())
    rt = build_runtime(make_config(home))
    eng = make_engine(rt, fake_model(), context_length=128000)
    msgs = [m for t in range(30) for m in (user(f"question {t} " + "w " * 200), assistant(f"answer {t} " + "v " * 200))]
    eng.ingest(msgs)
    capfd.readouterr()
    eng.compress(msgs, current_tokens=tokens.count_messages(msgs), force=True)
    assert rt.dag.visible(eng.session_id), eng.get_status()
    out, err = capfd.readouterr()
    assert not out and not err, (out, err)
    assert not [p for p in home.iterdir() if p.name.startswith("config.yaml") and p.name != "config.yaml"], \
        sorted(p.name for p in home.iterdir())
    assert "config.yaml" in before


def test_a_condensation_group_larger_than_the_window_condenses_the_nodes_that_fit(tmp_path):
    # Four 2,500-token leaves make a 10,000-token merge record; an 8K model cannot take it. The
    # group takes the two oldest (they fit), which are summarised by the model, not cut; the other
    # two stay on the frontier for a later condensation.
    from hermes_trove.compaction.compactor import CompactionLimits, Compactor
    from hermes_trove.compaction.summarize import Summarizer
    from hermes_trove.store import SessionKey

    window, refused = 8192, []
    eng = engine_on(tmp_path, context=window)
    rt, key = eng.runtime, SessionKey("s1", platform="cli")
    with rt.db.transaction() as conn:
        ids = rt.store.append_bulk(key, [user(f"old message {i}") for i in range(4)], conn=conn)
        leaves = []
        for i, sid in enumerate(ids):
            text = " ".join(f"leaf{i}fact{j}" for j in range(900))
            leaves.append(rt.dag.add_leaf("s1", text, [sid], token_count=tokens.count(text), source_token_count=5000,
                                          earliest_at=i + 1, latest_at=i + 1, conn=conn))
        rt.store.advance_frontier("s1", ids[-1])
    assert sum(tokens.count(n.summary) for n in rt.dag.frontier("s1")) > window
    Compactor(rt, key, CompactionLimits(eng.threshold_tokens, window),
              Summarizer(rt.config, refusing_model(window, refused))).run([user("now")])
    frontier = rt.dag.frontier("s1")
    parents = [n for n in frontier if n.depth == 1]
    assert refused == [] and len(parents) == 1 and parents[0].level == "normal", [(n.depth, n.level) for n in frontier]
    assert sorted(rt.dag.descendant_store_ids(parents[0].node_id)) == ids[:2]
    assert sorted(n.node_id for n in frontier if n.depth == 0) == sorted(leaves[2:])
    assert_lossless(eng)


@pytest.mark.parametrize(("live", "stored", "keeps"), [
    ([1, 2, 3, 4], [1, 2, 3, 4, 5, 6], True),     # the host passed a prefix and keeps 5, 6 itself
    ([1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6], False),  # the whole conversation
    ([1, 2, 3, 0], [1, 2, 3, 4], False),          # the newest message shown rewritten stands in for row 4
    ([1, 2, 3, 0], [1, 2, 3, 4, 5], True),
    ([0, 0], [1, 2], False),                      # nothing of the list is stored: nothing to read off
    ([], [1], False),
])
def test_host_keeps_tail_reads_whether_the_store_goes_on_past_the_passed_list(live, stored, keeps):
    assert policy.host_keeps_tail(live, stored) is keeps


def _exchanges(n: int) -> list[dict]:
    return [m for i in range(n) for m in (user(f"here turn {i}: the lantern code is {1000 + i}"),
                                         assistant(f"noted lantern code {1000 + i}"))]


def test_compress_here_compacts_the_whole_prefix_the_host_passes_under_the_default_tail(tmp_path):
    # ``/compress here 2`` on a 16-message chat: the host stores every turn, then passes the first 12
    # messages and keeps the last two exchanges itself. The default 32-message tail held all 12 back.
    eng = engine_on(tmp_path)
    assert eng.config.fresh_tail_count == 32
    chat = _exchanges(8)
    eng.ingest(chat)
    head = chat[:12]
    out = eng.compress(head, current_tokens=2000, force=True)
    assert eng.state.last_status == "compacted", eng.state.last_reason
    assert eng._last_compression_made_progress and eng.state.last_result["host_kept_tail"]
    assert out and all(m["content"].startswith("[trove summary") for m in out)  # no raw head message left
    rt = eng.runtime
    covered = {i for node in rt.dag.frontier("s1") for i in rt.dag.descendant_store_ids(node.node_id)}
    by_content = {r.content: r.store_id for r in rt.store.page("s1", 0, 100)}
    assert covered == {by_content[m["content"]] for m in head}  # the host's kept tail is not summarised
    assert rt.store.session("s1").frontier_store_id == by_content[head[-1]["content"]]
    assert_lossless(eng)


def test_the_exchanges_a_compress_here_kept_come_back_once_when_the_next_list_lacks_them(tmp_path):
    # a gateway compacting in place writes back only the summary of the prefix and reloads the chat from
    # there: the next turn's hook brings the four kept messages; a list that shows or carries them gets none
    from hermes_trove.keptail import HEADER, kept_tail_context

    chat = _exchanges(8)
    for where in ("cli", "gateway"):
        (tmp_path / where).mkdir()
        eng = engine_on(tmp_path / where, session=where)
        eng.ingest(chat)
        out = eng.compress(chat[:12], current_tokens=2000, force=True)
        rt = eng.runtime
        rows = rt.store.page(where, 0, 100)
        assert rt.compactions.kept_tail(where) == (rows[12].store_id, rows[15].store_id)
        assert_lossless(eng, where)
        if where == "cli":  # the interactive CLI shows them: nothing, and later turns read nothing
            assert kept_tail_context(rt, where, out + chat[12:] + [user("next")], None) == ""
            assert rt.compactions.kept_tail(where) is None
    reloaded = [dict(out[0]), user("what did we say?")]
    text = kept_tail_context(rt, where, reloaded, None)
    assert text.startswith(HEADER) and all(m["content"] in text for m in chat[12:])
    assert not any(m["content"] in text for m in chat[:12])
    assert kept_tail_context(rt, where, reloaded, None) == text  # the host may have dropped it: again
    short = kept_tail_context(rt, where, reloaded, len(text) - 1)  # within the room: the oldest row goes first
    assert chat[15]["content"] in short and chat[12]["content"] not in short
    carried = reloaded + [assistant("ok"), {**user("more"), "api_content": "more\n\n" + text}]
    assert kept_tail_context(rt, where, carried, None) == "" and rt.compactions.kept_tail(where) is None


def test_a_forced_compress_of_the_whole_list_still_keeps_trove_s_tail(tmp_path):
    eng = engine_on(tmp_path, fresh_tail_count=6)
    chat = _exchanges(8)
    eng.ingest(chat)
    out = eng.compress(chat, current_tokens=2000, force=True)
    assert not eng.state.last_result["host_kept_tail"]
    assert out[-6:] == chat[-6:] and out[0]["content"].startswith("[trove summary")
    assert_lossless(eng)


def test_an_automatic_compress_of_a_prefix_keeps_trove_s_tail(tmp_path):
    eng = engine_on(tmp_path, fresh_tail_count=4)
    chat = _exchanges(8)
    eng.ingest(chat)
    eng.compress(chat[:12], current_tokens=2000, force=False)
    assert not eng.state.last_result.get("host_kept_tail")


def test_status_of_a_chat_s_copy_shows_the_compaction_another_copy_of_its_session_ran(tmp_path):
    # a gateway compacts a live chat (/compress, hygiene) on a temporary agent: an engine copy of its own,
    # bound to the chat's session id. /trove status reads the chat's copy, which ran nothing itself.
    chat_copy = engine_on(tmp_path)
    chat = _exchanges(8)
    chat_copy.ingest(chat)
    helper = copy.deepcopy(chat_copy)
    helper.on_session_start("s1", platform="cli", conversation_id=None)
    helper.compress(chat[:12], current_tokens=2000, force=True)
    assert helper.state.last_status == "compacted", helper.state.last_reason
    shown = status.build_status(chat_copy.runtime, chat_copy.snapshot())["engine"]
    assert shown["last_compression_status"] == "compacted" and shown["last_compression"]["host_kept_tail"]
    assert shown["last_compression"] == helper.state.last_result
    assert chat_copy.state.last_status == "idle" and chat_copy.state.last_result == {}  # its own state stands
    # the gateway evicts the chat's agent after /compress: status of the session with no live copy shows it too
    alone = status.build_status(chat_copy.runtime, None, session_id="s1")["last_compaction"]
    assert alone["last_compression_status"] == "compacted" and alone["last_compression"]["host_kept_tail"]
    assert "last_compaction" not in status.build_status(chat_copy.runtime, chat_copy.snapshot())  # once is enough
    # a later call that compacts nothing (a store that failed hands it over) keeps the report, not the status
    chat_copy.runtime.health.fail("disk I/O error")
    helper._native = False  # no host compressor here: trove's own head-and-tail trim stands in
    helper.compress(chat, current_tokens=2000, force=True)
    shown = chat_copy.snapshot()
    assert shown["last_compression_status"] == "delegated" and shown["last_compression"]["host_kept_tail"]
    chat_copy.runtime.health.recover()
    # the host ends the session it compacts, then binds it again at the boundary: the record outlives that
    helper.compress(chat[:12], current_tokens=2000, force=True)
    helper.on_session_end("s1", chat)
    assert "s1" not in helper.runtime.bound_sessions
    helper.on_session_start("s1", platform="cli", conversation_id=None, boundary_reason="compression")
    shown = chat_copy.snapshot()
    assert shown["last_compression_status"] == helper.state.last_status != "delegated"
    assert shown["last_compression"] == helper.state.last_result
    assert "last_compaction" in status.build_status(chat_copy.runtime, None, session_id="s1")


def test_the_newest_compactions_are_kept_per_session_and_bounded():
    kept = LastCompactions(limit=2)
    own = ("idle", "", {})
    kept.note("a", "compacted", "", {"host_kept_tail": True})
    kept.note("b", "deferred", "under the trigger")
    kept.note("a", "delegated", "store unusable")  # a touched entry is the newest again
    kept.note("c", "compacted", "", {"host_kept_tail": False})
    kept.note("", "compacted", "", {})  # an unbound copy records nothing
    assert len(kept) == 2 and kept.latest("b", own) == own
    assert kept.latest("a", own) == ("delegated", "store unusable", {"host_kept_tail": True})
    kept.latest("c", own)[2]["host_kept_tail"] = True  # the reader gets a copy
    assert kept.latest("c", own) == ("compacted", "", {"host_kept_tail": False})
    report = {"levels": ["normal"], "errors": ["x" * 10 ** 6] * 100, "focus_topic": "y" * 10 ** 6}
    kept.note("a", "compacted", "z" * 10 ** 6, report)
    report["levels"].append("written by the compactor's copy later")
    status_, reason, stored = kept.latest("a", own)
    stored["levels"].append("written by a reader")
    assert kept.latest("a", own)[2]["levels"] == ["normal"] and len(reason) == len(stored["focus_topic"]) == 300
    assert len(stored["errors"]) == 16 and {len(e) for e in stored["errors"]} == {300}
    kept.carry("a", "d")  # a renamed session: the record follows, and the bound holds
    assert len(kept) == 2 and kept.latest("d", own)[:2] == ("compacted", reason) and kept.latest("c", own) == own


def test_a_compaction_s_record_follows_a_renamed_session_and_keeps_no_large_text(tmp_path):
    rt = build_runtime(make_config(tmp_path, ignore_session_patterns=("cron_*",)))
    chat_copy = make_engine(rt, fake_model("good"), session="s1", context_length=64000)
    chat = _exchanges(8)
    chat_copy.ingest(chat)
    helper = copy.deepcopy(chat_copy)
    helper.on_session_start("s1", platform="cli", conversation_id=None)
    helper.compress(chat[:12], current_tokens=2000, force=True, focus_topic="keep the lantern codes " * 5000)
    assert helper.state.last_status == "compacted", helper.state.last_reason
    shown = chat_copy.snapshot()["last_compression"]  # 1,024 of these are kept: what a person typed is clipped
    assert shown["host_kept_tail"] and 0 < len(shown["focus_topic"]) <= 300 and len(json.dumps(shown)) < 4000
    # a compaction boundary that renames the session (the host's older rotation): the new id shows it
    helper.on_session_start("s2", platform="cli", conversation_id=None, boundary_reason="compression",
                            old_session_id="s1")
    renamed = status.build_status(rt, None, session_id="s2")["last_compaction"]
    assert renamed["last_compression_status"] == "compacted" and renamed["last_compression"] == shown
    # a copy that compacted s1 and then serves an ignored session records nothing for it: no s1 result shows there
    helper.on_session_start("cron_1", platform="cli", conversation_id=None)
    helper.compress(chat, current_tokens=2000, force=True)
    assert "last_compaction" not in status.build_status(rt, None, session_id="cron_1")
    assert make_engine(rt, fake_model("good"), session="cron_1").snapshot()["last_compression_status"] == "idle"


def test_has_content_to_compress_says_yes_to_a_prefix_the_host_keeps_a_tail_after(tmp_path):
    # a gateway asks this before /compress here N and answers "nothing to do" on False
    eng = engine_on(tmp_path)
    chat = _exchanges(8)
    assert not eng.has_content_to_compress(chat[:12])  # nothing stored yet: only the tail rule applies
    eng.ingest(chat)
    assert eng.has_content_to_compress(chat[:12])
    assert not eng.has_content_to_compress(chat)  # the whole list sits inside the 32-message tail


def test_compress_here_finds_the_prefix_when_every_reply_repeats_the_same_words(tmp_path):
    # "Done." after every turn: pairing from the end gave the head's last reply the newest "Done." row
    # (one the host keeps), so the head read as the whole chat and /compress here 2 did nothing
    eng = engine_on(tmp_path)
    chat = [m for i in range(8) for m in (user(f"here turn {i}: the lantern code is {1000 + i}"), assistant("Done."))]
    eng.ingest(chat)
    head = chat[:12]
    assert eng.has_content_to_compress(head)
    out = eng.compress(head, current_tokens=2000, force=True)
    assert eng.state.last_status == "compacted", eng.state.last_reason
    assert eng.state.last_result["host_kept_tail"]
    assert out and all(m["content"].startswith("[trove summary") for m in out)
    rt = eng.runtime
    rows = rt.store.page("s1", 0, 100)
    covered = {i for node in rt.dag.frontier("s1") for i in rt.dag.descendant_store_ids(node.node_id)}
    assert covered == {r.store_id for r in rows[:12]}  # the kept exchanges are not summarised
    assert len(rows) == 16 and rt.store.session("s1").frontier_store_id == rows[11].store_id  # nothing lost
    assert not eng.has_content_to_compress(chat[12:])  # the tail the host kept is the whole list now


@pytest.mark.parametrize(("live", "keeps"), [
    ([1, 2, 8], [1, 2, 3]),        # "Done." (3, 8): the prefix's last reply is its earliest row
    ([1, 2, 7, 8], [1, 2, 7, 8]),  # the whole list: nothing moves
    ([0, 2, 0, 8], [0, 2, 0, 3]),  # unstored or rewritten messages (0) stay where they are
])
def test_pulled_back_places_repeated_messages_at_their_earliest_row(live, keeps):
    stored = [(1, "u1"), (2, "a"), (3, "done"), (7, "u2"), (8, "done")]
    assert policy.pulled_back(live, stored) == keeps
