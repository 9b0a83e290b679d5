"""Tool schemas: the bare ``{name, description, parameters}`` dicts the host advertises.

Plain data only. Each schema is one column of a row in the tool table (``tools.TOOLS``),
which pairs it with its handler and response cap; guard tests keep ``plugin.yaml``, the
skill and ``docs/retrieval-tools.md`` in step with that table.
"""
from __future__ import annotations

from typing import Any

from .toolkit import ROLES

# A string type keeps every provider's schema validator happy; numbers are accepted too.
_TIME = {"type": "string",
         "description": "Unix seconds or an ISO 8601 time WITH a timezone (e.g. 2025-03-01T09:00:00Z)."}
_ROLE_ENUM = list(ROLES)

TROVE_GREP: dict[str, Any] = {
    "name": "trove_grep",
    "description": (
        "Search this session's stored history: exact raw messages (including tool-call arguments) and "
        "summary nodes of compacted history. Plain questions work (ranked by relevance over their terms); "
        "\"quoted phrases\" and prefix* are honoured. Use session_scope='all' or 'session' for archive "
        "search over raw messages of other sessions. Follow up with trove_expand on a node_id or store_id."),
    "parameters": {
        "type": "object",
        "properties": {
            "query": {"type": "string",
                      "description": "Words, \"phrases\" or prefix* terms; 1-4 distinctive terms work best."},
            "limit": {"type": "integer", "description": "Maximum results (default 10, max 200).", "minimum": 1},
            "offset": {"type": "integer", "minimum": 0,
                       "description": "Skip this many ranked results (continue with next_offset)."},
            "sort": {"type": "string", "enum": ["relevance", "recency", "hybrid"],
                     "description": ("relevance (default), recency (best matches newest first) or hybrid "
                                     "(relevance decayed by age).")},
            "role": {"type": "string", "enum": _ROLE_ENUM,
                     "description": "Only raw messages with this role (summaries omitted)."},
            "source": {"type": "string",
                       "description": ("Only rows from this source/platform (e.g. cli, telegram, unknown); "
                                       "summaries by descendant source.")},
            "time_from": dict(_TIME, description="Only raw messages at or after this time (summaries omitted). "
                                                 + _TIME["description"]),
            "time_to": dict(_TIME, description="Only raw messages at or before this time (summaries omitted). "
                                               + _TIME["description"]),
            "session_scope": {"type": "string", "enum": ["current", "all", "session"],
                              "description": ("current (default), all (every stored session, raw only) or "
                                              "session (one session_id, raw only).")},
            "session_id": {"type": "string", "description": "The session to search when session_scope='session'."},
            "content_scope": {"type": "string", "enum": ["history", "externalized", "both"],
                              "description": ("history (default), externalized (large tool outputs stored as "
                                              "payload files) or both.")},
            "externalized_refs": {"type": "array", "items": {"type": "string"},
                                  "description": "Restrict externalized search to these payload refs."},
        },
        "required": ["query"],
    },
}

TROVE_DESCRIBE: dict[str, Any] = {
    "name": "trove_describe",
    "description": (
        "Describe compacted history without loading content: with no arguments, an overview of this "
        "session's summary DAG (nodes per depth, sizes, frontier); with node_id, one node's metadata and "
        "children; with externalized_ref, a payload's metadata and preview."),
    "parameters": {
        "type": "object",
        "properties": {
            "node_id": {"type": "integer", "description": "A summary node visible in this session."},
            "externalized_ref": {"type": "string", "description": "A payload ref from an externalized tool result."},
        },
        "required": [],
    },
}

TROVE_EXPAND: dict[str, Any] = {
    "name": "trove_expand",
    "description": (
        "Recover exact content in pages. Give exactly one of: node_id (its sources: raw messages for a "
        "depth-0 node, child summaries above), store_id (one raw message from any session, e.g. from a "
        "trove_grep hit) or externalized_ref (a stored large tool output). Continue with source_offset or "
        "content_offset from the response; include_exact_ref=true returns a citable trove:<id>:<start>-<end> ref."),
    "parameters": {
        "type": "object",
        "properties": {
            "node_id": {"type": "integer", "description": "Summary node to expand (visible in this session)."},
            "store_id": {"type": "integer", "description": "Raw message id to read (any session)."},
            "externalized_ref": {"type": "string", "description": "Payload ref to read."},
            "max_tokens": {"type": "integer", "minimum": 1,
                           "description": "Token budget for returned content (default 4000, max 16000)."},
            "source_offset": {"type": "integer", "minimum": 0,
                              "description": "node_id mode: first source to return (default 0)."},
            "source_limit": {"type": "integer", "minimum": 1,
                             "description": "node_id mode: most sources to return (default: as many as fit)."},
            "content_offset": {"type": "integer", "minimum": 0,
                               "description": "Character offset into an oversized message or payload (default 0)."},
            "part": {"type": "string", "enum": ["content", "tool_calls"],
                     "description": "store_id mode: read the message content (default) or its tool-call arguments."},
            "include_exact_ref": {"type": "boolean",
                                  "description": "Add exact_ref for each returned raw-message slice."},
        },
        "required": [],
    },
}

TROVE_EXPAND_QUERY: dict[str, Any] = {
    "name": "trove_expand_query",
    "description": (
        "Answer a question from this session's compacted history: finds matching summary nodes and raw "
        "messages (by query and/or node_ids), expands them to source evidence within a context budget, and "
        "asks the auxiliary model. Returns a bounded answer plus the node/store ids used, so claims can be "
        "verified with trove_expand."),
    "parameters": {
        "type": "object",
        "properties": {
            "prompt": {"type": "string", "description": "The question to answer."},
            "query": {"type": "string", "description": "Search terms for candidate evidence (default: the prompt)."},
            "node_ids": {"type": "array", "items": {"type": "integer"},
                         "description": "Summary nodes to expand as evidence."},
            "max_results": {"type": "integer", "minimum": 1,
                            "description": "Candidate nodes and raw hits to use (default 5, max 20)."},
            "max_tokens": {"type": "integer", "minimum": 1,
                           "description": "Answer budget in tokens (default 2000, max 8000)."},
            "context_max_tokens": {"type": "integer", "minimum": 1,
                                   "description": ("Evidence budget sent to the model "
                                                   "(default TROVE_EXPANSION_CONTEXT_TOKENS).")},
        },
        "required": ["prompt"],
    },
}

TROVE_LOAD_SESSION: dict[str, Any] = {
    "name": "trove_load_session",
    "description": (
        "Read one stored session's raw transcript in store order, a page at a time, without a query. "
        "Continue with after_store_id=next_cursor while has_more is true."),
    "parameters": {
        "type": "object",
        "properties": {
            "session_id": {"type": "string",
                           "description": "The session to read (required; see trove_grep session_scope='all' hits)."},
            "after_store_id": {"type": "integer", "minimum": 0,
                               "description": "Exclusive cursor: return messages after this store_id (default 0)."},
            "limit": {"type": "integer", "description": "Messages per page (default 100, max 200).", "minimum": 1},
            "max_content_chars": {"type": "integer", "minimum": 1,
                                  "description": "Characters of content per message (default 4000, max 20000)."},
            "roles": {"type": "array", "items": {"type": "string", "enum": _ROLE_ENUM},
                      "description": "Only these roles."},
            "time_from": dict(_TIME, description="Only messages at or after this time. " + _TIME["description"]),
            "time_to": dict(_TIME, description="Only messages at or before this time. " + _TIME["description"]),
            "include_exact_ref": {"type": "boolean", "description": "Add exact_ref for each returned content slice."},
        },
        "required": ["session_id"],
    },
}

TROVE_STATUS: dict[str, Any] = {
    "name": "trove_status",
    "description": ("Show trove runtime health: session, context pressure, compaction state, store and DAG "
                    "sizes, config."),
    "parameters": {"type": "object", "properties": {}, "required": []},
}

TROVE_INSPECT: dict[str, Any] = {
    "name": "trove_inspect",
    "description": (
        "Read-only metadata inventory of this session: lineage, compaction frontier, fresh tail, last "
        "compaction outcome, filter matches and DAG depth stats. Returns no message content; use "
        "trove_grep/trove_expand for content."),
    "parameters": {
        "type": "object",
        "properties": {
            "limit": {"type": "integer", "description": "Items per list (default 20, max 200).", "minimum": 1},
        },
        "required": [],
    },
}

TROVE_DOCTOR: dict[str, Any] = {
    "name": "trove_doctor",
    "description": "Run read-only trove diagnostics (database, full-text indexes, lineage, config, context pressure).",
    "parameters": {"type": "object", "properties": {}, "required": []},
}
