"""Make ``import hermes_trove`` mean this checkout when a script runs from it.

The checkout root (this file's parent's parent) is the package; it is registered under
that name unless a ``hermes_trove`` module is already loaded, so a script never mixes an
installed copy with the code beside it.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def ensure_package() -> None:
    if "hermes_trove" in sys.modules:
        return
    spec = importlib.util.spec_from_file_location("hermes_trove", ROOT / "__init__.py",
                                                  submodule_search_locations=[str(ROOT)])
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["hermes_trove"] = module
    spec.loader.exec_module(module)


ensure_package()
