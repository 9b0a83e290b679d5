"""A failed load is loud: the loader logs what to do at ERROR and still registers ``hermes trove``
(and ``/trove`` when enabled), which report the exception, the module it came from and the fix,
and exit 1.

Each test loads a real copy of the plugin directory under another package name (the way the
host imports a directory plugin, ``hermes_plugins.<key>``) with one module broken.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

import hermes_trove
from hermes_trove import command

IGNORE = shutil.ignore_patterns(".*", "tests", "docs", "scripts", "__pycache__", "*.egg-info", "*.db*", "build",
                                "dist")


class Ctx:
    """The parts of the host's PluginContext the loader uses."""

    def __init__(self) -> None:
        self.engines: list[Any] = []
        self.cli: dict[str, tuple[Any, Any]] = {}
        self.commands: dict[str, Any] = {}

    def register_context_engine(self, engine: Any) -> None:
        self.engines.append(engine)

    def register_cli_command(self, name: str, help: str, setup_fn: Any, handler_fn: Any = None) -> None:
        self.cli[name] = (setup_fn, handler_fn)

    def register_command(self, name: str, handler: Any, description: str = "", args_hint: str = "") -> None:
        self.commands[name] = handler


@pytest.fixture
def broken_copy(tmp_path):
    """``broken_copy(module, line)``: a copy of the plugin directory whose ``module`` runs ``line`` first,
    imported as ``trove_copy_<n>``; returns the package. The copies leave sys.modules afterwards."""
    names: list[str] = []

    def make(module: str, line: str) -> Any:
        pkg = tmp_path / f"copy{len(names)}"
        shutil.copytree(ROOT, pkg, ignore=IGNORE)  # a real copy: the broken module is edited in place
        source = (ROOT / module).read_text(encoding="utf-8")
        head, rest = source.split("from __future__ import annotations\n", 1)
        (pkg / module).write_text(f"{head}from __future__ import annotations\n{line}\n{rest}", encoding="utf-8")
        name = f"trove_copy_{len(names)}"
        names.append(name)
        spec = importlib.util.spec_from_file_location(name, pkg / "__init__.py", submodule_search_locations=[str(pkg)])
        package = importlib.util.module_from_spec(spec)
        sys.modules[name] = package
        spec.loader.exec_module(package)
        return package

    yield make
    for name in names:
        for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
            del sys.modules[key]


def run_cli(ctx: Ctx, *argv: str) -> tuple[int, str]:
    setup, handler = ctx.cli["trove"]
    parser = argparse.ArgumentParser(prog="hermes trove")
    setup(parser)
    with pytest.raises(SystemExit) as done:
        handler(parser.parse_args(list(argv)))
    return int(done.value.code), ""


def test_an_absolute_self_import_in_a_directory_plugin_is_reported_with_the_fix(broken_copy, caplog, capsys):
    package = broken_copy("engine.py", "import hermes_trove.not_a_module_xyz")
    ctx = Ctx()
    with caplog.at_level(logging.ERROR):
        package.register(ctx)  # never raises
    assert ctx.engines == [] and "trove" in ctx.cli and "trove" not in ctx.commands
    failure = package.LOAD_STATE["failure"]
    assert package.LOAD_STATE["registered"] is False
    assert failure["exception"] == "ModuleNotFoundError"
    assert failure["missing_module"] == "hermes_trove.not_a_module_xyz"
    assert failure["module"] == f"{package.__name__}.engine"
    assert failure["imported_by"].endswith("engine.py:" + str(failure["line"]))
    assert failure["code"] == "import hermes_trove.not_a_module_xyz"
    assert "update the plugin" in failure["fix"].lower() and "hermes plugins update hermes-trove" in failure["fix"]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR and "failed to load" in r.getMessage()]
    assert errors and "Fix:" in errors[0].getMessage() and "hermes trove doctor" in errors[0].getMessage()

    for words in (["doctor"], ["status"], ["rotate", "apply"]):
        code, _ = run_cli(ctx, *words)
        out = capsys.readouterr().out
        assert code == 1
        assert out.startswith(f"hermes trove {' '.join(words)}: hermes-trove FAILED TO LOAD")
        assert "No module named 'hermes_trove.not_a_module_xyz'" in out or "No module named 'hermes_trove" in out
        assert f"{package.__name__}.engine" in out and "hermes plugins update" in out
    code, _ = run_cli(ctx, "doctor", "--json")
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["overall"] == "unhealthy" and data["checks"][0]["check"] == "plugin_load"
    assert data["load_error"]["missing_module"] == "hermes_trove.not_a_module_xyz"


def test_every_option_of_the_working_cli_gets_the_report(broken_copy, capsys):
    """`hermes trove migrate --to T` or `... apply --have-backup` after a failed load: the report and exit 1,
    not argparse's unrecognized-argument error (exit 2) that hides why trove is not running."""
    package = broken_copy("engine.py", "import hermes_trove.not_a_module_xyz")
    ctx = Ctx()
    package.register(ctx)
    working = argparse.ArgumentParser()
    command.setup_parser(working)
    for argv in (["migrate", "--to", "copy.db"], ["doctor", "repair", "apply", "--have-backup"],
                 ["assertions", "rebuild", "--apply", "--reset", "--limit", "5"], ["dag", "--format", "mermaid"],
                 ["status", "--session", "s1", "--db", "x.db"]):
        working.parse_args(argv)  # a command line the working CLI takes
        code, _ = run_cli(ctx, *argv)
        out = capsys.readouterr().out
        assert code == 1 and "FAILED TO LOAD" in out, (argv, out)


def test_a_missing_dependency_names_the_package_to_install(broken_copy):
    package = broken_copy("ops/doctor.py", "import trove_missing_dependency_xyz")
    ctx = Ctx()
    package.register(ctx)
    failure = package.LOAD_STATE["failure"]
    assert failure["missing_module"] == "trove_missing_dependency_xyz"
    assert failure["module"] == f"{package.__name__}.ops.doctor"
    assert "pip install trove_missing_dependency_xyz" in failure["fix"]


def test_slash_command_reports_the_failure_when_enabled(broken_copy, monkeypatch):
    monkeypatch.setenv("TROVE_ENABLE_SLASH_COMMAND", "true")
    package = broken_copy("hooks.py", "raise RuntimeError('hooks exploded at import')")
    ctx = Ctx()
    package.register(ctx)
    text = ctx.commands["trove"]("doctor")
    assert text.startswith("/trove doctor: hermes-trove FAILED TO LOAD")
    assert "RuntimeError: hooks exploded at import" in text and f"{package.__name__}.hooks" in text
    assert "update hermes-trove" in text


def test_a_failure_after_the_engine_registered_still_reports(broken_copy, monkeypatch):
    package = broken_copy("engine.py", "")
    ctx = Ctx()
    hooks = importlib.import_module(f"{package.__name__}.hooks")

    def explode(runtime):
        raise ValueError("bad hook table")

    monkeypatch.setattr(hooks, "make_hooks", explode)
    ctx.register_hook = lambda name, cb: None
    package.register(ctx)
    assert len(ctx.engines) == 1 and package.LOAD_STATE["failure"]["error"] == "ValueError: bad hook table"
    assert "trove" in ctx.cli


def test_a_database_error_names_the_path_and_what_to_do(monkeypatch, tmp_path):
    monkeypatch.setenv("TROVE_DATABASE_PATH", str(tmp_path / "x" / "trove.db"))

    def open_it():
        raise sqlite3.DatabaseError("file is not a database")

    try:
        open_it()
    except sqlite3.DatabaseError as exc:
        failure = hermes_trove.describe_failure(exc)
    assert str(tmp_path / "x" / "trove.db") in failure["fix"] and "TROVE_DATABASE_PATH" in failure["fix"]


def test_the_loader_imports_no_feature_module():
    source = (ROOT / "__init__.py").read_text(encoding="utf-8")
    top = source.split("def register", 1)[0]
    relative = [line for line in top.splitlines() if line.strip().startswith("from .")]
    # two leaf modules, each guarded: the version and the load state the reports read
    assert relative == ["    from .version import __version__", "    from .loadstate import LOAD_STATE"], relative
    assert Path(hermes_trove.__file__).resolve() == ROOT / "__init__.py"
