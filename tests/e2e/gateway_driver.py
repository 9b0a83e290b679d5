"""Drive the agents the Hermes gateway builds, for several chats in one host process.

Run like driver.py: ``python gateway_driver.py SPEC.json RESULT.json`` with ``HERMES_HOME`` set.
The gateway runner itself needs live platform adapters, so this builds the same ``AIAgent``s
with the same arguments its code paths use (gateway/run.py, gateway/slash_commands.py): one
agent per chat (platform, user, chat, session key, the platform's toolsets, the shared
``SessionDB``), history loaded from state.db before each turn, ``/new`` (cleanup, a new session
id), ``/compress`` (a temporary agent bound to the chat), session hygiene (a temporary agent
WITHOUT the chat's platform and key, as run.py builds it) and ``/trove`` through the plugin
command table. The gateway's session ids live in a state file, so a second run is a restart.

Steps: ``{"chat": NAME, "text": ...}``, ``{"chat": NAME, "command": "/new" | "/compress [focus | here N]"
| "hygiene" | "/trove ..."}``, ``{"chat": NAME, "seed": PAIRS, "size": CHARS}`` (a transcript
written to state.db before trove ever saw the chat), ``{"chat": NAME, "toolsets": [...]}`` (the chat's next
agent is built anew with those toolsets, as after ``/tools``), ``{"chat": NAME, "model": M}`` (``/model``: the cached
agent switches in place, later agents of the chat are built on M), ``{"chat": NAME, "command": "expire"}``
(the idle expiry: finalize hook, agent cleaned up, a new session on the next message), ``"/resume SID"``,
``{"evict": NAME}`` (its cached agent is dropped with no cleanup), ``{"probe": true}`` (descriptors,
threads and the trove runtime's per-session structures, counted), ``{"parallel": [steps]}`` (one thread
each), ``{"seq": [steps]}``, ``{"wait_delegations": SECONDS}`` (until the background
``delegate_task`` children have finished), ``{"lock_store": PATH}`` (a second connection holds that
SQLite file's write lock) and ``{"unlock_store": SECONDS}`` (it commits; then up to SECONDS for trove's
finalize thread). A chat with a ``"profile"`` is served as a multiplexed gateway
serves a secondary profile: each of its steps runs inside the host's own per-turn profile scope
(``gateway.run._profile_runtime_scope``: that profile's home and secrets, this process's plugins).
"""
from __future__ import annotations

import contextlib
import contextvars
import json
import os
import sys
import threading
import time
import traceback
import types
import uuid
from datetime import datetime
from typing import Any

from driver import _Collect, _skip_entry_points


class Gateway:
    def __init__(self, spec: dict[str, Any]):
        from hermes_cli.config import load_config
        from hermes_cli.plugins import discover_plugins
        from hermes_state import SessionDB

        discover_plugins()  # at start-up, in the process's own profile, as gateway/run.py does
        self.spec, self.chats = spec, spec["chats"]
        self.db, self.config = SessionDB(), load_config()
        self.runtime = {"base_url": spec["base_url"], "api_key": "sk-fake", "provider": "custom"}
        path = spec["state"]
        self.sessions: dict[str, str] = json.load(open(path, encoding="utf-8")) if os.path.exists(path) else {}
        self.agents: dict[str, Any] = {}
        self.toolsets: dict[str, list[str]] = {}  # a chat's toolsets changed by a "toolsets" step
        # a chat's model changed by a "model" step: the session override, kept across a restart
        self.models: dict[str, str] = json.load(open(path + ".models", encoding="utf-8")) \
            if os.path.exists(path + ".models") else {}

    def session_id(self, name: str) -> str:
        if name not in self.sessions:  # the gateway session store's id format
            self.sessions[name] = f"{datetime.now():%Y%m%d_%H%M%S}_{uuid.uuid4().hex[:8]}"
            chat = self.chats[name]
            self.db.create_session(self.sessions[name], chat["platform"], user_id=chat["user"],
                                   session_key=chat["key"])
        return self.sessions[name]

    def agent(self, name: str) -> Any:
        """The chat's cached agent, built as gateway/run.py builds it for a message."""
        from hermes_cli.tools_config import _get_platform_tools
        from run_agent import AIAgent

        chat, sid = self.chats[name], self.session_id(name)
        cached = self.agents.get(name)
        if cached is not None and cached.session_id == sid:
            return cached
        platform = chat["platform"]
        agent = AIAgent(model=self.models.get(name, "fake-model"), **self.runtime,
                        max_iterations=int(self.spec.get("max_iterations", 6)),
                        quiet_mode=True, verbose_logging=False,
                        enabled_toolsets=sorted(self.toolsets.get(name) or _get_platform_tools(self.config, platform)),
                        session_id=sid, platform=platform, user_id=chat["user"], user_name=chat["user"],
                        chat_id=chat["user"], chat_name=chat["user"], chat_type="dm",
                        gateway_session_key=chat["key"], session_db=self.db)
        self.agents[name] = agent
        return agent

    def history(self, name: str) -> list[dict[str, Any]]:
        return self.db.get_messages_as_conversation(self.session_id(name), repair_alternation=True)

    def turn(self, name: str, text: str) -> dict[str, Any]:
        agent = self.agent(name)
        out = agent.run_conversation(text, conversation_history=self.history(name), task_id=agent.session_id)
        self.sessions[name] = agent.session_id
        engine, messages = agent.context_compressor, list(out.get("messages") or [])
        start = max([i for i, m in enumerate(messages) if m.get("role") == "user"] or [0])
        return {"final": str(out.get("final_response") or "")[:2000], "session_id": agent.session_id,
                "engine_name": engine.name, "compression_count": engine.compression_count,
                "tool_results": {str(m.get("name") or m.get("tool_name")): str(m.get("content"))
                                 for m in messages[start:] if m.get("role") == "tool"}}

    def cleanup(self, agent: Any) -> None:
        """gateway/run.py ``_cleanup_agent_resources``: the memory shutdown, then close."""
        agent.shutdown_memory_provider(list(getattr(agent, "_session_messages", None) or []))
        agent.close()

    def reset(self, name: str) -> dict[str, Any]:
        agent = self.agents.pop(name, None)
        if agent is not None:
            self.cleanup(agent)
        old = self.sessions.pop(name, "")
        if old:
            from hermes_cli.plugins import invoke_hook

            self.db.end_session(old, "session_reset")
            # gateway/slash_commands.py then fires the finalize hook for the session it left (on its event loop)
            started = time.monotonic()
            invoke_hook("on_session_finalize", session_id=old, platform=self.chats[name]["platform"],
                        reason="new_session", old_session_id=old)
            return {"old_session_id": old, "session_id": self.session_id(name),
                    "finalize_s": round(time.monotonic() - started, 2)}
        return {"old_session_id": old, "session_id": self.session_id(name)}

    def switch(self, name: str, model: str) -> dict[str, Any]:
        """gateway/slash_commands.py ``/model``: the cached agent switches in place, and the session's
        override builds the chat's later agents (and its /compress and hygiene helpers) on that model."""
        agent = self.agent(name)
        agent.switch_model(model, "custom", api_key="sk-fake", base_url=self.runtime["base_url"])
        self.models[name] = model
        engine = agent.context_compressor
        return {"model": model, "context_length": engine.context_length, "threshold_tokens": engine.threshold_tokens}

    def expire(self, name: str) -> dict[str, Any]:
        """gateway/run.py ``_session_expiry_watcher`` on an idle chat: the finalize hook (reason
        ``session_expired``, no old id), the cached agent cleaned up and dropped; the chat's next message
        then gets a new session id from the session store, which ends the old one in state.db."""
        from hermes_cli.plugins import invoke_hook

        old = self.session_id(name)
        invoke_hook("on_session_finalize", session_id=old, platform=self.chats[name]["platform"],
                    reason="session_expired")
        agent = self.agents.pop(name, None)
        if agent is not None:
            self.cleanup(agent)
        self.db.end_session(old, "idle")
        self.sessions.pop(name, None)
        return {"old_session_id": old, "session_id": self.session_id(name)}

    def resume(self, name: str, target: str) -> dict[str, Any]:
        """gateway/slash_commands.py ``/resume``: the session store ends the chat's session in state.db
        (``session_switch``) and reopens the target; the cached agent is evicted with no clean-up and no hook."""
        left = self.session_id(name)
        self.db.end_session(left, "session_switch")
        self.db.reopen_session(target)
        self.sessions[name] = target
        self.agents.pop(name, None)
        return {"left_session_id": left, "session_id": target}

    def undo(self, name: str) -> dict[str, Any]:
        """gateway/session.py ``rewind_session``: the newest user turn and what followed go inactive."""
        sid = self.session_id(name)
        target = self.db.list_recent_user_messages(sid, limit=10)[0]["id"]
        rewound = self.db.rewind_to_message(sid, target).get("rewound_count", 0)
        self.agents.pop(name, None)  # evicted softly: the next message builds a new agent
        return {"rewound": rewound}

    def retry(self, name: str) -> dict[str, Any]:
        """gateway/slash_commands.py ``_handle_retry_command``: the transcript is cut before the newest
        user message (a hard replace in state.db) and that message is sent again to the cached agent."""
        sid, history = self.session_id(name), self.history(name)
        last = max(i for i, m in enumerate(history) if m.get("role") == "user")
        self.db.replace_messages(sid, history[:last])
        return self.turn(name, str(history[last].get("content") or ""))

    def branch(self, name: str) -> dict[str, Any]:
        """gateway/slash_commands.py ``_handle_branch_command``: a new session (named for the platform
        only) holding a copy of the chat's transcript becomes the chat's session; the agent is evicted."""
        parent, history = self.session_id(name), self.history(name)
        new = f"{datetime.now():%Y%m%d_%H%M%S}_{uuid.uuid4().hex[:6]}"
        self.db.create_session(session_id=new, source=self.chats[name]["platform"], model="fake-model",
                               model_config={"_branched_from": parent}, parent_session_id=parent)
        for m in history:
            self.db.append_message(session_id=new, role=m.get("role", "user"), content=m.get("content"),
                                   tool_name=m.get("tool_name") or m.get("name"), tool_calls=m.get("tool_calls"),
                                   tool_call_id=m.get("tool_call_id"), finish_reason=m.get("finish_reason"))
        self.sessions[name] = new
        self.agents.pop(name, None)
        return {"parent_session_id": parent, "session_id": new, "copied": len(history)}

    def temporary(self, name: str, bound_to_chat: bool) -> Any:
        """The side agent of /compress (bound to the chat) or of session hygiene (not bound)."""
        from run_agent import AIAgent

        chat = self.chats[name]
        ident = {"platform": chat["platform"], "gateway_session_key": chat["key"]} if bound_to_chat else {}
        agent = AIAgent(**self.runtime, **ident, model=self.models.get(name, "fake-model"), max_iterations=4,
                        quiet_mode=True, skip_memory=True, enabled_toolsets=["memory"],
                        session_id=self.session_id(name), session_db=self.db)
        agent._print_fn = lambda *a, **k: None
        agent._end_session_on_close = False
        return agent

    def compress(self, name: str, focus: str | None, hygiene: bool) -> dict[str, Any]:
        from agent.model_metadata import estimate_messages_tokens_rough, estimate_request_tokens_rough
        from hermes_cli.partial_compress import (
            parse_partial_compress_args,
            rejoin_compressed_head_and_tail,
            split_history_for_partial_compress,
        )

        history = self.history(name)
        msgs = [m for m in history if m.get("role") in {"user", "assistant", "tool"}]
        partial, keep_last, focus = parse_partial_compress_args(focus or "") if not hygiene else (False, 0, None)
        head, tail = split_history_for_partial_compress(msgs, keep_last) if partial else (msgs, [])
        if not tail:
            head = msgs  # the gateway's fallback: a split that keeps everything compresses the whole
        agent = self.temporary(name, bound_to_chat=not hygiene)
        engine = agent.context_compressor
        if hygiene:
            agent.compression_in_place = True
            engine.bind_session_state(self.db, agent.session_id)
            approx = estimate_messages_tokens_rough(history)
        else:
            approx = estimate_request_tokens_rough(msgs, system_prompt=agent._cached_system_prompt or "",
                                                   tools=agent.tools or None)
            if not engine.has_content_to_compress(head):
                self.cleanup(agent)
                return {"nothing_to_compress": True}
        try:
            out, _ = agent._compress_context(head, "", approx_tokens=approx, focus_topic=focus, force=not hygiene)
            if tail:
                out = rejoin_compressed_head_and_tail(out, tail)
        finally:  # both paths evict the chat's cached agent (softly) and clean the side agent up
            self.agents.pop(name, None)
            self.cleanup(agent)
        return {"before": len(msgs), "after": len(out), "session_id": agent.session_id,
                "engine_name": engine.name, "in_place": bool(getattr(agent, "_last_compaction_in_place", False))}

    def trove(self, name: str, args: str) -> dict[str, Any]:
        """A ``/trove`` message from the chat: its own task runs the pre_gateway_dispatch hooks with
        the message event and the runner, then the plugin command (gateway/run.py _handle_message)."""
        from gateway.config import Platform
        from gateway.platforms.base import MessageEvent
        from gateway.session import SessionSource, build_session_key
        from hermes_cli.plugins import get_plugin_command_handler, invoke_hook

        chat = self.chats[name]
        source = SessionSource(platform=Platform(chat["platform"]), chat_id=chat["user"], user_id=chat["user"],
                               chat_type="dm")
        assert build_session_key(source) == chat["key"], (build_session_key(source), chat["key"])
        runner = types.SimpleNamespace(_session_key_for_source=build_session_key)  # the runner's key lookup

        def message_task() -> str:
            invoke_hook("pre_gateway_dispatch", event=MessageEvent(text=f"/trove {args}", source=source),
                        gateway=runner, session_store=None)
            handler = get_plugin_command_handler("trove")
            return str(handler(args)) if handler else "(no /trove command)"
        return {"text": contextvars.copy_context().run(message_task)}

    def seed(self, name: str, pairs: int, size: int) -> dict[str, Any]:
        sid = self.session_id(name)
        for i in range(pairs):
            self.db.append_message(sid, "user", f"seeded question {i}: " + "lorem ipsum " * (size // 12))
            self.db.append_message(sid, "assistant", f"seeded answer {i}: " + "dolor sit " * (size // 10))
        return {"session_id": sid, "seeded": pairs}

    def step(self, step: dict[str, Any]) -> dict[str, Any]:
        if "parallel" in step:
            results: list[Any] = [None] * len(step["parallel"])

            def run(i: int, s: dict[str, Any]) -> None:
                results[i] = self.step(s)
            threads = [threading.Thread(target=run, args=(i, s)) for i, s in enumerate(step["parallel"])]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            return {"parallel": results}
        if "seq" in step:
            return {"seq": [self.step(s) for s in step["seq"]]}
        if "lock_store" in step:  # another process's write in progress on that SQLite file: its write lock held
            import sqlite3

            self.holder = sqlite3.connect(step["lock_store"], isolation_level=None)
            self.holder.execute("BEGIN IMMEDIATE")
            return {"step": step}
        if "unlock_store" in step:  # that write commits; an end trove finishes off the loop then lands
            self.holder.execute("COMMIT")
            self.holder.close()
            for t in [t for t in threading.enumerate() if t.name == "trove-finalize"]:
                t.join(float(step["unlock_store"]))
            return {"step": step}
        if "probe" in step:  # what the process holds now: descriptors, threads, trove's shared structures
            return {"step": step, "probe": probe()}
        if "evict" in step:  # the gateway drops a chat's cached agent with no cleanup (an idle eviction)
            return {"step": step, "evicted": self.agents.pop(step["evict"], None) is not None}
        if "wait_delegations" in step:  # until the background delegate_task children have finished
            from tools.async_delegation import active_count

            deadline = time.monotonic() + float(step["wait_delegations"])
            while active_count() and time.monotonic() < deadline:
                time.sleep(0.1)
            return {"step": step, "still_running": active_count()}
        name, command = step.get("chat", ""), str(step.get("command", ""))
        try:
            with self.profile_scope(name):
                return {"step": step, **self.dispatch(name, step, command)}
        except Exception:
            return {"step": step, "error": traceback.format_exc()}

    def profile_scope(self, name: str) -> Any:
        """The multiplexer's per-turn scope of the chat's profile (none for a chat without one)."""
        profile = self.chats.get(name, {}).get("profile")
        if not profile:
            return contextlib.nullcontext()
        from gateway.run import _profile_runtime_scope
        from hermes_cli.profiles import get_profile_dir

        return _profile_runtime_scope(get_profile_dir(profile))

    def dispatch(self, name: str, step: dict[str, Any], command: str) -> dict[str, Any]:
        if "text" in step:
            return self.turn(name, step["text"])
        if "toolsets" in step:  # /tools: the gateway builds the chat's next agent anew with these
            self.toolsets[name] = list(step["toolsets"])
            self.agents.pop(name, None)
            return {"toolsets": self.toolsets[name]}
        if "seed" in step:
            return self.seed(name, int(step["seed"]), int(step.get("size", 4000)))
        if command == "/new":
            return self.reset(name)
        if "model" in step:
            return self.switch(name, str(step["model"]))
        if command == "expire":
            return self.expire(name)
        if command.startswith("/resume "):
            return self.resume(name, command.split()[1])
        if command == "/undo":
            return self.undo(name)
        if command == "/retry":
            return self.retry(name)
        if command == "/branch":
            return self.branch(name)
        if command.startswith("/compress"):
            return self.compress(name, command[len("/compress"):].strip() or None, hygiene=False)
        if command == "hygiene":
            return self.compress(name, None, hygiene=True)
        if command.startswith("/trove"):
            return self.trove(name, command[len("/trove"):].strip())
        raise ValueError(f"unknown step {step}")


def probe() -> dict[str, Any]:
    """Open descriptors (and those on a trove.db file), live threads, and the sizes of what the trove
    runtime shared by every engine copy keeps per session."""
    import gc

    from hermes_cli.plugins import get_plugin_context_engine

    gc.collect()
    links = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            links.append(os.readlink(f"/proc/self/fd/{fd}"))
    runtime = get_plugin_context_engine().runtime
    return {"fds": len(links), "db_fds": sum(link.endswith("trove.db") for link in links),
            "threads": sorted(t.name for t in threading.enumerate()),
            "bound": len(runtime.bound_sessions), "offers": len(runtime.tool_offers.said),
            "doubted": sorted(runtime.tool_offers.doubted),
            "marks": len(runtime.marks.marks), "marks_chars": runtime.marks.chars,
            "compactions": len(runtime.compactions)}


def main(argv: list[str]) -> int:
    spec_path, result_path = argv[1], argv[2]
    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    collect = _Collect()
    result: dict[str, Any] = {}
    try:
        import logging

        logging.getLogger().addHandler(collect)
        _skip_entry_points()
        gateway = Gateway(spec)
        result["steps"] = [gateway.step(s) for s in spec["steps"]]
        for agent in gateway.agents.values():  # the gateway's shutdown
            gateway.cleanup(agent)
        with open(spec["state"], "w", encoding="utf-8") as fh:
            json.dump(gateway.sessions, fh)
        with open(spec["state"] + ".models", "w", encoding="utf-8") as fh:
            json.dump(gateway.models, fh)
        result["sessions"] = gateway.sessions
        code = 0
    except BaseException:
        result, code = {"error": traceback.format_exc()}, 1
    result["warnings"] = collect.lines
    with open(result_path, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=1, default=str)
    sys.stdout.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
