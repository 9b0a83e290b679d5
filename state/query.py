"""``trove_query_state``: current or historical state of a subject from the assertion store.

Every assertion comes with its exact ref (store id, span, quote, content hash); ``active``
says whether it held at ``as_of`` (not superseded by then, inside its validity window), and
conflicting assertions are listed, never resolved. Off (``status: "disabled"``) unless
``TROVE_ASSERTIONS_ENABLED``. A small catch-up extraction (at most two model calls) runs first
when only the last few messages wait; a larger backlog is left to the background passes.
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ..refs import shorthand
from ..toolkit import ToolContext, ToolError, fit_items, int_arg, iso, parse_time, str_arg
from .assertion_store import AssertionRow, AssertionStore
from .contract import KINDS, key, predicate
from .extract import run_pass

DEFAULT_LIMIT, LIMIT_CAP = 25, 50
RESPONSE_CAP = 64000
CATCH_UP_BATCHES = 2
CATCH_UP_BUDGET_S = 20.0


def item(a: AssertionRow, conflicted: set[str]) -> dict[str, Any]:
    return {"assertion_id": a.assertion_id, "subject_key": a.subject_key, "predicate_key": a.predicate_key,
            "value_text": a.value_text, "kind": a.kind, "polarity": a.polarity, "scope_key": a.scope_key,
            "speaker_role": a.speaker_role, "observed_at": iso(a.observed_at), "event_at": iso(a.event_at),
            "event_end": iso(a.event_end), "event_expression": a.event_expression, "valid_from": iso(a.valid_from),
            "valid_to": iso(a.valid_to), "confidence": round(a.confidence, 3), "active": a.active,
            "unresolved_conflict": a.assertion_id in conflicted,
            "source_ref": {"store_id": a.store_id, "session_id": a.session_id, "role": a.speaker_role,
                           "span_start": a.span_start, "span_end": a.span_end, "quote": a.quote,
                           "content_sha256": a.content_sha256, "ref": shorthand(a.store_id, a.span_start, a.span_end)}}


def trove_query_state(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    if not ctx.runtime.config.assertions_enabled:
        return {"status": "disabled", "tool": "trove_query_state",
                "reason": "assertions are disabled on this install (TROVE_ASSERTIONS_ENABLED=false): there is no "
                          "assertion store to query; nothing was queried",
                "next_step": "use trove_grep or trove_recall to find the messages, then cite exact refs"}
    subject = key(str_arg(args, "subject_key", required=True, allow_empty=False))
    if not subject:
        raise ToolError("subject_key must name a subject, e.g. user:self or person:alex")
    pred = predicate(str_arg(args, "predicate_key"))  # None when absent or empty
    kinds = args.get("kinds") or []
    if not isinstance(kinds, list) or len(kinds) > 8 or any(k not in KINDS for k in kinds):
        raise ToolError(f"kinds must be a list of at most 8 of: {', '.join(KINDS)}")
    scope = key(str_arg(args, "scope_key"), 80)
    role = str_arg(args, "speaker_role") or None
    if role is not None and role not in ("user", "assistant"):
        raise ToolError("speaker_role must be user or assistant")
    clamped: dict[str, Any] = {}
    limit = int_arg(args, "limit", DEFAULT_LIMIT, minimum=1, cap=LIMIT_CAP, clamped=clamped) or DEFAULT_LIMIT
    as_of_given = parse_time(args.get("as_of"), "as_of")
    as_of = time.time() if as_of_given is None else as_of_given
    store = AssertionStore(ctx.runtime.db)
    store.ensure()
    catch_up = _catch_up(ctx, store)
    rows, more = store.query(subject, as_of, predicate=pred, kinds=kinds, scope=scope, role=role, limit=limit,
                             visible=ctx.visible)
    ids = [a.assertion_id for a in rows]
    relations = store.relations(ids, as_of)
    active = {a.assertion_id for a in rows if a.active}
    conflicted = {x for r in relations if r["relation"] == "conflicts" and r["from"] in active and r["to"] in active
                  for x in (r["from"], r["to"])}
    items = [item(a, conflicted) for a in rows]
    rels = [dict(r, at=iso(r["at"])) for r in relations if r["from"] in set(ids) and r["to"] in set(ids)]
    head = {"status": "ok", "query": {"subject_key": subject, "predicate_key": pred, "kinds": kinds,
                                      "scope_key": scope, "speaker_role": role,
                                      "as_of": iso(as_of_given) if as_of_given is not None else "now"},
            "limit": limit, **clamped, "extraction": catch_up,
            "provenance": {"store": "assertions extracted by the auxiliary model; every quote verified against "
                                    "the stored message", "recency_resolution": "newer same-speaker values supersede;"
                                    " other disagreements are listed as conflicts"}}

    def build(n: int) -> dict[str, Any]:
        shown = {i["assertion_id"] for i in items[:n]}
        out = dict(head, assertions=items[:n],
                   relations=[r for r in rels if r["from"] in shown and r["to"] in shown],
                   active_assertion_ids=[i for i in ids[:n] if i in active],
                   conflict_assertion_ids=sorted(c for c in conflicted if c in shown),
                   has_more=more or n < len(items), assertions_truncated=n < len(items),
                   response_char_cap=RESPONSE_CAP)
        if not items:
            out["note"] = ("no assertion about this subject" + (" and predicate" if pred else "") +
                           " yet; try subject_key user:self, drop predicate_key, or search with trove_grep")
        return out

    payload, _ = fit_items(build, len(items), min(ctx.response_cap, RESPONSE_CAP) - 1000)
    return payload


def _catch_up(ctx: ToolContext, store: AssertionStore) -> dict[str, Any]:
    most = CATCH_UP_BATCHES * int(ctx.runtime.config.assertion_batch_messages)
    backlog = store.backlog(cap=most)  # bounded count: a query never scans a large backlog
    if backlog == 0 or backlog > most or ctx.complete is None:
        return {"backlog": backlog if backlog <= most else f"more than {most}", "caught_up": backlog == 0}
    report = run_pass(ctx.runtime, ctx.complete, max_batches=CATCH_UP_BATCHES, budget_s=CATCH_UP_BUDGET_S)
    left = store.backlog()
    return {"backlog": left, "caught_up": left == 0, "extracted_now": report.get("stored", 0),
            "pass": report.get("status")}
