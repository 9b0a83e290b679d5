"""Exact refs: one citable format for a span of one stored message, and its verification.

A ref is ``{store_id, span_start, span_end, quote, content_sha256}`` (plus ``session_id`` and
``timestamp`` for display). ``content_sha256`` hashes the whole stored content, so every span
of one row carries the same hash. ``trove:<id>:<start>-<end>`` is accepted as a shorthand
claim. Pure: callers fetch the row; nothing here reads the database.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .rows import MessageRow

SHORTHAND = re.compile(r"trove:(\d{1,18}):(\d{1,12})-(\d{1,12})")
MAX_QUOTE_CHARS = 20000
MAX_REF_CHARS = 2 * MAX_QUOTE_CHARS  # a claim larger than this is refused before parsing


class RefError(ValueError):
    """A ref that does not parse or does not verify; the message says which part and why."""


@dataclass(frozen=True)
class RefClaim:
    """What a caller says a ref is: the span is always given; quote and hash may be missing."""

    store_id: int
    span_start: int
    span_end: int
    quote: str | None = None
    content_sha256: str | None = None


@dataclass(frozen=True)
class ExactRef:
    """A verified ref: the quote is exactly the stored text at that span of that row."""

    store_id: int
    span_start: int
    span_end: int
    quote: str
    content_sha256: str
    session_id: str
    timestamp: float | None

    @property
    def shorthand(self) -> str:
        return shorthand(self.store_id, self.span_start, self.span_end)

    def to_dict(self) -> dict[str, Any]:
        return {"store_id": self.store_id, "span_start": self.span_start, "span_end": self.span_end,
                "quote": self.quote, "content_sha256": self.content_sha256, "session_id": self.session_id,
                "timestamp": iso(self.timestamp), "ref": self.shorthand}


def content_sha256(text: str) -> str:
    """The hash every ref of one stored row carries (UTF-8 of the stored content)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def shorthand(store_id: int, start: int, end: int) -> str:
    """The short citable form of characters ``[start, end)`` of one stored message."""
    return f"trove:{store_id}:{start}-{end}"


def iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def make_ref(row: MessageRow, start: int, end: int) -> ExactRef:
    """The ref of ``[start, end)`` of ``row``'s content (clamped to the content)."""
    text = row.content
    start = max(0, min(int(start), len(text)))
    end = max(start, min(int(end), len(text)))
    return ExactRef(row.store_id, start, end, text[start:end], content_sha256(text), row.session_id,
                    row.created_at)


def parse_claim(value: Any) -> RefClaim:
    """A claim from a ref dict or the ``trove:<id>:<start>-<end>`` shorthand; RefError otherwise."""
    if isinstance(value, str):
        if len(value) > 64:
            raise RefError("a ref string must be the shorthand trove:<store_id>:<start>-<end>")
        m = SHORTHAND.fullmatch(value.strip())
        if not m:
            raise RefError(f"not a ref: {value[:40]!r}; expected trove:<store_id>:<start>-<end> or a ref object")
        return _checked(int(m.group(1)), int(m.group(2)), int(m.group(3)), None, None)
    if not isinstance(value, dict):
        raise RefError(f"a ref must be an object or a shorthand string, got {type(value).__name__}")
    if isinstance(value.get("ref"), str) and "store_id" not in value:
        base = parse_claim(value["ref"])
        return _checked(base.store_id, base.span_start, base.span_end, _text(value, "quote"),
                        _text(value, "content_sha256"))
    return _checked(_int(value, "store_id"), _int(value, "span_start"), _int(value, "span_end"),
                    _text(value, "quote"), _text(value, "content_sha256"))


def verify(claim: RefClaim, row: MessageRow | None) -> ExactRef:
    """The verified ref, or RefError naming what does not match the stored row."""
    if row is None:
        raise RefError(f"store_id {claim.store_id} is not stored (deleted, ignored or never seen)")
    text = row.content
    if claim.span_end > len(text):
        raise RefError(f"span {claim.span_start}-{claim.span_end} is past the end of store_id "
                       f"{claim.store_id} ({len(text)} chars)")
    digest = content_sha256(text)
    if claim.content_sha256 is not None and claim.content_sha256 != digest:
        raise RefError(f"content_sha256 does not match store_id {claim.store_id}: the ref is stale or edited")
    stored = text[claim.span_start:claim.span_end]
    if claim.quote is not None and claim.quote != stored:
        raise RefError(f"quote is not the stored text at {shorthand(claim.store_id, claim.span_start, claim.span_end)}")
    return ExactRef(row.store_id, claim.span_start, claim.span_end, stored, digest, row.session_id, row.created_at)


def _checked(store_id: int, start: int, end: int, quote: str | None, digest: str | None) -> RefClaim:
    if store_id < 1 or store_id >= 2**63:
        raise RefError(f"store_id must be a positive 64-bit integer, got {store_id}")
    if start < 0 or end < start:
        raise RefError(f"span must satisfy 0 <= span_start <= span_end, got {start}-{end}")
    if end - start > MAX_QUOTE_CHARS:
        raise RefError(f"a span covers at most {MAX_QUOTE_CHARS} characters, got {end - start}")
    if digest is not None and not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise RefError("content_sha256 must be 64 lowercase hex digits")
    return RefClaim(store_id, start, end, quote, digest)


def _int(value: dict[str, Any], key: str) -> int:
    raw = value.get(key)
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise RefError(f"ref field {key} must be an integer")
    return raw


def _text(value: dict[str, Any], key: str) -> str | None:
    raw = value.get(key)
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise RefError(f"ref field {key} must be a string")
    if len(raw) > MAX_REF_CHARS:
        raise RefError(f"ref field {key} is longer than {MAX_REF_CHARS} characters")
    return raw
