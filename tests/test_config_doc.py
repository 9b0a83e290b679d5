"""The configuration reference in ``docs/operator-guide.md`` is generated from ``config.SPEC``.

``SPEC`` is read from the ``TroveConfig`` fields, so the guide is checked against the dataclass.

The block between the ``config-table`` markers must equal ``render_table()``; regenerate it
with ``python tests/test_config_doc.py > /tmp/table.md`` and paste it between the markers.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "operator-guide.md"
START, END = "<!-- config-table:start -->", "<!-- config-table:end -->"
GROUPS = {"core": "Trigger, tail and compaction", "models": "Summarizer and expansion models",
          "storage": "Storage, filters and diagnostics", "payloads": "Large payloads and redaction",
          "embeddings": "Embeddings and semantic retrieval",
          "recall": "Whole-memory recall", "temporal": "Temporal rollups",
          "state": "Remembered state (opt-in)"}


def format_default(var) -> str:
    value = var.default
    if var.kind == "bool":
        return "true" if value else "false"
    if var.kind == "csv":
        return ",".join(value) if value else "(empty)"
    if var.kind == "str":
        return value if value else "(empty)"
    if var.kind == "float":
        return f"{value:g}"
    return str(value)


def render_table(spec=None) -> str:
    if spec is None:
        sys.path.insert(0, str(ROOT / "tests"))
        import conftest  # noqa: F401  (imports the checkout as hermes_trove)

        from hermes_trove.config import SPEC as spec
    lines: list[str] = []
    for group, title in GROUPS.items():
        rows = [v for v in spec if v.group == group]
        if not rows:
            continue
        lines += [f"#### {title}", "", "| Variable | Default | Meaning |", "|---|---|---|"]
        lines += [f"| `{v.name}` | `{format_default(v)}` | {v.doc} |" for v in rows]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def guide_block() -> str:
    text = GUIDE.read_text(encoding="utf-8")
    assert START in text and END in text, f"{GUIDE} lost its config-table markers"
    return text.split(START, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def test_every_spec_variable_appears_in_the_guide_with_its_default():
    from hermes_trove.config import SPEC

    rows = dict(re.findall(r"^\| `(TROVE_[A-Z0-9_]+)` \| `([^`]*)` \|", guide_block(), re.M))
    assert set(rows) == {v.name for v in SPEC}, "docs/operator-guide.md and config.SPEC name different variables"
    assert {k: rows[k] for k in rows} == {v.name: format_default(v) for v in SPEC}


def test_the_guide_table_is_exactly_the_generated_table():
    from hermes_trove.config import SPEC

    assert guide_block() == render_table(SPEC), "regenerate: python tests/test_config_doc.py"


def test_the_guide_names_exactly_the_config_fields_read_from_the_environment():
    from hermes_trove.config import SPEC

    documented = set(re.findall(r"^\| `(TROVE_[A-Z0-9_]+)` \|", guide_block(), re.M))
    assert documented == {v.name for v in SPEC}


def test_the_skill_configuration_reference_carries_the_generated_tables():
    """The bundled skill's ``references/configuration.md`` holds the same tables (its headings one
    level up); regenerate it from ``render_table()`` with ``####`` turned into ``##``."""
    from hermes_trove.config import SPEC

    skill = (ROOT / "skills" / "hermes-trove" / "references" / "configuration.md").read_text(encoding="utf-8")
    assert render_table(SPEC).replace("#### ", "## ") in skill, "skills/.../configuration.md is out of date"


def test_every_spec_group_has_a_heading():
    from hermes_trove.config import SPEC

    assert {v.group for v in SPEC} <= set(GROUPS), "a new config group needs a heading in GROUPS"


if __name__ == "__main__":
    print(render_table(), end="")
