"""Active-replay stubbing: which big tool results leave the provider-visible prompt.

``plan_stubs`` and ``stub_message`` are pure functions over host message dicts;
``apply_replay_stubs`` is the thin effect that writes each picked result to a sidecar
(``sidecar.externalize_text``) and swaps in its stub. Stored rows are never changed here.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .. import tokens
from .redact import Redactor
from .sidecar import EXTERNALIZED_HEAD, PREVIEW_CHARS, PayloadRuntime, externalize_text, externalized_placeholder

# Recovery results stay inline, or reading a ref would only produce another ref.
NEVER_STUB_TOOLS = frozenset({"trove_describe", "trove_expand"})
_TEXT_BLOCK_TYPES = frozenset({"text", "input_text", "output_text"})


def _tool_names(messages: Sequence[dict[str, Any]]) -> dict[str, str]:
    """tool_call_id -> function name, from the assistant tool calls in ``messages``."""
    names: dict[str, str] = {}
    for msg in messages:
        if not isinstance(msg, dict) or msg.get("role") != "assistant":
            continue
        for call in msg.get("tool_calls") or ():
            if isinstance(call, dict) and call.get("id"):
                fn = call.get("function")
                name = fn.get("name") if isinstance(fn, dict) else call.get("name")
                if isinstance(name, str):
                    names[str(call["id"])] = name
    return names


def stub_source_text(message: dict[str, Any]) -> str | None:
    """The text a stub replaces, or None when the result is not purely textual."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content and all(
            isinstance(b, dict) and b.get("type") in _TEXT_BLOCK_TYPES and isinstance(b.get("text"), str)
            for b in content):
        return "\n".join(b["text"] for b in content)
    return None  # images, audio, files or unknown shapes stay inline


def plan_stubs(messages: Sequence[dict[str, Any]], *, threshold_tokens: int, protect_from: int,
               count_tokens: Callable[[dict[str, Any]], int]) -> list[int]:
    """Indices of tool results above ``threshold_tokens`` that may be stubbed.

    Messages at index >= ``protect_from`` are the protected fresh tail; the pass over newly
    ingested results passes ``protect_from=len(messages)``. ``count_tokens`` takes one
    message dict (for example ``tokens.count_message``).
    """
    names = _tool_names(messages)
    picked: list[int] = []
    for i, msg in enumerate(messages[:max(0, protect_from)]):
        if not isinstance(msg, dict) or msg.get("role") != "tool":
            continue
        name = msg.get("name") or msg.get("tool_name") or names.get(str(msg.get("tool_call_id") or ""), "")
        if name in NEVER_STUB_TOOLS:
            continue
        text = stub_source_text(msg)
        if not text or EXTERNALIZED_HEAD.match(text):
            continue  # nothing textual, or already a stub
        if count_tokens(msg) > threshold_tokens:
            picked.append(i)
    return picked


def stub_message(message: dict[str, Any], ref: str, preview_chars: int,
                 redact: Callable[[str], str] | None = None) -> dict[str, Any]:
    """A copy of ``message`` whose text is a ref stub; role, ids and block shape are kept.

    ``redact`` cleans the preview: the stub is provider-visible text this process writes.
    """
    text = stub_source_text(message)
    if text is None:
        return dict(message)
    if redact is not None:
        text = redact(text)
    stub = externalized_placeholder(ref, "tool_result", text, preview_chars)
    content = message.get("content")  # a list's first block keeps its type and extra keys
    return {**message, "content": [{**content[0], "text": stub}] if isinstance(content, list) else stub}


def apply_replay_stubs(runtime: PayloadRuntime, session_id: str, messages: Sequence[dict[str, Any]], *,
                       protect_from: int) -> tuple[list[dict[str, Any]], int]:
    """Stub big textual tool results in a provider-visible list when both opt-ins are on."""
    cfg = runtime.config
    out = list(messages)
    if not (cfg.large_output_externalization_enabled and cfg.large_output_active_replay_stubbing_enabled):
        return out, 0
    done = 0
    redactor = Redactor.from_config(cfg)
    for i in plan_stubs(out, threshold_tokens=int(cfg.large_output_active_replay_stub_threshold_tokens),
                        protect_from=protect_from, count_tokens=tokens.count_message):
        text = stub_source_text(out[i])
        ref = externalize_text(runtime, session_id, text) if text is not None else None
        if ref is not None:
            out[i] = stub_message(out[i], ref, PREVIEW_CHARS, redactor.redact)
            done += 1
    return out, done
