"""Plugin hooks: per-turn ingest (``post_llm_call``) and recall-policy injection (``pre_llm_call``).

Both act only for sessions a trove engine serves in this process, so loading the plugin
while another context engine runs changes nothing. Hook failures are logged, never raised.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable

from .ingest import SUMMARY_MARKER
from .store import SessionKey

log = logging.getLogger("hermes_trove.hooks")
POLICY_PATH = Path(__file__).resolve().parent / "skills" / "hermes-trove" / "references" / "recall-policy.md"


def recall_policy() -> str:
    """The canonical recall policy, byte for byte."""
    try:
        return POLICY_PATH.read_text(encoding="utf-8")
    except OSError:
        return ""


SUMMARY_CONTEXT_TOKENS = 1500  # carried summaries shown before the first compaction of a session


def summary_context(runtime: Any, session_id: str, history: list[dict[str, Any]]) -> str:
    """Summary nodes the session can see but its transcript does not show yet (after /new).

    Compaction puts the summary message into the prompt; a fresh session that inherited
    summaries has none until then, so the hook brings the newest of them along once.
    """
    from .compaction.policy import select_summary_nodes
    from .compaction.summarize import SUMMARY_HEADER, render_summary_text
    from .compaction.compactor import node_info

    if any(is_summary_text(m.get("content")) or SUMMARY_HEADER in str(m.get("api_content") or "") for m in history):
        return ""
    frontier = runtime.dag.frontier(session_id)
    if not frontier:
        return ""
    kept, omitted = select_summary_nodes([node_info(n) for n in frontier], SUMMARY_CONTEXT_TOKENS)
    by_id = {n.node_id: n for n in frontier}
    return render_summary_text([by_id[i] for i in kept], omitted)


def is_summary_text(content: Any) -> bool:
    return isinstance(content, str) and content.startswith(SUMMARY_MARKER)


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
        if runtime.bound_sessions.get(session_id) != "active":
            return None
        # The host replays injected text with its user message on every later turn, so
        # each part is injected only while no live message already carries it.
        history = [m for m in kw.get("conversation_history") or [] if isinstance(m, dict)]
        parts = []
        if policy and not any(policy in str(m.get("api_content") or "") for m in history):
            parts.append(policy)
        try:
            summary = summary_context(runtime, session_id, history)
        except Exception:
            log.exception("trove: could not build the summary context for %s", session_id)
            summary = ""
        if summary:
            parts.append(summary)
        return {"context": "\n\n".join(parts)} if parts else None

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
            from . import tokens
            from .payloads import sidecar as payloads
            from .payloads import replay

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

