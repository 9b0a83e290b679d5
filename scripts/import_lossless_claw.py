#!/usr/bin/env python3
"""Import OpenClaw history (lossless-claw SQLite or JSONL exports) into hermes-trove.

Run from a checkout (``python scripts/import_lossless_claw.py --help``) or with
hermes-trove installed; see docs/import.md. Dry run unless ``--apply``.
"""
from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _bootstrap  # noqa: F401  (this checkout is the hermes_trove package)

    from hermes_trove.importer.cli import main

    sys.exit(main())
