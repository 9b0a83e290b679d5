"""Token counting: tiktoken when its encoding loads offline, else a character estimate.

tiktoken is tried once, lazily, and counts only when ``cl100k_base`` loads from its cache without
network. The estimate is ``ceil(chars / 4)``, or ``ceil(chars / 1.5)`` for mostly non-ASCII text
(CJK packs more tokens per character). No network call happens at import.
"""
from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable
from typing import Any

_lock = threading.Lock()
_encoder: Callable[[str], int] | None = None
_backend = ""


def _estimate(text: str) -> int:
    sample = text[:2000]
    dense = not sample.isascii() and sum(ord(ch) > 127 for ch in sample) * 2 > len(sample)
    return -(-len(text) * 2 // 3) if dense else -(-len(text) // 4)


def _load() -> None:
    global _encoder, _backend
    with _lock:
        if _backend:
            return
        if os.environ.get("TROVE_TOKENIZER", "").lower() != "estimate":
            with contextlib.suppress(Exception):  # no tiktoken, or no cached encoding: the estimate
                import tiktoken
                from tiktoken import load as _tk_load

                # Refuse the network: only a cached encoding counts as available.
                original = _tk_load.read_file

                def _no_network(blobpath: str) -> bytes:
                    if blobpath.startswith(("http://", "https://")):
                        raise OSError("tiktoken encoding not cached; network disabled")
                    return original(blobpath)

                _tk_load.read_file = _no_network
                try:
                    enc = tiktoken.get_encoding("cl100k_base")
                finally:
                    _tk_load.read_file = original
                _encoder = lambda s: len(enc.encode(s, disallowed_special=()))  # noqa: E731
                _backend = "tiktoken:cl100k_base"
                return
        _encoder = _estimate
        _backend = "estimate:chars/4"


def backend() -> str:
    """Which counter is in use: ``tiktoken:cl100k_base`` or ``estimate:chars/4``."""
    _load()
    return _backend


def count(text: str) -> int:
    if not text:
        return 0
    if _encoder is None:
        _load()
    assert _encoder is not None
    return _encoder(text)


def message_text(message: dict[str, Any], calls_json: str | None = None) -> str:
    """The text of a host message that costs prompt tokens (content plus tool calls).

    ``calls_json``: the message's tool calls already encoded as this function would encode them.
    """
    content = message.get("content")
    if isinstance(content, str):
        text = content
    elif content is None:
        text = ""
    else:  # a multimodal list: each part's text, else its JSON (cut)
        text = "\n".join(part["text"] if isinstance(part, dict) and isinstance(part.get("text"), str)
                         else json.dumps(part, ensure_ascii=False, default=str)[:4000]
                         for part in (content if isinstance(content, list) else [content]))
    calls = message.get("tool_calls")
    if calls:
        text += "\n" + (calls_json if calls_json is not None else json.dumps(calls, ensure_ascii=False, default=str))
    return text


def count_message(message: dict[str, Any], calls_json: str | None = None) -> int:
    """Tokens of one message, with a small per-message overhead as providers charge."""
    return count(message_text(message, calls_json)) + 4


def count_messages(messages: list[dict[str, Any]]) -> int:
    return sum(count_message(m) for m in messages if isinstance(m, dict))  # an entry that is no message counts nothing
