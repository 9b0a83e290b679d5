#!/usr/bin/env python3
"""A long-running gateway in one process: does anything trove holds grow with the sessions it served?

The plugin is loaded through ``register(ctx)`` as Hermes loads it (engine, hooks, ``/trove``), on a
temporary ``HERMES_HOME``, with an instant fake summarizer and no network. Then, in one process:

* ``--sessions`` gateway chats (spread over ``--chats`` chat keys), each on its own deep copy of the
  registered engine, initialised in the host's order (update_model, bind_session_state,
  get_tool_schemas, on_session_start), ``--turns`` turns each: pre_llm_call, the pre-API should_compress, the model's
  reply, a tool batch (a shell tool, or a trove_* tool through handle_tool_call), the post-batch
  check, post_llm_call. Along the way: forced compactions with the host's boundary (on_session_end
  then on_session_start), a gateway ``/compress`` on a temporary copy, ``/trove status`` calls,
  ``/new`` switches (end, reset, bind), and sessions that simply stop (a crash, an evicted agent:
  no end call at all). ``--copy-per-turn`` builds a fresh copy for every turn, as a gateway that
  rebuilds its agent does.
  ``--paste-chars`` opens each session with a pasted document of that many characters.
* one long session of ``--long-turns`` turns on one copy, compacting whenever the engine says so.

Every ``--every`` sessions (or turns) it prints the process's RSS, threads, open file descriptors
and open trove.db connections (descriptors on the file), the largest request against the window,
and the size of each structure of the audit. Every container reachable from trove's module globals
and from the runtime is measured; at the end, each one whose size changed is listed with its first
and last size. A flat line is the goal. Nothing is asserted.
"""
from __future__ import annotations

import argparse
import copy
import functools
import gc
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import weakref
from collections import Counter, OrderedDict, deque
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import _bootstrap  # noqa: E402,F401

import hermes_trove  # noqa: E402
from hermes_trove import tokens  # noqa: E402

CONTEXT = 64_000
PLATFORM = "telegram"
# The structures of the audit, by the path ``footprint`` names them with; each gets a column.
COLUMNS = {
    "bound": "runtime.bound_sessions",
    "offers": "runtime.tool_offers.said",
    "doubted": "runtime.tool_offers.doubted",
    "inherited": "runtime.inherited_modes",
    "marks": "runtime.marks.marks",
    "compactions": "runtime.compactions._entries",
    "held": "runtime.unstored.sessions",
    "cursors": "runtime.store._cursors",
    "idcache": "runtime.store.identities._known",
    "chats": "runtime._chats",
}


def fake_complete(messages: list[dict[str, Any]], model: str, timeout_s: float, max_tokens: int) -> str:
    """A cooperative summarizer: the tail of its prompt, within its budget."""
    return str(messages[-1]["content"])[-max(200, min(max_tokens, 2000)):]


class Ctx:
    """What ``register(ctx)`` needs of Hermes' plugin context."""

    llm = None

    def __init__(self) -> None:
        self.engine: Any = None
        self.hooks: dict[str, list[Any]] = {}
        self.commands: dict[str, Any] = {}

    def register_context_engine(self, engine: Any) -> None:
        self.engine = engine

    def register_hook(self, name: str, callback: Any) -> None:
        self.hooks.setdefault(name, []).append(callback)

    def register_command(self, name: str, handler: Any, **_: Any) -> None:
        self.commands[name] = handler

    def register_cli_command(self, *_: Any, **__: Any) -> None:
        pass

    def fire(self, name: str, **kw: Any) -> Any:
        out = None
        for callback in self.hooks.get(name, []):
            out = callback(**kw) or out
        return out


# -- what the process holds ----------------------------------------------------------------------
def proc_status() -> dict[str, int]:
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "Threads"):
            out[name] = int(value.split()[0])
    return out


def descriptors() -> tuple[int, int]:
    """Open descriptors, and those on a trove.db file (one per open SQLite connection)."""
    total = on_db = 0
    for fd in os.listdir("/proc/self/fd"):
        total += 1
        try:
            on_db += os.readlink(f"/proc/self/fd/{fd}").endswith("trove.db")
        except OSError:
            pass
    return total, on_db


SIZED = (dict, list, set, deque, OrderedDict, weakref.WeakValueDictionary, weakref.WeakKeyDictionary,
         weakref.WeakSet)


def footprint(runtime: Any) -> dict[str, int]:
    """The size of every container reachable from trove's module globals and from ``runtime`` (a few
    levels into trove's own objects), and of every cached function's cache."""
    sizes: dict[str, int] = {}
    seen: set[int] = set()

    def walk(path: str, value: Any, depth: int) -> None:
        if id(value) in seen:
            return
        seen.add(id(value))
        if isinstance(value, SIZED):  # the entries of a keyed container are summed under [*]
            sizes[path] = sizes.get(path, 0) + len(value)
            if depth > 0 and isinstance(value, dict):
                for v in list(value.values())[:5000]:
                    walk(f"{path}[*]", v, depth - 1)
            return
        if isinstance(value, functools._lru_cache_wrapper):
            sizes[path + "()"] = value.cache_info().currsize
            return
        module = getattr(type(value), "__module__", "") or ""
        if depth > 0 and module.startswith("hermes_trove") and hasattr(value, "__dict__"):
            for name, attr in list(vars(value).items()):
                walk(f"{path}.{name}", attr, depth - 1)

    walk("runtime", runtime, 4)
    for name, module in list(sys.modules.items()):
        if name.startswith("hermes_trove") and module is not None:
            for attr, value in list(vars(module).items()):
                if not attr.startswith("__"):
                    walk(f"{name[len('hermes_trove'):].lstrip('.') or '__init__'}.{attr}", value, 3)
    return sizes


class Sampler:
    def __init__(self, runtime: Any, label: str) -> None:
        self.runtime, self.label = runtime, label
        self.rows: list[dict[str, Any]] = []
        self.max_prompt = 0
        cols = " ".join(f"{c:>11}" for c in COLUMNS)
        print(f"\n== {label}\n{'done':>7} {'turns':>7} {'rss MB':>7} {'threads':>7} {'fds':>4} {'db conns':>8} "
              f"{'max prompt':>10} {'window':>7} {cols}")

    def sample(self, done: int, turns: int, window: int) -> None:
        gc.collect()
        status, (fds, conns) = proc_status(), descriptors()
        sizes = footprint(self.runtime)
        row = {"done": done, "turns": turns, "rss_mb": round(status["VmRSS"] / 1024, 1),
               "threads": status["Threads"], "fds": fds, "db_conns": conns, "max_prompt": self.max_prompt,
               "window": window, "sizes": sizes,
               "thread_names": Counter(t.name.split("(")[0].rstrip("-0123456789") for t in threading.enumerate())}
        self.rows.append(row)
        cols = " ".join(f"{sizes.get(path, '-'):>11}" for path in COLUMNS.values())
        print(f"{done:>7} {turns:>7} {row['rss_mb']:>7} {row['threads']:>7} {fds:>4} {conns:>8} "
              f"{self.max_prompt:>10} {window:>7} {cols}", flush=True)
        self.max_prompt = 0

    def report(self) -> dict[str, Any]:
        first, last = self.rows[0], self.rows[-1]
        grew = {p: (first["sizes"].get(p, 0), n) for p, n in last["sizes"].items()
                if n != first["sizes"].get(p, 0)}
        print(f"-- {self.label}: first -> last sample")
        for k in ("rss_mb", "threads", "fds", "db_conns"):
            print(f"   {k:<9} {first[k]} -> {last[k]}")
        print(f"   threads by name at the end: {dict(last['thread_names'])}")
        print("   structures whose size changed (first -> last):" + ("" if grew else " none"))
        for path, (a, b) in sorted(grew.items()):
            print(f"     {path:<60} {a:>7} -> {b:>7}")
        return {"first": {k: v for k, v in first.items() if k not in ("sizes", "thread_names")},
                "last": {k: v for k, v in last.items() if k not in ("sizes", "thread_names")}, "changed": grew}


# -- the host ------------------------------------------------------------------------------------
class Chat:
    """One agent's engine copy and its host-side list, driven in the 0.19 host's call order."""

    def __init__(self, ctx: Ctx, sampler: Sampler, session_id: str, chat: str) -> None:
        self.ctx, self.sampler, self.chat = ctx, sampler, chat
        self.session_id = session_id
        self.messages: list[dict[str, Any]] = []
        self.tokens = 1500  # a system prompt and tool schemas
        self.engine = self.new_copy()
        self.call = 0

    def new_copy(self, tools: bool = True) -> Any:
        """A copy initialised as the host does: the tools are asked for (when the agent's toolsets take the
        context engine's) after ``bind_session_state`` and before ``on_session_start``."""
        engine = copy.deepcopy(self.ctx.engine)
        engine.update_model(model="fake-model", context_length=CONTEXT, base_url="http://127.0.0.1:9/v1",
                            api_key="sk-fake", provider="custom", api_mode="chat_completions")
        engine.bind_session_state(session_db=None, session_id=self.session_id)
        if tools:
            engine.get_tool_schemas()
        engine.on_session_start(self.session_id, hermes_home=os.environ["HERMES_HOME"], platform=PLATFORM,
                                model="fake-model", context_length=CONTEXT, conversation_id=self.chat)
        return engine

    def add(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        self.tokens += tokens.count_message(message)

    def recount(self) -> None:
        self.tokens = 1500 + sum(tokens.count_message(m) for m in self.messages)

    def check(self, engine: Any, force: bool = False, focus: str | None = None) -> None:
        """A trigger check (or ``/compress``) and, when it compacts, the host's boundary."""
        self.sampler.max_prompt = max(self.sampler.max_prompt, self.tokens)
        if not force and not engine.should_compress(self.tokens):
            return
        before = list(self.messages)
        out = engine.compress(self.messages, current_tokens=self.tokens, focus_topic=focus, force=force)
        if out == self.messages:
            return
        self.messages = out
        self.recount()
        engine.on_session_end(self.session_id, before)
        engine.on_session_start(self.session_id, boundary_reason="compression", old_session_id=self.session_id,
                                platform=PLATFORM, conversation_id=self.chat)

    def turn(self, t: int, trove_tool: bool, big: int, paste: int = 0) -> None:
        engine = self.engine
        user = {"role": "user", "content": f"turn {t} of {self.session_id}: check invoice {t * 7} on shard {t % 97}"}
        if paste and not self.messages:  # a session that opens with a pasted document
            user["content"] += "\n" + (f"{self.session_id} pasted line {t}. " * (paste // 40 + 1))[:paste]
        self.add(user)
        self.check(engine)  # preflight
        context = self.ctx.fire("pre_llm_call", session_id=self.session_id, task_id="", turn_id=str(t),
                                user_message=user["content"], conversation_history=self.messages,
                                is_first_turn=t == 0, model="fake-model", platform=PLATFORM, sender_id="u1")
        text = context.get("context") if isinstance(context, dict) else context
        if text:
            user["api_content"] = user["content"] + "\n\n" + text
            self.tokens += len(text) // 4
        self.check(engine)  # before the API call
        engine.update_from_response({"prompt_tokens": self.tokens, "completion_tokens": 40,
                                     "total_tokens": self.tokens + 40})
        self.call += 1
        cid = f"call_{self.session_id}_{self.call}"
        if trove_tool:
            name, args = "trove_grep", {"query": f"invoice {t * 7}"}
            result = engine.handle_tool_call(name, args, messages=self.messages)
        else:
            name, args = "terminal", {"command": f"grep -n invoice ledger/{t % 97}.csv"}
            result = "\n".join(f"{i:5d}: invoice {i * 7} amount {i * 13 % 1000}.00 shard {t % 97}"
                               for i in range(big // 50))
        self.add({"role": "assistant", "content": "", "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]})
        self.add({"role": "tool", "tool_call_id": cid, "name": name, "tool_name": name, "content": result})
        self.check(engine)  # after the tool batch
        engine.update_from_response({"prompt_tokens": self.tokens, "completion_tokens": 40,
                                     "total_tokens": self.tokens + 40})
        self.add({"role": "assistant", "content": f"Invoice {t * 7} is reconciled on shard {t % 97}."})
        self.ctx.fire("post_llm_call", session_id=self.session_id, conversation_history=self.messages,
                      platform=PLATFORM, model="fake-model")


def gateway(ctx: Ctx, runtime: Any, args: argparse.Namespace) -> dict[str, Any]:
    sampler = Sampler(runtime, f"gateway: {args.sessions} sessions x {args.turns} turns over {args.chats} chats"
                               f"{', a copy per turn' if args.copy_per_turn else ''}")
    turns = 0
    status = ctx.commands.get("trove")
    sampler.sample(0, 0, CONTEXT)
    carried: dict[str, Chat] = {}  # chat key -> a chat that switched with /new and goes on
    for s in range(1, args.sessions + 1):
        chat_key = f"agent:main:{PLATFORM}:dm:{s % args.chats}"
        sid = f"20260105_{s // 3600:02d}{s % 3600 // 60:02d}{s % 60:02d}_{s:06x}"
        chat = carried.pop(chat_key, None)
        if chat is not None:  # /new: the old session ends, the copy resets and binds the new id
            chat.engine.on_session_end(chat.session_id, chat.messages)
            ctx.fire("on_session_finalize", session_id=chat.session_id, platform=PLATFORM, reason="new_session")
            chat.engine.on_session_reset()
            chat.session_id, chat.messages = sid, []
            chat.recount()
            chat.engine.bind_session_state(None, sid)
        else:
            chat = Chat(ctx, sampler, sid, chat_key)
        for t in range(args.turns):
            if args.copy_per_turn and t:
                chat.engine = chat.new_copy()
            chat.turn(t, trove_tool=(s + t) % 3 == 0, big=args.tool_chars, paste=args.paste_chars)
            turns += 1
        if s % 10 == 0:  # /compress in the chat's own agent
            chat.check(chat.engine, force=True, focus="keep the invoices")
        if s % 10 == 5:  # the gateway's /compress: a temporary agent on the chat's session, never ended,
            helper = Chat.__new__(Chat)  # whose toolsets (["memory"]) leave out the context engine's
            helper.__dict__.update(chat.__dict__)
            helper.engine = helper.new_copy(tools=False)
            if helper.engine.has_content_to_compress(helper.messages):
                helper.check(helper.engine, force=True)
        if status is not None and s % 7 == 0:
            status("status")
        ending = s % 4
        if ending == 0:  # a chat that ends: the agent's end, then the gateway's finalize
            chat.engine.on_session_end(chat.session_id, chat.messages)
            ctx.fire("on_session_finalize", session_id=chat.session_id, platform=PLATFORM, reason="session_expired")
        elif ending == 1:
            carried[chat_key] = chat  # its next session comes with /new
        # else: the process forgets the agent with no end call (a crash, an evicted agent)
        if s % args.every == 0:
            sampler.sample(s, turns, CONTEXT)
    return sampler.report()


def long_session(ctx: Ctx, runtime: Any, args: argparse.Namespace) -> dict[str, Any]:
    sampler = Sampler(runtime, f"one long session: {args.long_turns} turns on one engine copy")
    chat = Chat(ctx, sampler, "20260106_000000_long01", "agent:main:telegram:dm:long")
    status = ctx.commands.get("trove")
    sampler.sample(0, 0, CONTEXT)
    for t in range(1, args.long_turns + 1):
        chat.turn(t, trove_tool=t % 5 == 0, big=args.tool_chars)
        if status is not None and t % 50 == 0:
            status("status")
        if t % args.every == 0:
            sampler.sample(t, t, CONTEXT)
    return sampler.report()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=5000)
    ap.add_argument("--turns", type=int, default=3, help="turns per gateway session")
    ap.add_argument("--chats", type=int, default=400, help="gateway chat keys the sessions spread over")
    ap.add_argument("--long-turns", type=int, default=20000)
    ap.add_argument("--every", type=int, default=500, help="sample every this many sessions (long session: turns)")
    ap.add_argument("--tool-chars", type=int, default=6000, help="characters of each shell tool result")
    ap.add_argument("--paste-chars", type=int, default=0, help="each gateway session opens with a paste this long")
    ap.add_argument("--copy-per-turn", action="store_true", help="a fresh engine copy for every turn")
    ap.add_argument("--json", action="store_true", help="print the first and last samples as JSON at the end")
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="trove-bench-soak-"))
    os.environ.update(HERMES_HOME=str(home), TROVE_ENABLE_SLASH_COMMAND="1")
    try:
        ctx = Ctx()
        t0 = time.process_time()
        hermes_trove.register(ctx)
        ctx.engine.complete = fake_complete  # copies keep it
        runtime = ctx.engine.runtime
        out = {}
        if args.sessions:
            out["gateway"] = gateway(ctx, runtime, args)
        if args.long_turns:
            out["long"] = long_session(ctx, runtime, args)
        print(f"\nCPU {time.process_time() - t0:.1f}s; store {runtime.db.path}: "
              f"{Path(runtime.db.path).stat().st_size // 1024} KB")
        if args.json:
            print(json.dumps(out, default=str))
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
