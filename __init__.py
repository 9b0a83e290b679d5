"""hermes-trove: a lossless context engine plugin for Hermes Agent.

``register(ctx)`` builds the shared runtime and registers, in order: the ``trove``
context engine, the per-turn ingest and recall-policy hooks, the bundled skill, and
(opt-in) the ``/trove`` command and the ``hermes trove`` CLI command. Any failure is
logged and leaves the host on its built-in compressor; loading never raises.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from .version import __version__

__all__ = ["__version__", "register"]
log = logging.getLogger("hermes_trove")
PLUGIN_DIR = Path(__file__).resolve().parent
SKILL_DIR = PLUGIN_DIR / "skills" / "hermes-trove"


def register(ctx: Any) -> None:
    try:
        _register(ctx)
    except Exception:
        log.exception("hermes-trove failed to load; Hermes keeps its built-in compressor")


def _register(ctx: Any) -> None:
    # Imported here, not at the top: `import hermes_trove.store` (CLI, importer, tests)
    # should not load the engine, the host hooks and the tool table.
    from . import command
    from .config import load_config
    from .engine import TroveEngine
    from .hooks import make_hooks
    from .ops.install import expose_skill
    from .ops.maintenance import startup
    from .runtime import build_runtime

    config = load_config(hermes_home=_hermes_home(ctx))
    runtime = build_runtime(config, llm=getattr(ctx, "llm", None))
    exists = Path(runtime.db.path).exists()  # `hermes trove --help` must not create a database
    if exists:
        runtime.store.db.connect()  # open and migrate now: a broken database fails loudly at load
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

    if exists:
        startup(runtime)  # cheap checks; never raises
    _start_embeddings(runtime)


def _start_embeddings(runtime: Any) -> None:
    """The background embedding indexer (a daemon thread), only when TROVE_EMBEDDINGS_ENABLED."""
    try:
        from .retrieval import indexer

        indexer.start_background(runtime)
    except Exception:
        log.exception("hermes-trove: the embedding indexer did not start; retrieval stays full-text")


def _hermes_home(ctx: Any) -> str | None:
    try:
        from hermes_constants import get_hermes_home

        return str(get_hermes_home())
    except Exception:
        return None
