"""``python -m hermes_trove status|doctor|... [--db PATH] [--json]`` (``command.py``, shared with ``/trove``
and ``hermes trove``) and ``python -m hermes_trove import ...`` (the OpenClaw importer, ``importer/cli.py``)."""
from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "import":
        from .importer.cli import main as import_main

        return import_main(args[1:], prog="python -m hermes_trove import")
    from .command import main as command_main

    return command_main(args)


if __name__ == "__main__":
    sys.exit(main())
