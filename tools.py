"""The tool table and its dispatcher: one ``Tool(schema, handler, response_cap)`` row per tool.

Handlers live in family modules (``retrieval.grep``, ``retrieval.expand``,
``retrieval.answer``, ``ops.handlers``) and return dicts. ``dispatch``
is the one boundary for tool calls: it parses the arguments, runs the handler under its
row's cap and always returns a JSON string, a bounded result or ``{"error": ...}``. A handler
reaches another tool through the same boundary, ``ctx.call(name, args)`` (``call_tool``); there
an argument the callee does not take is refused, not ignored, and a tool already running in
that call is refused, so calls never recurse.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from . import schemas
from .evidence.handlers import trove_compile_evidence, trove_evidence_pack
from .evidence.handlers import trove_compute as compute_over
from .ops.handlers import trove_doctor, trove_inspect, trove_status
from .retrieval.answer import trove_expand_query
from .retrieval.expand import trove_describe, trove_expand, trove_load_session
from .retrieval.grep import trove_grep
from .retrieval.recall import trove_recall
from .state.operands import resolve_assertions
from .state.query import trove_query_state
from .state.retrieve import trove_retrieve
from .temporal.recent import trove_recent
from .toolkit import (
    DEFAULT_RESPONSE_CAP,
    MAX_ARGUMENT_DEPTH,
    MAX_ARGUMENTS_CHARS,
    ToolContext,
    ToolError,
    bound_json,
    check_arguments,
    clean_text,
    dumps,
    echo,
)

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


def trove_compute(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    """Evidence arithmetic with ``assertion_id`` operands resolved by the assertion store: the table
    joins the two families here, so neither imports the other."""
    return compute_over(ctx, args, resolve_assertions)


TOOLS: tuple[Tool, ...] = (
    Tool(schemas.TROVE_GREP, trove_grep, 32000),
    Tool(schemas.TROVE_DESCRIBE, trove_describe, 32000),
    Tool(schemas.TROVE_EXPAND, trove_expand, 96000),
    Tool(schemas.TROVE_EXPAND_QUERY, trove_expand_query, 32000),
    Tool(schemas.TROVE_LOAD_SESSION, trove_load_session, 64000),
    Tool(schemas.TROVE_STATUS, trove_status, 32000),
    Tool(schemas.TROVE_INSPECT, trove_inspect, 20000),
    Tool(schemas.TROVE_DOCTOR, trove_doctor, 32000),
    Tool(schemas.TROVE_RECALL, trove_recall, 64000),
    Tool(schemas.TROVE_QUERY_STATE, trove_query_state, 64000),
    Tool(schemas.TROVE_COMPUTE, trove_compute, 64000),
    Tool(schemas.TROVE_COMPILE_EVIDENCE, trove_compile_evidence, 64000),
    Tool(schemas.TROVE_EVIDENCE_PACK, trove_evidence_pack, 64000),
    Tool(schemas.TROVE_RETRIEVE, trove_retrieve, 64000),
    Tool(schemas.TROVE_RECENT, trove_recent, 20000),
)

TOOLS_BY_NAME: dict[str, Tool] = {t.name: t for t in TOOLS}
TOOL_SCHEMAS: tuple[Mapping[str, Any], ...] = tuple(t.schema for t in TOOLS)


def dispatch(ctx: ToolContext, name: str, args: Any) -> str:
    """Run one tool call; always a JSON string, never an exception."""
    return _reply(*_run(ctx, name, args))


def call_tool(ctx: ToolContext, name: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """``ToolContext.call``: one tool calling another through the same boundary, its reply as a dict."""
    reply = json.loads(dispatch(ctx, name, args))
    return reply if isinstance(reply, dict) else {"error": f"{name} replied with {type(reply).__name__}"}


def _run(ctx: ToolContext, name: str, args: Any) -> tuple[dict[str, Any], int]:
    """The payload of one call (a result or ``{"error": ...}``) and the cap its reply is bound to."""
    tool = TOOLS_BY_NAME.get(name) if isinstance(name, str) else None
    if tool is None:
        known = ", ".join(TOOLS_BY_NAME)
        return {"error": f"unknown tool {echo(name, 80)}; available: {known}"}, DEFAULT_RESPONSE_CAP
    if name in ctx.calling:
        chain = " -> ".join((*ctx.calling, name))
        return {"error": f"{name} is already running in this call ({chain}); a tool cannot call itself"}, \
            tool.response_cap
    try:
        parsed = parse_args(args)
        ignored = sorted(str(k) for k in parsed if k not in tool.parameters)
        if ignored and ctx.calling:  # a tool calling a tool must not take an ignored filter for an applied one
            raise ToolError(f"{name} does not take {', '.join(ignored)}")
        # once per outermost call: every read below filters on it, and a called tool keeps the caller's
        visible = ctx.visible if ctx.calling else ctx.runtime.visibility(ctx.session)
        inner = replace(ctx, response_cap=tool.response_cap, visible=visible, dispatcher=call_tool,
                        calling=(*ctx.calling, name))
        payload = tool.handler(inner, parsed)
        if ignored:
            payload["ignored_arguments"] = ignored
        if ctx.runtime.degraded:
            payload["degraded"] = ctx.runtime.degraded
        if not ctx.runtime.health.usable:  # it takes no writes: the newest turns are held in memory, unsearched
            payload["store_state"] = ctx.runtime.health.state()
        return payload, tool.response_cap
    except ToolError as exc:
        return {"error": str(exc)}, tool.response_cap
    except Exception as exc:  # a defect must still answer the model, not crash the turn
        log.exception("trove: tool %s failed", name)
        return {"error": f"{name} failed: {type(exc).__name__}: {str(exc)[:500]}"}, tool.response_cap


def _reply(payload: dict[str, Any], cap: int) -> str:
    """Every reply, result or error, under the same cap and encodable as UTF-8."""
    try:
        text = bound_json(payload, cap)
    except Exception as exc:  # an unserializable payload is a defect; still answer
        log.exception("trove: reply could not be serialized")
        text = dumps({"error": f"reply could not be serialized: {type(exc).__name__}"})
    return clean_text(text)


def parse_args(args: Any) -> dict[str, Any]:
    """Tool arguments as a dict; a JSON object string is accepted, anything else refused."""
    if args is None:
        return {}
    if isinstance(args, (bytes, bytearray)):
        raise ToolError("arguments must be a JSON object, got bytes")
    if isinstance(args, str):
        if len(args) > MAX_ARGUMENTS_CHARS:  # refused before parsing: a parse must never be the slow part
            raise ToolError(f"arguments are too large: {len(args)} characters (at most {MAX_ARGUMENTS_CHARS})")
        if not args.strip():
            return {}
        try:
            args = json.loads(args)
        except RecursionError:
            raise ToolError(f"arguments are nested too deeply (more than {MAX_ARGUMENT_DEPTH} levels)") from None
        except ValueError:
            raise ToolError("arguments must be a JSON object") from None
    if not isinstance(args, dict):
        raise ToolError(f"arguments must be a JSON object, got {type(args).__name__}")
    check_arguments(args)
    return dict(args)
