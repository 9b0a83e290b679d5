"""Where the per-turn hook last looked in each session's history, shared by every engine copy of one process.

A mark holds the first and last message of the list it saw (their identity says whether a later list
is the same one grown at its end), so it is bounded twice: by how many marks there are and by the
characters of the messages they hold on to. A gateway whose sessions never end (a crash, an evicted
agent) keeps at most that much; an evicted mark costs its session one whole look.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

MAX_MARKED = 1024  # (session, what) pairs whose place in the host's list is remembered; the oldest go first
MAX_MARKED_CHARS = 16_000_000  # characters of the messages the marks hold on to; past it the oldest go


@dataclass(frozen=True)
class Mark:
    """Where one look through a session's history ended: the list's length and its first and last message
    then, the index a later look resumes from, and the index of the message that passed the test (or -1)."""

    length: int
    first: Any
    last: Any
    resume: int
    hit_at: int = -1
    chars: int = 0  # of ``first`` and ``last``: what this mark keeps alive


def held_chars(value: Any, depth: int = 6) -> int:
    """Characters of the strings a message holds (content, api_content, a part's text, the data URL in a part's
    ``image_url`` dict, a tool call's arguments): deep enough for every shape the host writes."""
    if isinstance(value, str):
        return len(value)
    if depth <= 0:
        return 0
    if isinstance(value, dict):
        return sum(held_chars(v, depth - 1) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(held_chars(v, depth - 1) for v in value)
    return 0


def is_user(message: Any) -> bool:
    return isinstance(message, dict) and message.get("role") == "user"


class HistoryMarks:
    """Answers "does any message of this history pass ``test``?" per turn in time that follows the new messages.

    A message that passed last time is tested again at its index: if it (or what now stands there) passes, so
    does the list, whatever else changed. Otherwise the host hands the per-turn hook the whole list each turn;
    it grows at its end, and only its newest user messages change in place (the host writes the injected text
    onto the turn's own, which may be followed by user messages of its own such as a todo snapshot, or joins
    the next user message onto it). The last look's ``Mark`` is trusted only while the list still holds its
    first and last message, the very objects, at their places; then the look resumes at the first of the
    user messages that ended the list it saw. Any other list (a compaction's, one cut back by /undo or /retry,
    a gateway's reload: new dicts) needs a whole look. Shared by the engine copies; bounded; thread-safe.
    """

    def __init__(self, limit: int = MAX_MARKED, chars: int = MAX_MARKED_CHARS) -> None:
        self.lock = threading.Lock()
        self.marks: dict[tuple[str, str], Mark] = {}
        self.limit, self.max_chars = max(1, limit), max(0, chars)
        self.chars = 0  # what the marks hold on to now

    def known(self, session_id: str, what: str, history: Sequence[Any],
              test: Callable[[dict[str, Any]], bool]) -> bool | None:
        """What ``any`` would say, when the last look tells it without a whole one (else None)."""
        with self.lock:
            mark = self.marks.get((session_id, what))
        if mark is None:
            return None
        n = len(history)
        if 0 <= mark.hit_at < n and isinstance(history[mark.hit_at], dict) and test(history[mark.hit_at]):
            return True
        if mark.hit_at < 0 and 0 < mark.length <= n and history[0] is mark.first \
                and history[mark.length - 1] is mark.last:
            return self.look(session_id, what, history, test, mark.resume)
        return None

    def any(self, session_id: str, what: str, history: Sequence[Any], test: Callable[[dict[str, Any]], bool]) -> bool:
        """Whether a dict of ``history`` passes ``test`` (``what`` names the test), as ``any`` would say."""
        seen = self.known(session_id, what, history, test)
        return self.look(session_id, what, history, test, 0) if seen is None else seen

    def look(self, session_id: str, what: str, history: Sequence[Any], test: Callable[[dict[str, Any]], bool],
             start: int) -> bool:
        """Look from ``start`` on (the messages before it known to fail) and remember where the look ended."""
        n = len(history)
        found = next((i for i in range(start, n) if isinstance(history[i], dict) and test(history[i])), -1)
        resume = next((i for i in range(n - 1, start - 1, -1) if is_user(history[i])), start)
        while resume > start and is_user(history[resume - 1]):  # the host may append its own user messages
            resume -= 1  # (a todo snapshot) after the turn's, which it writes onto later: resume at the first
        if n and found >= 0:  # a hit is tested again at its index alone: no message need be held
            self.keep(session_id, what, Mark(n, None, None, resume, found))
        elif n:
            first, last = history[0], history[-1]
            size = held_chars(first) + (held_chars(last) if last is not first else 0)
            self.keep(session_id, what, Mark(n, first, last, resume, found, size))
        return found >= 0

    def forget(self, session_id: str) -> None:
        """Let go of a session's marks (and the messages they hold): it ended."""
        with self.lock:
            for key in [k for k in self.marks if k[0] == session_id]:
                self.chars -= self.marks.pop(key).chars

    def keep(self, session_id: str, what: str, mark: Mark) -> None:
        with self.lock:
            old = self.marks.pop((session_id, what), None)
            self.chars += mark.chars - (old.chars if old is not None else 0)
            self.marks[(session_id, what)] = mark  # newest last
            while len(self.marks) > self.limit or (self.chars > self.max_chars and len(self.marks) > 1):
                self.chars -= self.marks.pop(next(iter(self.marks))).chars  # never the one kept now
