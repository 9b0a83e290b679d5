"""Drive the real Hermes agent loop through its Python API for the end-to-end suite.

Run with the interpreter that has hermes-agent, ``HERMES_HOME`` already pointing at a
scratch home: ``python driver.py SPEC.json RESULT.json``. The spec names the turns to run
(optionally resuming a saved history under a fixed session id) and an optional forced
compaction with a focus topic; the result records what the host selected and returned.
With ``"mode": "cli"`` it instead builds the interactive CLI object (``cli.HermesCLI``)
and feeds it steps, chat turns or slash commands, through the CLI's own entry points (or a wait for
the background ``delegate_task`` children or named host threads to finish).
"""
from __future__ import annotations

import json
import logging
import os
import re
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from functools import partial
from typing import Any


class _Collect(logging.Handler):
    """Keeps every WARNING-or-worse record so the test can look for engine fallbacks."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.lines.append(f"{record.levelname} {record.name}: {record.getMessage()}")
        except Exception:
            self.lines.append(f"{record.levelname} {record.name}: (unformattable)")


def _skip_entry_points() -> None:
    """Load the plugin only from $HERMES_HOME/plugins, the way scripts/install.sh installs it."""
    from hermes_cli import plugins

    plugins.PluginManager._scan_entry_points = lambda self: []  # type: ignore[method-assign]


def _plugin_source() -> str:
    try:
        from hermes_cli.plugins import get_plugin_manager

        loaded = get_plugin_manager()._plugins.get("hermes-trove")
        return f"{loaded.manifest.source}:{loaded.manifest.path}" if loaded else "(not found)"
    except Exception as exc:  # introspection only; never fail the run for it
        return f"(unknown: {exc})"


def run(spec: dict[str, Any]) -> dict[str, Any]:
    collect = _Collect()
    logging.getLogger().addHandler(collect)
    if spec.get("directory_plugin_only", True):
        _skip_entry_points()
    t0 = time.time()
    from run_agent import AIAgent  # importing run_agent writes into $HERMES_HOME

    kwargs: dict[str, Any] = dict(
        base_url=spec["base_url"], api_key="sk-fake", provider="custom", model="fake-model",
        quiet_mode=True, platform=spec.get("platform", "cli"), max_iterations=int(spec.get("max_iterations", 8)),
        enabled_toolsets=spec.get("toolsets", ["todo", "context_engine"]),
        skip_context_files=True, skip_memory=True)
    if spec.get("session_id"):
        kwargs["session_id"] = spec["session_id"]
    if spec.get("fallback_model"):  # the host's fallback chain (config.yaml ``fallback_providers``)
        kwargs["fallback_model"] = spec["fallback_model"]
    for name in ("gateway_session_key", "user_id"):  # as the gateway passes them for one chat
        if spec.get(name):
            kwargs[name] = spec[name]
    agent = AIAgent(**kwargs)
    engine = agent.context_compressor
    result: dict[str, Any] = {
        "init_seconds": round(time.time() - t0, 2),
        "engine_name": getattr(engine, "name", None),
        "engine_class": f"{type(engine).__module__}.{type(engine).__qualname__}",
        "plugin_source": _plugin_source(),
        "session_id": agent.session_id,
        "context_length": getattr(engine, "context_length", None),
        "threshold_tokens": getattr(engine, "threshold_tokens", None),
        "tools": [t["function"]["name"] for t in agent.tools or []],
        "turns": [],
    }
    history: list[dict[str, Any]] = []
    if spec.get("history_in"):
        with open(spec["history_in"], encoding="utf-8") as fh:
            history = json.load(fh)
    for text in spec.get("turns", []):
        if isinstance(text, dict) and "switch_model" in text:
            # /model: the host's in-place switch, which resolves the new model's window (config.yaml
            # custom_providers) and hands it to the engine through update_model.
            agent.switch_model(text["switch_model"], "custom", api_key="sk-fake", base_url=spec["base_url"])
            result["turns"].append({"switched": True, "context_length": getattr(engine, "context_length", None),
                                    "threshold_tokens": getattr(engine, "threshold_tokens", None)})
            continue
        timer = None
        if isinstance(text, dict) and "interrupt_after" in text:
            # Ctrl-C while the turn runs: the CLI calls agent.interrupt() from its input thread.
            timer = threading.Timer(float(text["interrupt_after"]), agent.interrupt, args=("stop",))
            timer.start()
            text = text["text"]
        out = agent.run_conversation(text, conversation_history=history)
        if timer is not None:
            timer.cancel()
        history = out["messages"]
        result["turns"].append({"final": str(out.get("final_response") or "")[:400],
                                "messages": len(history), "session_id": agent.session_id,
                                "compression_count": getattr(engine, "compression_count", None),
                                "model": agent.model, "context_length": getattr(engine, "context_length", None),
                                "threshold_tokens": getattr(engine, "threshold_tokens", None),
                                "last_compression": dict(getattr(getattr(engine, "state", None), "last_result", {}))})
    if spec.get("compress_focus") is not None:
        before = len(history)
        history, _ = agent._compress_context(history, None, focus_topic=spec["compress_focus"] or None,
                                             force=True)
        result["forced_compaction"] = {"before": before, "after": len(history),
                                       "compression_count": getattr(engine, "compression_count", None)}
        for text in spec.get("turns_after_compress", []):
            out = agent.run_conversation(text, conversation_history=history)
            history = out["messages"]
            result["turns"].append({"final": str(out.get("final_response") or "")[:400],
                                    "messages": len(history), "session_id": agent.session_id})
    agent.shutdown_memory_provider(history)  # the host's exit path: engine.on_session_end
    result["final_session_id"] = agent.session_id
    result["compression_count"] = getattr(engine, "compression_count", None)
    result["warnings"] = collect.lines
    if spec.get("history_out"):
        with open(spec["history_out"], "w", encoding="utf-8") as fh:
            json.dump(history, fh, default=str)
    return result


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")


def _captured(action: Callable[[], Any]) -> tuple[Any, str]:
    """Run ``action`` with file descriptor 1 redirected; returns its value and the text printed.

    The CLI prints through prompt_toolkit and rich, which hold their own references to the
    stream, so the capture happens below them, at the descriptor.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 1)
        try:
            value = action()
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
        sink.seek(0)
        text = sink.read().decode("utf-8", "replace")
    return value, _ANSI.sub("", text).replace("\r\n", "\n")


def _engine_facts(agent: Any) -> dict[str, Any]:
    engine = getattr(agent, "context_compressor", None) if agent is not None else None
    if engine is None:
        return {}
    return {"engine_name": getattr(engine, "name", None),
            "engine_class": f"{type(engine).__module__}.{type(engine).__qualname__}",
            "engine_session_id": getattr(engine, "session_id", None),
            "context_length": getattr(engine, "context_length", None),
            "threshold_tokens": getattr(engine, "threshold_tokens", None),
            "compression_count": getattr(engine, "compression_count", None)}


def _named(names: set[str], name: str) -> bool:
    """Whether a thread ``name`` is one of ``names`` (a name ending in "*" matches every name with that start)."""
    return name in names or any(n.endswith("*") and name.startswith(n[:-1]) for n in names)


def run_cli(spec: dict[str, Any]) -> dict[str, Any]:
    """The interactive CLI object driven step by step: ``{"chat": text}`` runs a turn through
    ``HermesCLI.chat``; ``{"command": "/x ..."}`` goes through ``HermesCLI.process_command``
    (built-in commands such as ``/new`` and plugin commands alike). Ends with the CLI's exit
    cleanup, which hands the transcript to the engine's ``on_session_end``."""
    collect = _Collect()
    logging.getLogger().addHandler(collect)
    if spec.get("directory_plugin_only", True):
        _skip_entry_points()
    t0 = time.time()
    import cli as host_cli  # importing the CLI module writes into $HERMES_HOME, like run_agent
    from hermes_cli.plugins import get_plugin_commands

    shell = host_cli.HermesCLI(toolsets=spec.get("toolsets", ["todo", "context_engine"]),
                               max_turns=int(spec.get("max_iterations", 8)))
    commands = sorted(get_plugin_commands())  # runs the host's plugin discovery if nothing did yet
    result: dict[str, Any] = {"init_seconds": round(time.time() - t0, 2), "plugin_commands": commands,
                              "plugin_source": _plugin_source(), "steps": []}
    for step in spec.get("steps", []):
        before = shell.session_id
        if "wait_delegations" in step:
            # Until the background delegate_task children this process dispatched have finished.
            from tools.async_delegation import active_count

            deadline = time.monotonic() + float(step["wait_delegations"])
            while active_count() and time.monotonic() < deadline:
                time.sleep(0.1)
            result["steps"].append({"kind": "wait", "still_running": active_count(), "session_id": before})
            continue
        if "wait_threads" in step:
            # Until the host's named threads (e.g. "bg-review"; "bg-task-*": every name with that start)
            # have finished, up to ``seconds``.
            deadline = time.monotonic() + float(step.get("seconds", 60))
            waited = partial(_named, set(step["wait_threads"]))
            for t in [t for t in threading.enumerate() if waited(t.name)]:
                t.join(max(0.0, deadline - time.monotonic()))
            alive = [t.name for t in threading.enumerate() if waited(t.name)]
            result["steps"].append({"kind": "wait", "still_running": len(alive), "session_id": before})
            continue
        if "curator" in step:
            # What the CLI does at startup when the curator is due: a pass on the "curator-review" thread.
            from agent.curator import maybe_run_curator

            started = maybe_run_curator(idle_for_seconds=float("inf"))
            result["steps"].append({"kind": "curator", "started": started is not None, "session_id": before})
            continue
        if "chat" in step:
            reply, printed = _captured(partial(shell.chat, step["chat"]))
            entry: dict[str, Any] = {"kind": "chat", "input": step["chat"][:200], "reply": str(reply or "")[:400]}
        else:
            keep, printed = _captured(partial(shell.process_command, step["command"]))
            entry = {"kind": "command", "input": step["command"], "keep_running": keep}
        entry.update({"output": printed[-20000:], "session_before": before, "session_id": shell.session_id,
                      "agent_session_id": getattr(shell.agent, "session_id", None),
                      "history_length": len(shell.conversation_history or [])})
        entry.update(_engine_facts(shell.agent))
        result["steps"].append(entry)
    result.update(_engine_facts(shell.agent))
    result["final_session_id"] = shell.session_id
    _, result["cleanup_output"] = _captured(host_cli._run_cleanup)  # the CLI's own exit path
    result["warnings"] = collect.lines
    return result


def main(argv: list[str]) -> int:
    spec_path, result_path = argv[1], argv[2]
    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    try:
        result = run_cli(spec) if spec.get("mode") == "cli" else run(spec)
        code = 0
    except BaseException:
        result = {"error": traceback.format_exc()}
        code = 1
    with open(result_path, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=1, default=str)
    sys.stdout.flush()
    os._exit(code)  # skip interpreter teardown: host background threads must not hang the run


if __name__ == "__main__":
    sys.exit(main(sys.argv))
