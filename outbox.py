"""The PostgreSQL store's local outbox: a turn writes to a SQLite file beside it, never to the network.

Every ingest lands in ``trove-outbox.db`` (an ordinary trove file) and a background thread ships new
rows to the server, oldest first, BATCH_ROWS a statement, idempotently (the server keeps each
message's origin and local id). While the server is away the rows wait on disk. ``ShippingStore`` is
the ``MessageStore`` the runtime hands out: writes go to the outbox, reads to the server.
"""
from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, Protocol

from . import leases, outboxaside, pgtext
from .backend import storage_error
from .background import PassScheduler
from .config import OUTBOX_FILE
from .db import Database, open_readonly, write_meta
from .rows import IngestResult, SessionKey, SessionRow
from .store import SESSION_MERGE, MessageStore

log = logging.getLogger("hermes_trove.outbox")

BATCH_ROWS = 500            # rows read from the outbox per shipping step
RETRY_FIRST_S = 1.0         # while rows wait and the server is down, a pass retries after this...
RETRY_MAX_S = 30.0          # ...doubling up to this
DOWN_GRACE_S = 60.0         # a shipping failure younger than this makes ``settle`` fail at once
BUSY_WAIT_S = 5.0           # a shipment under way is waited for at least this long before the server counts as stalled
STATS_EVERY_S = 30.0        # after shipping, the server's BM25 statistics are brought up to date this often
SPOOL_BYTES = 16 << 20      # payload bytes shipped per statement (at least one payload)
_SHIPPERS = PassScheduler("trove-outbox")
_COLUMNS = ("session_id, conversation_id, platform, source, role, content, content_is_json, tool_calls,"
            " tool_call_id, tool_name, extra, token_count, identity, pinned, created_at, ingested_at")
# what ``batch`` reads: the same columns, a packed text read back as text (``packed.py``)
_SHIPPED_COLUMNS = _COLUMNS.replace(" content,", " trove_text(content),", 1)
_SESSION_COLUMNS = ("session_id, conversation_id, platform, previous_session_id, created_at, updated_at,"
                    " ended_at, scope")
PAYLOAD_COLUMNS = "ref, session_id, kind, mime, original_chars, original_bytes, sha256, meta, data, created_at"


class PayloadSpool(Protocol):
    """Payloads the storage guard moved out of rows, waiting on this machine (files: the payloads
    family owns their format) to ship before any message that names them."""

    def pending(self, max_bytes: int) -> list[tuple[Any, ...]]:
        """The oldest waiting payloads as ``PAYLOAD_COLUMNS`` values, up to ``max_bytes`` (at least one)."""

    def shipped(self, refs: Sequence[str]) -> None:
        """Forget payloads the server now holds."""


class ServerUnreachableError(ConnectionError):
    """The PostgreSQL server did not take the outbox's rows (the reason is the message)."""


def outbox_path(database_dir: Path) -> Path:
    return database_dir / OUTBOX_FILE


def read_cursor(conn: sqlite3.Connection) -> tuple[int, float]:
    """An outbox file's shipping cursor: (the last local id shipped, the newest session change shipped)."""
    got = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('outbox_cursor', 'outbox_sessions')"))
    return int(got.get("outbox_cursor", 0)), float(got.get("outbox_sessions", 0.0))


def unshipped(path: Path) -> tuple[int, float | None, int]:
    """Rows of the outbox file at ``path`` not on any server (past its shipping cursor, or set aside behind
    it), when the oldest was written, and how many of them are set aside; read only, (0, None, 0) with no
    such file. On a SQLite store: what a PostgreSQL setting since removed left beside it, which no process
    ships or reads any more."""
    if not path.is_file():
        return 0, None, 0
    with contextlib.closing(open_readonly(path)) as conn:
        count, oldest = conn.execute("SELECT COUNT(*), MIN(ingested_at) FROM messages WHERE store_id > ?",
                                     (read_cursor(conn)[0],)).fetchone()
        aside, aside_oldest = outboxaside.marked_messages(conn)
    times = [float(t) for t in (oldest, aside_oldest) if t is not None]
    return int(count) + aside, min(times, default=None), aside


@dataclass
class ShipState:
    """What the shipper knows: how far it got and how the server answered last."""

    shipped: int = 0          # rows this process shipped
    last_ok_at: float = 0.0
    last_error: str = ""
    last_error_at: float = 0.0
    failures: int = 0

    @property
    def reachable(self) -> bool:
        return not self.last_error

    def down_recently(self) -> bool:
        return bool(self.last_error) and time.time() - self.last_error_at < DOWN_GRACE_S


class Outbox:
    """The local file: its rows, its origin id (one per file) and its shipping cursor."""

    def __init__(self, path: Path | str, transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None):
        self.db = Database(path)
        self.store = MessageStore(self.db, transform=transform)

    @property
    def path(self) -> str:
        return self.db.path

    def origin(self) -> str:
        """This file's id on the server (made once, kept in its meta)."""
        row = self.db.read().execute("SELECT value FROM meta WHERE key='outbox_origin'").fetchone()
        if row is not None:
            return str(row[0])
        with self.db.transaction() as c:
            c.execute("INSERT INTO meta(key, value) VALUES ('outbox_origin', ?) ON CONFLICT(key) DO NOTHING",
                      (uuid.uuid4().hex,))
            return str(c.execute("SELECT value FROM meta WHERE key='outbox_origin'").fetchone()[0])

    def cursor(self) -> tuple[int, float]:
        """(the last local id shipped, the newest session change shipped)."""
        return read_cursor(self.db.read())

    def pending(self) -> int:
        """Rows not shipped yet."""
        shipped, _ = self.cursor()
        return int(self.db.read().execute("SELECT COUNT(*) FROM messages WHERE store_id > ?", (shipped,)).fetchone()[0])

    def oldest_pending(self) -> float | None:
        """When the oldest row not shipped yet was written here (None: nothing waits)."""
        shipped, _ = self.cursor()
        row = self.db.read().execute("SELECT MIN(ingested_at) FROM messages WHERE store_id > ?", (shipped,)).fetchone()
        return None if row[0] is None else float(row[0])

    def batch(self, limit: int = BATCH_ROWS) -> tuple[list[Any], list[Any], int, float, list[outboxaside.Aside]]:
        """The next rows and changed sessions to ship, the cursor values they move to, and the rows of
        set-aside sessions that the cursor passes (to be marked as set aside too)."""
        shipped, sessions_at = self.cursor()
        conn = self.db.read()
        rows = conn.execute(f"SELECT store_id, {_SHIPPED_COLUMNS} FROM messages WHERE store_id > ? ORDER BY store_id"
                            " LIMIT ?", (shipped, int(limit))).fetchall()
        named = sorted({str(r[1]) for r in rows})  # every session a row names ships with it
        changed = conn.execute(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE updated_at > ? OR session_id IN"
                               f" ({','.join('?' * len(named))})", (sessions_at, *named)).fetchall()
        held: list[outboxaside.Aside] = []
        aside = outboxaside.aside_sessions(conn)
        if aside:  # a set-aside session holds its messages (and its own later changes) back
            held = [outboxaside.Aside("message", str(r[0]), str(r[1]), f"its session {r[1]} is set aside")
                    for r in rows if str(r[1]) in aside]
            rows = [r for r in rows if str(r[1]) not in aside]
            changed = [s for s in changed if str(s[0]) not in aside]
        top = max([t for s in changed if (t := _time(s["updated_at"])) is not None], default=sessions_at)
        last = max([int(r[0]) for r in rows[-1:]] + [int(h.key) for h in held[-1:]], default=shipped)
        return rows, changed, last, max(top, sessions_at), held

    def advance(self, shipped: int, sessions_at: float, aside: Sequence[outboxaside.Aside] = ()) -> None:
        """Move the cursor past a shipment, marking what it set aside, in one transaction."""
        with self.db.transaction() as c:
            write_meta(c, {"outbox_cursor": str(int(shipped)), "outbox_sessions": repr(float(sessions_at))})
            outboxaside.mark(c, aside)

    def set_aside(self) -> list[outboxaside.Aside]:
        return outboxaside.entries(self.db.read())

    def aside_summary(self) -> dict[str, Any]:
        return outboxaside.summary(self.db.read())

    def export_aside(self) -> list[dict[str, Any]]:
        return outboxaside.exported(self.db.read())

    def aside_rows(self, marks: Sequence[outboxaside.Aside]) -> tuple[list[Any], list[Any]]:
        """The messages and sessions ``marks`` name (with every session those messages belong to)."""
        conn = self.db.read()
        rows = outboxaside.rows_by_id(conn, _SHIPPED_COLUMNS, [int(m.key) for m in marks if m.kind == "message"])
        sessions = outboxaside.sessions_by_id(conn, _SESSION_COLUMNS, {m.session_id for m in marks})
        return rows, sessions

    def retried(self, marks: Sequence[outboxaside.Aside], still: Sequence[outboxaside.Aside]) -> None:
        """After a retry: the marks that shipped are forgotten, those that did not keep their new reason."""
        kept = {(e.kind, e.key) for e in still}
        with self.db.transaction() as c:
            outboxaside.unmark(c, [m for m in marks if (m.kind, m.key) not in kept])
            outboxaside.mark(c, still)


def _time(value: Any) -> float | None:
    """A session's ``updated_at`` as a number; None for a damaged value (that row is set aside when it ships)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


_SESSION_UPSERT = (
    "INSERT INTO sessions(session_id, conversation_id, platform, previous_session_id, created_at,"
    " updated_at, ended_at, scope)"
    " SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::float8[], %s::float8[],"
    " %s::float8[], %s::text[]) ORDER BY 1"
    " ON CONFLICT (session_id) DO UPDATE SET" + SESSION_MERGE +
    " updated_at=GREATEST(sessions.updated_at, excluded.updated_at), ended_at=excluded.ended_at"
    " RETURNING session_id")
# One statement: the sessions first (their rows stay locked to the end), then the messages whose
# (origin, local id) the server has not seen, with their search docs. The scalar subquery on
# ``held`` is an init plan, so ids are drawn after the locks: ordered within a session.
_SHIP = (
    "WITH held AS (" + _SESSION_UPSERT + "),"
    " batch AS (SELECT * FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[],"
    " %s::text[], %s::text[], %s::int[], %s::text[], %s::text[], %s::text[], %s::text[], %s::bigint[],"
    " %s::text[], %s::int[], %s::float8[], %s::float8[], %s::text[], %s::text[], %s::int[], %s::int[])"
    " WITH ORDINALITY AS b(origin_id, " + _COLUMNS + ", doc_c, doc_t, doc_n, doc_k, n)),"
    " fresh AS (SELECT b.*, nextval(pg_get_serial_sequence('messages', 'store_id')) AS store_id"
    " FROM (SELECT * FROM batch WHERE NOT EXISTS (SELECT 1 FROM message_origins o"
    " WHERE o.origin = %s AND o.origin_id = batch.origin_id) AND (SELECT COUNT(*) FROM held) >= 0"
    " ORDER BY n) b),"
    " claimed AS (INSERT INTO message_origins(origin, origin_id, store_id)"
    " SELECT %s, origin_id, store_id FROM fresh ON CONFLICT DO NOTHING RETURNING store_id),"
    " inserted AS (INSERT INTO messages(store_id, " + _COLUMNS + ")"
    " SELECT store_id, " + _COLUMNS + " FROM fresh WHERE store_id IN (SELECT store_id FROM claimed)"
    " RETURNING store_id),"
    " indexed AS (INSERT INTO message_search(store_id, doc, doc_len, tool_len)"
    " SELECT f.store_id, " + pgtext.MESSAGE_DOC_SQL.format(c="f.doc_c", t="f.doc_t") + ", f.doc_n, f.doc_k"
    " FROM fresh f WHERE f.store_id IN (SELECT store_id FROM inserted))"
    " SELECT COUNT(*) FROM inserted")


# A payload already there is kept while it still verifies and has the same owner (the file store
# reuses such a file); a damaged row or another session's is replaced, as a file would be rewritten.
_PAYLOAD_UPSERT = (
    f"INSERT INTO payloads({PAYLOAD_COLUMNS}) SELECT * FROM unnest(%s::text[], %s::text[], %s::text[],"
    " %s::text[], %s::bigint[], %s::bigint[], %s::text[], %s::text[], %s::bytea[], %s::float8[])"
    " ON CONFLICT (ref) DO UPDATE SET session_id = excluded.session_id, kind = excluded.kind,"
    " mime = excluded.mime, original_chars = excluded.original_chars, original_bytes = excluded.original_bytes,"
    " sha256 = excluded.sha256, meta = excluded.meta, data = excluded.data, created_at = excluded.created_at"
    " WHERE payloads.session_id <> excluded.session_id OR payloads.sha256 <> excluded.sha256"
    " OR encode(sha256(payloads.data), 'hex') <> payloads.sha256")


def ship_batch(conn: Any, origin: str, rows: Sequence[Any], sessions: Sequence[Any]) -> int:
    """Write one batch on the server with one statement; returns the messages it added (0 on a replay).

    Sessions are upserted (the first scope named is kept, no cursor moves); each message is added
    once: ``message_origins`` is claimed first and only rows whose claim is new are inserted, so a
    replayed or concurrently shipped row adds nothing.
    """
    session_cols = [list(col) for col in zip(*[tuple(r) for r in sessions], strict=True)] or [[]] * 8
    if not rows:
        if sessions:
            conn.run(_SESSION_UPSERT, session_cols)
        return 0
    cols = [list(col) for col in zip(*[tuple(r) for r in rows], strict=True)]
    content, tool_calls = _COLUMNS.split(", ").index("content") + 1, _COLUMNS.split(", ").index("tool_calls") + 1
    docs = [list(col) for col in zip(*[pgtext.message_doc(r[content], r[tool_calls]) for r in rows], strict=True)]
    return int(conn.run(_SHIP, [*session_cols, *cols, *docs, origin, origin]).fetchone()[0])


class Shipper:
    """Moves the outbox's rows to the server: in the background after each turn, or now (``settle``)."""

    def __init__(self, outbox: Outbox, server: Any, payloads: PayloadSpool | None = None):
        self.outbox = outbox
        self.server = server  # a PgDatabase
        self.payloads = payloads
        self.state = ShipState()
        self.dirty = True  # rows may wait (a new process checks its file once)
        self._lock = threading.Lock()
        self._conn: Any = None  # the shipper's own connection: passes run on short-lived threads
        self._stats_at = -STATS_EVERY_S

    def _connection(self) -> Any:
        if self._conn is None or self._conn.dropped():
            if self._conn is not None:
                self._conn.close()
            self._conn = self.server.open_connection()
        return self._conn

    def between_shipments(self, act: Callable[[], int], wait_s: float = BUSY_WAIT_S, record: bool = False) -> int:
        """``act()`` with no shipment in flight: one that read the outbox before ``act`` changed it
        would write what it read to the server after. Raises when a shipment still holds it after ``wait_s``
        (``record``: counted as a shipping failure)."""
        if not self._lock.acquire(timeout=wait_s):
            busy = ServerUnreachableError("a shipment under way has not finished: the server is not answering")
            if record:
                self.failed(busy)
            raise busy
        try:
            return act()
        finally:
            self._lock.release()

    def ship_once(self, wait_s: float | None = None) -> int:
        """Ship one batch; returns rows read from the outbox (0: nothing was waiting). Raises on failure,
        and when a shipment under way (another thread's) still holds the outbox after ``wait_s`` (at
        least BUSY_WAIT_S: a deadline that is nearly spent does not make a busy server a stalled one)."""
        return self.between_shipments(self._ship, -1 if wait_s is None else max(BUSY_WAIT_S, wait_s), record=True)

    def _ship(self) -> int:
        payloads = self.payloads.pending(SPOOL_BYTES) if self.payloads is not None else []
        if payloads:  # before any message, so a ref never reaches the server ahead of its payload
            try:  # one statement; idempotent: a replay changes nothing
                self._connection().run(_PAYLOAD_UPSERT, [list(col) for col in zip(*map(tuple, payloads), strict=True)])
            except Exception as exc:
                self._lost(exc)
            self.payloads.shipped([str(p[0]) for p in payloads])  # type: ignore[union-attr]
            return len(payloads)
        rows, sessions, shipped, sessions_at, aside = self.outbox.batch()
        if not rows and not sessions and not aside:
            self.dirty = False
            return 0
        added, bad = self._shipped(self.outbox.origin(), rows, sessions)
        self.outbox.advance(shipped, sessions_at, [*aside, *bad])
        self.state.shipped += added
        self.state.last_ok_at, self.state.last_error, self.state.failures = time.time(), "", 0
        return len(rows) or len(sessions) or len(aside)

    def _shipped(self, origin: str, rows: Sequence[Any], sessions: Sequence[Any],
                 proof: bool = True) -> tuple[int, list[outboxaside.Aside]]:
        """Ship a batch in one statement: (messages added, rows set aside). A batch refused for a row's
        values is shipped a statement at a time, setting aside what is at fault (``proof``: only where a
        row of the same kind went through); any other failure raises."""
        try:
            return ship_batch(self._connection(), origin, rows, sessions), []
        except Exception as exc:
            if not outboxaside.row_fault(exc):
                self._lost(exc)
        try:
            added, bad = outboxaside.isolate(lambda r, s: ship_batch(self._connection(), origin, r, s), rows, sessions,
                                             proof=proof)
        except Exception as exc:
            self._lost(exc)
        if bad:  # one line a shipment, however many rows a set-aside session held back
            log.error("trove: %d outbox row(s) set aside (the first: %s %s of session %s: %s); the rows after"
                      " them ship; kept in %s (`hermes trove doctor outbox`)", len(bad), bad[0].kind, bad[0].key,
                      bad[0].session_id, bad[0].reason, self.outbox.path)
        return added, bad

    def retry_aside(self, wait_s: float = BUSY_WAIT_S) -> dict[str, Any]:
        """Ship the set-aside rows again (after their values or the server were repaired), in their order,
        between shipments; what still cannot ship stays set aside with its new reason."""
        found: dict[str, Any] = {}

        def act() -> int:
            marks = self.outbox.set_aside()
            rows, sessions = self.outbox.aside_rows(marks)
            with_rows = {str(r[1]) for r in rows}
            alone = [s for s in sessions if str(s[0]) not in with_rows]  # no message of it is marked
            added = 0
            still: list[outboxaside.Aside] = []
            for i in range(0, max(len(rows), 1 if alone else 0), BATCH_ROWS):  # as a shipment: a batch a statement
                part = rows[i:i + BATCH_ROWS]
                named = {str(r[1]) for r in part}
                n, bad = self._shipped(self.outbox.origin(), part,
                                       [s for s in sessions if str(s[0]) in named] + (alone if i == 0 else []),
                                       proof=False)  # set aside already: what still fails stays so
                added, still = added + n, [*still, *bad]
            self.outbox.retried(marks, still)
            found.update(retried=len(marks), added=added, still_aside=len(still))
            return added
        self.between_shipments(act, wait_s, record=True)
        return found

    def _lost(self, exc: BaseException) -> NoReturn:
        """A shipment failed (under the lock): drop the connection (the next try opens one) and raise."""
        self.failed(exc)
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        raise ServerUnreachableError(self.state.last_error) from exc

    def failed(self, exc: BaseException) -> None:
        """Record that the server did not answer (any thread). The shipper's own connection is left
        to ``ship_once``, the one place that uses it (under the lock)."""
        first = self.state.reachable
        self.state.last_error = f"{type(exc).__name__}: {str(exc).strip()[:240]}"
        self.state.last_error_at = time.time()
        self.state.failures += 1
        if first:
            log.error("trove: the PostgreSQL store %s is unreachable (%s); turns keep writing to %s and ship"
                      " when it returns", self.server.path, self.state.last_error, self.outbox.path)

    def probe(self) -> str:
        """Ask the server now with a new connection (bounded by its connect timeout) for an operator
        report: "" when the store opens, else why. Either answer replaces the remembered one."""
        try:
            self.server.open_connection().close()
        except Exception as exc:
            if not storage_error(exc):
                raise
            self.failed(exc)
            return self.state.last_error
        self.state.last_error = ""
        return ""

    def drain(self, deadline: float | None = None) -> int:
        """Ship until the outbox is empty (or ``deadline``, a ``time.monotonic`` value); rows read."""
        total = 0
        while deadline is None or time.monotonic() < deadline:
            n = self.ship_once(None if deadline is None else deadline - time.monotonic())
            if n == 0:
                break
            total += n
        return total

    def settle(self, timeout_s: float = 10.0) -> None:
        """Ship everything waiting before work that reads the server (compaction). Raises
        ``ServerUnreachableError`` at once when the server failed within ``DOWN_GRACE_S``."""
        if self.state.down_recently():
            raise ServerUnreachableError(self.state.last_error)
        self.drain(time.monotonic() + timeout_s)

    def wake(self) -> None:
        """Start a background pass (never waited on): it drains, retrying with a backoff while rows wait."""
        _SHIPPERS.start(self.outbox.path, lambda: self._background, interval_s=0.0, force=True)

    def refresh_stats(self) -> None:
        """Bring the server's search statistics (document frequencies) up to date, incrementally, under
        the ``search-stats`` lease, so one machine at a time does it; at most every STATS_EVERY_S here."""
        now = time.monotonic()
        if now - self._stats_at < STATS_EVERY_S:
            return
        self._stats_at = now

        def step() -> bool:
            pgtext.refresh_stats(self.server.connect())
            return False  # one refresh a pass

        try:
            with leases.bounded_pass(self.server, "search-stats", ttl_s=300, budget_s=300, max_steps=1) as run:
                run.loop(step)
        except Exception as exc:
            if not storage_error(exc):
                raise
            log.info("trove: the search statistics refresh failed (%s); the next pass retries", exc)
        finally:
            self.server.close()  # this pass's thread ends: its connection goes with it

    def _background(self) -> None:
        delay = RETRY_FIRST_S
        while True:
            try:
                self.drain()
                self.refresh_stats()
                return
            except ServerUnreachableError:
                time.sleep(delay)
                delay = min(RETRY_MAX_S, delay * 2)

    def status(self) -> dict[str, Any]:
        s = self.state
        return {"outbox": self.outbox.path, "pending": self.outbox.pending(),
                "oldest_pending_at": self.outbox.oldest_pending(), "reachable": s.reachable,
                "shipped_this_process": s.shipped, "last_ok_at": s.last_ok_at or None,
                "last_error": s.last_error or None, "failures": s.failures,
                "set_aside": self.outbox.aside_summary()}


class ShippingStore(MessageStore):
    """The PostgreSQL store as the runtime sees it: writes go to the outbox (no network in a turn),
    reads to the server; ``settle`` ships what waits before a read that needs it."""

    def __init__(self, server: Any, outbox: Outbox, shipper: Shipper):
        self.outbox = outbox
        self.shipper = shipper
        super().__init__(server, transform=outbox.store.transform)
        self.identities = outbox.store.identities  # the compaction's digests are the outbox ingest's

    @property
    def transform(self) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
        """The storage transform (payload guard, redaction): it runs where rows are written, the outbox."""
        return self.outbox.store.transform

    @transform.setter
    def transform(self, value: Callable[[dict[str, Any]], dict[str, Any]] | None) -> None:
        self.outbox.store.transform = value

    def ingest(self, key: SessionKey, messages: Sequence[dict[str, Any]],
               skip: Callable[[dict[str, Any]], bool] | None = None,
               identity: Callable[[dict[str, Any]], str] | None = None) -> IngestResult:
        result = self.outbox.store.ingest(key, messages, skip=skip, identity=identity)
        if result.store_ids:
            self._wrote()
        return result

    def ensure_session(self, key: SessionKey, previous_session_id: str | None = None) -> SessionRow:
        row = self.outbox.store.ensure_session(key, previous_session_id)
        self._wrote()
        return row

    def mark_ended(self, session_id: str, wait_s: float | None = None) -> None:
        """The end goes out with this machine's copy of the row; a session only the server holds (stored
        through another outbox) gets one first, from the server's row, else the mark would change nothing."""
        if self.outbox.store.session(session_id) is None:
            row = self.session(session_id)
            if row is None:
                return
            key = SessionKey(session_id, row.conversation_id or "", row.platform or "", scope=row.scope or "")
            self.outbox.store.ensure_session(key, row.previous_session_id)
        self.outbox.store.mark_ended(session_id, wait_s)
        self._wrote()

    def delete_empty_sessions(self, untouched_since: float, keep: Sequence[str] = (), only: str = "") -> int:
        """On the server; with ``only``, this machine's copy of that row too (``session`` would answer
        from it, and it would ship again), both between two shipments (a shipment in flight that read the
        row would bring it back to the server)."""
        if not only:
            return super().delete_empty_sessions(untouched_since, keep, only)

        def both() -> int:
            self.outbox.store.delete_empty_sessions(untouched_since, keep, only)
            return MessageStore.delete_empty_sessions(self, untouched_since, keep, only)
        return self.shipper.between_shipments(both)

    def _wrote(self) -> None:
        self.shipper.dirty = True
        self.shipper.wake()

    def fresh(self) -> None:
        """Before a read: ship what this process wrote, unless the server is known to be down
        (then the read answers from what the server has, or fails as an outage)."""
        if self.shipper.dirty and not self.shipper.state.down_recently():
            with contextlib.suppress(ServerUnreachableError):
                self.shipper.settle(2.0)

    def owner(self, session_id: str, remote: bool = True) -> SessionRow | None:
        """This machine's own row when it has one (a turn's hooks read it: no network), else the server's
        (unless not ``remote``: a caller that must not wait for a server known to be away)."""
        local = self.outbox.store.session(session_id)
        return local if local is not None or not remote else self.session(session_id)

    def session(self, session_id: str) -> SessionRow | None:
        """The server's row (its frontier moves there); this machine's own while the server is away."""
        local = self.outbox.store.session(session_id)
        if self.shipper.state.down_recently():
            return local
        try:
            self.fresh()
            return super().session(session_id) or local
        except Exception as exc:
            if local is None or not storage_error(exc):
                raise
            self.shipper.failed(exc)
            return local

    local_writes = True

    def held_back(self, session_id: str) -> str:
        """Why a trove compaction of ``session_id`` must not run now ("" when it may): rows of it are set
        aside, so the server's copy of it is missing them."""
        held = outboxaside.held_for(self.outbox.db.read(), session_id)
        return (f"{held} row(s) of session {session_id} are set aside in {self.outbox.path}, not on the server"
                " (`hermes trove doctor outbox`)") if held else ""

    def probe(self) -> None:
        """Fails at once while the server was down moments ago; else ships what waits (briefly)."""
        self.shipper.settle(2.0)

    def settle(self, timeout_s: float = 10.0) -> None:
        self.shipper.settle(timeout_s)


def _reading(method: Callable[..., Any]) -> Callable[..., Any]:
    def read(self: ShippingStore, *args: Any, **kwargs: Any) -> Any:
        self.fresh()
        return method(self, *args, **kwargs)
    read.__name__, read.__doc__ = method.__name__, method.__doc__
    return read


# Every read of the server sees this process's own writes first (read-your-writes).
for _name in ("sessions", "session_count", "frontier_store_id", "visible_session", "visible_session_ids", "get",
              "get_many", "page", "backlog", "tail", "count_after", "last_store_id", "last_reply_store_id", "count",
              "stats", "search", "rows_maybe_holding_payloads", "contents_with_payload_refs", "largest_rows"):
    setattr(ShippingStore, _name, _reading(getattr(MessageStore, _name)))
