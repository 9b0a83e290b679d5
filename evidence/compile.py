"""trove_compile_evidence's core: one proposal's claims checked against stored rows, and a verdict.

A proposal lists selections (an exact ref plus the facet, entity, date, value, unit, distinct
key, role and source it claims). Every claimed field is checked against the row and its quote
(grounding.py); a field that does not hold is dropped and reported, a ref that does not
verify rejects the selection. The brief's ``state`` is derived from what held, never from the
proposal's own words: ``unknown`` (nothing verified), ``conflicted``, ``partial``,
``computation_sufficient``, ``finite_coverage`` (only with a bounded search re-run here whose
complete result set the verified selections cover) or ``answer_sufficient``. No prose.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..operands import OperandSpec, norm_key
from ..refs import RefClaim, RefError, parse_claim, verify
from ..rows import MessageRow
from .compute import AGGREGATES, ComputeRequest, compute
from .grounding import GroundingError, ground
from .planner import OPERATIONS

MAX_SELECTIONS = 50
MAX_FACETS = 12
FIELDS = ("entity", "date", "value", "unit", "distinct_key", "role", "source")


@dataclass(frozen=True)
class Selection:
    claim_id: str
    facet: str
    claim: RefClaim | None
    error: str | None
    fields: dict[str, str]
    label: str | None


@dataclass(frozen=True)
class Proposal:
    operation: str | None
    requested_facets: tuple[str, ...]
    missing_facets: tuple[str, ...]
    selections: tuple[Selection, ...]


def parse_proposal(raw: Any) -> Proposal:
    """The proposal argument; structural problems raise ValueError (bad refs are kept per selection)."""
    if not isinstance(raw, Mapping):
        raise ValueError("proposal must be an object with selections")
    operation = raw.get("operation")
    if operation in (None, "", "none", "lookup"):
        operation = None
    elif operation not in OPERATIONS:
        raise ValueError(f"proposal.operation must be one of none, {', '.join(OPERATIONS)}; "
                         f"got {str(operation)[:40]!r}")
    facets = _strings(raw.get("requested_facets"), "proposal.requested_facets", MAX_FACETS)
    missing = _strings(raw.get("missing_facets"), "proposal.missing_facets", MAX_FACETS)
    items = raw.get("selections")
    if not isinstance(items, list) or not items:
        raise ValueError(f"proposal.selections must be a list of 1-{MAX_SELECTIONS} objects")
    if len(items) > MAX_SELECTIONS:
        raise ValueError(f"proposal.selections accepts at most {MAX_SELECTIONS}, got {len(items)}")
    selections = []
    for i, item in enumerate(items, start=1):
        if not isinstance(item, Mapping):
            raise ValueError(f"selection {i} must be an object")
        claim_id = str(item.get("claim_id") or f"s{i}")[:80]
        facet = str(item.get("facet") or "answer")[:80]
        fields = {k: str(item[k])[:400] for k in FIELDS if item.get(k) not in (None, "")}
        source = item.get("exact_ref")
        claim: RefClaim | None = None
        error = None
        try:
            if source is None:
                raise RefError("exact_ref is required")
            claim = parse_claim(dict(source) if isinstance(source, Mapping) else source)
            if item.get("quote") is not None:
                claim = replace(claim, quote=str(item["quote"]))
        except RefError as exc:
            error = str(exc)
        selections.append(Selection(claim_id, facet, claim, error, fields,
                                    str(item["label"])[:200] if item.get("label") else None))
    return Proposal(operation, tuple(facets), tuple(missing), tuple(selections))


def _strings(raw: Any, name: str, limit: int) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise ValueError(f"{name} must be a list of strings")
    if len(raw) > limit:
        raise ValueError(f"{name} accepts at most {limit} items")
    return [x[:80] for x in raw]


def check_selection(sel: Selection, row: MessageRow | None, ignored_by: Callable[[str, str], str | None] | None,
                    max_quote: int) -> dict[str, Any]:
    """One selection's verdict: verified / partial (some fields dropped) / rejected (ref invalid)."""
    out: dict[str, Any] = {"claim_id": sel.claim_id, "facet": sel.facet}
    if sel.claim is None:
        return dict(out, status="rejected", reason=sel.error)
    try:
        ref = verify(sel.claim, row)
    except RefError as exc:
        return dict(out, status="rejected", reason=str(exc))
    assert row is not None
    if ignored_by is not None and (pattern := ignored_by(row.session_id, row.platform)):
        return dict(out, status="rejected", reason=f"session {row.session_id!r} is ignored (pattern {pattern!r})")
    out.update({"ref": ref.shorthand, "content_sha256": ref.content_sha256, "session_id": ref.session_id,
                "quote": ref.quote[:max_quote]})
    verified: dict[str, str] = {}
    failed: dict[str, str] = {}
    f = sel.fields
    checks = [(("value", "unit"), OperandSpec(0, sel.claim, value=f.get("value"), unit=f.get("unit"))),
              (("date",), OperandSpec(0, sel.claim, date=f.get("date"))),
              (("distinct_key",), OperandSpec(0, sel.claim, key=f.get("distinct_key")))]
    for names, spec in checks:
        if not any(n in f for n in names):  # a field the selection does not claim is not checked
            continue
        try:
            ground(spec, row)
            verified.update({n: f[n] for n in names if n in f})
        except GroundingError as exc:
            failed.update({n: str(exc).removeprefix("operand 0: ") for n in names if n in f})
    plain = (("entity", norm_key(f.get("entity", "")) in norm_key(ref.quote), "the entity is not written in the quote"),
             *((name, f.get(name, "").strip().casefold() == actual.casefold(), f"the row's {name} is {actual!r}")
               for name, actual in (("role", row.role), ("source", row.source))))
    for name, holds, why in plain:
        if name in f and holds:
            verified[name] = f[name]
        elif name in f:
            failed[name] = why
    out["status"] = "partial" if failed else "verified"
    out["verified_fields"] = verified
    if failed:
        out["failed_fields"] = failed
    return out


def conflicts(checked: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Verified selections of one facet, entity, key and date that claim different values."""
    groups: dict[tuple[str, str, str, str], dict[str, list[str]]] = {}
    for c in checked:
        fields = c.get("verified_fields") or {}
        if c.get("status") != "verified" or "value" not in fields:
            continue
        slot = (c["facet"], norm_key(fields.get("entity", "")), norm_key(fields.get("distinct_key", "")),
                fields.get("date", ""))
        groups.setdefault(slot, {}).setdefault(norm_key(fields["value"]), []).append(c["claim_id"])
    return [{"facet": slot[0], "entity": slot[1] or None, "distinct_key": slot[2] or None, "date": slot[3] or None,
             "values": {v: ids for v, ids in values.items()}}
            for slot, values in groups.items() if len(values) > 1]


def decide(proposal: Proposal, checked: list[dict[str, Any]], found_conflicts: list[dict[str, Any]],
           coverage: dict[str, Any] | None, computation: dict[str, Any] | None) -> tuple[str, list[str]]:
    """The sufficiency state and the reasons for it, from verified facts only."""
    verified = [c for c in checked if c.get("status") == "verified"]
    if not verified:
        return "unknown", ["no selection verified against its stored row"]
    if found_conflicts:
        return "conflicted", [f"{len(found_conflicts)} facet(s) have verified selections with different values"]
    covered = {c["facet"] for c in verified}
    reasons = []
    missing = [f for f in proposal.requested_facets if f not in covered]
    if missing:
        reasons.append(f"requested facets without a verified selection: {', '.join(missing)}")
    if proposal.missing_facets:
        reasons.append(f"the proposal declares missing facets: {', '.join(proposal.missing_facets)}")
    if computation is not None and computation.get("status") == "fallback":
        reasons.append(f"computation fell back: {computation.get('reason')}")
    if reasons:
        return "partial", reasons
    proven = bool(coverage and coverage.get("proven"))
    if proven:
        return "finite_coverage", ["every candidate of the bounded search is covered by a verified selection"]
    if proposal.operation in AGGREGATES:
        why = coverage.get("reason") if coverage else "no coverage search given"
        return "partial", [f"{proposal.operation} needs every candidate; coverage not proven ({why})"]
    if proposal.operation is not None:
        return "computation_sufficient", [f"{proposal.operation} computed over verified selections"]
    return "answer_sufficient", ["every requested facet has a verified selection"]


def check_coverage(candidates: list[int], more: bool, limit: int, verified_ids: set[int],
                   search: dict[str, Any]) -> dict[str, Any]:
    """Whether a re-run bounded search returned its complete result set and every hit is selected."""
    out = dict(search, candidates=len(candidates), max_candidates=limit)
    if more or len(candidates) > limit:
        return dict(out, proven=False, complete_result_set=False,
                    reason=f"the search has more than {limit} candidates; narrow it")
    uncovered = [c for c in candidates if c not in verified_ids]
    out.update(complete_result_set=True, uncovered_store_ids=uncovered[:50], proven=not uncovered)
    if uncovered:
        out["reason"] = f"{len(uncovered)} candidate rows have no verified selection"
    elif not candidates:
        out.update(proven=False, reason="the search found no candidates")
    return out


def computation_for(question: str, proposal: Proposal, checked: list[dict[str, Any]],
                    rows: Mapping[int, MessageRow], question_date: float | None, complete: bool,
                    ignored_by: Callable[[str, str], str | None] | None) -> dict[str, Any] | None:
    """The proposal's operation computed over its verified selections, each carrying only the fields
    that held; None without an operation or a verified selection."""
    if proposal.operation is None:
        return None
    held = [(sel, c["verified_fields"]) for sel, c in zip(proposal.selections, checked, strict=True)
            if c.get("status") == "verified" and sel.claim is not None]
    operands = [OperandSpec(i, sel.claim, value=f.get("value"), unit=f.get("unit"), key=f.get("distinct_key"),
                            label=sel.label or f.get("entity"), date=f.get("date"))
                for i, (sel, f) in enumerate(held, 1)]
    return compute(ComputeRequest(question, operands, question_date, complete, None, proposal.operation), rows,
                   ignored_by) if operands else None
