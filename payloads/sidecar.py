"""The sidecar store: payloads named by digest, their refs and their placeholders.

Writes one payload per JSON file atomically (a SQLite store) or per row of the server's
``payloads`` table (a PostgreSQL store, ``server.py``), loads it back verified (digest, owner,
no symlinks), pages and describes it for the recovery tools, searches one session's payloads,
counts them for the doctor, and shrinks externalized tool rows whose sidecar is intact.
Deciding what leaves a row is the storage guard's job (``guard.py``).
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import json
import logging
import os
import re
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..config import payload_dir
from ..refs import content_sha256 as digest  # the SHA-256 of a text's UTF-8, as refs hash rows
from .redact import Redactor
from .server import ServerPayloads, payloads_for

if TYPE_CHECKING:
    from ..config import TroveConfig
    from ..store import MessageStore

log = logging.getLogger("hermes_trove.payloads")

FORMAT = "trove-payload/1"
REF_RE = re.compile(r"trove-([0-9a-f]{32})-([0-9a-f]{8})\.json")
# Finds refs inside stored rows and replayed stubs.
REF_IN_TEXT = re.compile(r"\[trove:(?:payload|externalized) ref=(trove-[0-9a-f]{32}-[0-9a-f]{8}\.json)")
# A row or message whose whole content was externalized starts with this header.
EXTERNALIZED_HEAD = re.compile(r"\[trove:externalized ref=(trove-[0-9a-f]{32}-[0-9a-f]{8}\.json) ")
PREVIEW_CHARS = 600
DESCRIBE_PREVIEW_CHARS = 500
SEARCH_FILE_LIMIT = 256
SEARCH_BYTES_PER_FILE = 512000
READ_MAX_CHARS = 200000
RECORD_CACHE_SIZE = 8


class PayloadRuntime(Protocol):
    """What payload code reads from ``runtime.Runtime``; structural, since runtime imports the guard."""

    @property
    def config(self) -> TroveConfig: ...

    @property
    def store(self) -> MessageStore: ...

    @property
    def payload_dir(self) -> Path: ...


class PayloadError(Exception):
    """A ref that cannot be served: invalid name, missing, tampered, or another session's."""


Writer = Callable[..., "str | None"]  # (session_id, payload, *, kind, mime, meta) -> ref, or None: keep it inline


def server_payloads(config: TroveConfig) -> ServerPayloads | None:
    """The payloads table of a PostgreSQL store (``TROVE_DATABASE_URL``), or None: files beside SQLite."""
    url = getattr(config, "database_url", "")
    return payloads_for(url) if url else None


# -- refs ------------------------------------------------------------------------------
def encode_text(text: str) -> bytes:
    """A payload's exact UTF-8 bytes (lone surrogates kept), as files and the server store them."""
    return text.encode("utf-8", "surrogatepass")


def session_tag(session_id: str) -> str:
    return digest(session_id)[:8]


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
        shown = repr(ref[:80]) + (f" (+{len(ref) - 80} more chars)" if len(ref) > 80 else "")
        raise PayloadError(f"externalized_ref {shown} is not a trove payload name (trove-<32 hex>-<8 hex>.json)")
    return ref


def refs_in(text: str | None) -> list[str]:
    return list(dict.fromkeys(REF_IN_TEXT.findall(text or "")))


# -- writing -----------------------------------------------------------------------------
def _render(record: dict[str, Any]) -> bytes:
    try:
        return encode_text(json.dumps(record, ensure_ascii=False))
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
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    sync_directory(directory)


def sync_directory(directory: Path) -> None:
    """Make a rename or link in ``directory`` durable; not every filesystem allows a directory fsync."""
    with contextlib.suppress(OSError):
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def _record(session_id: str, payload: str, kind: str, mime: str, meta: dict[str, Any] | None) -> dict[str, Any]:
    """The sidecar record of ``payload`` (a file's JSON, a server row's columns)."""
    return {"format": FORMAT, "ref": ref_for(session_id, payload), "session_id": session_id, "kind": kind,
            "mime": mime, "original_chars": len(payload), "original_bytes": len(encode_text(payload)),
            "sha256": digest(payload), "created_at": time.time(), **(meta or {}), "payload": payload}


def write_payload(directory: Path, session_id: str, payload: str, *, kind: str, mime: str = "text/plain",
                  meta: dict[str, Any] | None = None) -> str:
    """Durably store ``payload`` and return its ref; reuses an intact existing file. Raises OSError."""
    ref = ref_for(session_id, payload)
    try:
        if load_record(directory, ref).get("session_id") == session_id:
            return ref
    except PayloadError:
        pass  # absent, or damaged: (re)write it atomically below
    _write_atomic(directory, ref, _render(_record(session_id, payload, kind, mime, meta)))
    return ref


def try_write_payload(directory: Path, session_id: str, payload: str, *, kind: str, mime: str = "text/plain",
                      meta: dict[str, Any] | None = None) -> str | None:
    """``write_payload``, or None (logged) when the sidecar cannot be written; the caller keeps it inline."""
    try:
        return write_payload(directory, session_id, payload, kind=kind, mime=mime, meta=meta)
    except Exception as exc:  # unwritable dir, disk full, ...
        log.warning("trove: could not externalize a %s payload (%d chars) to %s: %s; keeping it inline",
                    kind, len(payload), directory, exc)
        return None


def payload_writer(config: TroveConfig) -> Writer:
    """Where payloads go: a file in the payload directory. On a PostgreSQL store that file waits there
    (no network in a turn) until the outbox's shipper uploads it to the server's ``payloads`` table,
    before any message that names it (``spool.SpoolDir``), so the ref resolves on every machine. The writer
    returns the ref, or None (logged): the caller keeps the payload inline."""
    return functools.partial(try_write_payload, payload_dir(config))


def externalize_text(runtime: PayloadRuntime, session_id: str, text: str, kind: str = "tool_result") -> str | None:
    """Write ``text`` (redacted) as one sidecar and confirm it reads back intact; None keeps it inline."""
    if not session_id or not isinstance(text, str):
        return None
    text = Redactor.from_config(runtime.config).redact(text)
    ref = payload_writer(runtime.config)(session_id, text, kind=kind, mime="text/plain")
    if ref is None:
        return None
    try:
        if load_ref(runtime, ref)["payload"] != text:
            return None
    except PayloadError as exc:
        log.warning("trove: externalized payload did not verify after writing: %s", exc)
        return None
    return ref


# -- loading -----------------------------------------------------------------------------
# Recently verified records, keyed by path and file identity so a rewritten file misses.
_cache: OrderedDict[tuple[Any, ...], dict[str, Any]] = OrderedDict()
_cache_lock = threading.Lock()


def load_record(directory: Path, ref: str) -> dict[str, Any]:
    """The verified sidecar record of ``ref`` (metadata and payload); raises ``PayloadError``."""
    validate_ref(ref)
    path = Path(directory) / ref
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
    if st.st_nlink > 1:  # a hard link can point at any file of the same filesystem, like a symlink
        raise PayloadError(f"externalized_ref {ref} has more than one hard link and is refused")
    key = (str(path), st.st_ino, st.st_size, st.st_mtime_ns)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as fh:
            if os.fstat(fh.fileno()).st_nlink > 1:  # linked between the lstat and the open
                raise PayloadError(f"externalized_ref {ref} has more than one hard link and is refused")
            raw = fh.read()
        record = json.loads(raw.decode("utf-8", "surrogatepass"))
    except OSError as exc:
        raise PayloadError(f"externalized_ref {ref} is unreadable: {exc.strerror}") from None
    except ValueError:
        raise PayloadError(f"externalized_ref {ref} is corrupt (not a trove payload JSON file)") from None
    payload = record.get("payload") if isinstance(record, dict) else None
    if not isinstance(payload, str) or record.get("format") != FORMAT:
        raise PayloadError(f"externalized_ref {ref} is corrupt (not a trove payload JSON file)")
    _verify(record, ref)
    _remember(key, record)
    return record


def _verify(record: dict[str, Any], ref: str, stored: str | None = None) -> None:
    """The payload (or the bytes a server stored, when their digest ``stored`` is given) hashes to its
    recorded digest, and the (validated) ref names that digest and its owner."""
    recorded = str(record.get("sha256"))
    m = REF_RE.fullmatch(ref)
    assert m is not None
    if (digest(record["payload"]) if stored is None else stored) != recorded or m.group(1) != recorded[:32] \
            or m.group(2) != session_tag(str(record.get("session_id", ""))):
        raise PayloadError(f"externalized_ref {ref} failed its integrity check (tampered or corrupt)")


def _unreachable(ref: str, exc: Exception) -> PayloadError:  # the server is down or refused the read
    return PayloadError(f"externalized_ref {ref} is unreadable: {type(exc).__name__}: {str(exc).strip()[:200]}")


def _remember(key: tuple[Any, ...], record: dict[str, Any]) -> None:
    with _cache_lock:
        _cache[key] = record
        while len(_cache) > RECORD_CACHE_SIZE:
            _cache.popitem(last=False)


def load_server_record(server: ServerPayloads, ref: str) -> dict[str, Any]:
    """``load_record`` for a PostgreSQL store's ``payloads`` table: the same checks, the same errors."""
    validate_ref(ref)
    key = ("server", server.db.url, ref)
    with _cache_lock:
        hit = _cache.get(key)
    try:
        # A verified copy serves while the row still holds those bytes (the server hashes them).
        if hit is not None and (server.facts(ref) or ("", "", None))[2] == hit["sha256"]:
            with _cache_lock:
                if key in _cache:
                    _cache.move_to_end(key)
            return hit
        record = server.load(ref)
    except UnicodeDecodeError:
        raise PayloadError(f"externalized_ref {ref} is corrupt (its stored bytes are not UTF-8)") from None
    except Exception as exc:  # the server is down or refused the read
        raise _unreachable(ref, exc) from None
    if record is None:
        raise PayloadError(f"externalized_ref {ref} was not found in {server.where}")
    record["format"] = FORMAT
    _verify(record, ref)
    _remember(key, record)
    return record


def load_ref(runtime: PayloadRuntime, ref: str) -> dict[str, Any]:
    """The verified record of ``ref`` where the runtime's store keeps payloads (table or directory).
    On a server, a payload this machine wrote that has not shipped yet is read from its local file."""
    server = _server_copy(runtime, ref)
    return load_record(runtime.payload_dir, ref) if server is None else load_server_record(server, ref)


def _server_copy(runtime: PayloadRuntime, ref: str) -> ServerPayloads | None:
    """The server that holds ``ref`` (validated), or None: a file store, or a payload not shipped yet."""
    server = server_payloads(runtime.config)
    if server is not None:
        validate_ref(ref)
    return None if server is None or (runtime.payload_dir / ref).is_file() else server


def check_ref(runtime: PayloadRuntime, ref: str) -> None:
    """Raise ``PayloadError`` unless ``ref`` would load intact; a server checks its row's digest in place
    (no payload crosses the network), a file is loaded as ``load_ref`` would."""
    server = _server_copy(runtime, ref)
    if server is None:
        load_record(runtime.payload_dir, ref)
        return
    try:
        facts = server.facts(ref)
    except Exception as exc:  # the server is down or refused the read
        raise _unreachable(ref, exc) from None
    if facts is None:
        raise PayloadError(f"externalized_ref {ref} was not found in {server.where}")
    recorded, owner, stored = facts
    _verify({"sha256": recorded, "session_id": owner}, ref, stored)


def payload_home(runtime: PayloadRuntime) -> str:
    """Where the runtime's payloads live, for reports: the directory, or the server's table."""
    server = server_payloads(runtime.config)
    return str(runtime.payload_dir) if server is None else server.where


def _load_owned(runtime: PayloadRuntime, ref: str, session_id: str | None) -> dict[str, Any]:
    """``load_ref``, refusing a record of another session when ``session_id`` is given."""
    record = load_ref(runtime, ref)
    if session_id is not None and record.get("session_id") != session_id:
        raise PayloadError(f"externalized_ref {ref} belongs to another session")
    return record


# -- placeholders ------------------------------------------------------------------------
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


# -- recovery ----------------------------------------------------------------------------
def _metadata(record: dict[str, Any]) -> dict[str, Any]:
    keys = ("ref", "session_id", "kind", "mime", "original_chars", "original_bytes", "sha256", "created_at",
            "role", "tool_call_id", "tool_name")
    return {k: record.get(k) for k in keys if k in record}


def read_ref(runtime: PayloadRuntime, ref: str, content_offset: int = 0, max_chars: int = 20000,
             session_id: str | None = None) -> dict[str, Any]:
    """One page of an externalized payload, exactly as it was stored."""
    if not isinstance(content_offset, int) or isinstance(content_offset, bool) or content_offset < 0:
        raise PayloadError("content_offset must be a non-negative integer")
    if not isinstance(max_chars, int) or isinstance(max_chars, bool):
        raise PayloadError("max_chars must be an integer")
    record = _load_owned(runtime, ref, session_id)
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


def describe_ref(runtime: PayloadRuntime, ref: str, session_id: str | None = None) -> dict[str, Any]:
    """Metadata and a short preview of an externalized payload (never the full content)."""
    record = _load_owned(runtime, ref, session_id)
    payload: str = record["payload"]
    return {**_metadata(record), "readable": True, "content_preview": payload[:DESCRIBE_PREVIEW_CHARS],
            "preview_truncated": len(payload) > DESCRIBE_PREVIEW_CHARS}


# -- search ------------------------------------------------------------------------------
def _session_files(directory: Path, session_id: str) -> list[Path]:
    """One session's sidecars, newest first, found by the owner tag in their names."""
    tag = session_tag(session_id)
    try:
        entries = [e for e in os.scandir(directory) if e.name.endswith(f"-{tag}.json") and REF_RE.fullmatch(e.name)]
    except OSError:
        return []

    def mtime(e: os.DirEntry[str]) -> float:
        try:
            return e.stat(follow_symlinks=False).st_mtime
        except OSError:
            return 0.0
    return [Path(e.path) for e in sorted(entries, key=mtime, reverse=True)]


def search_payloads(runtime: PayloadRuntime, session_id: str, query: str, limit: int = 10,
                    refs: Iterable[str] | None = None) -> dict[str, Any]:
    """Bounded literal, case-insensitive scan of one session's sidecars."""
    if not isinstance(query, str) or not query.strip():
        raise PayloadError("query must be a non-empty string")
    limit = max(1, min(int(limit), 200))
    rejected = 0
    server = server_payloads(runtime.config)
    if refs is not None:
        names = []
        for r in list(refs)[:SEARCH_FILE_LIMIT * 4]:
            try:
                names.append(validate_ref(r))
            except PayloadError:
                rejected += 1
        paths = list(dict.fromkeys(names))
    elif server is not None:
        with contextlib.suppress(Exception):  # this machine's waiting payloads first; else what the server has
            runtime.store.settle(timeout_s=2.0)
        paths = list(dict.fromkeys([*(p.name for p in _session_files(runtime.payload_dir, session_id)),
                                    *server.session_refs(session_id, 2**31)]))
    else:
        paths = [p.name for p in _session_files(runtime.payload_dir, session_id)]
    needle = re.compile(re.escape(query.strip()), re.IGNORECASE)
    results: list[dict[str, Any]] = []
    scanned = matched = 0
    truncated = len(paths) > SEARCH_FILE_LIMIT
    for name in paths[:SEARCH_FILE_LIMIT]:
        if len(results) >= limit:
            truncated = True
            break
        try:
            record = _load_owned(runtime, name, session_id)
        except PayloadError:
            rejected += 1
            continue
        scanned += 1
        payload: str = record["payload"]
        data = encode_text(payload)
        if len(data) > SEARCH_BYTES_PER_FILE:
            truncated = True
            text = data[:SEARCH_BYTES_PER_FILE].decode("utf-8", "ignore")
        else:
            text = payload
        hits = list(itertools.islice(needle.finditer(text), min(3, limit - len(results))))
        results += [{"type": "externalized", "ref": name, "kind": record.get("kind"),
                     "tool_call_id": record.get("tool_call_id"), "snippet": text[max(0, m.start() - 120):m.end() + 180],
                     "line": text.count("\n", 0, m.start()) + 1, "byte_position": len(encode_text(text[:m.start()])),
                     "original_chars": len(payload)} for m in hits]
        matched += bool(hits)
    return {"results": results,
            "scan": {"candidate_files": len(paths), "scanned_files": scanned, "matched_files": matched,
                     "rejected_files": rejected, "file_limit": SEARCH_FILE_LIMIT,
                     "bytes_per_file_limit": SEARCH_BYTES_PER_FILE, "truncated": truncated}}


STALE_TMP_SECONDS = 3600.0
_TMP_RE = re.compile(r"\.(trove-[0-9a-f]{32}-[0-9a-f]{8}\.json)\.(\d+)\.\d+\.\d+\.tmp")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0 only asks whether the process exists (this one always does)
    except (ProcessLookupError, OverflowError):  # no such process, or a pid no process can have
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def stale_temp(entry: os.DirEntry[str], now: float, max_age_s: float = STALE_TMP_SECONDS) -> bool:
    """A sidecar temp file left by a crash: its writer is gone, or it is older than ``max_age_s``."""
    m = _TMP_RE.fullmatch(entry.name)
    if m is None:
        return False
    try:
        age = now - entry.stat(follow_symlinks=False).st_mtime
    except OSError:
        return False
    return age > max_age_s or not _pid_alive(int(m.group(2)))


def clean_stale_temp(directory: Path, now: float | None = None, max_age_s: float = STALE_TMP_SECONDS) -> int:
    """Delete sidecar temp files a crashed writer left behind; returns how many went. Never raises."""
    now = time.time() if now is None else now
    removed = 0
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    for e in entries:
        if e.is_file(follow_symlinks=False) and stale_temp(e, now, max_age_s):
            with contextlib.suppress(OSError):
                os.unlink(e.path)
                removed += 1
    if removed:
        log.info("trove: removed %d stale payload temp files from %s", removed, directory)
    return removed


def directory_census(directory: Path, refs: Iterable[str]) -> dict[str, Any]:
    """File, byte and temp-file counts of the payload directory, and which of ``refs`` are missing."""
    files = total = tmp = stale = 0
    now = time.time()
    if directory.exists() and not directory.is_dir():
        return {"path": str(directory), "exists": True, "not_a_directory": True, "files": 0, "bytes": 0,
                "temp_files": 0, "stale_temp_files": 0, "referenced_refs": len(set(refs)),
                "missing_refs": 0, "unreadable_refs": 0}
    try:
        for e in os.scandir(directory):
            if e.name.endswith(".tmp"):
                tmp += 1
                stale += stale_temp(e, now)
            elif REF_RE.fullmatch(e.name) and e.is_file(follow_symlinks=False):
                files += 1
                total += e.stat(follow_symlinks=False).st_size
        exists = True
    except OSError:
        exists = False
    referenced = set(refs)
    missing = unreadable = 0
    for ref in referenced:
        try:
            st = os.lstat(directory / ref)
        except OSError:
            missing += 1
            continue
        if not stat.S_ISREG(st.st_mode) or not os.access(directory / ref, os.R_OK):
            unreadable += 1
    return {"path": str(directory), "exists": exists, "files": files, "bytes": total, "temp_files": tmp,
            "stale_temp_files": stale,
            "referenced_refs": len(referenced), "missing_refs": missing, "unreadable_refs": unreadable}


def payload_census(runtime: PayloadRuntime, refs: Iterable[str]) -> dict[str, Any]:
    """``directory_census`` of the runtime's payload home: the server's table on PostgreSQL."""
    server = server_payloads(runtime.config)
    return directory_census(runtime.payload_dir, refs) if server is None else server.census(refs)


# -- transcript GC -----------------------------------------------------------------------
def transcript_gc(runtime: PayloadRuntime, session_id: str, store_ids: Sequence[int]) -> int:
    """Shrink externalized, unpinned tool rows to their compact placeholder; returns rows rewritten."""
    if not runtime.config.large_output_transcript_gc_enabled or not store_ids:
        return 0
    rewrites: list[tuple[int, str, str]] = []
    for row in runtime.store.get_many(list(store_ids)):
        if row.session_id != session_id or row.role != "tool" or row.pinned:
            continue
        found = EXTERNALIZED_HEAD.match(row.content or "")
        ref = found.group(1) if found else (ref_for(session_id, row.content) if row.content else None)
        if ref is None:
            continue
        try:
            record = _load_owned(runtime, ref, session_id)
        except PayloadError:
            continue  # no intact sidecar: the row stays the only copy
        if found is None and (row.content_is_json or record["payload"] != row.content):
            continue
        compact = externalized_placeholder(ref, str(record.get("kind") or "tool_result"), record["payload"], 0)
        if row.content != compact:
            rewrites.append((row.store_id, row.content, compact))
    return runtime.store.replace_contents(rewrites) if rewrites else 0
