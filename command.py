"""The ``/trove`` operator command and the ``hermes trove`` CLI command.

Subcommands are one table of handlers keyed by their words; each handler returns plain
data and ``render`` turns it into text. Read-only forms never write; every ``apply`` form
is narrow and takes a backup first. Nothing raises into the host: ``make_handler`` is the
``/trove`` boundary and ``execute`` the CLI's.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from .config import database_path, load_config
from .ops import backups, doctor, hygiene, maintenance, rotate, status
from .runtime import build_runtime

if TYPE_CHECKING:
    from .engine import TroveEngine
    from .runtime import Runtime

log = logging.getLogger("hermes_trove.command")
MAX_TEXT = 12000


@dataclass(frozen=True)
class Target:
    """What a subcommand acts on: the runtime, the live engine (or None), the session."""

    runtime: Runtime
    engine: TroveEngine | None = None
    session_id: str = ""

    @property
    def snapshot(self) -> Mapping[str, Any] | None:
        """The live engine's facts, or None outside Hermes and before any session binds."""
        return self.engine.snapshot() if self.engine is not None else None

    @property
    def mode(self) -> str:
        """The engine's mode for its own session; otherwise what the runtime recorded."""
        state = self.engine.state if self.engine is not None else None
        if state is not None and state.key is not None and state.key.session_id == self.session_id:
            return str(state.mode)
        return str(self.runtime.bound_sessions.get(self.session_id, "active"))


def resolve(runtime: Runtime, session_id: str | None = None, engine: TroveEngine | None = None) -> Target:
    """The foreground engine's session unless a session is named explicitly."""
    engine = engine if engine is not None else runtime.foreground_engine()
    key = engine.state.key if engine is not None else None
    return Target(runtime, engine, session_id or (key.session_id if key is not None else ""))


def _status(t: Target) -> dict[str, Any]:
    return status.build_status(t.runtime, t.snapshot, session_id=t.session_id or None)


def _doctor(t: Target) -> dict[str, Any]:
    return doctor.run_doctor(t.runtime, t.snapshot)


def _protected(t: Target) -> list[str]:
    return [t.session_id] if t.session_id else []


def _rotate_preview(t: Target) -> dict[str, Any]:
    return rotate.as_dict(rotate.preview(t.runtime, t.session_id, t.mode))


HANDLERS: dict[tuple[str, ...], tuple[Callable[[Target], dict[str, Any]], str]] = {
    ("status",): (_status, "runtime, session, store, DAG and config status"),
    ("doctor",): (_doctor, "read-only health checks"),
    ("doctor", "clean"): (lambda t: hygiene.scan_clean(t.runtime, _protected(t)),
                          "read-only scan for junk/noise sessions (pattern-matched or empty)"),
    ("doctor", "clean", "apply"): (lambda t: hygiene.apply_clean(t.runtime, _protected(t)),
                                   "backup-first delete of those sessions (needs TROVE_DOCTOR_CLEAN_APPLY_ENABLED)"),
    ("doctor", "repair"): (lambda t: maintenance.diagnose_fts(t.runtime.db.read()),
                           "read-only SQLite/FTS diagnostics"),
    ("doctor", "repair", "apply"): (lambda t: maintenance.repair_fts(t.runtime),
                                    "backup-first FTS rebuild and missing-trigger repair"),
    ("doctor", "source"): (lambda t: hygiene.scan_source(t.runtime), "read-only scan for blank-source rows"),
    ("doctor", "source", "apply"): (lambda t: hygiene.apply_source(t.runtime),
                                    "backup-first normalization of blank source to 'unknown'"),
    ("doctor", "retention"): (lambda t: hygiene.retention_report(t.runtime),
                              "read-only per-session footprint and age"),
    ("backup",): (lambda t: {"status": "ok", **vars(backups.take_backup(t.runtime))},
                  "timestamped online SQLite backup"),
    ("rotate",): (_rotate_preview, "read-only preview of an in-place, tail-keeping rotate"),
    ("rotate", "apply"): (lambda t: rotate.apply(t.runtime, t.session_id, t.mode),
                          "backup-first rotate: advance the frontier past the pre-tail"),
}
ARGS_HINT = "status | doctor [clean|repair|source|retention] [apply] | backup | rotate [apply] | help"


def help_text(prefix: str = "/trove") -> str:
    lines = [f"{prefix} {' '.join(words)} - {doc}" for words, (_, doc) in HANDLERS.items()]
    return "\n".join([f"{prefix} commands:", *lines, f"{prefix} help - this help",
                      "Read-only forms never write; apply forms take a backup first."])


def run(runtime: Runtime, words: Sequence[str], session_id: str | None = None,
        engine: TroveEngine | None = None) -> tuple[str, dict[str, Any]]:
    """Dispatch ``words`` (lower-cased) to a handler; returns ``(name, result)``."""
    key = tuple(w.lower() for w in words) or ("status",)
    if key not in HANDLERS:
        unknown = "" if key == ("help",) else f"unknown subcommand: {' '.join(words)}"
        return "help", {"help": True, "error": unknown} if unknown else {"help": True}
    return " ".join(key), HANDLERS[key][0](resolve(runtime, session_id, engine))


def _failure(words: Sequence[str], exc: Exception) -> tuple[str, dict[str, Any]]:
    """The answer of a subcommand that raised, logged with its traceback."""
    name = " ".join(w.lower() for w in words) or "status"
    log.exception("trove: %s failed", name)
    return name, {"status": "error", "error": f"{type(exc).__name__}: {exc}"}


def render(name: str, result: dict[str, Any], prefix: str = "/trove") -> str:
    """Human text: nested keys indented, long lists and the whole text bounded."""
    if result.get("help"):
        head = f"{result['error']}\n\n" if result.get("error") else ""
        return head + help_text(prefix)
    if name == "doctor" and isinstance(result.get("checks"), list):
        lines = [f"trove doctor: {result.get('overall')}  (session {result.get('session_id')})"]
        marks = {"pass": "ok  ", "warn": "WARN", "fail": "FAIL"}
        lines += [f"  [{marks.get(c['status'], c['status'])}] {c['check']}: {c['detail']}" for c in result["checks"]]
        if result.get("guidance"):
            lines += ["guidance:"] + [f"  - {g}" for g in result["guidance"]]
        return _bound("\n".join(lines))
    lines = [f"trove {name}:"]
    _lines(result, 1, lines)
    return _bound("\n".join(lines))


def _lines(value: Any, depth: int, out: list[str]) -> None:
    pad = "  " * depth
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, dict) and set(v) == {"value", "source"}:  # config entries: one line each
                out.append(f"{pad}{k} = {_scalar(v['value'])}  [{v['source']}]")
            elif isinstance(v, (dict, list)) and v:
                out.append(f"{pad}{k}:")
                _lines(v, depth + 1, out)
            else:
                out.append(f"{pad}{k}: {_scalar(v)}")
    elif isinstance(value, list):
        for item in value[:30]:
            if isinstance(item, dict):
                out.append(f"{pad}- " + ", ".join(f"{k}={_scalar(v)}" for k, v in item.items()))
            else:
                out.append(f"{pad}- {_scalar(item)}")
        if len(value) > 30:
            out.append(f"{pad}... {len(value) - 30} more")


def _scalar(v: Any) -> str:
    if isinstance(v, (dict, list)):
        return json.dumps(v, default=str)[:300]
    return "null" if v is None else str(v)


def _bound(text: str) -> str:
    if len(text) <= MAX_TEXT:
        return text
    return text[:MAX_TEXT] + f"\n... truncated ({len(text) - MAX_TEXT} more chars; use the CLI with --json)"


def make_handler(runtime: Runtime) -> Callable[[str], str]:
    """The ``/trove`` handler: the one place its failures become text for the host."""
    def handle(raw_args: str = "") -> str:
        words = str(raw_args or "").split()
        try:
            name, result = run(runtime, words)
        except Exception as exc:
            name, result = _failure(words, exc)
        try:
            return render(name, result)
        except Exception as exc:
            log.exception("trove: rendering /trove %s failed", name)
            return f"trove: command failed: {type(exc).__name__}: {exc}"
    return handle


def register(ctx: Any, runtime: Runtime) -> None:
    """``/trove`` when ``TROVE_ENABLE_SLASH_COMMAND`` is on; ``hermes trove`` always. Never raises."""
    try:
        if runtime.config.enable_slash_command and hasattr(ctx, "register_command"):
            ctx.register_command("trove", make_handler(runtime),
                                 description="hermes-trove status, diagnostics and upkeep", args_hint=ARGS_HINT)
    except Exception:
        log.exception("trove: /trove registration failed")
    try:
        if hasattr(ctx, "register_cli_command"):
            ctx.register_cli_command("trove", "hermes-trove status, doctor, backup and rotate", setup_parser,
                                     cli_handler(runtime))
    except Exception:
        log.exception("trove: `hermes trove` registration failed")


# -- the operator CLI: `hermes trove ...` and `python -m hermes_trove ...` ------------------
# It never creates a database: a missing --db file is an error, not an empty new store.

CLI_DESCRIPTION = "Operator CLI: status, doctor, backup and rotate for a trove database."
EXIT_OK, EXIT_PROBLEM, EXIT_USAGE = 0, 1, 2


def setup_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trove_words", nargs="*", metavar="SUBCOMMAND",
                        help="status (default) | doctor [clean|repair|source|retention] [apply] | backup |"
                             " rotate [apply] | help")
    parser.add_argument("--db", dest="trove_db", metavar="PATH",
                        help="database file (default: TROVE_DATABASE_PATH or $HERMES_HOME/trove.db)")
    parser.add_argument("--json", dest="trove_json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--session", dest="trove_session", metavar="ID",
                        help="session to report on or rotate (there is no bound session outside Hermes)")


def _runtime_for(db: str | None, fallback: Runtime | None = None) -> Runtime:
    if fallback is not None and not db:
        return fallback
    config = load_config(os.environ)
    if db:
        config = dataclasses.replace(config, database_path=os.path.abspath(os.path.expanduser(db)))
    path = database_path(config)
    if not path.exists():
        raise FileNotFoundError(f"no trove database at {path} (pass --db PATH)")
    return build_runtime(config)


def execute(args: argparse.Namespace, runtime: Runtime | None = None, out: TextIO | None = None,
            prog: str = "python -m hermes_trove") -> int:
    """Run one parsed command line and print the result; returns the exit code. Never raises."""
    out = out or sys.stdout
    try:
        runtime = _runtime_for(getattr(args, "trove_db", None), runtime)
    except (FileNotFoundError, ValueError) as exc:
        print(f"trove: {exc}", file=sys.stderr)
        return EXIT_USAGE
    words = list(getattr(args, "trove_words", None) or [])
    try:
        name, result = run(runtime, words, session_id=getattr(args, "trove_session", None) or None)
    except Exception as exc:  # the CLI's boundary: a failing subcommand is an answer and an exit code
        name, result = _failure(words, exc)
    if getattr(args, "trove_json", False):
        print(json.dumps(result, indent=2, default=str), file=out)
    else:
        print(render(name, result, prefix=prog), file=out)
    if result.get("help"):
        return EXIT_USAGE if result.get("error") else EXIT_OK
    if result.get("status") in ("error", "refused", "still_unhealthy") or result.get("overall") == "unhealthy":
        return EXIT_PROBLEM
    return EXIT_OK


def cli_handler(runtime: Runtime) -> Callable[[argparse.Namespace], int]:
    """``handler_fn`` for ``ctx.register_cli_command``: the plugin's runtime unless --db is given."""
    return lambda args: execute(args, runtime, prog="hermes trove")


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hermes_trove", description=CLI_DESCRIPTION)
    setup_parser(parser)
    return execute(parser.parse_args(argv), out=out)
