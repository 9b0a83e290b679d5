"""Install the Hermes way: ``hermes plugins install <local git repo> --enable``, then the one step
after-install.md names (``hermes config set context.engine trove``), then a turn with engine trove.

The checkout's working tree is committed into a scratch git repository (the host clones with
git), installed into a scratch home that starts with no plugin and no engine configured.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .harness import FALLBACK_WARNING, ROOT, HermesHome, host_script, query

IGNORE = shutil.ignore_patterns(".git", ".venv", ".*_cache", "__pycache__", "*.egg-info", "build", "*.db")


def local_repo(where: Path) -> Path:
    repo = where / "hermes-trove"
    shutil.copytree(ROOT, repo, symlinks=True, ignore=IGNORE)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid", "GIT_CONFIG_NOSYSTEM": "1"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "snapshot"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, timeout=120)
    return repo


def hermes(home: HermesHome, *args: str) -> subprocess.CompletedProcess[str]:
    """``hermes ARGS`` in the scratch home; unlike ``run_cli`` a non-zero exit is returned, not raised."""
    return subprocess.run([host_script(home.python, "hermes"), *args], env=home.env(), cwd=str(home.root),
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def installed(tmp_path_factory, host_python, fake_llm) -> dict[str, Any]:
    if shutil.which("git") is None:
        pytest.skip("git is required: `hermes plugins install` clones")
    root = tmp_path_factory.mktemp("install")
    repo = local_repo(tmp_path_factory.mktemp("repo"))
    home = HermesHome(root, host_python, fake_llm.url)
    home.home.mkdir(parents=True)
    home.create()
    (home.home / "plugins" / "hermes-trove").unlink()  # no linked checkout: the host installs it
    config = home.config_yaml().replace("context:\n  engine: trove\n", "").replace(
        "plugins:\n  enabled: [hermes-trove]\n", "")
    (home.home / "config.yaml").write_text(config, encoding="utf-8")
    install = hermes(home, "plugins", "install", f"file://{repo}", "--enable")
    engine = hermes(home, "config", "set", "context.engine", "trove")
    turn = hermes(home, "chat", "-Q", "-q", "install turn: remember the code word heliotrope")
    status = hermes(home, "trove", "status", "--json")
    bad = hermes(home, "trove", "frobnicate")
    return {"home": home, "install": install, "engine": engine, "turn": turn, "status": status, "bad": bad}


def test_the_host_installs_enables_and_shows_the_after_install_step(installed):
    done = installed["install"]
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "hermes config set context.engine trove" in out and "enabled" in out
    plugin = installed["home"].home / "plugins" / "hermes-trove"
    assert (plugin / "plugin.yaml").exists() and not plugin.is_symlink()
    assert installed["engine"].returncode == 0, installed["engine"].stderr


def test_a_turn_runs_with_engine_trove_after_the_host_commands(installed):
    done, home = installed["turn"], installed["home"]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert FALLBACK_WARNING not in done.stdout + done.stderr + home.host_logs()
    rows = query(home.db_path, "SELECT content FROM messages WHERE role='user'")
    assert any("heliotrope" in str(r[0]) for r in rows)


def test_the_skill_is_in_the_index_and_status_names_the_installed_copy(installed):
    home = installed["home"]
    skill = home.home / "skills" / "hermes-trove" / "SKILL.md"
    assert skill.exists()
    done = installed["status"]
    assert done.returncode == 0, done.stderr
    plugin = json.loads(done.stdout[done.stdout.index("{"):])["plugin"]
    paths = {c["path"] for c in plugin["copies"]}
    assert str((home.home / "plugins" / "hermes-trove").resolve()) in paths
    assert plugin["skill"]["in_index"] is True
    if len(paths) > 1:  # this venv also has the checkout pip-installed: said loudly
        assert "MORE THAN ONE hermes-trove COPY" in plugin["warning"]


def test_hermes_trove_exit_codes_reach_the_shell(installed):
    assert installed["bad"].returncode == 2
    assert "unknown subcommand: frobnicate" in installed["bad"].stdout
