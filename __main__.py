"""``python -m hermes_trove status|doctor|backup|rotate ... [--db PATH] [--json]``.

A shim: the parser and the subcommands live in ``command.py``, shared with ``/trove`` and
``hermes trove``.
"""
from __future__ import annotations

import sys

from hermes_trove.command import main

if __name__ == "__main__":
    sys.exit(main())
