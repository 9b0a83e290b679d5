"""The operator command: parse flags, run one import, print the report, pick the exit code.

Exit codes: 0 when the run completed (dry run or apply, even with some invalid rows);
1 when nothing could be imported (missing/locked/unrecognised source, or every row
invalid); 2 for contradictory flags. Nothing escapes as a traceback.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .files import parse_remap
from .report import ImportFailure
from .run import IDENTITIES, ImportOptions, run_import


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="import_lossless_claw.py",
        description="Import OpenClaw history (a lossless-claw SQLite database or OpenClaw JSONL session "
                    "exports) into a hermes-trove database. Dry run unless --apply.")
    src = p.add_argument_group("sources (one kind)")
    src.add_argument("--source-db", help="lossless-claw SQLite database (opened read-only)")
    src.add_argument("--source-jsonl", action="append", default=[], metavar="FILE",
                     help="OpenClaw JSONL session export (repeatable)")
    src.add_argument("--source-jsonl-dir", action="append", default=[], metavar="DIR",
                     help="every *.jsonl under DIR, recursively, in sorted order (repeatable)")
    p.add_argument("--target-db", required=True, help="hermes-trove database to import into (e.g. ~/.hermes/trove.db)")
    p.add_argument("--agent", default="unknown", help="OpenClaw agent label used in provenance (default: unknown)")
    p.add_argument("--namespace",
                   help="provenance prefix (default: openclaw-trove for SQLite, openclaw-jsonl for JSONL)")
    p.add_argument("--session-identity", choices=IDENTITIES, default="session_id",
                   help="SQLite only: group by conversations.session_id (default) or by session_key")
    p.add_argument("--import-id", help="idempotency key (default: derived from the resolved source paths)")
    p.add_argument("--include-summaries", action="store_true", help="SQLite only: also migrate the summary DAG")
    p.add_argument("--state-dir-remap", action="append", default=[], metavar="OLD=NEW",
                   help="map an OpenClaw state dir prefix found in the database to where it is now (repeatable)")
    p.add_argument("--busy-timeout", type=float, default=2.0, metavar="SECONDS",
                   help="how long to wait for a source database locked by another process (default: 2)")
    p.add_argument("--apply", action="store_true", help="write (after backing up an existing target)")
    p.add_argument("--json", action="store_true", help="print the reconciliation report as JSON")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        remaps = tuple(parse_remap(r) for r in args.state_dir_remap)
    except ValueError as exc:
        parser.error(str(exc))
    opts = ImportOptions(
        target_db=args.target_db, source_db=args.source_db, source_jsonl=tuple(args.source_jsonl),
        source_jsonl_dirs=tuple(args.source_jsonl_dir), agent=args.agent, namespace=args.namespace,
        session_identity=args.session_identity, import_id=args.import_id,
        include_summaries=args.include_summaries, apply=args.apply, remaps=remaps,
        busy_timeout_s=max(0.0, args.busy_timeout))
    try:
        report = run_import(opts)
    except ImportFailure as exc:
        print(f"import_lossless_claw: error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # an unexpected defect: still a clear message, target untouched (rolled back)
        print(f"import_lossless_claw: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(report.to_json() if args.json else report.to_text())
    if report.scanned and not report.eligible and report.invalid_rows:
        print("import_lossless_claw: error: every source row was invalid; nothing to import", file=sys.stderr)
        return 1
    return 0
