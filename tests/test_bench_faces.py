"""bench/ and the operator scripts reach the package only through its public faces.

A benchmark that imports ``recall_search._fts_arm`` has to be mended by every refactor of the
module; a public name is a promise the module keeps. Two rules, read from the source (nothing
is imported): no private name (``_x``) of the package is imported, reached as an attribute of
an imported module or object, or named as a string beside one (``setattr(mod, "_x", ...)``);
and a module inside a feature family is imported only when the family's ``__init__.py`` lists
it (or the name taken from the family itself) in ``__all__``.
"""
from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

PACKAGE = "hermes_trove"


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def face(family: str) -> set[str]:
    """The names a family's ``__init__.py`` puts in ``__all__`` (empty when it lists none)."""
    init = ROOT / family / "__init__.py"
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return set()


def outside_the_face(module: str, names: list[str]) -> list[str]:
    """``from <module> import <names>``: what no face offers (a family's module it does not list)."""
    parts = module.split(".")[1:]
    if not parts or not (ROOT / parts[0] / "__init__.py").is_file():
        return []  # the package root or a root module: its public names are its face
    listed = face(parts[0])
    wanted = [parts[1]] if len(parts) > 1 else names
    return [f"{module}: {n} is not in {parts[0]}/__init__.py __all__" for n in wanted
            if n not in listed and not private(n)]


def offences(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bound: set[str] = set()
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE:
                    bound.add(alias.asname or PACKAGE)
                    found += [f"import {alias.name}" for part in alias.name.split(".") if private(part)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == PACKAGE:
            module = node.module or ""
            names = [a.name for a in node.names]
            bound.update(a.asname or a.name for a in node.names)
            found += [f"from {module} import {n}" for n in names if private(n)]
            found += [f"from {module}" for part in module.split(".") if private(part)]
            found += outside_the_face(module, names)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in bound:
                found.append(f"{ast.unparse(node)} (line {node.lineno})")
        elif isinstance(node, ast.Call):
            args = node.args
            if any(isinstance(a, ast.Name) and a.id in bound for a in args):
                found += [f"{ast.unparse(node)[:80]} (line {node.lineno})" for a in args
                          if isinstance(a, ast.Constant) and isinstance(a.value, str) and private(a.value)]
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    return [f"{where}: {what}" for what in found]


def scanned() -> list[Path]:
    return sorted((ROOT / "bench").rglob("*.py")) + sorted((ROOT / "scripts").glob("*.py"))


def test_bench_reaches_the_package_only_through_public_faces():
    assert len(scanned()) > 10
    assert [o for path in scanned() for o in offences(path)] == []


def test_the_scan_catches_each_kind_of_private_reach(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import hermes_trove.db as dbmod\n"
        "from hermes_trove.retrieval import recall_search, _hidden\n"
        "from hermes_trove.retrieval.unlisted import thing\n"
        "from hermes_trove.store import SessionKey\n"
        "dbmod._retry\n"
        "recall_search._Gate(1)\n"
        "setattr(recall_search, '_fts_arm', None)\n"
        "SessionKey._cache\n"
        "other._private\n", encoding="utf-8")
    found = offences(probe)
    text = "\n".join(found)
    for expected in ("import _hidden", "unlisted is not in retrieval", "dbmod._retry", "recall_search._Gate",
                     "'_fts_arm'", "SessionKey._cache"):
        assert expected in text, (expected, text)
    assert "other._private" not in text and len(found) == 6, text


def test_every_name_a_family_face_lists_exists():
    families = sorted(p.parent.name for p in ROOT.glob("*/__init__.py") if p.parent.name not in {"tests", "bench"})
    missing = []
    for family in families:
        init = ROOT / family / "__init__.py"
        bound = {a.asname or a.name for n in ast.walk(ast.parse(init.read_text(encoding="utf-8")))
                 if isinstance(n, ast.ImportFrom) for a in n.names}
        missing += [f"{family}.{name}" for name in face(family)
                    if name not in bound and not (ROOT / family / f"{name}.py").is_file()]
    assert len(families) >= 8 and missing == []
