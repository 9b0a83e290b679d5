"""Import OpenClaw history into hermes-trove: lossless-claw databases and JSONL exports.

``run_import(ImportOptions(...))`` plans (dry run, the default) or applies one import
and returns an ``ImportReport``; ``cli.main(argv)`` is the operator command behind
``scripts/import_lossless_claw.py``. Sources are only ever read.
"""
from __future__ import annotations

from .report import ImportFailure, ImportReport
from .run import ImportOptions, run_import

# The public face: these names and the modules the host edge and bench/ use.
__all__ = ["ImportFailure", "ImportOptions", "ImportReport", "run_import", "claw_db", "cli", "pipe", "run", "target"]
