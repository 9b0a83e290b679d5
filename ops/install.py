"""Where this plugin runs from and what the host sees of it: loaded copy, other copies, skill, engine.

Facts for status, inspect and doctor: the loaded directory and its route, any second copy, the
bundled skill's place in the host's skills index, and whether the host runs trove or its built-in
compressor. ``expose_skill`` links the skill into ``<home>/skills`` when nothing is there.
Nothing here raises or touches the database.
"""
from __future__ import annotations

import functools
import importlib.util
import logging
import os
import subprocess
import sys
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..loadstate import LOAD_STATE
from ..models import host_config
from ..version import __version__

if TYPE_CHECKING:
    from ..runtime import Runtime

log = logging.getLogger("hermes_trove.install")
SKILL_NAME = "hermes-trove"
ENGINE_NAME = "trove"


def route_of(plugin_dir: Path, hermes_home: str) -> str:
    """How the host found this copy: ``plugins-dir`` (install.sh link or ``hermes plugins install``), or ``pip``."""
    user_dir = Path(hermes_home).expanduser() / "plugins" / "hermes-trove"
    if not user_dir.exists():
        return "pip"
    try:
        ours = user_dir.resolve() == plugin_dir.resolve()
    except OSError:
        ours = False
    return ("link" if user_dir.is_symlink() else "plugins-dir") if ours else "pip"


@functools.lru_cache(maxsize=8)
def _pip_copy() -> str | None:
    """The directory ``import hermes_trove`` resolves to (a pip or editable install), if any."""
    try:
        spec = importlib.util.find_spec("hermes_trove")
    except (ImportError, ValueError):
        return None
    return str(Path(spec.origin).resolve().parent) if spec is not None and spec.origin else None


def copies(plugin_dir: Path, hermes_home: str) -> list[dict[str, str]]:
    """Every hermes-trove copy the host could load, resolved and de-duplicated, the loaded one first."""
    found: dict[str, str] = {str(plugin_dir.resolve()): route_of(plugin_dir, hermes_home)}
    user_dir = Path(hermes_home).expanduser() / "plugins" / "hermes-trove"
    if user_dir.exists() and (user_dir / "plugin.yaml").exists():
        found.setdefault(str(user_dir.resolve()), "link" if user_dir.is_symlink() else "plugins-dir")
    pip = _pip_copy()
    if pip and (Path(pip) / "plugin.yaml").exists():
        found.setdefault(pip, "pip")
    return [{"path": p, "route": r, "loaded": str(i == 0).lower()} for i, (p, r) in enumerate(found.items())]


def skill_section(plugin_dir: Path, hermes_home: str) -> dict[str, Any]:
    """Where the bundled skill is and whether the host's skills index (``<home>/skills``) lists it."""
    bundled = plugin_dir / "skills" / SKILL_NAME
    indexed = Path(hermes_home).expanduser() / "skills" / SKILL_NAME
    in_index = (indexed / "SKILL.md").exists()
    return {"bundled": str(bundled), "index_path": str(indexed), "in_index": in_index,
            "index_target": os.path.realpath(indexed) if in_index else None,
            "namespaced": f"hermes-trove:{SKILL_NAME}",
            "note": "" if in_index else "not in the skills index: restart Hermes with the plugin enabled"
                                        " (it links the skill) or run scripts/install.sh"}


def expose_skill(plugin_dir: Path, hermes_home: str) -> str:
    """Link ``<home>/skills/hermes-trove`` to the bundled skill unless something is already there."""
    bundled = plugin_dir / "skills" / SKILL_NAME
    target = Path(hermes_home).expanduser() / "skills" / SKILL_NAME
    if not (bundled / "SKILL.md").exists():
        return "no bundled skill"
    if target.is_symlink() and not target.exists():
        return f"left alone: {target} is a broken link"  # the operator's to fix; doctor names it
    if target.exists():
        return "present"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(bundled, target_is_directory=True)
        return "linked"
    except OSError as exc:
        log.info("hermes-trove: could not link the skill into %s: %s", target, exc)
        return f"failed: {exc}"


def configured_engine(hermes_home: str) -> str | None:
    """``context.engine`` as the host reads ``<home>/config.yaml`` (a managed scope's file merged, ``${VAR}``
    expanded; with no user file the host runs on its defaults and that managed file); without the host, the
    file as written; None when unreadable, or missing with no host to read (host default: compressor)."""
    path = Path(hermes_home).expanduser() / "config.yaml"
    try:
        import yaml  # type: ignore[import-untyped]  # the host's dependency (PyYAML)

        data: Any = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:  # no user file: the host's defaults, under a managed scope's file
        engine = managed_engine()
        return None if engine is None else engine or "compressor"
    except Exception:  # damaged: the host's loader would serve its defaults (the compressor)
        return None  # and copy the file aside, so the verdict says unreadable, not "set it to trove"
    engine = engine_of(host_config(str(path.parent)) or data)
    return str(engine) if engine else "compressor"


def engine_hint(hermes_home: str) -> str:
    """Why a home may have no store yet, when its config.yaml does not select trove; "" when it does.

    Hermes runs its built-in compressor unless ``context.engine`` is ``trove``, and then trove stores
    nothing, so "no database yet" alone would leave the user waiting for a store that never comes."""
    configured = configured_engine(hermes_home)
    if configured == ENGINE_NAME:
        return ""
    if configured is None:
        return (f"{Path(hermes_home).expanduser() / 'config.yaml'} could not be read, so Hermes runs its built-in"
                " compressor and trove stores nothing")
    return (f"context.engine is {configured!r}, so Hermes runs its built-in compressor and trove stores nothing:"
            " run `hermes config set context.engine trove` and restart Hermes")


def compression_off(hermes_home: str) -> bool:
    """True when ``<home>/config.yaml``, as Hermes reads it, sets ``compression.enabled`` off: Hermes then
    never asks any engine to compact on its own (no automatic trigger; the CLI refuses /compress too).
    Hermes counts it on only when its text is true, 1 or yes (any case), so null, "on" or 2 are off.
    False when on, unset or unreadable."""
    config = host_config(str(Path(hermes_home).expanduser()))
    if config is None:  # outside Hermes: the file as written
        try:
            import yaml

            config = yaml.safe_load((Path(hermes_home).expanduser() / "config.yaml").read_text(encoding="utf-8"))
        except Exception:
            return False
    compression = config.get("compression") if isinstance(config, dict) else None
    enabled = compression.get("enabled", True) if isinstance(compression, dict) else True
    return str(enabled).lower() not in HOST_TRUE


HOST_TRUE = ("true", "1", "yes")  # the texts Hermes reads a config switch as on (compared lower-cased, unstripped)


def engine_of(config: Any) -> Any:
    """``context.engine`` of a parsed config.yaml, as written (None when absent)."""
    context = config.get("context") if isinstance(config, dict) else None
    return context.get("engine") if isinstance(context, dict) else None


def managed_engine() -> str | None:
    """``context.engine`` of the managed scope's config.yaml as the host reads it (``$HERMES_MANAGED_DIR``, else
    /etc/hermes), its ``${VAR}`` references expanded; "" when it names none; None outside Hermes. Read without
    the host's loader, which would set up a Hermes home where there is none."""
    try:
        from hermes_cli.managed_scope import load_managed_config  # type: ignore[import-untyped]

        data = load_managed_config()
    except Exception:  # no host here
        return None
    engine = engine_of(data)
    return os.path.expandvars(engine) if isinstance(engine, str) else ""


# True while ``/trove`` runs: typed in a Hermes session, so the report is read inside the host
# even before the first turn binds an engine (the CLI builds its agent on the first message).
TYPED_IN_HOST: ContextVar[bool] = ContextVar("trove_typed_in_host", default=False)


def host_section(runtime: Runtime, in_host: bool) -> dict[str, Any]:
    """Is the host running trove? The rule: the host builds and binds an engine copy only when
    ``context.engine`` is ``trove``; a bound copy in this process proves it. Outside Hermes the
    configured value is the only evidence."""
    in_host = in_host or TYPED_IN_HOST.get()
    configured = configured_engine(runtime.config.hermes_home)
    bound = runtime.foreground_engine() is not None or bool(runtime.bound_sessions)
    if bound:
        verdict = "serving: the host bound a trove engine in this process"
    elif configured == ENGINE_NAME:
        verdict = ("selected: context.engine is trove; no session bound yet in this process" if in_host
                   else "configured: context.engine is trove (run `hermes` to use it)")
    elif configured is None:
        verdict = "unknown: config.yaml unreadable; the host default is its built-in compressor"
    else:
        verdict = (f"fallback: context.engine is {configured!r}, so the host uses its built-in compressor;"
                   " run `hermes config set context.engine trove`")
    return {"context_engine_configured": configured, "engine_bound": bound, "in_host": in_host,
            "verdict": verdict, "compression_enabled": not compression_off(runtime.config.hermes_home)}


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


def identity_section(runtime: Runtime, in_host: bool = True) -> dict[str, Any]:
    """Plugin identity with its route, other copies, the skill and the host verdict, for every report."""
    plugin_dir = Path(runtime.plugin_path)
    found = copies(plugin_dir, runtime.config.hermes_home)
    out: dict[str, Any] = {"plugin_version": __version__, "plugin_path": str(plugin_dir),
                           "route": found[0]["route"], **git_identity(str(plugin_dir)),
                           "copies": found, "skill": skill_section(plugin_dir, runtime.config.hermes_home),
                           "host": host_section(runtime, in_host)}
    if len(found) > 1:
        others = ", ".join(f"{c['path']} ({c['route']})" for c in found[1:])
        out["warning"] = (f"MORE THAN ONE hermes-trove COPY: loaded {found[0]['path']} ({found[0]['route']});"
                          f" also present: {others}.")
        # served: this process's Hermes loaded this copy and its register() completed
        out["advice"] = copies_advice(found, runtime.config.hermes_home, bool(LOAD_STATE.get("registered")))
    return out


def removal_command(copy: dict[str, str], hermes_home: str) -> str:
    """How to remove one copy, by the route it came in: pip, a link, or a plugin directory."""
    if copy["route"] == "pip":
        return f"`{sys.executable} -m pip uninstall hermes-trove` (removes {copy['path']})"
    user_dir = Path(hermes_home).expanduser() / "plugins" / "hermes-trove"
    if copy["route"] == "link":
        return f"`rm {user_dir}` (the link only; the checkout it points to stays)"
    return f"`hermes plugins remove hermes-trove` (removes {copy['path']})"


def copies_advice(found: list[dict[str, str]], hermes_home: str, loaded_ok: bool) -> str:
    """Remove only copies that do not serve, and only once the serving one is known to load:
    removing the serving copy could leave Hermes with nothing but a broken one."""
    if not loaded_ok:
        return ("run `hermes trove doctor` (it reports from the copy Hermes loads); remove a copy only after that"
                " copy loads and is not the one serving")
    steps = "; ".join(removal_command(c, hermes_home) for c in found[1:])
    return f"the copy serving Hermes ({found[0]['path']}) loaded fine; remove the one(s) it shadows: {steps}"
