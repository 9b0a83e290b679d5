"""The evidence tools' handlers: parse the arguments, fetch the cited rows, call the pure core
(compute.py, pack.py, compile.py), shape. Rows of ignored sessions are refused; no model is called."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..fulltext import matching_ids
from ..operands import OperandSpec
from ..rows import MessageRow
from ..toolkit import (
    ToolContext,
    ToolError,
    bool_arg,
    clamped_number,
    current_session,
    enum_arg,
    fit_items,
    question_arg,
    question_date_arg,
    str_arg,
    turn_start,
    whole_number,
)
from .compile import check_coverage, check_selection, computation_for, conflicts, decide, parse_proposal
from .compute import ComputeRequest, compute
from .grounding import parse_operands
from .pack import PACK_CAP, build_pack, parse_budgets, parse_refs
from .planner import OPERATIONS

if TYPE_CHECKING:
    from ..runtime import Runtime

Resolve = Callable[["Runtime", list[OperandSpec]], list[OperandSpec]]

MAX_QUESTION = 4000
MAX_CANDIDATES = 48
COVERAGE_SCAN = 200  # matches the re-run reads; more than max_candidates already fails the check


def _rows(ctx: ToolContext, ids: Iterable[int]) -> dict[int, MessageRow]:
    unique = sorted(set(ids))
    # rows of sessions outside the caller's scope are missing, exactly like unknown store ids
    return {r.store_id: r for r in ctx.runtime.store.get_many(unique, ctx.visible)} if unique else {}


def trove_compute(ctx: ToolContext, args: Mapping[str, Any], resolve: Resolve | None = None) -> dict[str, Any]:
    """``resolve`` turns ``assertion_id`` operands into cited ones; the tool table passes the assertion
    store's resolver, so this family never imports state (without one they fail closed)."""
    question = question_arg(args, MAX_QUESTION)
    try:
        specs = parse_operands(args.get("operands"))
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    if resolve is not None:
        specs = resolve(ctx.runtime, specs)
    candidate = str_arg(args, "candidate_answer")
    req = ComputeRequest(question, specs, question_date_arg(args),
                         bool_arg(args, "evidence_complete"), candidate[:1000] if candidate is not None else None,
                         enum_arg(args, "operation", OPERATIONS, None))
    rows = _rows(ctx, (s.claim.store_id for s in specs if s.claim is not None))
    return compute(req, rows, ctx.runtime.filters.ignored_by)


def trove_evidence_pack(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    question = question_arg(args, MAX_QUESTION)
    try:
        claims = parse_refs(args.get("baseline_refs"))
        budgets, notes = parse_budgets(args.get("budgets"))
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    question_date = question_date_arg(args)
    rows = _rows(ctx, (c.store_id for _, c, _ in claims if c is not None))
    pack = build_pack(question, claims, rows, budgets, ctx.runtime.filters.ignored_by)
    items = pack.pop("items")
    head = {"status": "ok" if items else "empty", "question": question[:500],
            "question_date": args.get("question_date") if question_date is not None else None,
            "budgets": budgets.__dict__, **notes}
    if bool_arg(args, "include_compute") and items:
        specs = [OperandSpec(i + 1, parse_refs([item["ref"]])[0][1]) for i, item in enumerate(items)]
        head["computation"] = compute(ComputeRequest(question, specs, question_date, False), rows,
                                     ctx.runtime.filters.ignored_by)

    def build(n: int) -> dict[str, Any]:
        out = dict(head, items=items[:n], returned=n, **pack, truncated=n < len(items))
        if n < len(items):
            out["items_omitted_for_cap"] = len(items) - n
        return out

    cap = min(ctx.response_cap, PACK_CAP) - 1000  # room for ignored_arguments added after the fit
    payload, _ = fit_items(build, len(items), cap)
    return payload


def trove_compile_evidence(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    question = question_arg(args, MAX_QUESTION)
    given = args.get("budgets")
    try:
        proposal = parse_proposal(args.get("proposal"))
        budgets, notes = parse_budgets({k: v for k, v in given.items() if k == "max_quote_chars"}
                                       if isinstance(given, Mapping) else given)
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    question_date = question_date_arg(args)
    cap = _response_cap(args, ctx.response_cap)
    rows = _rows(ctx, (s.claim.store_id for s in proposal.selections if s.claim is not None))
    ignored = ctx.runtime.filters.ignored_by
    checked = [check_selection(s, rows.get(s.claim.store_id) if s.claim else None, ignored, budgets.max_quote_chars)
               for s in proposal.selections]
    coverage = _coverage(ctx, args.get("coverage"), {s.claim.store_id for s, c in
                                                      zip(proposal.selections, checked, strict=True)
                                                      if s.claim is not None and c.get("status") == "verified"})
    proven = bool(coverage and coverage.get("proven"))
    computation = computation_for(question, proposal, checked, rows, question_date, proven, ignored)
    found = conflicts(checked)
    state, reasons = decide(proposal, checked, found, coverage, computation)
    facets = {f: [c["claim_id"] for c in checked if c["facet"] == f and c.get("status") == "verified"]
              for f in dict.fromkeys([*proposal.requested_facets, *(c["facet"] for c in checked)])}
    head = {"state": state, "reasons": reasons, "question": question[:500], "operation": proposal.operation,
            "facets": {f: {"covered": bool(ids), "claim_ids": ids} for f, ids in facets.items()},
            "conflicts": found, "coverage": coverage, "computation": computation,
            "counts": {s: sum(1 for c in checked if c.get("status") == s) for s in ("verified", "partial", "rejected")},
            "model_claims_trusted": False, **notes}

    def build(n: int) -> dict[str, Any]:
        out = dict(head, selections=checked[:n])
        if n < len(checked):
            out.update(truncated=True, selections_omitted_for_cap=len(checked) - n)
        return out

    payload, _ = fit_items(build, len(checked), cap - 1000)
    return payload


MIN_RESPONSE_CAP = 4096


def _response_cap(args: Mapping[str, Any], cap: int) -> int:
    raw = (args.get("budgets") or {}).get("response_char_cap") if isinstance(args.get("budgets"), Mapping) else None
    return cap if raw is None else \
        clamped_number(raw, "budgets.response_char_cap", MIN_RESPONSE_CAP, max(cap, MIN_RESPONSE_CAP))


def _coverage(ctx: ToolContext, raw: Any, verified_ids: set[int]) -> dict[str, Any] | None:
    """Re-run the caller's bounded search here and test its complete result set against the selections.

    This runs trove_grep's full-text match itself (``fulltext.matching_ids``), not ``ctx.call``:
    coverage needs every match up to the limit, where the tool's reply is a page fitted under its
    response cap (results dropped for the cap also read as ``has_more``)."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or not isinstance(raw.get("query"), str) or not raw["query"].strip():
        raise ToolError("coverage must be an object with a query (and optional session_scope, session_id, "
                        "max_candidates)")
    scope = enum_arg(raw, "session_scope", ("current", "all", "session"), "current") or "current"
    session_id = (str_arg(raw, "session_id") or "").strip() or None
    current = current_session(ctx)
    if scope == "session" and not session_id:
        raise ToolError("coverage.session_scope='session' needs coverage.session_id")
    if scope == "current" and not current:
        raise ToolError("coverage over the current session needs a bound session; use session_scope='all'")
    limit = whole_number(raw.get("max_candidates", MAX_CANDIDATES), "coverage.max_candidates", 1, MAX_CANDIDATES)
    query = raw["query"][:500]
    sessions = None if scope == "all" else [(current if scope == "current" else session_id) or ""]
    start = turn_start(ctx)  # the turn being answered is not evidence, so not a match to cover
    ids = matching_ids(ctx.runtime.store, query, COVERAGE_SCAN + 1, sessions, ctx.visible,
                       turn=(current, start) if current and start is not None else None)
    search = {"query": query, "session_scope": scope, "session_id": session_id if scope == "session" else None,
              "search": "trove_grep full-text search over raw messages, re-run by this tool"}
    return check_coverage(ids[:COVERAGE_SCAN], len(ids) > COVERAGE_SCAN, limit, verified_ids, search)
