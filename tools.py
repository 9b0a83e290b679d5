"""The tool table and its dispatcher: ``TOOLS = {name: handler}`` and ``dispatch``.

Handlers live in family modules (``tools_recall``, ``tools_expand``, ``tools_ops``) and
return dicts; ``dispatch`` parses the arguments, runs the handler and always returns a
JSON string: a bounded result, or ``{"error": ...}``. Nothing raises into the host.
"""
from __future__ import annotations

import json
import logging
from typing import Any, Callable

from .schemas import SCHEMAS_BY_NAME
from .toolkit import ToolContext, ToolError, bound_json, dumps
from .retrieval.expand import trove_describe, trove_expand, trove_expand_query
from .ops.handlers import trove_doctor, trove_inspect, trove_status
from .retrieval.grep import trove_grep, trove_load_session

log = logging.getLogger("hermes_trove.tools")

Handler = Callable[[ToolContext, dict[str, Any]], dict[str, Any]]

TOOLS: dict[str, Handler] = {
    "trove_grep": trove_grep,
    "trove_describe": trove_describe,
    "trove_expand": trove_expand,
    "trove_expand_query": trove_expand_query,
    "trove_load_session": trove_load_session,
    "trove_status": trove_status,
    "trove_inspect": trove_inspect,
    "trove_doctor": trove_doctor,
}

# Hard bound on each response (characters of JSON). Handlers that page content fit their
# own items under these first, so the generic shrinking below is a last resort.
MAX_RESPONSE_CHARS = 96000
RESPONSE_CAPS: dict[str, int] = {
    "trove_grep": 32000, "trove_describe": 32000, "trove_expand": MAX_RESPONSE_CHARS,
    "trove_expand_query": 32000, "trove_load_session": 64000, "trove_status": 32000,
    "trove_inspect": 20000, "trove_doctor": 32000,
}


def dispatch(ctx: ToolContext, name: str, args: Any) -> str:
    """Run one tool call; always a JSON string, never an exception."""
    handler = TOOLS.get(name)
    if handler is None:
        return dumps({"error": f"unknown tool {str(name)[:80]!r}; available: {', '.join(TOOLS)}"})
    try:
        parsed = parse_args(args)
        payload = handler(ctx, parsed)
        known = SCHEMAS_BY_NAME[name]["parameters"]["properties"]
        ignored = sorted(str(k) for k in parsed if k not in known)
        if ignored:
            payload["ignored_arguments"] = ignored
        return bound_json(payload, RESPONSE_CAPS.get(name, MAX_RESPONSE_CHARS))
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
