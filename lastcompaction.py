"""The newest compaction outcome of each session, shared by every engine copy of one process.

A gateway compacts a live chat (``/compress``, hygiene) on a temporary agent with its own engine
copy bound to the chat's session id, so the outcome would stay in that copy; the chat's copy
(the one ``/trove status`` reads) looks it up here. A leaf module: the runtime holds one.
"""
from __future__ import annotations

import threading
from typing import Any

# Sessions whose newest compaction is kept; the oldest entry goes first. Only age removes one: the host
# ends a session it compacts just before the compaction boundary binds it again (``Runtime.unbind``), so
# an entry that went with the binding would be gone by the time anyone asks.
MAX_SESSIONS = 1024
CLIP, ITEMS = 300, 16  # a kept report's strings (a focus topic is what a person typed) and lists are clipped


def _small(value: Any) -> Any:
    """A fresh copy of a report value with every string and list clipped: an entry stays a few KB."""
    if isinstance(value, str):
        return value[:CLIP]
    if isinstance(value, dict):
        return {str(k)[:CLIP]: _small(v) for k, v in list(value.items())[:64]}
    if isinstance(value, (list, tuple)):
        return [_small(v) for v in list(value)[-ITEMS:]]
    return value


class LastCompactions:
    """Session id -> the newest compress call's status and reason, and the report of the newest one
    trove ran (``host_kept_tail`` and the rest). Bounded; thread-safe."""

    def __init__(self, limit: int = MAX_SESSIONS) -> None:
        self._limit = max(1, int(limit))
        self._entries: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def note(self, session_id: str, status: str, reason: str, report: dict[str, Any] | None = None) -> None:
        """Record a compress call on ``session_id``; ``report`` only when trove compacted (else the last stands)."""
        if not session_id:
            return
        with self._lock:
            entry = self._entries.pop(session_id, {"report": {}})
            entry.update(status=status, reason=reason[:CLIP])
            if report is not None:
                entry["report"] = _small(report)
            self._put(session_id, entry)

    def latest(self, session_id: str, own: tuple[str, str, dict[str, Any]]) -> tuple[str, str, dict[str, Any]]:
        """(status, reason, report) of the newest compress call on ``session_id`` in this process, else ``own``
        (what the asking copy knows itself: nothing was recorded, or the entry went)."""
        with self._lock:
            entry = self._entries.get(session_id) if session_id else None
            if entry is None:
                return own[0], own[1], dict(own[2])
            return str(entry["status"]), str(entry["reason"]), _small(entry["report"])

    def carry(self, old: str, new: str) -> None:
        """A compaction boundary renamed ``old`` to ``new``: the compaction that did so is ``new``'s newest too."""
        with self._lock:
            if old and new and old != new and old in self._entries and new not in self._entries:
                self._put(new, _small(self._entries[old]))

    def _put(self, session_id: str, entry: dict[str, Any]) -> None:
        self._entries[session_id] = entry  # newest last
        while len(self._entries) > self._limit:
            self._entries.pop(next(iter(self._entries)), None)

    def __len__(self) -> int:
        return len(self._entries)

    def kept_tail(self, session_id: str, drop: bool = False) -> tuple[int, int] | None:
        """The store ids (first, last) of the tail the host kept after the newest compaction of ``session_id``
        (``keptail.py``); ``drop``: forgotten from now on (the next compaction's report has none either)."""
        with self._lock:
            report = (self._entries.get(session_id) or {}).get("report") or {}
            ids = report.pop("host_kept_tail_ids", None) if drop else report.get("host_kept_tail_ids")
        if not isinstance(ids, list) or len(ids) != 2:
            return None
        return int(ids[0]), int(ids[1])
