"""Read a lossless-claw SQLite database, any schema version, strictly read-only.

The shape is detected from the columns present (lossless-claw never sets user_version
and appends columns in upgrade order), every post-0.1 column is optional, and rows are
streamed: one query per conversation joins messages (by ``seq``) to their
``message_parts``. Tool calls and results are rebuilt from the parts' raw blocks.
"""
from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..db import open_readonly
from .convert import (
    COMPACTION_ROW,
    build_message,
    compact_meta,
    is_empty,
    json_text,
    loads_object,
    to_epoch,
    whole_reference,
)
from .files import FileRef, LargeFiles
from .report import ImportFailure
from .rows import SKIP_EMPTY, SKIP_SYNTHETIC, SourceMessage, SourceSummary

REQUIRED = {"conversations": ("conversation_id", "session_id"),
            "messages": ("message_id", "conversation_id", "seq", "role", "content")}
MESSAGE_COLS = ("message_id", "conversation_id", "seq", "role", "content", "created_at", "transcript_entry_id",
                "openclaw_sender_metadata", "large_content")
PART_COLS = ("message_id", "ordinal", "part_type", "text_content", "is_ignored", "is_synthetic", "tool_call_id",
             "tool_name", "tool_input", "tool_output", "tool_error", "metadata")
_NM = len(MESSAGE_COLS)  # a joined row: the message columns, then the part columns
(_P_ORDINAL, _P_TYPE, _P_TEXT, _P_IGNORED, _P_SYNTHETIC, _P_CALL_ID, _P_NAME, _P_INPUT, _P_OUTPUT, _P_ERROR,
 _P_METADATA) = range(1, len(PART_COLS))
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
        self.undecodable: set[bytes] = set()  # distinct TEXT values whose bytes are no UTF-8 (read with U+FFFD)
        self.conn = self._open(busy_timeout_s)
        self.conn.text_factory = self._text
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
            conn = open_readonly(self.path, timeout_s=busy_timeout_s)
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
            conn = open_readonly(self.path, immutable=True)
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

    def _text(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:  # a damaged value: imported with U+FFFD, and counted for the report
            self.undecodable.add(raw)
            return raw.decode("utf-8", "replace")

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
        """Every message of one conversation in ``seq`` order, converted; read as plain tuples, holding
        only the rows of the message being rebuilt."""
        cur = self.conn.cursor()
        cur.row_factory = None
        cur.execute(self._messages_sql(), (conv.conversation_id,))
        convert = self._convert
        head: tuple | None = None
        parts: list[tuple] = []
        for rows in iter(lambda: cur.fetchmany(batch_size), []):
            for row in rows:
                if head is not None and row[0] == head[0]:
                    parts.append(row[_NM:])
                    continue
                if head is not None:
                    yield convert(head, parts, conv)
                head = row
                parts = [row[_NM:]] if len(row) > _NM and row[_NM] is not None else []
        if head is not None:
            yield convert(head, parts, conv)

    def _messages_sql(self) -> str:
        cols = _select(MESSAGE_COLS, self.columns["messages"], "m")
        if not self.has("message_parts", "message_id"):
            return f"SELECT {cols} FROM messages m WHERE m.conversation_id=? ORDER BY m.seq, m.message_id"
        c = self.columns["message_parts"]
        order = "p.ordinal" if "ordinal" in c else "p.rowid"
        return (f"SELECT {cols}, {_select(PART_COLS, c, 'p')} FROM messages m"
                " LEFT JOIN message_parts p ON p.message_id = m.message_id"
                f" WHERE m.conversation_id=? ORDER BY m.seq, m.message_id, {order}")

    def _convert(self, r: tuple, parts: list[tuple], conv: Conversation) -> SourceMessage:
        """One ``MESSAGE_COLS`` row and its ``PART_COLS`` rows → a converted source message."""
        mid = int(r[0])
        key = f"sqlite:message:{mid}"
        role = str(r[3] or "")
        text = str(r[4] or "")
        if role == "system" and (COMPACTION_ROW.match(text) or any(p[_P_TYPE] == "compaction" for p in parts)):
            return SourceMessage(key, mid, None, SKIP_SYNTHETIC)
        when = to_epoch(r[5]) or conv.created_at
        meta: dict[str, Any] = {}
        if parts:
            msg, meta = _from_parts(role, parts, text, mid)
        else:
            msg = {"role": role, "content": text}
            if role == "tool" or not text:
                # Old bulk bootstraps kept no parts: tool calls and call ids are gone. The row is
                # still kept (even empty) so summaries over it keep their full lineage.
                meta["lossy"] = "no message_parts"
        note = ""
        hinted = meta.pop("file_id", None)
        file_id = whole_reference(msg.get("content")) or r[8] or hinted
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
        return SourceMessage(key, mid, msg, "", _provenance(conv, r, mid, meta), note)

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


def _provenance(conv: Conversation, r: tuple, mid: int, flags: dict[str, Any]) -> str | None:
    """The ledger's provenance JSON for one message (``compact_meta`` of the same fields); the common
    row is written directly: encoding a dict per message was a measurable share of an import."""
    seq, entry, sender = r[2], r[6], r[7]
    if flags or sender or type(seq) is not int or not isinstance(entry, (str, type(None))) \
            or not isinstance(conv.session_key, (str, type(None))):
        return compact_meta({"conversation_id": conv.conversation_id, "seq": seq, "message_id": mid,
                             "transcript_entry_id": entry, "session_key": conv.session_key,
                             "sender": loads_object(sender) or None, **flags})
    return (f'{{"conversation_id":{conv.conversation_id},"seq":{seq},"message_id":{mid}'
            + (f',"transcript_entry_id":{json_text(entry)}' if entry else "")
            + (f',"session_key":{json_text(conv.session_key)}' if conv.session_key else "") + "}")


def _from_parts(role: str, parts: list[tuple], content: str, mid: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Rebuild one message from its parts (raw blocks first, columns as fallback)."""
    blocks: list[dict[str, Any]] = []
    meta: dict[str, Any] = {}
    call_id = name = None
    for p in parts:
        if p[_P_IGNORED] or p[_P_SYNTHETIC]:
            continue
        md = loads_object(p[_P_METADATA])
        raw_block = md.get("raw")
        raw: dict[str, Any] = raw_block if isinstance(raw_block, dict) else {}
        kind = p[_P_TYPE]
        if role == "assistant" and (kind == "tool" or raw.get("type") == "toolCall"):
            args = raw["arguments"] if "arguments" in raw else (raw.get("input") if "input" in raw else p[_P_INPUT])
            blocks.append({"type": "toolCall", "name": p[_P_NAME] or md.get("toolName") or raw.get("name") or "",
                           "id": p[_P_CALL_ID] or md.get("toolCallId") or raw.get("id") or raw.get("call_id")
                           or f"openclaw_call_{mid}_{p[_P_ORDINAL]}", "arguments": args})
        elif kind == "reasoning" or raw.get("type") == "thinking":
            blocks.append({"type": "thinking", "thinking": raw.get("thinking") or p[_P_TEXT] or ""})
        elif raw.get("type") == "image":
            blocks.append(raw)
        else:
            text = raw.get("text") if isinstance(raw.get("text"), str) else None
            text = text if text is not None else (p[_P_TEXT] or p[_P_OUTPUT] or p[_P_ERROR] or "")
            blocks.append({"type": "text", "text": text})
        if role == "tool":
            call_id = call_id or p[_P_CALL_ID] or md.get("toolCallId") or raw.get("tool_use_id")
            name = name or p[_P_NAME] or md.get("toolName") or raw.get("name")
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
