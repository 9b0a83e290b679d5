"""Operators' data: the SQL behind status, doctor, hygiene and rotate, and nothing else.

Reads take a connection (a caller may be inside its own write transaction) and return plain
values or frozen dataclasses; ``settled`` gives that connection once this process's outbox rows
reached a PostgreSQL store. Each write is one short ``db.transaction()``.
"""
from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..backend import an_id, on_server, sane
from ..packed import DAMAGED
from ..rows import MAX_COUNT, calendar_time

if TYPE_CHECKING:
    from ..db import Database
    from ..runtime import Runtime

# Deleted first to last, so summaries never outlive the rows their lineage names.
CORE_SESSION_TABLES = ("carried_nodes", "summary_nodes", "messages", "sessions")
SETTLE_S = 2.0
log = logging.getLogger("hermes_trove.ops")


def settled(runtime: Runtime) -> sqlite3.Connection:
    """The connection operators read through, after the rows this process wrote to the PostgreSQL
    store's local outbox shipped (at most ``SETTLE_S``); a server that is down is read as it is."""
    try:
        runtime.store.settle(SETTLE_S)
    except ConnectionError:  # outbox.ServerUnreachableError: the read itself reports the outage
        pass
    return runtime.db.read()


# -- whole-database totals (status) ---------------------------------------------------------

def store_totals(conn: sqlite3.Connection) -> dict[str, int]:
    messages, tokens = conn.execute(f"SELECT COUNT(*), COALESCE(SUM({sane('token_count')}),0) FROM messages").fetchone()
    sessions = conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
    nodes = conn.execute("SELECT COUNT(*) FROM summary_nodes").fetchone()[0]
    return {"total_messages": int(messages), "total_tokens": int(tokens), "total_sessions": int(sessions),
            "total_nodes": int(nodes)}


# -- health facts (doctor) ------------------------------------------------------------------

def quick_check(conn: sqlite3.Connection, max_errors: int = 20) -> list[str]:
    """SQLite's ``quick_check`` lines; ``["ok"]`` for a sound file."""
    return [str(r[0]) for r in conn.execute(f"PRAGMA quick_check({int(max_errors)})")]


def journal_mode(conn: sqlite3.Connection) -> str:
    return str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()


def lineage_orphans(conn: sqlite3.Connection) -> dict[str, int]:
    """Lineage rows that point at nothing, counted under what they lack."""
    return {what: int(conn.execute(sql).fetchone()[0]) for what, sql in (
        ("node_messages -> missing messages", "SELECT COUNT(*) FROM node_messages nm WHERE NOT EXISTS"
         " (SELECT 1 FROM messages m WHERE m.store_id = nm.store_id)"),
        ("node_children -> missing nodes", "SELECT COUNT(*) FROM node_children c WHERE NOT EXISTS"
         " (SELECT 1 FROM summary_nodes n WHERE n.node_id = c.child_id)"),
        ("nodes without sources", "SELECT COUNT(*) FROM summary_nodes n WHERE NOT EXISTS"
         " (SELECT 1 FROM node_messages nm WHERE nm.node_id = n.node_id) AND NOT EXISTS"
         " (SELECT 1 FROM node_children c WHERE c.node_id = n.node_id)"))}


def _not_numbers(*columns: str, nullable: bool = False) -> str:
    allowed = "'real', 'integer', 'null'" if nullable else "'real', 'integer'"
    return " OR ".join(f"typeof({c}) NOT IN ({allowed})" for c in columns)


def _not_counts(*columns: str) -> str:
    return " OR ".join(f"typeof({c}) <> 'integer' OR {c} NOT BETWEEN 0 AND {MAX_COUNT}" for c in columns)


def _json(column: str) -> str:
    # trove's JSON (Python's) writes and reads NaN and Infinity, which json_valid refuses
    return f"replace(replace({column}, 'NaN', '0'), 'Infinity', '0')"


def _not_finite(*columns: str) -> str:
    return " OR ".join(f"{c} IN ('NaN', 'Infinity', '-Infinity')" for c in columns)


# Rows no trove write leaves behind: (kind, table, id column, condition). A SQLite file can hold
# text in any column and packed text cut short; a server's typed columns, only NaN, infinities and
# out-of-range counts, and its TEXT columns of JSON, text that is not the JSON trove writes.
_DAMAGED_SQLITE = (
    ("messages whose stored text is damaged", "messages", "store_id",
     f"typeof(content) = 'blob' AND substr(trove_text(content), 1, {len(DAMAGED)})"
     f" = '{DAMAGED.replace(chr(39), chr(39) * 2)}'"),
    ("messages holding text whose bytes are no UTF-8", "messages", "store_id",
     " OR ".join(f"trove_not_utf8(CAST({c} AS BLOB))" for c in ("role", "tool_name", "tool_calls", "extra",
                                                                 "session_id", "tool_call_id"))
     + " OR (typeof(content) = 'text' AND trove_not_utf8(CAST(content AS BLOB)))"),
    ("summary nodes holding text whose bytes are no UTF-8", "summary_nodes", "node_id",
     "trove_not_utf8(CAST(summary AS BLOB)) OR trove_not_utf8(CAST(session_id AS BLOB))"),
    ("messages with a column that is not JSON", "messages", "store_id",
     f"CASE WHEN json_valid({_json('tool_calls')}) THEN json_type({_json('tool_calls')}) <> 'array' OR EXISTS"
     f" (SELECT 1 FROM json_each({_json('tool_calls')}) WHERE type <> 'object') ELSE tool_calls IS NOT NULL END"
     f" OR CASE WHEN json_valid({_json('extra')}) THEN json_type({_json('extra')}) <> 'object'"
     f" ELSE extra IS NOT NULL END OR (content_is_json AND CASE WHEN json_valid({_json('trove_text(content)')})"
     f" THEN json_type({_json('trove_text(content)')}) NOT IN ('array', 'object') ELSE 1 END)"),
    ("messages with a time or count that is not a number", "messages", "store_id",
     _not_numbers("created_at", "ingested_at") + " OR " + _not_counts("token_count")),
    ("summary nodes with a time or count that is not a number", "summary_nodes", "node_id",
     _not_numbers("created_at") + " OR " + _not_numbers("earliest_at", "latest_at", nullable=True)
     + " OR " + _not_counts("depth", "token_count", "source_token_count")),
    ("sessions with a time or count that is not a number", "sessions", "session_id",
     _not_counts("frontier_store_id", "ingest_len") + " OR (rotated_frontier IS NOT NULL AND ("
     + _not_counts("rotated_frontier") + ")) OR " + _not_numbers("created_at", "updated_at")
     + " OR " + _not_numbers("ended_at", nullable=True)),
)
# A server keeps JSON in TEXT columns, and before PostgreSQL 16 has no test of JSON text that does
# not raise: this session-local function names a text's JSON shape ('invalid' when it is none;
# 'objects' for an array of objects), with Python's NaN and infinities read as numbers as trove does.
_JSON_SHAPE = """CREATE OR REPLACE FUNCTION pg_temp.trove_json_shape(t TEXT) RETURNS TEXT LANGUAGE plpgsql AS $$
DECLARE v json;
BEGIN
    v := replace(replace(t, 'NaN', '0'), 'Infinity', '0')::json;
    IF json_typeof(v) = 'array' AND NOT EXISTS
        (SELECT 1 FROM json_array_elements(v) e WHERE json_typeof(e) <> 'object') THEN RETURN 'objects'; END IF;
    RETURN json_typeof(v);
EXCEPTION WHEN others THEN RETURN 'invalid';
END $$"""
_DAMAGED_SERVER = (
    ("messages with a column that is not JSON", "messages", "store_id",
     "(tool_calls IS NOT NULL AND pg_temp.trove_json_shape(tool_calls) <> 'objects')"
     " OR (extra IS NOT NULL AND pg_temp.trove_json_shape(extra) <> 'object')"
     " OR (content_is_json <> 0 AND pg_temp.trove_json_shape(content) NOT IN ('array', 'object', 'objects'))"),
    ("messages with a time or count that is not a number", "messages", "store_id",
     _not_finite("created_at", "ingested_at") + f" OR token_count NOT BETWEEN 0 AND {MAX_COUNT}"),
    ("summary nodes with a time or count that is not a number", "summary_nodes", "node_id",
     _not_finite("created_at", "earliest_at", "latest_at") + " OR LEAST(depth, token_count, source_token_count) < 0"
     f" OR GREATEST(depth, token_count, source_token_count) > {MAX_COUNT}"),
    ("sessions with a time or count that is not a number", "sessions", "session_id",
     _not_finite("created_at", "updated_at", "ended_at")
     + " OR LEAST(frontier_store_id, ingest_len, rotated_frontier) < 0"),
)


def damaged_rows(conn: sqlite3.Connection, limit: int = 5) -> dict[str, tuple[int, list[Any]]]:
    """Each kind of damaged row found: how many, and the ids of the first ``limit``."""
    out: dict[str, tuple[int, list[Any]]] = {}
    checks: Sequence[tuple[str, str, str, str]] = _DAMAGED_SERVER if on_server(conn) else _DAMAGED_SQLITE
    if on_server(conn):
        try:
            conn.execute(_JSON_SHAPE)
        except Exception as exc:  # a role without TEMP, a read-only standby: the other kinds still count
            log.warning("trove doctor: JSON columns not checked: the server refused a session function: %s", exc)
            checks = checks[1:]
    for kind, table, key, where in checks:
        ids = [r[0] for r in conn.execute(f"SELECT {key} FROM {table} WHERE {where} ORDER BY {key}")]
        if ids:
            out[kind] = (len(ids), ids[:limit])
    return out


def lifecycle_counts(conn: sqlite3.Connection) -> tuple[int, int]:
    """Session rows, and how many of them have a frontier beyond their newest message."""
    sessions = conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
    beyond = conn.execute(
        f"SELECT COUNT(*) FROM sessions s WHERE {sane('s.frontier_store_id')} > COALESCE("
        "(SELECT MAX(store_id) FROM messages m WHERE m.session_id = s.session_id), 0)").fetchone()[0]
    return int(sessions), int(beyond)


@dataclass(frozen=True)
class MessageSize:
    """Metadata of one stored message, never its content."""

    store_id: int
    session_id: str
    role: str
    token_count: int
    chars: int


def largest_messages(conn: sqlite3.Connection, limit: int = 5) -> list[MessageSize]:
    count = sane("token_count")  # a damaged count is none of the largest
    rows = conn.execute(f"SELECT store_id, session_id, role, {count}, length(trove_text(content)) FROM messages"
                        f" WHERE store_id IN (SELECT store_id FROM messages ORDER BY {count} DESC LIMIT ?)"
                        f" ORDER BY {count} DESC", (int(limit),))  # only these rows are unpacked
    return [MessageSize(int(r[0]), str(r[1]), str(r[2]), int(r[3]), int(r[4] or 0)) for r in rows]


# -- per-session footprints and clean-up (hygiene) ---------------------------------------------

@dataclass(frozen=True)
class Footprint:
    """What one session holds in the database."""

    session_id: str
    platform: str
    messages: int
    tokens: int
    nodes: int
    carried: int
    last_at: float | None

    @property
    def empty(self) -> bool:
        return not (self.messages or self.nodes or self.carried)


def footprints(conn: sqlite3.Connection) -> list[Footprint]:
    """One footprint per session known to any table (aggregate queries, read-only)."""
    msgs = {r[0]: r for r in conn.execute(
        f"SELECT session_id, COUNT(*), COALESCE(SUM({sane('token_count')}),0), MIN(created_at), MAX(created_at),"
        " MAX(platform) FROM messages GROUP BY session_id")}
    nodes = dict(conn.execute("SELECT session_id, COUNT(*) FROM summary_nodes GROUP BY session_id").fetchall())
    carried = dict(conn.execute("SELECT session_id, COUNT(*) FROM carried_nodes GROUP BY session_id").fetchall())
    rows = {r[0]: r for r in conn.execute("SELECT session_id, platform, created_at, updated_at FROM sessions")}
    out = []
    for sid in sorted(set(msgs) | set(nodes) | set(carried) | set(rows)):
        m, s = msgs.get(sid), rows.get(sid)
        times = [t for t in ((m[3], m[4]) if m else ()) + ((s[2], s[3]) if s else ()) if isinstance(t, (int, float))]
        out.append(Footprint(sid, (s[1] if s and s[1] else (m[5] if m else "")) or "",
                             int(m[1]) if m else 0, int(m[2]) if m else 0, int(nodes.get(sid, 0)),
                             int(carried.get(sid, 0)), max(times, default=None)))
    return out


def _links(conn: sqlite3.Connection, sql: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for a, b in conn.execute(sql):
        out.setdefault(str(a), set()).add(str(b))
    return out


def carried_into(conn: sqlite3.Connection) -> dict[str, set[str]]:
    """Owner session -> the other sessions its summary nodes were carried into."""
    return _links(conn, "SELECT DISTINCT n.session_id, c.session_id FROM carried_nodes c"
                        " JOIN summary_nodes n ON n.node_id = c.node_id WHERE c.session_id != n.session_id")


def continued_by(conn: sqlite3.Connection) -> dict[str, set[str]]:
    """Session -> the other sessions that name it as their previous one (they continue it)."""
    return _links(conn, "SELECT previous_session_id, session_id FROM sessions"
                        " WHERE previous_session_id IS NOT NULL AND previous_session_id != session_id")


def session_tables(conn: sqlite3.Connection) -> list[str]:
    """Core per-session tables first, then any other plain table keyed by ``session_id``."""
    if on_server(conn):
        keyed = [str(r[0]) for r in conn.execute(
            "SELECT c.table_name FROM information_schema.columns c JOIN information_schema.tables t"
            " ON t.table_schema = c.table_schema AND t.table_name = c.table_name WHERE c.table_schema ="
            " current_schema() AND c.column_name = 'session_id' AND t.table_type = 'BASE TABLE' ORDER BY 1")]
        return [*CORE_SESSION_TABLES, *(n for n in keyed if n not in CORE_SESSION_TABLES)]
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND sql NOT LIKE"
                                        " 'CREATE VIRTUAL%' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
    extra = [n for n in names if n not in CORE_SESSION_TABLES and any(
        c[1] == "session_id" for c in conn.execute(f"PRAGMA table_info({n})"))]
    return [*CORE_SESSION_TABLES, *extra]


@dataclass(frozen=True)
class DeletedSessions:
    sessions: tuple[str, ...]
    rows_by_table: dict[str, int]


def delete_sessions(db: Database, choose: Callable[[sqlite3.Connection], Sequence[str]]) -> DeletedSessions:
    """One write transaction: ``choose`` names the sessions under the write lock, then their rows go."""
    with db.transaction() as conn:
        doomed = tuple(choose(conn))
        tables = session_tables(conn)
        counts = {t: 0 for t in tables}
        for sid in doomed:
            for table in tables:
                counts[table] += conn.execute(f"DELETE FROM {table} WHERE session_id=?", (sid,)).rowcount
    return DeletedSessions(doomed, counts)


def blank_source_counts(conn: sqlite3.Connection) -> list[tuple[str, int]]:
    """``(session_id, rows)`` of messages with a blank ``source``, most rows first."""
    rows = conn.execute("SELECT session_id, COUNT(*) FROM messages WHERE source = '' OR source IS NULL"
                        " GROUP BY session_id ORDER BY COUNT(*) DESC")
    return [(str(r[0]), int(r[1])) for r in rows]


def fill_blank_source(db: Database, value: str) -> int:
    """Set every blank ``messages.source`` to ``value``; returns the rows changed."""
    with db.transaction() as conn:
        return int(conn.execute("UPDATE messages SET source=? WHERE source = '' OR source IS NULL",
                                (value,)).rowcount)


# -- rotate ------------------------------------------------------------------------------------

def newest_roles(conn: sqlite3.Connection, session_id: str, limit: int) -> list[tuple[int, str]]:
    """``(store_id, role)`` of a session's newest raw rows, newest first."""
    return [(int(r[0]), str(r[1])) for r in conn.execute(
        "SELECT store_id, role FROM messages WHERE session_id=? ORDER BY store_id DESC LIMIT ?",
        (session_id, int(limit)))]


def count_between(conn: sqlite3.Connection, session_id: str, after: int, upto: int) -> int:
    """Raw rows of a session with ``after < store_id <= upto``."""
    return int(conn.execute("SELECT COUNT(*) FROM messages WHERE session_id=? AND store_id>? AND store_id<=?",
                            (session_id, int(after), int(upto))).fetchone()[0])


def session_payload_rows(conn: sqlite3.Connection, session_id: str, limit: int) -> list[tuple[int, str]]:
    """``(store_id, content)`` of a session's rows holding a payload placeholder, newest first."""
    rows = conn.execute("SELECT store_id, trove_text(content) FROM messages WHERE session_id=? AND"
                        " trove_text(content) LIKE '%[trove:%ref=trove-%' ORDER BY store_id DESC LIMIT ?",
                        (session_id, int(limit)))
    return [(int(r[0]), str(r[1])) for r in rows]


def unscoped_sessions(conn: sqlite3.Connection, limit: int = 5) -> tuple[int, list[str]]:
    """Sessions with no owner scope (a gateway row without a session key): how many, and a few ids."""
    total = int(conn.execute("SELECT COUNT(*) FROM sessions WHERE scope = ''").fetchone()[0])
    ids = [str(r[0]) for r in conn.execute("SELECT session_id FROM sessions WHERE scope = '' ORDER BY updated_at DESC"
                                           " LIMIT ?", (int(limit),))]
    return total, ids


# -- the newest compaction as the store shows it (status) ---------------------------------------

@dataclass(frozen=True)
class WrittenNode:
    """One summary node a compaction wrote: when, at what depth, its size, the raw messages beneath it
    (each once: an imported leaf may name a message twice, and leaves under one node may overlap)."""
    node_id: int
    depth: int
    created_at: float | None
    tokens: int
    source_tokens: int
    first_store_id: int
    last_store_id: int
    messages: int


_ID = f"CASE WHEN {an_id('nm.store_id')} THEN nm.store_id END"  # as SummaryDAG.source_ids reads a lineage cell


def newest_nodes(conn: sqlite3.Connection, session_id: str, limit: int) -> list[WrittenNode]:
    """The session's own summary nodes (not those carried in), newest first, each with the store ids it covers."""
    rows = conn.execute(f"SELECT node_id, {sane('depth')}, created_at, {sane('token_count')},"
                        f" {sane('source_token_count')} FROM summary_nodes WHERE session_id = ?"
                        " ORDER BY node_id DESC LIMIT ?", (session_id, int(limit))).fetchall()
    cover = ("WITH RECURSIVE sub(id) AS (SELECT CAST(? AS BIGINT) UNION SELECT c.child_id FROM node_children c"
             " JOIN sub ON c.node_id = sub.id)"
             f" SELECT MIN({_ID}), MAX({_ID}), COUNT(DISTINCT {_ID})"  # a damaged lineage id is left out
             " FROM node_messages nm JOIN sub ON nm.node_id = sub.id")
    out = []
    for node_id, depth, created, tokens, source_tokens in rows:
        first, last, count = conn.execute(cover, (int(node_id),)).fetchone()
        out.append(WrittenNode(int(node_id), int(depth), calendar_time(created), int(tokens), int(source_tokens),
                               int(first or 0), int(last or 0), int(count or 0)))
    return out
