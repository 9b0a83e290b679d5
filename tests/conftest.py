"""Test setup: import the checkout as ``hermes_trove`` and build engines on temp databases."""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"

# The checkout root is the package itself; as a plain sys.path entry (``python -m pytest``
# adds the working directory) its modules (tools.py, config.py, ...) would shadow the
# host's top-level packages of the same names.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT]

sys.path.insert(0, str(ROOT / "scripts"))
import _bootstrap  # noqa: E402,F401  (registers this checkout as the hermes_trove package)

from hermes_trove.config import load_config  # noqa: E402
from hermes_trove.runtime import build_runtime  # noqa: E402


def make_config(tmp_path: Path, **overrides):
    cfg = load_config({}, hermes_home=str(tmp_path))
    cfg = dataclasses.replace(cfg, database_path=str(tmp_path / "trove.db"))
    return dataclasses.replace(cfg, **overrides) if overrides else cfg


@pytest.fixture(autouse=True)
def _fresh_circuit_breakers():
    """Breakers are per process; each test starts with every summary route closed."""
    from hermes_trove.compaction.summarize import BREAKERS

    BREAKERS.reset()
    yield
    BREAKERS.reset()


@pytest.fixture
def config(tmp_path):
    return make_config(tmp_path)


@pytest.fixture
def runtime(config):
    return build_runtime(config)


@pytest.fixture
def engine(runtime):
    from hermes_trove.engine import TroveEngine

    eng = TroveEngine(runtime)
    eng.update_model("fake-model", 128000)
    eng.on_session_start("s1", platform="cli", conversation_id=None)
    return eng


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def assistant(text: str, calls: list | None = None) -> dict:
    msg = {"role": "assistant", "content": text}
    if calls:
        msg["tool_calls"] = calls
    return msg


def tool_call(call_id: str, name: str, args: str = "{}") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def tool_result(call_id: str, text: str, name: str = "terminal") -> dict:
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": text}
