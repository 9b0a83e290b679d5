"""Fixtures for the end-to-end suite: the host interpreter, the fake model server and
scratch Hermes homes with the checkout installed as the ``hermes-trove`` plugin.

The suite skips with a message when no interpreter with hermes-agent is found, unless
``TROVE_E2E_REQUIRED=1`` (set by ``.ci/run``), which turns that skip into a failure. A host
interpreter that can import ``hermes_trove`` always fails the suite: its copy would shadow
the directory plugin every test means to exercise.
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .fake_llm import FakeLLM
from .harness import HermesHome, candidate_pythons, find_host_python, package_importable, snapshot_repo


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def host_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The host interpreter (hermes-agent without hermes-trove), checked once per session."""
    python = find_host_python()
    if python is None:
        message = (f"hermes-agent is not importable from any of {candidate_pythons() or '(none found)'};"
                   " run scripts/test.sh (which builds .venv-host with only hermes-agent==0.19.0)"
                   " or set TROVE_E2E_PYTHON to such an interpreter")
        if os.environ.get("TROVE_E2E_REQUIRED") == "1":
            pytest.fail(message)
        pytest.skip(message)
    assert_directory_plugin_only(python, tmp_path_factory.mktemp("host-probe"))
    return python


def assert_directory_plugin_only(python: str, scratch: Path) -> None:
    """Fail unless ``python``, in a host process's environment, cannot import ``hermes_trove``."""
    env = HermesHome(scratch, python, "http://127.0.0.1:9/v1").env()
    found = package_importable(python, env)
    if found is not None:
        pytest.fail(f"the e2e host interpreter {python} can import hermes_trove ({found}): that copy would"
                    " shadow the directory plugin under test. Use an interpreter with only hermes-agent"
                    " (scripts/test.sh builds .venv-host) via TROVE_E2E_PYTHON.")


@pytest.fixture(scope="module")
def fake_llm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeLLM]:
    server = FakeLLM(tmp_path_factory.mktemp("fake-llm") / "requests.jsonl").start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def make_home(tmp_path_factory: pytest.TempPathFactory, host_python: str,
              fake_llm: FakeLLM) -> Callable[..., HermesHome]:
    """Build a scratch home: ``make_home(context_length=, **TROVE_env_overrides)``."""

    def build(context_length: int = 128000, **env: str) -> HermesHome:
        root = tmp_path_factory.mktemp("hermes")
        return HermesHome(root, host_python, fake_llm.url, context_length=context_length,
                          env_overrides=dict(env)).create()

    return build


@pytest.fixture(scope="session")
def checkout_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One clean git repository of the working tree, shared by the install-route tests."""
    if shutil.which("git") is None:
        message = "git is required: `hermes plugins install` clones, and the routes install from a clean copy"
        if os.environ.get("TROVE_E2E_REQUIRED") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return snapshot_repo(tmp_path_factory.mktemp("repo"))
