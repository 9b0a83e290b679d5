"""hermes-trove: a lossless context engine plugin for Hermes Agent.

This module is the loader. ``register(ctx)`` builds the shared runtime and registers, in
order: the ``trove`` context engine, the per-turn ingest and recall-policy hooks, the
bundled skill, and (opt-in) the ``/trove`` command and the ``hermes trove`` CLI command.

A load that fails is loud: the error is logged at ERROR with what to do, and the loader
still registers ``hermes trove`` (and ``/trove`` when TROVE_ENABLE_SLASH_COMMAND is on),
whose every subcommand reports the failure (the exception, the module it came from, the
fix) and exits 1; Hermes keeps its built-in compressor. The loader imports nothing from
the package but ``version``, and that guarded, so it survives any broken feature module.
``register`` never raises.
"""
from __future__ import annotations

import json
import logging
import os
import sqlite3
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

try:
    from .version import __version__
except Exception:  # pragma: no cover - a broken checkout must still report
    __version__ = "unknown"

__all__ = ["LOAD_STATE", "__version__", "describe_failure", "register"]
log = logging.getLogger("hermes_trove")
PLUGIN_DIR = Path(__file__).resolve().parent
SKILL_DIR = PLUGIN_DIR / "skills" / "hermes-trove"
try:
    from .loadstate import LOAD_STATE
except Exception:  # pragma: no cover - a broken checkout must still report
    LOAD_STATE = {"registered": False, "failure": None}


def register(ctx: Any) -> None:
    try:
        _register(ctx)
        LOAD_STATE.update(registered=True, failure=None)
    except Exception as exc:
        failure = describe_failure(exc)
        LOAD_STATE.update(registered=False, failure=failure)
        log.error("hermes-trove failed to load: %s (in %s). Fix: %s Hermes keeps its built-in compressor until then;"
                  " `hermes trove doctor` shows the details.", failure["error"], failure["where"], failure["fix"],
                  exc_info=exc)
        _register_failure_report(ctx, failure)


def _register(ctx: Any) -> None:
    # Imported here, not at the top: `import hermes_trove.store` (CLI, importer, tests)
    # should not load the engine, the host hooks and the tool table.
    from . import command, subsystems
    from .compaction.summarize import window_warnings
    from .config import load_config, stranded_store
    from .engine import TroveEngine
    from .hooks import make_hooks
    from .ops.install import expose_skill
    from .ops.maintenance import startup
    from .runtime import build_runtime

    config = load_config(hermes_home=_hermes_home(ctx))
    for warning in [*window_warnings(config), stranded_store(config)]:  # once per load; the doctor repeats them
        if warning:
            log.warning("trove: %s", warning)
    runtime = build_runtime(config, llm=getattr(ctx, "llm", None))
    exists = Path(runtime.db.path).exists()  # `hermes trove --help` must not create a database
    if exists:
        try:  # open and migrate now; an unusable store starts the engine degraded (it retries)
            runtime.store.db.connect()
        except Exception as exc:
            if not runtime.store_failed(exc, "plugin load"):
                raise
    runtime.restore_spilled()  # what an earlier Hermes held while the store was unusable
    ctx.register_context_engine(TroveEngine(runtime))
    if hasattr(ctx, "register_hook"):
        for hook_name, callback in make_hooks(runtime).items():
            ctx.register_hook(hook_name, callback)
    if hasattr(ctx, "register_skill") and (SKILL_DIR / "SKILL.md").exists():
        try:
            ctx.register_skill("hermes-trove", SKILL_DIR / "SKILL.md",
                               description="Recall exact detail from trove-compacted history")
        except Exception:
            log.debug("hermes-trove: skill registration skipped", exc_info=True)
    command.register(ctx, runtime)
    # The namespaced copy above is not in the host's skills index; a link in <home>/skills is.
    expose_skill(PLUGIN_DIR, config.hermes_home)

    if exists and runtime.health.usable:
        startup(runtime)  # cheap checks; never raises
    subsystems.start("load", runtime)  # the opt-in subsystems' own threads; never raises


def _hermes_home(ctx: Any = None) -> str | None:
    try:
        from hermes_constants import get_hermes_home

        return str(get_hermes_home())
    except Exception:
        return os.environ.get("HERMES_HOME") or None


# -- a failed load: what went wrong, where, and what to do ------------------------------------

def describe_failure(exc: BaseException) -> dict[str, Any]:
    """The facts of a failed load: the exception, the plugin module it came from (for an import
    error also the missing module and the line importing it), the fix and the traceback tail."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if _module_name(f.filename)]
    frame = ours[-1] if ours else (frames[-1] if frames else None)
    module = _module_name(frame.filename) if frame is not None and ours else None
    out: dict[str, Any] = {
        "error": f"{type(exc).__name__}: {exc}", "exception": type(exc).__name__, "message": str(exc),
        "module": module, "file": frame.filename if frame else None, "line": frame.lineno if frame else None,
        "code": (frame.line or "") if frame else "", "plugin_dir": str(PLUGIN_DIR), "package": __name__,
        "plugin_version": __version__, "python": sys.executable,
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-12:])[-4000:]}
    out["where"] = f"{module or out['file'] or 'unknown'}" + (f", line {out['line']}" if out["line"] else "")
    if isinstance(exc, ImportError):
        out["missing_module"] = exc.name
        out["imported_by"] = f"{out['file']}:{out['line']}" if frame is not None else None
    out["fix"] = _fix_for(exc, out)
    out["other_copies"] = _other_copies()
    return out


def _fix_for(exc: BaseException, failure: dict[str, Any]) -> str:
    if type(exc).__name__ == "StoreSelectionError":  # its message names the variable and the fix
        return f"{exc}; then restart Hermes."
    if isinstance(exc, ImportError):
        return _import_fix(exc, failure)
    if isinstance(exc, sqlite3.Error) or type(exc).__name__ in ("SchemaTooNewError", "UnusableDatabaseError"):
        path = os.path.join(_hermes_home() or os.path.expanduser("~/.hermes"),
                            os.path.expanduser(os.environ.get("TROVE_DATABASE_PATH") or "trove.db"))
        return (f"the trove database {path} cannot be opened ({exc}). Move it aside or restore a backup, or set"
                " TROVE_DATABASE_PATH to another file, then restart Hermes.")
    if str(failure.get("module") or "").endswith(".config"):
        return "a TROVE_* setting could not be read: check the TROVE_* variables in the environment, then restart."
    return (f"update hermes-trove ({PLUGIN_DIR}); this is a bug or a host version it does not support. If it"
            " persists, report the traceback from `hermes trove doctor --json`.")


def _import_fix(exc: ImportError, failure: dict[str, Any]) -> str:
    missing = exc.name or ""
    importer = failure.get("imported_by") or "a plugin module"
    if missing.split(".")[0] == "hermes_trove" and __name__ != "hermes_trove":
        return (f"{importer} imports {missing!r} by the pip package name, which does not exist when Hermes loads"
                f" {PLUGIN_DIR} as a directory plugin ({__name__}): this copy is outdated. Update the plugin"
                f" (`hermes plugins update hermes-trove`, or `git -C {PLUGIN_DIR} pull` for a linked checkout),"
                " then restart Hermes.")
    if missing and missing.split(".")[0] != "hermes_trove":
        return (f"{importer} needs the package {missing.split('.')[0]!r}, which the Python Hermes runs"
                f" ({sys.executable}) cannot import: install it there (`{sys.executable} -m pip install"
                f" {missing.split('.')[0]}`, or reinstall hermes-trove with its dependencies), then restart Hermes.")
    return (f"the copy at {PLUGIN_DIR} is incomplete or mixed (a partial update?): update or reinstall"
            " hermes-trove, then restart Hermes.")


def _module_name(filename: str) -> str | None:
    """The plugin module a traceback's ``filename`` is, or None for a file outside the plugin."""
    for root in (str(Path(__file__).absolute().parent), str(PLUGIN_DIR)):
        if filename.startswith(root + os.sep):
            rel = Path(filename[len(root) + 1:]).with_suffix("")
            return ".".join([__name__, *(p for p in rel.parts if p != "__init__")])
    return None


def _other_copies() -> list[str]:
    """Other hermes-trove copies the host could load (a plugin directory, a pip install)."""
    user_dir = Path(_hermes_home() or os.path.expanduser("~/.hermes")) / "plugins" / "hermes-trove"
    try:
        import importlib.util

        spec = importlib.util.find_spec("hermes_trove") if __name__ != "hermes_trove" else None
        pip = Path(spec.origin).resolve().parent if spec is not None and spec.origin else None
    except Exception:
        pip = None
    return [str(p) for p in (user_dir, pip) if p is not None and p.exists() and p.resolve() != PLUGIN_DIR]


def _register_failure_report(ctx: Any, failure: dict[str, Any]) -> None:
    """``hermes trove ...`` (and ``/trove`` when enabled) answer with the failure; never raises."""
    try:
        slash = os.environ.get("TROVE_ENABLE_SLASH_COMMAND", "").strip().lower() in ("1", "true", "yes", "on")
        if slash and hasattr(ctx, "register_command"):
            ctx.register_command("trove", lambda raw_args="": failure_text(failure, "/trove", str(raw_args)),
                                 description="hermes-trove failed to load: see why", args_hint="doctor | status")
    except Exception:
        log.debug("hermes-trove: /trove (load failure report) not registered", exc_info=True)
    try:
        if hasattr(ctx, "register_cli_command"):
            ctx.register_cli_command("trove", "hermes-trove FAILED TO LOAD: `hermes trove doctor` shows why",
                                     failure_parser, failure_cli(failure))
    except Exception:
        log.debug("hermes-trove: `hermes trove` (load failure report) not registered", exc_info=True)


def failure_parser(parser: Any) -> None:
    """The same words and options as the working CLI, so any command line gets the report."""
    parser.add_argument("trove_words", nargs="*", metavar="SUBCOMMAND")
    parser.add_argument("--json", dest="trove_json", action="store_true")
    parser.add_argument("--apply", dest="trove_apply", action="store_true")
    parser.add_argument("--reset", dest="trove_reset", action="store_true")
    parser.add_argument("--have-backup", dest="trove_have_backup", action="store_true")
    for option in ("--db", "--session", "--format", "--limit", "--to"):
        parser.add_argument(option, dest="trove_" + option[2:])


def failure_cli(failure: dict[str, Any]) -> Callable[[Any], int]:
    def handle(args: Any) -> int:
        words = " ".join(getattr(args, "trove_words", None) or []) or "status"
        if getattr(args, "trove_json", False):
            print(json.dumps(failure_result(failure), indent=2, default=str))
        else:
            print(failure_text(failure, "hermes trove", words))
        sys.stdout.flush()
        sys.exit(1)
    return handle


def failure_result(failure: dict[str, Any]) -> dict[str, Any]:
    """The report as data: the shape of a doctor answer (``overall``, ``checks``, ``guidance``)."""
    detail = failure["error"] + f" (in {failure['where']})"
    guidance = [failure["fix"]]
    if failure.get("other_copies"):
        guidance.append(f"other copies found: {', '.join(failure['other_copies'])}. Fix the copy that failed (it is"
                        " the one Hermes loads); remove no copy until `hermes trove doctor` passes.")
    return {"overall": "unhealthy", "status": "error", "load_error": failure,
            "checks": [{"check": "plugin_load", "status": "fail", "detail": detail}], "guidance": guidance}


def failure_text(failure: dict[str, Any], prefix: str, words: str = "") -> str:
    result = failure_result(failure)
    head = f"{prefix} {words.strip() or 'status'}: hermes-trove FAILED TO LOAD; Hermes runs its built-in compressor"
    lines = [head, f"  error: {failure['error']}", f"  module: {failure['where']}"]
    if failure.get("code"):
        lines.append(f"  line: {failure['code']}")
    if "missing_module" in failure:
        lines.append(f"  missing module: {failure['missing_module']} (imported by {failure.get('imported_by')})")
    lines.append(f"  plugin: {failure['plugin_dir']} (loaded as {failure['package']}, {failure['plugin_version']})")
    lines += ["guidance:"] + [f"  - {g}" for g in result["guidance"]]
    return "\n".join(lines)
