"""The compute planner: which ONE operation a question asks for, read from its words.

``plan(question, specs, question_date)`` returns a ``Plan`` (operation, the operand fields it
needs, its options and the cue that chose it) or a ``PlanFailure`` with the reason and a next
step. Deterministic and pure: regular expressions over the question, never a model. When the
cues of two operations compete and the operands cannot tell them apart, planning fails
closed instead of guessing.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from ..dates import resolve_occurrences, speaks_of_now
from ..operands import OperandSpec
from ..units import SPACED_AMBIGUOUS, Unit, unit_of
from .grounding import utc_day

OPERATIONS = ("date_difference", "date_filter", "count_distinct", "sum", "difference", "order", "latest_state")
NEEDS: dict[str, frozenset[str]] = {
    "date_difference": frozenset({"date"}), "date_filter": frozenset({"date"}),
    "count_distinct": frozenset({"key"}), "sum": frozenset({"value"}), "difference": frozenset({"value"}),
    "order": frozenset({"date"}), "latest_state": frozenset({"key", "date"}),
}
_DURATION_UNIT = r"(days?|weeks?|months?|years?)"
CUES: dict[str, re.Pattern[str]] = {
    "date_difference": re.compile(
        rf"\bhow long\b|\bhow many {_DURATION_UNIT}\b|\b{_DURATION_UNIT} (?:between|apart|passed|elapsed|lapsed|"
        r"later|earlier)\b|\bago\b|\bhow old\b"),
    "sum": re.compile(r"\b(in total|total|altogether|all together|combined|sum|overall|add up|all in all)\b"),
    "difference": re.compile(
        r"\b(difference|how much (?:more|less|longer|shorter|heavier|lighter|bigger|smaller|cheaper|"
        r"further|farther|higher|lower|faster|slower)|how many (?:more|fewer|less)|compared (?:to|with)|"
        r"(?:more|less|fewer) than)\b"),
    "order": re.compile(
        r"\b(first|earliest|sooner|latest|most recent(?:ly)?|more recent(?:ly)?|final|in what order|"
        r"chronological(?:ly)?|sort(?:ed)?|order|before or after|earlier or later|largest|smallest|"
        r"biggest|highest|lowest|cheapest|most expensive)\b"),
    "latest_state": re.compile(r"\b(currently|current|now|still|as of|these days|at the moment|"
                               r"latest (?:status|state|value)|presently)\b"),
    "count_distinct": re.compile(r"\bhow many\b|\bnumber of\b|\bcount\b"),
}
_VALUE_ORDER = re.compile(r"\b(largest|smallest|biggest|highest|lowest|cheapest|most expensive|most(?! recent)|"
                          r"least)\b")
_EARLIEST = re.compile(r"\b(first|earliest|sooner|earlier)\b")
_LATEST = re.compile(r"\b(latest|most recent(?:ly)?|more recent(?:ly)?|final|later)\b")
_LOW = re.compile(r"\b(smallest|lowest|cheapest|least)\b")
_OPEN_AFTER = ("since", "after", "from", "starting")
_OPEN_BEFORE = ("before", "prior to", "until", "till", "by", "through")


@dataclass(frozen=True)
class Window:
    """A question's time window over UTC days; ``None`` bounds are open."""

    start: date | None
    end: date | None
    expression: str

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start.isoformat() if self.start else None,
                "end": self.end.isoformat() if self.end else None, "expression": self.expression,
                "bounds": "[start, end) in UTC days; null is open"}


@dataclass(frozen=True)
class Plan:
    operation: str
    needs: frozenset[str]
    cue: str
    options: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        opts = {k: (v.to_dict() if isinstance(v, Window) else v.name if isinstance(v, Unit) else v)
                for k, v in self.options.items()}
        return {"operation": self.operation, "cue": self.cue, "needs": sorted(self.needs), "options": opts}


@dataclass(frozen=True)
class PlanFailure:
    reason: str
    next_step: str


def plan(question: str, specs: list[OperandSpec], question_date: float | None,
         operation: str | None = None) -> Plan | PlanFailure:
    """The one operation the question asks for over these operands, or why none is safe."""
    q = " ".join(question.casefold().split())
    window = _window(question, question_date)  # a failure matters only to a window filter
    if operation is not None:
        return _shape(operation, f"operation={operation}", q, specs, question_date, window)
    hits = {op: m.group(0) for op, rx in CUES.items() if (m := rx.search(q))}
    valued = bool(specs) and all(s.value is not None for s in specs)
    picked = _choose(hits, valued, window is not None)
    return picked if isinstance(picked, PlanFailure) else _shape(*picked, q, specs, question_date, window)


def _choose(hits: dict[str, str], valued: bool, windowed: bool) -> tuple[str, str] | PlanFailure:
    if "sum" in hits and "difference" in hits:
        return PlanFailure(f"the question asks both a total ({hits['sum']!r}) and a difference "
                           f"({hits['difference']!r})", "ask one thing per call, or pass operation=")
    if "date_difference" in hits:
        for other in ("sum", "difference"):
            if other in hits and valued:
                return other, hits[other]
        return "date_difference", hits["date_difference"]
    for op in ("difference", "sum"):
        if op in hits:
            return op, hits[op]
    if "order" in hits and "latest_state" in hits:
        return PlanFailure(f"the question reads as both an ordering ({hits['order']!r}) and a current state "
                           f"({hits['latest_state']!r})", "pass operation='order' or 'latest_state'")
    for op in ("order", "latest_state"):
        if op in hits:
            return op, hits[op]
    if windowed:
        return "date_filter", hits.get("count_distinct", "time window")
    if "count_distinct" in hits:
        return "count_distinct", hits["count_distinct"]
    return PlanFailure("no supported operation is recognised in the question (date difference, window filter, "
                       "distinct count, sum, difference, ordering, latest state)",
                       "rephrase naming the operation (e.g. 'how many days between', 'in total') or pass operation=")


def _shape(op: str, cue: str, q: str, specs: list[OperandSpec], question_date: float | None,
           window: Window | PlanFailure | None) -> Plan | PlanFailure:
    options: dict[str, Any] = {}
    needs = NEEDS[op]
    n = len(specs)
    if op == "date_difference":
        unit = re.search(rf"\b(?:how many|in) {_DURATION_UNIT}\b|\b{_DURATION_UNIT} (?:between|apart|passed|"
                         r"elapsed|lapsed|later|earlier|ago)\b", q)
        word = next((g for g in unit.groups() if g), None) if unit else None
        options["unit"] = word.rstrip("s") if word else "auto"
        if n == 1 or (n != 2 and re.search(r"\bago\b|\bsince\b|\bhow old\b", q)):
            if question_date is None:
                return PlanFailure("a duration from one dated operand needs question_date (the 'now' it runs to)",
                                   "pass question_date, or a second dated operand")
            if n != 1:
                return PlanFailure(f"a duration up to question_date takes one dated operand, got {n}",
                                   "cite the one span that dates the event")
            options["to"] = "question_date"
        elif n != 2:
            return PlanFailure(f"a date difference takes two dated operands (or one and question_date), got {n}",
                               "cite exactly the two spans whose dates to subtract")
    elif op == "difference":
        if n != 2:
            return PlanFailure(f"a difference takes exactly two operands with values, got {n}",
                               "cite the two spans holding the values to compare, first minus second")
        options["mode"] = "absolute" if re.search(r"\bdifference\b", q) else "directed"
    elif op == "order":
        by_value = bool(_VALUE_ORDER.search(q)) and all(s.date is None for s in specs)
        if by_value:
            needs = frozenset({"value"})
        options["by"] = "value" if by_value else "date"
        if re.search(r"\b(in what order|chronological(?:ly)?|sort(?:ed)?|order)\b", q):
            options["mode"] = "sorted"
        elif (_LOW if by_value else _EARLIEST).search(q):
            options["mode"] = "lowest" if by_value else "earliest"
        elif by_value or _LATEST.search(q):
            options["mode"] = "highest" if by_value else "latest"
        else:
            return PlanFailure(f"ordering cue {cue!r} does not say earliest, latest or sorted",
                               "ask which came first, which is latest, or in what order")
        if n < 2:
            return PlanFailure("ordering needs at least two operands", "cite every candidate span")
    elif op == "date_filter":
        if isinstance(window, PlanFailure):
            return window
        if window is None:
            return PlanFailure("filtering by a window needs a time window in the question",
                               "name the window in the question (e.g. 'in March 2024', 'since May 2023')")
        options["window"] = window
        options["distinct_by"] = "key" if all(s.key for s in specs) else "ref"
    if op in ("sum", "difference"):
        target = _named_unit(q)
        if target is not None:
            options["target_unit"] = target
    return Plan(op, needs, cue, options)


def _named_unit(q: str) -> Unit | None:
    """A unit the question asks the answer in ('how many km', 'in miles'), if it names one."""
    for m in re.finditer(r"\b(?:how many|how much|in|into|as)\s+([a-z$€£¥₹]+)\b", q):
        if m.group(1) not in SPACED_AMBIGUOUS and (unit := unit_of(m.group(1))) is not None:
            return unit
    return None


def _window(question: str, question_date: float | None) -> Window | PlanFailure | None:
    """The time window the question names, resolved against question_date; None when it names none.
    A question's "currently" or "right now" asks about the present state, so it names no window."""
    anchor = question_date if question_date is not None else 0.0
    occurrences = [o for o in resolve_occurrences(question, anchor)
                   if o.resolved and o.start and o.end and not speaks_of_now(o.expression)]
    if not occurrences:
        return None
    absolute = all(re.search(r"\b\d{4}\b", o.expression) for o in occurrences)
    if question_date is None and not absolute:
        return PlanFailure(f"the question's time {occurrences[0].expression!r} is relative and question_date "
                           "is not given", "pass question_date (when the question is asked)")
    first, last = occurrences[0], occurrences[-1]
    low = question.casefold()
    before = low[:first.span[0]].rstrip()
    expression = first.expression.casefold()
    if len(occurrences) >= 2 and re.search(r"\bbetween\s*$", before):
        return Window(utc_day(first.start), utc_day(last.end), question[first.span[0]:last.span[1]])
    if any(expression.startswith(w) or before.endswith(w) for w in _OPEN_AFTER):
        return Window(utc_day(first.start), None, first.expression)
    for w in _OPEN_BEFORE:
        if expression.startswith(w) or before.endswith(w):
            end = first.start if w in ("before", "prior to") else first.end
            return Window(None, utc_day(end), first.expression)
    return Window(utc_day(first.start), utc_day(first.end), first.expression)
