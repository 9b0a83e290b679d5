"""trove_compute's core: plan, ground every operand, execute, check a candidate answer.

``compute(request, rows)`` is pure over the rows the handler fetched: the planner
(planner.py) picks one operation, grounding.py pins every operand to its stored span, and
one executor per operation does the arithmetic, writing each step into a trace a reader can
redo by hand. Any operand that does not ground, and any input the operation cannot take
(unit of another dimension, two currencies, overlapping dates at the top of an ordering),
fails closed: status ``fallback`` with ``next_path: "evidence_only"``, the reason and what to
do next. Never calls a model.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from ..dates.intervals import shift_months
from ..operands import OperandSpec, norm_key
from ..rows import MessageRow
from ..units import Unit, convert, fmt, parse_number, quantities, unit_of
from .grounding import Grounded, GroundingError, When, ground
from .planner import Plan, PlanFailure, Window, plan

AGGREGATES = ("count_distinct", "sum", "date_filter", "order", "latest_state")


class Fallback(Exception):
    """An operation that cannot run on these operands; fail closed with a next step."""

    def __init__(self, reason: str, next_step: str):
        super().__init__(reason)
        self.reason = reason
        self.next_step = next_step


@dataclass(frozen=True)
class ComputeRequest:
    question: str
    operands: list[OperandSpec]
    question_date: float | None = None
    evidence_complete: bool = False
    candidate_answer: str | None = None
    operation: str | None = None


@dataclass
class Result:
    """What an executor produces: the answer, its trace and whether it is only a bound."""

    answer: dict[str, Any]
    trace: list[dict[str, Any]]
    partial: str | None = None  # why the answer holds only for the cited operands


def compute(req: ComputeRequest, rows: Mapping[int, MessageRow],
            ignored_by: Callable[[str, str], str | None] | None = None) -> dict[str, Any]:
    """The full trove_compute response for ``req`` over the fetched ``rows`` (store_id -> row)."""
    started = time.perf_counter()
    stages: list[dict[str, Any]] = []
    planned = plan(req.question, req.operands, req.question_date, req.operation)
    if isinstance(planned, PlanFailure):
        stages.append({"stage": "plan", "ok": False})
        return _fallback(planned.reason, planned.next_step, None, [], [], stages, started)
    stages.append({"stage": "plan", "ok": True, "operation": planned.operation})
    grounded: list[Grounded] = []
    rejected: list[dict[str, Any]] = []
    for spec in req.operands:
        row = rows.get(spec.claim.store_id) if spec.claim is not None else None
        try:
            grounded.append(ground(spec, row, need=planned.needs, ignored_by=ignored_by, operation=planned.operation))
        except GroundingError as exc:
            rejected.append({"operand": spec.index, "reason": str(exc)})
    stages.append({"stage": "ground", "ok": not rejected, "grounded": len(grounded), "rejected": len(rejected)})
    if rejected:
        return _fallback(f"{len(rejected)} of {len(req.operands)} operands did not ground against their stored span",
                         "fix or drop the rejected operands (see rejected_operands), then call again",
                         planned, grounded, rejected, stages, started)
    try:
        result = EXECUTORS[planned.operation](grounded, planned, req)
        value = result.answer.get("value")
        if isinstance(value, float) and not math.isfinite(value):
            raise Fallback(f"the result overflows ({value})", "cite values of a size a float can hold")
    except Fallback as exc:
        stages.append({"stage": "execute", "ok": False})
        return _fallback(exc.reason, exc.next_step, planned, grounded, [], stages, started)
    stages.append({"stage": "execute", "ok": True})
    out: dict[str, Any] = {"status": "computed", "answer": result.answer}
    if result.partial and not req.evidence_complete:
        out["status"] = "partial"
        out["partial_reason"] = result.partial
    if req.candidate_answer is not None:
        out["candidate_verification"] = verify_candidate(req.candidate_answer, result.answer, planned, grounded, req)
        stages.append({"stage": "verify_candidate", "ok": True})
    out.update({"plan": planned.to_dict(), "trace": result.trace, "operands": [g.trace() for g in grounded],
                "evidence_complete": req.evidence_complete,
                "provenance": {"stages": stages, "model_calls": 0, "grounding": "every operand verified against "
                               "its stored span (ref, hash, quote; values, units, dates and keys in the quote)"},
                "metrics": _metrics(len(req.operands), started)})
    return out


def _fallback(reason: str, next_step: str, planned: Plan | None, grounded: list[Grounded],
              rejected: list[dict[str, Any]], stages: list[dict[str, Any]], started: float) -> dict[str, Any]:
    return {"status": "fallback", "answer": None, "next_path": "evidence_only", "reason": reason,
            "next_step": next_step, **({"rejected_operands": rejected} if rejected else {}),
            "plan": planned.to_dict() if planned else None, "operands": [g.trace() for g in grounded],
            "provenance": {"stages": stages, "model_calls": 0},
            "metrics": _metrics(len(grounded) + len(rejected), started)}


def _metrics(n: int, started: float) -> dict[str, Any]:
    return {"operands": n, "elapsed_ms": round((time.perf_counter() - started) * 1000, 2)}


# -- dates ---------------------------------------------------------------------
def _dated(ops: list[Grounded]) -> list[tuple[Grounded, When]]:
    for g in ops:
        if g.when is None:
            raise Fallback(f"operand {g.index} has no date", "give date or cite the span that dates it")
    return [(g, g.when) for g in ops if g.when is not None]


def _months_between(a: date, b: date) -> tuple[int, int]:
    """Whole calendar months from a to b (a <= b) and the days left over."""
    months = (b.year - a.year) * 12 + b.month - a.month
    if shift_months(a, months) > b:
        months -= 1
    return months, (b - shift_months(a, months)).days


def date_span(a: When, b: When, unit: str) -> tuple[float, str, list[str]]:
    """(value, unit, steps) of the time from a to b (a earlier); Fallback when precision is too coarse."""
    allowed = {"day": {"day"}, "auto": {"day"}, "week": {"day", "week"}, "month": {"day", "month"},
               "year": {"day", "month", "year"}}[unit]
    grains = {a.granularity, b.granularity}
    if not grains <= allowed or ("week" in grains and grains != {"week"}):
        coarser = a if a.granularity != "day" else b
        raise Fallback(f"{coarser.label!r} is known only to the {coarser.granularity}; a difference in "
                       f"{'days' if unit == 'auto' else unit + 's'} would be a guess",
                       "cite spans with exact dates, or ask in a coarser unit (months, years)")
    days = (b.start - a.start).days
    if unit in ("day", "auto"):
        return float(days), "day", [f"{b.label} - {a.label} = {days} days"]
    if unit == "week":
        return days / 7, "week", [f"{b.label} - {a.label} = {days} days", f"{days} / 7 = {fmt(days / 7)} weeks"]
    if a.granularity in ("month", "year") or b.granularity in ("month", "year"):
        months = (b.start.year - a.start.year) * 12 + b.start.month - a.start.month
        if unit == "year":
            if a.granularity == "year" or b.granularity == "year":
                years = b.start.year - a.start.year
                return float(years), "year", [f"{b.start.year} - {a.start.year} = {years} years"]
            return months / 12, "year", [f"{b.label} - {a.label} = {months} months",
                                         f"{months} / 12 = {fmt(months / 12)} years"]
        return float(months), "month", [f"{b.label} - {a.label} = {months} months"]
    months, rest = _months_between(a.start, b.start)
    anchor = shift_months(a.start, months)
    length = (shift_months(anchor, 1) - anchor).days
    value = months + rest / length
    steps = [f"{a.label} + {months} months = {anchor.isoformat()}",
             f"{anchor.isoformat()} .. {b.label} = {rest} days of a {length}-day month",
             f"{months} + {rest}/{length} = {fmt(value)} months"]
    if unit == "year":
        steps.append(f"{fmt(value)} / 12 = {fmt(value / 12)} years")
        return value / 12, "year", steps
    return value, "month", steps


def run_date_difference(ops: list[Grounded], p: Plan, req: ComputeRequest) -> Result:
    dated = _dated(ops)
    if p.options.get("to") == "question_date":
        assert req.question_date is not None
        now = datetime.fromtimestamp(req.question_date, UTC).date()
        pair = [dated[0], (None, When(now, now + timedelta(days=1), "day", "question_date", "question_date"))]
    else:
        pair = list(dated)
    earlier, later = sorted(pair[:2], key=lambda t: t[1].start)  # stable: the first on the same day
    value, unit, steps = date_span(earlier[1], later[1], p.options.get("unit", "auto"))
    trace: list[dict[str, Any]] = [
        {"step": "date", "operand": g.index if g else "question_date", "date": w.label, "source": w.source,
         "expression": w.expression} for g, w in pair]
    trace += [{"step": "arithmetic", "expression": s} for s in steps]
    shown = round(value, 2)
    answer: dict[str, Any] = {"value": round(value, 4), "unit": unit,
                              "text": f"{fmt(shown)} {unit}{'' if abs(shown) == 1 else 's'}",
                              "from": earlier[1].label, "to": later[1].label}
    if unit == "day":
        answer["equivalents"] = {"weeks": round(value / 7, 2)}
        if earlier[1].granularity == later[1].granularity == "day":
            months = date_span(earlier[1], later[1], "month")[0]
            answer["equivalents"].update({"months": round(months, 2), "years": round(months / 12, 2)})
    return Result(answer, trace)


def run_date_filter(ops: list[Grounded], p: Plan, req: ComputeRequest) -> Result:
    window: Window = p.options["window"]
    lo, hi = window.start or date.min, window.end or date.max
    inside: list[Grounded] = []
    uncertain: list[int] = []
    trace: list[dict[str, Any]] = [{"step": "window", **window.to_dict()}]
    for g, w in _dated(ops):
        if lo <= w.start and w.end <= hi:
            verdict = "inside"
            inside.append(g)
        elif w.end <= lo or w.start >= hi:
            verdict = "outside"
        else:
            verdict = "overlaps (date too coarse to tell)"
            uncertain.append(g.index)
        trace.append({"step": "test", "operand": g.index, "date": w.label, "verdict": verdict})
    keyed = p.options.get("distinct_by") == "key"
    seen = {g.key if keyed and g.key else g.ref.shorthand for g in inside}
    trace.append({"step": "count", "distinct_by": "key" if keyed else "ref",
                  "expression": f"{len(seen)} distinct of {len(inside)} inside"})
    answer = {"value": len(seen), "unit": None, "text": str(len(seen)), "inside_operands": [g.index for g in inside],
              "window": window.to_dict()}
    if not uncertain:
        return Result(answer, trace, _cited_only(req, answer, "at_least", "the count"))
    answer.update(uncertain_operands=uncertain, bound="at_least")
    return Result(answer, trace, f"operands {uncertain} overlap the window edge; the count is a lower bound")


# -- keys, values ------------------------------------------------------------------
def run_count_distinct(ops: list[Grounded], p: Plan, req: ComputeRequest) -> Result:
    groups: dict[str, list[int]] = {}
    refs: set[str] = set()
    duplicates: list[int] = []
    for g in ops:
        if g.ref.shorthand in refs:
            duplicates.append(g.index)
            continue
        refs.add(g.ref.shorthand)
        groups.setdefault(g.key or "", []).append(g.index)
    trace: list[dict[str, Any]] = [{"step": "key", "key": k, "operands": v} for k, v in groups.items()]
    if duplicates:
        trace.append({"step": "dedupe", "note": "same ref cited twice; counted once", "operands": duplicates})
    trace.append({"step": "count", "expression": f"{len(groups)} distinct keys"})
    answer: dict[str, Any] = {"value": len(groups), "unit": None, "text": str(len(groups)), "keys": sorted(groups)}
    return Result(answer, trace, _cited_only(req, answer, "at_least", "the count"))


def _cited_only(req: ComputeRequest, answer: dict[str, Any], bound: str, what: str) -> str | None:
    """Unless the caller says the evidence is complete: the answer's bound, and why it is partial."""
    if req.evidence_complete:
        return None
    answer["bound"] = bound
    return f"evidence_complete is false: {what} covers only the cited operands"


def _amount(value: float, unit: Unit | None) -> str:
    return fmt(value) + (f" {unit.name}" if unit else "")


def _valued(ops: list[Grounded]) -> list[Grounded]:
    for g in ops:
        if g.value is None:
            raise Fallback(f"operand {g.index} has no numeric value", "give value or cite the span stating it")
    return ops


def _common_unit(ops: list[Grounded], target: Unit | None) -> Unit | None:
    units = {g.unit.name if g.unit else None: g.unit for g in ops}
    dims = {u.dimension if u else "count" for u in units.values()}
    if len(dims) > 1:
        money = sorted(d.split(":")[1] for d in dims if d.startswith("money:"))
        if len(money) > 1 and len(money) == len(dims):
            raise Fallback(f"currency mix ({', '.join(money)}): amounts in different currencies are never added "
                           "or compared (no exchange rates)", "compute per currency, one call each")
        if dims == {"time", "calendar"}:
            raise Fallback("months and years have no fixed length in days/weeks/hours",
                           "keep calendar units and clock units in separate computations")
        raise Fallback(f"unit mismatch: {', '.join(sorted(dims))} cannot be combined",
                       "cite operands of one dimension, or fix their units")
    dim = dims.pop()
    if target is not None and dim == target.dimension:
        return target
    if target is not None and dim != "count":
        raise Fallback(f"the question asks in {target.name} ({target.dimension}) but the operands are {dim}",
                       "ask in a unit of the operands' dimension")
    return ops[0].unit


def _convert_all(ops: list[Grounded], unit: Unit | None, trace: list[dict[str, Any]]) -> list[float]:
    values = []
    for g in ops:
        assert g.value is not None
        v = g.value
        if unit is not None and g.unit is not None and g.unit.name != unit.name:
            v = convert(g.value, g.unit, unit)
            trace.append({"step": "convert", "operand": g.index,
                          "expression": f"{fmt(g.value)} {g.unit.name} = {fmt(v)} {unit.name}"})
        values.append(v)
    return values


def run_sum(ops: list[Grounded], p: Plan, req: ComputeRequest) -> Result:
    _valued(ops)
    kept: list[Grounded] = []
    seen: set[str] = set()
    trace: list[dict[str, Any]] = []
    for g in ops:
        if g.ref.shorthand in seen:
            trace.append({"step": "dedupe", "operand": g.index, "note": f"{g.ref.shorthand} already counted"})
            continue
        seen.add(g.ref.shorthand)
        kept.append(g)
    unit = _common_unit(kept, p.options.get("target_unit"))
    values = _convert_all(kept, unit, trace)
    total = sum(values)
    trace.append({"step": "arithmetic", "expression": f"{' + '.join(fmt(v) for v in values)} = {_amount(total, unit)}"})
    answer = {"value": round(total, 6), "unit": unit.name if unit else None, "text": _amount(total, unit)}
    return Result(answer, trace, _cited_only(req, answer, "covers_cited_only", "the total"))


def run_difference(ops: list[Grounded], p: Plan, req: ComputeRequest) -> Result:
    _valued(ops)
    trace: list[dict[str, Any]] = []
    unit = _common_unit(ops, p.options.get("target_unit"))
    a, b = _convert_all(ops, unit, trace)
    mode = p.options.get("mode", "directed")
    value = abs(a - b) if mode == "absolute" else a - b
    expr = f"|{fmt(a)} - {fmt(b)}|" if mode == "absolute" else f"{fmt(a)} - {fmt(b)}"
    trace.append({"step": "arithmetic", "mode": mode, "expression": f"{expr} = {_amount(value, unit)}",
                  "order": f"operand {ops[0].index} minus operand {ops[1].index}"})
    return Result({"value": round(value, 6), "unit": unit.name if unit else None, "text": _amount(value, unit),
                   "mode": mode}, trace)


def _who(g: Grounded) -> str:
    return g.label or g.key or g.value_text or g.ref.quote[:120]


def run_order(ops: list[Grounded], p: Plan, req: ComputeRequest) -> Result:
    mode = p.options.get("mode", "sorted")
    trace: list[dict[str, Any]] = []
    if p.options.get("by") == "value":
        _valued(ops)
        unit = _common_unit(ops, None)
        values = _convert_all(ops, unit, trace)
        keyed = sorted(zip(values, ops, strict=True), key=lambda t: t[0])
        ties = [(a[1].index, b[1].index) for a, b in zip(keyed, keyed[1:], strict=False) if abs(a[0] - b[0]) < 1e-9]
        labels = {g.index: f"{fmt(v)} {unit.name}" if unit else fmt(v) for v, g in keyed}
        ordered = [g for _, g in keyed]
        if mode == "highest":
            ordered.reverse()
    else:
        dated = sorted(_dated(ops), key=lambda t: (t[1].start, t[1].end))
        ties = [(a[0].index, b[0].index) for a, b in zip(dated, dated[1:], strict=False) if a[1].end > b[1].start]
        labels = {g.index: w.label for g, w in dated}
        ordered = [g for g, _ in dated]
        if mode == "latest":
            ordered.reverse()
    trace += [{"step": "rank", "operand": g.index, "by": labels[g.index], "label": _who(g)[:120]} for g in ordered]
    if mode == "sorted":
        answer: dict[str, Any] = {"value": [_who(g) for g in ordered], "unit": None,
                                  "order": [g.index for g in ordered],
                                  "text": " < ".join(labels[g.index] for g in ordered)}
        if not ties:
            return Result(answer, trace)
        answer["ties"] = ties
        return Result(answer, trace, f"ties or overlaps between operands {ties}: their relative order is not "
                                     "determined")
    top = ordered[0]
    tied = [pair for pair in ties if top.index in pair]
    if tied:
        raise Fallback(f"tie at the top: operands {tied[0][0]} and {tied[0][1]} share or overlap "
                       f"{labels[top.index]}", "cite spans with more precise dates/values, or ask for the sorted order")
    answer = {"value": _who(top), "unit": None, "operand": top.index, "ref": top.ref.shorthand,
              "by": labels[top.index], "text": f"{_who(top)[:120]} ({labels[top.index]})"}
    return Result(answer, trace, None if req.evidence_complete else "the top holds among the cited operands only")


def run_latest_state(ops: list[Grounded], p: Plan, req: ComputeRequest) -> Result:
    by_key: dict[str, list[tuple[Grounded, When]]] = {}
    for g, w in _dated(ops):
        by_key.setdefault(g.key or "", []).append((g, w))
    states: list[dict[str, Any]] = []
    trace: list[dict[str, Any]] = []
    for key, items in sorted(by_key.items()):
        items.sort(key=lambda t: (t[1].end, t[1].start, t[0].observed_at or 0.0))
        (g, w) = items[-1]
        rivals = [h for h, v in items[:-1] if v.end > w.start and norm_key(_who(h)) != norm_key(_who(g))]
        trace.append({"step": "latest", "key": key, "candidates": [{"operand": h.index, "date": v.label}
                                                                    for h, v in items], "chosen": g.index})
        if rivals:
            raise Fallback(f"conflicting states for key {key!r}: operands {g.index} and {rivals[0].index} "
                           "overlap in time with different content", "cite a span that dates the change precisely")
        states.append({"key": key, "operand": g.index, "ref": g.ref.shorthand, "date": w.label,
                       "state": (g.value_text or g.ref.quote)[:300]})
    answer: dict[str, Any] = {"value": states[0]["state"] if len(states) == 1 else None, "unit": None,
                              "states": states, "text": "; ".join(f"{s['key']}: {s['state'][:80]}" for s in states)}
    return Result(answer, trace, None if req.evidence_complete else "latest among the cited operands only")


EXECUTORS: dict[str, Callable[[list[Grounded], Plan, ComputeRequest], Result]] = {
    "date_difference": run_date_difference, "date_filter": run_date_filter, "count_distinct": run_count_distinct,
    "sum": run_sum, "difference": run_difference, "order": run_order, "latest_state": run_latest_state,
}


# -- candidate answers ---------------------------------------------------------------
def verify_candidate(candidate: str, answer: dict[str, Any], p: Plan, ops: list[Grounded],
                     req: ComputeRequest) -> dict[str, Any]:
    """Whether a candidate answer says what the computation says: agrees true/false/null + detail."""
    out: dict[str, Any] = {"candidate": candidate[:300]}
    value = answer.get("value")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        found = quantities(candidate)
        number = found[0].value if found else parse_number(candidate)
        if number is None:
            return dict(out, agrees=None, detail="the candidate holds no number")
        cand_unit = found[0].unit if found else None
        target = unit_of(answer.get("unit")) if answer.get("unit") else None
        computed = float(value)
        calendar = ("day", "week", "month", "year")
        if p.operation == "date_difference" and cand_unit is not None and cand_unit.name in calendar:
            try:
                again = Plan(p.operation, p.needs, p.cue, {**p.options, "unit": cand_unit.name})
                redo = run_date_difference(ops, again, req)
                computed, target = float(redo.answer["value"]), cand_unit
            except Fallback as exc:
                return dict(out, agrees=None, detail=f"cannot express the answer in {cand_unit.name}s: {exc.reason}")
        elif cand_unit is not None and target is not None and cand_unit.name != target.name:
            try:
                number = convert(number, cand_unit, target)
            except ValueError:
                return dict(out, agrees=False,
                            detail=f"the candidate is in {cand_unit.name}, the answer in {target.name}")
        if abs(number - computed) < 1e-6 * max(1.0, abs(computed)):
            return dict(out, agrees=True, detail=f"{fmt(number)} = {fmt(computed)}")
        if abs(number - round(computed)) < 1e-9 and abs(computed - number) < 0.5:
            return dict(out, agrees=True, detail=f"{fmt(number)} is {fmt(computed)} rounded")
        return dict(out, agrees=False, detail=f"candidate {fmt(number)} != computed {fmt(computed)}"
                    + (f" {target.name}" if target else ""))
    names = [answer.get("value")] if isinstance(answer.get("value"), str) else []
    names += [s.get("state") for s in answer.get("states", [])]
    cand = norm_key(candidate)
    winner = {norm_key(str(n)) for n in names if n}
    if any(w and (w in cand or cand in w) for w in winner if cand):
        return dict(out, agrees=True, detail="the candidate names the computed answer")
    others = {norm_key(_who(g)) for g in ops} - winner
    if any(o and o in cand for o in others):
        return dict(out, agrees=False, detail="the candidate names another operand")
    return dict(out, agrees=None, detail="the candidate names neither the answer nor another operand")

