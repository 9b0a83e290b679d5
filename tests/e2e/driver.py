"""Drive the real Hermes agent loop through its Python API for the end-to-end suite.

Run with the interpreter that has hermes-agent, ``HERMES_HOME`` already pointing at a
scratch home: ``python driver.py SPEC.json RESULT.json``. The spec names the turns to run
(optionally resuming a saved history under a fixed session id) and an optional forced
compaction with a focus topic; the result records what the host selected and returned.
"""
from __future__ import annotations

import json
import logging
import os
import sys
import time
import traceback
from typing import Any


class _Collect(logging.Handler):
    """Keeps every WARNING-or-worse record so the test can look for engine fallbacks."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.lines.append("%s %s: %s" % (record.levelname, record.name, record.getMessage()))
        except Exception:
            self.lines.append("%s %s: (unformattable)" % (record.levelname, record.name))


def _skip_entry_points() -> None:
    """Load the plugin only from $HERMES_HOME/plugins, the way scripts/install.sh installs it."""
    from hermes_cli import plugins

    plugins.PluginManager._scan_entry_points = lambda self: []  # type: ignore[method-assign]


def _plugin_source() -> str:
    try:
        from hermes_cli.plugins import get_plugin_manager

        loaded = get_plugin_manager()._plugins.get("hermes-trove")
        return "%s:%s" % (loaded.manifest.source, loaded.manifest.path) if loaded else "(not found)"
    except Exception as exc:  # introspection only; never fail the run for it
        return "(unknown: %s)" % exc


def run(spec: dict[str, Any]) -> dict[str, Any]:
    collect = _Collect()
    logging.getLogger().addHandler(collect)
    if spec.get("directory_plugin_only", True):
        _skip_entry_points()
    t0 = time.time()
    from run_agent import AIAgent  # importing run_agent writes into $HERMES_HOME

    kwargs: dict[str, Any] = dict(
        base_url=spec["base_url"], api_key="sk-fake", provider="custom", model="fake-model",
        quiet_mode=True, platform="cli", max_iterations=int(spec.get("max_iterations", 8)),
        enabled_toolsets=spec.get("toolsets", ["todo", "context_engine"]),
        skip_context_files=True, skip_memory=True)
    if spec.get("session_id"):
        kwargs["session_id"] = spec["session_id"]
    agent = AIAgent(**kwargs)
    engine = agent.context_compressor
    result: dict[str, Any] = {
        "init_seconds": round(time.time() - t0, 2),
        "engine_name": getattr(engine, "name", None),
        "engine_class": "%s.%s" % (type(engine).__module__, type(engine).__qualname__),
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
        out = agent.run_conversation(text, conversation_history=history)
        history = out["messages"]
        result["turns"].append({"final": str(out.get("final_response") or "")[:400],
                                "messages": len(history), "session_id": agent.session_id,
                                "compression_count": getattr(engine, "compression_count", None)})
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


def main(argv: list[str]) -> int:
    spec_path, result_path = argv[1], argv[2]
    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    try:
        result = run(spec)
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
