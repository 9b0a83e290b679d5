"""Fallback ``ContextEngine`` base for running without Hermes (demo, scripts, unit tests).

Inside Hermes the real ``agent.context_engine.ContextEngine`` is used; this mirrors only
the attributes and defaults the engine relies on, so the engine behaves the same. Also
``host_entry``, the guard every host-called engine method wears, and the host's message count.
"""
from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from typing import Any, TypeVar, cast

try:  # the real host base class when Hermes is installed
    from agent.context_engine import ContextEngine
except ImportError:  # pragma: no cover - exercised when Hermes is absent
    class ContextEngine:  # type: ignore[no-redef]
        last_prompt_tokens: int = 0
        last_completion_tokens: int = 0
        last_total_tokens: int = 0
        threshold_tokens: int = 0
        context_length: int = 0
        compression_count: int = 0
        threshold_percent: float = 0.75
        protect_first_n: int = 3
        protect_last_n: int = 6

        def on_session_reset(self) -> None:
            self.last_prompt_tokens = self.last_completion_tokens = self.last_total_tokens = self.compression_count = 0

        def get_status(self) -> dict[str, Any]:
            return {"threshold_tokens": self.threshold_tokens, "context_length": self.context_length}


log = logging.getLogger("hermes_trove.engine")
# The owner's own surfaces: the CLI, the TUI and the desktop chat panel (Hermes tags them "tui" and
# "desktop"), and editor sessions over ACP ("acp").
LOCAL_PLATFORMS = ("", "cli", "local", "tui", "desktop", "acp")
_F = TypeVar("_F", bound=Callable[..., Any])


def nothing(*args: Any, **kwargs: Any) -> None:
    """The fallback of a host entry point that answers nothing."""
    return None


def copy_attrs(source: Any, target: Any, attrs: tuple[str, ...]) -> None:
    """Copy each of ``attrs`` that ``source`` has onto ``target`` (the engine and the host's compressor)."""
    for attr in attrs:
        if hasattr(source, attr):
            setattr(target, attr, getattr(source, attr))


def host_entry(fallback: Callable[..., Any]) -> Callable[[_F], _F]:
    """A method the host calls: an exception is logged and answered by ``fallback(self, *args, **kw)``."""
    def wrap(method: _F) -> _F:
        @functools.wraps(method)
        def entry(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return method(self, *args, **kwargs)
            except Exception:
                log.exception("trove: %s failed (the host carries on)", method.__name__)
                try:
                    return fallback(self, *args, **kwargs)
                except Exception:
                    return None
        return cast(_F, entry)
    return wrap


def host_message_tokens(messages: list[dict[str, Any]]) -> int:
    """The host's own rough count of ``messages`` (0 without a host)."""
    try:
        from agent.model_metadata import estimate_messages_tokens_rough

        return int(estimate_messages_tokens_rough(messages))
    except Exception:
        return 0


def branched_from(host_db: Any, session_id: str) -> str:
    """The session the host forked ``session_id`` from with ``/branch`` (CLI and gateway mark the
    new session row's ``model_config`` with ``_branched_from``), or "" (no host database, no mark)."""
    if host_db is None or not session_id:
        return ""
    try:
        config = (host_db.get_session(session_id) or {}).get("model_config")
        config = json.loads(config) if isinstance(config, str) else config
    except Exception:  # an unreadable row or mark is no branch
        log.debug("trove: the host's session row of %s is unreadable", session_id, exc_info=True)
        return ""
    parent = config.get("_branched_from") if isinstance(config, dict) else None
    return parent if isinstance(parent, str) and parent != session_id else ""


def host_owner(host_db: Any, session_id: str, platform: str, conversation: str) -> tuple[str, str]:
    """``(platform, conversation)``; a local-looking bind takes the chat the host's own session row
    names (the gateway builds its hygiene agent for a chat's session without the chat's identity)."""
    if conversation or platform.strip().lower() not in LOCAL_PLATFORMS or host_db is None:
        return platform, conversation
    try:
        row = host_db.get_session(session_id) or {}
    except Exception:
        log.debug("trove: the host's session row of %s is unreadable", session_id, exc_info=True)
        return platform, conversation
    chat = str(row.get("session_key") or "")
    return (str(row.get("source") or platform), chat) if chat else (platform, conversation)
