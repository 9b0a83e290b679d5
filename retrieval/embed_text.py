"""What an indexed row is embedded as: its text, its chunks with spans back to it, and the
context recipes that let a message's vectors carry the turns before it in its session (the
model reading earlier turns as text, or a vector carried over from the previous message).
"""
from __future__ import annotations

import itertools
import json
from typing import Any

from ..fulltext import memory_tool
from .embed_providers import normalise
from .vector_store import PendingText, VectorStore

CHUNK_CHARS = 1000         # about 250 MiniLM tokens of English chat text
CHUNK_OVERLAP = 120
MAX_CHUNKS_PER_MESSAGE = 16

# A chat turn alone often lacks its topic ("Yes, last Friday!"), so a message's vectors carry the
# turns before it in its session. TROVE_EMBEDDING_CONTEXT=text (the default): the model reads each
# chunk followed by TROVE_EMBEDDING_CONTEXT_MESSAGES earlier messages (after the chunk, so a long
# chunk keeps its own words when the model truncates), each cut to CONTEXT_CHARS. =vector: each
# chunk is embedded alone and its vector becomes unit(own + CONTEXT_WEIGHT x the previous
# user/assistant message's vector), which carried its own predecessor's, so earlier turns fade
# geometrically: about a third of the model time. A new generation is built with vector context
# first (usable about 3x sooner) and, once active, embedded again in place with text context.
CONTEXT_CHARS = 300
CONTEXT_WEIGHT = 0.7
CONTEXT_LOOKBACK = 8       # earlier rows read past blank ones, beyond the messages wanted


def recipe(context: str, context_messages: int) -> str:
    """The name of the text recipe recorded on a generation (``chunk``: each chunk alone)."""
    if context == "vector":
        return f"chunk+prev-vector:{CONTEXT_WEIGHT}"
    return f"chunk+{context_messages}prev:{CONTEXT_CHARS}" if context == "text" and context_messages > 0 else "chunk"


def chunk_spans(text: str, size: int = CHUNK_CHARS, overlap: int = CHUNK_OVERLAP,
                max_chunks: int = MAX_CHUNKS_PER_MESSAGE) -> list[tuple[int, int]]:
    """[start, end) windows over ``text``, cut at whitespace where possible; none for blank text."""
    if not text.strip():
        return []
    spans: list[tuple[int, int]] = []
    start, n = 0, len(text)
    while start < n and len(spans) < max_chunks:
        end = min(n, start + size)
        if end < n:
            cut = text.rfind(" ", start + size // 2, end)
            end = cut if cut > start else end
        if text[start:end].strip():
            spans.append((start, end))
        if end >= n:
            break
        start = max(end - overlap, start + 1)
        while start < n and text[start - 1] not in " \n\t" and start < end:
            start += 1  # begin the next window on a word boundary
    return spans


def item_text(item: PendingText, tool_policy: str) -> str:
    """The text of a row that gets vectors, or '' when it gets none."""
    if item.kind == "summary":
        return item.text
    if item.role not in ("user", "assistant") and not (tool_policy == "all" and item.role == "tool"):
        return ""
    if item.role == "tool" and memory_tool(item.tool_name):
        return ""  # a memory tool's result copies stored rows, which have vectors of their own
    if not item.is_json:
        return item.text
    try:  # multimodal content: its text parts only
        parts = json.loads(item.text)
    except ValueError:
        return item.text
    if isinstance(parts, list):
        return "\n".join(str(p.get("text", "")) for p in parts if isinstance(p, dict) and p.get("type") == "text")
    return ""


def contexts(store: VectorStore, items: list[PendingText], tool_policy: str, want: int) -> dict[int, str]:
    """The context text each message of ``items`` (in store_id order) is embedded with: the
    ``want`` earlier user/assistant messages of its session, oldest first, each cut."""
    recent: dict[str, list[str]] = {}
    out: dict[int, str] = {}
    if want <= 0:
        return out
    for item in items:
        if item.session_id not in recent:
            earlier = store.preceding_messages(item.session_id, item.item_id, want + CONTEXT_LOOKBACK)
            texts = [t for t in (item_text(p, tool_policy).strip() for p in earlier) if t]
            recent[item.session_id] = list(reversed(texts[:want]))
        window = recent[item.session_id]
        out[item.item_id] = "\n".join(t[:CONTEXT_CHARS] for t in window)
        text = item_text(item, tool_policy).strip() if item.role in ("user", "assistant") else ""
        if text:
            window.append(text)
            del window[:-want]
    return out


class VectorCarry:
    """Vector-level context for one pass: the unit vector of each session's latest embedded
    user/assistant message, read from the generation once per session, then carried forward."""

    def __init__(self, store: VectorStore, generation_id: int, tool_policy: str):
        self.store, self.generation_id, self.policy = store, generation_id, tool_policy
        self.last: dict[str, Any] = {}  # session id -> unit vector, or None (nothing before)

    def _previous(self, item: PendingText) -> Any:
        if item.session_id not in self.last:
            earlier = self.store.preceding_messages(item.session_id, item.item_id, 1 + CONTEXT_LOOKBACK)
            found = next((p for p in earlier if item_text(p, self.policy).strip()), None)
            rows = self.store.message_vectors(self.generation_id, found.item_id) if found is not None else []
            self.last[item.session_id] = _unit_mean(rows) if rows else None
        return self.last[item.session_id]

    def mix(self, meta: list[tuple[PendingText, int, int | None]], vectors: Any) -> Any:
        """``vectors`` (one unit row per ``meta`` entry, each message's chunks adjacent, messages
        in store_id order) with each message's rows mixed with its predecessor's vector."""
        import numpy as np

        out = vectors.copy()
        end = 0
        for _, run in itertools.groupby(meta, key=lambda entry: id(entry[0])):  # each item: its adjacent rows
            chunks = list(run)
            item, start, end = chunks[0][0], end, end + len(chunks)
            before = self._previous(item)
            if before is not None:
                out[start:end] = normalise(np, out[start:end] + CONTEXT_WEIGHT * before)
            if item.role in ("user", "assistant"):
                self.last[item.session_id] = normalise(np, out[start:end].mean(axis=0, keepdims=True))[0]
        return out


def _unit_mean(stored: list[tuple[bytes, float]]) -> Any:
    """The unit mean of int8 chunk vectors with their scales."""
    import numpy as np

    rows = np.stack([np.frombuffer(v, dtype=np.int8).astype(np.float32) * scale for v, scale in stored])
    return normalise(np, rows.mean(axis=0, keepdims=True))[0]
