"""Read a lossless-claw SQLite database, any schema version, strictly read-only.

The shape is detected from the columns present (lossless-claw never sets user_version
and appends columns in upgrade order), every post-0.1 column is optional, and rows are
streamed in batches: messages per conversation by ``seq`` with their ``message_parts``
fetched per batch. Tool calls and results are rebuilt from the parts' raw blocks.
"""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from .convert import (COMPACTION_ROW, build_message, compact_meta, is_empty, loads_object, to_epoch,
                      whole_reference)
from .files import FileRef, LargeFiles
from .report import ImportFailure
from .rows import SKIP_EMPTY, SKIP_SYNTHETIC, SourceMessage, SourceSummary

REQUIRED = {"conversations": ("conversation_id", "session_id"),
            "messages": ("message_id", "conversation_id", "seq", "role", "content")}
MESSAGE_COLS = ("message_id", "conversation_id", "seq", "role", "content", "created_at", "transcript_entry_id",
                "openclaw_sender_metadata", "large_content")
PART_COLS = ("message_id", "ordinal", "part_type", "text_content", "is_ignored", "is_synthetic", "tool_call_id",
             "tool_name", "tool_input", "tool_output", "tool_error", "metadata")
SQLITE_MAGIC = b"SQLite format 3\x00"


@dataclass(frozen=True)
class Conversation:
    conversation_id: int
    session_id: str
    session_key: str | None
    created_at: float | None
    archived: bool


def _select(cols: Sequence[str], present: frozenset[str], alias: str = "") -> str:
    pre = f"{alias}." if alias else ""
    return ", ".join(f"{pre}{c}" if c in present else f"NULL AS {c}" for c in cols)


class ClawSource:
    """One source database opened with a ``mode=ro`` URI; never written."""

    def __init__(self, path: str, remaps: Sequence[tuple[str, str]] = (), busy_timeout_s: float = 2.0):
        self.path = Path(path).expanduser().resolve()
        self.notes: list[str] = []
        self.conn = self._open(busy_timeout_s)
        self.columns = self._probe()
        self.files = LargeFiles(self._file_refs(), remaps, [self.path.parent])

    # -- opening -----------------------------------------------------------
    def _open(self, busy_timeout_s: float) -> sqlite3.Connection:
        if not self.path.exists():
            raise ImportFailure(f"source database not found: {self.path}")
        if not self.path.is_file():
            raise ImportFailure(f"source database is not a file: {self.path}")
        with self.path.open("rb") as fh:
            head = fh.read(16)
        if head != SQLITE_MAGIC:
            raise ImportFailure(f"source is not a SQLite database: {self.path}")
        try:
            conn = sqlite3.connect(f"{self.path.as_uri()}?mode=ro", uri=True, timeout=busy_timeout_s,
                                   check_same_thread=False)
            conn.row_factory = sqlite3.Row
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise ImportFailure(
                    f"source database is locked by another process (is OpenClaw running?): {self.path}; "
                    "stop OpenClaw or import from a copy of the file") from exc
            if "unable to open" not in str(exc):
                raise ImportFailure(f"cannot read source database {self.path}: {exc}") from exc
        # A WAL database in a read-only directory cannot create its -shm file: read it as immutable.
        try:
            conn = sqlite3.connect(f"{self.path.as_uri()}?immutable=1", uri=True, check_same_thread=False)
            conn.row_factory = sqlite3.Row
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.DatabaseError as exc:
            raise ImportFailure(f"cannot read source database {self.path}: {exc}") from exc
        self.notes.append(f"{self.path}: opened as immutable (read-only directory); make sure nothing writes it")
        return conn

    def _probe(self) -> dict[str, frozenset[str]]:
        try:
            tables = [r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
            cols = {t: frozenset(r[1] for r in self.conn.execute(f"PRAGMA table_info('{t}')")) for t in tables}
        except sqlite3.DatabaseError as exc:
            raise ImportFailure(f"cannot read source database {self.path}: {exc}") from exc
        missing = [f"{t}.{c}" for t, need in REQUIRED.items() for c in need if c not in cols.get(t, ())]
        if missing:
            raise ImportFailure(f"{self.path} does not look like a lossless-claw database (missing "
                                f"{', '.join(missing)}); tables present: {', '.join(sorted(cols)) or 'none'}")
        return cols

    def has(self, table: str, column: str | None = None) -> bool:
        cols = self.columns.get(table)
        return cols is not None and (column is None or column in cols)

    def close(self) -> None:
        self.conn.close()

    def _file_refs(self) -> dict[str, FileRef]:
        if not self.has("large_files", "storage_uri"):
            return {}
        c = self.columns["large_files"]
        rows = self.conn.execute(f"SELECT {_select(('file_id', 'conversation_id', 'storage_uri', 'file_name'), c)}"
                                 " FROM large_files")
        return {str(r["file_id"]): FileRef(str(r["file_id"]), int(r["conversation_id"] or 0),
                                           str(r["storage_uri"] or ""), str(r["file_name"] or ""))
                for r in rows if r["file_id"]}

    # -- conversations -----------------------------------------------------
    def conversations(self) -> list[Conversation]:
        c = self.columns["conversations"]
        sql = (f"SELECT {_select(('conversation_id', 'session_id', 'session_key', 'created_at', 'active'), c)}"
               " FROM conversations ORDER BY conversation_id")
        return [Conversation(int(r["conversation_id"]), str(r["session_id"] or ""), r["session_key"],
                             to_epoch(r["created_at"]), r["active"] is not None and int(r["active"]) == 0)
                for r in self.conn.execute(sql)]

    # -- messages ----------------------------------------------------------
    def messages(self, conv: Conversation, batch_size: int = 500) -> Iterator[SourceMessage]:
        """Every message of one conversation in ``seq`` order, converted, streamed in batches."""
        sql = (f"SELECT {_select(MESSAGE_COLS, self.columns['messages'])} FROM messages"
               " WHERE conversation_id=? ORDER BY seq, message_id")
        cur = self.conn.execute(sql, (conv.conversation_id,))
        while True:
            rows = cur.fetchmany(batch_size)
            if not rows:
                return
            parts = self._parts([int(r["message_id"]) for r in rows])
            for r in rows:
                yield self._convert(r, parts.get(int(r["message_id"]), []), conv)

    def _parts(self, message_ids: list[int]) -> dict[int, list[sqlite3.Row]]:
        if not self.has("message_parts", "message_id") or not message_ids:
            return {}
        c = self.columns["message_parts"]
        order = "ordinal" if "ordinal" in c else "rowid"
        sql = (f"SELECT {_select(PART_COLS, c)} FROM message_parts WHERE message_id IN"
               f" ({','.join('?' * len(message_ids))}) ORDER BY message_id, {order}")
        out: dict[int, list[sqlite3.Row]] = {}
        for p in self.conn.execute(sql, message_ids):
            out.setdefault(int(p["message_id"]), []).append(p)
        return out

    def _convert(self, r: sqlite3.Row, parts: list[sqlite3.Row], conv: Conversation) -> SourceMessage:
        mid = int(r["message_id"])
        key = f"sqlite:message:{mid}"
        role = str(r["role"] or "")
        text = str(r["content"] or "")
        if role == "system" and (COMPACTION_ROW.match(text) or any(p["part_type"] == "compaction" for p in parts)):
            return SourceMessage(key, mid, None, SKIP_SYNTHETIC)
        when = to_epoch(r["created_at"]) or conv.created_at
        meta: dict[str, Any] = {"conversation_id": conv.conversation_id, "seq": r["seq"], "message_id": mid,
                                "transcript_entry_id": r["transcript_entry_id"], "session_key": conv.session_key,
                                "sender": loads_object(r["openclaw_sender_metadata"]) or None}
        if parts:
            msg, extra = _from_parts(role, parts, text, mid)
            meta.update(extra)
        else:
            msg = {"role": role, "content": text}
            if role == "tool" or not text:
                # Old bulk bootstraps kept no parts: tool calls and call ids are gone. The row is
                # still kept (even empty) so summaries over it keep their full lineage.
                meta["lossy"] = "no message_parts"
        note = ""
        hinted = meta.pop("file_id", None)
        file_id = whole_reference(msg.get("content")) or r["large_content"] or hinted
        if file_id:
            body, why = self.files.read(str(file_id))
            if body is not None:
                msg["content"] = body
                meta["externalized_file"] = file_id
            else:
                note = f"conversation {conv.conversation_id} message {mid}: kept the reference text; {why}"
                meta["unresolved_file"] = file_id
        if when is not None:
            msg["timestamp"] = when
        if parts and is_empty(msg):
            return SourceMessage(key, mid, None, SKIP_EMPTY, note=note)
        return SourceMessage(key, mid, msg, "", compact_meta(meta), note)

    # -- summaries ---------------------------------------------------------
    def summaries(self, conv: Conversation) -> list[SourceSummary]:
        """The conversation's DAG nodes, shallowest first, with ordered lineage.

        ``summary_parents`` is named backwards in lossless-claw: ``summary_id`` is the
        condensed node and ``parent_summary_id`` one of the nodes it was built from.
        """
        if not self.has("summaries", "summary_id"):
            return []
        c = self.columns["summaries"]
        text_col = next((x for x in ("content", "summary", "summary_text", "text") if x in c), None)
        if text_col is None:
            self.notes.append("summaries table has no content column; summaries not imported")
            return []
        cols = _select(("summary_id", "kind", "depth", "earliest_at", "latest_at", "model", "created_at"), c)
        order = "depth, created_at, rowid" if "depth" in c else "rowid"
        rows = list(self.conn.execute(f"SELECT {cols}, {text_col} AS body FROM summaries WHERE conversation_id=?"
                                      f" ORDER BY {order}", (conv.conversation_id,)))
        leaves = self._edges("summary_messages", "message_id", conv.conversation_id)
        children = self._edges("summary_parents", "parent_summary_id", conv.conversation_id)
        out = []
        for r in rows:
            sid = str(r["summary_id"])
            model = str(r["model"] or "")
            out.append(SourceSummary(
                key=f"sqlite:summary:{sid}", summary_id=sid, depth=int(r["depth"] or 0), content=str(r["body"] or ""),
                earliest_at=to_epoch(r["earliest_at"]), latest_at=to_epoch(r["latest_at"]),
                model="" if model == "unknown" else model,
                message_ids=tuple(int(x) for x in leaves.get(sid, ())),
                child_ids=tuple(str(x) for x in children.get(sid, ()))))
        return out

    def _edges(self, table: str, column: str, conversation_id: int) -> dict[str, list[Any]]:
        if not self.has(table, column):
            return {}
        order = "e.ordinal" if "ordinal" in self.columns[table] else "e.rowid"
        sql = (f"SELECT e.summary_id, e.{column} FROM {table} e JOIN summaries s ON s.summary_id = e.summary_id"
               f" WHERE s.conversation_id=? ORDER BY e.summary_id, {order}")
        out: dict[str, list[Any]] = {}
        for sid, target in self.conn.execute(sql, (conversation_id,)):
            out.setdefault(str(sid), []).append(target)
        return out


def _from_parts(role: str, parts: list[sqlite3.Row], content: str, mid: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Rebuild one message from its parts (raw blocks first, columns as fallback)."""
    blocks: list[dict[str, Any]] = []
    meta: dict[str, Any] = {}
    call_id = name = None
    for p in parts:
        if p["is_ignored"] or p["is_synthetic"]:
            continue
        md = loads_object(p["metadata"])
        raw = md.get("raw") if isinstance(md.get("raw"), dict) else {}
        kind = p["part_type"]
        if role == "assistant" and (kind == "tool" or raw.get("type") == "toolCall"):
            args = raw["arguments"] if "arguments" in raw else (raw.get("input") if "input" in raw else p["tool_input"])
            blocks.append({"type": "toolCall", "name": p["tool_name"] or md.get("toolName") or raw.get("name") or "",
                           "id": p["tool_call_id"] or md.get("toolCallId") or raw.get("id") or raw.get("call_id")
                           or f"openclaw_call_{mid}_{p['ordinal']}", "arguments": args})
        elif kind == "reasoning" or raw.get("type") == "thinking":
            blocks.append({"type": "thinking", "thinking": raw.get("thinking") or p["text_content"] or ""})
        elif raw.get("type") == "image":
            blocks.append(raw)
        else:
            text = raw.get("text") if isinstance(raw.get("text"), str) else None
            text = text if text is not None else (p["text_content"] or p["tool_output"] or p["tool_error"] or "")
            blocks.append({"type": "text", "text": text})
        if role == "tool":
            call_id = call_id or p["tool_call_id"] or md.get("toolCallId") or raw.get("tool_use_id")
            name = name or p["tool_name"] or md.get("toolName") or raw.get("name")
            if md.get("isError") is True:
                meta["is_error"] = True
        if md.get("modelId"):
            meta["model"] = md["modelId"]
        if md.get("externalizedFileId"):
            meta["file_id"] = md["externalizedFileId"]
    msg = build_message(role, blocks, call_id_prefix=f"openclaw_call_{mid}", tool_call_id=call_id, tool_name=name)
    if not msg.get("content") and content and not any(b["type"] == "text" for b in blocks):
        msg["content"] = content  # parts carried no text (odd shapes): keep the extracted text
    return msg, meta
