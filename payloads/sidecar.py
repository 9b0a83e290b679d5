"""Payload protection: sidecar files, refs, and the storage-boundary transform.

Owns the payload directory: inline base64/data-URI payloads (always) and oversized
content (opt-in) move to JSON sidecar files named by digest, and rows keep a compact
placeholder carrying the ref. Also reads and describes refs and writes refs for
active-replay stubs (search, GC and the doctor report live in payload_ops.py). It never drops data:
when a sidecar cannot be written, the original stays inline.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import stat
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Sequence

from ..config import payload_dir
from .redact import Redactor

log = logging.getLogger("hermes_trove.payloads")

FORMAT = "trove-payload/1"
REF_RE = re.compile(r"trove-([0-9a-f]{32})-([0-9a-f]{8})\.json")
# Finds refs inside stored rows and replayed stubs.
REF_IN_TEXT = re.compile(r"\[trove:(?:payload|externalized) ref=(trove-[0-9a-f]{32}-[0-9a-f]{8}\.json)")
# A row or message whose whole content was externalized starts with this header.
EXTERNALIZED_HEAD = re.compile(r"\[trove:externalized ref=(trove-[0-9a-f]{32}-[0-9a-f]{8}\.json) ")
PREVIEW_CHARS = 600
DESCRIBE_PREVIEW_CHARS = 500
BASE64_RUN_MIN = 1024  # conservative: shorter runs are ids, hashes and tokens
DATA_URI_MIN = 16
SEARCH_FILE_LIMIT = 256
SEARCH_BYTES_PER_FILE = 512000
READ_MAX_CHARS = 200000

# Case is spelled out instead of re.IGNORECASE, which slows the long body match several times.
_DATA_URI = re.compile(
    r"[Dd][Aa][Tt][Aa]:(?P<mime>[A-Za-z0-9][A-Za-z0-9.+\-]*/[A-Za-z0-9.+\-]+)?(?:;[A-Za-z0-9.+\-]+=[^;,\s\"']*)*"
    rf";[Bb][Aa][Ss][Ee]64,(?P<b64>[A-Za-z0-9+/_\-]{{{DATA_URI_MIN},}}={{0,2}})")
_B64_RUN = re.compile(rf"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{{{BASE64_RUN_MIN},}}={{0,2}}(?![A-Za-z0-9+/_\-=])")
_B64_WRAPPED = re.compile(r"(?<![A-Za-z0-9+/=])(?:[A-Za-z0-9+/]{60,120}={0,2}\r?\n){16,}[A-Za-z0-9+/]{0,120}={0,2}")
_MEDIA_TYPES = frozenset({"image_url", "image", "input_image", "input_audio", "audio", "file", "input_file",
                          "video", "document"})


class PayloadError(Exception):
    """A ref that cannot be served: invalid name, missing, tampered, or another session's."""


# -- refs and sidecar records ---------------------------------------------------------
def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def digest(text: str) -> str:
    return hashlib.sha256(_encode(text)).hexdigest()


def session_tag(session_id: str) -> str:
    return hashlib.sha256(_encode(session_id)).hexdigest()[:8]


def ref_for(session_id: str, payload: str) -> str:
    """The deterministic ref of ``payload`` owned by ``session_id`` (same input, same file)."""
    return f"trove-{digest(payload)[:32]}-{session_tag(session_id)}.json"


def validate_ref(ref: Any) -> str:
    """Return ``ref`` if it is a bare sidecar name; raise ``PayloadError`` otherwise."""
    if not isinstance(ref, str) or not ref:
        raise PayloadError("externalized_ref must be a non-empty string")
    if "\x00" in ref:
        raise PayloadError("externalized_ref contains a NUL byte")
    if "/" in ref or "\\" in ref or os.sep in ref or (os.altsep and os.altsep in ref):
        raise PayloadError("externalized_ref must be a bare file name without path separators")
    if ref.startswith((".", "~")) or ".." in ref:
        raise PayloadError("externalized_ref must not contain '..' or start with '.' or '~'")
    if os.path.isabs(ref) or ":" in ref:
        raise PayloadError("externalized_ref must not be an absolute path or carry a drive")
    if "%" in ref or not ref.isascii() or not ref.isprintable():
        raise PayloadError("externalized_ref must be plain ASCII without percent or other encodings")
    if REF_RE.fullmatch(ref) is None:
        raise PayloadError(f"externalized_ref {ref!r} is not a trove payload name (trove-<32 hex>-<8 hex>.json)")
    return ref


def _render(record: dict[str, Any]) -> bytes:
    try:
        return _encode(json.dumps(record, ensure_ascii=False))
    except UnicodeEncodeError:
        return json.dumps(record, ensure_ascii=True).encode("ascii")


def _write_atomic(directory: Path, name: str, data: bytes) -> None:
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = directory / f".{name}.{os.getpid()}.{threading.get_ident()}.{time.monotonic_ns()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, directory / name)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    sync_directory(directory)


def sync_directory(directory: Path) -> None:
    """Make a rename or link in ``directory`` durable; not every filesystem allows a directory fsync."""
    try:
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


_cache: OrderedDict[tuple[Any, ...], dict[str, Any]] = OrderedDict()
_cache_lock = threading.Lock()


def _load(directory: Path, ref: str) -> dict[str, Any]:
    """The verified record of ``ref`` in ``directory`` (raises PayloadError)."""
    validate_ref(ref)
    path = directory / ref
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise PayloadError(f"externalized_ref {ref} was not found in the payload directory") from None
    except OSError as exc:
        raise PayloadError(f"externalized_ref {ref} is unreadable: {exc.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise PayloadError(f"externalized_ref {ref} is a symlink and is refused")
    if not stat.S_ISREG(st.st_mode):
        raise PayloadError(f"externalized_ref {ref} is not a regular file")
    key = (str(path), st.st_ino, st.st_size, st.st_mtime_ns)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as fh:
            raw = fh.read()
        record = json.loads(raw.decode("utf-8", "surrogatepass"))
    except OSError as exc:
        raise PayloadError(f"externalized_ref {ref} is unreadable: {exc.strerror}") from None
    except ValueError:
        raise PayloadError(f"externalized_ref {ref} is corrupt (not a trove payload JSON file)") from None
    payload = record.get("payload") if isinstance(record, dict) else None
    if not isinstance(payload, str) or record.get("format") != FORMAT:
        raise PayloadError(f"externalized_ref {ref} is corrupt (not a trove payload JSON file)")
    sha = digest(payload)
    m = REF_RE.fullmatch(ref)
    assert m is not None
    if record.get("sha256") != sha or m.group(1) != sha[:32] \
            or m.group(2) != session_tag(str(record.get("session_id", ""))):
        raise PayloadError(f"externalized_ref {ref} failed its integrity check (tampered or corrupt)")
    with _cache_lock:
        _cache[key] = record
        while len(_cache) > 8:
            _cache.popitem(last=False)
    return record


def load_record(directory: Path, ref: str) -> dict[str, Any]:
    """The verified sidecar record of ``ref`` (metadata and payload); raises ``PayloadError``."""
    return _load(Path(directory), ref)


def _owned(record: dict[str, Any], ref: str, session_id: str | None) -> dict[str, Any]:
    if session_id is not None and record.get("session_id") != session_id:
        raise PayloadError(f"externalized_ref {ref} belongs to another session")
    return record


def write_payload(directory: Path, session_id: str, payload: str, *, kind: str, mime: str = "text/plain",
                  meta: dict[str, Any] | None = None) -> str:
    """Durably store ``payload`` and return its ref; reuses an intact existing file. Raises OSError."""
    ref = ref_for(session_id, payload)
    try:
        if _load(directory, ref).get("session_id") == session_id:
            return ref
    except PayloadError:
        pass  # absent, or damaged: (re)write it atomically below
    record = {"format": FORMAT, "ref": ref, "session_id": session_id, "kind": kind, "mime": mime,
              "original_chars": len(payload), "original_bytes": len(_encode(payload)),
              "sha256": digest(payload), "created_at": time.time(), **(meta or {}), "payload": payload}
    _write_atomic(directory, ref, _render(record))
    return ref


def _try_write(directory: Path, session_id: str, payload: str, **kw: Any) -> str | None:
    try:
        return write_payload(directory, session_id, payload, **kw)
    except Exception as exc:  # unwritable dir, disk full, ...: the caller keeps the payload inline
        log.warning("trove: could not externalize a %s payload (%d chars) to %s: %s; keeping it inline",
                    kw.get("kind", "?"), len(payload), directory, exc)
        return None


# -- placeholders ---------------------------------------------------------------------
def payload_placeholder(ref: str, kind: str, mime: str, chars: int) -> str:
    """Compact in-row stand-in for a base64 / data-URI payload."""
    return f"[trove:payload ref={ref} kind={kind} mime={mime} chars={chars}]"


def externalized_placeholder(ref: str, kind: str, text: str, preview_chars: int = PREVIEW_CHARS,
                             preview_source: str | None = None) -> str:
    """Stand-in for oversized ``text``: a header line with the ref, then a short head preview."""
    head = (f"[trove:externalized ref={ref} kind={kind} chars={len(text)} sha256={digest(text)[:12]}]"
            f" Full content is stored outside the transcript; page it with"
            f" trove_expand(externalized_ref=\"{ref}\").")
    source = text if preview_source is None else preview_source
    if preview_chars <= 0 or not source:
        return head
    preview = source[:preview_chars]
    return f"{head}\nPreview:\n{preview}" + ("\n…" if len(source) > len(preview) else "")


def refs_in(text: str | None) -> list[str]:
    return list(dict.fromkeys(REF_IN_TEXT.findall(text or "")))


# -- the storage transform ------------------------------------------------------------
def _might_hold_base64(text: str) -> bool:
    return len(text) >= BASE64_RUN_MIN or "ase64" in text or "ASE64" in text


def _looks_random(run: str) -> bool:
    body = run.rstrip("=")
    sample = body[:4096]
    classes = (any(c.isupper() for c in sample) + any(c.islower() for c in sample)
               + any(c.isdigit() for c in sample))
    return classes >= 3 and len(set(sample)) >= 24


def _after_data_uri_header(m: re.Match[str]) -> bool:
    """True for the body of a data URI that stayed inline (its own write already failed)."""
    return m.string[max(0, m.start() - 8):m.start()].lower() == ";base64,"


def _guard_text(text: str, write: Callable[..., str | None]) -> str:
    """Replace data URIs and long base64-looking runs in ``text`` with payload placeholders."""
    if not _might_hold_base64(text):
        return text

    def uri(m: re.Match[str]) -> str:
        mime = (m.group("mime") or "application/octet-stream").lower()
        ref = write(m.group(0), kind="data_uri", mime=mime)
        return payload_placeholder(ref, "data_uri", mime, len(m.group(0))) if ref else m.group(0)

    def run(m: re.Match[str]) -> str:
        if _after_data_uri_header(m) or not _looks_random(m.group(0).replace("\n", "").replace("\r", "")):
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


def _map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, list):
        return [_map_strings(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: _map_strings(v, fn) for k, v in value.items()}
    return value


def _map_json_column(raw: str | None, fn: Callable[[str], str]) -> str | None:
    """Apply ``fn`` to every string inside a JSON column; unchanged text is returned as is."""
    if not raw:
        return raw
    try:
        value = json.loads(raw)
    except ValueError:
        return fn(raw)
    new = _map_strings(value, fn)
    return raw if new == value else json.dumps(new, ensure_ascii=False, default=str)


def _block_text(value: Any) -> str:
    if isinstance(value, list):
        return "\n".join(b["text"] for b in value if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def _has_media(value: Any) -> bool:
    return isinstance(value, list) and any(isinstance(b, dict) and b.get("type") in _MEDIA_TYPES for b in value)


def storage_transform(config: Any) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
    """The column transform ``MessageStore`` applies to every row before INSERT."""
    directory = payload_dir(config)
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
            _apply(out, directory, redactor, externalize, threshold)
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


def _apply(cols: dict[str, Any], directory: Path, redactor: Redactor, externalize: bool, threshold: int) -> None:
    session_id = str(cols.get("session_id") or "")
    meta = {k: cols.get(k) for k in ("role", "tool_call_id", "tool_name") if cols.get(k)}

    def write(payload: str, *, kind: str, mime: str) -> str | None:
        return _try_write(directory, session_id, payload, kind=kind, mime=mime, meta=meta)

    def guard(text: str) -> str:
        return _guard_text(text, write)

    if redactor.enabled:  # first: nothing below may see a secret
        cols["content"] = (_map_json_column(cols["content"], redactor.redact) if cols.get("content_is_json")
                           else redactor.redact(cols.get("content") or ""))
        cols["tool_calls"] = _map_json_column(cols.get("tool_calls"), redactor.redact)
        cols["extra"] = _map_json_column(cols.get("extra"), redactor.redact)
    content = cols.get("content") or ""
    if cols.get("content_is_json"):
        if _might_hold_base64(content):
            cols["content"] = _map_json_column(content, guard)
    else:
        cols["content"] = guard(content)
    for column in ("tool_calls", "extra"):
        raw = cols.get(column)
        if raw and _might_hold_base64(raw):
            cols[column] = _map_json_column(raw, guard)
    if externalize and len(cols["content"]) > threshold:
        _externalize_content(cols, write, threshold)
    _make_encodable(cols, write)


def _encodable(text: str | None) -> bool:
    if not text or text.isascii():
        return True
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _make_encodable(cols: dict[str, Any], write: Callable[..., str | None]) -> None:
    """SQLite refuses lone surrogates: JSON columns escape them, text moves to a sidecar."""
    for column in ("tool_calls", "extra"):
        if not _encodable(cols.get(column)):
            try:
                cols[column] = json.dumps(json.loads(cols[column]), ensure_ascii=True)
            except ValueError:
                pass
    text = cols.get("content") or ""
    if _encodable(text):
        return
    if cols.get("content_is_json"):
        try:
            cols["content"] = json.dumps(json.loads(text), ensure_ascii=True)
            return
        except ValueError:
            pass
    ref = write(text, kind="unencodable_text", mime="text/plain")
    if ref is not None:
        cols["content"] = externalized_placeholder(ref, "unencodable_text", text, preview_chars=0)
        cols["content_is_json"] = 0


def _externalize_content(cols: dict[str, Any], write: Callable[..., str | None], threshold: int) -> None:
    text = cols["content"]
    role = cols.get("role")
    if cols.get("content_is_json"):
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        kind = "media" if _has_media(value) else ("tool_result" if role == "tool" else "raw")
        preview_source, mime = _block_text(value) or text, "application/json"
    else:
        kind = "tool_result" if role == "tool" else "raw"
        preview_source, mime = text, "text/plain"
    ref = write(text, kind=kind, mime=mime)
    if ref is None:
        return
    cols["content"] = externalized_placeholder(ref, kind, text, PREVIEW_CHARS, preview_source)
    cols["content_is_json"] = 0


# -- recovery ---------------------------------------------------------------------------
def _directory(runtime: Any) -> Path:
    return Path(getattr(runtime, "payload_dir", None) or payload_dir(runtime.config))


def _metadata(record: dict[str, Any]) -> dict[str, Any]:
    keys = ("ref", "session_id", "kind", "mime", "original_chars", "original_bytes", "sha256", "created_at",
            "role", "tool_call_id", "tool_name")
    return {k: record.get(k) for k in keys if k in record}


def read_ref(runtime: Any, ref: str, content_offset: int = 0, max_chars: int = 20000,
             session_id: str | None = None) -> dict[str, Any]:
    """One page of an externalized payload, exactly as it was stored."""
    if not isinstance(content_offset, int) or isinstance(content_offset, bool) or content_offset < 0:
        raise PayloadError("content_offset must be a non-negative integer")
    if not isinstance(max_chars, int) or isinstance(max_chars, bool):
        raise PayloadError("max_chars must be an integer")
    record = _owned(_load(_directory(runtime), ref), ref, session_id)
    payload: str = record["payload"]
    limit = max(1, min(int(max_chars), READ_MAX_CHARS))
    start = min(content_offset, len(payload))
    content = payload[start:start + limit]
    end = start + len(content)
    has_more = end < len(payload)
    return {"ref": ref, "kind": record.get("kind"), "mime": record.get("mime"),
            "original_chars": len(payload), "content": content, "content_offset": start,
            "content_returned_chars": len(content), "next_content_offset": end if has_more else None,
            "has_more": has_more, "content_truncated": has_more or start > 0}


def describe_ref(runtime: Any, ref: str, session_id: str | None = None) -> dict[str, Any]:
    """Metadata and a short preview of an externalized payload (never the full content)."""
    record = _owned(_load(_directory(runtime), ref), ref, session_id)
    payload: str = record["payload"]
    return {**_metadata(record), "readable": True, "content_preview": payload[:DESCRIBE_PREVIEW_CHARS],
            "preview_truncated": len(payload) > DESCRIBE_PREVIEW_CHARS}


def externalize_text(runtime: Any, session_id: str, text: str, kind: str = "tool_result") -> str | None:
    """Write ``text`` as one sidecar and confirm it reads back intact; None keeps it inline."""
    if not session_id or not isinstance(text, str):
        return None
    directory = _directory(runtime)
    redactor = Redactor.from_config(runtime.config)
    text = redactor.redact(text)
    ref = _try_write(directory, session_id, text, kind=kind, mime="text/plain")
    if ref is None:
        return None
    try:
        if _load(directory, ref)["payload"] != text:
            return None
    except PayloadError as exc:
        log.warning("trove: externalized payload did not verify after writing: %s", exc)
        return None
    return ref


def apply_replay_stubs(runtime: Any, session_id: str, messages: Sequence[dict[str, Any]], *,
                       protect_from: int) -> tuple[list[dict[str, Any]], int]:
    """Stub big textual tool results in a provider-visible list when both opt-ins are on."""
    from .. import tokens
    from . import replay

    cfg = runtime.config
    out = list(messages)
    if not (cfg.large_output_externalization_enabled and cfg.large_output_active_replay_stubbing_enabled):
        return out, 0
    done = 0
    for i in replay.plan_stubs(out, threshold_tokens=int(cfg.large_output_active_replay_stub_threshold_tokens),
                               protect_from=protect_from, count_tokens=tokens.count_message):
        text = replay.stub_source_text(out[i])
        ref = externalize_text(runtime, session_id, text) if text is not None else None
        if ref is not None:
            out[i] = replay.stub_message(out[i], ref, PREVIEW_CHARS)
            done += 1
    return out, done
