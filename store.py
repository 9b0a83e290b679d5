"""MessageStore: raw messages, the per-session ingest cursor and lifecycle frontier.

Owns the ``messages`` and ``sessions`` tables: idempotent ingest of host transcripts,
reads by id and by cursor-paged session order, and full-text search over raw rows.
It does not summarise, assemble prompts, or know about the host beyond message dicts.
"""
from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, cast

from . import emptyrows, ftsbound, ftsrows, ftstime, idlist, ingestrows, pgbound, pgtext, substring
from .backend import insert_returning, on_server, sane
from .dag import frontier_at
from .db import Database
from .ingest import IdentityCache, IngestCursor, is_synthetic, message_identity, plan_aligned, plan_fast, plan_joined
from .packed import pack
from .rows import (
    IngestResult,
    MessageRow,
    RowSize,
    SessionKey,
    SessionRow,
    encodable,
    escaped,
    message_row,
    message_row_from,
    normalize_message,
    row_as,
)
from .scope import EVERYTHING, Visibility

_STORED_TAIL_WINDOW = 64
_CURSOR = "SELECT ingest_len, ingest_identity FROM sessions WHERE session_id=?"  # a session's ingest cursor
_CURSORS_KEPT = 4096  # sessions whose last written cursor a store remembers (a hint; forgetting costs a read)
# The frontier never moves back: the larger of the stored value and the parameter (given twice),
# written so that SQLite and PostgreSQL read it alike (their two-argument max differ).
_LARGER = f"CASE WHEN {sane('frontier_store_id')} > ? THEN frontier_store_id ELSE ? END"  # a damaged one: 0


# How a write of a session row merges into the stored one (both stores' upserts; the row is ``sessions``).
SESSION_MERGE = (" conversation_id=CASE WHEN excluded.conversation_id!=''"
                 " THEN excluded.conversation_id ELSE sessions.conversation_id END,"
                 " platform=CASE WHEN excluded.platform!='' THEN excluded.platform ELSE sessions.platform END,"
                 " previous_session_id=COALESCE(sessions.previous_session_id, excluded.previous_session_id),"
                 " scope=CASE WHEN sessions.scope='' OR (sessions.platform='' AND excluded.platform!='')"
                 " THEN excluded.scope ELSE sessions.scope END,")


def _upsert_session(conn: sqlite3.Connection, key: SessionKey, previous_session_id: str | None) -> None:
    # The owner scope is set once, by the first write that names a platform (the host binds a session
    # before it names one); a session carried over from ``previous_session_id`` (/new, /branch) inherits it.
    now = time.time()
    conn.execute(
        "INSERT INTO sessions(session_id, conversation_id, platform, previous_session_id,"
        " created_at, updated_at, scope) VALUES (?,?,?,?,?,?,"
        " COALESCE((SELECT scope FROM sessions WHERE session_id=? AND scope!=''), ?))"
        f" ON CONFLICT(session_id) DO UPDATE SET{SESSION_MERGE} updated_at=excluded.updated_at, ended_at=NULL",
        (key.session_id, key.conversation_id or "", key.platform or "", previous_session_id, now, now,
         previous_session_id or "", key.effective_scope))


_INSERT_MESSAGE = ("session_id, conversation_id, platform, source, role, content, content_is_json, tool_calls,"
                   " tool_call_id, tool_name, extra, token_count, identity, created_at, ingested_at",
                   ",".join("?" * 15))


Transform = Callable[[dict[str, Any]], dict[str, Any]]
# (role, content, content_is_json, tool_calls, tool_call_id, tool_name, extra, token_count, identity,
#  created_at or None): one message's columns as ``MessageStore.prepare_rows`` makes them.
PreparedRow = tuple[Any, ...]


class MessageStore:
    """Raw message rows and per-session cursors in one ``Database``."""

    def __init__(self, db: Database, transform: Transform | None = None):
        self.db = db
        # Storage-boundary hook (payload guard, redaction): column values in, column values out.
        self.transform = transform
        self._cursors: dict[str, IngestCursor] = {}  # session id -> the ingest cursor this store last wrote
        self.identities = IdentityCache()  # message digests kept from one ingest to the next

    # -- sessions ----------------------------------------------------------
    def session(self, session_id: str) -> SessionRow | None:
        r = self.db.read().execute("SELECT * FROM sessions WHERE session_id=?", (session_id,)).fetchone()
        return row_as(SessionRow, r)

    def ensure_session(self, key: SessionKey, previous_session_id: str | None = None) -> SessionRow:
        with self.db.transaction() as conn:
            _upsert_session(conn, key, previous_session_id)
        row = self.session(key.session_id)
        assert row is not None
        return row

    def advance_frontier(self, session_id: str, store_id: int) -> int:
        """Move the compaction frontier forward (never back); returns the new frontier."""
        with self.db.transaction() as conn:
            r = conn.execute(f"UPDATE sessions SET frontier_store_id={_LARGER}, updated_at=?"
                             " WHERE session_id=? RETURNING frontier_store_id",
                             (int(store_id), int(store_id), time.time(), session_id)).fetchone()
        return int(r[0]) if r else 0

    def frontier_store_id(self, session_id: str) -> int:
        """The session's compaction frontier (0 for an unknown session)."""
        return frontier_at(self.db.read(), session_id)

    def mark_ended(self, session_id: str, wait_s: float | None = None) -> None:
        """Record the session's end (``wait_s``: the longest wait for the write lock, as ``Database.transaction``)."""
        now = time.time()
        with self.db.transaction(wait_s) as conn:
            conn.execute("UPDATE sessions SET ended_at=?, updated_at=? WHERE session_id=?", (now, now, session_id))

    # -- where writes land -------------------------------------------------
    local_writes = False  # True when turns write a local outbox that ships to a server (no network in a turn)

    def probe(self) -> None:
        """Open the store (raises when it is unusable): the retry of an unusable store."""
        self.db.connect()

    def settle(self, timeout_s: float = 10.0) -> None:
        """Make every write so far readable through this store (the embedded file already is)."""

    def owner(self, session_id: str, remote: bool = True) -> SessionRow | None:
        """The row naming a session's platform, conversation and scope (what the turn hooks need)."""
        return self.session(session_id)

    def record_rotate(self, session_id: str, frontier: int, backup_path: str) -> None:
        now, further = time.time(), _LARGER.replace("frontier_store_id", "rotated_frontier")  # for a damaged one
        with self.db.transaction() as conn:
            conn.execute(f"UPDATE sessions SET frontier_store_id={_LARGER}, rotated_frontier={further},"
                         " last_rotate_at=?, last_rotate_backup=?, updated_at=? WHERE session_id=?",
                         (frontier, frontier, frontier, frontier, now, backup_path, now, session_id))

    def sessions(self, limit: int = 1000, conversation_id: str = "") -> list[SessionRow]:
        where, args = (" WHERE conversation_id=?", [conversation_id]) if conversation_id else ("", [])
        sql = f"SELECT * FROM sessions{where} ORDER BY {sane('updated_at')} DESC LIMIT ?"  # text, NaN: 0, the oldest
        return [row_as(SessionRow, r) for r in self.db.read().execute(sql, [*args, limit])]

    def session_count(self, conn: sqlite3.Connection | None = None) -> int:
        return int((conn or self.db.read()).execute("SELECT COUNT(*) FROM sessions").fetchone()[0])

    def delete_empty_sessions(self, untouched_since: float, keep: Sequence[str] = (), only: str = "") -> int:
        """Delete empty session rows not created or updated after ``untouched_since``, except ``keep`` and a row
        a staying session continues (the lineage runs through it: ``emptyrows``); ``only``: that one session's
        row, if empty."""
        keep = emptyrows.holdable(keep)
        with self.db.transaction() as conn:
            server = on_server(conn)
            if server:  # lock the candidates first, then look again (``emptyrows.lock_on_server``)
                emptyrows.lock_on_server(conn, untouched_since, keep, only)
            cur = conn.execute(emptyrows.deletion(keep, only, server),
                               emptyrows.deletion_arguments(untouched_since, keep, only, server))
        return int(cur.rowcount or 0)

    # -- ingest ------------------------------------------------------------
    def ingest(self, key: SessionKey, messages: Sequence[dict[str, Any]],
               skip: Callable[[dict[str, Any]], bool] | None = None,
               identity: Callable[[dict[str, Any]], str] | None = None) -> IngestResult:
        """Store the messages of ``messages`` not stored yet, in order, exactly once.

        Safe to call with the same or a grown transcript any number of times, from any
        engine copy or process: the cursor lives in the ``sessions`` row and the whole
        decision plus insert runs in one write transaction. ``identity`` (an ``identities.memo()``)
        lets a caller that reads the same list next share its digests.
        """
        if not key.session_id:
            return IngestResult((), 0, "no session")
        identity = identity or self.identities.memo()  # one digest per message, across calls
        # The cursor this store last wrote for the session plans the work before the lock when the list
        # grew past it; else (none known, another list, nothing new) the row decides, as the lock will.
        hint = self._cursors.get(key.session_id)
        guess = plan_fast(messages, hint, identity) if hint is not None else None
        trusted = hint is not None and guess is not None and guess.start < len(messages)
        if not trusted:
            srow = self.db.read().execute(_CURSOR, (key.session_id,)).fetchone()
            seen = IngestCursor.read(*srow) if srow is not None else IngestCursor()
            guess = plan_fast(messages, seen, identity)
            if srow is not None and guess is not None and guess.start == len(messages) == seen.length:
                self._cursors[key.session_id] = seen
                return IngestResult((), 0, "up to date")  # nothing new: no write at all
        now = time.time()
        # Storage transforms (redaction, sidecar files and their fsyncs, token counts) run before
        # the write lock: other processes queue on it, so it holds only the inserts.
        answers: dict[int, bool] = {}  # ``skip`` counts what it skips: ask it once per message
        if skip is not None:
            asked = skip

            def skip(m: dict[str, Any]) -> bool:
                if id(m) not in answers:
                    answers[id(m)] = asked(m)
                return answers[id(m)]
        prepared = {id(m): self._columns(key, m) for m in messages[guess.start:]
                    if isinstance(m, dict) and not is_synthetic(m) and not (skip is not None and skip(m))} \
            if guess is not None and guess.start >= 0 else {}
        with self.db.transaction() as conn:
            srow = conn.execute(_CURSOR, (key.session_id,)).fetchone()
            if srow is None:
                _upsert_session(conn, key, None)
            cursor = IngestCursor.read(*srow) if srow else IngestCursor()
            plan = plan_fast(messages, cursor, identity)
            if trusted and srow is not None and plan is not None and plan.start == len(messages) == cursor.length:
                self._cursors[key.session_id] = cursor  # its cursor: the next call with this list only reads
                return IngestResult((), 0, "up to date")  # another writer stored this list: what the read would say
            if plan is None:
                tail = [r[0] for r in conn.execute(
                    "SELECT identity FROM messages WHERE session_id=? ORDER BY store_id DESC LIMIT ?",
                    (key.session_id, _STORED_TAIL_WINDOW))][::-1]
                plan = plan_joined(messages, cursor, tail, identity) or plan_aligned(messages, tail, identity)
            start = max(plan.start, 0)
            ids: list[int] = []
            indexed: list[ingestrows.IndexedRow] = []  # what each new row's full-text entry holds
            skipped = 0
            for i, msg in enumerate(messages[start:], start):  # the new part only, not the whole list
                if id(msg) not in prepared and (not isinstance(msg, dict) or is_synthetic(msg)
                                                or (skip is not None and skip(msg))):
                    skipped += 1
                    continue
                ident = identity(msg)
                if plan.start < 0 and conn.execute(
                        "SELECT 1 FROM messages WHERE session_id=? AND identity=? LIMIT 1",
                        (key.session_id, ident)).fetchone():
                    continue
                ids.append(self._insert(conn, key, row := plan.parts.get(i, msg), ident, now, prepared.get(id(row)),
                                        indexed))
            ingestrows.index_new_rows(conn, ids, indexed)
            # A transcript that does not hold the newest stored message (a stale prefix shown by
            # another engine copy, a gateway /compress head) must not move the cursor back.
            moved: tuple[int, str] | None = None
            if messages and (plan.start >= 0 or ids):
                last = messages[-1]
                moved = (len(messages), identity(last) if isinstance(last, dict) else "")
            if srow is not None:  # the row's refresh and its new cursor: one statement
                ingestrows.touch_session(conn, key, now, moved)
            elif moved is not None:
                conn.execute("UPDATE sessions SET ingest_len=?, ingest_identity=?, updated_at=? WHERE session_id=?",
                             (*moved, now, key.session_id))
        if moved is not None:
            if len(self._cursors) >= _CURSORS_KEPT:
                self._cursors.clear()
            self._cursors[key.session_id] = IngestCursor(*moved)
        return IngestResult(tuple(ids), skipped, plan.reason)

    def append(self, key: SessionKey, messages: Iterable[dict[str, Any]],
               conn: sqlite3.Connection | None = None) -> list[int]:
        """Insert messages unconditionally (importers, tests); returns their store ids."""
        now = time.time()
        if conn is not None:
            return self._append(conn, key, messages, now)
        with self.db.transaction() as c:
            return self._append(c, key, messages, now)

    def _append(self, conn: sqlite3.Connection, key: SessionKey, messages: Iterable[dict[str, Any]],
                now: float) -> list[int]:
        _upsert_session(conn, key, None)
        ids = [self._insert(conn, key, m, message_identity(m), now) for m in messages]
        ingestrows.index_new_rows(conn, ids)
        return ids

    def append_bulk(self, key: SessionKey, messages: Iterable[dict[str, Any]],
                    conn: sqlite3.Connection | None = None) -> list[int]:
        """``append`` for large batches (importers): the same rows, written with one executemany."""
        rows = self.prepare_rows(key.session_id, messages)
        if conn is None:
            with self.db.transaction() as c:
                return self.insert_rows(c, key, rows)
        return self.insert_rows(conn, key, rows)

    def prepare_rows(self, session_id: str, messages: Iterable[dict[str, Any]]) -> list[PreparedRow]:
        """Column values for ``insert_rows``, storage transform applied; touches no database.

        Split from the insert so that an importer can prepare rows in another process.
        """
        key = SessionKey(session_id)
        rows = []
        for msg in messages:
            cols = self._columns(key, msg)
            if not encodable(cols):
                cols = escaped(cols)
            rows.append((cols["role"], cols["content"], cols["content_is_json"], cols["tool_calls"],
                         cols["tool_call_id"], cols["tool_name"], cols["extra"], cols["token_count"],
                         message_identity(msg), cols["created_at"]))
        return rows

    def insert_rows(self, conn: sqlite3.Connection, key: SessionKey, rows: Sequence[PreparedRow]) -> list[int]:
        """Insert ``prepare_rows`` output for ``key`` with one executemany; returns the store ids.

        Store ids are derived inside the write transaction exactly as AUTOINCREMENT would
        assign them (past both the sequence and the largest id), so ``conn`` must be in one.
        """
        if not conn.in_transaction:
            raise ValueError("insert_rows needs a connection inside a write transaction")
        _upsert_session(conn, key, None)
        if not rows:
            return []
        now = time.time()
        head = (key.session_id, key.conversation_id or "", key.platform or "", key.effective_source)
        server = on_server(conn)  # a SQLite file stores long text deflated; the server compresses its own
        values = [(*head, row[0], row[1] if server else pack(row[1]), *row[2:9], row[9] if row[9] is not None else now,
                   now) for row in rows]
        if server:
            ids = insert_returning(conn, _INSERT_MESSAGE, values)
        else:
            seq = conn.execute("SELECT seq FROM sqlite_sequence WHERE name='messages'").fetchone()
            top = conn.execute("SELECT MAX(store_id) FROM messages").fetchone()
            first = max(int(seq[0]) if seq else 0, int(top[0] or 0)) + 1
            conn.executemany(f"INSERT INTO messages(store_id, {_INSERT_MESSAGE[0]}) VALUES (?,{_INSERT_MESSAGE[1]})",
                             [(i, *v) for i, v in enumerate(values, first)])
            ids = list(range(first, first + len(rows)))
        ingestrows.index_new_rows(conn, ids)
        return ids

    def _columns(self, key: SessionKey, msg: dict[str, Any]) -> dict[str, Any]:
        cols = normalize_message(msg)
        if self.transform is not None:
            # The transform sees session_id/tool fields for ownership; it returns column values.
            cols = self.transform({**cols, "session_id": key.session_id})
        return cols

    def _insert(self, conn: sqlite3.Connection, key: SessionKey, msg: dict[str, Any], identity: str,
                now: float, cols: dict[str, Any] | None = None,
                indexed: list[ingestrows.IndexedRow] | None = None) -> int:
        """One row; with ``indexed``, appends what its full-text entry holds (the text as written)."""
        cols = cols if cols is not None else self._columns(key, msg)
        try:
            store_id = self._write_row(conn, key, cols, identity, now)
        except UnicodeEncodeError:
            cols = escaped(cols)
            store_id = self._write_row(conn, key, cols, identity, now)
        if indexed is not None:
            indexed.append((store_id, cols["content"], cols["tool_calls"]))
        return store_id

    @staticmethod
    def _write_row(conn: sqlite3.Connection, key: SessionKey, cols: dict[str, Any], identity: str,
                   now: float) -> int:
        server = on_server(conn)  # SQLite's cursor names the new rowid: RETURNING would only cost it time
        cur = conn.execute(
            f"INSERT INTO messages({_INSERT_MESSAGE[0]}) VALUES ({_INSERT_MESSAGE[1]})"
            + (" RETURNING store_id" if server else ""),
            (key.session_id, key.conversation_id or "", key.platform or "", key.effective_source,
             cols["role"], cols["content"] if server else pack(cols["content"]), cols["content_is_json"],
             cols["tool_calls"], cols["tool_call_id"], cols["tool_name"], cols["extra"], cols["token_count"], identity,
             cols["created_at"] if cols["created_at"] is not None else now, now))
        return int(cur.fetchone()[0]) if server else cast(int, cur.lastrowid)

    # -- reads -------------------------------------------------------------
    def visible_session(self, session_id: str, visible: Visibility) -> bool:
        """True when the session exists and ``visible`` may read it."""
        clause, args = visible.clause("session_id")
        sql = "SELECT 1 FROM sessions WHERE session_id=?" + (f" AND {clause}" if clause else "")
        return self.db.read().execute(sql, [session_id, *args]).fetchone() is not None

    def visible_session_ids(self, visible: Visibility) -> list[str] | None:
        """The ids of every session ``visible`` may read; None when it may read all (for vector masks)."""
        clause, args = visible.clause("session_id")
        if not clause:
            return None
        return [str(r[0]) for r in self.db.read().execute(f"SELECT session_id FROM sessions WHERE {clause}", args)]

    def get(self, store_id: int, visible: Visibility = EVERYTHING) -> MessageRow | None:
        """One message; None when unknown or outside ``visible`` (the two look the same)."""
        clause, args = visible.clause("session_id")
        r = self.db.read().execute("SELECT * FROM messages WHERE store_id=?" + (f" AND {clause}" if clause else ""),
                                   [int(store_id), *args]).fetchone()
        return None if r is None else message_row(r)

    def get_many(self, store_ids: Sequence[int], visible: Visibility = EVERYTHING) -> list[MessageRow]:
        ids = [int(i) for i in store_ids]
        if not ids:
            return []  # no read at all: a server that is down is not asked for nothing
        conn, (clause, args) = self.db.read(), visible.clause("session_id")
        out = [message_row(r) for run in idlist.chunks(conn, ids, others=len(args)) for r in conn.execute(
            f"SELECT * FROM messages WHERE store_id IN ({','.join('?' * len(run))})"
            + (f" AND {clause}" if clause else ""), [*run, *args])]
        order = {sid: n for n, sid in enumerate(ids)}
        return sorted(out, key=lambda m: order.get(m.store_id, 0))

    def page(self, session_id: str, after_store_id: int = 0, limit: int = 100,
             roles: Sequence[str] | None = None, time_from: float | None = None,
             time_to: float | None = None) -> list[MessageRow]:
        """Messages of one session in store order, strictly after ``after_store_id``."""
        sql = "SELECT * FROM messages WHERE session_id=? AND store_id>?"
        args: list[Any] = [session_id, int(after_store_id)]
        if roles:
            sql += f" AND role IN ({','.join('?' * len(roles))})"
            args += list(roles)
        bounds, bound_args = ftstime.time_bounds("created_at", time_from, time_to)
        sql += "".join(f" AND {b}" for b in bounds) + " ORDER BY store_id LIMIT ?"
        return [message_row(r) for r in self.db.read().execute(sql, [*args, *bound_args, int(limit)])]

    def backlog(self, session_id: str, after_store_id: int) -> list[MessageRow]:
        """Every raw message of the session past the frontier (the live, uncompacted part)."""
        rows = self.db.read().execute(
            "SELECT * FROM messages WHERE session_id=? AND store_id>? ORDER BY store_id",
            (session_id, int(after_store_id)))
        return [message_row(r) for r in rows]

    def tail(self, session_id: str, n: int, after_store_id: int = 0) -> list[MessageRow]:
        """The newest ``n`` messages of the session past ``after_store_id``, oldest first."""
        rows = self.db.read().execute(
            "SELECT * FROM messages WHERE session_id=? AND store_id>? ORDER BY store_id DESC LIMIT ?",
            (session_id, int(after_store_id), max(0, int(n))))
        return [message_row(r) for r in rows][::-1]

    def count_after(self, session_id: str, after_store_id: int) -> int:
        r = self.db.read().execute("SELECT COUNT(*) FROM messages WHERE session_id=? AND store_id>?",
                                   (session_id, int(after_store_id))).fetchone()
        return int(r[0])

    def last_store_id(self, session_id: str) -> int:
        r = self.db.read().execute("SELECT MAX(store_id) FROM messages WHERE session_id=?", (session_id,)).fetchone()
        return int(r[0] or 0)

    def last_reply_store_id(self, session_id: str, window: int = 1000) -> int:
        """The session's last finished assistant reply (one without tool calls) among its newest
        ``window`` rows; the rows after it are the turn being answered. Without one, the row before
        that window (0: the whole session is the turn)."""
        newest = ("(SELECT store_id, role, tool_calls FROM messages WHERE session_id=? ORDER BY store_id DESC"
                  " LIMIT ?) AS newest")  # read newest first, so the first reply found ends the walk
        conn, args = self.db.read(), (session_id, int(window))
        r = conn.execute(f"SELECT store_id FROM {newest} WHERE role='assistant' AND tool_calls IS NULL LIMIT 1",
                         args).fetchone() or conn.execute(f"SELECT MIN(store_id) - 1 FROM {newest}", args).fetchone()
        return int(r[0] or 0)

    def count(self, session_id: str | None = None) -> int:
        where, args = ("", ()) if session_id is None else (" WHERE session_id=?", (session_id,))
        return int(self.db.read().execute(f"SELECT COUNT(*) FROM messages{where}", args).fetchone()[0])

    def stats(self, session_id: str) -> dict[str, int]:
        r = self.db.read().execute(
            f"SELECT COUNT(*), COALESCE(SUM({sane('token_count')}),0), COALESCE(MIN(store_id),0), MAX(store_id)"
            " FROM messages WHERE session_id=?", (session_id,)).fetchone()
        return {"messages": int(r[0]), "tokens": int(r[1]), "min_store_id": int(r[2]), "max_store_id": int(r[3] or 0)}

    # -- search ------------------------------------------------------------
    def search(self, match: str, session_ids: Sequence[str] | None = None, role: str | None = None,
               source: str | None = None, time_from: float | None = None, time_to: float | None = None,
               limit: int = 10, *, snippets: bool = True, store_ids: Sequence[int] | None = None,
               max_candidates: int | None = None, literal: str | None = None,
               visible: Visibility = EVERYTHING, common_candidates: int | None = None,
               ) -> list[tuple[MessageRow, float, str]]:
        """BM25-ranked raw hits ``(row, rank, snippet)``; ``match`` comes from ``search.build_match``.

        Session-scoped searches restrict the full-text scan to the sessions' store-id range,
        so their cost follows the session, not the archive. ``max_candidates`` bounds an
        archive search to the newest N (at least 1) matching rows before ranking; ``store_ids`` limits
        the search to given rows (snippets for an already ranked page); ``snippets=False``
        skips snippet building for candidate pools. ``literal`` replaces the full-text match
        with a case-insensitive substring scan, newest first (for text the tokenizer cannot
        split, such as CJK runs or emoji), bounded to ``max_candidates`` newest rows.
        ``visible`` keeps the sessions the caller may read, inside the candidate query (and
        the ``max_candidates`` bound counts only those), so other scopes never crowd it out.
        ``common_candidates`` narrows that bound when every phrase of the query is common
        (``ftsbound.window``; on a server ``pgbound.newest``, without a time filter).
        """
        for name, bound in (("max_candidates", max_candidates), ("common_candidates", common_candidates)):
            if bound is not None and int(bound) < 1:  # the stores read a window of none differently: no meaning
                raise ValueError(f"search {name} must be at least 1 (None: no bound), not {bound!r}")
        conn = self.db.read()
        if session_ids is not None and not session_ids:
            return []
        where, args = _row_filters(conn, session_ids, role, source, time_from, time_to)
        scoped, scope_args = visible.clause("m.session_id")
        if scoped:
            where.append(scoped)
            args += scope_args
        if literal:
            return [(message_row_from({k: r[k] for k in r.keys()}), 0.0, snip)
                    for r, snip in substring.scan(conn, literal, where, args, limit, max_candidates)]
        if not match:
            return []
        if on_server(conn):  # BM25 in SQL; newest first when every word is common (a time filter keeps BM25)
            return pgbound.search(conn, match, where, args, store_ids, int(limit), max_candidates, snippets,
                                  common_candidates if time_from is None and time_to is None else None, session_ids)
        if store_ids is not None:  # known rows (a page's snippets, a summary's sources) are matched on their own
            return [(message_row_from({k: r[k] for k in r.keys() if not k.startswith("_")}), 0.0, snip)
                    for r, snip in ftsrows.matching(conn, match, store_ids, where, args, snippets)][:int(limit)]
        fts_where = ["messages_fts MATCH ?"]
        fts_args: list[Any] = [match]
        ids: tuple[int, int] | None = None  # a store-id range holding every row the search may return
        if session_ids is not None:
            held, held_args = idlist.among(conn, "session_id", session_ids)
            # Two scalar subqueries: each is one seek on messages_session, not a scan of the session.
            bounds = f"FROM messages WHERE {held}"
            lo, hi = conn.execute(f"SELECT (SELECT MIN(store_id) {bounds}), (SELECT MAX(store_id) {bounds})",
                                  [*held_args, *held_args]).fetchone()
            if lo is None:
                return []
            ids = (int(lo), int(hi))
        if time_from is not None or time_to is not None:  # exact, from the time index: no row of the range is left out
            ids = ftstime.time_ids(conn, time_from, time_to, ids)
            if ids is None:
                return []
        if ids is not None:
            fts_where.append("rowid BETWEEN ? AND ?")
            fts_args += list(ids)
        narrow, narrow_args = fts_where[1:], fts_args[1:]  # the sessions' and times' id range, without the bound below
        # the window counts only rows this search may return (other chats' rows share a session's id
        # range; a time, role or source filter drops newer rows)
        win = ftsbound.NO_WINDOW if max_candidates is None else ftsbound.window(
            conn, fts_where, fts_args, " AND ".join(where), args, int(max_candidates), common_candidates,
            session_ids or (), ids, by_session=not (role or source) and time_from is None and time_to is None)
        if win.low is not None:  # the newest N matches (in the session's range, if any) that are visible
            fts_where.append("rowid >= ?")
            fts_args.append(win.low)
        # bm25() ranks the window, unless its words are all common (then newest first). Snippets come after,
        # for the rows returned only.
        rows: list[Any] = ftsbound.newest(conn, fts_where, fts_args, where, args, int(limit)) if win.common else \
            ftsbound.ranked(conn, fts_where, fts_args, where, args, int(limit), session_ids or (), ids)
        if win.low is not None and win.rare:
            older = ftsbound.older_hits(conn, match, win.rare, win.low, narrow, narrow_args, where, args, int(limit))
            rows = sorted([*rows, *older], key=lambda r: (float(r["_rank"]), int(r["store_id"])))[:int(limit)] \
                if older else rows
        if snippets and rows:  # built for the returned rows only (``ftsrows.matching``)
            found = {row.store_id: snip for row, _, snip in
                     self.search(match, store_ids=[int(r["store_id"]) for r in rows], limit=len(rows))}
            rows = [{**{k: r[k] for k in r.keys()}, "_snippet": found.get(int(r["store_id"]), r["_snippet"])}
                    for r in rows]
        # m.* come first, then _rank and _snippet: values by position, not a name lookup per column
        names = [k for k in rows[0].keys() if not k.startswith("_")] if rows else []
        return [(message_row_from(dict(zip(names, tuple(r.values() if isinstance(r, dict) else r), strict=False))),
                 float(r["_rank"]), str(r["_snippet"] or "")) for r in rows]

    # -- payload upkeep ----------------------------------------------------
    def rows_maybe_holding_payloads(self, min_chars: int) -> Iterable[MessageRow]:
        """Rows with a ``;base64,`` marker or a column of at least ``min_chars`` (guard candidates; lengths first)."""
        rows = self.db.read().execute(
            "SELECT * FROM messages WHERE length(trove_text(content)) >= ? OR length(tool_calls) >= ?"
            " OR trove_text(content) LIKE '%;base64,%' OR tool_calls LIKE '%;base64,%'", (int(min_chars),) * 2)
        return (message_row(r) for r in rows)

    def contents_with_payload_refs(self) -> Iterable[str]:
        """The content of every row holding a ``[trove:… ref=trove-…]`` payload placeholder."""
        rows = self.db.read().execute("SELECT trove_text(content) FROM messages"
                                      " WHERE trove_text(content) LIKE '%[trove:%ref=trove-%'")
        return (str(r[0]) for r in rows)

    def largest_rows(self, limit: int) -> list[RowSize]:
        """The ``limit`` rows with the most content plus tool-call characters, largest first."""
        rows = self.db.read().execute(
            "SELECT store_id, role, c + t AS n, c, t FROM (SELECT store_id, role, length(trove_text(content)) AS c,"
            " COALESCE(length(tool_calls), 0) AS t FROM messages) AS sizes ORDER BY n DESC LIMIT ?", (int(limit),))
        return [RowSize(int(r[0]), str(r[1]), int(r[2]), int(r[3]), int(r[4])) for r in rows]

    def replace_contents(self, rewrites: Sequence[tuple[int, str, str]]) -> int:
        """Set ``(store_id, old, new)`` content on unpinned rows still holding ``old``; returns rows changed."""
        with self.db.transaction() as conn:
            done = [int(store_id) for store_id, old, new in rewrites  # compare-and-set: a changed row stays
                    if conn.execute("UPDATE messages SET content=?, content_is_json=0 WHERE store_id=?"
                                    " AND trove_text(content)=? AND pinned=0",
                                    (new if on_server(conn) else pack(new), int(store_id), old)).rowcount]
            if done and on_server(conn):  # SQLite's trigger keeps FTS5 current; the server's docs follow here
                pgtext.reindex_messages(conn, done)
        return len(done)


def count_empty_sessions(conn: sqlite3.Connection) -> int:
    """Session rows with no messages, no summaries and no carried-in summaries."""
    return int(conn.execute(f"SELECT COUNT(*) FROM sessions s WHERE {emptyrows.EMPTY_SESSION}").fetchone()[0])


def _row_filters(conn: Any, session_ids: Sequence[str] | None, role: str | None, source: str | None,
                 time_from: float | None, time_to: float | None) -> tuple[list[str], list[Any]]:
    """WHERE clauses (on alias ``m``) for the raw-message search filters."""
    where: list[str] = []
    args: list[Any] = []
    if session_ids is not None:  # any number of sessions, within the connection's cap on parameters
        held, args = idlist.among(conn, "m.session_id", session_ids)
        where.append(held)
    if role:
        where.append("m.role=?")
        args.append(role)
    if source:  # blank legacy sources count as "unknown"
        where.append("(m.source=? OR (?='unknown' AND m.source=''))")
        args += [source, source]
    bounds, bound_args = ftstime.time_bounds("m.created_at", time_from, time_to)
    return where + bounds, args + bound_args
