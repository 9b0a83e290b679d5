"""Fixtures for the end-to-end suite: the host interpreter, the fake model server and
scratch Hermes homes with the checkout installed as the ``hermes-trove`` plugin.

The suite skips with a message when no interpreter with hermes-agent is found, unless
``TROVE_E2E_REQUIRED=1`` (set by ``.ci/run``), which turns that skip into a failure.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .fake_llm import FakeLLM
from .harness import HermesHome, candidate_pythons, find_host_python


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def host_python() -> str:
    python = find_host_python()
    if python is None:
        message = (f"hermes-agent is not importable from any of {candidate_pythons()}; run scripts/test.sh"
                   " (which installs hermes-agent==0.19.0 into .venv) or set TROVE_E2E_PYTHON")
        if os.environ.get("TROVE_E2E_REQUIRED") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return python


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
