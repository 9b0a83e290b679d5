"""Which sessions' agents have the trove_* tools, as the engine copies binding them learn it.

Hermes asks an engine copy for its tools only when its agent's toolsets take the context engine's,
so a copy knows what its own agent has. Which agent's word counts for a session is the question: the
gateway compacts a live chat with a temporary agent on the chat's session id (toolsets ["memory"]),
and builds a chat's agent anew, with other toolsets, on the same id. A copy without the tools decides
only once it has answered on the session, or was asked whether to compact there (only the agent running
a turn asks; the helpers compact unasked); until then its bind leaves the offer as it was and doubts
it, and a doubted offer reads as none (a policy naming tools the agent lacks is worse than a turn
without it). A copy without the tools that compacts, or is asked whether it could (gateway /compress),
before either is such a helper: its doubt goes.
An offer outlives its session's binding (a compaction boundary ends and binds the session again), the
oldest going past ``MAX_OFFERS``.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from .filters import offers_engine_tools

MAX_OFFERS = 4096


@dataclass
class ToolOffers:
    said: dict[str, bool] = field(default_factory=dict)  # session id -> its agent has the tools; newest last
    doubted: set[str] = field(default_factory=set)  # bound since by a copy without them that has not answered
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def bound(self, session_id: str, tools: bool | None, answered: bool) -> None:
        """A copy bound ``session_id``: its agent has the tools (``tools``; None: not known, as for a delegated
        child before its own copy binds), and it ``answered`` on the session before."""
        with self._lock:
            if tools is None:
                self.said.pop(session_id, None)
            elif tools or answered:
                self._say(session_id, tools)
            (self.doubted.add if tools is False and not answered else self.doubted.discard)(session_id)

    def answered(self, session_id: str, tools: bool) -> None:
        """The copy whose agent answers on ``session_id`` says whether it has the tools: its word wins."""
        with self._lock:
            self._say(session_id, tools)
            self.doubted.discard(session_id)

    def says(self, session_id: str, tools: bool) -> bool:
        """Whether the offer of ``session_id`` already stands at ``tools``, undoubted (read without the lock)."""
        return self.said.get(session_id) is tools and session_id not in self.doubted

    def helper(self, session_id: str) -> None:
        """A copy without the tools compacted ``session_id`` before it answered there: its bind decides nothing."""
        with self._lock:
            self.doubted.discard(session_id)

    def ended(self, session_id: str) -> None:
        """The session's binding went: no copy doubts it now; what its agent had is kept."""
        with self._lock:
            self.doubted.discard(session_id)

    def gives(self, session_id: str, platform: str = "") -> bool:
        """Whether the agent of ``session_id`` has the tools: as its copies said, else by its platform."""
        offered = False if session_id in self.doubted else self.said.get(session_id)
        return offers_engine_tools(platform) if offered is None else offered

    def _say(self, session_id: str, tools: bool) -> None:
        self.said.pop(session_id, None)
        self.said[session_id] = tools
        while len(self.said) > MAX_OFFERS:
            self.said.pop(next(iter(self.said)))
