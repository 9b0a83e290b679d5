"""The operator command: parse flags, run one import, print the report, pick the exit code.

Exit codes: 0 when the run completed (dry run or apply, even with some invalid rows);
1 when nothing could be imported (missing/locked/unrecognised source, or every row
invalid); 2 for contradictory flags. Nothing escapes as a traceback. A progress line on a
terminal (never with --json or into a pipe); sessions another source already imported are
skipped unless --allow-duplicate-sources.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import TextIO

from .files import parse_remap
from .report import ImportFailure
from .run import IDENTITIES, ImportOptions, run_import, validate


class Progress:
    """A one-line counter on a terminal: rows scanned and rows per second, redrawn at most 10x/s."""

    def __init__(self, stream: TextIO, label: str = "import"):
        self.stream, self.label = stream, label
        self.started = self.drawn = time.monotonic()
        self.rows = 0

    def __call__(self, rows: int) -> None:
        self.rows = rows
        now = time.monotonic()
        if now - self.drawn >= 0.1:
            self.drawn = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        rate = self.rows / max(now - self.started, 1e-6)
        bar = "#" * (int(now - self.started) % 20 + 1)
        self.stream.write(f"\r{self.label} [{bar:<20}] {self.rows} messages  {rate:,.0f} messages/s")
        self.stream.flush()

    def done(self) -> None:
        if self.rows:
            self._draw(time.monotonic())
            self.stream.write("\n")
            self.stream.flush()


def wants_progress(as_json: bool, disabled: bool, stream: TextIO) -> bool:
    """A progress line only for a person watching a terminal: never with --json or when piped."""
    return not as_json and not disabled and bool(getattr(stream, "isatty", lambda: False)())


def build_parser(prog: str = "import_lossless_claw.py") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
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
    p.add_argument("--allow-duplicate-sources", action="store_true",
                   help="import sessions that another source (the SQLite database or the JSONL exports of the"
                        " same OpenClaw sessions) already brought in; by default they are skipped")
    p.add_argument("--no-progress", action="store_true", help="no progress line on a terminal")
    p.add_argument("--apply", action="store_true", help="write (after backing up an existing target)")
    p.add_argument("--json", action="store_true", help="print the reconciliation report as JSON")
    return p


def main(argv: Sequence[str] | None = None, prog: str = "import_lossless_claw.py") -> int:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    try:
        remaps = tuple(parse_remap(r) for r in args.state_dir_remap)
        for option in ("agent", "namespace", "import_id"):  # stored as text, so it must be UTF-8
            (getattr(args, option) or "").encode("utf-8")
    except UnicodeEncodeError:
        parser.error(f"--{option.replace('_', '-')} is not valid UTF-8 text")
    except ValueError as exc:
        parser.error(str(exc))
    progress = Progress(sys.stderr, "apply" if args.apply else "dry run") \
        if wants_progress(args.json, args.no_progress, sys.stderr) else None
    opts = ImportOptions(
        target_db=args.target_db, source_db=args.source_db, source_jsonl=tuple(args.source_jsonl),
        source_jsonl_dirs=tuple(args.source_jsonl_dir), agent=args.agent, namespace=args.namespace,
        session_identity=args.session_identity, import_id=args.import_id,
        include_summaries=args.include_summaries, apply=args.apply, remaps=remaps,
        busy_timeout_s=max(0.0, args.busy_timeout), allow_duplicate_sources=args.allow_duplicate_sources,
        progress=progress)
    try:
        validate(opts)
    except ImportFailure as exc:  # flags that contradict each other: a usage error, nothing opened
        _say(f"import_lossless_claw: error: {exc}", sys.stderr)
        return 2
    try:
        report = run_import(opts)
    except Exception as exc:  # an unexpected defect, too, gets a clear message; the target is rolled back
        detail = exc if isinstance(exc, ImportFailure) else f"{type(exc).__name__}: {exc}"
        _say(f"import_lossless_claw: error: {detail}", sys.stderr)
        return 1
    finally:
        if progress is not None:
            progress.done()
    _say(report.to_json() if args.json else report.to_text(), sys.stdout)
    if report.scanned and not report.eligible and report.invalid_rows:
        print("import_lossless_claw: error: every source row was invalid; nothing to import", file=sys.stderr)
        return 1
    return 0


def _say(text: str, stream: TextIO) -> None:
    print(text.encode("utf-8", "backslashreplace").decode("utf-8"), file=stream)  # a path that is no UTF-8, escaped
