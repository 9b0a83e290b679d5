#!/usr/bin/env python3
"""Import OpenClaw history (lossless-claw SQLite or JSONL exports) into hermes-trove.

The same command as ``python -m hermes_trove import``; see docs/import.md. Dry run unless
``--apply``. Self-sufficient: it uses an installed hermes-trove when there is one, else the
checkout this file sits in, so a copy of this one file works wherever hermes-trove is installed.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def _load_package() -> None:
    """Make ``import hermes_trove`` work: the installed package, else this file's checkout."""
    if "hermes_trove" in sys.modules:
        return
    root = Path(__file__).resolve().parents[1]
    in_checkout = (root / "plugin.yaml").exists() and (root / "importer" / "cli.py").exists()
    if in_checkout:  # beside its code: never mix an installed copy with the checkout
        spec = importlib.util.spec_from_file_location("hermes_trove", root / "__init__.py",
                                                      submodule_search_locations=[str(root)])
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["hermes_trove"] = module
        spec.loader.exec_module(module)
        return
    if importlib.util.find_spec("hermes_trove") is None:
        sys.exit("import_lossless_claw.py: hermes-trove is not installed here; "
                 "`pip install hermes-trove` or run this script from a hermes-trove checkout")


if __name__ == "__main__":
    _load_package()
    from hermes_trove.importer.cli import main

    sys.exit(main())
