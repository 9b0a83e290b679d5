"""Tool schemas: the bare ``{name, description, parameters}`` dicts the host advertises.

Plain data only. Each schema is one column of a row in the tool table (``tools.TOOLS``),
which pairs it with its handler and response cap; guard tests keep ``plugin.yaml``, the
skill and ``docs/retrieval-tools.md`` in step with that table.
"""
from __future__ import annotations

from typing import Any

from .evidence.planner import OPERATIONS
from .state.contract import KINDS
from .state.retrieve import ARGS as RETRIEVE_ACTIONS
from .toolkit import ROLES

# A string type keeps every provider's schema validator happy; numbers are accepted too.
_TIME = {"type": "string",
         "description": "Unix seconds or an ISO 8601 time WITH a timezone (e.g. 2025-03-01T09:00:00Z)."}
_ROLE_ENUM = list(ROLES)


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    """One schema: its parameters are an object of ``properties``, ``required`` naming the ones it needs."""
    return {"name": name, "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required or []}}


TROVE_GREP = _tool("trove_grep", (
    "Search this session's stored history: exact raw messages (including tool-call arguments) and "
    "summary nodes of compacted history. Plain questions work (ranked by relevance over their terms); "
    "\"quoted phrases\" and prefix* are honoured. Use session_scope='all' or 'session' for archive "
    "search over raw messages of other sessions. Follow up with trove_expand on a node_id or store_id."), {
    "query": {"type": "string",
              "description": "Words, \"phrases\" or prefix* terms; 1-4 distinctive terms work best."},
    "limit": {"type": "integer", "description": "Maximum results (default 10, max 200).", "minimum": 1},
    "offset": {"type": "integer", "minimum": 0,
               "description": "Skip this many ranked results (continue with next_offset)."},
    "sort": {"type": "string", "enum": ["relevance", "recency", "recent_relevance"],
             "description": ("relevance (default), recency (best matches newest first) or "
                             "recent_relevance (relevance decayed by age).")},
    "mode": {"type": "string", "enum": ["full_text", "semantic", "hybrid"],
             "description": ("full_text (default, keywords), semantic (by meaning, needs embeddings) or "
                             "hybrid (both, fused). Without embeddings it answers from full text and "
                             "says degraded_to_fts.")},
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
}, ["query"])

TROVE_DESCRIBE = _tool("trove_describe", (
    "Describe compacted history without loading content: with no arguments, an overview of this "
    "session's summary DAG (nodes per depth, sizes, frontier); with node_id, one node's metadata and "
    "children; with externalized_ref, a payload's metadata and preview."), {
    "node_id": {"type": "integer", "description": "A summary node visible in this session."},
    "externalized_ref": {"type": "string", "description": "A payload ref from an externalized tool result."},
})

TROVE_EXPAND = _tool("trove_expand", (
    "Recover exact content in pages. Give exactly one of: node_id (its sources: raw messages for a "
    "depth-0 node, child summaries above), store_id (one raw message from any session, e.g. from a "
    "trove_grep hit) or externalized_ref (a stored large tool output). Continue with source_offset or "
    "content_offset from the response; include_exact_ref=true returns a citable trove:<id>:<start>-<end> ref."), {
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
})

TROVE_EXPAND_QUERY = _tool("trove_expand_query", (
    "Answer a question from this session's compacted history: finds matching summary nodes and raw "
    "messages (by query and/or node_ids), expands them to source evidence within a context budget, and "
    "asks the auxiliary model. Returns a bounded answer plus the node/store ids used, so claims can be "
    "verified with trove_expand."), {
    "prompt": {"type": "string", "description": "The question to answer."},
    "query": {"type": "string", "description": "Search terms for candidate evidence (default: the prompt)."},
    "node_ids": {"type": "array", "items": {"type": "integer"},
                 "description": "Summary nodes to expand as evidence."},
    "max_results": {"type": "integer", "minimum": 1,
                    "description": "Candidate nodes and raw hits to use (default 5, max 20)."},
    "max_tokens": {"type": "integer", "minimum": 1,
                   "description": "Answer budget in tokens (default 2000, max 8000)."},
    "context_max_tokens": {"type": "integer", "minimum": 256,
                           "description": ("Evidence budget sent to the model, 256..200000 (default the larger "
                                           "of max_tokens and TROVE_EXPANSION_CONTEXT_TOKENS).")},
}, ["prompt"])

TROVE_LOAD_SESSION = _tool("trove_load_session", (
    "Read one stored session's raw transcript in store order, a page at a time, without a query. "
    "Continue with after_store_id=next_cursor while has_more is true."), {
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
}, ["session_id"])

TROVE_STATUS = _tool("trove_status", (
    "Show trove runtime health: session, context pressure, compaction state, store and DAG sizes, config."), {})

TROVE_INSPECT = _tool("trove_inspect", (
    "Read-only metadata inventory of this session: lineage, compaction frontier, fresh tail, last "
    "compaction outcome, filter matches and DAG depth stats. Returns no message content; use "
    "trove_grep/trove_expand for content."), {
    "limit": {"type": "integer", "description": "Items per list (default 20, max 200).", "minimum": 1},
})

TROVE_DOCTOR = _tool("trove_doctor", (
    "Run read-only trove diagnostics (database, full-text indexes, lineage, config, context pressure)."), {})

TROVE_RECALL = _tool("trove_recall", (
    "Search the WHOLE memory: every stored conversation, all time, raw messages and summaries, ranked "
    "by relevance with a soft preference for this conversation and for recent items (by meaning too "
    "when embeddings are on). Use it for anything not in the current session; for this session use "
    "trove_grep. Each hit has a working 'expand' call (exact text) and, for other sessions, "
    "'load_session' (surrounding turns). detail='answer_ready' adds citable windows with exact refs."), {
    "query": {"type": "string",
              "description": "A question or distinctive words; \"quoted phrases\" and prefix* work."},
    "limit": {"type": "integer", "minimum": 1, "description": "Hits to return (default 8, max 25)."},
    "scope_bias": {"type": "number", "minimum": 0, "maximum": 1,
                   "description": "Ranking boost for the current conversation, 0..1 (default 0.5)."},
    "include": {"type": "string", "enum": ["all", "summaries", "verbatim"],
                "description": "all (default), summaries only, or verbatim raw messages only."},
    "detail": {"type": "string", "enum": ["snippets", "answer_ready"],
               "description": ("snippets (default) or answer_ready: the first hits hydrated to "
                               "citable windows with exact refs (store_id + span + quote + hash).")},
    "seen_refs": {"type": "array", "items": {"type": "string"},
                  "description": ("Hit 'ref' values already read (store:<id>, node:<id> or "
                                  "trove:<id>:<start>-<end>); they are left out (max 100).")},
    "include_occurrence_time": {"type": "boolean",
                                "description": ("Add when the things a hit mentions happened (dates "
                                                "resolved against when it was said).")},
    "since": dict(_TIME, description="Only items at or after this time. " + _TIME["description"]),
    "before": dict(_TIME, description="Only items before this time. " + _TIME["description"]),
}, ["query"])

# -- exact evidence (evidence/) ------------------------------------------------------
_QUESTION = {"type": "string", "description": "The question, 1-4000 characters."}
_QUESTION_DATE = dict(_TIME, description=(
    "When the question is asked: the 'now' of relative words and of 'ago'. Unix seconds, a date or an ISO 8601 "
    "time; without a timezone it is UTC (2026-12-01, 2026-12-01T10:00:00, 2026-12-01T10:00:00+02:00)."))

TROVE_COMPUTE = _tool("trove_compute", (
    "Do date, count and amount arithmetic over cited evidence instead of in your head. A deterministic "
    "planner picks one operation from the question (date difference or window filter, distinct count, "
    "sum with unit conversion, difference, earliest/latest/sorted, latest state), checks every operand "
    "against its stored span (values, units and dates must be in the quote), and returns the answer, the "
    "plan and a trace. Unclear or ungrounded input returns status 'fallback' with the reason. No model."), {
    "question": _QUESTION,
    "operands": {"type": "array", "items": {"type": "object"}, "description": (
        "1-50 operands: each an exact ref (fields store_id, span_start, span_end, quote, content_sha256, "
        "or exact_ref / a trove:<id>:<start>-<end> string) or an assertion_id from trove_query_state, with "
        "optional value, unit, key, label and date (YYYY-MM-DD, YYYY-MM, YYYY). Fields left out are read "
        "from the quote when it holds one candidate.")},
    "question_date": _QUESTION_DATE,
    "evidence_complete": {"type": "boolean", "description": (
        "true when the operands are ALL the relevant evidence; otherwise counts, totals and orderings "
        "hold for the cited operands only (status 'partial'). Default false.")},
    "candidate_answer": {"type": "string",
                         "description": "Your answer to check against the computation (agrees true/false)."},
    "operation": {"type": "string", "enum": list(OPERATIONS),
                  "description": "Force the operation when the question's wording is ambiguous."},
}, ["question", "operands"])

TROVE_EVIDENCE_PACK = _tool("trove_evidence_pack", (
    "Turn up to 50 exact refs into a checked evidence packet: each ref is verified against the stored "
    "message (a drifted quote is re-anchored only if it occurs once near its span), duplicates dropped, "
    "items ordered by time with when it was said (observed_at) kept apart from when it happened "
    "(occurrences), optionally with a trove_compute result. No prose; at most 64,000 characters."), {
    "question": _QUESTION,
    "baseline_refs": {"type": "array", "items": {"type": "object"},
                      "description": "1-50 exact refs (objects or trove:<id>:<start>-<end> strings)."},
    "question_date": _QUESTION_DATE,
    "budgets": {"type": "object", "description": (
        "Optional: max_refs (25, 1-50), max_quote_chars (2400, 64-2400), max_per_session (5), "
        "max_per_date (5, 1-8), repair_window_chars (400, 0-2400).")},
    "include_compute": {"type": "boolean",
                        "description": "Attach a trove_compute run over the packet's refs (default false)."},
}, ["question", "baseline_refs"])

TROVE_COMPILE_EVIDENCE = _tool("trove_compile_evidence", (
    "Check one proposal for a multi-part question: each selection (exact ref + the facet, entity, date, "
    "value, unit, distinct_key, role, source it claims) is verified against the stored row and quote, and "
    "the brief says answer_sufficient, computation_sufficient, finite_coverage, partial, conflicted or "
    "unknown. Coverage is proven only by a bounded search this tool re-runs. No prose."), {
    "question": _QUESTION,
    "question_date": _QUESTION_DATE,
    "proposal": {"type": "object", "description": (
        "{operation (none or a trove_compute operation), requested_facets (<=12), missing_facets, "
        "selections (1-50): [{claim_id, facet, exact_ref, quote, entity, date, value, unit, "
        "distinct_key, label, role, source}]}")},
    "coverage": {"type": "object", "description": (
        "Optional bounded search to prove coverage: {query, session_scope current|all|session, "
        "session_id, max_candidates <=48}. Re-run here; every raw-message hit must be selected.")},
    "budgets": {"type": "object",
                "description": "Optional: max_quote_chars (2400, 64-2400), response_char_cap (4096-64000)."},
}, ["question", "proposal"])

TROVE_QUERY_STATE = _tool("trove_query_state", (
    "Query the assertion store for current or historical facts, preferences, commitments and status of a "
    "subject, each with an exact ref; says which are active at as_of, which were superseded and which "
    "conflict. Opt-in (TROVE_ASSERTIONS_ENABLED): when off it answers status 'disabled' with the reason."), {
    "subject_key": {"type": "string", "description": "Subject, e.g. user:self or person:alex."},
    "predicate_key": {"type": "string", "description": "Optional predicate, e.g. lives_in."},
    "kinds": {"type": "array", "items": {"type": "string", "enum": list(KINDS)},
              "description": "Up to 8 assertion kinds."},
    "scope_key": {"type": "string", "description": "Optional scope."},
    "speaker_role": {"type": "string", "description": "Optional speaker role (user, assistant)."},
    "as_of": dict(_TIME, description="State as of this time. " + _TIME["description"]),
    "limit": {"type": "integer", "minimum": 1, "description": "Assertions to return (default 25, max 50)."},
}, ["subject_key"])

TROVE_RETRIEVE = _tool("trove_retrieve", (
    "Bounded retrieval controller for one answer: tracks evidence slots, allows at most three targeted "
    "calls to the retrieval tools, accepts only exact refs it observed and can finish through trove_compute. "
    "Opt-in (TROVE_ADAPTIVE_RETRIEVAL_ENABLED): when off it answers status 'disabled' with the reason."), {
    "action": {"type": "string", "enum": list(RETRIEVE_ACTIONS), "description": "Controller step."},
    "retrieval_id": {"type": "string", "description": "The episode id from start."},
    "question": _QUESTION,
    "question_date": _QUESTION_DATE,
    "identity": {"type": "object", "description": "intent_type (required on start), operation, keys, "
                                                  "unit, time_mode, window_start/end."},
    "requirements": {"type": "array", "items": {"type": "object"},
                     "description": "1-12 slots {slot_id, description, minimum_refs}."},
    "missing_slot": {"type": "string", "description": "The slot a search step fills."},
    "tool": {"type": "string", "description": "The retrieval tool a search step calls."},
    "tool_args": {"type": "object", "description": "Arguments of that tool call."},
    "resolved_slots": {"type": "array", "items": {"type": "string"}, "description": "Up to 12 slot ids."},
    "selected_refs": {"type": "array", "items": {"type": "object"}, "description": "1-40 exact refs."},
    "computation": {"type": "object", "description": "{operands, candidate_answer} to finish through compute."},
}, ["action"])

TROVE_RECENT = _tool("trove_recent", (
    "What happened in a time period (UTC): 'last tuesday', 'two weeks ago', 'this morning', 'in march', "
    "'2025-03-04'... Serves ready "
    "day/week/month rollups when they cover the whole period, else the leaf summaries overlapping it, else "
    "(nothing summarised yet) its raw messages; the response says which mode served and why. Items carry "
    "handles for trove_expand / trove_load_session; page with cursor."), {
    "period": {"type": "string",
               "description": ("A past UTC period as spoken or in ISO: yesterday, tuesday, last tuesday, "
                               "3 days ago, two weeks ago, this morning, last night (a part of a day is the "
                               "whole day), last/this weekend, last week/month/year, past 3 days, last 24 "
                               "hours, march, march 2026, since monday, YYYY-MM-DD, YYYY-Www, YYYY-MM, YYYY, "
                               "START..END.")},
    "scope": {"type": "string", "enum": ["all", "current"],
              "description": "all (default): every stored session; current: this session's own history."},
    "limit": {"type": "integer", "minimum": 1, "description": "Items per page (default 10, max 200)."},
    "mode": {"type": "string", "enum": ["auto", "summaries", "messages"],
             "description": ("auto (default: rollups, else summaries, else raw messages), summaries or "
                             "messages to force one level.")},
    "cursor": {"type": "string", "description": "next_cursor of the previous page, unchanged."},
}, ["period"])
