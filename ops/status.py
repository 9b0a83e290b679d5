"""Status and inspect: read-only reports built from named sections.

``build_status`` backs ``trove_status``, ``/trove status`` and the CLI (``overall`` is "unhealthy"
when the store is unusable: the CLI exits 1); ``build_inspect`` backs ``trove_inspect``. Engine
facts arrive as the ``snapshot`` dict; with none the report says ``(unbound)``.
"""
from __future__ import annotations

import os
import sqlite3
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .. import subsystems, tokens
from ..config import public_view
from ..pathprobe import probe_path
from ..payloads.redact import describe_config
from ..payloads.sidecar import payload_home
from ..rows import calendar_time
from ..runtime import DELEGATED, store_fix
from ..toolkit import iso
from ..version import __version__
from . import install, outbox_ops, queries
from .maintenance import fts_health

if TYPE_CHECKING:
    from ..dag import NodeRow
    from ..runtime import Runtime
    from ..subsystems import Subsystem

UNBOUND = "(unbound)"
REASON_CHARS = 1000
NEWEST_NODES = 8  # summary nodes a stored compaction record lists, newest first


def file_size(path: str) -> int | None:
    try:
        return os.path.getsize(path)
    except OSError:
        return None


def bound_session(snapshot: Mapping[str, Any] | None) -> str | None:
    """The session a snapshot names, or None when the engine has bound none."""
    sid = (snapshot or {}).get("session_id")
    return None if sid in (None, "", UNBOUND) else str(sid)


def unknown_session(session_id: str) -> str:
    """What to say when an operator names a session id the store has no row for."""
    return (f"no session {session_id!r} in this store: check the id (Hermes prints it as "
            "`session_id:` when a chat ends; `/trove status` or `trove_status` in a chat names its own)")


# -- sections ---------------------------------------------------------------------------------

def runtime_section(runtime: Runtime, offline: str = "") -> dict[str, Any]:
    """Plugin identity, database files and health; a broken database is reported, not raised, and
    an ``offline`` server (the reason) is not asked again."""
    path = runtime.db.path
    section: dict[str, Any] = {"plugin_version": __version__, "plugin_path": runtime.plugin_path,
                               **install.git_identity(runtime.plugin_path), "database_path": path,
                               "backend": runtime.db.kind, "token_counter": tokens.backend()}
    section["payload_store"] = payload_home(runtime)  # sidecar files, or a server store's payloads table
    shipper = getattr(runtime.store, "shipper", None)
    if shipper is None:
        section.update(database_bytes=file_size(path), wal_bytes=file_size(path + "-wal"))
    else:
        if not offline:  # what waits ships first (as before the totals), so the outbox figures are after it
            queries.settled(runtime)
        section["outbox"] = shipper.status()
        if section["outbox"]["set_aside"]["rows"]:  # a warning with its fix: nothing ships them by itself
            section["outbox"]["set_aside"].update(warning=outbox_ops.described(section["outbox"]["set_aside"]),
                                                  fix=outbox_ops.fix_text(shipper.outbox.path))
    try:
        if offline:
            raise ConnectionError(offline)
        section["schema_migrations"] = runtime.db.applied_migrations()
        section["fts"] = fts_health(runtime.db.read())
        section["healthy"] = True
    except Exception as exc:  # a broken database is reported, not raised
        section["healthy"] = False
        section["error"] = f"{type(exc).__name__}: {exc}"
    return section


def health_section(runtime: Runtime) -> dict[str, Any]:
    """Is the store usable? This process's verdict (a live engine found it broken and delegates
    compaction, retrying) or, without one, what the file system (a server: a new connection) says."""
    health, path = runtime.health, runtime.db.path
    shipper = getattr(runtime.store, "shipper", None)
    # a server: a new process has not failed yet, an old failure may be over, so ask the server now
    reason = health.reason or (shipper.probe() if shipper is not None else probe_path(path)) or ""
    section: dict[str, Any] = {"usable": not reason, "database_path": path}
    if not reason:
        return {**section, "state": "ok"}
    if not health.usable:
        state = health.state()
        section.update(retry_in_s=health.retry_in(), failures=health.failures, since=health.since)
    else:  # no live engine here: what a running Hermes does about it
        state = f"unusable: {reason}; while it is, a running Hermes has {DELEGATED}"
    return {**section, "state": state, "reason": reason, "fix": store_fix(path, reason),
            "held_messages": runtime.unstored.count, "dropped_held_messages": runtime.unstored.dropped,
            "held_sessions_on_disk": runtime.unstored.spill.pending() if runtime.unstored.spill else 0}


def pressure_section(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """Last prompt tokens against the compaction threshold; ``ratio`` is None before one is set, and
    while no prompt was measured since the last compaction (the host writes -1 there until the next
    answer reports its usage; ``measured`` is then False and ``note`` says so)."""
    threshold = snapshot.get("threshold_tokens")
    last = int(snapshot.get("last_prompt_tokens") or 0)
    measured = last >= 0
    ratio = round(last / threshold, 3) if isinstance(threshold, int) and threshold > 0 and measured else None
    out: dict[str, Any] = {"last_prompt_tokens": last, "threshold_tokens": threshold, "ratio": ratio,
                           "measured": measured}
    if not measured:
        out["note"] = UNMEASURED
    return out


UNMEASURED = "compacted; no prompt measured since (the next answer reports its size)"


def dag_section(runtime: Runtime, session_id: str) -> dict[str, Any]:
    """Summary nodes visible to a session (own and carried), in total and per depth."""
    depths = runtime.dag.depth_stats(session_id)
    return {"nodes": sum(d["count"] for d in depths.values()),
            "tokens": sum(d["tokens"] for d in depths.values()),
            "source_tokens": sum(d["source_tokens"] for d in depths.values()),
            "depths": {f"d{k}": v for k, v in depths.items()}}


def stored_compaction_section(runtime: Runtime, session_id: str) -> dict[str, Any]:
    """The session's newest compaction as its stored summary nodes show it to any process: a
    ``last_compaction`` section, or nothing while the session has none. What a compress call said
    beyond its nodes (its reason, the host's kept tail) stays with the process that ran it."""
    nodes = queries.newest_nodes(queries.settled(runtime), session_id, NEWEST_NODES)
    if not nodes:
        return {}
    return {"last_compaction": {
        "source": "store", "last_compression_status": "compacted", "written_at": nodes[0].created_at,
        "covered_through_store_id": max(n.last_store_id for n in nodes),
        "newest_nodes": [{"node_id": n.node_id, "depth": n.depth, "written_at": n.created_at,
                          "tokens": n.tokens, "source_tokens": n.source_tokens, "first_store_id": n.first_store_id,
                          "last_store_id": n.last_store_id, "messages": n.messages} for n in nodes]}}


def lifecycle_section(runtime: Runtime, session_id: str) -> dict[str, Any]:
    """The session's lifecycle row: frontier, predecessor, times and the last rotate."""
    row = runtime.store.session(session_id)
    if row is None:
        return {"recorded": False}
    backup = row.last_rotate_backup
    return {"recorded": True, "frontier_store_id": runtime.store.frontier_store_id(session_id),
            "ingest_len": row.ingest_len, "previous_session_id": row.previous_session_id,
            "created_at": calendar_time(row.created_at), "updated_at": calendar_time(row.updated_at),
            "ended_at": calendar_time(row.ended_at), "last_rotate_at": row.last_rotate_at,
            "last_rotate_backup": backup, "last_rotate_backup_bytes": file_size(backup) if backup else None}


def filters_section(runtime: Runtime, session_id: str | None, platform: str) -> dict[str, Any]:
    """Configured session/message patterns and how they apply to ``session_id``."""
    f = runtime.filters
    ignored = f.ignored_by(session_id, platform) if session_id else None
    stateless = f.stateless_by(session_id, platform) if session_id and not ignored else None
    return {"ignore_session_patterns": list(f.ignore), "stateless_session_patterns": list(f.stateless),
            "ignore_message_patterns": list(f.message_patterns), "message_filter_state": f.message_filter_state,
            "invalid_message_patterns": list(f.invalid_patterns),
            "current_session_ignored": bool(ignored), "current_session_stateless": bool(stateless),
            "matched_pattern": ignored or stateless or None,
            "ignored_message_count": int(runtime.counters.get("ignored_message_count", 0))}


def subsystem_section(runtime: Runtime, row: Subsystem) -> dict[str, Any]:
    """A subsystem's status section; a failure is reported in it, not raised."""
    try:
        return row.status(runtime) if row.status is not None else {}
    except Exception as exc:
        return {"enabled": bool(getattr(runtime.config, row.switch)), "error": f"{type(exc).__name__}: {exc}"[:300]}


# -- status -----------------------------------------------------------------------------------

def build_status(runtime: Runtime | None, snapshot: Mapping[str, Any] | None = None,
                 session_id: str | None = None) -> dict[str, Any]:
    """Everything an operator asks first; never raises for a missing engine or session."""
    if runtime is None:
        return {"session_id": UNBOUND, "error": "no runtime"}
    snap = dict(snapshot) if snapshot is not None else {}
    sid = session_id or bound_session(snap)
    platform = str(snap.get("platform") or "")
    health = health_section(runtime)
    offline = str(health.get("reason", "")) if runtime.db.kind != "sqlite" else ""  # no read waits on it again
    status: dict[str, Any] = {"session_id": sid or UNBOUND, "bound": bool(sid), "generated_at": time.time(),
                              "store_health": health, "runtime": runtime_section(runtime, offline),
                              "engine": dict(snapshot) if snapshot is not None else
                              {"session_id": UNBOUND, "note": "no engine has bound a session in this process"}}
    status["overall"] = "healthy" if health["usable"] and status["runtime"]["healthy"] else "unhealthy"
    if snapshot is not None:
        status["context_pressure"] = pressure_section(snap)
    if sid and sid != bound_session(snap):  # no live copy of it speaks: the newest one any copy recorded here
        last, reason, report = runtime.compactions.latest(sid, ("", "", {}))
        if last:
            status["last_compaction"] = {"last_compression_status": last, "last_compression_reason": reason,
                                         "last_compression": report}
    try:
        if offline:
            raise ConnectionError(offline)
        status["store"] = queries.store_totals(queries.settled(runtime))
        if sid:
            row = runtime.store.session(sid)
            if row is None and sid != bound_session(snap):  # a named id the store never saw: a typo?
                status.update(error=unknown_session(sid), bound=False)
            if not platform and row is not None:
                platform = row.platform
            status["store"]["session"] = runtime.store.stats(sid)
            status["dag"] = dag_section(runtime, sid)
            if "last_compaction" not in status and (sid != bound_session(snap) or  # no copy here ran one on it:
                                                    snap.get("last_compression_status") == "idle"):  # another process
                status.update(stored_compaction_section(runtime, sid))
            status["lifecycle"] = lifecycle_section(runtime, sid)
    except Exception as exc:
        status["store_error"] = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, sqlite3.DatabaseError) and health["usable"]:  # the path looked fine; the file would not open
            health.update(usable=False, state=f"unusable: {exc}", reason=str(exc),
                          fix=store_fix(runtime.db.path, str(exc)))
            status["overall"] = "unhealthy"
    status["plugin"] = install.identity_section(runtime, in_host=snapshot is not None)
    for system in subsystems.SUBSYSTEMS:
        if system.status is not None:
            status[system.section] = subsystem_section(runtime, system) if not offline else {"error": "not read"}
    status["session_filters"] = filters_section(runtime, sid, platform)
    status["sensitive_patterns"] = describe_config(runtime.config)
    status["config"] = public_view(runtime.config)
    status["config_warnings"] = list(runtime.config.warnings)
    return status


# -- inspect ----------------------------------------------------------------------------------

def build_inspect(runtime: Runtime, snapshot: Mapping[str, Any] | None, session_id: str,
                  limit: int = 20) -> dict[str, Any]:
    """Metadata of one session (lineage, frontier, fresh tail, compaction, DAG, filters); never content."""
    snap = dict(snapshot) if snapshot is not None else {}
    life = lifecycle_section(runtime, session_id)
    frontier = int(life.get("frontier_store_id") or 0)
    visible = runtime.dag.visible(session_id)
    dag = dag_section(runtime, session_id)
    pressure = pressure_section(snap)
    filters = filters_section(runtime, session_id, str(snap.get("platform") or ""))
    return {
        "read_only": True, "session_id": session_id, "conversation_id": snap.get("conversation_id", ""),
        "platform": snap.get("platform", ""), "session_mode": snap.get("session_mode", ""), "limit": limit,
        "lineage": _lineage(life, visible, session_id, limit),
        "messages": _messages(runtime, session_id, frontier, limit),
        "compaction": {
            "last_status": snap.get("last_compression_status"),
            "last_reason": str(snap.get("last_compression_reason") or "")[:REASON_CHARS],
            "compression_count": snap.get("compression_count"),
            "last_prompt_tokens": pressure["last_prompt_tokens"], "threshold_tokens": pressure["threshold_tokens"],
            "prompt_measured": pressure["measured"],  # False right after a compaction: the host's -1 is no size
            "frontier": {"session_frontier_store_id": frontier,
                         "highest_summarized_store_id": runtime.dag.highest_covered_store_id(session_id)},
        },
        "dag": {"total_nodes": dag["nodes"], "total_tokens": dag["tokens"], "depths": dag["depths"],
                **_dag_nodes(runtime, visible, session_id, limit)},
        "filters": _inspect_filters(filters, snap.get("session_mode")),
        "externalized_refs": externalized_refs_section(runtime, session_id, limit),
        "redaction": describe_config(runtime.config),
        "plugin": install.identity_section(runtime, in_host=snapshot is not None),
        **{row.section: {k: v for k, v in subsystem_section(runtime, row).items() if k not in row.inspect_omits}
           for row in subsystems.SUBSYSTEMS if row.inspect_omits is not None},
    }


def externalized_refs_section(runtime: Runtime, session_id: str, limit: int) -> dict[str, Any]:
    """The session's externalized payload refs (newest rows first) and whether each still reads
    (a file beside a SQLite store, a row of a PostgreSQL store's ``payloads`` table)."""
    from ..payloads.sidecar import PayloadError, check_ref, refs_in

    items: list[dict[str, Any]] = []
    unreadable = 0
    for store_id, content in queries.session_payload_rows(queries.settled(runtime), session_id, limit):
        for ref in refs_in(content):
            try:
                check_ref(runtime, ref)
                items.append({"store_id": store_id, "ref": ref, "readable": True})
            except PayloadError as exc:
                unreadable += 1
                items.append({"store_id": store_id, "ref": ref, "readable": False, "reason": str(exc)[:200]})
    return {"payload_dir": payload_home(runtime), "refs": items[:limit], "unreadable": unreadable,
            "truncated": len(items) > limit}


def _lineage(life: Mapping[str, Any], visible: Sequence[NodeRow], session_id: str, limit: int) -> dict[str, Any]:
    carried_from = Counter(n.session_id for n in visible if n.session_id != session_id)
    carried = sum(carried_from.values())
    return {"previous_session_id": life.get("previous_session_id"),
            "own_nodes": len(visible) - carried, "carried_nodes": carried,
            "carried_from": [{"session_id": s, "nodes": c} for s, c in sorted(carried_from.items())][:limit],
            "session_created_at": iso(life.get("created_at")),
            "session_ended_at": iso(life.get("ended_at")) if life.get("ended_at") else None}


def _messages(runtime: Runtime, session_id: str, frontier: int, limit: int) -> dict[str, Any]:
    """Raw-message counts around the frontier and the fresh tail (metadata of each tail row)."""
    store, cfg = runtime.store, runtime.config
    stats = store.stats(session_id)
    uncompacted = store.count_after(session_id, frontier)
    tail_count = int(cfg.fresh_tail_count)
    tail = store.tail(session_id, tail_count, frontier) if tail_count > 0 else []
    items = [{"store_id": r.store_id, "role": r.role, "token_count": r.token_count, "content_chars": len(r.content),
              "timestamp": iso(r.created_at), **({"tool_name": r.tool_name} if r.tool_name else {})}
             for r in tail[-limit:]]
    return {"total": stats["messages"], "estimated_tokens": stats["tokens"],
            "min_store_id": stats["min_store_id"], "max_store_id": stats["max_store_id"],
            "frontier_store_id": frontier, "uncompacted_count": uncompacted,
            "fresh_tail_count": tail_count, "fresh_tail_max_tokens": int(cfg.fresh_tail_max_tokens),
            "pre_tail_message_count": max(0, uncompacted - len(tail)),
            "fresh_tail": {"messages": len(tail), "tokens": sum(r.token_count for r in tail),
                           "items": items, "items_truncated": len(tail) > limit}}


def _dag_nodes(runtime: Runtime, visible: Sequence[NodeRow], session_id: str, limit: int) -> dict[str, Any]:
    frontier = runtime.dag.frontier(session_id)
    latest = sorted(visible, key=lambda n: n.node_id, reverse=True)[:limit]
    return {"frontier_node_ids": [n.node_id for n in frontier][:limit], "frontier_size": len(frontier),
            "latest_nodes": [{"node_id": n.node_id, "depth": n.depth, "token_count": n.token_count,
                              "source_token_count": n.source_token_count, "level": n.level,
                              "earliest_at": iso(n.earliest_at), "latest_at": iso(n.latest_at),
                              "carried": n.session_id != session_id} for n in latest]}


def _inspect_filters(section: Mapping[str, Any], session_mode: Any) -> dict[str, Any]:
    """The status filter section for one session, with message patterns counted, not listed."""
    shown = {k: v for k, v in section.items() if not k.startswith("current_session_")}
    return {"matched_pattern": shown.pop("matched_pattern"), "session_mode": session_mode, **shown,
            "ignore_message_patterns": len(section["ignore_message_patterns"])}
