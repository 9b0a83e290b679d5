"""Sessions the host runs on the side (cron, the background review fork) never take over /trove."""
from __future__ import annotations

import copy
import threading

from conftest import assistant, make_config, make_engine, no_model, user

from hermes_trove import command
from hermes_trove.engine import TroveEngine
from hermes_trove.filters import chat_compaction_cleanup, host_side_agent
from hermes_trove.hooks import make_hooks
from hermes_trove.runtime import build_runtime

BACKENDS = ("sqlite", "postgresql")  # every test here runs on the file and on a server


def chat(n: int) -> list[dict]:
    return [user(f"question {i} " + "word " * 40) if i % 2 == 0 else assistant(f"answer {i}") for i in range(n)]


def answering_chat(tmp_path):
    """A runtime, its hooks and a telegram chat's engine on s1 whose agent has the tools and has answered."""
    rt = build_runtime(make_config(tmp_path))
    chat = make_engine(rt, session="s1", platform="telegram", tools=True)
    chat.update_from_response({"prompt_tokens": 100})
    return rt, make_hooks(rt), chat


def turn_context(hooks, platform: str, message: str):
    """What pre_llm_call gives a turn of session s1 that starts with ``message``."""
    return hooks["pre_llm_call"](session_id="s1", platform=platform, user_message=message,
                                 conversation_history=[user(message)])


def test_status_and_rotate_keep_the_foreground_session_while_a_cron_session_binds(tmp_path):
    rt = build_runtime(make_config(tmp_path, fresh_tail_count=2))
    fg = make_engine(rt, session="20260301_090000_abc123")
    fg.ingest(chat(10))
    side = copy.deepcopy(fg)  # the host deep-copies the registered engine per agent
    side.on_session_start("cron_job1_20260301_091500", platform="cron", conversation_id=None)
    assert side.state.mode == "stateless" and rt.bound_sessions["cron_job1_20260301_091500"] == "stateless"
    assert side.ingest(chat(4)) == 0 and rt.store.count("cron_job1_20260301_091500") == 0
    status = command.make_handler(rt)("status")
    assert "session_id: 20260301_090000_abc123" in status
    name, result = command.run(rt, ["rotate"])
    assert result["session_id"] == "20260301_090000_abc123" and result["status"] != "refused"


def test_an_ignored_side_session_does_not_take_over_either(tmp_path):
    rt = build_runtime(make_config(tmp_path, ignore_session_patterns=("telegram:*",)))
    fg = make_engine(rt, session="main-1")
    side = copy.deepcopy(fg)
    side.on_session_start("chat-9", platform="telegram", conversation_id=None)
    assert side.state.mode == "ignored"
    assert command.resolve(rt).session_id == "main-1"
    active = copy.deepcopy(fg)
    active.on_session_start("main-2", platform="cli", conversation_id=None)
    assert command.resolve(rt).session_id == "main-2"  # a new foreground session does take over


def test_the_background_review_fork_is_stateless_without_patterns(tmp_path):
    rt = build_runtime(make_config(tmp_path))
    fg = make_engine(rt, session="parent-1")
    fg.ingest(chat(4))
    result: dict = {}

    def review() -> None:  # the host runs the fork on a thread named "bg-review"
        fork = copy.deepcopy(fg)
        fork.on_session_start("20260301_100000_ffffff", platform="cli", conversation_id=None)
        result["mode"] = fork.state.mode
        hooks = make_hooks(rt)
        history = chat(4) + [user("Review the conversation above and update the skill library")]
        hooks["post_llm_call"](session_id="parent-1", platform="cli", conversation_history=history,
                               assistant_response="ok")

    t = threading.Thread(target=review, name="bg-review")
    t.start()
    t.join()
    assert result["mode"] == "stateless"
    assert rt.store.count("parent-1") == 4  # the review prompt never reached the parent's transcript
    assert command.resolve(rt).session_id == "parent-1"


def test_a_cli_background_task_is_stored_but_leaves_the_chat_in_front_while_it_runs_and_after(tmp_path):
    # ``/background PROMPT`` in the CLI builds an agent of its own (session "bg_<time>_<hex>", platform "cli")
    # on a thread named "bg-task-<that id>" and drops it when done. Its turns are the user's and are stored;
    # /trove keeps addressing the chat, and must not fall to "no session bound" once the task's agent is gone.
    import gc

    rt = build_runtime(make_config(tmp_path))
    fg = make_engine(rt, session="20260301_090000_abc123")
    fg.ingest(chat(4))
    seen: dict = {}

    def background() -> None:
        task = copy.deepcopy(fg)
        task.on_session_start("bg_090500_a1b2c3", platform="cli", conversation_id=None)
        seen["mode"] = task.state.mode
        task.ingest([user("bg job: remember KIWI-3"), assistant("noted")])
        seen["while_running"] = command.resolve(rt).session_id

    t = threading.Thread(target=background, name="bg-task-bg_090500_a1b2c3")
    t.start()
    t.join()
    gc.collect()
    assert seen["mode"] == "active" and rt.store.count("bg_090500_a1b2c3") == 2
    assert seen["while_running"] == "20260301_090000_abc123"
    assert command.resolve(rt).session_id == "20260301_090000_abc123"
    assert "session_id: 20260301_090000_abc123" in command.make_handler(rt)("status")


def test_a_tui_background_task_on_an_unnamed_thread_leaves_the_chat_in_front(tmp_path):
    # The TUI runs ``/background PROMPT`` through an agent of its own (session "bg_<6 hex>", platform "tui")
    # on a thread with no name of its own: its id marks it. Stored, but /trove keeps addressing the chat,
    # also once the task's agent is gone; a chat that itself resumes such an id keeps its front.
    import gc

    rt = build_runtime(make_config(tmp_path))
    fg = make_engine(rt, session="20260301_090000_abc123", platform="tui")
    fg.ingest(chat(4))

    def background() -> None:
        task = copy.deepcopy(fg)
        task.on_session_start("bg_a1b2c3", platform="tui", conversation_id=None)
        task.ingest([user("bg job: remember KIWI-3"), assistant("noted")])

    t = threading.Thread(target=background)
    t.start()
    t.join()
    gc.collect()
    assert rt.store.count("bg_a1b2c3") == 2
    assert command.resolve(rt).session_id == "20260301_090000_abc123"
    fg.on_session_start("bg_a1b2c3", platform="tui", conversation_id=None)  # /resume bg_a1b2c3 in the chat
    assert command.resolve(rt).session_id == "bg_a1b2c3"


def test_a_foreground_curator_run_is_stateless_and_leaves_the_chat_in_front(tmp_path):
    # ``hermes curator run`` forks its agent (platform "curator") on the main thread, not on
    # "curator-review": it is recognised by its platform, stores nothing and takes nothing over.
    rt = build_runtime(make_config(tmp_path))
    fg = make_engine(rt, session="20260301_090000_abc123")
    fg.ingest(chat(4))
    curator = copy.deepcopy(fg)
    curator.state.key = None  # a fresh copy: the host binds it before on_session_start names the platform
    curator.bind_session_state(None, "20260301_093000_c0ffee")
    curator.on_session_start("20260301_093000_c0ffee", platform="curator", conversation_id=None)
    assert curator.state.mode == "stateless"
    prompt = [user("Review the agent-created skills below " + "skill " * 40), assistant("no change")]
    assert curator.ingest(prompt) == 0 and rt.store.count("20260301_093000_c0ffee") == 0
    assert rt.store.session("20260301_093000_c0ffee") is None
    assert command.resolve(rt).session_id == "20260301_090000_abc123"


def test_a_copy_named_a_side_agent_after_storing_keeps_its_row_and_messages(tmp_path):
    # Only an empty row goes: a session that stored turns before it was named "curator" keeps them.
    rt = build_runtime(make_config(tmp_path))
    copy_ = make_engine(rt, session="20260301_093000_c0ffee")
    assert copy_.ingest(chat(4)) == 4
    copy_.on_session_start("20260301_093000_c0ffee", platform="curator", conversation_id=None)
    assert copy_.state.mode == "stateless"
    assert rt.store.session("20260301_093000_c0ffee") is not None
    assert rt.store.count("20260301_093000_c0ffee") == 4


def test_host_side_agent_rules():
    assert host_side_agent("20260101_000000_abcdef", "curator", thread_name="MainThread") == "host:platform=curator"
    assert host_side_agent("x", "cron", thread_name="MainThread") == "host:platform=cron"
    assert host_side_agent("x", " Curator ", thread_name="MainThread") == "host:platform=curator"
    assert host_side_agent("cron_abc_20260101_000000", "", thread_name="MainThread") == "host:cron session"
    assert host_side_agent("20260101_000000_abcdef", "cli", thread_name="curator-review")
    assert host_side_agent("20260101_000000_abcdef", "telegram", thread_name="MainThread") is None
    assert host_side_agent("20260101_000000_abcdef", "cli", thread_name="MainThread", api_key="inspect-only")
    assert host_side_agent("20260101_000000_abcdef", "cli", thread_name="MainThread", api_key="sk-real") is None
    assert host_side_agent("20260101_000000_abcdef", "cli", thread_name="MainThread", api_key=lambda: "x") is None


def test_the_prompt_size_inspection_agent_stores_no_session_row(tmp_path):
    # `hermes prompt-size` builds an agent with the placeholder key "inspect-only", binds it as a cli
    # session and only measures its prompt: no turn ever runs, so trove keeps no row for it.
    rt = build_runtime(make_config(tmp_path))
    eng = TroveEngine(rt, complete=no_model)
    eng.update_model("fake-model", 128000, base_url="https://example.invalid/v1", api_key="inspect-only")
    eng.bind_session_state(None, "20260301_100000_a1b2c3")
    eng.on_session_start("20260301_100000_a1b2c3", platform="cli", conversation_id=None)
    assert eng.state.mode == "stateless" and eng.get_tool_schemas()  # the measured prompt still has trove's tools
    assert rt.store.session("20260301_100000_a1b2c3") is None
    real = TroveEngine(rt, complete=no_model)
    real.update_model("fake-model", 128000, api_key="sk-real")
    real.on_session_start("20260301_100500_d4e5f6", platform="cli", conversation_id=None)
    assert real.state.mode == "active" and rt.store.session("20260301_100500_d4e5f6") is not None


def test_a_delegate_task_child_is_stored_apart_and_never_takes_over_trove(tmp_path):
    rt = build_runtime(make_config(tmp_path))
    fg = make_engine(rt, session="20260301_090000_abc123")
    fg.ingest(chat(6))
    child = copy.deepcopy(fg)  # the host builds the child with its own engine copy, platform "subagent"
    child.state.key = None  # a fresh copy: bound first, told its platform by on_session_start after
    child.bind_session_state(None, "20260301_090500_c0ffee")
    assert command.resolve(rt).session_id == "20260301_090000_abc123"
    child.on_session_start("20260301_090500_c0ffee", platform="subagent", conversation_id=None)
    assert child.state.mode == "active"
    child.ingest(chat(4))
    assert rt.store.count("20260301_090500_c0ffee") == 4 and rt.store.count("20260301_090000_abc123") == 6
    assert "session_id: 20260301_090000_abc123" in command.make_handler(rt)("status")
    del child  # the host closes the child when its task ends; the copy goes away
    assert command.resolve(rt).session_id == "20260301_090000_abc123"


def test_the_review_fork_ending_the_parent_id_leaves_the_live_parent_session_open(tmp_path):
    rt = build_runtime(make_config(tmp_path))
    fg = make_engine(rt, session="parent-1")
    fg.ingest(chat(4))

    def review() -> None:  # the fork binds a throw-away id, takes the parent's, then ends it with []
        fork = copy.deepcopy(fg)
        fork.state.key = None
        fork.on_session_start("20260301_100000_ffffff", platform="cli", conversation_id=None)
        fork.on_session_end("parent-1", [])

    t = threading.Thread(target=review, name="bg-review")
    t.start()
    t.join()
    assert rt.store.session("parent-1").ended_at is None
    assert rt.store.count("parent-1") == 4 and rt.store.session("20260301_100000_ffffff") is None
    fg.on_session_end("parent-1", chat(4))  # the parent's own end still records it
    assert rt.store.session("parent-1").ended_at is not None


def test_a_delegate_task_child_takes_the_owner_scope_of_the_session_that_delegated(tmp_path):
    rt = build_runtime(make_config(tmp_path))
    hooks = make_hooks(rt)
    tg = "agent:main:telegram:dm:42"
    cases = (("p-cli", "cli", None, "local"), ("p-tg", "telegram", tg, f"telegram:{tg}"))
    for parent, platform, chat_key, scope in cases:
        fg = make_engine(rt, session=parent, platform=platform)
        if chat_key:
            fg.on_session_start(parent, platform=platform, conversation_id=chat_key)
        chat_rows = chat(2)
        fg.ingest(chat_rows)
        child = copy.deepcopy(fg)
        child.state.key = None
        child_id = f"{parent}-child"
        child.bind_session_state(None, child_id)
        child.on_session_start(child_id, platform="subagent", conversation_id=None)
        assert rt.store.session(child_id).scope == ""  # the host names no chat for a child
        hooks["subagent_start"](parent_session_id=parent, child_session_id=child_id, child_role="leaf")
        row = rt.store.session(child_id)
        assert (row.scope, row.previous_session_id, row.platform) == (scope, parent, "subagent")
        hooks["post_llm_call"](session_id=child_id, platform="subagent", conversation_history=chat_rows,
                               assistant_response="ok")
        assert rt.store.count(child_id) == 2 and rt.store.session(child_id).scope == scope
    # a parent trove never stored (a side session) gives its child nothing
    orphan = copy.deepcopy(fg)
    orphan.state.key = None
    orphan.on_session_start("orphan-child", platform="subagent", conversation_id=None)
    hooks["subagent_start"](parent_session_id="cron_x_20260101_000000", child_session_id="orphan-child")
    assert rt.store.session("orphan-child").scope == ""


def test_a_delegate_task_child_is_not_told_the_recall_policy_naming_tools_it_lacks(tmp_path):
    rt = build_runtime(make_config(tmp_path))
    hooks = make_hooks(rt)
    make_engine(rt, session="p-1")
    child = make_engine(rt, session="p-1-child", platform="subagent")
    assert child.state.mode == "active"
    asked = {"user_message": "go", "conversation_history": [user("go")]}
    parent_context = hooks["pre_llm_call"](session_id="p-1", platform="cli", **asked)
    assert "TROVE recall policy" in parent_context["context"]
    assert hooks["pre_llm_call"](session_id="p-1-child", platform="subagent", **asked) is None


def test_an_editor_session_is_not_told_the_recall_policy_naming_tools_it_lacks(tmp_path):
    # An editor connected through ACP (Zed, VS Code) runs with platform "acp" and the fixed toolset
    # "hermes-acp", which holds no context-engine tools: its turns are stored, but no trove_* tool exists
    # there, so no text may send the model to one.
    rt = build_runtime(make_config(tmp_path))
    hooks = make_hooks(rt)
    editor = make_engine(rt, session="acp-1", platform="acp")
    assert editor.state.mode == "active"
    asked = {"user_message": "why does the build fail?", "conversation_history": [user("why does the build fail?")]}
    assert hooks["pre_llm_call"](session_id="acp-1", platform="acp", **asked) is None
    hooks["post_llm_call"](session_id="acp-1", platform="acp", conversation_history=[user("why?"), assistant("x")])
    assert rt.store.count("acp-1") == 2


def test_summaries_shown_to_an_agent_without_trove_tools_name_none_of_them(tmp_path):
    # The compacted prompt's summary message and the summary context the hook brings along both told the
    # model "recoverable with trove_grep, trove_describe and trove_expand": an editor over ACP has none of
    # them. Its summaries come without those names; a chat's keep them.
    from hermes_trove import tokens

    for platform, named in (("acp", False), ("cli", True)):
        rt = build_runtime(make_config(tmp_path / platform))
        eng = make_engine(rt, session="s1", platform=platform)
        msgs = [m for i in range(40) for m in (user(f"turn {i} " + "word " * 150), assistant(f"reply {i}"))]
        eng.ingest(msgs)
        out = eng.compress(msgs, current_tokens=tokens.count_messages(msgs), force=True)
        shown = [m for m in out if m.get("_trove_summary")]
        # (the header: a summary node's own text may still point at trove_expand where it was truncated)
        assert shown and all(("trove_grep" in m["content"].split("\n\n")[0]) is named for m in shown), shown
        context = make_hooks(rt)["pre_llm_call"](session_id="s1", platform=platform, user_message="next",
                                                 conversation_history=[user("next")])
        block = context["context"][context["context"].index("[trove summary]"):]
        assert ("trove_grep" in block.split("\n\n")[0]) is named, (platform, block[:300])


def test_an_agent_whose_toolsets_leave_out_the_context_engine_is_told_no_tool_names(tmp_path):
    # Hermes gives an agent the context engine's tools, and asks the engine copy for them, only when its
    # enabled_toolsets is unset or lists "context_engine": a gateway platform set to `platform_toolsets:
    # telegram: []`, or a CLI run with --toolsets leaving it out, gets none on an ordinary platform. The
    # policy and the summary header followed the platform alone and named tools such an agent lacks.
    from hermes_trove import tokens

    for platform, given in (("telegram", False), ("cli", False), ("cli", True)):
        rt = build_runtime(make_config(tmp_path / f"{platform}-{given}"))
        hooks = make_hooks(rt)
        eng = make_engine(rt, session="s1", platform=platform, tools=given)
        eng.update_from_response({"prompt_tokens": 100})  # the chat's own agent: it answers its turns
        msgs = [m for i in range(40) for m in (user(f"turn {i} " + "word " * 150), assistant(f"reply {i}"))]
        eng.ingest(msgs)
        out = eng.compress(msgs, current_tokens=tokens.count_messages(msgs), force=True)
        shown = [m for m in out if m.get("_trove_summary")]
        assert shown and all(("trove_grep" in m["content"].split("\n\n")[0]) is given for m in shown), shown
        eng.on_session_reset()  # /resume: the same agent (and tool list) bound again
        eng.bind_session_state(None, "s1")
        context = turn_context(hooks, platform, "next")
        text = context["context"]
        assert ("TROVE recall policy" in text) is given, (platform, given, text[:300])
        block = text[text.index("[trove summary]"):]
        assert ("trove_grep" in block.split("\n\n")[0]) is given, (platform, given, block[:300])


def test_a_gateway_compaction_agent_without_the_tools_leaves_the_chat_agents_policy_and_tool_names(tmp_path):
    # The gateway compacts a live chat (its pre-turn hygiene, /compress) with a temporary agent built on the
    # chat's own session id and enabled_toolsets=["memory"]: the host never asks that agent's engine copy for
    # its tools. The chat's cached agent, which has them, is not bound again; a helper's bind must not tell
    # the chat's later turns (and the summaries it is shown) that it has no trove_* tools.
    from hermes_trove import tokens

    rt = build_runtime(make_config(tmp_path))
    hooks = make_hooks(rt)
    chat = make_engine(rt, session="s1", platform="telegram", tools=True)
    msgs = [m for i in range(40) for m in (user(f"turn {i} " + "word " * 150), assistant(f"reply {i}"))]
    chat.ingest(msgs)
    helper = make_engine(rt, session="s1", platform="telegram", tools=False)  # the gateway's compaction agent
    out = helper.compress(msgs, current_tokens=tokens.count_messages(msgs), force=True)
    shown = [m for m in out if m.get("_trove_summary")]
    assert shown and all("trove_grep" in m["content"].split("\n\n")[0] for m in shown), shown
    context = turn_context(hooks, "telegram", "next")
    assert "TROVE recall policy" in context["context"], context["context"][:300]
    # an agent that never had the tools, alone on its session, still gets none named
    make_engine(rt, session="s2", platform="telegram", tools=False)
    assert not rt.gives_tools("s2", "telegram")


def test_a_hygiene_compaction_before_the_chats_agent_is_built_names_the_tools_it_will_have(tmp_path):
    # After a gateway restart no chat has an agent yet: the hygiene compaction at the start of a chat's first
    # turn builds its temporary agent (toolsets ["memory"], never asked for the tools) on the chat's session
    # first. Its bind said "no tools" for the chat, so that summary's header, and the policy, named none.
    from hermes_trove import tokens

    rt = build_runtime(make_config(tmp_path))
    hooks = make_hooks(rt)
    msgs = [m for i in range(40) for m in (user(f"turn {i} " + "word " * 150), assistant(f"reply {i}"))]
    helper = make_engine(rt, session="s1", platform="telegram", tools=False)  # the gateway's hygiene agent
    helper.ingest(msgs)
    out = helper.compress(msgs, current_tokens=tokens.count_messages(msgs), force=True)
    shown = [m for m in out if m.get("_trove_summary")]
    assert shown and all("trove_grep" in m["content"].split("\n\n")[0] for m in shown), shown
    assert rt.gives_tools("s1", "telegram")  # unknown until the chat's agent says: the platform's default
    chat = TroveEngine(rt, complete=no_model)  # then the chat's agent, built in the order Hermes builds it
    chat.update_model("fake-model", 128000)
    chat.bind_session_state(None, "s1")  # before the host asks it for the tools
    chat.get_tool_schemas()
    chat.on_session_start("s1", platform="telegram", conversation_id=None)
    context = turn_context(hooks, "telegram", "next")
    assert "TROVE recall policy" in context["context"], context["context"][:300]
    # the default is the platform's: a delegated child's helper leaves its session with none named
    child = build_runtime(make_config(tmp_path / "child"))
    make_engine(child, session="c1", platform="subagent", tools=False).compress(
        msgs, current_tokens=tokens.count_messages(msgs), force=True)
    assert not child.gives_tools("c1", "subagent")


def test_a_helpers_compaction_boundary_leaves_what_the_chats_cached_agent_has(tmp_path):
    # With a SessionDB the host ends a session it compacts (on_session_end with the messages) and binds it
    # again at the boundary (on_session_start, boundary_reason "compression"), here from the helper's copy.
    # The chat's cached agent is not bound again: its next turn reads what that agent has, tools or none.
    from hermes_trove import tokens

    for given in (True, False):
        rt = build_runtime(make_config(tmp_path / str(given)))
        hooks = make_hooks(rt)
        chat = make_engine(rt, session="s1", platform="telegram", tools=given)
        chat.update_from_response({"prompt_tokens": 100})
        msgs = [m for i in range(40) for m in (user(f"turn {i} " + "word " * 150), assistant(f"reply {i}"))]
        chat.ingest(msgs)
        helper = make_engine(rt, session="s1", platform="telegram", tools=False)  # /compress's agent
        helper.compress(msgs, current_tokens=tokens.count_messages(msgs), force=True)
        helper.on_session_end("s1", msgs)
        helper.on_session_start("s1", platform="telegram", conversation_id=None, boundary_reason="compression")
        assert rt.gives_tools("s1", "telegram") is given
        context = turn_context(hooks, "telegram", "next")
        assert ("TROVE recall policy" in (context or {}).get("context", "")) is given, (given, context)


def test_a_chat_agent_rebuilt_without_the_tools_gets_no_policy_on_its_first_turn(tmp_path):
    # The gateway builds a chat's agent anew when its toolsets change (/tools, platform_toolsets edited): the
    # new agent, not asked for the tools, binds the same session id and runs its first turn (no engine call
    # comes before the pre_llm_call hook then). The earlier agent's offer was still read there, so that
    # turn's policy named trove_* tools the new agent lacks.
    rt, hooks, first = answering_chat(tmp_path)
    rebuilt = make_engine(rt, session="s1", platform="telegram", tools=False)
    context = turn_context(hooks, "telegram", "first")
    assert context is None or "TROVE recall policy" not in context["context"], context
    rebuilt.update_from_response({"prompt_tokens": 100})
    assert not rt.gives_tools("s1", "telegram")
    again = make_engine(rt, session="s1", platform="telegram", tools=True)  # and back, from its first turn
    context = turn_context(hooks, "telegram", "again")
    assert "TROVE recall policy" in context["context"], context["context"][:300]
    again.update_from_response({})
    assert rt.gives_tools("s1", "telegram")


def test_a_chat_agent_rebuilt_without_the_tools_is_told_none_once_it_answers(tmp_path):
    # The gateway builds a chat's agent anew when its toolsets change (platform_toolsets edited): the new agent,
    # not asked for the tools, binds the same session id. A bind without tools keeps the tools an earlier agent
    # had (a compaction helper's must), but the agent that answers on the session says which it has.
    rt = build_runtime(make_config(tmp_path))
    hooks = make_hooks(rt)
    make_engine(rt, session="s1", platform="telegram", tools=True)
    rebuilt = make_engine(rt, session="s1", platform="telegram", tools=False)
    rebuilt.update_from_response({"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110})
    assert not rt.gives_tools("s1", "telegram")
    context = turn_context(hooks, "telegram", "next")
    assert context is None or "TROVE recall policy" not in context["context"], context
    again = make_engine(rt, session="s1", platform="telegram", tools=True)  # and back
    again.update_from_response({})
    assert rt.gives_tools("s1", "telegram")


def test_the_subagent_of_a_cron_job_is_stateless_like_the_job(tmp_path):
    rt = build_runtime(make_config(tmp_path))
    hooks = make_hooks(rt)
    job = make_engine(rt, session="cron_abc_20260301_090000", platform="cron")
    assert job.state.mode == "stateless"
    child = copy.deepcopy(job)
    child.state.key = None
    child.on_session_start("20260301_090001_c0ffee", platform="subagent", conversation_id=None)
    assert child.state.mode == "active"
    hooks["subagent_start"](parent_session_id="cron_abc_20260301_090000", child_session_id="20260301_090001_c0ffee")
    assert rt.store.session("20260301_090001_c0ffee") is None  # the row its first, ordinary bind made is gone
    hooks["post_llm_call"](session_id="20260301_090001_c0ffee", platform="subagent", conversation_history=chat(4),
                           assistant_response="ok")
    assert child.ingest(chat(6)) == 0
    assert child._delegating() == "stateless session"  # its compaction goes to the host's compressor
    assert rt.store.count("20260301_090001_c0ffee") == 0
    child.on_session_end("20260301_090001_c0ffee", chat(6))
    assert rt.store.count("20260301_090001_c0ffee") == 0
    assert hooks["pre_llm_call"](session_id="20260301_090001_c0ffee", platform="subagent",
                                 user_message="go", conversation_history=[user("go")]) is None


def test_a_delegated_child_keeps_what_it_took_from_its_parent_across_its_compaction_boundaries(tmp_path):
    # The host announces each compaction boundary with on_session_start(boundary_reason="compression"):
    # the same id in place (compression.in_place, the default), else a new id naming the old one.
    rt = build_runtime(make_config(tmp_path))
    hooks = make_hooks(rt)
    job = make_engine(rt, session="cron_abc_20260301_090000", platform="cron")
    child = copy.deepcopy(job)
    child.state.key = None
    child.on_session_start("20260301_090001_c0ffee", platform="subagent", conversation_id=None)
    hooks["subagent_start"](parent_session_id="cron_abc_20260301_090000", child_session_id="20260301_090001_c0ffee")
    child.on_session_start("20260301_090001_c0ffee", boundary_reason="compression",
                           old_session_id="20260301_090001_c0ffee", platform="subagent")
    assert child.state.mode == "stateless" and child.ingest(chat(4)) == 0
    child.on_session_start("20260301_090502_beef00", boundary_reason="compression",
                           old_session_id="20260301_090001_c0ffee", platform="subagent")
    assert child.state.mode == "stateless" and child.ingest(chat(4)) == 0
    assert rt.store.count("20260301_090001_c0ffee") == 0 and rt.store.count("20260301_090502_beef00") == 0


def test_a_delegated_childs_continuation_after_a_rotating_compaction_keeps_the_parents_scope(tmp_path):
    rt = build_runtime(make_config(tmp_path))
    hooks = make_hooks(rt)
    tg = "agent:main:telegram:dm:42"
    fg = make_engine(rt, session="p-tg", platform="telegram")
    fg.on_session_start("p-tg", platform="telegram", conversation_id=tg)
    kid = copy.deepcopy(fg)
    kid.state.key = None
    kid.on_session_start("kid-1", platform="subagent", conversation_id=None)
    hooks["subagent_start"](parent_session_id="p-tg", child_session_id="kid-1")
    kid.on_session_start("kid-2", boundary_reason="compression", old_session_id="kid-1", platform="subagent")
    assert kid.ingest(chat(2)) == 2
    row = rt.store.session("kid-2")
    assert (row.scope, row.previous_session_id) == (f"telegram:{tg}", "kid-1")


def test_two_chats_delegating_at_once_each_give_their_child_their_own_scope_only(tmp_path):
    # A gateway serves two chats in one process; each delegates on its own thread at the same time.
    import json

    from hermes_trove.tools import dispatch
    rt = build_runtime(make_config(tmp_path))
    hooks = make_hooks(rt)
    chats = {"a": "agent:main:telegram:dm:111", "b": "agent:main:telegram:dm:222"}
    parents = {}
    for name, chat_key in chats.items():
        parents[name] = make_engine(rt, session=f"p-{name}", platform="telegram")
        parents[name].on_session_start(f"p-{name}", platform="telegram", conversation_id=chat_key)
        parents[name].ingest(chat(2))
    children, gate = {}, threading.Barrier(2)

    def delegate(name: str) -> None:
        gate.wait()
        for i in range(20):  # many children, interleaved across the two threads
            child = copy.deepcopy(parents[name])
            child.state.key = None
            cid = f"c-{name}-{i}"
            child.bind_session_state(None, cid)
            child.on_session_start(cid, platform="subagent", conversation_id=None)
            hooks["subagent_start"](parent_session_id=f"p-{name}", child_session_id=cid, child_role="leaf")
            hooks["post_llm_call"](session_id=cid, platform="subagent", assistant_response="ok",
                                   conversation_history=[user(f"the {name} secret code is {name * 3}{i}")])
            children[cid] = child

    threads = [threading.Thread(target=delegate, args=(n,)) for n in chats]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for cid in children:
        row = rt.store.session(cid)
        name = cid.split("-")[1]
        assert (row.scope, row.previous_session_id) == (f"telegram:{chats[name]}", f"p-{name}")
    later_b = make_engine(rt, session="p-b2", platform="telegram")
    later_b.on_session_start("p-b2", platform="telegram", conversation_id=chats["b"])
    found = json.dumps(json.loads(dispatch(later_b.tool_context(), "trove_recall", {"query": "secret code"})))
    assert "bbb" in found and "aaa" not in found


def test_a_real_end_with_an_empty_list_still_ends_the_session_after_a_review_fork_ended_it(tmp_path):
    # On exit the host may hand [] (HOST.md); after /new with no new turn, the previous transcript.
    rt = build_runtime(make_config(tmp_path))
    fg = make_engine(rt, session="parent-1")
    fg.ingest(chat(4))
    fork = copy.deepcopy(fg)
    t = threading.Thread(target=fork.on_session_end, args=("parent-1", []), name="bg-review")
    t.start()
    t.join()
    assert rt.store.session("parent-1").ended_at is None
    fg.on_session_end("parent-1", [])  # the CLI's exit, on the main thread
    assert rt.store.session("parent-1").ended_at is not None and rt.store.count("parent-1") == 4


def test_an_end_that_brings_turns_not_stored_yet_still_ends_the_session(tmp_path):
    rt = build_runtime(make_config(tmp_path))
    eng = make_engine(rt, session="s-late")
    eng.ingest(chat(2))
    eng.on_session_end("s-late", chat(6))  # the last turns reach trove only with the end
    row = rt.store.session("s-late")
    assert rt.store.count("s-late") == 6 and row.ended_at is not None


def test_an_exit_after_new_with_no_new_turn_stores_nothing_more_and_ends_the_new_session(tmp_path):
    # The CLI's /new: on_session_end(old, history), on_session_reset, bind_session_state(new); its exit
    # then hands on_session_end(new, ...) the agent's last list, still the old session's transcript.
    rt = build_runtime(make_config(tmp_path))
    eng = make_engine(rt, session="s-old")
    history = chat(6)
    eng.ingest(history[:4])
    eng.on_session_end("s-old", history)
    eng.on_session_reset()
    eng.bind_session_state(None, "s-new")
    eng.on_session_end("s-new", history)
    assert rt.store.count("s-old") == 6 and rt.store.count("s-new") == 0
    assert rt.store.session("s-new").ended_at is not None
    assert rt.store.session("s-new").previous_session_id == "s-old"
    # a new turn after /new makes the list the new session's own: stored as usual
    other = make_engine(rt, session="t-old")
    other.on_session_end("t-old", history)
    other.on_session_reset()
    other.bind_session_state(None, "t-new")
    other.on_session_end("t-new", [*history, user("and one more thing"), assistant("sure")])
    assert rt.store.session("t-new").previous_session_id == "t-old" and rt.store.count("t-new") == 8


def test_an_exit_after_resume_with_no_new_turn_leaves_the_resumed_session_as_it_was(tmp_path):
    # The CLI's /resume A from B: on_session_reset, bind_session_state(A), no on_session_end; its exit then
    # hands on_session_end(A, ...) the agent's last list, still B's transcript.
    rt = build_runtime(make_config(tmp_path))
    eng = make_engine(rt, session="a")
    eng.ingest(chat(4))
    eng.on_session_reset()
    eng.bind_session_state(None, "b")
    b_history = [user("the kiln runs at 1240 degrees"), assistant("noted")]
    eng.ingest(b_history)
    eng.on_session_reset()
    eng.bind_session_state(None, "a")
    eng.on_session_end("a", b_history)
    assert rt.store.count("a") == 4 and rt.store.count("b") == 2
    assert rt.store.session("a").ended_at is not None
    # a turn after /resume makes the list A's own: stored as usual
    eng.on_session_end("a", [*chat(4), user("back to the first topic"), assistant("sure")])
    assert rt.store.count("a") == 6 and rt.store.count("b") == 2


def gateway_side_agent(live, session: str, key: str):
    """The temporary agent the gateway builds to compact a live chat (/compress, session hygiene): a copy
    of the registered engine bound to the chat's session, as the host's agent init binds it."""
    side = copy.deepcopy(live)
    side.state.key = None
    side.bind_session_state(None, session)
    side.on_session_start(session, platform="telegram", conversation_id=key)
    return side


def test_the_gateway_compacting_a_live_chat_through_a_side_agent_leaves_the_chat_session_open(tmp_path):
    rt = build_runtime(make_config(tmp_path, fresh_tail_count=2))
    key = "agent:main:telegram:dm:5151"
    live = make_engine(rt, session="chat-1", platform="telegram")
    live.on_session_start("chat-1", platform="telegram", conversation_id=key)
    history = chat(12)
    live.ingest(history)
    live.update_from_response({"prompt_tokens": 900})  # the chat's agent has run turns
    for rotate in (False, True):
        side = gateway_side_agent(live, "chat-1", key)
        out = side.compress(history, current_tokens=5000, force=True)  # _compress_context, then its boundary
        side.on_session_end("chat-1", history)
        after = "chat-2" if rotate else "chat-1"  # compression.in_place off: a continuation id
        side.on_session_start(after, boundary_reason="compression", old_session_id="chat-1", platform="telegram",
                              conversation_id=key)
        side.on_session_end(after, [])  # the clean-up: shutdown_memory_provider(<no turn of its own>)
        assert rt.store.session(after).ended_at is None, rotate
        assert len(out) < len(history) and rt.store.count("chat-1") == 12
    assert rt.store.session("chat-1").ended_at is not None  # the rotation did end the session it left
    # the chat's own /new (its cached agent's clean-up with its transcript) is still a real end
    nxt = copy.deepcopy(live)
    nxt.bind_session_state(None, "chat-2")
    nxt.ingest([*history, user("on we go"), assistant("sure")])
    nxt.update_from_response({"prompt_tokens": 800})
    nxt.on_session_end("chat-2", [*history, user("on we go"), assistant("sure")])
    assert rt.store.session("chat-2").ended_at is not None


def test_an_agent_that_compacts_and_then_answers_still_ends_its_session_with_an_empty_list(tmp_path):
    rt = build_runtime(make_config(tmp_path, fresh_tail_count=2))
    eng = make_engine(rt, session="s-run")
    history = chat(12)
    eng.ingest(history)
    eng.compress(history, current_tokens=5000, force=True)
    eng.on_session_end("s-run", history)
    eng.on_session_start("s-run", boundary_reason="compression", old_session_id="s-run", platform="cli",
                         conversation_id=None)
    eng.update_from_response({"prompt_tokens": 700})  # the turn goes on after its compaction
    eng.on_session_end("s-run", [])
    assert rt.store.session("s-run").ended_at is not None
    # the CLI: `hermes --resume`, /compress, then the exit before any turn hands [] (the list of no turn)
    cli = make_engine(rt, session="s-cli")
    cli.ingest(history)
    cli.compress(history, current_tokens=5000, force=True)
    cli.on_session_end("s-cli", history)
    cli.on_session_start("s-cli", boundary_reason="compression", old_session_id="s-cli", platform="cli",
                         conversation_id=None)
    cli.on_session_end("s-cli", [])
    assert rt.store.session("s-cli").ended_at is not None


def test_chat_compaction_cleanup_rule():
    assert chat_compaction_cleanup("s", [], "s", "agent:main:telegram:dm:1")
    assert not chat_compaction_cleanup("s", [{"role": "user", "content": "hi"}], "s", "agent:main:telegram:dm:1")
    assert not chat_compaction_cleanup("s", [], "other", "agent:main:telegram:dm:1")
    assert not chat_compaction_cleanup("s", [], "s", "")  # the CLI's own session
    assert not chat_compaction_cleanup("", [], "", "agent:main:telegram:dm:1")


def test_subagent_start_with_missing_none_or_repeated_arguments_changes_nothing_it_should_not(tmp_path):
    rt = build_runtime(make_config(tmp_path))
    hooks = make_hooks(rt)
    tg = "agent:main:telegram:dm:42"
    fg = make_engine(rt, session="p-tg", platform="telegram")
    fg.on_session_start("p-tg", platform="telegram", conversation_id=tg)
    other = make_engine(rt, session="p-cli")
    kid = copy.deepcopy(fg)
    kid.state.key = None
    kid.on_session_start("kid-1", platform="subagent", conversation_id=None)
    for kw in ({}, {"parent_session_id": None, "child_session_id": None}, {"parent_session_id": "p-tg"},
               {"child_session_id": "kid-1"}, {"parent_session_id": None, "child_session_id": "kid-1"},
               {"parent_session_id": "p-tg", "child_session_id": "no-such-child"}):
        assert hooks["subagent_start"](**kw) is None
    assert rt.store.session("kid-1").scope == "" and rt.store.session("no-such-child") is None
    hooks["subagent_start"](parent_session_id="p-tg", child_session_id="kid-1")
    hooks["subagent_start"](parent_session_id="p-cli", child_session_id="kid-1")  # a second call: no change
    row = rt.store.session("kid-1")
    assert (row.scope, row.previous_session_id) == (f"telegram:{tg}", "p-tg")
    assert other.state.mode == kid.state.mode == "active" and command.resolve(rt).session_id == "p-cli"


# -- ends whose list may be another session's (the CLI hands the agent's last list) ---------------------
class HostSessions:
    """The host's SessionDB as the engine reads it (for ``/branch``'s ``_branched_from`` mark)."""

    def __init__(self, rows):
        self.rows = rows

    def get_session(self, session_id):
        return self.rows.get(session_id)


def turn(eng, history: list[dict]) -> list[dict]:
    """One turn the model answers; ``post_llm_call`` stored it (the engine's own ingest stands in)."""
    eng.update_from_response({"prompt_tokens": 500})
    eng.ingest(history)
    return history


def test_an_exit_right_after_a_rotating_compaction_stores_nothing_twice_and_a_later_turn_is_kept(tmp_path):
    # compression.in_place off: on_session_end(old, msgs), then on_session_start(new, old_session_id=old)
    rt = build_runtime(make_config(tmp_path, fresh_tail_count=2))
    eng = make_engine(rt, session="r-old")
    history = turn(eng, chat(12))
    out = eng.compress(history, current_tokens=5000, force=True)
    eng.on_session_end("r-old", history)
    eng.on_session_start("r-new", boundary_reason="compression", old_session_id="r-old", platform="cli",
                         conversation_id=None)
    eng.on_session_end("r-new", history)  # an exit now: the agent's last list is still the old one
    assert rt.store.count("r-old") == 12 and rt.store.count("r-new") == 0
    late = [*out, user("one more question"), assistant("one more answer")]
    eng.update_from_response({"prompt_tokens": 400})  # a turn that reaches trove only with the end
    eng.on_session_end("r-new", late)
    stored = [m.content for m in rt.store.page("r-new")]
    assert stored[-2:] == ["one more question", "one more answer"] and rt.store.count("r-old") == 12


def test_a_turn_that_ends_like_the_previous_sessions_last_one_is_still_stored(tmp_path):
    # /new, then the same question answered the same way; the turn reaches trove only with the end
    # (an interrupted turn's hook never ran): it is this session's own, not the old list handed again
    rt = build_runtime(make_config(tmp_path))
    eng = make_engine(rt, session="e-old")
    same = [user("status?"), assistant("All systems nominal.")]
    turn(eng, same)
    eng.on_session_end("e-old", same)
    eng.on_session_reset()
    eng.bind_session_state(None, "e-new")
    eng.update_from_response({"prompt_tokens": 300})
    eng.on_session_end("e-new", [dict(m) for m in same])
    assert rt.store.count("e-old") == 2 and rt.store.count("e-new") == 2


def test_resume_twice_then_exit_leaves_both_resumed_sessions_as_they_were(tmp_path):
    # /resume A, /resume B, exit: the exit hands on_session_end(B, ...) the list of the session before A
    rt = build_runtime(make_config(tmp_path))
    eng = make_engine(rt, session="q-a")
    turn(eng, chat(4))
    for sid in ("q-b", "q-x"):
        eng.on_session_reset()
        eng.bind_session_state(None, sid)
        turn(eng, [user(f"{sid} question"), assistant(f"{sid} answer")])
    x_list = [user("q-x question"), assistant("q-x answer")]
    for sid in ("q-a", "q-b"):
        eng.on_session_reset()
        eng.bind_session_state(None, sid)
    eng.on_session_end("q-b", x_list)
    assert (rt.store.count("q-a"), rt.store.count("q-b"), rt.store.count("q-x")) == (4, 2, 2)
    assert rt.store.session("q-b").ended_at is not None
    # /undo after /resume A changes only the host's history: the exit hands the same list, stored nowhere new
    eng.on_session_reset()
    eng.bind_session_state(None, "q-a")
    eng.on_session_end("q-a", x_list)
    assert (rt.store.count("q-a"), rt.store.count("q-b"), rt.store.count("q-x")) == (4, 2, 2)


def test_branch_then_exit_stores_nothing_new_and_a_turn_after_branch_is_kept(tmp_path):
    rt = build_runtime(make_config(tmp_path))
    host = HostSessions({"br-1": {"model_config": {"_branched_from": "p-1"}},
                         "br-2": {"model_config": {"_branched_from": "p-1"}}})
    eng = make_engine(rt, session="p-1")
    history = turn(eng, chat(6))
    eng.on_session_reset()
    eng.bind_session_state(host, "br-1")
    eng.on_session_end("br-1", history)  # exit right after /branch: the parent's list, copied
    assert rt.store.count("p-1") == 6 and rt.store.count("br-1") == 0
    eng.on_session_reset()
    eng.bind_session_state(host, "br-2")
    eng.update_from_response({"prompt_tokens": 300})  # a turn in the branch, its hook never ran
    eng.on_session_end("br-2", [*history, user("branch question"), assistant("branch answer")])
    assert rt.store.count("p-1") == 6 and rt.store.count("br-2") == 8


def test_a_failed_turn_after_new_reaches_the_new_session_with_the_end(tmp_path):
    rt = build_runtime(make_config(tmp_path))
    eng = make_engine(rt, session="f-old")
    history = turn(eng, chat(4))
    eng.on_session_end("f-old", history)
    eng.on_session_reset()
    eng.bind_session_state(None, "f-new")
    eng.on_session_end("f-new", [user("this turn's request failed")])  # no model answer, no hook
    assert [m.content for m in rt.store.page("f-new")] == ["this turn's request failed"]


def test_a_chat_agent_built_again_for_the_same_session_stores_its_turns_once(tmp_path):
    # the gateway evicts a chat's agent (/undo, /model, cache pressure) and builds another from the
    # registered engine for the next message; the old copy is left bound to the session
    rt = build_runtime(make_config(tmp_path))
    template = TroveEngine(rt, complete=no_model)
    key = "agent:main:telegram:dm:7373"
    first = copy.deepcopy(template)
    first.on_session_start("g-1", platform="telegram", conversation_id=key)
    history = turn(first, chat(4))
    second = copy.deepcopy(template)
    second.bind_session_state(None, "g-1")
    second.on_session_start("g-1", platform="telegram", conversation_id=key)
    second.update_from_response({"prompt_tokens": 300})  # its turn reaches trove only with the end
    second.on_session_end("g-1", [*history, user("again"), assistant("once more")])
    assert [m.content for m in rt.store.page("g-1")][-2:] == ["again", "once more"]
    assert rt.store.count("g-1") == 6 and rt.store.session("g-1").ended_at is not None


def test_a_user_message_opening_with_the_summary_marker_does_not_hide_the_summary_context(tmp_path):
    # The hook brings the summary context unless a live message already shows the summary; a message the user
    # opened with the marker sentence (asking what it means) shows none, and the context still comes along.
    from hermes_trove import tokens
    from hermes_trove.ingest import SUMMARY_MARKER

    rt = build_runtime(make_config(tmp_path))
    eng = make_engine(rt, session="s1", platform="cli")
    msgs = [m for i in range(40) for m in (user(f"turn {i} " + "word " * 150), assistant(f"reply {i}"))]
    eng.ingest(msgs)
    eng.compress(msgs, current_tokens=tokens.count_messages(msgs), force=True)
    asked = user(f"{SUMMARY_MARKER} is what I saw; what was compacted?")
    context = make_hooks(rt)["pre_llm_call"](session_id="s1", platform="cli", user_message=asked["content"],
                                             conversation_history=[asked])
    assert context and SUMMARY_MARKER in context["context"], context


def test_a_tool_offer_outlives_its_sessions_binding_and_the_oldest_goes_past_the_bound(tmp_path, monkeypatch):
    from hermes_trove import offers

    rt = build_runtime(make_config(tmp_path))
    rt.bind("s1", "active", True)
    rt.bind("s2", "active", False, answered=True)
    rt.bind("s3", "active", False)  # not answered there: doubted, no word
    rt.unbind("s1")
    rt.unbind("s2")
    rt.unbind("s3")
    assert rt.gives_tools("s1", "subagent") and not rt.gives_tools("s2", "telegram")
    assert rt.gives_tools("s3", "telegram") and not rt.gives_tools("s3", "subagent")  # its doubt went with it
    monkeypatch.setattr(offers, "MAX_OFFERS", 2)
    rt.bind("s4", "active", True)
    assert set(rt.tool_offers.said) == {"s2", "s4"}
    rt.note_tools("s4", False)  # the answering copy's word, newest again
    rt.bind("s5", "active", True)
    assert list(rt.tool_offers.said) == ["s4", "s5"] and not rt.gives_tools("s4", "telegram")


def test_an_agent_without_the_tools_compacting_before_its_first_answer_is_told_none(tmp_path):
    # `hermes --resume ID -t todo` (or a gateway chat's agent rebuilt without the context engine's toolset)
    # on a long transcript: the turn's preflight asks should_compress, then compacts, before any answer.
    # That copy was taken for a gateway helper (no tools, not answered), its doubt dropped, and the summary
    # header and the next policy named trove_* tools by the platform's default. A helper never asks
    # should_compress (hygiene and /compress call compress directly); the agent running a turn does.
    from hermes_trove import tokens

    msgs = [m for i in range(40) for m in (user(f"turn {i} " + "word " * 150), assistant(f"reply {i}"))]
    for platform, earlier in (("cli", None), ("telegram", True)):
        rt = build_runtime(make_config(tmp_path / platform))
        hooks = make_hooks(rt)
        if earlier:  # the chat's earlier agent had the tools and answered
            make_engine(rt, session="s1", platform=platform, tools=True).update_from_response({})
        eng = make_engine(rt, session="s1", platform=platform, tools=False)
        eng.ingest(msgs)
        eng.should_compress(tokens.count_messages(msgs))  # the host's preflight
        out = eng.compress(msgs, current_tokens=tokens.count_messages(msgs), force=True)
        shown = [m for m in out if m.get("_trove_summary")]
        assert shown and not [m for m in shown if "trove_grep" in m["content"].split("\n\n")[0]], shown
        eng.on_session_end("s1", msgs)
        eng.on_session_start("s1", platform=platform, conversation_id=None, boundary_reason="compression",
                             old_session_id="s1")
        assert not rt.gives_tools("s1", platform)
        context = turn_context(hooks, platform, "next")
        assert "TROVE recall policy" not in (context or {}).get("context", ""), (platform, context)


def test_a_compress_helper_that_finds_nothing_to_fold_leaves_the_chats_tools(tmp_path):
    # Gateway /compress builds a temporary agent (toolsets ["memory"]) on the chat's session and asks
    # has_content_to_compress(head) first; on a short chat the answer is no and it never compacts. Its
    # binds left the chat's offer doubted, so the cached agent's next turn (which is not bound again) got
    # no policy and summaries naming no trove_* tools, though it has them.
    rt, hooks, chat = answering_chat(tmp_path)
    helper = make_engine(rt, session="s1", platform="telegram", tools=False)
    assert not helper.has_content_to_compress([user("hello"), assistant("hi")])
    assert rt.gives_tools("s1", "telegram")
    context = turn_context(hooks, "telegram", "next")
    assert "TROVE recall policy" in (context or {}).get("context", ""), context
    make_engine(rt, session="s1", platform="telegram", tools=False)  # a helper's bind alone: doubted
    assert not rt.gives_tools("s1", "telegram")
    chat.should_compress(100)  # the cached agent's next turn asks at preflight, before its pre_llm_call
    assert rt.gives_tools("s1", "telegram")
