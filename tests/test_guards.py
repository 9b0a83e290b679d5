"""Guards: plugin.yaml, the skill and the tool docs stay in step with the one tool table."""
from __future__ import annotations

import re

import pytest
from conftest import ROOT

from hermes_trove.config import SPEC
from hermes_trove.tools import TOOL_SCHEMAS, TOOLS, TOOLS_BY_NAME

SKILL_DIR = ROOT / "skills" / "hermes-trove"
DOCS = ROOT / "docs" / "retrieval-tools.md"
REFERENCES = ("configuration", "architecture", "diagnostics", "recall-routing", "session-lifecycle",
              "recall-policy")


def manifest_tools() -> list[str]:
    text = (ROOT / "plugin.yaml").read_text(encoding="utf-8")
    block = re.search(r"^provides_tools:\n((?:\s+-\s+\S+\n?)+)", text, re.M)
    assert block, "plugin.yaml has no provides_tools list"
    return re.findall(r"-\s+(\S+)", block.group(1))


def doc_sections() -> dict[str, str]:
    text = DOCS.read_text(encoding="utf-8")
    parts = re.split(r"^## (trove_\w+)\s*$", text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


NAMES = [t.name for t in TOOLS]


def test_manifest_names_the_tool_table_in_order():
    assert manifest_tools() == NAMES
    assert len(set(NAMES)) == len(NAMES)


@pytest.mark.parametrize("tool", TOOLS, ids=NAMES)
def test_every_row_has_a_named_schema_a_handler_and_a_cap(tool):
    assert tool.schema["name"] == tool.name and tool.name.startswith("trove_")
    assert callable(tool.handler) and tool.handler.__name__ == tool.name
    assert isinstance(tool.response_cap, int) and 10_000 <= tool.response_cap <= 100_000


def test_every_schema_is_a_bare_function_schema_the_host_accepts():
    for schema in TOOL_SCHEMAS:
        assert set(schema) == {"name", "description", "parameters"}
        assert schema["name"].startswith("trove_") and 40 <= len(schema["description"]) <= 600
        params = schema["parameters"]
        assert params["type"] == "object" and isinstance(params["properties"], dict)
        assert set(params.get("required", [])) <= set(params["properties"])
        for name, prop in params["properties"].items():
            assert re.fullmatch(r"[a-z_]+", name)
            assert prop.get("description"), f"{schema['name']}.{name} lacks a description"
            assert isinstance(prop.get("type"), str), f"{schema['name']}.{name} needs one JSON type"
            if prop["type"] == "array":
                assert "items" in prop


def test_engine_advertises_copies_of_the_schemas(engine):
    got = engine.get_tool_schemas()
    assert [s["name"] for s in got] == [s["name"] for s in TOOL_SCHEMAS]
    got[0]["name"] = "mutated"
    assert TOOL_SCHEMAS[0]["name"] == "trove_grep"


def test_docs_have_one_section_per_tool_in_table_order():
    assert list(doc_sections()) == NAMES


@pytest.mark.parametrize("tool", NAMES)
def test_docs_describe_every_parameter_of_the_tool(tool):
    section = doc_sections()[tool]
    for param in TOOLS_BY_NAME[tool].parameters:
        assert f"`{param}`" in section, f"docs/retrieval-tools.md: {tool} does not document {param}"


def doc_caps() -> dict[str, str]:
    """The docs' cap table: each tool named in a row, mapped to that row's cap cell."""
    text = DOCS.read_text(encoding="utf-8")
    table = re.search(r"^\| Tool \| Response cap \(chars\) \|\n\|---\|---\|\n((?:\|.*\n)+)", text, re.M)
    assert table, "docs/retrieval-tools.md has no response cap table"
    caps: dict[str, str] = {}
    for row in table.group(1).splitlines():
        tools_cell, cap_cell = (c.strip() for c in row.strip("|").split("|"))
        caps.update({name: cap_cell for name in re.findall(r"`(trove_\w+)`", tools_cell)})
    return caps


def test_docs_cap_table_names_every_tool_with_its_cap_from_the_table():
    caps = doc_caps()
    assert sorted(caps) == sorted(NAMES)
    for tool in TOOLS:
        cell = caps[tool.name]
        # A tool that pages within a smaller bound documents both, the overall cap last.
        assert cell == f"{tool.response_cap:,}" or cell.endswith(f", {tool.response_cap:,} overall"), (tool.name, cell)


def test_skill_has_front_matter_and_mentions_every_tool():
    text = (SKILL_DIR / "SKILL.md").read_text(encoding="utf-8")
    front = re.match(r"^---\n(.*?)\n---\n", text, re.S)
    assert front, "SKILL.md needs YAML front matter"
    assert re.search(r"^name: hermes-trove$", front.group(1), re.M)
    assert re.search(r"^description: .{20,}", front.group(1), re.M)
    for name in NAMES:
        assert f"`{name}`" in text


def test_skill_tool_table_has_one_row_per_tool_in_table_order():
    text = (SKILL_DIR / "SKILL.md").read_text(encoding="utf-8")
    table = re.search(r"^\| Tool \| Use it to \|\n\|---\|---\|\n((?:\|.*\n)+)", text, re.M)
    assert table, "SKILL.md has no tool table"
    rows = [re.fullmatch(r"\| `(trove_\w+)` \| (.+) \|", line) for line in table.group(1).splitlines()]
    assert all(rows), "each SKILL.md tool row is one tool and one line"
    assert [r.group(1) for r in rows] == NAMES
    assert all(len(r.group(2)) <= 140 for r in rows), "one short line per tool"


# Where the injected policy sends each kind of question: these tools must be in its routing list.
POLICY_ROUTES = {"this session": "trove_grep", "other conversations": "trove_recall", "a time": "trove_recent",
                 "a fact that changes": "trove_query_state", "arithmetic": "trove_compute",
                 "exact evidence": "trove_evidence_pack", "open a hit": "trove_expand"}


def test_recall_policy_routes_each_kind_of_question_to_its_tool():
    policy = (SKILL_DIR / "references" / "recall-policy.md").read_text(encoding="utf-8")
    routes = {}
    for line in policy.splitlines():
        for part in line.strip(" -").split(";"):
            cue, sep, target = part.partition(":")
            if sep and (tool := re.search(r"\btrove_\w+", target)):
                routes[cue.strip()] = tool.group(0)
    for cue, tool in POLICY_ROUTES.items():
        assert any(c.startswith(cue) and t == tool for c, t in routes.items()), (cue, tool, routes)
    assert "trove_grep with time_from" not in policy  # time questions go to trove_recent
    assert "if enabled" in policy.split("trove_query_state", 1)[1].splitlines()[0]


def test_skill_references_exist_and_are_linked_from_the_skill():
    text = (SKILL_DIR / "SKILL.md").read_text(encoding="utf-8")
    for name in REFERENCES:
        assert (SKILL_DIR / "references" / f"{name}.md").is_file()
        assert f"references/{name}.md" in text


def test_recall_policy_is_short_and_names_only_real_tools():
    policy = (SKILL_DIR / "references" / "recall-policy.md").read_text(encoding="utf-8")
    assert len(policy) < 900
    for tool in set(re.findall(r"trove_\w+", policy)):
        assert tool in TOOLS_BY_NAME, f"recall policy names unknown tool {tool}"
    assert "cue" in policy and "without a tool call" in policy


def test_hooks_inject_the_policy_file_byte_for_byte():
    from hermes_trove.hooks import recall_policy

    assert recall_policy() == (SKILL_DIR / "references" / "recall-policy.md").read_text(encoding="utf-8")


def test_skill_and_docs_name_only_real_tools_and_variables():
    known_vars = {v.name for v in SPEC}
    files = [DOCS, *SKILL_DIR.rglob("*.md")]
    for path in files:
        text = path.read_text(encoding="utf-8")
        for tool in set(re.findall(r"\btrove_[a-z_]+\b", text)):
            assert tool in TOOLS_BY_NAME, f"{path.name} names unknown tool {tool}"
        for var in set(re.findall(r"\bTROVE_[A-Z0-9_]+\b", text)):
            assert var in known_vars, f"{path.name} names unknown variable {var}"
