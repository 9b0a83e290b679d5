"""The exchanges a ``/compress here N`` kept, brought back when the host's next list does not show them.

``/compress here N`` passes trove the conversation up to the user's boundary and keeps the newest N
exchanges itself. A gateway compacting in place writes only what trove gave back for that prefix to
its transcript store and reloads the chat from there, so the next turn shows the summary and nothing
of the N exchanges the user asked to keep (they are stored, beneath no summary yet). The per-turn hook
then brings them along, as ``[ROLE HH:MM]: text`` lines under ``HEADER`` within a bound, until a turn's
message carries them (the host merges the first turn's message into the summary before it and drops
what the hooks gave that turn, so the next turn gets them again). A list that shows most of them (the
interactive CLI keeps them in memory) gets nothing, and the record is dropped.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from . import tokens
from .backend import storage_error
from .compaction.summarize import serialize_messages
from .ingest import message_identity

if TYPE_CHECKING:
    from .runtime import Runtime
    from .store import MessageRow

log = logging.getLogger("hermes_trove.keptail")
HEADER = ("[trove: the newest exchanges, kept verbatim when this chat was compacted with /compress here; "
          "the transcript no longer shows them]")
MAX_CHARS = 24000  # about 6,000 tokens of English: the newest rows first, an older one left out whole
MAX_TOKENS = 6000  # and no more tokens (a CJK text takes about two thirds of a token a character)
PER_ROW_CHARS = 6000  # a longer row shows its head and end (trove_expand reads it whole)


def carries_kept_tail(message: dict[str, Any]) -> bool:
    """Whether a message went to the model with the kept exchanges (the host keeps what it sent)."""
    return HEADER in str(message.get("api_content") or "")


def kept_tail_context(runtime: Runtime, session_id: str, history: Sequence[Any], max_chars: int | None) -> str:
    """The kept exchanges as one block, or "" (none recorded, the list shows or carries them, none fits, or the
    store does not answer: the record stays for the next turn, and the rest of the hook's context still goes)."""
    ids = runtime.compactions.kept_tail(session_id)
    if ids is None:  # the common case: nothing recorded, nothing read
        return ""
    shipper = getattr(runtime.store, "shipper", None)
    if shipper is not None and shipper.state.down_recently():  # a server found down this turn: no wait on it
        return ""
    try:  # the recorded range only: later turns of the chat are not read again on every turn
        rows = [r for r in runtime.store.page(session_id, ids[0] - 1, ids[1] - ids[0] + 1) if r.store_id <= ids[1]]
    except Exception as exc:
        if not storage_error(exc):
            raise
        log.warning("trove: no kept exchanges for session %s this turn: the store did not answer (%s)",
                    session_id, str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__)
        if shipper is not None:
            shipper.failed(exc)
        return ""
    if not rows or shows(rows, history) or any(isinstance(m, dict) and carries_kept_tail(m) for m in history):
        runtime.compactions.kept_tail(session_id, drop=True)  # later turns cost nothing
        return ""
    text = fitted(rows, MAX_CHARS if max_chars is None else min(MAX_CHARS, max_chars))
    if not text and not fitted(rows[-1:], MAX_CHARS):  # not even the newest alone fits any room: no turn shows it
        runtime.compactions.kept_tail(session_id, drop=True)
    return text


def shows(rows: list[MessageRow], history: Sequence[Any]) -> bool:
    """Whether ``history`` shows the kept rows: most of them, not one (a "continue" the user types again, the
    same as a kept one, is no sign the list kept them)."""
    shown = {message_identity(m) for m in history if isinstance(m, dict)}
    kept = {r.identity for r in rows}
    return 2 * len(kept & shown) > len(kept)


def fitted(rows: list[MessageRow], limit: int) -> str:
    """``rows`` rendered under ``HEADER`` within ``limit`` characters and ``MAX_TOKENS``: the oldest rows go first.

    Each row adds at least its text (cut to ``PER_ROW_CHARS``), so only the newest rows whose texts fit are
    tried, and the first that fits is found by halving (a longer run never renders shorter): a kept tail of
    thousands of rows costs a few renders of what fits, not one render per row."""
    room, lowest = limit - len(HEADER) - 1, len(rows)
    while lowest > 0:
        room -= min(len(tokens.message_text({"content": rows[lowest - 1].to_message().get("content")})),
                    PER_ROW_CHARS)
        if room < 0:
            break
        lowest -= 1

    def render(start: int) -> str:
        return HEADER + "\n" + serialize_messages(rows[start:], PER_ROW_CHARS)

    low, high = lowest, len(rows)  # the first start that fits lies in [low, high); high: none does
    while low < high:
        mid = (low + high) // 2
        text = render(mid)
        if len(text) <= limit and tokens.count(text) <= MAX_TOKENS:
            high = mid
        else:
            low = mid + 1
    if high == len(rows):
        return ""
    return render(high)
