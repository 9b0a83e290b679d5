"""trove_evidence_pack's core: baseline refs hydrated into a bounded, ordered, time-aware packet.

Each ref is verified against its stored row; a ref whose quote no longer sits at its span is
repaired only when the quote occurs exactly once inside the declared window (the span widened
by ``repair_window_chars`` on each side) and the content hash, if given, still matches.
Duplicates and spans contained in another cited span of the same row are dropped. Items keep
observation time (``observed_at``: when it was said) apart from occurrence time
(``occurrences``: what the quote says happened when). Pure over the fetched rows; no prose.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from ..dates import resolve_occurrences
from ..refs import ExactRef, RefClaim, RefError, content_sha256, iso, parse_claim, shorthand, verify
from ..rows import MessageRow
from ..toolkit import clamped_number

MAX_BASELINE = 50
Verified = tuple[int, ExactRef, MessageRow, dict[str, Any] | None]  # index, ref, its row, how it was repaired
PACK_CAP = 64000
TIME_MODEL = ("observed_at: when the message was stored (its timestamp); occurrences: the time expressions of "
              "the quote resolved against observed_at, [start, end) in UTC")
ORDERING = "observed_at, then store_id, then span_start (oldest first)"


@dataclass(frozen=True)
class PackBudgets:
    max_refs: int = 25
    max_quote_chars: int = 2400
    max_per_session: int = 5
    max_per_date: int = 5
    repair_window_chars: int = 400


BUDGET_RANGES: dict[str, tuple[int, int]] = {"max_refs": (1, 50), "max_quote_chars": (64, 2400),
                                             "max_per_session": (1, 50), "max_per_date": (1, 8),
                                             "repair_window_chars": (0, 2400)}


def parse_budgets(raw: Any) -> tuple[PackBudgets, dict[str, Any]]:
    """Budgets from the argument: values outside a range are clamped and reported."""
    if raw is None:
        return PackBudgets(), {}
    if not isinstance(raw, Mapping):
        raise ValueError("budgets must be an object")
    notes: dict[str, Any] = {}
    values = asdict(PackBudgets())
    for key, value in raw.items():
        if key not in BUDGET_RANGES:
            notes.setdefault("ignored_budgets", []).append(str(key)[:40])
            continue
        lo, hi = BUDGET_RANGES[key]
        clamped = clamped_number(value, f"budgets.{key}", lo, hi)
        if str(clamped) != (value.strip() if isinstance(value, str) else str(value).removesuffix(".0")):
            notes[f"{key}_clamped_from"] = value
        values[key] = clamped
    return PackBudgets(**values), notes


def parse_refs(raw: Any, limit: int = MAX_BASELINE) -> list[tuple[int, RefClaim | None, str | None]]:
    """(index, claim, parse error) per baseline ref; structural problems raise ValueError."""
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"baseline_refs must be a list of 1-{limit} refs")
    if len(raw) > limit:
        raise ValueError(f"baseline_refs accepts at most {limit} refs, got {len(raw)}")
    out: list[tuple[int, RefClaim | None, str | None]] = []
    for i, item in enumerate(raw, start=1):
        source = item.get("exact_ref", item) if isinstance(item, Mapping) else item
        try:
            out.append((i, parse_claim(dict(source) if isinstance(source, Mapping) else source), None))
        except RefError as exc:
            out.append((i, None, str(exc)))
    return out


def repair(claim: RefClaim, row: MessageRow, window: int) -> tuple[ExactRef | None, str]:
    """The ref re-anchored on the unique in-window occurrence of its quote, or None and why not."""
    if claim.quote is None or claim.quote == "":
        return None, "no quote to re-anchor"
    if claim.content_sha256 is not None and claim.content_sha256 != content_sha256(row.content):
        return None, "content_sha256 does not match: the row changed, a stale ref is never repaired"
    text = row.content
    lo, hi = max(0, claim.span_start - window), min(len(text), claim.span_end + window)
    hits: list[int] = []
    at = text.find(claim.quote, lo, hi)
    while at != -1 and len(hits) < 3:
        hits.append(at)
        at = text.find(claim.quote, at + 1, hi)
    if len(hits) != 1:
        found = "does not occur" if not hits else f"occurs {'3 or more' if len(hits) > 2 else 2} times"
        return None, f"the quote {found} inside the window [{lo}, {hi}); not repaired"
    start = hits[0]
    return verify(RefClaim(claim.store_id, start, start + len(claim.quote)), row), f"window [{lo}, {hi})"


def build_pack(question: str, claims: list[tuple[int, RefClaim | None, str | None]],
               rows: Mapping[int, MessageRow], budgets: PackBudgets,
               ignored_by: Callable[[str, str], str | None] | None = None) -> dict[str, Any]:
    """The packet's items (ordered, deduplicated, budgeted) and what was rejected or dropped."""
    rejected: list[dict[str, Any]] = []
    verified: list[Verified] = []
    for index, claim, error in claims:
        if claim is None:
            rejected.append({"index": index, "reason": error})
            continue
        row = rows.get(claim.store_id)
        if row is None:
            rejected.append({"index": index, "ref": _sh(claim), "reason": f"store_id {claim.store_id} is not stored "
                             "(deleted, ignored at ingest or never seen)"})
            continue
        if ignored_by is not None and (pattern := ignored_by(row.session_id, row.platform)):
            rejected.append({"index": index, "ref": _sh(claim), "reason": f"session {row.session_id!r} is ignored "
                             f"(pattern {pattern!r}); its rows are not evidence"})
            continue
        try:
            verified.append((index, verify(claim, row), row, None))
        except RefError as exc:
            fixed, how = repair(claim, row, budgets.repair_window_chars)
            if fixed is None:
                rejected.append({"index": index, "ref": _sh(claim), "reason": f"{exc}; {how}"})
            else:
                verified.append((index, fixed, row, {"from": _sh(claim), "reason": str(exc), "window": how}))
    kept, duplicates = _dedupe(verified)
    kept.sort(key=lambda t: (t[2].created_at, t[1].store_id, t[1].span_start))
    items: list[dict[str, Any]] = []
    dropped: list[dict[str, Any]] = []
    per_session: dict[str, int] = {}
    per_date: dict[str, int] = {}
    for index, ref, row, repaired in kept:
        day = datetime.fromtimestamp(row.created_at, UTC).date().isoformat()
        reason = ("max_refs" if len(items) >= budgets.max_refs else
                  "max_per_session" if per_session.get(row.session_id, 0) >= budgets.max_per_session else
                  "max_per_date" if per_date.get(day, 0) >= budgets.max_per_date else None)
        if reason:
            dropped.append({"index": index, "ref": ref.shorthand, "reason": reason})
            continue
        per_session[row.session_id] = per_session.get(row.session_id, 0) + 1
        per_date[day] = per_date.get(day, 0) + 1
        items.append(_item(index, ref, row, repaired, budgets.max_quote_chars))
    return {"question": question, "items": items, "rejected": rejected, "dropped": dropped,
            "duplicates": duplicates, "ordering": ORDERING, "time_model": TIME_MODEL}


def _sh(claim: RefClaim) -> str:
    return shorthand(claim.store_id, claim.span_start, claim.span_end)


def _dedupe(verified: list[Verified]) -> tuple[list[Verified], list[dict[str, Any]]]:
    """Identical spans, and spans inside another cited span of the same row, are kept once."""
    duplicates: list[dict[str, Any]] = []
    kept: list[Verified] = []
    # widest first, so a contained span always meets its container already kept
    for entry in sorted(verified, key=lambda t: (t[1].store_id, t[1].span_start, -t[1].span_end, t[0])):
        index, ref = entry[0], entry[1]
        holder = next((k for k in kept if k[1].store_id == ref.store_id and k[1].span_start <= ref.span_start
                       and ref.span_end <= k[1].span_end), None)
        if holder is not None:
            same = (holder[1].span_start, holder[1].span_end) == (ref.span_start, ref.span_end)
            duplicates.append({"index": index, "ref": ref.shorthand, "kept_index": holder[0],
                               "reason": "same span" if same else "inside another cited span of the same row"})
            continue
        kept.append(entry)
    return kept, duplicates


def _item(index: int, ref: ExactRef, row: MessageRow, repaired: dict[str, Any] | None,
          max_quote: int) -> dict[str, Any]:
    quote = ref.quote
    out: dict[str, Any] = {"index": index, "ref": ref.shorthand, "store_id": ref.store_id,
                           "span_start": ref.span_start, "span_end": ref.span_end,
                           "content_sha256": ref.content_sha256, "session_id": ref.session_id, "role": row.role,
                           "observed_at": iso(row.created_at), "quote": quote[:max_quote],
                           "quote_chars": len(quote), "quote_truncated": len(quote) > max_quote,
                           "occurrences": [o.to_dict() for o in resolve_occurrences(quote, row.created_at)]}
    if repaired is not None:
        out["repaired"] = repaired
    return out
