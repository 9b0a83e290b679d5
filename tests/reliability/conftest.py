"""Shared pieces of the reliability suite (each module sets ``pytestmark = pytest.mark.reliability``)."""
from __future__ import annotations

import json
from typing import Any

from hermes_trove.tools import TOOLS, dispatch

MiB = 1 << 20

# Hostile argument shapes, each ``n`` characters long.
SHAPES = {
    "open_parens": lambda n: "(" * (n - 1) + "x",
    "quotes": lambda n: '"' * n,
    "quote_word": lambda n: '"a' * (n // 2),
    "apostrophes": lambda n: "a'" * (n // 2),
    "possessives": lambda n: "x's " * (n // 4),
    "compound": lambda n: "a-" * (n // 2),
    "stars": lambda n: "*" * n,
    "punctuation_words": lambda n: "x((((( " * (n // 7),
    "unicode_marks": lambda n: "e\u0301" * (n // 2),
    "brackets": lambda n: "[" * n,
    "digits": lambda n: "9" * n,
}


def string_parameters(tool: Any) -> list[str]:
    props = tool.schema["parameters"]["properties"]
    return [k for k, v in props.items() if v.get("type") in ("string", ["string", "null"]) or "enum" in v]


def reply(ctx: Any, name: str, args: Any) -> dict[str, Any]:
    out = dispatch(ctx, name, args)
    assert isinstance(out, str)
    out.encode("utf-8")  # never a lone surrogate
    return json.loads(out)


__all__ = ["MiB", "SHAPES", "TOOLS", "reply", "string_parameters"]
