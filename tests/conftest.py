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
sys.path.insert(0, str(ROOT / "bench"))  # simulate.py, the stand-in host loop
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


# Provider credentials and endpoints a developer's shell may carry; tests never see them.
PROVIDER_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENROUTER_API_KEY",
                "GOOGLE_API_KEY", "GEMINI_API_KEY", "NOUS_API_KEY", "DEEPSEEK_API_KEY", "XAI_API_KEY",
                "MISTRAL_API_KEY", "GROQ_API_KEY", "TOGETHER_API_KEY", "HF_TOKEN", "HERMES_INFERENCE_PROVIDER")
_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", ""}


def is_loopback(host: object) -> bool:
    import ipaddress

    if host is None:
        return True
    text = host.decode() if isinstance(host, bytes) else str(host)
    text = text.strip("[]").split("%", 1)[0].lower()
    if text in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        return False


class OutgoingConnectionRefused(ConnectionRefusedError):
    """A test tried to reach a host other than 127.0.0.1 (tests never reach a real provider)."""


def _guard_sockets(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex
    real_create, real_getaddrinfo = socket.create_connection, socket.getaddrinfo

    def check(sock: socket.socket | None, address: object) -> None:
        if sock is not None and sock.family not in (socket.AF_INET, socket.AF_INET6):
            return  # Unix sockets stay local
        host = address[0] if isinstance(address, tuple) and address else address
        if not is_loopback(host):
            raise OutgoingConnectionRefused(f"test network guard: connection to {address!r} refused")

    def connect(self: socket.socket, address: object) -> None:
        check(self, address)
        return real_connect(self, address)  # type: ignore[arg-type]

    def connect_ex(self: socket.socket, address: object) -> int:
        check(self, address)
        return real_connect_ex(self, address)  # type: ignore[arg-type]

    def create_connection(address: tuple, *args: object, **kwargs: object) -> socket.socket:
        check(None, address)
        return real_create(address, *args, **kwargs)  # type: ignore[arg-type]

    def getaddrinfo(host: object, *args: object, **kwargs: object) -> list:
        check(None, (host,))  # no DNS lookups of outside names either
        return real_getaddrinfo(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "create_connection", create_connection)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every test: a temporary HERMES_HOME, no provider credentials, only 127.0.0.1 reachable."""
    monkeypatch.setenv("HERMES_HOME", str(tmp_path_factory.mktemp("hermes-home")))
    for name in PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)
    _guard_sockets(monkeypatch)


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
