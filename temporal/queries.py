"""Time-window reads for trove_recent and the rollup builder: leaf summaries and raw
messages inside a UTC window ``[start, end)``, over every session or one session's view.

A leaf belongs to a window when its span ``[earliest_at, latest_at]`` overlaps it; a
message when its ``created_at`` falls inside. Pages are keyset cursors on (time, id).
Both reads ride the indexes of migration 0007 (leaves by end time, messages by time).
Read-only; the SQL of rollups themselves lives in rollup_store.py.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .. import idlist
from ..backend import UNBOUNDED, an_id
from ..dag import NodeRow, node_row
from ..db import Database
from ..rows import MessageRow, calendar_time, message_row
from ..scope import EVERYTHING, Visibility

# The nodes a session can reach: its own, carried ones and everything beneath those.
_REACHABLE = ("WITH RECURSIVE vis(id) AS (SELECT node_id FROM carried_nodes WHERE session_id = :sid"
              " UNION SELECT c.child_id FROM node_children c JOIN vis ON c.node_id = vis.id) ")
_LEAF_WINDOW = ("n.depth = 0 AND (n.latest_at >= :s OR (n.latest_at IS NULL AND n.created_at >= :s))"
                " AND COALESCE(n.earliest_at, n.created_at) < :e")
_LEAF_SCOPE = " AND (n.session_id = :sid OR n.node_id IN (SELECT id FROM vis))"
_LEAF_ORDER = "COALESCE(n.earliest_at, n.created_at)"


@dataclass(frozen=True)
class LeafSpan:
    node_id: int
    session_id: str
    earliest_at: float
    latest_at: float
    scope: str = ""  # its session's owner scope ("" when unscoped)


def _leaf_sql(select: str, session_id: str | None, tail: str = "", visible: Visibility = EVERYTHING) -> str:
    head = _REACHABLE if session_id else ""
    scoped, _ = visible.named_clause("n.session_id")
    where = _LEAF_SCOPE if session_id else f" AND {scoped}" if scoped else ""
    return f"{head}SELECT {select} FROM summary_nodes n WHERE {_LEAF_WINDOW}{where}{tail}"


def _args(start: float, end: float, session_id: str | None, visible: Visibility, **more: Any) -> dict[str, Any]:
    return {"s": float(start), "e": float(end), "sid": session_id or "", **visible.named_clause("")[1], **more}


def leaf_spans(db: Database, start: float, end: float, session_id: str | None = None,
               visible: Visibility = EVERYTHING) -> list[LeafSpan]:
    """Every leaf summary overlapping the window (ids, times and owner scope only), among the sessions
    ``visible`` reads."""
    sql = _leaf_sql("n.node_id, n.session_id, COALESCE(n.earliest_at, n.created_at),"
                    " COALESCE(n.latest_at, n.earliest_at, n.created_at),"
                    " COALESCE((SELECT s.scope FROM sessions s WHERE s.session_id = n.session_id), '')",
                    session_id, visible=visible)
    rows = db.read().execute(sql, _args(start, end, session_id, visible))
    spans = ((r, calendar_time(r[2]), calendar_time(r[3])) for r in rows)  # a damaged time: no known span
    return [LeafSpan(int(r[0]), str(r[1]), a, b, str(r[4])) for r, a, b in spans if a is not None and b is not None]


def leaves(db: Database, start: float, end: float, *, session_id: str | None = None,
           after: tuple[float, int] | None = None, limit: int | None = None,
           visible: Visibility = EVERYTHING) -> list[NodeRow]:
    """Leaf summaries overlapping the window in time order, strictly after ``after`` = (time, node_id)."""
    tail = ""
    args = _args(start, end, session_id, visible, l=UNBOUNDED if limit is None else int(limit))
    if after is not None:
        tail += f" AND ({_LEAF_ORDER}, n.node_id) > (:at, :id)"
        args.update({"at": float(after[0]), "id": int(after[1])})
    tail += f" ORDER BY {_LEAF_ORDER}, n.node_id LIMIT :l"
    return [node_row(r) for r in db.read().execute(_leaf_sql("n.*", session_id, tail, visible), args)]


def count_leaves(db: Database, start: float, end: float, session_id: str | None = None,
                 visible: Visibility = EVERYTHING) -> int:
    sql = _leaf_sql("COUNT(*)", session_id, visible=visible)
    return int(db.read().execute(sql, _args(start, end, session_id, visible)).fetchone()[0])


def first_sources(db: Database, node_ids: Sequence[int]) -> dict[int, tuple[int, int]]:
    """For each leaf: (first covered store_id, number of covered messages); a lineage cell that holds no id
    (damage a SQLite file can carry) is left out, as ``SummaryDAG.source_ids`` leaves it out."""
    ids = [int(i) for i in node_ids]
    if not ids:
        return {}
    conn = db.read()
    sql = ("SELECT node_id, MIN(store_id), COUNT(*) FROM node_messages WHERE node_id IN ({})"
           f" AND {an_id('store_id')} GROUP BY node_id")
    return {int(r[0]): (int(r[1]), int(r[2])) for run in idlist.chunks(conn, ids)
            for r in conn.execute(sql.format(",".join("?" * len(run))), run)}


def _message_where(session_id: str | None, visible: Visibility = EVERYTHING) -> str:
    if session_id:
        return "session_id = :sid AND created_at >= :s AND created_at < :e"
    scoped, _ = visible.named_clause("session_id")
    return "created_at >= :s AND created_at < :e" + (f" AND {scoped}" if scoped else "")


def messages(db: Database, start: float, end: float, *, session_id: str | None = None,
             after: tuple[float, int] | None = None, limit: int = 100,
             visible: Visibility = EVERYTHING) -> list[MessageRow]:
    """Raw messages stored with a time inside the window, in time order, after ``after`` = (time, store_id)."""
    sql = f"SELECT * FROM messages WHERE {_message_where(session_id, visible)}"
    args = _args(start, end, session_id, visible, l=int(limit))
    if after is not None:
        sql += " AND (created_at, store_id) > (:at, :id)"
        args.update({"at": float(after[0]), "id": int(after[1])})
    sql += " ORDER BY created_at, store_id LIMIT :l"
    return [message_row(r) for r in db.read().execute(sql, args)]


def count_messages(db: Database, start: float, end: float, session_id: str | None = None,
                   visible: Visibility = EVERYTHING) -> int:
    sql = f"SELECT COUNT(*) FROM messages WHERE {_message_where(session_id, visible)}"
    return int(db.read().execute(sql, _args(start, end, session_id, visible)).fetchone()[0])


def count_unsummarized(db: Database, start: float, end: float, session_id: str | None = None,
                       cap: int = 5000, visible: Visibility = EVERYTHING) -> int:
    """Messages in the window no leaf summary covers yet, counted up to ``cap``."""
    sql = (f"SELECT COUNT(*) FROM (SELECT 1 FROM messages m WHERE {_message_where(session_id, visible)}"
           " AND NOT EXISTS (SELECT 1 FROM node_messages nm WHERE nm.store_id = m.store_id) LIMIT :cap) AS uncovered")
    args = _args(start, end, session_id, visible, cap=int(cap))
    return int(db.read().execute(sql, args).fetchone()[0])
