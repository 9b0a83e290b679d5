"""Make ``import hermes_trove`` work when a script runs straight from a checkout.

If the package is installed (``pip install -e .``) nothing happens; otherwise the
checkout root (this file's parent's parent) is registered as the package.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def ensure_package() -> None:
    if "hermes_trove" in sys.modules:
        return
    try:
        import hermes_trove  # noqa: F401
        return
    except ImportError:
        pass
    spec = importlib.util.spec_from_file_location("hermes_trove", ROOT / "__init__.py",
                                                  submodule_search_locations=[str(ROOT)])
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["hermes_trove"] = module
    spec.loader.exec_module(module)


ensure_package()
