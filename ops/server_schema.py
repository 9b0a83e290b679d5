"""A PostgreSQL store's structure and search-index health, where SQLite has ``sqlite_master``.

The expected tables, indexes and triggers are read from the applied migrations' statements;
search health compares ``pgtext``'s side tables with the base rows. ``repair`` recreates what is
missing and rebuilds the side tables, in the caller's transaction.
"""
from __future__ import annotations

import re
from typing import Any

from .. import pgschema, pgtext
from ..db import FtsSync

# Side table -> (base table, id column): pgtext keeps one search document per base row.
SEARCH_TABLES: dict[str, tuple[str, str]] = {"message_search": ("messages", "store_id"),
                                             "node_search": ("summary_nodes", "node_id")}
KINDS = ("tables", "indexes", "triggers")
REBUILD_CHUNK = 500
_CREATE = re.compile(r"\s*CREATE\s+(TABLE|INDEX|TRIGGER)\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.IGNORECASE)
_PLURAL = {"TABLE": "tables", "INDEX": "indexes", "TRIGGER": "triggers"}


def expected(conn: Any) -> dict[str, dict[str, str]]:
    """kind -> name -> the statement that creates it, over the core and applied opt-in migrations."""
    applied = set(pgschema.applied_names(conn))
    entries = [*pgschema.migrations(), *(e for feature in pgschema.OPTIONAL.values() for e in feature
                                         if e[0] in applied)]
    out: dict[str, dict[str, str]] = {kind: {} for kind in KINDS}
    for _, statements in entries:
        for statement in statements:
            m = _CREATE.match(statement)
            if m is not None:
                out[_PLURAL[m.group(1).upper()]].setdefault(m.group(2), statement)
    return out


def present(conn: Any) -> dict[str, set[str]]:
    """kind -> the names the store's schema (the first on its search_path) holds."""
    tables = {str(r[0]) for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}
    indexes = {str(r[0]) for r in conn.execute("SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()")}
    triggers = {str(r[0]) for r in conn.execute(
        "SELECT t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
        " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND NOT t.tgisinternal")}
    return {"tables": tables, "indexes": indexes, "triggers": triggers}


def missing(conn: Any) -> dict[str, tuple[str, ...]]:
    """kind -> expected names the schema lacks; a missing search side table is listed under "search"."""
    want, have = expected(conn), present(conn)
    gone = {kind: tuple(sorted(set(want[kind]) - have[kind])) for kind in KINDS}
    gone["search"] = tuple(t for t in gone["tables"] if t in SEARCH_TABLES)
    gone["tables"] = tuple(t for t in gone["tables"] if t not in SEARCH_TABLES)
    return gone


def search_sync(conn: Any, side: str, exact: bool = True) -> FtsSync:
    """Row agreement between a side table and its base table (``exact`` adds the anti-join counts)."""
    base, key = SEARCH_TABLES[side]
    # One statement, so one snapshot: counts read apart disagree whenever another writer commits between.
    exact_sql = (f"(SELECT COUNT(*) FROM {base} b WHERE NOT EXISTS (SELECT 1 FROM {side} s WHERE s.{key} = b.{key})),"
                 f" (SELECT COUNT(*) FROM {side} s WHERE NOT EXISTS (SELECT 1 FROM {base} b WHERE b.{key} = s.{key}))"
                 ) if exact else "0, 0"
    row = conn.execute(f"SELECT (SELECT COUNT(*) FROM {base}), (SELECT COUNT(*) FROM {side}), {exact_sql}").fetchone()
    return FtsSync(side, *(int(v) for v in row))


def search_problem(sync: FtsSync) -> str | None:
    """What the exact counts say is wrong with one side table, or None (the deep check's verdict)."""
    return None if sync.ok else (f"{sync.unindexed} of {sync.content_rows} rows have no search document,"
                                 f" {sync.ghosts} documents have no row")


def repair(conn: Any) -> list[str]:
    """Recreate missing tables, indexes and triggers, then rebuild every search document and the
    statistics from the base rows; returns the actions. Runs in the caller's transaction."""
    want, gone, actions = expected(conn), missing(conn), []
    for name in (*gone["tables"], *gone["search"]):
        conn.execute(want["tables"][name])
        actions.append(f"created {name}")
    for kind, label in (("indexes", "index "), ("triggers", "trigger ")):
        for name in missing(conn)[kind]:  # a recreated table's own indexes are missing too
            conn.execute(want[kind][name])
            actions.append(f"created {label}{name}")
    for side in SEARCH_TABLES:
        rebuild(conn, side)
        actions.append(f"rebuilt {side}")
    pgtext.refresh_stats(conn, full=True)
    actions.append("refreshed search statistics")
    return actions


def rebuild(conn: Any, side: str) -> int:
    """Every search document of ``side`` made anew from its base rows (documents without a row go)."""
    base, key = SEARCH_TABLES[side]
    conn.execute(f"DELETE FROM {side} s WHERE NOT EXISTS (SELECT 1 FROM {base} b WHERE b.{key} = s.{key})")
    columns = "store_id, content, tool_calls" if side == "message_search" else "node_id, summary"
    index = pgtext.index_messages if side == "message_search" else pgtext.index_nodes
    done, last = 0, 0
    while True:
        rows = conn.execute(f"SELECT {columns} FROM {base} WHERE {key} > ? ORDER BY {key} LIMIT ?",
                            (last, REBUILD_CHUNK)).fetchall()
        if not rows:
            return done
        done += index(conn, [tuple(r) for r in rows])
        last = int(rows[-1][0])
