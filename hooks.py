"""Plugin hooks: per-turn ingest (``post_llm_call``) and recall-policy injection (``pre_llm_call``).

Both act only for sessions a trove engine serves in this process, so loading the plugin
while another context engine runs changes nothing. Hook failures are logged, never raised.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable

from .store import SessionKey

log = logging.getLogger("hermes_trove.hooks")
POLICY_PATH = Path(__file__).resolve().parent / "skills" / "hermes-trove" / "references" / "recall-policy.md"


def recall_policy() -> str:
    """The canonical recall policy, byte for byte."""
    try:
        return POLICY_PATH.read_text(encoding="utf-8")
    except OSError:
        return ""


def make_hooks(runtime: Any) -> dict[str, Callable[..., Any]]:
    policy = recall_policy()

    def post_llm_call(**kw: Any) -> None:
        session_id = str(kw.get("session_id") or "")
        if runtime.bound_sessions.get(session_id) != "active":
            return
        history = kw.get("conversation_history")
        if not isinstance(history, list):
            return
        try:
            row = runtime.store.session(session_id)
            key = SessionKey(session_id, row.conversation_id if row else "",
                             str(kw.get("platform") or (row.platform if row else "")))
            runtime.store.ingest(key, history, skip=runtime.filters.skip_message)
        except Exception:
            log.exception("trove: per-turn ingest failed for %s (retried next turn)", session_id)

    def pre_llm_call(**kw: Any) -> Any:
        session_id = str(kw.get("session_id") or "")
        if not policy or runtime.bound_sessions.get(session_id) != "active":
            return None
        # The host replays injected text with its user message on every later turn, so
        # inject only while no live message already carries the policy.
        history = kw.get("conversation_history") or []
        if any(isinstance(m, dict) and policy in str(m.get("api_content") or "") for m in history):
            return None
        return {"context": policy}

    def transform_tool_result(**kw: Any) -> Any:
        """Stub a giant textual tool result before it enters the transcript (opt-in).

        The full text goes to a verified sidecar first; if that cannot be confirmed the
        result stays inline. Recovery tools are never stubbed.
        """
        cfg = runtime.config
        if not (cfg.large_output_externalization_enabled and cfg.large_output_active_replay_stubbing_enabled):
            return None
        session_id = str(kw.get("session_id") or "")
        result = kw.get("result")
        if runtime.bound_sessions.get(session_id) != "active" or not isinstance(result, str):
            return None
        try:
            from . import payloads, replay, tokens

            if kw.get("tool_name") in replay.NEVER_STUB_TOOLS:
                return None
            if tokens.count(result) <= int(cfg.large_output_active_replay_stub_threshold_tokens):
                return None
            ref = payloads.externalize_text(runtime, session_id, result)
            if ref is None:
                return None
            return payloads.externalized_placeholder(ref, "tool_result", result, payloads.PREVIEW_CHARS)
        except Exception:
            log.exception("trove: tool-result stubbing failed; result kept inline")
            return None

    return {"post_llm_call": post_llm_call, "pre_llm_call": pre_llm_call,
            "transform_tool_result": transform_tool_result}

