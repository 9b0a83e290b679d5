"""Read OpenClaw JSONL session exports (pi session format) into source messages.

A file is a header line plus entries linked by ``id``/``parentId``; edits and branches
leave abandoned entries behind, so only the chain from the last entry back to the root
is imported when every entry carries an id (file order otherwise). Bad lines become
counted ``invalid`` rows with a ``path:line`` note; metadata-only entries are ``empty``.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .convert import build_message, compact_meta, is_empty, to_epoch
from .rows import SKIP_BRANCH, SKIP_EMPTY, SKIP_INVALID, SourceMessage, Unit

MESSAGE_ROLES = {"user", "assistant", "toolResult", "tool", "system"}


def expand_sources(files: Iterable[str], dirs: Iterable[str]) -> tuple[list[Path], list[str]]:
    """Resolved, de-duplicated JSONL paths (dirs recursive and sorted) plus problems found."""
    out: list[Path] = []
    problems: list[str] = []
    for f in files:
        p = Path(f).expanduser().resolve()
        (out.append(p) if p.is_file() else problems.append(f"JSONL file not found: {p}"))
    for d in dirs:
        root = Path(d).expanduser().resolve()
        if not root.is_dir():
            problems.append(f"JSONL directory not found: {root}")
            continue
        found = sorted(p for p in root.rglob("*.jsonl") if p.is_file())
        if not found:
            problems.append(f"no *.jsonl files under {root}")
        out.extend(found)
    return list(dict.fromkeys(out)), problems  # first occurrence of each path, in order


def _entry_id(obj: dict[str, Any], key: str = "id", alias: str = "uuid") -> str | None:
    """An entry's id (or, with ``parentId``/``parentUuid``, its parent's) when it is a string or integer."""
    v = obj.get(key, obj.get(alias))
    return _ident(str(v)) if isinstance(v, (str, int)) and not isinstance(v, bool) else None


def _ident(text: str) -> str:
    """An id as text the store can key on: a lone surrogate (a JSON ``\\ud800`` escape, a file name
    that is no UTF-8) is written as its escape, so re-runs match; text that is valid stays byte for byte
    as it was (an id that already spells such an escape, ``\\ud800`` itself, keys the same as the surrogate)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def active_branch(entries: list[tuple[int, dict[str, Any]]]) -> set[int] | None:
    """Line numbers on the chain from the last entry to the root; None = no tree (keep all)."""
    ids = [_entry_id(obj) for _, obj in entries]
    if not entries or any(i is None for i in ids):
        return None
    by_id = {i: n for i, (n, _) in zip(ids, entries, strict=True)}
    objs = {n: obj for n, obj in entries}
    keep: set[int] = set()
    line: int | None = entries[-1][0]
    while line is not None and line not in keep:
        keep.add(line)
        parent = _entry_id(objs[line], "parentId", "parentUuid")
        line = by_id.get(parent) if parent is not None else None
    return keep


def read_file(path: Path) -> Unit:
    """One JSONL file → a unit of source messages (whole file is parsed: branch selection needs it)."""
    session = ""
    header_ts: float | None = None
    entries: list[tuple[int, dict[str, Any]]] = []
    bad: list[tuple[int, SourceMessage]] = []
    with path.open("r", encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as exc:  # a JSONDecodeError, or an integer too long to convert
                reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
                bad.append((n, _invalid(path, n, f"not JSON ({reason})")))
                continue
            if not isinstance(obj, dict):
                bad.append((n, _invalid(path, n, "not a JSON object")))
                continue
            if obj.get("type") == "session" and not session:
                session = str(obj.get("id") or "")
                header_ts = to_epoch(obj.get("timestamp"))
                continue
            if "type" in obj and not isinstance(obj["type"], str):
                bad.append((n, _invalid(path, n, "non-string type")))
                continue
            entries.append((n, obj))
    session = _ident(session or _row_session(entries) or path.stem)
    keep = active_branch(entries)
    ordered: list[tuple[int, SourceMessage]] = list(bad)
    seen: set[str] = set()
    for n, obj in entries:
        eid = _entry_id(obj)
        key = f"jsonl:{session}:{eid}" if eid else f"jsonl:{session}:line:{n}"
        if keep is not None and n not in keep:
            ordered.append((n, SourceMessage(key, eid or n, None, SKIP_BRANCH)))
            continue
        if key in seen:
            ordered.append((n, _invalid(path, n, f"duplicate entry id {eid}")))
            continue
        seen.add(key)
        ordered.append((n, _convert(path, n, obj, key, eid, header_ts)))
    messages = [m for _, m in sorted(ordered, key=lambda item: item[0])]
    return Unit(label=str(path), session=session, messages=lambda: messages)


def _row_session(entries: list[tuple[int, dict[str, Any]]]) -> str:
    for _, obj in entries[:50]:
        message = obj.get("message")
        for holder in (obj, message if isinstance(message, dict) else {}):
            for k in ("session_id", "sessionId", "session_key", "sessionKey"):
                if isinstance(holder.get(k), str) and holder[k]:
                    return holder[k]
    return ""


def _invalid(path: Path, line: int, why: str) -> SourceMessage:
    return SourceMessage(f"jsonl-invalid:{path}:{line}", line, None, SKIP_INVALID, note=f"{path}:{line}: {why}")


def _convert(path: Path, n: int, obj: dict[str, Any], key: str, eid: str | None,
             header_ts: float | None) -> SourceMessage:
    kind = obj.get("type")
    if kind == "message" or (kind is None and isinstance(obj.get("message"), dict)):
        m = obj.get("message")
    elif kind is None and "role" in obj:
        m = obj
    else:
        return SourceMessage(key, eid or n, None, SKIP_EMPTY)  # model_change, custom_message, labels, ...
    if not isinstance(m, dict) or not isinstance(m.get("role"), str):
        return _invalid(path, n, "message without a role")
    role = m["role"]
    if role not in MESSAGE_ROLES:
        return SourceMessage(key, eid or n, None, SKIP_EMPTY)  # bashExecution, branchSummary, ...
    content = m.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if blocks is not None and not isinstance(blocks, list):
        return _invalid(path, n, "content is neither text nor a list of blocks")
    when = to_epoch(m.get("timestamp")) or to_epoch(obj.get("timestamp")) or header_ts
    msg = build_message(role, blocks or [], call_id_prefix=f"openclaw_call_{eid or n}",
                        tool_call_id=m.get("toolCallId") or m.get("tool_call_id"),
                        tool_name=m.get("toolName") or m.get("name"), timestamp=when)
    if role == "assistant" and isinstance(m.get("tool_calls"), list) and "tool_calls" not in msg:
        msg["tool_calls"] = m["tool_calls"]  # already OpenAI-shaped
    if is_empty(msg):
        return SourceMessage(key, eid or n, None, SKIP_EMPTY)
    sender = m.get("__openclaw") if isinstance(m.get("__openclaw"), dict) else None
    meta = compact_meta({"file": _ident(path.name), "line": n, "entry_id": eid, "sender": sender,
                         "is_error": m.get("isError") is True or None, "model": m.get("model"),
                         "stop_reason": m.get("stopReason")})
    return SourceMessage(key, eid or n, msg, "", meta)
