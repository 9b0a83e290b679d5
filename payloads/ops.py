"""Operations over many payloads: bounded sidecar search, transcript GC, doctor report.

Built on ``payloads.py`` (refs, sidecar reads and writes); this module only scans and
reports, except ``transcript_gc``, which shrinks already-externalized rows in place.
"""
from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any, Iterable, Sequence

from .sidecar import (BASE64_RUN_MIN, EXTERNALIZED_HEAD, REF_RE, SEARCH_BYTES_PER_FILE, SEARCH_FILE_LIMIT, _B64_RUN,
                       _DATA_URI, PayloadError, _after_data_uri_header, _directory, _encode, _load, _looks_random,
                       _owned, externalized_placeholder, ref_for, refs_in, session_tag, validate_ref)


# -- search ------------------------------------------------------------------------------
def _candidates(directory: Path, session_id: str) -> list[Path]:
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


def search_payloads(runtime: Any, session_id: str, query: str, limit: int = 10,
                    refs: Iterable[str] | None = None) -> dict[str, Any]:
    """Bounded literal, case-insensitive scan of one session's sidecars."""
    if not isinstance(query, str) or not query.strip():
        raise PayloadError("query must be a non-empty string")
    directory = _directory(runtime)
    limit = max(1, min(int(limit), 200))
    rejected = 0
    if refs is not None:
        names = []
        for r in list(refs)[:SEARCH_FILE_LIMIT * 4]:
            try:
                names.append(validate_ref(r))
            except PayloadError:
                rejected += 1
        paths = [directory / n for n in dict.fromkeys(names)]
    else:
        paths = _candidates(directory, session_id)
    needle = re.compile(re.escape(query.strip()), re.IGNORECASE)
    results: list[dict[str, Any]] = []
    scanned = matched = 0
    truncated = len(paths) > SEARCH_FILE_LIMIT
    for path in paths[:SEARCH_FILE_LIMIT]:
        if len(results) >= limit:
            truncated = True
            break
        try:
            record = _owned(_load(directory, path.name), path.name, session_id)
        except PayloadError:
            rejected += 1
            continue
        scanned += 1
        payload: str = record["payload"]
        data = _encode(payload)
        if len(data) > SEARCH_BYTES_PER_FILE:
            truncated = True
            text = data[:SEARCH_BYTES_PER_FILE].decode("utf-8", "ignore")
        else:
            text = payload
        hits = 0
        for m in needle.finditer(text):
            if len(results) >= limit or hits >= 3:
                break
            hits += 1
            results.append({"type": "externalized", "ref": path.name, "kind": record.get("kind"),
                            "tool_call_id": record.get("tool_call_id"),
                            "snippet": text[max(0, m.start() - 120):m.end() + 180],
                            "line": text.count("\n", 0, m.start()) + 1,
                            "byte_position": len(_encode(text[:m.start()])),
                            "original_chars": len(payload)})
        matched += bool(hits)
    return {"results": results,
            "scan": {"candidate_files": len(paths), "scanned_files": scanned, "matched_files": matched,
                     "rejected_files": rejected, "file_limit": SEARCH_FILE_LIMIT,
                     "bytes_per_file_limit": SEARCH_BYTES_PER_FILE, "truncated": truncated}}


# -- transcript GC -----------------------------------------------------------------------
def transcript_gc(runtime: Any, session_id: str, store_ids: Sequence[int]) -> int:
    """Shrink externalized, unpinned tool rows to their compact placeholder; returns rows rewritten."""
    if not runtime.config.large_output_transcript_gc_enabled or not store_ids:
        return 0
    directory = _directory(runtime)
    plans: list[tuple[int, str, str]] = []
    for row in runtime.store.get_many(list(store_ids)):
        if row.session_id != session_id or row.role != "tool" or row.pinned:
            continue
        found = EXTERNALIZED_HEAD.match(row.content or "")
        ref = found.group(1) if found else (ref_for(session_id, row.content) if row.content else None)
        if ref is None:
            continue
        try:
            record = _owned(_load(directory, ref), ref, session_id)
        except PayloadError:
            continue  # no intact sidecar: the row stays the only copy
        if found is None and (row.content_is_json or record["payload"] != row.content):
            continue
        compact = externalized_placeholder(ref, str(record.get("kind") or "tool_result"), record["payload"], 0)
        if row.content != compact:
            plans.append((row.store_id, row.content, compact))
    if not plans:
        return 0
    rewritten = 0
    with runtime.db.transaction() as conn:
        for store_id, old, new in plans:  # compare-and-set: a row changed meanwhile is left alone
            cur = conn.execute("UPDATE messages SET content=?, content_is_json=0 WHERE store_id=? AND content=?"
                               " AND pinned=0", (new, store_id, old))
            rewritten += cur.rowcount
    return rewritten


# -- doctor ------------------------------------------------------------------------------
def doctor_report(runtime: Any, largest: int = 10, sample: int = 50) -> dict[str, Any]:
    """Metadata-only payload health: inline payload rows, largest rows, payload dir stats."""
    conn = runtime.db.read()
    suspicious: list[dict[str, Any]] = []
    count = 0
    rows = conn.execute(
        "SELECT store_id, session_id, role, content, tool_calls FROM messages"
        " WHERE content LIKE '%;base64,%' OR tool_calls LIKE '%;base64,%'"
        " OR length(content) >= ? OR length(tool_calls) >= ?", (BASE64_RUN_MIN, BASE64_RUN_MIN))
    refs: set[str] = set()
    for r in rows:
        text = (r["content"] or "") + "\n" + (r["tool_calls"] or "")
        refs.update(refs_in(text))
        reasons = []
        if ";base64," in text.lower() and _DATA_URI.search(text):
            reasons.append("data_uri")
        if any(_looks_random(m.group(0)) and not _after_data_uri_header(m) for m in _B64_RUN.finditer(text)):
            reasons.append("base64_run")
        if reasons:
            count += 1
            if len(suspicious) < sample:
                suspicious.append({"store_id": r["store_id"], "session_id": r["session_id"], "role": r["role"],
                                   "reasons": reasons, "chars": len(text) - 1})
    for r in conn.execute("SELECT content FROM messages WHERE content LIKE '%[trove:%ref=trove-%'"):
        refs.update(refs_in(r[0]))
    big = [{"store_id": r[0], "role": r[1], "chars": int(r[2]), "content_chars": int(r[3]),
            "tool_call_chars": int(r[4])} for r in conn.execute(
        "SELECT store_id, role, length(content) + COALESCE(length(tool_calls), 0) AS n, length(content),"
        " COALESCE(length(tool_calls), 0) FROM messages ORDER BY n DESC LIMIT ?", (largest,))]
    directory = _directory(runtime)
    files = total = tmp = 0
    try:
        for e in os.scandir(directory):
            if e.name.endswith(".tmp"):
                tmp += 1
            elif REF_RE.fullmatch(e.name) and e.is_file(follow_symlinks=False):
                files += 1
                total += e.stat(follow_symlinks=False).st_size
        exists = True
    except OSError:
        exists = False
    missing = unreadable = 0
    for ref in refs:
        try:
            st = os.lstat(directory / ref)
        except OSError:
            missing += 1
            continue
        if not stat.S_ISREG(st.st_mode) or not os.access(directory / ref, os.R_OK):
            unreadable += 1
    return {"suspicious_inline_rows": count, "suspicious_rows": suspicious, "largest_rows": big,
            "payload_dir": {"path": str(directory), "exists": exists, "files": files, "bytes": total,
                            "temp_files": tmp, "referenced_refs": len(refs), "missing_refs": missing,
                            "unreadable_refs": unreadable}}
