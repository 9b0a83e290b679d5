"""Grounding: an operand a caller cites becomes facts read from its stored span, or a reason.

``ground(spec, row, ...)`` verifies the ref against the row, refuses rows of ignored sessions,
and checks every claimed field against the quote: a value must be written in it, a unit
must be written in it, a date must be written in it or resolve from its time expressions
(observation time = the row's timestamp), a key must be written in it. Fields the caller
left out are read from the quote only when the quote holds exactly one candidate; anything
else fails closed. Pure: the caller fetches rows.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from ..dates import Occurrence, intervals, resolve_occurrences
from ..operands import ASSERTIONS_DISABLED, OperandSpec, norm_key
from ..refs import ExactRef, RefError, parse_claim, verify
from ..rows import MessageRow
from ..units import Quantity, Unit, fmt, parse_number, quantities, unit_in_quote, unit_of

MAX_OPERANDS = 50
_REF_KEYS = ("store_id", "span_start", "span_end", "quote", "content_sha256")


class GroundingError(ValueError):
    """One operand that could not be grounded; the message says why."""


@dataclass(frozen=True)
class When:
    """A time as a UTC day interval ``[start, end)`` with its granularity and where it came from."""

    start: date
    end: date
    granularity: str          # day | week | month | year
    source: str               # quote | observed_at
    expression: str

    def to_dict(self) -> dict[str, str]:
        return {"start": self.start.isoformat(), "end": self.end.isoformat(), "granularity": self.granularity,
                "source": self.source, "expression": self.expression}

    @property
    def label(self) -> str:
        if self.granularity == "day":
            return self.start.isoformat()
        if self.granularity == "month":
            return self.start.strftime("%Y-%m")
        if self.granularity == "year":
            return str(self.start.year)
        return f"{self.start.isoformat()}..{(self.end - timedelta(days=1)).isoformat()}"


@dataclass(frozen=True)
class Grounded:
    """An operand whose fields were all found in its stored span."""

    index: int
    ref: ExactRef
    label: str | None
    key: str | None
    value: float | None
    value_text: str | None
    unit: Unit | None
    when: When | None
    observed_at: float | None
    assertion_id: str | None = None

    def trace(self) -> dict[str, Any]:
        given = {"assertion_id": self.assertion_id or None, "label": self.label or None, "key": self.key,
                 "value": self.value_text if self.value is None else fmt(self.value),
                 "unit": self.unit.name if self.unit else None, "date": self.when.to_dict() if self.when else None}
        return {"operand": self.index, "ref": self.ref.shorthand, "quote": self.ref.quote[:300],
                **{k: v for k, v in given.items() if v is not None}}


def parse_operands(raw: Any, name: str = "operands", limit: int = MAX_OPERANDS) -> list[OperandSpec]:
    """Operand specs from the tool argument; structural errors raise ValueError, ref errors are kept."""
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"{name} must be a list of 1-{limit} objects")
    if len(raw) > limit:
        raise ValueError(f"{name} accepts at most {limit} items, got {len(raw)}")
    return [parse_operand(i, item) for i, item in enumerate(raw, start=1)]


def parse_operand(index: int, item: Any) -> OperandSpec:
    if isinstance(item, str):
        item = {"exact_ref": item}
    if not isinstance(item, Mapping):
        raise ValueError(f"operand {index} must be an object or a trove:<id>:<start>-<end> string")
    fields = {k: None if item.get(k) in (None, "") else str(item[k])[:400] for k in ("unit", "key", "label", "date")}
    value = item.get("value")
    if value is not None and not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise ValueError(f"operand {index}: value must be a number or a string")
    if item.get("assertion_id") not in (None, ""):
        return OperandSpec(index, None, assertion_id=str(item["assertion_id"])[:80], value=value, **fields)
    source: Any = item.get("exact_ref")
    if source is None and any(k in item for k in _REF_KEYS):
        source = {k: item[k] for k in (*_REF_KEYS, "ref") if k in item}
    elif source is None:
        source = item.get("ref")
    if isinstance(source, Mapping):
        source = dict(source)
    try:
        claim = parse_claim(source)
    except RefError as exc:
        return OperandSpec(index, None, claim_error=str(exc), value=value, **fields)
    return OperandSpec(index, claim, value=value, **fields)


def ground(spec: OperandSpec, row: MessageRow | None, *, need: frozenset[str] = frozenset(),
           ignored_by: Any = None, operation: str | None = None) -> Grounded:
    """The grounded operand, or GroundingError naming the first field that does not hold.

    ``need`` names fields the plan requires (value, unit, date, key); ``ignored_by(session_id,
    platform)`` returns the ignore pattern a session matches (runtime filters). An assertion
    operand arrives resolved to its ref (by the assertion store) and grounds like any other; only
    ``latest_state`` keys it by what the assertion tracks when no key is given.
    """
    where = f"operand {spec.index}"
    if spec.claim is None:
        missing = ASSERTIONS_DISABLED if spec.assertion_id is not None else "no exact ref given"
        raise GroundingError(f"{where}: {spec.claim_error or missing}")
    try:
        ref = verify(spec.claim, row)
    except RefError as exc:
        raise GroundingError(f"{where}: {exc}") from None
    assert row is not None
    if ignored_by is not None and (pattern := ignored_by(row.session_id, row.platform)):
        raise GroundingError(f"{where}: store_id {row.store_id} belongs to session {row.session_id!r}, which "
                             f"is ignored (pattern {pattern!r}); its rows are not evidence")
    quote = ref.quote
    occurrences = resolve_occurrences(quote, row.created_at) if row.created_at is not None else []
    value, value_text, unit = _value(spec, quote, occurrences, need, where)
    when = _date(spec, quote, occurrences, row.created_at, need, where)
    tracked = spec.tracked_key if operation == "latest_state" and spec.key is None else None
    key = norm_key(tracked) if tracked else _key(spec, quote, need, where)
    return Grounded(spec.index, ref, spec.label, key, value, value_text, unit, when, row.created_at, spec.assertion_id)


def _value(spec: OperandSpec, quote: str, occurrences: list[Occurrence], need: frozenset[str],
           where: str) -> tuple[float | None, str | None, Unit | None]:
    claimed_unit = unit_of(spec.unit) if spec.unit else None
    if spec.unit and claimed_unit is None:
        raise GroundingError(f"{where}: unknown unit {spec.unit!r}; supported: time, length, mass, volume, "
                             "data-size units and currency codes")
    if spec.value is None and "value" not in need:
        if claimed_unit is not None and not unit_in_quote(claimed_unit, quote):
            raise GroundingError(f"{where}: unit {spec.unit!r} is not written in the quote")
        return None, None, claimed_unit
    found = [q for q in quantities(quote) if not _inside_time(q, occurrences)]
    if spec.value is not None:
        number = parse_number(spec.value)
        if number is None:  # a text value: it must be written in the quote
            text = str(spec.value)
            if norm_key(text) not in norm_key(quote):
                raise GroundingError(f"{where}: value {text[:80]!r} is not written in the quote")
            if "value" in need:
                raise GroundingError(f"{where}: value {text[:80]!r} is not a number")
            return None, text, claimed_unit
        matches = [q for q in quantities(quote) if abs(q.value - number) < 1e-9]
        if not matches:
            raise GroundingError(f"{where}: value {spec.value!r} is not written in the quote "
                                 f"(numbers there: {', '.join(q.text for q in found[:8]) or 'none'})")
        found = matches
    if claimed_unit is not None:
        same = [q for q in found if q.unit is not None and q.unit.name == claimed_unit.name]
        if same:
            found = same
        elif any(q.unit is not None for q in found) and all(q.unit is not None for q in found):
            raise GroundingError(f"{where}: the quote writes {found[0].text!r}, not a value in {spec.unit!r}")
        elif not unit_in_quote(claimed_unit, quote):
            raise GroundingError(f"{where}: unit {spec.unit!r} is not written in the quote")
        found = [q for q in found if q.unit is None or q.unit.name == claimed_unit.name]
    distinct = {(q.value, q.unit.name if q.unit else None) for q in found}
    if not distinct:
        raise GroundingError(f"{where}: the quote holds no number; give the ref of the span that states it")
    if len(distinct) > 1:
        raise GroundingError(f"{where}: the quote holds {len(distinct)} numbers "
                             f"({', '.join(q.text for q in found[:6])}); give value (and unit) to pick one")
    chosen: Quantity = found[0]
    return chosen.value, chosen.text, claimed_unit or chosen.unit


def _inside_time(q: Quantity, occurrences: list[Occurrence]) -> bool:
    """A number that is part of a time expression ("3 March 2024", "two weeks ago") is no value."""
    return q.unit is None and any(o.span[0] <= q.span[0] and q.span[1] <= o.span[1] for o in occurrences)


def utc_day(moment: datetime | None) -> date | None:
    return None if moment is None else moment.astimezone(UTC).date()


def _resolved(occurrences: list[Occurrence]) -> list[When]:
    out: dict[tuple[date, date], When] = {}
    for o in occurrences:
        start, end = utc_day(o.start), utc_day(o.end)
        if start is not None and end is not None and o.granularity is not None:
            out.setdefault((start, end), When(start, end, o.granularity, "quote", o.expression))
    return list(out.values())


def parse_date(text: str, observed_at: float | None = None) -> tuple[date, date, str] | None:
    """A caller's date: YYYY-MM-DD, YYYY-MM, YYYY or a phrase the resolver pins down."""
    t = text.strip()
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", t):
            d = date.fromisoformat(t)
            return d, d + timedelta(days=1), "day"
        if re.fullmatch(r"\d{4}-\d{2}", t):
            return *intervals.month_span(int(t[:4]), int(t[5:])), "month"
        if re.fullmatch(r"\d{4}", t):
            return *intervals.year_span(int(t)), "year"
    except ValueError:
        return None
    found = _resolved(resolve_occurrences(t, observed_at if observed_at is not None else 0.0))
    return (found[0].start, found[0].end, found[0].granularity) if len(found) == 1 else None


def _date(spec: OperandSpec, quote: str, occurrences: list[Occurrence], observed_at: float | None,
          need: frozenset[str], where: str) -> When | None:
    resolved = _resolved(occurrences)
    if spec.date is not None:
        parsed = parse_date(spec.date, observed_at)
        if parsed is None:
            raise GroundingError(f"{where}: date {spec.date!r} is not YYYY-MM-DD, YYYY-MM, YYYY or a phrase "
                                 "that resolves to one time")
        start, end, granularity = parsed
        for w in resolved:
            if (w.start, w.end) == (start, end):
                return w
        if spec.date.strip().casefold() in quote.casefold():
            return When(start, end, granularity, "quote", spec.date.strip())
        shown = ", ".join(f"{w.expression!r} = {w.label}" for w in resolved[:4]) or "none resolved"
        raise GroundingError(f"{where}: date {spec.date!r} is neither written in the quote nor resolved from it "
                             f"(its time expressions: {shown})")
    if "date" not in need:
        return None
    if len(resolved) == 1:
        return resolved[0]
    if len(resolved) > 1:
        raise GroundingError(f"{where}: the quote names {len(resolved)} times ("
                             + ", ".join(f"{w.expression!r}" for w in resolved[:4]) + "); give date to pick one")
    unresolved = [o for o in occurrences if not o.resolved]
    if unresolved:
        raise GroundingError(f"{where}: the quote's time expression {unresolved[0].expression!r} does not pin a "
                             f"date down ({unresolved[0].unresolved}); cite a span that names the date")
    if observed_at is None:
        raise GroundingError(f"{where}: the quote names no time and the row has no timestamp")
    day = datetime.fromtimestamp(observed_at, UTC).date()
    return When(day, day + timedelta(days=1), "day", "observed_at", "(said on this day; the quote names no time)")


def _key(spec: OperandSpec, quote: str, need: frozenset[str], where: str) -> str | None:
    text = spec.key or (spec.label if "key" in need else None)
    if text is None:
        if "key" in need:
            raise GroundingError(f"{where}: no key or label; give each operand the key it counts or tracks")
        return None
    bare = text.split(":", 1)[1] if ":" in text and not text.startswith("http") else text
    if norm_key(bare) not in norm_key(quote):
        raise GroundingError(f"{where}: key {text[:80]!r} is not written in the quote; use the quote's own words")
    return norm_key(bare)
