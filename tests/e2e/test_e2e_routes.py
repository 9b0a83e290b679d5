"""Install routes (b) and (c), each from a fresh home with the real host, and a home with two copies.

(b) ``scripts/install.sh`` links ``$HERMES_HOME/plugins/hermes-trove`` to the checkout, then the host
    commands it prints (``hermes plugins enable hermes-trove``, ``hermes config set context.engine
    trove``); the host loads the link as a directory plugin. With ``HERMES_PROFILE`` instead, the
    script and ``hermes -p NAME`` agree on ``~/.hermes/profiles/NAME``.
(c) ``pip install <clean repo>`` (not editable) into a venv of its own that borrows the host from
    the host venv; the host loads the package through its ``hermes_agent.plugins`` entry point.
    The same venv with the directory plugin ALSO linked in the home is the two-copies case: the
    host imports one copy, each of its files once, and status names the copy that serves.
Route (a), ``hermes plugins install``, is tests/e2e/test_e2e_install.py.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hermes_trove.tools import TOOLS

from .harness import (
    FALLBACK_WARNING,
    ROOT,
    HermesHome,
    RouteRun,
    check_engine_trove,
    check_loopback_only,
    check_skill_visible,
    check_stored_once,
    check_tools_offered,
    content_counts,
    host_script,
    pip_venv,
    plugin_tool_names,
    run_route,
    site_packages,
    wheelhouse,
)

ENABLE = (("plugins", "enable", "hermes-trove"), ("config", "set", "context.engine", "trove"))
PROFILE, PROFILE_TURN = "trove-route", "profile turn: the lighthouse keeper is Ada"
DIRECTORY_MODULES, PIP_MODULES = "hermes_plugins.hermes_trove", "hermes_trove"

# Run in a venv with HERMES_HOME set: the host's plugin discovery, then every module file of a
# hermes-trove copy (argv: the copies' roots; a checkout's tests/, scripts/ and venvs are not
# the package) with the module names it was imported under.
IMPORTED_COPIES = """
import json, sys
from pathlib import Path
from hermes_cli import plugins
plugins.discover_plugins(force=True)
roots = [Path(p).resolve() for p in sys.argv[1:]]
files = {}
for name, module in list(sys.modules.items()):
    path = getattr(module, "__file__", None)
    if not path:
        continue
    path = Path(path).resolve()
    for root in roots:
        top = path.relative_to(root).parts[0] if root in path.parents else "."
        if not top.startswith(".") and top not in ("tests", "scripts"):
            files.setdefault(str(path), []).append(name)
loaded = plugins.get_plugin_manager()._plugins.get("hermes-trove")
print(json.dumps({"files": files, "source": loaded.manifest.source if loaded else None}))
"""


def enable(home: HermesHome) -> None:
    for args in ENABLE:
        home.run_cli(list(args))


@pytest.fixture(scope="module")
def via_install_sh(tmp_path_factory, host_python, fake_llm) -> dict[str, Any]:
    home = HermesHome(tmp_path_factory.mktemp("route-b"), host_python, fake_llm.url, wired=False).create()
    script = subprocess.run(["bash", str(ROOT / "scripts" / "install.sh")], env=home.env(), capture_output=True,
                            text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert script.returncode == 0, script.stdout + script.stderr
    # The host commands the script prints, run exactly as printed.
    commands = [shlex.split(line)[1:] for line in script.stdout.splitlines() if line.startswith("  hermes ")]
    enabled = [home.run_cli(command) for command in commands]
    return {"home": home, "script": script, "commands": commands, "enabled": enabled,
            "run": run_route(home, fake_llm.requests, "route-b")}


@pytest.fixture(scope="module")
def via_profile(tmp_path_factory, host_python, fake_llm) -> dict[str, Any]:
    """install.sh with HERMES_PROFILE (no HERMES_HOME), then the host commands it prints, then one
    ``hermes -p NAME -z`` turn; every process gets HOME=<root> and no HERMES_HOME."""
    root = tmp_path_factory.mktemp("route-b-profile")
    profile = root / ".hermes" / "profiles" / PROFILE
    home = HermesHome(root, host_python, fake_llm.url, wired=False, home_dir=profile).create()
    env = {k: v for k, v in home.env(HERMES_PROFILE=PROFILE).items() if k != "HERMES_HOME"}

    def run(*command: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(list(command), env=env, cwd=str(root), capture_output=True, text=True, timeout=300,
                              stdin=subprocess.DEVNULL)
        assert done.returncode == 0, f"{command} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        return done

    script = run("bash", str(ROOT / "scripts" / "install.sh"))
    hermes = host_script(host_python, "hermes")
    for args in ENABLE:
        run(hermes, "-p", PROFILE, *args)
    turn = run(hermes, "-p", PROFILE, "-z", PROFILE_TURN)
    return {"home": home, "script": script, "turn": turn}


@pytest.fixture(scope="module")
def pip_python(tmp_path_factory, host_python, checkout_repo) -> str:
    """The route-(c) venv: the clean repository pip-installed, the host borrowed."""
    if not any(wheelhouse(host_python).glob("setuptools-*.whl")):
        message = (f"no build backend in {wheelhouse(host_python)} for an offline `pip install` of the checkout;"
                   " scripts/test.sh downloads it beside .venv-host")
        if os.environ.get("TROVE_E2E_REQUIRED") == "1":
            pytest.fail(message)
        pytest.skip(message)
    root = tmp_path_factory.mktemp("pip")
    guard = HermesHome(root, host_python, "http://127.0.0.1:9/v1", wired=False).create()  # pip runs guarded
    python = pip_venv(root, host_python, checkout_repo, guard.env())
    assert guard.netlog.read_text(encoding="utf-8") == "", guard.netlog.read_text(encoding="utf-8")
    return python


@pytest.fixture(scope="module")
def via_pip(tmp_path_factory, pip_python, fake_llm) -> dict[str, Any]:
    home = HermesHome(tmp_path_factory.mktemp("route-c"), pip_python, fake_llm.url, wired=False).create()
    enable(home)
    return {"home": home, "run": run_route(home, fake_llm.requests, "route-c")}


def imported_copies(python: str, home: HermesHome, *roots: Path) -> dict[str, Any]:
    """Run the host's discovery in ``python`` for ``home``; the copies' module files it imported."""
    done = subprocess.run([python, "-c", IMPORTED_COPIES, *map(str, roots)], env=home.env(), cwd=str(home.root),
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def two_copies(tmp_path_factory, pip_python, fake_llm) -> dict[str, Any]:
    """The pip venv with the checkout ALSO linked as the directory plugin (and enabled)."""
    home = HermesHome(tmp_path_factory.mktemp("two-copies"), pip_python, fake_llm.url).create()
    pip_copy = site_packages(pip_python) / "hermes_trove"
    return {"home": home, "pip_copy": pip_copy, "imported": imported_copies(pip_python, home, ROOT, pip_copy),
            "run": run_route(home, fake_llm.requests, "two-copies")}


def assert_each_file_once_from_one_copy(imported: dict[str, Any]) -> None:
    files: dict[str, list[str]] = imported["files"]
    assert files, "discovery imported no hermes-trove module"
    twice = {f: names for f, names in files.items() if len(names) > 1}
    assert not twice, twice
    packages = {"hermes_plugins.hermes_trove" if n.startswith("hermes_plugins.") else n.split(".")[0]
                for names in files.values() for n in names}
    assert len(packages) == 1, packages  # one package name: never both hermes_trove and hermes_plugins.*


def test_the_tool_table_and_plugin_yaml_name_the_same_fifteen_tools():
    names = [t.schema["name"] for t in TOOLS]
    assert len(names) == 15 and sorted(names) == sorted(plugin_tool_names())


# -- (b) scripts/install.sh ---------------------------------------------------------------------
def test_install_sh_links_the_checkout_into_hermes_home(via_install_sh):
    home: HermesHome = via_install_sh["home"]
    assert home.plugin_dir.is_symlink() and home.plugin_dir.resolve() == ROOT.resolve()
    assert f"linked  {home.plugin_dir} -> {ROOT.resolve()}" in via_install_sh["script"].stdout
    assert "hermes plugins enable hermes-trove" in via_install_sh["script"].stdout


def test_the_commands_install_sh_prints_enable_trove_without_a_question(via_install_sh):
    assert [c[:3] for c in via_install_sh["commands"]] == [["plugins", "enable", "hermes-trove"],
                                                           ["config", "set", "context.engine"]]
    for done in via_install_sh["enabled"]:  # trove replaces no built-in tool: nothing to grant
        assert "replace built-in tools" not in done.stdout + done.stderr, done.stdout


def test_install_sh_route_serves_engine_trove_with_every_tool(via_install_sh):
    run: RouteRun = via_install_sh["run"]
    check_engine_trove(run, "link", DIRECTORY_MODULES)
    assert run.result["plugin_source"] == f"user:{run.home.plugin_dir}"
    check_tools_offered(run, plugin_tool_names())
    check_loopback_only(run)


def test_install_sh_route_stores_each_turn_once_and_shows_the_skill(via_install_sh):
    check_stored_once(via_install_sh["run"])
    check_skill_visible(via_install_sh["run"])


def test_install_sh_and_the_host_agree_on_a_profiles_home(via_profile):
    home: HermesHome = via_profile["home"]
    assert home.plugin_dir.is_symlink() and home.plugin_dir.resolve() == ROOT.resolve()
    assert f"hermes -p {PROFILE} plugins enable hermes-trove" in via_profile["script"].stdout
    done = via_profile["turn"]
    assert done.stdout.strip().startswith("ack #"), done.stdout[-2000:]
    assert FALLBACK_WARNING not in done.stdout + done.stderr + home.host_logs()
    assert content_counts(home.db_path).get(("user", PROFILE_TURN)) == 1
    assert (home.home / "skills" / "hermes-trove" / "SKILL.md").exists()


# -- (c) pip install ------------------------------------------------------------------------------
def test_the_pip_venv_imports_the_installed_copy_not_the_checkout(pip_python):
    done = subprocess.run([pip_python, "-c", "import hermes_trove; print(hermes_trove.__file__)"], cwd="/",
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).parent == site_packages(pip_python) / "hermes_trove"
    assert (site_packages(pip_python) / "hermes_trove" / "plugin.yaml").exists()


def test_pip_route_serves_engine_trove_with_every_tool(via_pip):
    run: RouteRun = via_pip["run"]
    check_engine_trove(run, "pip", PIP_MODULES)
    assert run.result["plugin_source"] == "entrypoint:hermes_trove"
    check_tools_offered(run, plugin_tool_names())
    check_loopback_only(run)


def test_pip_route_stores_each_turn_once_and_shows_the_skill(via_pip):
    check_stored_once(via_pip["run"])
    check_skill_visible(via_pip["run"])
    assert [c["route"] for c in via_pip["run"].status["plugin"]["copies"]] == ["pip"]


# -- a pip copy and a directory plugin at once ---------------------------------------------------
def test_with_two_copies_each_module_file_is_imported_once_from_one_copy(two_copies):
    assert_each_file_once_from_one_copy(two_copies["imported"])
    roots = {two_copies["pip_copy"] if Path(f).is_relative_to(two_copies["pip_copy"]) else ROOT
             for f in two_copies["imported"]["files"]}
    assert len(roots) == 1, roots


def test_with_two_copies_status_names_the_copy_that_serves_and_warns(two_copies):
    run: RouteRun = two_copies["run"]
    plugin, pip_copy = run.status["plugin"], str(two_copies["pip_copy"])
    serving = pip_copy if run.result["engine_class"].startswith(PIP_MODULES + ".") else str(ROOT.resolve())
    assert plugin["copies"][0] == {"path": serving, "route": plugin["route"], "loaded": "true"}, plugin["copies"]
    assert {c["path"] for c in plugin["copies"]} == {pip_copy, str(ROOT.resolve())}
    assert plugin["warning"].startswith("MORE THAN ONE hermes-trove COPY: loaded " + serving), plugin["warning"]
    assert (two_copies["imported"]["source"] == "entrypoint") == (serving == pip_copy), two_copies["imported"]
    assert run.result["engine_name"] == "trove"
    check_stored_once(run)


def test_an_editable_install_beside_the_directory_imports_each_file_once(tmp_path, fake_llm):
    """The developer's .venv (checkout editable) with the checkout linked in the home as well."""
    if importlib.util.find_spec("hermes_cli") is None:
        pytest.skip("the interpreter running pytest has no hermes-agent (scripts/test.sh's .venv has it)")
    home = HermesHome(tmp_path, sys.executable, fake_llm.url).create()
    assert_each_file_once_from_one_copy(imported_copies(sys.executable, home, ROOT))
