"""A managed-scope ``.env`` pins TROVE_* settings for every way trove runs under the real host.

Hermes applies ``$HERMES_MANAGED_DIR/.env`` (``/etc/hermes/.env`` by default) last, over
``$HERMES_HOME/.env`` and the shell's exports. Here the managed file pins
``TROVE_FRESH_TAIL_COUNT=7`` while the home's ``.env`` says 9 and a profile's says 11: ``hermes
trove status`` in the home and in the profile, and ``python -m hermes_trove status`` (which Hermes
does not start), all report 7 from the environment; a setting the managed file leaves alone keeps
the home's value.
"""
from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest


@pytest.fixture(scope="module")
def pinned(make_home, tmp_path_factory) -> dict[str, Any]:
    managed = tmp_path_factory.mktemp("managed")
    (managed / ".env").write_text("# pinned by the administrator\nTROVE_FRESH_TAIL_COUNT=7\n", encoding="utf-8")
    home = make_home(HERMES_MANAGED_DIR=str(managed))
    (home.home / ".env").write_text("TROVE_FRESH_TAIL_COUNT=9\nTROVE_LEAF_CHUNK_TOKENS=3000\n", encoding="utf-8")
    work = home.home / "profiles" / "work"
    (work / "plugins").mkdir(parents=True)
    (work / "config.yaml").write_text(home.config_yaml(), encoding="utf-8")
    (work / "plugins" / "hermes-trove").symlink_to(home.plugin_dir.resolve())
    (work / ".env").write_text("TROVE_FRESH_TAIL_COUNT=11\n", encoding="utf-8")
    home.run_driver({"mode": "cli", "steps": [{"chat": "a first turn so the store exists"}]}, "managed-env")
    site = home.root / "site"
    site.mkdir()
    (site / "hermes_trove").symlink_to(home.plugin_dir.resolve())  # the package as an installed layout has it
    module = subprocess.run([home.python, "-m", "hermes_trove", "status", "--json"],
                            env=home.env(PYTHONPATH=str(site)), cwd=str(home.root), capture_output=True, text=True,
                            timeout=300)
    return {"home": home.run_cli(["trove", "status", "--json"]), "module": module,
            "work": home.hermes("-p", "work", "trove", "status", "--json", "--db", str(home.db_path))}


def _config(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    start = done.stdout.index("{")
    return json.loads(done.stdout[start:])["config"]


@pytest.mark.parametrize("which", ["home", "work", "module"])
def test_the_managed_value_wins_everywhere(pinned, which):
    done = pinned[which]
    config = _config(done)
    assert config["TROVE_FRESH_TAIL_COUNT"] == {"value": 7, "source": "env"}, (done.stdout[-2000:], done.stderr[-2000:])


def test_a_setting_the_managed_file_leaves_alone_keeps_the_homes_value(pinned):
    assert _config(pinned["home"])["TROVE_LEAF_CHUNK_TOKENS"]["value"] == 3000
