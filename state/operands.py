"""``assertion_id`` operands of ``trove_compute``: a stored assertion becomes its exact ref.

An operand that names an assertion (the ``assertion_id`` ``trove_query_state`` returns) is
replaced by that assertion's ref (store id, span, quote, content hash) and, unless the
caller gave them, its value and label; ``latest_state`` keys it by the subject and predicate
the assertion tracks. Grounding then checks it against the stored row like any cited
operand: a row edited or deleted since extraction fails closed. An unknown or malformed id,
or assertions switched off, leaves the operand unresolved with the reason.
"""
from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING

from ..operands import ASSERTIONS_DISABLED, OperandSpec, norm_key
from ..refs import RefClaim
from ..units import parse_number, quantities
from .assertion_store import AssertionRow, AssertionStore

if TYPE_CHECKING:
    from ..runtime import Runtime

ASSERTION_ID = re.compile(r"[0-9a-f]{64}")


def resolve_assertions(runtime: Runtime, specs: list[OperandSpec]) -> list[OperandSpec]:
    """``specs`` with every assertion operand resolved to its ref, or left unresolved with why."""
    if all(s.assertion_id is None for s in specs):
        return specs
    if not runtime.config.assertions_enabled:
        return [replace(s, claim_error=ASSERTIONS_DISABLED) if s.assertion_id is not None else s for s in specs]
    store = AssertionStore(runtime.db)
    present = store.present()
    return [_resolve(s, store, present) if s.assertion_id is not None else s for s in specs]


def _resolve(spec: OperandSpec, store: AssertionStore, present: bool) -> OperandSpec:
    given = (spec.assertion_id or "").strip().lower()
    if not ASSERTION_ID.fullmatch(given):
        return replace(spec, claim_error=f"assertion_id {spec.assertion_id!r} is not an assertion id: pass the "
                                         "64-character hex assertion_id that trove_query_state returns")
    found = store.get(given) if present else None
    if found is None:
        return replace(spec, claim_error=f"no assertion {given[:12]}... is stored (unknown id, or the store was "
                                         "rebuilt); query trove_query_state again for current ids")
    claim = RefClaim(found.store_id, found.span_start, found.span_end, found.quote, found.content_sha256)
    return replace(spec, claim=claim, claim_error=None, assertion_id=given,
                   value=spec.value if spec.value is not None else _value(found),
                   label=spec.label or found.value_text[:400] or None,
                   tracked_key=f"{found.subject_key} {found.predicate_key}"
                               + (f" {found.scope_key}" if found.scope_key else ""))


def _value(found: AssertionRow) -> str | None:
    """The assertion's value as an operand value: a bare number, or a text value written in its
    quote; None (read from the quote) for a value that carries a unit or a paraphrase."""
    text = found.value_text.strip()
    if not text:
        return None
    if parse_number(text) is not None:
        return text
    return None if quantities(text) or norm_key(text) not in norm_key(found.quote) else text
