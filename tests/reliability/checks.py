"""Post-run checks shared by the concurrency and SIGKILL tests (and bench/bench_reliability.py)."""
from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

from hermes_trove.ops import doctor
from hermes_trove.payloads.sidecar import digest
from hermes_trove.runtime import Runtime

from .writer import transcript


def store_report(runtime: Runtime, session: str, upto: int) -> dict[str, Any]:
    """Lost and duplicated messages of the deterministic transcript, lineage and index health."""
    want = Counter((m["role"], m.get("content") or "") for m in transcript(upto))
    rows = runtime.store.page(session, 0, 1_000_000)
    have = Counter((r.role, r.content) for r in rows)
    # an externalized tool row keeps a stub naming the digest of what it replaced
    by_digest = {f"sha256={digest(k[1])[:12]}]": k for k in want if k[0] == "tool"}
    for (role, content), n in list(have.items()):
        if role == "tool" and content.startswith("[trove:externalized"):
            original = next((k for tag, k in by_digest.items() if tag in content.split("\n", 1)[0]), None)
            if original is not None:
                have.pop((role, content))
                have[original] += n
    conn = runtime.db.read()
    integrity, fts_ok = index_health(conn, runtime.db.kind)
    return {"stored": sum(have.values()), "expected": sum(want.values()),
            "lost": sum((want - have).values()), "duplicated": sum((have - want).values()),
            "multi_parent": len(runtime.dag.multi_parent_nodes(conn)),
            "overlapping": sum(runtime.dag.overlapping_frontier(conn).values()),
            "integrity": integrity, "fts_ok": fts_ok}


def index_health(conn: Any, kind: str) -> tuple[str, bool]:
    """The file's integrity check and the FTS5 indexes' own (SQLite), or on a server: every message
    and summary has exactly its search doc (no file to check)."""
    if kind != "sqlite":
        missing = conn.execute(
            "SELECT (SELECT COUNT(*) FROM messages m WHERE NOT EXISTS (SELECT 1 FROM message_search s"
            " WHERE s.store_id = m.store_id)) + (SELECT COUNT(*) FROM summary_nodes n WHERE NOT EXISTS"
            " (SELECT 1 FROM node_search s WHERE s.node_id = n.node_id))").fetchone()[0]
        return "ok", int(missing) == 0
    fts_ok = True
    for fts in ("messages_fts", "nodes_fts"):
        try:
            conn.execute(f"INSERT INTO {fts}({fts}, rank) VALUES ('integrity-check', 1)")
        except sqlite3.DatabaseError:
            fts_ok = False
    return str(conn.execute("PRAGMA integrity_check").fetchone()[0]), fts_ok


def doctor_report(runtime: Runtime) -> dict[str, str]:
    report = doctor.run_doctor(runtime)
    return {"overall": report["overall"],
            **{c["check"]: c["status"] for c in report["checks"] if c["status"] != "pass"}}


def temp_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("*.tmp")) if directory.is_dir() else []
