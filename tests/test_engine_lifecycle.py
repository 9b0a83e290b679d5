"""The engine under the exact call orders of the 0.19 host (HOST.md §10)."""
from __future__ import annotations

import copy

import pytest
from conftest import assistant, make_config, no_model, user
from simulate import HostLoop, build_conversation

from hermes_trove import tokens
from hermes_trove.engine import TroveEngine
from hermes_trove.runtime import build_runtime

BACKENDS = ("sqlite", "postgresql")  # every test here runs on the file and on a server


def boot(runtime, session="20261130_101010_abcdef"):
    eng = TroveEngine(runtime, complete=no_model)
    eng.update_model(model="m", context_length=64000, base_url="http://127.0.0.1:1/v1", api_key="k",
                     provider="custom", api_mode="")
    eng.bind_session_state(session_db=object(), session_id=session)
    eng.on_session_start(session, hermes_home="/tmp", platform="cli", model="m", context_length=64000,
                         conversation_id=None)
    return eng


def compacted_engine(runtime, turns=30):
    eng = boot(runtime)
    loop = HostLoop(eng)
    for turn in build_conversation(turns, seed=9):
        loop.run_turn(turn)
    return eng, loop


def test_init_order_binds_the_session_and_records_it(runtime):
    eng = boot(runtime)
    assert eng.snapshot()["session_id"] == "20261130_101010_abcdef"
    assert runtime.store.session("20261130_101010_abcdef").platform == "cli"
    assert runtime.bound_sessions["20261130_101010_abcdef"] == "active"


def test_in_place_compaction_boundary_adds_no_duplicates(runtime):
    eng = boot(runtime)
    sid = eng.session_id
    msgs = [user("a"), assistant("b"), user("c")]
    eng.ingest(msgs)
    out = eng.compress(msgs, current_tokens=10, force=True)
    eng.on_session_end(sid, msgs)
    eng.on_session_start(sid, boundary_reason="compression", old_session_id=sid, platform="cli",
                         conversation_id=None)
    eng.ingest(out + [assistant("d")])
    assert [r.content for r in runtime.store.page(sid)] == ["a", "b", "c", "d"]


def test_new_carries_nodes_but_resume_and_branch_do_not(tmp_path):
    # small leaves and fan-in 2 grow the DAG past depth 2, the default retain depth of /new
    runtime = build_runtime(make_config(tmp_path, leaf_chunk_tokens=600, condensation_fanin=2))
    eng, loop = compacted_engine(runtime, turns=60)
    old = eng.session_id
    deep = [n.node_id for n in runtime.dag.frontier(old) if n.depth >= 2]
    shallow = [n.node_id for n in runtime.dag.frontier(old) if n.depth < 2]
    assert deep and shallow, "the scenario needs nodes on both sides of the retain depth"
    # /resume: reset + bind, no on_session_end
    eng.on_session_reset()
    eng.bind_session_state(None, "resumed_session")
    assert runtime.dag.frontier("resumed_session") == []
    # /new: end + reset + bind
    eng.bind_session_state(None, old)
    eng.on_session_end(old, loop.messages)
    eng.on_session_reset()
    eng.bind_session_state(None, "fresh_session")
    carried = runtime.dag.frontier("fresh_session")
    assert [n.node_id for n in carried] == deep


def gateway_agent(runtime, session, key):
    """The engine of an agent the gateway builds for one chat's message."""
    eng = TroveEngine(runtime, complete=no_model)
    eng.update_model(model="m", context_length=64000)
    eng.bind_session_state(session_db=None, session_id=session)
    eng.on_session_start(session, platform="telegram", context_length=64000, conversation_id=key)
    return eng


def test_a_gateway_chats_new_session_carries_that_chats_deep_nodes(tmp_path):
    # the gateway answers /new with a new agent for a new session id: no on_session_reset arrives
    runtime = build_runtime(make_config(tmp_path, leaf_chunk_tokens=600, condensation_fanin=2))
    eng = gateway_agent(runtime, "g1", "agent:main:telegram:dm:1")
    loop = HostLoop(eng)
    for turn in build_conversation(60, seed=9):
        loop.run_turn(turn)
    deep = [n.node_id for n in runtime.dag.frontier("g1") if n.depth >= 2]
    assert deep and len(deep) < len(runtime.dag.frontier("g1"))
    eng.on_session_end("g1", loop.messages)
    gateway_agent(runtime, "g2", "agent:main:telegram:dm:1")
    gateway_agent(runtime, "h1", "agent:main:telegram:dm:2")  # another chat's first session
    gateway_agent(runtime, "g1", "agent:main:telegram:dm:1")  # a later agent for the old session
    assert [n.node_id for n in runtime.dag.frontier("g2")] == deep
    assert runtime.store.session("g2").previous_session_id == "g1"
    assert runtime.dag.frontier("h1") == []
    assert not [n for n in runtime.dag.frontier("g1") if n.session_id != "g1"]


def test_background_review_fork_end_with_empty_list_is_harmless(runtime):
    eng, loop = compacted_engine(runtime, turns=10)
    before = runtime.store.count(eng.session_id)
    import copy

    fork = copy.deepcopy(eng)
    fork.on_session_start("throwaway", platform="cli")
    fork.bind_session_state(None, eng.session_id)
    fork.on_session_end(eng.session_id, [])
    assert runtime.store.count(eng.session_id) == before
    assert runtime.store.count("throwaway") == 0


def test_provider_overflow_update_model_lowers_threshold(runtime):
    eng = boot(runtime)
    before = eng.threshold_tokens
    eng.update_model("m", 32000)
    assert eng.threshold_tokens < before


def test_usage_after_compaction_may_be_empty(runtime):
    eng = boot(runtime)
    eng.update_from_response({})
    eng.last_prompt_tokens = -1  # the host's "awaiting real usage" sentinel
    assert eng.should_compress() is False


def test_unbound_engine_never_raises(runtime):
    eng = TroveEngine(runtime)
    assert eng.compress([user("x")], current_tokens=5) == [user("x")]
    assert eng.should_compress(10 ** 9) is False
    eng.on_session_end("", [])
    assert eng.snapshot()["session_id"] == "(unbound)"


def test_resume_after_an_in_place_compaction_carries_nothing(runtime):
    eng, loop = compacted_engine(runtime, turns=60)
    sid = eng.session_id
    eng.on_session_end(sid, loop.messages)  # the host's compaction boundary...
    eng.on_session_start(sid, boundary_reason="compression", old_session_id=sid, platform="cli")
    eng.on_session_reset()  # ...then /resume of another session: no on_session_end before it
    eng.bind_session_state(None, "resumed")
    assert runtime.dag.frontier("resumed") == []


def test_engine_copies_share_the_store_health_but_not_the_delegate(runtime):
    import copy

    eng = boot(runtime)
    runtime.health.fail("OperationalError: disk I/O error")
    fork = copy.deepcopy(eng)
    assert fork.runtime.health is runtime.health and fork._native is None
    assert fork.snapshot()["compaction_route"] == "built-in compressor (store unusable)"
    runtime.health.recover()
    assert fork.snapshot()["compaction_route"] == "trove" and fork.snapshot()["store_state"] == "ok"


def test_a_model_switch_reaches_the_delegate(tmp_path):
    import pytest

    pytest.importorskip("agent.context_compressor")
    rt = build_runtime(make_config(tmp_path, ignore_session_patterns=("cron:*",)))
    eng = TroveEngine(rt, complete=no_model)
    eng.update_model("m", 128000)
    eng.on_session_start("job-1", platform="cron")
    native = eng._native_compressor()
    before = native.threshold_tokens
    eng.update_model("m", 64000)  # a provider-reported limit
    assert native.context_length == 64000 and native.threshold_tokens < before


def test_a_trove_compaction_that_raises_is_handed_to_the_delegate(runtime, monkeypatch):
    from hermes_trove import engine as engine_module

    eng = boot(runtime)

    def broken_run(self, *args, **kwargs):
        raise RuntimeError("a bug in trove compaction")

    monkeypatch.setattr(engine_module.Compactor, "run", broken_run)
    eng._native = False  # no host compressor: the deterministic trim bounds the prompt
    msgs = [user(f"line {i} " + "x" * 3000) if i % 2 == 0 else assistant(f"a{i}") for i in range(60)]
    out = eng.compress(msgs, current_tokens=10 ** 6)
    assert len(out) < len(msgs) and runtime.health.usable  # a bug is not a broken store
    assert eng.snapshot()["last_compression_status"] == "delegated"
    assert "a bug in trove compaction" in eng.snapshot()["last_compression_reason"]


def test_a_copy_made_inside_a_profile_scope_serves_that_profiles_own_store_and_settings(tmp_path, monkeypatch):
    # A multiplexed gateway registers the engine once and copies it per agent inside each
    # profile's scope (hermes_constants' home override); the shell's TROVE_* stay the gateway's.
    constants = pytest.importorskip("hermes_constants")
    monkeypatch.setenv("TROVE_DATABASE_PATH", str(tmp_path / "gateway-owner.db"))
    base = build_runtime(make_config(tmp_path / "default", database_path=str(tmp_path / "gateway-owner.db")))
    work = tmp_path / "profiles" / "work"
    work.mkdir(parents=True)
    (work / ".env").write_text("TROVE_FRESH_TAIL_COUNT=7\n", encoding="utf-8")
    registered = TroveEngine(base, complete=no_model)
    token = constants.set_hermes_home_override(str(work))
    try:
        clone = copy.deepcopy(registered)
    finally:
        constants.reset_hermes_home_override(token)
    assert clone.runtime is not base and clone.runtime.db.path == str(work / "trove.db")
    assert clone.runtime.config.fresh_tail_count == 7
    assert copy.deepcopy(registered).runtime is base  # outside any scope: the process's own profile
    eng = boot(clone.runtime)
    eng.ingest([user("the work vpn token is KESTREL-2291")])
    assert base.store.session(eng.session_id) is None


def test_has_content_to_compress_is_false_when_everything_sits_in_the_protected_tail(runtime):
    # the gateway's /compress asks first and says "nothing to compress" instead of "No changes"
    eng = boot(runtime)
    short = [m for i in range(5) for m in (user(f"q{i}"), assistant(f"a{i}"))]
    assert not eng.has_content_to_compress(short)
    assert eng.compress(short, current_tokens=100, force=True) == short
    long = [m for i in range(40) for m in (user(f"question {i}"), assistant(f"answer {i}"))]
    assert eng.has_content_to_compress(long)
    huge = [user("x " * 30000), assistant("ok"), user("and?")]  # few turns, but over the tail's budget
    assert eng.has_content_to_compress(huge)


def test_has_content_to_compress_is_true_when_the_hosts_overhead_makes_a_forced_compaction_fold(runtime):
    # gateway /compress passes the system prompt and tool schemas in current_tokens, which this call never sees
    eng = boot(runtime)
    body = " ".join(f"word{i}" for i in range(250))
    chat = [m for i in range(8) for m in (user(f"q{i} {body}"), assistant(f"a{i} {body}"))]
    assert eng.has_content_to_compress(chat)
    assert len(eng.compress(chat, current_tokens=tokens.count_messages(chat) + 10000, force=True)) < len(chat)
