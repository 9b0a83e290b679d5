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
from hermes_trove.engine import TroveEngine  # noqa: E402
from hermes_trove.runtime import build_runtime  # noqa: E402


class _CheckoutAsPlainDirectory:
    """Collect the checkout root as a plain directory, not as a test package.

    Its ``__init__.py`` would make pytest import the checkout under its folder's name and put
    the folder's parent (or, for a name like ``hermes-trove``, the checkout itself) on sys.path.
    """

    @pytest.hookimpl(tryfirst=True)
    def pytest_collect_directory(self, path: Path, parent: pytest.Collector) -> pytest.Collector | None:
        return pytest.Dir.from_parent(parent, path=path) if path == ROOT else None


def pytest_configure(config: pytest.Config) -> None:
    # Registered as a plugin: a conftest's own hooks never see the directories above it.
    if hasattr(pytest, "Dir"):
        config.pluginmanager.register(_CheckoutAsPlainDirectory(), "trove-checkout-as-plain-directory")


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


def no_model(messages, model, timeout_s, max_tokens):
    """The fake model of tests that want none: every call fails, so summaries truncate."""
    raise RuntimeError("no model in this test")


def make_engine(runtime, complete=no_model, *, session="s1", context_length=128000, platform="cli"):
    """An engine on ``runtime`` bound to ``session``, with ``complete`` as its (fake) model.

    ``complete=None`` would route to the host's auxiliary client; tests never want that.
    """
    eng = TroveEngine(runtime, complete=complete)
    eng.update_model("fake-model", context_length)
    eng.on_session_start(session, platform=platform, conversation_id=None)
    return eng


@pytest.fixture
def engine(runtime):
    return make_engine(runtime)


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
