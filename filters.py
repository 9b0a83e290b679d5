"""Session and message filters: which sessions trove owns, and which messages it skips.

Session globs match the session id, the platform and ``platform:session_id``; ``*``
stays within one colon-separated segment, ``**`` spans segments. Message patterns are
regexes compiled once; with the optional ``regex`` package each match has a 50 ms
timeout, without it message filtering is disabled with a warning (never unbounded).
"""
from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import TroveConfig

log = logging.getLogger("hermes_trove.filters")
MATCH_TIMEOUT_S = 0.05


_GLOB = {"**": ".*", "*": "[^:]*", "?": "[^:]"}


def glob_to_regex(pattern: str) -> re.Pattern[str]:
    parts = re.split(r"(\*\*|\*|\?)", pattern)
    return re.compile("^" + "".join(_GLOB.get(p) or re.escape(p) for p in parts) + "$")


# The host's own side agents, recognised without operator patterns (hermes-agent 0.19):
# cron jobs run with platform "cron" and ids "cron_<job>_<time>"; the background review
# fork and the curator run on threads the host names (agent/background_review, curator);
# the curator's agent says platform "curator", which also covers ``hermes curator run``
# (it runs the pass on the main thread).
HOST_SIDE_PLATFORMS = frozenset({"cron", "curator"})
HOST_SIDE_THREADS = frozenset({"bg-review", "curator-review"})
# ``/background PROMPT`` in the CLI runs its own agent on a thread named "bg-task-<task id>": the user's
# work, stored as any session, but the chat stays the conversation /trove addresses.
BACKGROUND_TASK_THREAD = "bg-task-"
# The ids Hermes gives a /background task's agent: "bg_<HHMMSS>_<6 hex>" (CLI, gateway) and "bg_<6 hex>"
# (the TUI, which runs it on an unnamed thread): such an agent, too, leaves the chat in front.
BACKGROUND_TASK_SESSION = re.compile(r"bg_(?:\d{6}_)?[0-9a-f]{6}")
INSPECTION_API_KEY = "inspect-only"  # the key of the agent `hermes prompt-size` builds to measure the prompt


def host_side_agent(session_id: str, platform: str = "", thread_name: str | None = None,
                    api_key: Any = "") -> str | None:
    """Why a session belongs to one of the host's side agents (it is then stateless), or None.
    ``api_key`` is the main model's key the host handed the engine: ``hermes prompt-size`` builds an
    offline agent with the placeholder INSPECTION_API_KEY that never runs a turn."""
    thread = threading.current_thread().name if thread_name is None else thread_name
    plat = platform.strip().lower()  # as takes_foreground and scope_for read it
    if plat in HOST_SIDE_PLATFORMS:
        return f"host:platform={plat}"
    if isinstance(api_key, str) and api_key == INSPECTION_API_KEY:
        return "host:inspection agent (hermes prompt-size)"
    if session_id.startswith("cron_"):
        return "host:cron session"
    if thread in HOST_SIDE_THREADS:
        return f"host:thread={thread}"
    return None


def chat_compaction_cleanup(session_id: str, messages: Sequence[Any], compacted_only: str, chat: str) -> bool:
    """Whether an end is the clean-up of an agent a gateway built only to compact a live chat (``/compress``,
    session hygiene): an empty list, for a chat's session (``chat``: its conversation id), from an engine
    copy whose latest lifecycle call was that session's compaction boundary, with no model answer since
    (``compacted_only``). The chat goes on, so such an end ends nothing. A CLI agent that compacts and
    exits before any answer still ends its session."""
    return not messages and bool(chat) and bool(session_id) and compacted_only == session_id


# The binding modes whose sessions trove stores nothing for.
UNSTORED = frozenset({"ignored", "stateless"})
# A ``delegate_task`` child runs with platform "subagent": it is stored like any session, but it
# works for the conversation that delegated, which /trove keeps addressing.
WORKER_PLATFORMS = frozenset({"subagent"})


def delegated_child(platform: str | None) -> bool:
    """Whether ``platform`` is a ``delegate_task`` child's (read trimmed and lower case, as scope_for reads it)."""
    return (platform or "").strip().lower() in WORKER_PLATFORMS


# Platforms whose agents Hermes (0.19) builds without the context-engine toolset: a ``delegate_task``
# child, and an editor session over ACP (its toolset is the fixed "hermes-acp"). No trove_* tool exists
# there, so nothing may tell the model to call one.
NO_ENGINE_TOOLS_PLATFORMS = WORKER_PLATFORMS | {"acp"}


def offers_engine_tools(platform: str | None) -> bool:
    """Whether an agent on ``platform`` is given the trove_* tools (read as ``delegated_child`` reads it)."""
    return (platform or "").strip().lower() not in NO_ENGINE_TOOLS_PLATFORMS


def takes_foreground(mode: str, platform: str, thread_name: str | None = None, session_id: str = "") -> bool:
    """Whether a session binding in ``mode`` on ``platform`` becomes the one /trove addresses. A
    bind that cannot name its platform yet (the host binds a new agent's engine copy before its
    ``on_session_start`` says which platform it serves) leaves that to ``on_session_start``; so does
    a ``/background`` task's agent, built on its own thread beside the chat (stored, not in front): its
    thread's name or its session id says so (a chat resumed from such an id keeps the front it holds)."""
    thread = threading.current_thread().name if thread_name is None else thread_name
    return (mode == "active" and bool(platform.strip()) and not delegated_child(platform)
            and not thread.startswith(BACKGROUND_TASK_THREAD) and not BACKGROUND_TASK_SESSION.fullmatch(session_id))


@dataclass(frozen=True)
class SessionFilters:
    ignore: tuple[str, ...] = ()
    stateless: tuple[str, ...] = ()
    message_patterns: tuple[str, ...] = ()
    _ignore_re: tuple[re.Pattern[str], ...] = field(default=(), repr=False, compare=False)
    _stateless_re: tuple[re.Pattern[str], ...] = field(default=(), repr=False, compare=False)
    _message_re: tuple[Any, ...] = field(default=(), repr=False, compare=False)
    message_filter_state: str = "off"  # off | on | disabled (no regex package)
    invalid_patterns: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, config: TroveConfig) -> SessionFilters:
        return cls.build(config.ignore_session_patterns, config.stateless_session_patterns,
                         config.ignore_message_patterns)

    @classmethod
    def build(cls, ignore: Sequence[str] = (), stateless: Sequence[str] = (),
              messages: Sequence[str] = ()) -> SessionFilters:
        compiled, invalid, state = [], [], "off"
        if messages:
            try:
                import regex
            except ImportError:
                log.warning("TROVE_IGNORE_MESSAGE_PATTERNS is set but the 'regex' package is missing;"
                            " message filtering is disabled (pip install regex)")
                state = "disabled"
            else:
                state = "on"
                for p in messages:
                    try:
                        compiled.append(regex.compile(p))
                    except Exception as exc:  # regex.error and friends
                        log.warning("TROVE_IGNORE_MESSAGE_PATTERNS: dropping invalid pattern %r: %s", p, exc)
                        invalid.append(p)
        return cls(tuple(ignore), tuple(stateless), tuple(messages),
                   tuple(glob_to_regex(p) for p in ignore), tuple(glob_to_regex(p) for p in stateless),
                   tuple(compiled), state, tuple(invalid))

    def _match(self, regs: Sequence[re.Pattern[str]], pats: Sequence[str], session_id: str,
               platform: str) -> str | None:
        keys = ([session_id] if session_id else []) + ([platform, f"{platform}:{session_id}"] if platform else [])
        return next((pat for rx, pat in zip(regs, pats, strict=True) if any(rx.match(k) for k in keys)), None)

    def ignored_by(self, session_id: str, platform: str = "") -> str | None:
        return self._match(self._ignore_re, self.ignore, session_id, platform)

    def stateless_by(self, session_id: str, platform: str = "") -> str | None:
        return self._match(self._stateless_re, self.stateless, session_id, platform)

    def skip_message(self, message: dict[str, Any]) -> bool:
        """True when a message matches an ignore-message pattern (timeouts count as no match)."""
        if not self._message_re:
            return False
        text = message_filter_text(message)
        for rx in self._message_re:
            try:
                if rx.search(text, timeout=MATCH_TIMEOUT_S):
                    return True
            except TimeoutError:
                log.warning("TROVE_IGNORE_MESSAGE_PATTERNS: pattern %r timed out; message kept", rx.pattern)
        return False


def message_filter_text(message: dict[str, Any]) -> str:
    """Plain text first; multimodal lists use their text parts, else normalized JSON."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [text for p in content if isinstance(p, dict) and isinstance(text := p.get("text"), str)]
        if texts:
            return "\n".join(texts)
    return json.dumps(content, sort_keys=True, ensure_ascii=False, default=str) if content is not None else ""
