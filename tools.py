"""The tool table and its dispatcher: one ``Tool(schema, handler, response_cap)`` row per tool.

Handlers live in family modules (``retrieval.grep``, ``retrieval.sessions``,
``retrieval.expand``, ``retrieval.answer``, ``ops.handlers``) and return dicts. ``dispatch``
is the one boundary for tool calls: it parses the arguments, runs the handler under its
row's cap and always returns a JSON string, a bounded result or ``{"error": ...}``.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from . import schemas
from .ops.handlers import trove_doctor, trove_inspect, trove_status
from .retrieval.answer import trove_expand_query
from .retrieval.expand import trove_describe, trove_expand
from .retrieval.grep import trove_grep
from .retrieval.sessions import trove_load_session
from .toolkit import ToolContext, ToolError, bound_json, dumps

log = logging.getLogger("hermes_trove.tools")

Handler = Callable[[ToolContext, Mapping[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Tool:
    """One advertised tool: its schema, its handler and the hard bound on its response."""

    schema: Mapping[str, Any]
    handler: Handler
    response_cap: int  # characters of JSON; handlers that page content fit their items under it

    @property
    def name(self) -> str:
        return str(self.schema["name"])

    @property
    def parameters(self) -> frozenset[str]:
        return frozenset(self.schema["parameters"]["properties"])


TOOLS: tuple[Tool, ...] = (
    Tool(schemas.TROVE_GREP, trove_grep, 32000),
    Tool(schemas.TROVE_DESCRIBE, trove_describe, 32000),
    Tool(schemas.TROVE_EXPAND, trove_expand, 96000),
    Tool(schemas.TROVE_EXPAND_QUERY, trove_expand_query, 32000),
    Tool(schemas.TROVE_LOAD_SESSION, trove_load_session, 64000),
    Tool(schemas.TROVE_STATUS, trove_status, 32000),
    Tool(schemas.TROVE_INSPECT, trove_inspect, 20000),
    Tool(schemas.TROVE_DOCTOR, trove_doctor, 32000),
)

TOOLS_BY_NAME: dict[str, Tool] = {t.name: t for t in TOOLS}
TOOL_SCHEMAS: tuple[Mapping[str, Any], ...] = tuple(t.schema for t in TOOLS)


def dispatch(ctx: ToolContext, name: str, args: Any) -> str:
    """Run one tool call; always a JSON string, never an exception."""
    tool = TOOLS_BY_NAME.get(name)
    if tool is None:
        return dumps({"error": f"unknown tool {str(name)[:80]!r}; available: {', '.join(TOOLS_BY_NAME)}"})
    try:
        parsed = parse_args(args)
        payload = tool.handler(replace(ctx, response_cap=tool.response_cap), parsed)
        ignored = sorted(str(k) for k in parsed if k not in tool.parameters)
        if ignored:
            payload["ignored_arguments"] = ignored
        return bound_json(payload, tool.response_cap)
    except ToolError as exc:
        return dumps({"error": str(exc)})
    except Exception as exc:  # a defect must still answer the model, not crash the turn
        log.exception("trove: tool %s failed", name)
        return dumps({"error": f"{name} failed: {type(exc).__name__}: {str(exc)[:500]}"})


def parse_args(args: Any) -> dict[str, Any]:
    """Tool arguments as a dict; a JSON object string is accepted, anything else refused."""
    if args is None:
        return {}
    if isinstance(args, str):
        if not args.strip():
            return {}
        try:
            args = json.loads(args)
        except ValueError:
            raise ToolError("arguments must be a JSON object") from None
    if not isinstance(args, dict):
        raise ToolError(f"arguments must be a JSON object, got {type(args).__name__}")
    return dict(args)
