"""SummaryDAG: summary nodes, their lineage, the visible frontier and carried-over nodes.

A depth-0 node summarises raw messages, a depth-d node condenses depth-(d-1) nodes. A session sees
its own nodes plus those carried in after ``/new``; its *frontier* is the visible nodes no visible
parent condenses. Lineage reads are never truncated (unbounded or paged). Nothing here decides
what to summarise.
"""
from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass

from . import idlist, pgtext, pgwords, tokens
from .backend import an_id, on_server, sane
from .db import Database
from .rows import calendar_time, is_count
from .scope import EVERYTHING, Visibility
from .substring import whole_letters

_VISIBLE = "(n.session_id = :s OR n.node_id IN (SELECT node_id FROM carried_nodes WHERE session_id = :s))"
_NODE_COLUMNS = ("summary_nodes(session_id, depth, summary, token_count, source_token_count, earliest_at, latest_at,"
                 " level, model, expand_hint, created_at)")
# What both one-statement node writes on a server end with: the new node joins the session's
# frontier and gets its search document (parameters: its words, their count).
_PG_NODE_TAIL = (" visible AS (INSERT INTO session_frontier(session_id, node_id) SELECT session_id, node_id FROM node),"
                 f" indexed AS (INSERT INTO node_search(node_id, doc, doc_len) SELECT node_id,"
                 f" setweight(to_tsvector('{pgwords.CONFIG}', ?), 'A'), ? FROM node)"
                 " SELECT * FROM node")


@dataclass(frozen=True)
class NodeRow:
    node_id: int
    session_id: str
    depth: int
    summary: str
    token_count: int
    source_token_count: int
    earliest_at: float | None
    latest_at: float | None
    level: str
    model: str
    expand_hint: str
    created_at: float


def frontier_value(conn: sqlite3.Connection, session_id: str, stored: object) -> int:
    """A sessions row's frontier. One that is no count (a damaged row's text) reads as the last message
    the session's leaves cover, or as the furthest frontier a rotate set when that is further (a
    rotate moves it past messages no summary covers): nothing is summarised twice, nothing uncovered
    is skipped, and no rotate is undone."""
    if is_count(stored):
        return stored  # type: ignore[return-value]
    rotated = conn.execute("SELECT rotated_frontier FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    return max(_leaf_coverage(conn, session_id), rotated[0] if rotated and is_count(rotated[0]) else 0)


def frontier_at(conn: sqlite3.Connection, session_id: str) -> int:
    """The session's compaction frontier as ``frontier_value`` reads it (0 for an unknown session)."""
    r = conn.execute("SELECT frontier_store_id FROM sessions WHERE session_id=?", (session_id,)).fetchone()
    return frontier_value(conn, session_id, r[0]) if r else 0


def _leaf_coverage(conn: sqlite3.Connection, session_id: str) -> int:
    """The highest store id the session's own summaries cover (0: none; a damaged lineage cell counts as none)."""
    r = conn.execute(f"SELECT MAX({sane('nm.store_id')}) FROM node_messages nm"
                     " JOIN summary_nodes n ON n.node_id = nm.node_id WHERE n.session_id = ?", (session_id,)).fetchone()
    return int(r[0] or 0)


def node_row(r: sqlite3.Row | dict) -> NodeRow:
    """A NodeRow from one row of summary_nodes."""
    cols = {k: r[k] for k in NodeRow.__dataclass_fields__}
    if not isinstance(cols["summary"], str):  # a damaged row's bytes or number reads as text, never as bytes
        cols["summary"] = bytes(cols["summary"]).decode("utf-8", "replace") if isinstance(cols["summary"], bytes) \
            else str(cols["summary"] if cols["summary"] is not None else "")
    # a damaged row's text or NaN reads as an unknown time, not as a value that breaks sorting
    cols["earliest_at"], cols["latest_at"] = calendar_time(cols["earliest_at"]), calendar_time(cols["latest_at"])
    created = calendar_time(cols["created_at"])
    cols["created_at"] = (cols["latest_at"] or 0.0) if created is None else created
    if not is_count(cols["token_count"]):  # a damaged count is recounted: assembly must not take it as free
        cols["token_count"] = tokens.count(str(cols["summary"]))
    for name in ("source_token_count", "depth"):  # an unknown depth reads as a leaf: sorting and planning go on
        if not is_count(cols[name]):
            cols[name] = 0
    return NodeRow(**cols)


def _node(conn: sqlite3.Connection, node_id: int) -> NodeRow:
    return node_row(conn.execute("SELECT * FROM summary_nodes WHERE node_id = ?", (node_id,)).fetchone())


class SummaryDAG:
    def __init__(self, db: Database):
        self.db = db

    # -- writes ------------------------------------------------------------
    def add_leaf(self, session_id: str, summary: str, store_ids: Sequence[int], *, token_count: int,
                 source_token_count: int, earliest_at: float | None, latest_at: float | None,
                 level: str = "normal", model: str = "", expand_hint: str = "",
                 conn: sqlite3.Connection | None = None) -> int:
        return self._add(session_id, 0, summary, store_ids, (token_count, source_token_count, earliest_at, latest_at,
                                                              level, model, expand_hint), conn)

    def add_condensed(self, session_id: str, depth: int, summary: str, child_ids: Sequence[int], *,
                      token_count: int, source_token_count: int, earliest_at: float | None,
                      latest_at: float | None, level: str = "normal", model: str = "",
                      expand_hint: str = "", conn: sqlite3.Connection | None = None) -> int:
        if depth < 1:
            raise ValueError("condensed nodes have depth >= 1")
        return self._add(session_id, depth, summary, child_ids, (token_count, source_token_count, earliest_at,
                                                                  latest_at, level, model, expand_hint), conn)

    def _add(self, session_id: str, depth: int, summary: str, ids: Sequence[int], meta: tuple,
             conn: sqlite3.Connection | None) -> int:
        """One node over ``ids`` (store ids at depth 0, else child nodes); ``meta``: token_count to expand_hint.
        Its created_at is the time of the write, once the write lock is held."""
        if not ids:
            raise ValueError("a summary node needs at least one source")
        table, column = ("node_messages", "store_id") if depth == 0 else ("node_children", "child_id")

        def write(c: sqlite3.Connection) -> int:
            node_id = int(c.execute(f"INSERT INTO {_NODE_COLUMNS} VALUES (?,?,?,?,?,?,?,?,?,?,?) RETURNING node_id",
                                    (session_id, depth, summary, *meta, time.time())).fetchone()[0])
            if on_server(c):
                pgtext.index_nodes(c, [(node_id, summary)])
            c.executemany(f"INSERT INTO {table}(node_id, ordinal, {column}) VALUES (?,?,?)",
                          [(node_id, i, int(x)) for i, x in enumerate(ids)])
            # keep the session's frontier current: the new node joins, condensed children leave
            c.execute("INSERT INTO session_frontier(session_id, node_id) VALUES (?,?) ON CONFLICT DO NOTHING",
                      (session_id, node_id))
            if depth > 0:
                c.executemany("DELETE FROM session_frontier WHERE session_id=? AND node_id=?",
                              [(session_id, int(x)) for x in ids])
            return node_id

        if conn is not None:
            return write(conn)
        with self.db.transaction() as c:
            return write(c)

    # -- the compactor's two writes: each one conditional statement on a server ----------
    def add_leaf_below_frontier(self, session_id: str, summary: str, store_ids: Sequence[int], *, token_count: int,
                                source_token_count: int, earliest_at: float | None, latest_at: float | None,
                                level: str = "normal", model: str = "", expand_hint: str = "") -> NodeRow | None:
        """Add a leaf over ``store_ids`` (in store order) and move the session's frontier to the last
        of them, only while the frontier is still below the first; None when another engine copy
        compacted them meanwhile. The frontier is the sessions row's: this is the one write of it
        the DAG makes, so that the check and both writes are one statement on a server."""
        ids = [int(i) for i in store_ids]
        meta = (token_count, source_token_count, earliest_at, latest_at, level, model, expand_hint, time.time())
        if not ids:
            raise ValueError("a summary node needs at least one source")
        with self.db.transaction() as conn:
            if on_server(conn):
                (words,) = pgwords.document(summary)
                row = conn.execute(
                    "WITH moved AS (UPDATE sessions SET frontier_store_id = ?, updated_at = ?"
                    " WHERE session_id = ? AND frontier_store_id < ? RETURNING session_id),"
                    f" node AS (INSERT INTO {_NODE_COLUMNS}"
                    " SELECT session_id, 0, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM moved RETURNING *),"
                    " lineage AS (INSERT INTO node_messages(node_id, ordinal, store_id)"
                    " SELECT node.node_id, u.n - 1, u.id FROM node,"
                    " unnest(?::bigint[]) WITH ORDINALITY AS u(id, n)),"
                    + _PG_NODE_TAIL,
                    (ids[-1], time.time(), session_id, ids[0], summary, *meta, ids, words, len(words.split()))
                ).fetchone()
                return None if row is None else node_row(row)
            if frontier_at(conn, session_id) >= ids[0]:
                return None
            node_id = self._add(session_id, 0, summary, ids, meta[:-1], conn)
            conn.execute("UPDATE sessions SET frontier_store_id = ?, updated_at = ? WHERE session_id = ?",
                         (ids[-1], time.time(), session_id))  # past the frontier read above, a damaged one too
            return _node(conn, node_id)

    def condense_on_frontier(self, session_id: str, depth: int, summary: str, child_ids: Sequence[int], *,
                             token_count: int, source_token_count: int, earliest_at: float | None,
                             latest_at: float | None, level: str = "normal", model: str = "",
                             expand_hint: str = "") -> NodeRow | None:
        """Condense ``child_ids`` into a depth-``depth`` node only while every one of them is still on
        the session's frontier; None when another process condensed some meanwhile (nothing written)."""
        ids = [int(i) for i in child_ids]
        if depth < 1 or not ids:
            raise ValueError("condensed nodes have depth >= 1 and at least one child")
        meta = (token_count, source_token_count, earliest_at, latest_at, level, model, expand_hint, time.time())
        with self.db.transaction() as conn:
            if on_server(conn):
                (words,) = pgwords.document(summary)
                # the children leave the frontier first; when fewer than all were there, trove_refuse
                # raises and the statement (one transaction) leaves everything as it was
                try:
                    row = conn.execute(
                        "WITH gone AS (DELETE FROM session_frontier"
                        " WHERE session_id = ? AND node_id = ANY(?::bigint[]) RETURNING node_id),"
                        " checked AS (SELECT CASE WHEN (SELECT COUNT(*) FROM gone) = ? THEN 1"
                        " ELSE trove_refuse('a child left the frontier') END AS ok),"
                        f" node AS (INSERT INTO {_NODE_COLUMNS}"
                        " SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM checked WHERE ok = 1 RETURNING *),"
                        " lineage AS (INSERT INTO node_children(node_id, ordinal, child_id)"
                        " SELECT node.node_id, u.n - 1, u.id FROM node,"
                        " unnest(?::bigint[]) WITH ORDINALITY AS u(id, n)),"
                        + _PG_NODE_TAIL,
                        (session_id, ids, len(set(ids)), session_id, depth, summary, *meta, ids, words,
                         len(words.split()))).fetchone()
                except Exception as exc:
                    if "a child left the frontier" not in str(exc):
                        raise
                    return None
                return None if row is None else node_row(row)
            if not self.on_frontier(session_id, ids, conn):
                return None
            return _node(conn, self._add(session_id, depth, summary, ids, meta[:-1], conn))

    def carry_over(self, from_session: str, to_session: str, min_depth: int) -> list[int]:
        """Make ``from_session``'s frontier nodes of depth >= ``min_depth`` visible in ``to_session``.

        ``min_depth`` < 0 carries nothing; 0 carries every frontier node. Returns node ids.
        """
        if min_depth < 0 or from_session == to_session:
            return []
        nodes = [n for n in self.frontier(from_session) if n.depth >= min_depth]
        now = time.time()
        with self.db.transaction() as conn:
            conn.executemany(
                "INSERT INTO carried_nodes(session_id, node_id, from_session_id, carried_at)"
                " VALUES (?,?,?,?) ON CONFLICT DO NOTHING",
                [(to_session, n.node_id, from_session, now) for n in nodes])
            conn.executemany("INSERT INTO session_frontier(session_id, node_id) VALUES (?,?) ON CONFLICT DO NOTHING",
                             [(to_session, n.node_id) for n in nodes])
        return [n.node_id for n in nodes]

    def on_frontier(self, session_id: str, node_ids: Sequence[int], conn: sqlite3.Connection) -> bool:
        """Whether every one of ``node_ids`` is still on the session's frontier (read inside a write)."""
        ids = sorted({int(x) for x in node_ids})
        held = sum(int(conn.execute("SELECT COUNT(*) FROM session_frontier WHERE session_id=? AND node_id IN"
                                    f" ({','.join('?' * len(run))})", (session_id, *run)).fetchone()[0])
                   for run in idlist.chunks(conn, ids, others=1))
        return held == len(ids)

    # -- lineage health (doctor) and repair -----------------------------------
    @staticmethod
    def multi_parent_nodes(conn: sqlite3.Connection) -> list[tuple[str, int, int]]:
        """``(session_id, child_id, parents)`` for nodes condensed more than once by one session."""
        sql = ("SELECT p.session_id, c.child_id, COUNT(*) FROM node_children c"
               " JOIN summary_nodes p ON p.node_id = c.node_id"
               " GROUP BY p.session_id, c.child_id HAVING COUNT(*) > 1 ORDER BY p.session_id, c.child_id")
        return [(str(r[0]), int(r[1]), int(r[2])) for r in conn.execute(sql)]

    @staticmethod
    def overlapping_frontier(conn: sqlite3.Connection) -> dict[str, int]:
        """Per session, how many raw messages more than one frontier node covers (assembled twice)."""
        sql = ("WITH RECURSIVE cover(session_id, top, id) AS ("
               " SELECT session_id, node_id, node_id FROM session_frontier"
               " UNION SELECT cover.session_id, cover.top, c.child_id FROM node_children c"
               " JOIN cover ON c.node_id = cover.id)"
               " SELECT session_id, COUNT(*) FROM (SELECT cover.session_id, nm.store_id FROM cover"
               " JOIN node_messages nm ON nm.node_id = cover.id GROUP BY cover.session_id, nm.store_id"
               " HAVING COUNT(DISTINCT cover.top) > 1) AS covered GROUP BY session_id")
        return {str(r[0]): int(r[1]) for r in conn.execute(sql)}

    @staticmethod
    def repair_duplicate_condensations(conn: sqlite3.Connection) -> dict[str, list[int]]:
        """Delete the later parent of every node condensed twice in one session, and the
        nodes above it, then rebuild those sessions' frontiers. Raw messages and the first
        parent stay; children of a deleted parent return to the frontier. Returns deleted ids.
        """
        deleted: dict[str, list[int]] = {}
        for _ in range(64):  # each round removes at least one duplicate; far fewer rounds in practice
            rows = conn.execute(
                "SELECT p.session_id, MAX(c.node_id) FROM node_children c JOIN summary_nodes p ON p.node_id = c.node_id"
                " GROUP BY p.session_id, c.child_id HAVING COUNT(*) > 1").fetchall()
            if not rows:
                break
            for session_id, parent in {(str(r[0]), int(r[1])) for r in rows}:
                doomed = [int(r[0]) for r in conn.execute(
                    "WITH RECURSIVE up(id) AS (SELECT CAST(? AS BIGINT) UNION SELECT c.node_id FROM node_children c"
                    " JOIN up ON c.child_id = up.id JOIN summary_nodes p ON p.node_id = c.node_id"
                    " WHERE p.session_id = ?) SELECT id FROM up", (parent, session_id))]
                gone = deleted.setdefault(session_id, [])
                for node_id in doomed:
                    if node_id in gone:
                        continue
                    conn.execute("DELETE FROM node_children WHERE node_id=?", (node_id,))
                    conn.execute("DELETE FROM summary_nodes WHERE node_id=?", (node_id,))
                    gone.append(node_id)
        for session_id in deleted:
            SummaryDAG.rebuild_frontier(conn, session_id)
        return deleted

    @staticmethod
    def rebuild_frontier(conn: sqlite3.Connection, session_id: str) -> None:
        """Recompute one session's frontier from its nodes and lineage (as migration 0003 did)."""
        conn.execute("DELETE FROM session_frontier WHERE session_id=?", (session_id,))
        conn.execute(
            "INSERT INTO session_frontier(session_id, node_id)"
            " SELECT CAST(:s AS TEXT), v.node_id FROM (SELECT node_id FROM summary_nodes WHERE session_id = :s"
            " UNION SELECT node_id FROM carried_nodes WHERE session_id = :s) v"
            " WHERE NOT EXISTS (SELECT 1 FROM node_children c JOIN summary_nodes p ON p.node_id = c.node_id"
            " WHERE c.child_id = v.node_id AND (p.session_id = :s OR p.node_id IN"
            " (SELECT node_id FROM carried_nodes WHERE session_id = :s))) ON CONFLICT DO NOTHING", {"s": session_id})

    # -- reads -------------------------------------------------------------
    def get(self, node_id: int) -> NodeRow | None:
        r = self.db.read().execute("SELECT * FROM summary_nodes WHERE node_id=?", (int(node_id),)).fetchone()
        return None if r is None else node_row(r)

    def is_visible(self, session_id: str, node_id: int) -> bool:
        r = self.db.read().execute(f"SELECT 1 FROM summary_nodes n WHERE n.node_id=:n AND {_VISIBLE}",
                                   {"n": int(node_id), "s": session_id}).fetchone()
        return r is not None

    def is_reachable(self, session_id: str, node_id: int) -> bool:
        """Visible in the session, or beneath a node carried into it (its lineage came along)."""
        sql = ("WITH RECURSIVE sub(id) AS ("
               " SELECT node_id FROM carried_nodes WHERE session_id = :s"
               " UNION SELECT c.child_id FROM node_children c JOIN sub ON c.node_id = sub.id)"
               " SELECT 1 FROM sub WHERE id = :n LIMIT 1")
        return self.is_visible(session_id, node_id) or \
            self.db.read().execute(sql, {"s": session_id, "n": int(node_id)}).fetchone() is not None

    def frontier(self, session_id: str) -> list[NodeRow]:
        """Visible nodes that no visible node condenses: highest depth first, then oldest.

        Read from ``session_frontier``, which node writes keep current, so the cost follows
        the frontier's size, not the session's history.
        """
        sql = ("SELECT n.* FROM session_frontier f JOIN summary_nodes n ON n.node_id = f.node_id"
               " WHERE f.session_id = ? ORDER BY n.depth DESC, COALESCE(n.earliest_at, n.created_at), n.node_id")
        return [node_row(r) for r in self.db.read().execute(sql, (session_id,))]

    def visible(self, session_id: str) -> list[NodeRow]:
        sql = f"SELECT n.* FROM summary_nodes n WHERE {_VISIBLE} ORDER BY n.depth, n.node_id"
        return [node_row(r) for r in self.db.read().execute(sql, {"s": session_id})]

    def source_count(self, node: NodeRow) -> int:
        """The node's sources ``source_ids`` reads, so a page's cursor counts the same sources."""
        table, col = ("node_messages", "store_id") if node.depth == 0 else ("node_children", "child_id")
        sql = f"SELECT COUNT(*) FROM {table} WHERE node_id=? AND {an_id(col)}"
        return int(self.db.read().execute(sql, (node.node_id,)).fetchone()[0])

    def source_ids(self, node: NodeRow, offset: int = 0, limit: int | None = None) -> list[int]:
        """Immediate sources in order: store ids (depth 0) or child node ids. A lineage cell that holds no id
        (damage a SQLite file can carry: text, a fraction) is left out, as a missing row would be, before
        ``offset`` and ``limit`` count, as ``source_count`` does: a page's cursor always moves on."""
        table, col = ("node_messages", "store_id") if node.depth == 0 else ("node_children", "child_id")
        sql = f"SELECT {col} FROM {table} WHERE node_id=? AND {an_id(col)} ORDER BY ordinal LIMIT ? OFFSET ?"
        rows = self.db.read().execute(sql, (node.node_id, 2 ** 62 if limit is None else int(limit), int(offset)))
        return [int(r[0]) for r in rows]

    def parent_of(self, node_id: int, session_id: str) -> int | None:
        r = self.db.read().execute(
            f"SELECT c.node_id FROM node_children c JOIN summary_nodes n ON n.node_id=c.node_id"
            f" WHERE c.child_id=:c AND {_VISIBLE} LIMIT 1", {"c": int(node_id), "s": session_id}).fetchone()
        return None if r is None else int(r[0])

    def descendant_store_ids(self, node_id: int) -> list[int]:
        """Every raw message beneath a node, in store order (unbounded by design)."""
        sql = ("WITH RECURSIVE sub(id) AS (SELECT CAST(? AS BIGINT) UNION ALL SELECT c.child_id FROM node_children c"
               " JOIN sub ON c.node_id = sub.id)"
               f" SELECT DISTINCT nm.store_id FROM node_messages nm JOIN sub ON nm.node_id = sub.id"
               f" WHERE {an_id('nm.store_id')} ORDER BY nm.store_id")
        return [int(r[0]) for r in self.db.read().execute(sql, (int(node_id),))]

    def has_descendant_source(self, node_id: int, source: str) -> bool:
        sql = ("WITH RECURSIVE sub(id) AS (SELECT CAST(? AS BIGINT) UNION ALL SELECT c.child_id FROM node_children c"
               " JOIN sub ON c.node_id = sub.id)"
               " SELECT 1 FROM node_messages nm JOIN sub ON nm.node_id = sub.id"
               " JOIN messages m ON m.store_id = nm.store_id"
               " WHERE m.source = ? OR (? = 'unknown' AND m.source = '') LIMIT 1")
        return self.db.read().execute(sql, (int(node_id), source, source)).fetchone() is not None

    def depth_stats(self, session_id: str) -> dict[int, dict[str, int]]:
        sql = (f"SELECT n.depth + 0 AS depth, COUNT(*) AS c, SUM({sane('n.token_count')}) AS t,"
               f" SUM({sane('n.source_token_count')}) AS st"
               f" FROM summary_nodes n WHERE {_VISIBLE} GROUP BY n.depth + 0 ORDER BY 1")  # + 0: a damaged text is 0
        return {int(r["depth"]): {"count": int(r["c"]), "tokens": int(r["t"] or 0), "source_tokens": int(r["st"] or 0)}
                for r in self.db.read().execute(sql, {"s": session_id})}

    def highest_covered_store_id(self, session_id: str) -> int:
        return _leaf_coverage(self.db.read(), session_id)

    def search(self, match: str, session_id: str, limit: int = 10) -> list[tuple[NodeRow, float, str]]:
        """BM25-ranked summary hits among the nodes the session can reach.

        That is its own nodes, the nodes carried into it after /new, and everything beneath
        those (the lineage came along, so ``trove_expand`` reaches it too).
        """
        if not match:
            return []
        conn = self.db.read()
        if on_server(conn):
            reach = ("(n.session_id = ? OR n.node_id IN (WITH RECURSIVE carried(id) AS ("
                     " SELECT node_id FROM carried_nodes WHERE session_id = ?"
                     " UNION SELECT c.child_id FROM node_children c JOIN carried ON c.node_id = carried.id)"
                     " SELECT id FROM carried))")
            return self._server_hits(conn, match, [reach], [session_id, session_id], limit)
        sql = ("WITH RECURSIVE carried(id) AS ("
               " SELECT node_id FROM carried_nodes WHERE session_id = :s"
               " UNION SELECT c.child_id FROM node_children c JOIN carried ON c.node_id = carried.id)"
               " SELECT n.*, bm25(nodes_fts) AS _rank, snippet(nodes_fts, 0, '>>>', '<<<', '…', 40) AS _snippet"
               " FROM nodes_fts JOIN summary_nodes n ON n.node_id = nodes_fts.rowid WHERE nodes_fts MATCH :m"
               " AND (n.session_id = :s OR n.node_id IN (SELECT id FROM carried)) ORDER BY _rank LIMIT :l")
        rows = self.db.read().execute(sql, {"m": match, "s": session_id, "l": int(limit)})
        return [(node_row(r), float(r["_rank"]), whole_letters(str(r["_snippet"] or ""))) for r in rows]

    def search_all(self, match: str, limit: int = 50, time_from: float | None = None,
                   time_to: float | None = None, visible: Visibility = EVERYTHING) -> list[tuple[NodeRow, float, str]]:
        """BM25-ranked summary hits across every session ``visible`` may read (whole-memory recall).

        Ranked inside the full-text index first, then joined; a time window keeps nodes
        whose span ``[earliest_at, latest_at]`` overlaps it. A filtered search widens its
        ranked window until it holds ``limit`` survivors, so other scopes never crowd it out.
        """
        if not match:
            return []
        scoped, scope_args = visible.clause("n.session_id")
        where, args = ([scoped], list(scope_args)) if scoped else ([], [])
        for clause, at in (("COALESCE(n.latest_at, n.created_at) >= ?", time_from),
                           ("COALESCE(n.earliest_at, n.created_at) < ?", time_to)):
            if at is not None:
                where.append(clause)
                args.append(at)
        conn = self.db.read()
        if on_server(conn):
            return self._server_hits(conn, match, where, args, limit)
        window = int(limit) * (4 if where else 1)
        while True:
            sql = ("SELECT n.*, f.r AS _rank, snippet(nodes_fts, 0, '>>>', '<<<', '…', 40) AS _snippet"
                   " FROM (SELECT rowid AS rid, bm25(nodes_fts) AS r FROM nodes_fts WHERE nodes_fts MATCH ?"
                   " ORDER BY r LIMIT ?) f JOIN summary_nodes n ON n.node_id = f.rid"
                   " JOIN nodes_fts ON nodes_fts.rowid = f.rid AND nodes_fts MATCH ?"
                   f"{' WHERE ' + ' AND '.join(where) if where else ''} ORDER BY f.r LIMIT ?")
            rows = conn.execute(sql, [match, window, match, *args, int(limit)]).fetchall()
            if len(rows) >= int(limit) or window < 0 or not scoped:
                break
            total = conn.execute("SELECT COUNT(*) FROM nodes_fts WHERE nodes_fts MATCH ?", (match,)).fetchone()[0]
            if window >= total:
                break
            window = window * 8 if window * 8 < total else -1
        return [(node_row(r), float(r["_rank"]), whole_letters(str(r["_snippet"] or ""))) for r in rows]

    def _server_hits(self, conn: sqlite3.Connection, match: str, where: list[str], args: list[object],
                     limit: int) -> list[tuple[NodeRow, float, str]]:
        """``search``/``search_all`` on a PostgreSQL store: ranked in SQL by ``pgtext``."""
        hits = pgtext.search_nodes(conn, match, where=where, args=list(args), limit=int(limit), rows=True)
        return [(node_row(h[0]), float(h[1]), str(h[2] or "")) for h in hits]
