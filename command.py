"""The ``/trove`` operator command and the ``hermes trove`` CLI command.

Subcommands are one table of handlers keyed by their words; each handler returns plain
data and ``render`` turns it into text. Read-only forms never write; every ``apply`` form
is narrow and takes a backup first (a PostgreSQL store cannot be copied to a file: its
applies need ``--have-backup``, the operator's word that a pg_dump exists). Nothing raises
into the host: ``make_handler`` is the ``/trove`` boundary and ``execute`` the CLI's.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from . import backups, subsystems
from .backend import storage_error
from .config import (
    database_path,
    default_hermes_home,
    load_config,
    profile_environ,
    scoped_home,
    stranded_store,
    with_store,
)
from .models import Complete, host_complete
from .ops import dag_view, doctor, hygiene, install, maintenance, migrate_store, outbox_ops, rotate, status
from .pathprobe import probe_path
from .pgdb import StoreSelectionError
from .runtime import build_runtime
from .scope import LOCAL_PLATFORMS
from .toolkit import clean_text, echo, has_lone_surrogate, iso

if TYPE_CHECKING:
    from .engine import TroveEngine
    from .runtime import Runtime

log = logging.getLogger("hermes_trove.command")
MAX_TEXT = 12000
ECHO_WORDS = 200  # characters of unknown words an answer repeats


@dataclass(frozen=True)
class Target:
    """What a subcommand acts on: the runtime, the live engine (or None), the session."""

    runtime: Runtime
    engine: TroveEngine | None = None
    session_id: str = ""
    words: tuple[str, ...] = ()  # trailing words of a subcommand in TAKES_WORDS
    have_backup: bool = False  # --have-backup: the operator holds a backup trove cannot take (PostgreSQL)

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


# The gateway chat a message comes from, set in that message's own task before /trove runs (None: no
# gateway message). Hermes passes /trove only its words; the pre_gateway_dispatch hook sees the chat.
ASKING_CHAT: ContextVar[str | None] = ContextVar("trove_asking_chat", default=None)


def note_chat(event: Any = None, gateway: Any = None, **_: Any) -> None:
    """The pre_gateway_dispatch hook: remember the message's chat ("" when the runner cannot say)."""
    try:
        chat = str(gateway._session_key_for_source(event.source) or "")
    except Exception:
        chat = ""
    ASKING_CHAT.set(chat)


def resolve(runtime: Runtime, session_id: str | None = None, engine: TroveEngine | None = None) -> Target:
    """The asking gateway chat's engine (else its newest session), or the foreground engine; a
    named session wins. Another gateway chat's engine is never assumed."""
    if engine is None:
        chat = ASKING_CHAT.get() or ""
        engine = runtime.foreground_engine(chat)
        key = engine.state.key if engine is not None else None
        if key is not None and key.conversation_id != chat and key.platform.lower() not in LOCAL_PLATFORMS:
            engine = None  # another gateway chat's
        if engine is None and chat and not session_id:
            session_id = next((s.session_id for s in runtime.store.sessions(1, chat)), "")
    key = engine.state.key if engine is not None else None
    return Target(runtime, engine, session_id or (key.session_id if key is not None else ""))


def _dag(fmt: str) -> Callable[[Target], dict[str, Any]]:
    def draw(t: Target) -> dict[str, Any]:
        sid = t.session_id or dag_view.default_session(t.runtime)
        if not sid:
            return {"status": "ok", "session_id": None, "drawing": "no session has summary nodes yet"}
        bound = t.engine.state.key if t.engine is not None else None
        if t.runtime.store.session(sid) is None and (bound is None or bound.session_id != sid):
            return {"status": "error", "session_id": sid, "error": status.unknown_session(sid)}
        view = dag_view.build_view(t.runtime, sid)
        drawing = dag_view.render_mermaid(view) if fmt == "mermaid" else dag_view.render_text(view)
        return {"status": "ok", "format": fmt, **view, "drawing": drawing}
    return draw


def _backup(t: Target) -> dict[str, Any]:
    try:
        return {"status": "ok", **vars(backups.take_backup(t.runtime))}
    except backups.FileBackupUnavailable as exc:  # a PostgreSQL store: the pg_dump line instead
        return {"status": "refused", "reason": str(exc), "pg_dump": exc.command}


def _operator_model(t: Target) -> Complete | None:
    """The model of an operator's run: the live engine's, else the plugin's host model, else None."""
    if t.engine is not None:
        return t.engine.completion_for("compression")
    return host_complete(dict, t.runtime.llm, task="compression") if t.runtime.llm is not None else None


def _subsystem(handler: subsystems.Handler) -> Callable[[Target], dict[str, Any]]:
    def call(t: Target) -> dict[str, Any]:
        return handler(subsystems.Request(t.runtime, t.words, lambda: _operator_model(t), t.engine is not None))
    return call


HANDLERS: dict[tuple[str, ...], tuple[Callable[[Target], dict[str, Any]], str]] = {
    ("status",): (lambda t: status.build_status(t.runtime, t.snapshot, session_id=t.session_id or None),
                  "runtime, session, store, DAG and config status"),
    ("doctor",): (lambda t: doctor.run_doctor(t.runtime, t.snapshot), "read-only health checks"),
    ("doctor", "clean"): (lambda t: hygiene.scan_clean(t.runtime, [t.session_id]),
                          "read-only scan for junk/noise sessions (pattern-matched or empty)"),
    ("doctor", "clean", "apply"): (lambda t: hygiene.apply_clean(t.runtime, [t.session_id], have_backup=t.have_backup),
                                   "backup-first delete of those sessions (needs TROVE_DOCTOR_CLEAN_APPLY_ENABLED)"),
    ("doctor", "repair"): (lambda t: maintenance.diagnose(t.runtime),
                           "read-only SQLite/FTS diagnostics, stale leases and rollups stuck building"),
    ("doctor", "repair", "apply"): (lambda t: maintenance.repair_fts(t.runtime, have_backup=t.have_backup),
                                    "backup-first FTS rebuild, missing-trigger repair, stale-lease cleanup"),
    ("doctor", "source"): (lambda t: hygiene.scan_source(t.runtime), "read-only scan for blank-source rows"),
    ("doctor", "source", "apply"): (lambda t: hygiene.apply_source(t.runtime, have_backup=t.have_backup),
                                    "backup-first normalization of blank source to 'unknown'"),
    ("doctor", "outbox"): (lambda t: outbox_ops.report(t.runtime),
                           "read-only list of outbox rows set aside (--json exports each whole)"),
    ("doctor", "outbox", "retry"): (lambda t: outbox_ops.retry(t.runtime),
                                    "ship the set-aside outbox rows again, after repairing them"),
    ("doctor", "retention"): (lambda t: hygiene.retention_report(t.runtime),
                              "read-only per-session footprint and age"),
    ("backup",): (_backup, "timestamped online SQLite backup (a PostgreSQL store: the pg_dump command to run)"),
    ("dag",): (_dag("text"), "the session's summary DAG as a text tree (depth, tokens, time span, raw ranges)"),
    ("dag", "mermaid"): (_dag("mermaid"), "the same DAG as a Mermaid graph for docs and issues"),
    ("rotate",): (lambda t: {**dataclasses.asdict(rotate.preview(t.runtime, t.session_id, t.mode)), "read_only": True},
                  "read-only preview of an in-place, tail-keeping rotate"),
    ("rotate", "apply"): (lambda t: rotate.apply(t.runtime, t.session_id, t.mode),
                          "backup-first rotate: advance the frontier past the pre-tail"),
    ("migrate",): (lambda t: {"status": "refused", "error": "a copy can take long: run `hermes trove migrate --to"
                              " TARGET` in a terminal (TARGET: a postgresql:// URL or a SQLite file path)"},
                   "copy the store to PostgreSQL or to a SQLite file (CLI only: `hermes trove migrate --to TARGET`)"),
}


def handlers() -> dict[tuple[str, ...], tuple[Callable[[Target], dict[str, Any]], str]]:
    """The core subcommands, then each subsystem's."""
    table = dict(HANDLERS)
    for row in subsystems.SUBSYSTEMS:
        table.update({words: (_subsystem(fn), doc) for words, (fn, doc) in row.commands.items()})
    return table


def lookup(key: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """``(handler key, trailing words)`` for lower-cased ``key``, or None when nothing matches."""
    key = tuple(key)
    if key in handlers():
        return key, ()
    prefixes = (p for row in subsystems.SUBSYSTEMS for p in row.takes_words)
    return next(((p, key[len(p):]) for p in prefixes if key[:len(p)] == p), None)


ARGS_HINT = " | ".join(("status | doctor [clean|repair|source|retention] [apply [--have-backup]] |"
                        " doctor outbox [retry] | backup | dag [mermaid] | rotate [apply] | migrate --to TARGET",
                        *(row.usage for row in subsystems.SUBSYSTEMS), "help"))


def help_text(prefix: str = "/trove") -> str:
    lines = [f"{prefix} {' '.join(words)} - {doc}" for words, (_, doc) in handlers().items()]
    return "\n".join([f"{prefix} commands:", *lines, f"{prefix} help - this help",
                      "Read-only forms never write; apply forms take a backup first. On a PostgreSQL store trove"
                      f" cannot take one: run the pg_dump `{prefix} backup` prints, then add {backups.HAVE_BACKUP}."])


def run(runtime: Runtime, words: Sequence[str], session_id: str | None = None,
        engine: TroveEngine | None = None) -> tuple[str, dict[str, Any]]:
    """Dispatch ``words`` (lower-cased) to a handler; returns ``(name, result)``."""
    have_backup = any(w.lower() == backups.HAVE_BACKUP for w in words)
    words = [w for w in words if w.lower() != backups.HAVE_BACKUP]
    found = lookup(tuple(w.lower() for w in words) or ("status",))
    if found is None:
        return usage(words)
    key, rest = found
    # an owner scope keeps its case (gateway session keys are case-sensitive); other words are lower-cased
    rest = tuple(w if w.lower().startswith("scope=") else r for w, r in zip(words[len(key):], rest, strict=True))
    unusable = next((w for w in (session_id or "", *rest) if "\x00" in w or has_lone_surrogate(w)), None)
    if unusable is not None:  # a key no store can hold (a NUL byte, bytes that are no UTF-8): said, not raised
        return " ".join(key), {"status": "error", "error": f"{echo(unusable, 40)} is not usable text (it holds a NUL"
                                                           " byte or bytes that are no UTF-8); retype it"}
    target = dataclasses.replace(resolve(runtime, session_id, engine), words=rest, have_backup=have_backup)
    return " ".join(key), handlers()[key][0](target)


def usage(words: Sequence[str]) -> tuple[str, dict[str, Any]]:
    """The help answer: plain for ``help``, with an error for unknown words. Touches no database."""
    said = " ".join(words)
    if len(said) > ECHO_WORDS:
        said = f"{said[:ECHO_WORDS]} ... (+{len(said) - ECHO_WORDS} more chars)"
    unknown = "" if [w.lower() for w in words] == ["help"] else f"unknown subcommand: {said}"
    if words and words[0].lower() == "import":  # the importer is no subcommand here: say where it is
        unknown += f" (the OpenClaw importer is a command of its own: {importer_command()} --help; docs/import.md)"
    return "help", {"help": True, "error": unknown} if unknown else {"help": True}


def importer_command() -> str:
    """How to run the OpenClaw importer with this copy: the script beside it (a plugin directory or a
    checkout, which a host venv cannot import as ``hermes_trove``), else the installed module."""
    script = Path(__file__).resolve().parent / "scripts" / "import_lossless_claw.py"
    python = shlex.quote(sys.executable or "python3")
    return f"{python} {shlex.quote(str(script))}" if script.is_file() else f"{python} -m hermes_trove import"


def _failure(words: Sequence[str], exc: Exception) -> tuple[str, dict[str, Any]]:
    """The answer of a subcommand that raised, logged with its traceback unless the store is unavailable."""
    name = " ".join(w.lower() for w in words) or "status"
    # a store that will not open or read (a damaged or newer file, a server that is down, a URL that
    # selects none): no bug to trace
    if storage_error(exc) or isinstance(exc, StoreSelectionError):
        log.error("trove: %s failed: %s", name, exc)
    else:
        log.exception("trove: %s failed", name)
    return name, {"status": "error", "error": f"{type(exc).__name__}: {exc}"}


def render(name: str, result: dict[str, Any], prefix: str = "/trove") -> str:
    """Human text: nested keys indented, long lists and the whole text bounded."""
    if result.get("help"):
        head = f"{result['error']}\n\n" if result.get("error") else ""
        return head + help_text(prefix)
    if name.startswith("dag") and isinstance(result.get("drawing"), str):
        return _bound(result["drawing"])
    if name == "doctor" and isinstance(result.get("checks"), list):
        sid = result.get("session_id")
        about = f"session {sid}" if sid and sid != status.UNBOUND else "no session bound: the store only"
        lines = [f"trove doctor: {result.get('overall')}  ({about})"]
        marks = {"pass": "ok  ", "warn": "WARN", "fail": "FAIL"}
        lines += [f"  [{marks.get(c['status'], c['status'])}] {c['check']}: {c['detail']}" for c in result["checks"]]
        if result.get("guidance"):
            lines += ["guidance:"] + [f"  - {g}" for g in result["guidance"]]
        return _bound("\n".join(lines))
    lines = [f"trove {name}:"]
    health = result.get("store_health")
    if name == "status" and isinstance(health, dict) and not health.get("usable", True):
        lines = [f"trove status: UNHEALTHY: {health.get('state')}", f"  fix: {health.get('fix')}"]
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
                out.append(f"{pad}{k}: {_scalar(_human_time(k, v))}")
    elif isinstance(value, list):
        for item in value[:30]:
            if isinstance(item, dict):
                out.append(f"{pad}- " + ", ".join(f"{k}={_scalar(_human_time(k, v))}" for k, v in item.items()))
            else:
                out.append(f"{pad}- {_scalar(item)}")
        if len(value) > 30:
            out.append(f"{pad}... {len(value) - 30} more")


def _human_time(key: Any, v: Any) -> Any:
    """Epoch seconds under a ``*_at`` key read as ISO-8601 UTC in text; ``--json`` keeps the number."""
    if str(key).endswith("_at") and isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
        return iso(v) or v
    return v


def _scalar(v: Any) -> str:
    return json.dumps(v, default=str)[:300] if isinstance(v, (dict, list)) else "null" if v is None else str(v)


def _bound(text: str) -> str:
    more = len(text) - MAX_TEXT
    return text if more <= 0 else text[:MAX_TEXT] + f"\n... truncated ({more} more chars; use the CLI with --json)"


def make_handler(runtime: Runtime) -> Callable[[str], str]:
    """The ``/trove`` handler: the one place its failures become text for the host."""
    def handle(raw_args: str = "") -> str:
        words = str(raw_args or "").split()
        typed = install.TYPED_IN_HOST.set(True)
        try:
            name, result = run(runtime.for_home(scoped_home()), words)  # the chat's profile
        except Exception as exc:
            name, result = _failure(words, exc)
        finally:
            install.TYPED_IN_HOST.reset(typed)
        try:  # the words typed are echoed: a lone surrogate among them must not reach the host
            return clean_text(render(name, result))
        except Exception as exc:
            log.exception("trove: rendering /trove %s failed", name)
            return clean_text(f"trove: command failed: {type(exc).__name__}: {exc}")
    return handle


def register(ctx: Any, runtime: Runtime) -> None:
    """``/trove`` when ``TROVE_ENABLE_SLASH_COMMAND`` is on; ``hermes trove`` always. Never raises."""
    try:
        if runtime.config.enable_slash_command and hasattr(ctx, "register_command"):
            ctx.register_command("trove", make_handler(runtime),
                                 description="hermes-trove status, diagnostics and upkeep", args_hint=ARGS_HINT)
            if hasattr(ctx, "register_hook"):
                ctx.register_hook("pre_gateway_dispatch", note_chat)
    except Exception:
        log.exception("trove: /trove registration failed")
    try:
        if hasattr(ctx, "register_cli_command"):
            ctx.register_cli_command("trove", "hermes-trove status, doctor, backup and rotate", setup_parser,
                                     cli_handler(runtime))
    except Exception:
        log.exception("trove: `hermes trove` registration failed")


# -- the operator CLI: `hermes trove ...` and `python -m hermes_trove ...` ------------------
# It never creates a database of its own: a missing --db file is an error, not an empty new store
# (the home's store is created only to take held transcripts, as `hermes trove` does).

# The subcommands a --session names a session for (doctor clean: the session it keeps out of the list).
SESSION_WORDS = {("status",), ("dag",), ("dag", "mermaid"), ("rotate",), ("rotate", "apply"), ("doctor", "clean"),
                 ("doctor", "clean", "apply")}
CLI_DESCRIPTION = "Operator CLI: status, doctor, backup and rotate for a trove database."
EXIT_OK, EXIT_PROBLEM, EXIT_USAGE = 0, 1, 2


def setup_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trove_words", nargs="*", metavar="SUBCOMMAND", help=f"{ARGS_HINT} (default: status)")
    parser.add_argument("--db", dest="trove_db", metavar="PATH",
                        help="database file, or a postgresql:// URL or libpq 'service=NAME' string (default:"
                             " TROVE_DATABASE_URL, else TROVE_DATABASE_PATH or $HERMES_HOME/trove.db)")
    parser.add_argument("--json", dest="trove_json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--session", dest="trove_session", metavar="ID",
                        help="session to report on, draw or rotate (there is no bound session outside Hermes)")
    parser.add_argument("--format", dest="trove_format", choices=("text", "mermaid"), default="text",
                        help="dag: a text tree (default) or a Mermaid graph")
    parser.add_argument("--apply", dest="trove_apply", action="store_true",
                        help="assertions rebuild|drop: do it (the default is a dry run)")
    parser.add_argument("--limit", dest="trove_limit", type=int, metavar="N",
                        help="assertions rebuild: read at most N messages")
    parser.add_argument("--reset", dest="trove_reset", action="store_true",
                        help="assertions rebuild: forget every assertion and start from the first message")
    parser.add_argument(backups.HAVE_BACKUP, dest="trove_have_backup", action="store_true",
                        help="doctor clean|source|repair apply on a PostgreSQL store: you took your own backup"
                             " (trove cannot copy a server to a file; `backup` prints the pg_dump to run)")
    parser.add_argument("--to", dest="trove_to", metavar="TARGET",
                        help="migrate: the copy's target, a postgresql:// URL (or libpq 'service=NAME') or a SQLite"
                             " file path; the source (--db, TROVE_DATABASE_PATH or TROVE_DATABASE_URL) is only read")


def _runtime_for(db: str | None, fallback: Runtime | None = None) -> Runtime:
    """The runtime a command line acts on; a database that does not exist yet is an error, never created.

    A path that cannot hold one (under a regular file, in a read-only directory, on a full disk) is
    no usage error: the runtime is returned so the report names the reason (exit 1)."""
    if fallback is not None and not db:
        missing = not os.path.exists(fallback.db.path) and probe_path(fallback.db.path) is None
        if fallback.db.kind == "sqlite" and missing:
            left = doctor.left_outbox(fallback.db.path)  # a server setting removed before its turns shipped
            if left:
                raise FileNotFoundError(f"no trove database at {fallback.db.path}; {left[0]}; {left[1]}")
            hint = install.engine_hint(fallback.config.hermes_home)
            raise FileNotFoundError(f"no trove database at {fallback.db.path} yet (trove has not stored anything)"
                                    + (f"; {hint}" if hint else ""))
        return fallback
    config = load_config(profile_environ(default_hermes_home(), inherit=True))  # the store `hermes trove` uses
    if not config.database_url:  # the home's held transcripts, as loading the plugin does for `hermes trove`:
        home = build_runtime(config)  # into its store, created for them when there is none yet
        if database_path(config).is_file() or (home.unstored.spill is not None and home.unstored.spill.pending()):
            home.restore_spilled()  # never raises
    if db:
        config = with_store(config, db)
    path = database_path(config)
    if not config.database_url and not path.exists() and probe_path(path) is None:
        stranded = stranded_store(config)
        left = doctor.left_outbox(str(path))  # as for `hermes trove`: turns a server setting left unshipped
        hint = "" if db or left or not config.hermes_home else install.engine_hint(config.hermes_home)
        raise FileNotFoundError(f"no trove database at {path} (pass --db PATH)"
                                + "".join(f"; {note}" for note in (stranded, *(left or ()), hint) if note))
    return build_runtime(config)


def _emit(text: str, out: TextIO) -> None:
    """Print, tolerating a reader that went away (``| head``): no traceback, the exit code stands."""
    try:
        print(clean_text(text), file=out)  # an argument that was no UTF-8 is echoed as U+FFFD
        out.flush()
    except BrokenPipeError:
        try:  # later flushes at exit would raise again: point the descriptor at /dev/null
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, out.fileno())
        except (OSError, ValueError, AttributeError):
            pass


def exit_code(result: Mapping[str, Any]) -> int:
    """0 ok, 1 a problem was found or the subcommand failed or refused, 2 usage (see the operator guide)."""
    if result.get("help"):
        return EXIT_USAGE if result.get("error") else EXIT_OK
    if result.get("status") == "usage":  # a subcommand's own words were wrong (a rollup kind, a date, --limit)
        return EXIT_USAGE
    failed = result.get("status") in ("error", "refused", "still_unhealthy") or result.get("overall") == "unhealthy"
    # an "error" alone: a report that could not read its part (`embed status` on a damaged store)
    return EXIT_PROBLEM if failed or result.get("error") else EXIT_OK


def execute(args: argparse.Namespace, runtime: Runtime | None = None, out: TextIO | None = None,
            prog: str = "python -m hermes_trove") -> int:
    """Run one parsed command line and print the result; returns the exit code. Never raises."""
    out = out or sys.stdout
    words = list(getattr(args, "trove_words", None) or [])
    if [w.lower() for w in words] == ["dag"] and getattr(args, "trove_format", "text") == "mermaid":
        words.append("mermaid")
    words += [flag for attr, flag in (("trove_apply", "--apply"), ("trove_reset", "--reset"),
                                      ("trove_have_backup", backups.HAVE_BACKUP)) if getattr(args, attr, False)]
    if getattr(args, "trove_limit", None) is not None:
        words += ["--limit", str(args.trove_limit)]
    key = tuple(w.lower() for w in words if w.lower() != backups.HAVE_BACKUP)
    to = getattr(args, "trove_to", None)
    migrating = key == ("migrate",) or to is not None
    if migrating and (key != ("migrate",) or not to):
        _emit(f"trove: {prog} migrate needs --to TARGET (a postgresql:// URL or a SQLite file path);"
              " --to is only for migrate", sys.stderr)
        return EXIT_USAGE
    found, session = lookup(key or ("status",)), getattr(args, "trove_session", None)
    if session and found is not None and found[0] not in SESSION_WORDS:  # migrate too: it copies every session
        _emit(f"trove: {prog} {' '.join(found[0])} acts on the whole store and takes no --session;"
              " --session names the session of status, dag, rotate and doctor clean", sys.stderr)
        return EXIT_USAGE
    if getattr(args, "trove_format", "text") == "mermaid" and found is not None and found[0][:1] != ("dag",):
        _emit(f"trove: {prog} {' '.join(found[0])} has no Mermaid form; --format is only for dag", sys.stderr)
        return EXIT_USAGE
    if key == ("help",) or (key and found is None):  # usage needs no database
        name, result = usage(words)
    else:
        try:
            runtime = _runtime_for(getattr(args, "trove_db", None), runtime)
        except (FileNotFoundError, ValueError) as exc:
            _emit(f"trove: {exc}", sys.stderr)
            return EXIT_USAGE
        try:
            name, result = ("migrate", _migrate(runtime, str(to))) if migrating else \
                run(runtime, words, session_id=getattr(args, "trove_session", None) or None)
        except migrate_store.TargetError as exc:
            _emit(f"trove: {exc}", sys.stderr)
            return EXIT_USAGE
        except Exception as exc:  # the CLI's boundary: a failing subcommand is an answer and an exit code
            name, result = _failure(words, exc)
    _emit(json.dumps(result, indent=2, default=str) if getattr(args, "trove_json", False)
          else render(name, result, prefix=prog), out)
    if migrating:  # exit 1 unless fully copied
        return EXIT_OK if result.get("status") == "ok" else EXIT_PROBLEM
    return exit_code(result)


def _migrate(runtime: Runtime, to: str) -> dict[str, Any]:
    """``migrate --to TARGET``: a copy with a progress bar on stderr; a bad target raises ``TargetError``."""
    bar = migrate_store.TerminalProgress(sys.stderr)
    try:
        result = migrate_store.migrate(runtime, to, progress=bar)
    except migrate_store.TargetError:
        raise
    except Exception as exc:
        _, result = _failure(["migrate"], exc)
    bar.finish(result)
    return result


def cli_handler(runtime: Runtime) -> Callable[[argparse.Namespace], int]:
    """``handler_fn`` for ``ctx.register_cli_command`` (the plugin's runtime unless --db is given). The
    host drops ``args.func(args)``'s return value, so the exit code is raised as ``SystemExit``."""
    def handle(args: argparse.Namespace) -> int:
        sys.exit(execute(args, runtime, prog="hermes trove"))
    return handle


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hermes_trove", description=CLI_DESCRIPTION,
                                     epilog="exit codes: 0 ok, 1 a problem found or refused, 2 usage or no database."
                                            " `python -m hermes_trove import --help` for the OpenClaw importer.")
    setup_parser(parser)
    return execute(parser.parse_args(argv), out=out)
