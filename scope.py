"""Owner scopes: which sessions a cross-session read may see.

Every session records one owner scope at its first write (``scope_for``): ``local`` for the
CLI and every other local caller, ``<platform>:<conversation_id>`` for a gateway chat. A
tool call's ``Visibility`` turns the configured ``TROVE_MEMORY_SCOPE`` mode and the caller's
scope into one SQL predicate the data modules put inside their candidate queries. Pure.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .hostbase import LOCAL_PLATFORMS  # the owner's own surfaces

MODES = ("conversation", "profile", "session")
LOCAL = "local"


def scope_for(platform: str | None, conversation_id: str | None = None, sender_id: str | None = None) -> str:
    """The owner scope of a session the host describes with these values.

    A gateway chat is its session key (``conversation_id``); a gateway turn without one falls
    back to its sender; anything local, or a gateway with neither, is ``local`` only when
    local, else unscoped (``""``: visible to itself alone until a write supplies a scope).
    """
    plat = (platform or "").strip().lower()
    if plat in LOCAL_PLATFORMS:
        return LOCAL
    if conversation_id:
        return f"{plat}:{conversation_id}"
    if sender_id:
        return f"{plat}:sender:{sender_id}"
    return ""


@dataclass(frozen=True)
class Visibility:
    """The sessions one caller may read: all (``profile``), its scope, or its own session."""

    mode: str = "profile"
    scope: str = ""
    session_id: str = ""

    @property
    def unrestricted(self) -> bool:
        return self.mode == "profile"

    def clause(self, column: str) -> tuple[str, list[Any]]:
        """``(sql, args)`` keeping rows whose ``column`` (a session id) is visible; ``("", [])`` for all."""
        if self.unrestricted:
            return "", []
        if self.mode == "session" or not self.scope:
            return f"{column} = ?", [self.session_id]
        return f"{column} IN (SELECT session_id FROM sessions WHERE scope = ?)", [self.scope]

    def named_clause(self, column: str) -> tuple[str, dict[str, Any]]:
        """``clause`` with named parameters (``:vis_scope``, ``:vis_session``), for named-style queries."""
        if self.unrestricted:
            return "", {}
        if self.mode == "session" or not self.scope:
            return f"{column} = :vis_session", {"vis_session": self.session_id}
        return f"{column} IN (SELECT session_id FROM sessions WHERE scope = :vis_scope)", {"vis_scope": self.scope}


EVERYTHING = Visibility()
