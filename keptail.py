"""The exchanges a ``/compress here N`` kept, brought back when the host's next list does not show them.

``/compress here N`` passes trove the conversation up to the user's boundary and keeps the newest N
exchanges itself. A gateway compacting in place writes only what trove gave back for that prefix to
its transcript store and reloads the chat from there, so the next turn shows the summary and nothing
of the N exchanges the user asked to keep (they are stored, beneath no summary yet). The per-turn hook
then brings them along, as ``[ROLE HH:MM]: text`` lines under ``HEADER`` within a bound, until a turn's
message carries them (the host merges the first turn's message into the summary before it and drops
what the hooks gave that turn, so the next turn gets them again). A list that shows any of them (the
interactive CLI keeps them in memory) gets nothing, and the record is dropped.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .compaction.summarize import serialize_messages
from .ingest import message_identity

if TYPE_CHECKING:
    from .runtime import Runtime
    from .store import MessageRow

HEADER = ("[trove: the newest exchanges, kept verbatim when this chat was compacted with /compress here; "
          "the transcript no longer shows them]")
MAX_CHARS = 24000  # about 6,000 tokens: the newest rows first, an older one left out whole
PER_ROW_CHARS = 6000  # a longer row shows its head and end (trove_expand reads it whole)


def carries_kept_tail(message: dict[str, Any]) -> bool:
    """Whether a message went to the model with the kept exchanges (the host keeps what it sent)."""
    return HEADER in str(message.get("api_content") or "")


def kept_tail_context(runtime: Runtime, session_id: str, history: Sequence[Any], max_chars: int | None) -> str:
    """The kept exchanges as one block, or "" (none recorded, the list shows or carries them, or none fits)."""
    ids = runtime.compactions.kept_tail(session_id)
    if ids is None:  # the common case: nothing recorded, nothing read
        return ""
    rows = [r for r in runtime.store.backlog(session_id, ids[0] - 1) if r.store_id <= ids[1]]
    shown = {message_identity(m) for m in history if isinstance(m, dict)}
    if not rows or any(r.identity in shown for r in rows) \
            or any(isinstance(m, dict) and carries_kept_tail(m) for m in history):
        runtime.compactions.kept_tail(session_id, drop=True)  # later turns cost nothing
        return ""
    return fitted(rows, MAX_CHARS if max_chars is None else min(MAX_CHARS, max_chars))


def fitted(rows: list[MessageRow], limit: int) -> str:
    """``rows`` rendered under ``HEADER`` within ``limit`` characters: the oldest rows go first."""
    for start in range(len(rows)):
        text = HEADER + "\n" + serialize_messages(rows[start:], PER_ROW_CHARS)
        if len(text) <= limit:
            return text
    return ""
