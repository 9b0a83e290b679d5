"""Rows: the frozen dataclasses storage hands out, and host message -> column values.

``store`` and ``dag`` build these from SQLite rows; everything above them reads these
types, never ``sqlite3.Row``. No SQL here.
"""
from __future__ import annotations

import functools
import json
import re
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from . import tokens
from .ingest import (
    EVIDENCE_OPEN,
    HOST_INTERNAL_KEYS,
    TODO_SNAPSHOT,
    merged_after_summary,
    strip_evidence,
    strip_todo_snapshot,
)
from .packed import unpack
from .scope import scope_for

_KNOWN_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_id", "name", "tool_name", "timestamp"})
# The times a stored row and a tool argument may carry: calendar arithmetic never overflows inside
# them. A message timestamp outside them (NaN, infinite, milliseconds) is not stored; the row takes
# its ingest time instead.
TIME_MIN = datetime(1000, 1, 1, tzinfo=UTC)
TIME_MAX = datetime(8999, 12, 31, 23, 59, 59, tzinfo=UTC)
_TS_LOW, _TS_HIGH = TIME_MIN.timestamp(), TIME_MAX.timestamp()


def json_or_text(text: str) -> Any:
    """``text`` decoded as JSON, or ``text`` itself when it does not decode."""
    try:
        return json.loads(text)
    except ValueError:
        return text


@dataclass(frozen=True)
class MessageRow:
    store_id: int
    session_id: str
    conversation_id: str
    platform: str
    source: str
    role: str
    stored: str | bytes  # ``content`` as the column holds it: a SQLite file packs long text (packed.py)
    content_is_json: bool
    tool_calls: str | None
    tool_call_id: str | None
    tool_name: str | None
    extra: str | None
    token_count: int
    identity: str
    pinned: bool
    created_at: float
    ingested_at: float

    @functools.cached_property
    def content(self) -> str:
        """The message's text, unpacked on first read (a search builds rows whose text it never reads)."""
        return str(unpack(self.stored))

    def content_value(self) -> Any:
        """Content as the host had it: text, or the decoded multimodal list."""
        return json_or_text(self.content) if self.content_is_json else self.content

    def to_message(self) -> dict[str, Any]:
        """Rebuild an OpenAI-style message dict from the stored row."""
        msg: dict[str, Any] = {"role": self.role, "content": self.content_value()}
        if self.tool_calls:
            msg["tool_calls"] = json_or_text(self.tool_calls)
        if self.tool_call_id:
            msg["tool_call_id"] = self.tool_call_id
        if self.tool_name:
            msg["name"] = self.tool_name
        extra = json_or_text(self.extra) if self.extra else None
        if isinstance(extra, dict):  # a damaged row's may be text, a list or null
            msg.update({k: v for k, v in extra.items() if k not in msg})
        return msg


@dataclass(frozen=True)
class SessionRow:
    session_id: str
    conversation_id: str
    platform: str
    ingest_len: int
    ingest_identity: str
    frontier_store_id: int
    last_rotate_at: float | None
    last_rotate_backup: str | None
    previous_session_id: str | None
    created_at: float
    updated_at: float
    ended_at: float | None
    scope: str = ""
    rotated_frontier: int | None = None  # the furthest frontier a rotate set (None: never rotated)


@dataclass(frozen=True)
class IngestResult:
    store_ids: tuple[int, ...]
    skipped: int
    reason: str


@dataclass(frozen=True)
class SessionKey:
    session_id: str
    conversation_id: str = ""
    platform: str = ""
    source: str = ""
    scope: str = ""  # the owner scope to record at first write ("" = derived from platform/conversation)

    @property
    def effective_source(self) -> str:
        return self.source or self.platform or "unknown"

    @property
    def effective_scope(self) -> str:
        return self.scope or scope_for(self.platform, self.conversation_id)


@dataclass(frozen=True)
class RowSize:
    """How big one stored row is, in characters (metadata only)."""

    store_id: int
    role: str
    chars: int
    content_chars: int
    tool_call_chars: int


def row_as(cls: Any, r: sqlite3.Row | None) -> Any:
    """A frozen row dataclass from one sqlite3.Row (None stays None)."""
    if r is None:
        return None
    known = cls.__dataclass_fields__  # a column a newer build added while this one runs is not read
    return cls(**{k: r[k] for k in r.keys() if k in known})


def message_row(r: sqlite3.Row) -> MessageRow:
    """A MessageRow from one sqlite3.Row of the messages table."""
    return message_row_from({k: r[k] for k in r.keys()})


# What ``json.dumps(value, ensure_ascii=False, default=str)`` builds on every call, built once.
COLUMN_JSON = json.JSONEncoder(ensure_ascii=False, default=str).encode


def normalize_message(message: dict[str, Any]) -> dict[str, Any]:
    """Host message → column values (no identity, no session)."""
    content = message.get("content")
    if content is None:
        text, is_json = "", False
    elif isinstance(content, str):
        text, is_json = merged_after_summary(message) or content, False  # the host merged it into a summary
        if EVIDENCE_OPEN in text and message.get("role") == "user":  # injected by our hook, never the user's words
            text = strip_evidence(text)
        if TODO_SNAPSHOT in text and message.get("role") == "user":  # the host's, merged into the user's message
            text = strip_todo_snapshot(text)
    else:
        text, is_json = COLUMN_JSON(content), True
    calls = message.get("tool_calls")
    calls_json = COLUMN_JSON(calls) if calls else None
    extra = {k: v for k, v in message.items()
             if k not in _KNOWN_KEYS and k not in HOST_INTERNAL_KEYS and not k.startswith("_")}
    ts = message.get("timestamp")
    return {
        "role": str(message.get("role") or "unknown"),
        "content": text,
        "content_is_json": int(is_json),
        "tool_calls": calls_json,
        "tool_call_id": _text_or_none(message.get("tool_call_id")),
        "tool_name": _text_or_none(message.get("tool_name") or message.get("name")),
        "extra": COLUMN_JSON(extra) if extra else None,
        "token_count": tokens.count_message(message, calls_json),  # the same JSON text: encoded once
        "created_at": calendar_time(ts),
    }


def calendar_time(ts: Any) -> float | None:
    """``ts`` as epoch seconds when it is a number inside TIME_MIN..TIME_MAX, else None."""
    return float(ts) if isinstance(ts, (int, float)) and not isinstance(ts, bool) and _TS_LOW <= ts <= _TS_HIGH \
        else None


def _text_or_none(value: Any) -> str | None:
    """A text column's value: a string as it is, any other value as its JSON, empty as None."""
    if value is None or value == "":
        return None
    return value if isinstance(value, str) else COLUMN_JSON(value)


def message_row_from(d: dict[str, Any]) -> MessageRow:
    """A MessageRow from a column dict (booleans and blank sources normalised)."""
    d["stored"] = d.pop("content")
    d["content_is_json"] = bool(d["content_is_json"])
    d["pinned"] = bool(d["pinned"])
    d["source"] = d["source"] or "unknown"
    # an older build stored any timestamp and a damaged row may hold text: they read as a time
    ingested, created = calendar_time(d["ingested_at"]), calendar_time(d["created_at"])
    d["ingested_at"] = 0.0 if ingested is None else ingested
    d["created_at"] = d["ingested_at"] if created is None else created
    if not is_count(d["token_count"]):  # a damaged count is recounted: budgets must not take it as free
        d["token_count"] = tokens.count(str(unpack(d["stored"])))
    if not d.keys() <= _MESSAGE_FIELDS:  # a column a newer build added while this one runs is not read
        d = {k: v for k, v in d.items() if k in _MESSAGE_FIELDS}
    if len(d) != len(_MESSAGE_FIELDS):
        return MessageRow(**d)  # a column missing: the dataclass says which
    # Every field given: set them as the frozen dataclass's __init__ would, in one step (a search
    # builds a hundred rows per query, and that __init__ sets seventeen fields one call each).
    row = object.__new__(MessageRow)
    row.__dict__.update(d)
    return row


_MESSAGE_FIELDS = frozenset(MessageRow.__dataclass_fields__)


MAX_COUNT = 2**40  # past it a count is damage (no message holds a trillion tokens): sums leave it out


def is_count(value: Any) -> bool:
    """True for a count a trove write stores: a non-negative integer up to MAX_COUNT."""
    return type(value) is int and 0 <= value <= MAX_COUNT


_SURROGATE = re.compile("[\ud800-\udfff]")


def has_surrogate(text: str) -> bool:
    """True when ``text`` holds a lone surrogate: it has no UTF-8 form, so no store can hold it."""
    return not text.isascii() and _SURROGATE.search(text) is not None


def encodable(cols: dict[str, Any]) -> bool:
    """True when every text column value can be written as UTF-8 (no lone surrogates)."""
    return not any(isinstance(cols.get(column), str) and has_surrogate(cols[column])
                   for column in ("role", "content", "tool_calls", "tool_call_id", "tool_name", "extra"))


def escaped(cols: dict[str, Any]) -> dict[str, Any]:
    """Lone surrogates cannot be stored as UTF-8: keep them as visible escapes, flagged."""
    cols = {k: v.encode("utf-8", "backslashreplace").decode("utf-8") if isinstance(v, str) else v
            for k, v in cols.items()}
    extra = json.loads(cols["extra"]) if cols.get("extra") else {}
    cols["extra"] = json.dumps({**extra, "_trove_escaped_surrogates": True})
    return cols
