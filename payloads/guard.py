"""The storage guard: what must not be stored inline, and the transform that moves it out.

Detects data URIs and long random-looking base64 runs, and builds ``storage_transform``,
the column transform ``MessageStore`` applies before every INSERT: redaction first, then
payloads and (opt-in) oversized content go to sidecars, then text SQLite cannot encode.
``scan_inline`` finds rows that still hold a payload inline. Where sidecars go (files, or a
PostgreSQL store's ``payloads`` table) is ``sidecar.py``'s job.
"""
from __future__ import annotations

import contextlib
import functools
import json
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .redact import Redactor
from .sidecar import PREVIEW_CHARS, Writer, externalized_placeholder, payload_placeholder, payload_writer, refs_in

if TYPE_CHECKING:
    from ..config import TroveConfig
    from ..store import MessageRow

log = logging.getLogger("hermes_trove.payloads")

BASE64_RUN_MIN = 1024  # conservative: shorter runs are ids, hashes and tokens
DATA_URI_MIN = 16

# Case is spelled out instead of re.IGNORECASE, which slows the long body match several times.
_DATA_URI = re.compile(
    r"[Dd][Aa][Tt][Aa]:(?P<mime>[A-Za-z0-9][A-Za-z0-9.+\-]*/[A-Za-z0-9.+\-]+)?(?:;[A-Za-z0-9.+\-]+=[^;,\s\"']*)*"
    rf";[Bb][Aa][Ss][Ee]64,(?P<b64>[A-Za-z0-9+/_\-]{{{DATA_URI_MIN},}}={{0,2}})")
_B64_RUN = re.compile(rf"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{{{BASE64_RUN_MIN},}}={{0,2}}(?![A-Za-z0-9+/_\-=])")
_B64_WRAPPED = re.compile(r"(?<![A-Za-z0-9+/=])(?:[A-Za-z0-9+/]{60,120}={0,2}\r?\n){16,}[A-Za-z0-9+/]{0,120}={0,2}")
_MEDIA_TYPES = frozenset({"image_url", "image", "input_image", "input_audio", "audio", "file", "input_file",
                          "video", "document"})

Write = Callable[..., str | None]  # (payload, *, kind, mime) -> ref, or None when it stays inline


# -- detection ---------------------------------------------------------------------------
def _might_hold_base64(text: str) -> bool:
    return len(text) >= BASE64_RUN_MIN or "ase64" in text or "ASE64" in text


def looks_random(run: str) -> bool:
    """True when a base64-shaped run mixes cases and digits like encoded bytes (not an id or hex)."""
    body = run.rstrip("=")
    sample = body[:4096]
    classes = (any(c.isupper() for c in sample) + any(c.islower() for c in sample)
               + any(c.isdigit() for c in sample))
    return classes >= 3 and len(set(sample)) >= 24


def _after_data_uri_header(m: re.Match[str]) -> bool:
    """True for the body of a data URI that stayed inline (its own write already failed)."""
    return m.string[max(0, m.start() - 8):m.start()].lower() == ";base64,"


def inline_reasons(text: str) -> list[str]:
    """Why ``text`` still holds a payload inline: ``data_uri`` and/or ``base64_run`` (empty if clean)."""
    reasons = []
    if ";base64," in text.lower() and _DATA_URI.search(text):
        reasons.append("data_uri")
    if any(looks_random(m.group(0)) and not _after_data_uri_header(m) for m in _B64_RUN.finditer(text)):
        reasons.append("base64_run")
    return reasons


@dataclass(frozen=True)
class InlineScan:
    """Rows still holding inline payloads (count and a metadata sample) and the refs they carry."""

    count: int
    sample: tuple[dict[str, Any], ...]
    refs: frozenset[str]


def scan_inline(rows: Iterable[MessageRow], sample: int = 50) -> InlineScan:
    """Metadata-only scan of candidate rows (``MessageStore.rows_maybe_holding_payloads``)."""
    found: list[dict[str, Any]] = []
    count = 0
    refs: set[str] = set()
    for row in rows:
        text = (row.content or "") + "\n" + (row.tool_calls or "")
        refs.update(refs_in(text))
        reasons = inline_reasons(text)
        if reasons:
            count += 1
            if len(found) < sample:
                found.append({"store_id": row.store_id, "session_id": row.session_id, "role": row.role,
                              "reasons": reasons, "chars": len(text) - 1})
    return InlineScan(count, tuple(found), frozenset(refs))


# -- the transform -----------------------------------------------------------------------
def _guard_text(text: str, write: Write) -> str:
    """Replace data URIs and long base64-looking runs in ``text`` with payload placeholders."""
    if not _might_hold_base64(text):
        return text

    def uri(m: re.Match[str]) -> str:
        mime = (m.group("mime") or "application/octet-stream").lower()
        ref = write(m.group(0), kind="data_uri", mime=mime)
        return payload_placeholder(ref, "data_uri", mime, len(m.group(0))) if ref else m.group(0)

    def run(m: re.Match[str]) -> str:
        if _after_data_uri_header(m) or not looks_random(m.group(0).replace("\n", "").replace("\r", "")):
            return m.group(0)
        ref = write(m.group(0), kind="base64", mime="application/octet-stream")
        return payload_placeholder(ref, "base64", "application/octet-stream", len(m.group(0))) if ref else m.group(0)

    if "ase64" in text or "ASE64" in text:
        text = _DATA_URI.sub(uri, text)
    if len(text) >= BASE64_RUN_MIN:
        # A run holds no whitespace: split() (C speed) rules most long text out before any regex.
        widths = [len(w) for w in text.split() if len(w) >= 60]
        if widths and max(widths) >= BASE64_RUN_MIN:
            text = _B64_RUN.sub(run, text)
        if len(widths) >= 16:
            text = _B64_WRAPPED.sub(run, text)
    return text


def map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    """``value`` with ``fn`` applied to every string inside it (lists and dicts rebuilt, the rest kept)."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, list):
        return [map_strings(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: map_strings(v, fn) for k, v in value.items()}
    return value


def _map_json_column(raw: str | None, fn: Callable[[str], str]) -> str | None:
    """Apply ``fn`` to every string inside a JSON column; unchanged text is returned as is."""
    if not raw:
        return raw
    try:
        value = json.loads(raw)
    except ValueError:
        return fn(raw)
    new = map_strings(value, fn)
    return raw if new == value else json.dumps(new, ensure_ascii=False, default=str)


def _block_text(value: Any) -> str:
    if isinstance(value, list):
        return "\n".join(b["text"] for b in value if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def _has_media(value: Any) -> bool:
    return isinstance(value, list) and any(isinstance(b, dict) and b.get("type") in _MEDIA_TYPES for b in value)


def storage_transform(config: TroveConfig) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The column transform ``MessageStore`` applies to every row before INSERT."""
    writer = payload_writer(config)
    redactor = Redactor.from_config(config)
    if redactor.enabled and redactor.unknown_patterns:
        log.warning("trove: unknown TROVE_SENSITIVE_PATTERNS entries ignored: %s", ", ".join(redactor.unknown_patterns))
    externalize = bool(config.large_output_externalization_enabled)
    threshold = int(config.large_output_externalization_threshold_chars)

    redacting = bool(redactor.enabled and redactor.patterns)

    def transform(cols: dict[str, Any]) -> dict[str, Any]:
        if not redacting and _nothing_to_guard(cols, externalize, threshold):
            return cols  # the common row, decided by length and substring checks alone
        out = dict(cols)
        try:
            _apply(out, writer, redactor, externalize, threshold)
            return out
        except Exception:  # never raise into ingest; keep what was already made safe
            log.exception("trove: storage transform failed for one row; storing it as prepared so far")
            return out

    return transform


def _nothing_to_guard(cols: dict[str, Any], externalize: bool, threshold: int) -> bool:
    """True when ``_apply`` would leave ``cols`` as they are (redaction aside)."""
    content = cols.get("content") or ""
    if externalize and len(content) > threshold:
        return False
    for column in ("content", "tool_calls", "extra"):
        text = cols.get(column)
        if text and (_might_hold_base64(text) or not _encodable(text)):
            return False
    return True


def _apply(cols: dict[str, Any], writer: Writer, redactor: Redactor, externalize: bool, threshold: int) -> None:
    session_id = str(cols.get("session_id") or "")
    meta = {k: cols.get(k) for k in ("role", "tool_call_id", "tool_name") if cols.get(k)}
    write: Write = functools.partial(writer, session_id, meta=meta)
    guard = functools.partial(_guard_text, write=write)
    if redactor.enabled:  # first: nothing below may see a secret
        cols["content"] = (_map_json_column(cols["content"], redactor.redact) if cols.get("content_is_json")
                           else redactor.redact(cols.get("content") or ""))
        cols["tool_calls"] = _map_json_column(cols.get("tool_calls"), redactor.redact)
        cols["extra"] = _map_json_column(cols.get("extra"), redactor.redact)
    for column in ("content", "tool_calls", "extra"):
        raw = cols.get(column)
        if column == "content" and not cols.get("content_is_json"):
            cols["content"] = guard(raw or "")
        elif raw and _might_hold_base64(raw):
            cols[column] = _map_json_column(raw, guard)
    if externalize and len(cols.get("content") or "") > threshold:
        _externalize_content(cols, write)
    _make_encodable(cols, write)


def _encodable(text: str | None) -> bool:
    if not text or text.isascii():
        return True
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _make_encodable(cols: dict[str, Any], write: Write) -> None:
    """SQLite refuses lone surrogates: JSON columns escape them, text moves to a sidecar."""
    for column in ("tool_calls", "extra"):
        if not _encodable(cols.get(column)):
            with contextlib.suppress(ValueError):
                cols[column] = json.dumps(json.loads(cols[column]), ensure_ascii=True)
    text = cols.get("content") or ""
    if _encodable(text):
        return
    if cols.get("content_is_json"):
        with contextlib.suppress(ValueError):
            cols["content"] = json.dumps(json.loads(text), ensure_ascii=True)
            return
    ref = write(text, kind="unencodable_text", mime="text/plain")
    if ref is not None:
        cols["content"] = externalized_placeholder(ref, "unencodable_text", text, preview_chars=0)
        cols["content_is_json"] = 0


def _externalize_content(cols: dict[str, Any], write: Write) -> None:
    text = cols["content"]
    value = None
    if cols.get("content_is_json"):
        with contextlib.suppress(ValueError):
            value = json.loads(text)
    kind = "media" if _has_media(value) else ("tool_result" if cols.get("role") == "tool" else "raw")
    ref = write(text, kind=kind, mime="application/json" if cols.get("content_is_json") else "text/plain")
    if ref is None:
        return
    cols["content"] = externalized_placeholder(ref, kind, text, PREVIEW_CHARS, _block_text(value) or text)
    cols["content_is_json"] = 0
