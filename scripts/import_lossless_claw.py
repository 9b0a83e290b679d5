#!/usr/bin/env python3
"""Import OpenClaw history (lossless-claw SQLite or JSONL exports) into hermes-trove.

Run from a checkout (``python scripts/import_lossless_claw.py --help``) or with
hermes-trove installed; see docs/import.md. Dry run unless ``--apply``.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def _load_package() -> None:
    """Make ``hermes_trove`` importable: the checkout this script sits in, else the installed package."""
    if "hermes_trove" in sys.modules:
        return
    root = Path(__file__).resolve().parents[1]
    if (root / "__init__.py").is_file() and (root / "importer").is_dir():
        spec = importlib.util.spec_from_file_location("hermes_trove", root / "__init__.py",
                                                      submodule_search_locations=[str(root)])
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules["hermes_trove"] = module
        spec.loader.exec_module(module)


if __name__ == "__main__":
    _load_package()
    from hermes_trove.importer.cli import main

    sys.exit(main())
