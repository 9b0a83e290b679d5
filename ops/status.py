"""Status: one read-only dict describing the runtime, the bound session and the database.

``build_status`` backs the ``trove_status`` tool, ``/trove status`` and the CLI. It reads
engine facts only through ``engine.snapshot()`` and storage only through the runtime's
store/DAG; with no engine (CLI, or before any session binds) it says ``(unbound)``.
"""
from __future__ import annotations

import functools
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from .. import tokens
from ..config import public_view
from ..version import __version__
from .maintenance import fts_health

UNBOUND = "(unbound)"


@functools.lru_cache(maxsize=8)
def git_identity(path: str) -> dict[str, Any]:
    """Best-effort commit/branch/dirty of a plugin checkout; nulls when ``path`` is not one."""
    none: dict[str, Any] = {"plugin_git_commit": None, "plugin_git_branch": None, "plugin_git_dirty": None}

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", path, *args], capture_output=True, text=True, timeout=2,
                                 env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"})
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    top = git("rev-parse", "--show-toplevel")
    if not top or Path(top).resolve() != Path(path).resolve():
        return none  # not a checkout, or a folder inside some unrelated repository
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return {"plugin_git_commit": git("rev-parse", "HEAD"),
            "plugin_git_branch": git("rev-parse", "--abbrev-ref", "HEAD"),
            "plugin_git_dirty": None if dirty is None else bool(dirty)}


def _size(path: str) -> int | None:
    try:
        return os.path.getsize(path)
    except OSError:
        return None


def _runtime_section(runtime: Any) -> dict[str, Any]:

    path = runtime.db.path
    section: dict[str, Any] = {"plugin_version": __version__, "plugin_path": runtime.plugin_path,
                               **git_identity(runtime.plugin_path), "database_path": path,
                               "database_bytes": _size(path), "wal_bytes": _size(path + "-wal"),
                               "token_counter": tokens.backend()}
    try:
        section["schema_migrations"] = runtime.db.applied_migrations()
        section["fts"] = fts_health(runtime.db.read())
        section["healthy"] = True
    except Exception as exc:  # a broken database is reported, not raised
        section["healthy"] = False
        section["error"] = f"{type(exc).__name__}: {exc}"
    return section


def _pressure(snap: dict[str, Any]) -> dict[str, Any]:
    threshold = snap.get("threshold_tokens")
    last = int(snap.get("last_prompt_tokens") or 0)
    if not isinstance(threshold, int) or threshold <= 0:
        return {"last_prompt_tokens": last, "threshold_tokens": threshold, "ratio": None}
    return {"last_prompt_tokens": last, "threshold_tokens": threshold, "ratio": round(last / threshold, 3)}


def _filters_section(runtime: Any, session_id: str | None, platform: str) -> dict[str, Any]:
    f = runtime.filters
    ignored = f.ignored_by(session_id, platform) if session_id else None
    stateless = f.stateless_by(session_id, platform) if session_id and not ignored else None
    return {"ignore_session_patterns": list(f.ignore), "stateless_session_patterns": list(f.stateless),
            "ignore_message_patterns": list(f.message_patterns), "message_filter_state": f.message_filter_state,
            "invalid_message_patterns": list(f.invalid_patterns),
            "current_session_ignored": bool(ignored), "current_session_stateless": bool(stateless),
            "matched_pattern": ignored or stateless or None,
            "ignored_message_count": int(runtime.counters.get("ignored_message_count", 0))}


def _lifecycle(runtime: Any, session_id: str) -> dict[str, Any]:
    row = runtime.store.session(session_id)
    if row is None:
        return {"recorded": False}
    backup = row.last_rotate_backup
    return {"recorded": True, "frontier_store_id": row.frontier_store_id, "ingest_len": row.ingest_len,
            "previous_session_id": row.previous_session_id, "created_at": row.created_at,
            "updated_at": row.updated_at, "ended_at": row.ended_at, "last_rotate_at": row.last_rotate_at,
            "last_rotate_backup": backup, "last_rotate_backup_bytes": _size(backup) if backup else None}


def build_status(engine: Any = None, runtime: Any = None, session_id: str | None = None,
                 snapshot: Any = None) -> dict[str, Any]:
    """Everything an operator asks first; never raises for a missing engine or session."""
    runtime = runtime if runtime is not None else getattr(engine, "runtime", None)
    if runtime is None:
        return {"session_id": UNBOUND, "error": "no runtime"}
    snap = dict(snapshot) if snapshot is not None else engine.snapshot() if engine is not None else {}
    sid = session_id or (snap.get("session_id") if snap.get("session_id") not in (None, "", UNBOUND) else None)
    platform = str(snap.get("platform") or "")
    status: dict[str, Any] = {"session_id": sid or UNBOUND, "bound": bool(sid), "generated_at": time.time(),
                              "runtime": _runtime_section(runtime)}
    if engine is not None:
        status["engine"] = snap
        status["context_pressure"] = _pressure(snap)
    else:
        status["engine"] = {"session_id": UNBOUND, "note": "no engine has bound a session in this process"}
    try:
        conn = runtime.db.read()
        totals = conn.execute("SELECT COUNT(*), COALESCE(SUM(token_count),0) FROM messages").fetchone()
        status["store"] = {"total_messages": int(totals[0]), "total_tokens": int(totals[1]),
                           "total_sessions": int(conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]),
                           "total_nodes": int(conn.execute("SELECT COUNT(*) FROM summary_nodes").fetchone()[0])}
        if sid:
            if not platform and (row := runtime.store.session(sid)) is not None:
                platform = row.platform
            status["store"]["session"] = runtime.store.stats(sid)
            depths = runtime.dag.depth_stats(sid)
            status["dag"] = {"nodes": sum(d["count"] for d in depths.values()),
                             "tokens": sum(d["tokens"] for d in depths.values()),
                             "source_tokens": sum(d["source_tokens"] for d in depths.values()),
                             "depths": {f"d{k}": v for k, v in depths.items()}}
            status["lifecycle"] = _lifecycle(runtime, sid)
    except Exception as exc:
        status["store_error"] = f"{type(exc).__name__}: {exc}"
    status["session_filters"] = _filters_section(runtime, sid, platform)
    from .doctor import _redaction

    status["sensitive_patterns"] = _redaction(runtime)
    status["config"] = public_view(runtime.config)
    status["config_warnings"] = list(runtime.config.warnings)
    return status
