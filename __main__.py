"""Operator CLI: ``python -m hermes_trove status|doctor|backup|rotate ... [--db PATH] [--json]``.

The same subcommands as ``/trove`` (see ``command.py``), for use outside a Hermes session;
``hermes trove ...`` reaches the same code through ``ctx.register_cli_command``. It never
creates a database: a missing ``--db`` file is an error, not an empty new store.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from typing import Any, Callable, Sequence

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


def _runtime_for(db: str | None, fallback: Any = None) -> Any:
    from .config import database_path, load_config
    from .runtime import build_runtime

    if fallback is not None and not db:
        return fallback
    config = load_config(os.environ)
    if db:
        config = dataclasses.replace(config, database_path=os.path.abspath(os.path.expanduser(db)))
    path = database_path(config)
    if not path.exists():
        raise FileNotFoundError(f"no trove database at {path} (pass --db PATH)")
    return build_runtime(config)


def execute(args: argparse.Namespace, runtime: Any = None, out: Any = None,
            prog: str = "python -m hermes_trove") -> int:
    """Run one parsed command line and print the result; returns the exit code."""
    from .command import render, run

    out = out or sys.stdout
    try:
        runtime = _runtime_for(getattr(args, "trove_db", None), runtime)
    except (FileNotFoundError, ValueError) as exc:
        print(f"trove: {exc}", file=sys.stderr)
        return EXIT_USAGE
    words = list(getattr(args, "trove_words", None) or [])
    name, result = run(runtime, words, session_id=getattr(args, "trove_session", None) or None)
    if getattr(args, "trove_json", False):
        print(json.dumps(result, indent=2, default=str), file=out)
    else:
        print(render(name, result, prefix=prog), file=out)
    if result.get("help"):
        return EXIT_USAGE if result.get("error") else EXIT_OK
    if result.get("status") in ("error", "refused", "still_unhealthy") or result.get("overall") == "unhealthy":
        return EXIT_PROBLEM
    return EXIT_OK


def cli_handler(runtime: Any) -> Callable[[argparse.Namespace], int]:
    """``handler_fn`` for ``ctx.register_cli_command``: the plugin's runtime unless --db is given."""
    return lambda args: execute(args, runtime, prog="hermes trove")


def main(argv: Sequence[str] | None = None, out: Any = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hermes_trove", description=__doc__.splitlines()[0])
    setup_parser(parser)
    return execute(parser.parse_args(argv), out=out)


if __name__ == "__main__":
    sys.exit(main())
