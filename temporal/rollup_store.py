"""RollupStore: every SQL statement about temporal rollups and their lineage.

Rows of ``temporal_rollups`` (one per period kind, UTC start and owner scope: the
``sessions.scope`` of every leaf it summarises, so a rollup never mixes scopes) move through
pending -> building -> ready, with stale and failed on the side; ``temporal_rollup_sources``
lists the leaf summary nodes each covers. A claim bumps the row's generation and a finish
only lands on the generation it claimed, so a build that raced a new leaf (the migration's
triggers mark it stale) or a second builder never overwrites newer state. It decides nothing.
"""
from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import idlist
from ..backend import UNBOUNDED, on_server, settled_heads
from ..db import Database, meta_value
from .rollup_plan import KINDS, PeriodKey, RollupState

CURSOR_KEY = "temporal_rollups.leaf_cursor"
_STATE_COLUMNS = ("rollup_id, period_kind, period_start, period_end, status, generation, attempts, claimed_at,"
                  " failed_at, scope")


@dataclass(frozen=True)
class RollupRow:
    rollup_id: int
    period_kind: str
    period_start: float
    period_end: float
    scope: str
    status: str
    summary: str
    token_count: int
    source_count: int
    source_token_count: int
    level: str
    model: str
    model_calls: int
    input_tokens: int
    generation: int
    attempts: int
    error: str | None
    created_at: float
    updated_at: float
    claimed_at: float | None
    built_at: float | None
    failed_at: float | None

    @property
    def key(self) -> PeriodKey:
        return PeriodKey(self.period_kind, self.period_start, self.period_end)


def _state(r: sqlite3.Row) -> RollupState:
    return RollupState(int(r["rollup_id"]), str(r["period_kind"]), float(r["period_start"]), float(r["period_end"]),
                       str(r["status"]), int(r["generation"]), int(r["attempts"]), r["claimed_at"], r["failed_at"],
                       str(r["scope"]))


def _row(r: sqlite3.Row) -> RollupRow:
    return RollupRow(**{k: r[k] for k in RollupRow.__dataclass_fields__})


def _scoped(scope: str | None, sql: str, args: list[Any]) -> tuple[str, list[Any]]:
    """``sql`` narrowed to one owner scope (every scope when None)."""
    return (sql, args) if scope is None else (sql + " AND scope = ?", [*args, scope])


def _matching(kinds: Sequence[str], start: float | None, end: float | None, scope: str | None,
              more: str = "") -> tuple[str, list[Any]]:
    """Rows of ``kinds`` (of one owner scope or all) overlapping ``[start, end)`` (every period when None)."""
    where, args = _scoped(scope, f"period_kind IN ({','.join('?' * len(kinds))}){more}", list(kinds))
    if start is not None and end is not None:
        where += " AND period_start < ? AND period_end > ?"
        args += [float(end), float(start)]
    return where, args


def _lock_in_order(conn: Any, where: str, args: Sequence[Any]) -> None:
    """On a server, lock the rows a write of several will touch in rollup_id order first: the leaf
    triggers lock theirs in that order too, so a build finishing as a leaf lands cannot deadlock
    (SQLite has one writer at a time)."""
    if on_server(conn):
        conn.execute(f"SELECT rollup_id FROM temporal_rollups WHERE {where} ORDER BY rollup_id FOR UPDATE", args)


class RollupStore:
    """Scope-aware: every read takes an optional owner scope (None: all scopes, for operators)."""

    def __init__(self, db: Database):
        self.db = db

    # -- leaves to periods ----------------------------------------------------------
    def leaf_cursor(self) -> int:
        return int(meta_value(self.db.read(), CURSOR_KEY) or 0)

    def leaf_spans_after(self, node_id: int) -> list[tuple[int, float, float, str]]:
        """``(node_id, earliest, latest, owner scope)`` of every leaf summary past ``node_id``, up to
        the settled head (``backend.settled_heads``: a leaf that commits later is read next time; none
        while a writer is mid-commit). The scope is its session's; ``""`` for an unscoped or unknown one."""
        heads = settled_heads(self.db, ("summary_nodes", "node_id"))
        if heads is None:
            return []
        sql = ("SELECT n.node_id, COALESCE(n.earliest_at, n.created_at),"
               " COALESCE(n.latest_at, n.earliest_at, n.created_at), COALESCE(s.scope, '')"
               " FROM summary_nodes n LEFT JOIN sessions s ON s.session_id = n.session_id"
               " WHERE n.depth = 0 AND n.node_id > ? AND n.node_id <= ? ORDER BY n.node_id")
        return [(int(r[0]), float(r[1]), float(r[2]), str(r[3]))
                for r in self.db.read().execute(sql, (int(node_id), heads[0]))]

    def unsynced_leaves(self) -> int:
        sql = "SELECT COUNT(*) FROM summary_nodes WHERE depth = 0 AND node_id > ?"
        return int(self.db.read().execute(sql, (self.leaf_cursor(),)).fetchone()[0])

    def ensure_periods(self, keys: Iterable[tuple[str, PeriodKey]], cursor: int, now: float | None = None) -> int:
        """Create pending rows for ``(scope, period)`` pairs that have none and move the leaf cursor;
        returns rows made."""
        now = time.time() if now is None else now
        rows = [(k.kind, k.start, k.end, scope, now, now) for scope, k in keys]
        with self.db.transaction() as conn:
            # executemany's rowcount sums the rows each statement inserted (both drivers)
            made = max(0, conn.executemany(
                "INSERT INTO temporal_rollups(period_kind, period_start, period_end, scope, status,"
                " created_at, updated_at) VALUES (?,?,?,?,'pending',?,?)"
                " ON CONFLICT (period_kind, period_start, scope) DO NOTHING", rows).rowcount) if rows else 0
            conn.execute("INSERT INTO meta(key, value) VALUES (?, ?)"
                         " ON CONFLICT(key) DO UPDATE SET value = excluded.value", (CURSOR_KEY, str(int(cursor))))
        return made

    # -- reads -------------------------------------------------------------------
    def states(self, scope: str | None = None) -> list[RollupState]:
        sql, args = _scoped(scope, f"SELECT {_STATE_COLUMNS} FROM temporal_rollups WHERE true", [])
        return [_state(r) for r in self.db.read().execute(sql, args)]

    def states_in(self, start: float, end: float, scope: str) -> list[RollupState]:
        """One scope's rows whose period overlaps ``[start, end)`` (months reach back at most 31 days)."""
        sql = (f"SELECT {_STATE_COLUMNS} FROM temporal_rollups WHERE scope = ? AND period_start >= ?"
               " AND period_start < ? AND period_end > ?")
        rows = self.db.read().execute(sql, (scope, float(start) - 32 * 86400.0, float(end), float(start)))
        return [_state(r) for r in rows]

    def get(self, rollup_id: int) -> RollupRow | None:
        r = self.db.read().execute("SELECT * FROM temporal_rollups WHERE rollup_id = ?", (int(rollup_id),)).fetchone()
        return None if r is None else _row(r)

    def get_many(self, rollup_ids: Sequence[int]) -> list[RollupRow]:
        ids = [int(i) for i in rollup_ids]
        if not ids:
            return []
        conn = self.db.read()
        found = {int(r["rollup_id"]): _row(r) for run in idlist.chunks(conn, ids) for r in
                 conn.execute(f"SELECT * FROM temporal_rollups WHERE rollup_id IN ({','.join('?' * len(run))})", run)}
        return [found[i] for i in ids if i in found]

    def by_key(self, key: PeriodKey, scope: str) -> RollupRow | None:
        r = self.db.read().execute(
            "SELECT * FROM temporal_rollups WHERE period_kind = ? AND period_start = ? AND scope = ?",
            (key.kind, key.start, scope)).fetchone()
        return None if r is None else _row(r)

    def source_node_ids(self, rollup_id: int, limit: int | None = None) -> list[int]:
        sql = "SELECT node_id FROM temporal_rollup_sources WHERE rollup_id = ? ORDER BY ordinal LIMIT ?"
        rows = self.db.read().execute(sql, (int(rollup_id), UNBOUNDED if limit is None else int(limit)))
        return [int(r[0]) for r in rows]

    def scopes(self) -> dict[str, int]:
        """Rows per owner scope."""
        sql = "SELECT scope, COUNT(*) FROM temporal_rollups GROUP BY scope ORDER BY scope"
        return {str(r[0]): int(r[1]) for r in self.db.read().execute(sql)}

    def counts(self, scope: str | None = None) -> dict[str, dict[str, Any]]:
        """Per kind (one scope or all): rows per status, model calls and input tokens spent, last build."""
        out: dict[str, dict[str, Any]] = {k: {"statuses": {}, "model_calls": 0, "input_tokens": 0,
                                              "last_built_at": None} for k in KINDS}
        sql, args = _scoped(scope, "SELECT period_kind, status, COUNT(*), SUM(model_calls), SUM(input_tokens),"
                            " MAX(built_at) FROM temporal_rollups WHERE true", [])
        for kind, status, n, calls, tokens_in, built in self.db.read().execute(sql + " GROUP BY period_kind, status",
                                                                               args):
            entry = out[str(kind)]
            entry["statuses"][str(status)] = int(n)
            entry["model_calls"] += int(calls or 0)
            entry["input_tokens"] += int(tokens_in or 0)
            if built is not None and (entry["last_built_at"] is None or built > entry["last_built_at"]):
                entry["last_built_at"] = float(built)
        return out

    def failures(self, limit: int = 5, scope: str | None = None) -> list[RollupRow]:
        sql, args = _scoped(scope, "SELECT * FROM temporal_rollups WHERE status = 'failed'", [])
        return [_row(r) for r in self.db.read().execute(sql + " ORDER BY failed_at DESC LIMIT ?", [*args, int(limit)])]

    def abandon_building(self, rollup_ids: Sequence[int], now: float) -> int:
        """Mark rows still 'building' stale (their builder is gone), so the next pass rebuilds them."""
        ids = [int(i) for i in rollup_ids]
        return self._stale(f"status = 'building' AND rollup_id IN ({','.join('?' * len(ids))})", ids, now) if ids else 0

    def _stale(self, where: str, args: list[Any], now: float) -> int:
        with self.db.transaction() as conn:
            _lock_in_order(conn, where, args)
            return int(conn.execute(f"UPDATE temporal_rollups SET status = 'stale', updated_at = ? WHERE {where}",
                                    [now, *args]).rowcount)

    # -- the build protocol -------------------------------------------------------
    def claim(self, state: RollupState, now: float) -> int | None:
        """Mark the row building under a new generation, if it is still as ``state`` saw it."""
        with self.db.transaction() as conn:
            cur = conn.execute(
                "UPDATE temporal_rollups SET status = 'building', generation = generation + 1,"
                " attempts = attempts + 1, claimed_at = ?, updated_at = ? WHERE rollup_id = ? AND generation = ?"
                " AND status = ?", (now, now, state.rollup_id, state.generation, state.status))
            return state.generation + 1 if cur.rowcount == 1 else None

    def finish(self, rollup_id: int, generation: int, *, summary: str, token_count: int, source_token_count: int,
               level: str, model: str, model_calls: int, input_tokens: int, node_ids: Sequence[int],
               now: float) -> bool:
        """Store a built rollup and its lineage; False when its claim went stale meanwhile."""
        with self.db.transaction() as conn:
            found = conn.execute("SELECT period_kind, period_start, period_end, scope FROM temporal_rollups"
                                 " WHERE rollup_id = ?", (rollup_id,)).fetchone()
            if found is None:
                return False
            kind, p_start, p_end, scope = found
            # the weeks and months written from this rollup's earlier text are out of date once it lands
            larger = KINDS[KINDS.index(str(kind)) + 1:]
            outdated = (f"scope = ? AND status = 'ready' AND period_kind IN ({','.join('?' * len(larger))})"
                        " AND period_start < ? AND period_end > ?")
            outdated_args = (scope, *larger, p_end, p_start)
            if larger:
                _lock_in_order(conn, f"rollup_id = ? OR ({outdated})", (rollup_id, *outdated_args))
            cur = conn.execute(
                "UPDATE temporal_rollups SET status = 'ready', summary = ?, token_count = ?, source_count = ?,"
                " source_token_count = ?, level = ?, model = ?, model_calls = model_calls + ?,"
                " input_tokens = input_tokens + ?, attempts = 0, error = NULL, built_at = ?, updated_at = ?"
                " WHERE rollup_id = ? AND generation = ? AND status = 'building'",
                (summary, token_count, len(node_ids), source_token_count, level, model, model_calls, input_tokens,
                 now, now, rollup_id, generation))
            if cur.rowcount != 1:
                return False
            if larger:
                conn.execute(f"UPDATE temporal_rollups SET status = 'stale', updated_at = ? WHERE {outdated}",
                             (now, *outdated_args))
            conn.execute("DELETE FROM temporal_rollup_sources WHERE rollup_id = ?", (rollup_id,))
            conn.executemany("INSERT INTO temporal_rollup_sources(rollup_id, ordinal, node_id) VALUES (?,?,?)",
                             [(rollup_id, i, int(n)) for i, n in enumerate(node_ids)])
        return True

    def fail(self, rollup_id: int, generation: int, error: str, now: float, *, model_calls: int = 0,
             input_tokens: int = 0) -> bool:
        with self.db.transaction() as conn:
            cur = conn.execute(
                "UPDATE temporal_rollups SET status = 'failed', error = ?, failed_at = ?, updated_at = ?,"
                " model_calls = model_calls + ?, input_tokens = input_tokens + ?"
                " WHERE rollup_id = ? AND generation = ? AND status = 'building'",
                (error[:1000], now, now, model_calls, input_tokens, rollup_id, generation))
            return cur.rowcount == 1

    def discard(self, rollup_id: int, generation: int) -> bool:
        """Drop a claimed row whose period no longer holds any leaf summary."""
        with self.db.transaction() as conn:
            cur = conn.execute("DELETE FROM temporal_rollups WHERE rollup_id = ? AND generation = ?"
                               " AND status = 'building'", (rollup_id, generation))
            return cur.rowcount == 1

    def mark_stale(self, kinds: Sequence[str], start: float | None = None, end: float | None = None,
                   now: float | None = None, scope: str | None = None) -> int:
        """Ask for a rebuild of the ``kinds`` rollups overlapping ``[start, end)`` (all when None),
        of one owner scope or all."""
        where, args = _matching(kinds, start, end, scope, " AND status != 'stale'")
        return self._stale(where, args, time.time() if now is None else now)

    def count_matching(self, kinds: Sequence[str], start: float | None = None, end: float | None = None,
                       scope: str | None = None) -> int:
        where, args = _matching(kinds, start, end, scope)
        return int(self.db.read().execute(f"SELECT COUNT(*) FROM temporal_rollups WHERE {where}", args).fetchone()[0])
