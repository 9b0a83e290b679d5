"""Pure conversions from OpenClaw shapes to the host's OpenAI-style message dicts.

Both sources speak the same content-block language (pi messages: ``text``, ``thinking``,
``toolCall``, ``image`` blocks; ``toolResult`` rows), so one builder serves the SQLite
``message_parts`` raw blocks and the JSONL transcript lines. Timestamps of every shape
become UTC epoch seconds here. Nothing in this module reads files or databases.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

# Old lossless-claw (<= 0.6.0) appended one of these system rows after every compaction pass.
COMPACTION_ROW = re.compile(r"^LCM compaction (leaf|condensed) pass\b")
# Externalized payload references that replaced a whole message body.
WHOLE_REF = re.compile(r"^\[LCM (Tool Output|Raw Payload): (file_[0-9a-f]{16})\b")
FALLBACK_MARKERS = ("[LCM fallback summary", "[Truncated from ")
EXPAND_HINT = re.compile(r"^Expand for details about:\s*(.+)$", re.MULTILINE)


def to_epoch(value: Any) -> float | None:
    """Any timestamp shape seen in OpenClaw data → UTC epoch seconds (None if unusable).

    Numbers above 1e11 are epoch milliseconds; strings may be ISO-8601 (``Z`` or offset)
    or SQLite's ``YYYY-MM-DD HH:MM:SS`` (naive means UTC).
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        v = float(value)
        return v / 1000.0 if abs(v) > 1e11 else v
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    if text[0].isdigit() and "-" not in text[1:] and ":" not in text:
        try:
            return to_epoch(float(text))
        except ValueError:
            return None
    try:  # offsets and "YYYY-MM-DD HH:MM:SS"; a trailing Z or z (also after a bare date) is UTC
        dt = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def loads_object(text: Any) -> dict[str, Any]:
    """Decode a JSON object column; anything else (NULL, garbage, a list) is ``{}``."""
    if isinstance(text, dict):
        return text
    try:
        value = json.loads(text) if isinstance(text, str) and text else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def tool_call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    """An OpenAI-style tool call; its arguments as the JSON string such messages carry."""
    if not isinstance(arguments, str):
        arguments = "{}" if arguments is None else json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
    return {"id": call_id, "type": "function", "function": {"name": name or "unknown", "arguments": arguments}}


def _image_part(block: dict[str, Any]) -> dict[str, Any]:
    data = block.get("data") or ""
    mime = block.get("mimeType") or block.get("mime_type") or "image/png"
    linked = isinstance(data, str) and data.startswith(("data:", "http://", "https://"))
    url = data if linked else f"data:{mime};base64,{data}"
    return {"type": "image_url", "image_url": {"url": url}}


def _content(texts: list[str], images: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    if not images:
        return "\n".join(t for t in texts if t)
    return [{"type": "text", "text": t} for t in texts if t] + images


def build_message(role: str, blocks: Iterable[dict[str, Any]], *, call_id_prefix: str = "openclaw_call",
                  tool_call_id: str | None = None, tool_name: str | None = None,
                  timestamp: float | None = None) -> dict[str, Any]:
    """pi-style content blocks → one OpenAI-style message dict.

    ``role`` is the OpenClaw role (``toolResult`` becomes ``tool``). Thinking blocks go to
    ``reasoning`` (the host's own key); tool calls without an id get a stable synthetic one.
    """
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for n, block in enumerate(blocks):
        if not isinstance(block, dict):
            if isinstance(block, str):
                texts.append(block)
            continue
        kind = block.get("type")
        if kind in ("text", "output_text", "input_text"):
            texts.append(str(block.get("text") or ""))
        elif kind in ("thinking", "reasoning"):
            if not block.get("redacted"):
                reasoning.append(str(block.get("thinking") or block.get("text") or ""))
        elif kind in ("toolCall", "tool_call", "toolUse", "tool_use", "function_call"):
            cid = block.get("id") or block.get("call_id") or block.get("toolCallId") or f"{call_id_prefix}_{n}"
            args = block.get("arguments", block.get("input", block.get("args")))
            calls.append(tool_call(str(cid), str(block.get("name") or block.get("toolName") or ""), args))
        elif kind == "image":
            images.append(_image_part(block))
        elif kind in ("tool_result", "toolResult") or "text" in block:
            texts.append(str(block.get("text") or block.get("output") or ""))
    out_role = "tool" if role in ("toolResult", "tool_result", "tool") else role
    msg: dict[str, Any] = {"role": out_role, "content": _content(texts, images)}
    if calls and out_role == "assistant":
        msg["tool_calls"] = calls
    if reasoning and out_role == "assistant":
        msg["reasoning"] = "\n".join(r for r in reasoning if r)
    if out_role == "tool":
        if tool_call_id:
            msg["tool_call_id"] = tool_call_id
        if tool_name:
            msg["name"] = tool_name
    if timestamp is not None:
        msg["timestamp"] = timestamp
    return msg


def is_empty(message: dict[str, Any]) -> bool:
    """Nothing worth storing: no text, no parts, no tool calls, no reasoning."""
    content = message.get("content")
    has_content = bool(content.strip()) if isinstance(content, str) else bool(content)
    return not has_content and not message.get("tool_calls") and not message.get("reasoning")


def whole_reference(content: Any) -> str | None:
    """The ``file_…`` id when a message body is one externalized-payload reference."""
    m = WHOLE_REF.match(content) if isinstance(content, str) else None
    return m.group(2) if m else None


def summary_level(text: str) -> str:
    """Our escalation level for an imported summary: fallback markers mean truncation."""
    return "deterministic" if any(marker in text for marker in FALLBACK_MARKERS) else "normal"


def expand_hint(text: str) -> str:
    matches = list(EXPAND_HINT.finditer(text or ""))
    return matches[-1].group(1).strip()[:500] if matches else ""


json_text = json.encoder.encode_basestring  # a str as compact_meta's encoder writes it
_META_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode


def compact_meta(values: dict[str, Any]) -> str | None:
    """Provenance kept beside the import ledger row: only set values, compact JSON."""
    kept = {k: v for k, v in values.items() if v not in (None, "", {}, [])}
    return _META_JSON(kept) if kept else None
