#!/usr/bin/env python3
"""Pre-create payload sidecars for large tool rows already stored in a trove.db.

Dry run by default; ``--apply`` writes sidecars (never SQLite) and a scrubbed manifest of
digests and counts; repeating it is a no-op. ``--rollback MANIFEST [--apply]`` removes only
the sidecars that manifest created, when their digest still matches and no row refers to them.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MANIFEST_FORMAT = "trove-backfill-manifest/1"


sys.path.insert(0, str(Path(__file__).resolve().parent))
import _bootstrap  # noqa: E402,F401  (registers this checkout as the hermes_trove package)

from hermes_trove.config import load_config, payload_dir  # noqa: E402
from hermes_trove.db import SchemaTooNewError, open_trove_readonly  # noqa: E402
from hermes_trove.payloads import sidecar as payloads  # noqa: E402


class Refused(Exception):
    """The run cannot proceed safely; nothing was changed."""


def open_read_only(db: Path) -> sqlite3.Connection:
    # Read-only by construction: this script must never write the database it inspects.
    if not db.is_file():
        raise Refused(f"database not found: {db}")
    try:
        conn = open_trove_readonly(db)
    except SchemaTooNewError as exc:
        raise Refused(str(exc)) from None
    except sqlite3.DatabaseError as exc:
        raise Refused(f"{db} is not a hermes-trove database ({exc})") from None
    try:
        conn.execute("SELECT store_id, session_id, role, content, content_is_json, tool_call_id FROM messages LIMIT 0")
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise Refused(f"{db} is not a hermes-trove database ({exc})") from None
    return conn


@contextlib.contextmanager
def directory_lock(directory: Path) -> Iterator[None]:
    """One backfill or rollback per payload directory at a time."""
    import fcntl

    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(directory / ".backfill.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise Refused(f"another backfill holds {directory / '.backfill.lock'}") from None
        yield
    finally:
        os.close(fd)


@dataclasses.dataclass(frozen=True)
class Candidate:
    store_id: int
    session_id: str
    tool_call_id: str | None
    content: str


def candidates(conn: sqlite3.Connection, threshold: int) -> Iterator[Candidate]:
    rows = conn.execute("SELECT store_id, session_id, tool_call_id, trove_text(content) AS content FROM messages"
                        " WHERE role='tool' AND content_is_json=0 AND length(trove_text(content)) > ?"
                        " ORDER BY store_id", (threshold,))
    for r in rows:
        if not payloads.EXTERNALIZED_HEAD.match(r["content"]):
            yield Candidate(int(r["store_id"]), str(r["session_id"]), r["tool_call_id"], r["content"])


def backfill(db: Path, directory: Path, threshold: int, apply: bool) -> dict[str, Any]:
    conn = open_read_only(db)
    counts = {"scanned": 0, "eligible": 0, "created": 0, "would_create": 0, "already_present": 0, "failed": 0}
    entries: list[dict[str, Any]] = []
    scanned = conn.execute("SELECT COUNT(*) FROM messages WHERE role='tool'").fetchone()[0]
    counts["scanned"] = int(scanned)
    lock = directory_lock(directory) if apply else contextlib.nullcontext()
    with lock:
        for c in candidates(conn, threshold):
            counts["eligible"] += 1
            ref = payloads.ref_for(c.session_id, c.content)
            entry = {"store_id": c.store_id, "ref": ref, "sha256": payloads.digest(c.content), "chars": len(c.content)}
            try:
                payloads.load_record(directory, ref)
                action = "already_present"
            except payloads.PayloadError:
                action = "would_create"
                if apply:
                    try:
                        payloads.write_payload(directory, c.session_id, c.content, kind="tool_result",
                                               meta={"role": "tool", "tool_call_id": c.tool_call_id,
                                                     "backfilled": True})
                        action = "created"
                    except OSError as exc:
                        action = "failed"
                        entry["error"] = exc.strerror or type(exc).__name__
            counts[action] += 1
            entries.append({**entry, "action": action})
    conn.close()
    return {"format": MANIFEST_FORMAT, "mode": "apply" if apply else "dry-run", "created_at": time.time(),
            "db": str(db.resolve()), "payload_dir": str(directory.resolve()), "threshold_chars": threshold,
            "counts": counts, "entries": entries}


def rollback(manifest: dict[str, Any], db: Path, directory: Path, apply: bool) -> dict[str, Any]:
    if manifest.get("format") != MANIFEST_FORMAT or not isinstance(manifest.get("entries"), list):
        raise Refused("not a backfill manifest")
    conn = open_read_only(db)
    counts = {"removed": 0, "would_remove": 0, "kept_referenced": 0, "kept_changed": 0, "already_gone": 0,
              "skipped_invalid": 0}
    results: list[dict[str, Any]] = []
    with directory_lock(directory) if apply else contextlib.nullcontext():
        for entry in manifest["entries"]:
            if not isinstance(entry, dict) or entry.get("action") != "created":
                continue
            ref = entry.get("ref")
            try:
                payloads.validate_ref(ref)
            except payloads.PayloadError:
                counts["skipped_invalid"] += 1
                continue
            try:
                record = payloads.load_record(directory, ref)
                changed = record.get("sha256") != entry.get("sha256")
            except payloads.PayloadError as exc:
                if "not found" in str(exc):
                    action = "already_gone"
                    counts[action] += 1
                    results.append({"ref": ref, "action": action})
                    continue
                changed = True  # damaged or replaced since: leave it for an operator to inspect
            referenced = conn.execute("SELECT 1 FROM messages WHERE instr(trove_text(content), ?) > 0"
                                      " OR instr(tool_calls, ?) > 0"
                                      " LIMIT 1", (ref, ref)).fetchone() is not None
            if changed:
                action = "kept_changed"
            elif referenced:
                action = "kept_referenced"  # a row now points at this sidecar: removing it would lose data
            elif apply:
                os.unlink(directory / ref)
                action = "removed"
            else:
                action = "would_remove"
            counts[action] += 1
            results.append({"ref": ref, "action": action})
    conn.close()
    return {"format": MANIFEST_FORMAT + "+rollback", "mode": "apply" if apply else "dry-run",
            "payload_dir": str(directory.resolve()), "counts": counts, "entries": results}


def write_manifest(path: Path, report: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(report, fh, indent=1, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--db", required=True, type=Path, help="trove.db to read (never written)")
    p.add_argument("--apply", action="store_true", help="write sidecars / remove them on --rollback")
    p.add_argument("--manifest", type=Path, help="where to write the manifest (default beside the db on --apply)")
    p.add_argument("--rollback", type=Path, metavar="MANIFEST", help="undo the sidecars a manifest created")
    p.add_argument("--threshold-chars", type=int, help="tool rows longer than this are backfilled")
    p.add_argument("--payload-dir", type=Path, help="payload directory (default: as the plugin resolves it)")
    p.add_argument("--json", action="store_true", help="print the full report as JSON")
    args = p.parse_args(argv)
    if args.threshold_chars is not None and args.threshold_chars < 1:
        p.error("--threshold-chars must be a positive integer")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config = dataclasses.replace(load_config(os.environ), database_path=str(args.db))
    directory = args.payload_dir or payload_dir(config)
    try:
        if args.rollback:
            manifest = json.loads(args.rollback.read_text(encoding="utf-8"))
            if not args.payload_dir and isinstance(manifest, dict) and manifest.get("payload_dir"):
                directory = Path(manifest["payload_dir"])
            report = rollback(manifest, args.db, directory, args.apply)
        else:
            threshold = args.threshold_chars or int(config.large_output_externalization_threshold_chars)
            report = backfill(args.db, directory, threshold, args.apply)
            target = args.manifest or (args.db.with_name(f"{args.db.name}.backfill-{int(time.time())}.json")
                                       if args.apply else None)
            if target is not None:
                write_manifest(target, report)
                report["manifest"] = str(target)
    except Refused as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, indent=1, sort_keys=True))
    else:
        counts = ", ".join(f"{k}={v}" for k, v in report["counts"].items())
        print(f"{report['mode']}: {counts}")
        if report.get("manifest"):
            print(f"manifest: {report['manifest']}")
    return 1 if report["counts"].get("failed") else 0


if __name__ == "__main__":
    sys.exit(main())
