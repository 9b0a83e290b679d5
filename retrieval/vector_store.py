"""Embedding storage: the data module holding every SQL statement about generations and vectors.

A generation pins provider, model and dimension, records its message text recipe, and keeps two
cursors (highest store_id and node_id processed) so each indexing pass is O(new rows). Vectors are
int8 BLOBs (``bytea`` on PostgreSQL) with a float32 scale each; an item written again replaces its
vectors. Writes are short transactions; rows come back as frozen dataclasses.
"""
from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..backend import UNBOUNDED, settled_heads
from ..db import Database

SPEND_KEY = "embedding_spend:"
CHARGE_TRIES = 64  # PostgreSQL: compare-and-swap rounds of ``charge`` against other processes


@dataclass(frozen=True)
class Generation:
    generation_id: int
    provider: str
    model: str
    dim: int
    base_url: str
    state: str
    message_cursor: int
    node_cursor: int
    removed: int
    last_error: str | None
    last_error_at: float | None
    created_at: float
    activated_at: float | None
    recipe: str

    @property
    def label(self) -> str:
        return f"{self.provider}:{self.model}:{self.dim}"


@dataclass(frozen=True)
class PendingText:
    """A message or summary past a generation's cursor, with what indexing needs of it."""

    kind: str  # message | summary
    item_id: int
    session_id: str
    role: str
    text: str
    is_json: bool
    at: float | None
    tool_name: str = ""  # a tool row's tool: a memory tool's results get no vectors


@dataclass(frozen=True)
class VectorRow:
    kind: str
    item_id: int
    span_start: int
    span_end: int | None
    session_id: str
    at: float | None
    vector: bytes  # int8, dim bytes
    scale: float


@dataclass(frozen=True)
class StoredVector(VectorRow):
    """A vector row as stored, with its id (keyword-only: it follows the row's fields)."""

    vector_id: int = field(kw_only=True)


@dataclass(frozen=True)
class Backlog:
    """Eligible rows of a generation, and how many still lie past its cursors."""

    messages: int
    messages_pending: int
    summaries: int
    summaries_pending: int
    vectors: int

    @property
    def eligible(self) -> int:
        return self.messages + self.summaries

    @property
    def pending(self) -> int:
        return self.messages_pending + self.summaries_pending

    @property
    def coverage(self) -> float:
        return 1.0 if self.eligible == 0 else round(1.0 - self.pending / self.eligible, 4)


_GEN_COLS = ("generation_id, provider, model, dim, base_url, state, message_cursor, node_cursor, removed,"
             " last_error, last_error_at, created_at, activated_at, recipe")


def _generation(r: Sequence[object]) -> Generation:
    return Generation(int(r[0]), str(r[1]), str(r[2]), int(r[3]), str(r[4]), str(r[5]),  # type: ignore[call-overload]
                      int(r[6]), int(r[7]), int(r[8]),  # type: ignore[call-overload]
                      None if r[9] is None else str(r[9]), None if r[10] is None else float(r[10]),  # type: ignore[arg-type]
                      float(r[11]), None if r[12] is None else float(r[12]), str(r[13]))  # type: ignore[arg-type]


_PENDING_COLS = "store_id, session_id, role, trove_text(content), content_is_json, created_at"


def _pending(rows: Iterable[Sequence[Any]]) -> list[PendingText]:
    return [PendingText("message", int(r[0]), str(r[1]), str(r[2]), str(r[3] or ""), bool(r[4]),
                        None if r[5] is None else float(r[5]), str(r[6] or "")) for r in rows]


def _spent(value: object) -> tuple[int, int]:
    """A day's ledger value ``"<texts>,<tokens>"`` as numbers."""
    texts, _, tokens = str(value).partition(",")
    return int(texts or 0), int(tokens or 0)


class VectorStore:
    """Generations, vectors, cursors and the remote spend ledger of one trove database."""

    def __init__(self, db: Database):
        self.db = db

    # -- generations -------------------------------------------------------------------
    def generations(self) -> list[Generation]:
        rows = self.db.read().execute(f"SELECT {_GEN_COLS} FROM embedding_generations ORDER BY generation_id")
        return [_generation(r) for r in rows]

    def _one(self, where: str, args: tuple[object, ...] = ()) -> Generation | None:
        r = self.db.read().execute(f"SELECT {_GEN_COLS} FROM embedding_generations WHERE {where}", args).fetchone()
        return None if r is None else _generation(r)

    def generation(self, generation_id: int) -> Generation | None:
        return self._one("generation_id=?", (generation_id,))

    def find(self, provider: str, model: str) -> Generation | None:
        """The newest generation of ``provider`` + ``model`` (any dimension, any state)."""
        return self._one("provider=? AND model=? ORDER BY generation_id DESC LIMIT 1", (provider, model))

    def active(self) -> Generation | None:
        return self._one("state='active' ORDER BY generation_id DESC LIMIT 1")

    def ensure(self, provider: str, model: str, dim: int, base_url: str = "", recipe: str = "") -> Generation:
        """The generation for this space, created as ``building`` if new; a retired one restarts empty.

        ``recipe`` names how message text is made into model input; it is recorded on a new
        generation (an existing one keeps its own: ``restart_messages`` moves it on).
        """
        now = time.time()
        find = f"SELECT {_GEN_COLS} FROM embedding_generations WHERE provider=? AND model=? AND dim=?"
        with self.db.transaction() as conn:
            r = conn.execute(find, (provider, model, int(dim))).fetchone()
            if r is None:  # (checked first: a conflicting insert would still draw a server id)
                conn.execute("INSERT INTO embedding_generations(provider, model, dim, base_url, created_at, recipe)"
                             " VALUES (?,?,?,?,?,?) ON CONFLICT(provider, model, dim) DO NOTHING",
                             (provider, model, int(dim), base_url, now, recipe))
                r = conn.execute(find, (provider, model, int(dim))).fetchone()
            gen = _generation(r)
            if gen.state == "retired":  # restarted by one caller only: the update is conditional
                if conn.execute("UPDATE embedding_generations SET state='building', message_cursor=0, node_cursor=0,"
                                " last_error=NULL, last_error_at=NULL, activated_at=NULL, base_url=?, recipe=?"
                                " WHERE generation_id=? AND state='retired'",
                                (base_url, recipe, gen.generation_id)).rowcount:
                    conn.execute("DELETE FROM embedding_vectors WHERE generation_id=?", (gen.generation_id,))
                gen = _generation(conn.execute(find, (provider, model, int(dim))).fetchone())
        return gen

    def restart_messages(self, generation_id: int, recipe: str) -> Generation | None:
        """Record a new message recipe and rewind the message cursor, so every message is embedded
        again. The old vectors stay searchable until each message's new ones replace them."""
        with self.db.transaction() as conn:
            conn.execute("UPDATE embedding_generations SET recipe=?, message_cursor=0 WHERE generation_id=?",
                         (recipe, generation_id))
        return self.generation(generation_id)

    def activate(self, generation_id: int) -> None:
        """Make ``generation_id`` the searched space; the previously active one is retired."""
        with self.db.transaction() as conn:
            conn.execute("UPDATE embedding_generations SET state='retired' WHERE state='active' AND generation_id<>?",
                         (generation_id,))
            conn.execute("UPDATE embedding_generations SET state='active', activated_at=? WHERE generation_id=?"
                         " AND state<>'active'", (time.time(), generation_id))

    def record_error(self, generation_id: int, error: str | None) -> None:
        with self.db.transaction() as conn:
            conn.execute("UPDATE embedding_generations SET last_error=?, last_error_at=? WHERE generation_id=?",
                         (None if error is None else error[:500], None if error is None else time.time(),
                          generation_id))

    def prune_retired(self, limit: int = 5000) -> int:
        """Delete up to ``limit`` vectors of retired generations; returns how many went."""
        with self.db.transaction() as conn:
            cur = conn.execute("DELETE FROM embedding_vectors WHERE vector_id IN (SELECT v.vector_id FROM"
                               " embedding_vectors v JOIN embedding_generations g ON g.generation_id=v.generation_id"
                               " WHERE g.state='retired' LIMIT ?)", (int(limit),))
            return int(cur.rowcount)

    def has_retired_vectors(self) -> bool:
        r = self.db.read().execute("SELECT 1 FROM embedding_generations g JOIN embedding_vectors v"
                                   " ON v.generation_id=g.generation_id WHERE g.state='retired' LIMIT 1").fetchone()
        return r is not None

    # -- what to index -------------------------------------------------------------------
    def pending_messages(self, after: int, limit: int, upto: int = UNBOUNDED) -> list[PendingText]:
        """Messages with ``after`` < store_id <= ``upto`` in id order (every role: the caller filters)."""
        return _pending(self.db.read().execute(
            f"SELECT {_PENDING_COLS}, tool_name FROM messages WHERE store_id > ? AND store_id <= ?"
            " ORDER BY store_id LIMIT ?", (int(after), int(upto), int(limit))))

    def preceding_messages(self, session_id: str, before: int, limit: int) -> list[PendingText]:
        """Up to ``limit`` user/assistant messages of ``session_id`` before store_id ``before``, newest first."""
        return _pending(self.db.read().execute(
            f"SELECT {_PENDING_COLS}, '' FROM messages WHERE session_id=? AND store_id<?"
            " AND role IN ('user','assistant') ORDER BY store_id DESC LIMIT ?", (session_id, int(before), int(limit))))

    def message_vectors(self, generation_id: int, store_id: int) -> list[tuple[bytes, float]]:
        """(int8 vector bytes, scale) of each chunk of one message in the generation, in span order."""
        rows = self.db.read().execute(
            "SELECT vector, scale FROM embedding_vectors WHERE kind='message' AND item_id=? AND generation_id=?"
            " ORDER BY span_start", (int(store_id), int(generation_id)))
        return [(bytes(r[0]), float(r[1])) for r in rows]

    def pending_nodes(self, after: int, limit: int, upto: int = UNBOUNDED) -> list[PendingText]:
        rows = self.db.read().execute(
            "SELECT node_id, session_id, summary, COALESCE(latest_at, created_at) FROM summary_nodes"
            " WHERE node_id > ? AND node_id <= ? ORDER BY node_id LIMIT ?", (int(after), int(upto), int(limit)))
        return [PendingText("summary", int(r[0]), str(r[1]), "summary", str(r[2] or ""), False,
                            None if r[3] is None else float(r[3])) for r in rows]

    def write(self, generation_id: int, rows: Sequence[VectorRow], *, message_cursor: int | None = None,
              node_cursor: int | None = None, replaces: Sequence[tuple[str, int]] = ()) -> int:
        """Insert vectors and move the cursors forward, in one transaction.

        Duplicates are ignored, except for the ``replaces`` items (kind, item_id), which are
        embedded again: their vectors are overwritten in place (same rows, so an in-RAM mirror
        needs no reload until ``invalidate``), and any of their spans not in ``rows`` is deleted.
        """
        now = time.time()
        moves = (-1 if message_cursor is None else int(message_cursor), -1 if node_cursor is None else int(node_cursor))
        with self.db.transaction() as conn:
            # First, and conditional: it also locks the generation's row, so on a server two writers
            # of one generation commit their vector ids in order (an in-RAM mirror loads by id).
            if not conn.execute("UPDATE embedding_generations SET"
                                " message_cursor = CASE WHEN message_cursor < ? THEN ? ELSE message_cursor END,"
                                " node_cursor = CASE WHEN node_cursor < ? THEN ? ELSE node_cursor END"
                                " WHERE generation_id=? AND state <> 'retired'",
                                (moves[0], moves[0], moves[1], moves[1], generation_id)).rowcount:
                return 0  # swapped out (or deleted) while this batch was being embedded
            again = {(kind, int(item_id)) for kind, item_id in replaces}
            for kind, item_id in again:  # spans the new text no longer has (rare)
                keep = [r.span_start for r in rows if (r.kind, r.item_id) == (kind, item_id)]
                conn.execute("DELETE FROM embedding_vectors WHERE generation_id=? AND kind=? AND item_id=?"
                             + (f" AND span_start NOT IN ({','.join('?' * len(keep))})" if keep else ""),
                             (generation_id, kind, item_id, *keep))
            fresh: list[tuple[object, ...]] = []
            rewritten: list[tuple[object, ...]] = []
            for r in rows:
                values = (generation_id, r.kind, r.item_id, r.span_start, r.span_end, r.session_id, r.at, r.vector,
                          r.scale, now)
                (rewritten if (r.kind, r.item_id) in again else fresh).append(values)
            insert = ("INSERT INTO embedding_vectors(generation_id, kind, item_id, span_start, span_end, session_id,"
                      " at, vector, scale, created_at) VALUES (?,?,?,?,?,?,?,?,?,?)")
            key = " ON CONFLICT(generation_id, kind, item_id, span_start)"
            inserted = conn.executemany(insert + key + " DO NOTHING", fresh).rowcount if fresh else 0
            if rewritten:
                conn.executemany(insert + key + " DO UPDATE SET span_end=excluded.span_end,"
                                 " session_id=excluded.session_id, at=excluded.at, vector=excluded.vector,"
                                 " scale=excluded.scale", rewritten)
        return int(inserted)

    def invalidate(self, generation_id: int) -> None:
        """Make every in-RAM mirror of the generation reload once (after vectors were overwritten)."""
        with self.db.transaction() as conn:
            conn.execute("UPDATE embedding_generations SET removed = removed + 1 WHERE generation_id=?",
                         (generation_id,))

    # -- reading vectors ----------------------------------------------------------------------
    def scan_head(self, generation_id: int) -> tuple[int, int]:
        """(highest vector_id, removals and invalidations so far): what a vector cache compares to
        stay current."""
        r = self.db.read().execute(  # one statement: one round trip per query on a server
            "SELECT (SELECT MAX(vector_id) FROM embedding_vectors WHERE generation_id=?),"
            " (SELECT removed FROM embedding_generations WHERE generation_id=?)",
            (generation_id, generation_id)).fetchone()
        return int(r[0] or 0), int(r[1] or 0)

    def iter_vectors(self, generation_id: int, after_vector_id: int = 0,
                     page: int = 20000) -> Iterator[list[StoredVector]]:
        """Vectors of a generation past ``after_vector_id``, in pages, in vector_id order."""
        conn = self.db.read()
        last = int(after_vector_id)
        while True:
            rows = conn.execute(
                "SELECT vector_id, kind, item_id, span_start, span_end, session_id, at, vector, scale"
                " FROM embedding_vectors WHERE generation_id=? AND vector_id>? ORDER BY vector_id LIMIT ?",
                (generation_id, last, page)).fetchall()
            if not rows:
                return
            yield [StoredVector(str(r[1]), int(r[2]), int(r[3]), None if r[4] is None else int(r[4]), str(r[5]),
                                None if r[6] is None else float(r[6]), bytes(r[7]), float(r[8]), vector_id=int(r[0]))
                   for r in rows]
            last = int(rows[-1][0])

    def vector_count(self, generation_id: int) -> int:
        return int(self.db.read().execute("SELECT COUNT(*) FROM embedding_vectors WHERE generation_id=?",
                                          (generation_id,)).fetchone()[0])

    def highest_vectored(self, generation_id: int, kind: str) -> int:
        """The highest item id of ``kind`` holding vectors in the generation (0: none)."""
        r = self.db.read().execute("SELECT MAX(item_id) FROM embedding_vectors WHERE kind=? AND generation_id=?",
                                   (kind, generation_id)).fetchone()
        return int(r[0] or 0)

    def backlog(self, gen: Generation, tool_policy: str = "none") -> Backlog:
        """Eligible rows (text messages of the indexed roles, every summary) and those past the cursors."""
        conn = self.db.read()
        roles = ("user", "assistant", "tool") if tool_policy == "all" else ("user", "assistant")
        marks = ",".join("?" * len(roles))
        eligible = f"role IN ({marks}) AND content <> ''"
        messages = int(conn.execute(f"SELECT COUNT(*) FROM messages WHERE {eligible}", roles).fetchone()[0])
        pending = int(conn.execute(f"SELECT COUNT(*) FROM messages WHERE store_id > ? AND {eligible}",
                                   (gen.message_cursor, *roles)).fetchone()[0])
        nodes = int(conn.execute("SELECT COUNT(*) FROM summary_nodes").fetchone()[0])
        nodes_pending = int(conn.execute("SELECT COUNT(*) FROM summary_nodes WHERE node_id > ?",
                                         (gen.node_cursor,)).fetchone()[0])
        return Backlog(messages, pending, nodes, nodes_pending, self.vector_count(gen.generation_id))

    def heads(self) -> tuple[int, int]:
        """(highest store_id, highest node_id) stored now."""
        r = self.db.read().execute("SELECT (SELECT MAX(store_id) FROM messages),"
                                   " (SELECT MAX(node_id) FROM summary_nodes)").fetchone()
        return int(r[0] or 0), int(r[1] or 0)

    def settled_heads(self) -> tuple[int, int] | None:
        """(store_id, node_id) bounds an indexing pass reads up to (``backend.settled_heads``)."""
        heads = settled_heads(self.db, ("messages", "store_id"), ("summary_nodes", "node_id"))
        return None if heads is None else (heads[0], heads[1])

    def vector_bytes(self) -> int:
        """Bytes of vector payload stored (all generations), for the disk-cost report."""
        r = self.db.read().execute("SELECT COALESCE(SUM(length(vector)), 0) + 8 * COUNT(*) FROM embedding_vectors")
        return int(r.fetchone()[0])

    # -- the remote spend ledger (per UTC day, in ``meta``) -------------------------------------
    def spend(self, day: str) -> tuple[int, int]:
        r = self.db.read().execute("SELECT value FROM meta WHERE key=?", (SPEND_KEY + day,)).fetchone()
        return (0, 0) if r is None else _spent(r[0])

    def charge(self, day: str, texts: int, tokens: int, max_texts: int, max_tokens: int) -> tuple[int, int] | None:
        """Add to the day's spend unless a cap (0 = none) would be passed; None when refused.

        The write is conditional on the value read (compare and swap), so processes charging one
        server at once each add theirs; SQLite's write transaction never has to try again.
        """
        key = SPEND_KEY + day
        with self.db.transaction() as conn:
            for _ in range(CHARGE_TRIES):
                r = conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
                used_texts, used_tokens = (0, 0) if r is None else _spent(r[0])
                if (max_texts and used_texts + texts > max_texts) or \
                        (max_tokens and used_tokens + tokens > max_tokens):
                    return None
                value = f"{used_texts + texts},{used_tokens + tokens}"
                if r is None:
                    swapped = conn.execute("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO NOTHING",
                                           (key, value)).rowcount
                else:
                    swapped = conn.execute("UPDATE meta SET value=? WHERE key=? AND value=?",
                                           (value, key, r[0])).rowcount
                if swapped:
                    break
            else:
                raise RuntimeError(f"the embedding spend ledger {key} changed under {CHARGE_TRIES} tries in a row")
            conn.execute("DELETE FROM meta WHERE key LIKE ? AND key < ?", (SPEND_KEY + "%", key))
        return used_texts + texts, used_tokens + tokens
