"""``trove_retrieve``: a bounded retrieval controller for one answering turn.

An episode is a small state machine persisted in ``retrieval_episodes`` (its steps in
``retrieval_events``): ``start`` opens it with the question, what is asked (``identity``) and
typed evidence slots; at most three ``search`` steps call an existing retrieval tool through
dispatch (``ctx.call``: recall, grep, recent, query_state, each under its own checks and cap)
and record every exact ref those results contain, verified against the stored row; ``finish``
accepts only refs observed in those steps (optionally computing through ``trove_compute``,
called the same way) and stores the evidence view; ``abandon`` closes it.
Any other move is refused. Off unless ``TROVE_ADAPTIVE_RETRIEVAL_ENABLED``. Never writes prose.
"""
from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

from .. import tokens
from ..refs import RefError, make_ref, parse_claim, shorthand
from ..toolkit import ToolContext, ToolError, current_session, question_arg, question_date_arg, str_arg
from .assertion_store import AssertionStore

# The tools a search step may call, each through dispatch with its own argument checks and cap.
SEARCH_TOOLS = ("trove_recall", "trove_grep", "trove_recent", "trove_query_state")

MAX_ROUNDS = 3
MAX_CANDIDATES = 40
MAX_EVIDENCE_CHARS = 2400
MAX_CONTEXT_CHARS = 40000
MAX_CONTEXT_TOKENS = 7500
MAX_LIVE_EPISODES = 32
MAX_QUESTION = 4096
MAX_TOOL_ARGS = 2048
MAX_SLOTS = 12
INTENTS = ("lookup", "current_state", "history", "count", "sum", "difference", "order", "date", "list", "compare",
           "other")
ARGS = {"start": {"action", "question", "question_date", "identity", "requirements"},
        "search": {"action", "retrieval_id", "missing_slot", "tool", "tool_args"},
        "finish": {"action", "retrieval_id", "resolved_slots", "selected_refs", "computation"},
        "status": {"action", "retrieval_id"},
        "abandon": {"action", "retrieval_id"}}
IDENTITY_KEYS = {"intent_type", "operation", "subject_key", "predicate_key", "role_key", "scope_key",
                 "conversation_id", "unit", "distinct_policy", "time_mode", "question_anchor", "window_start",
                 "window_end", "policy_version"}
# action -> the states it may start from; everything else is an illegal transition
TRANSITIONS = {"search": ("open",), "finish": ("open",), "abandon": ("open",),
               "status": ("open", "finished", "abandoned")}


def trove_retrieve(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    if not ctx.runtime.config.adaptive_retrieval_enabled:
        return {"status": "disabled", "tool": "trove_retrieve",
                "reason": "the adaptive retrieval controller is disabled on this install "
                          "(TROVE_ADAPTIVE_RETRIEVAL_ENABLED=false); no retrieval episode was started",
                "next_step": "search with trove_grep or trove_recall, pin spans with trove_expand(include_exact_ref="
                             "true), then trove_evidence_pack or trove_compute"}
    action = args.get("action")
    if not isinstance(action, str) or action not in ARGS:
        raise ToolError(f"action must be one of {', '.join(ARGS)}")
    unknown = sorted(set(args) - ARGS[action])
    if unknown:
        raise ToolError(f"{action} does not take {', '.join(unknown)}; it takes {', '.join(sorted(ARGS[action]))}")
    store = AssertionStore(ctx.runtime.db)
    store.ensure()
    if action == "start":
        return _start(ctx, store, args)
    rid = (str_arg(args, "retrieval_id", required=True, allow_empty=False) or "").strip()
    episode = store.episode(rid, ctx.visible)  # another scope's episode reads as unknown
    if episode is None:
        raise ToolError(f"no retrieval episode {rid[:60]!r}; start one with action='start'")
    if episode["state"] not in TRANSITIONS[action]:
        raise ToolError(f"illegal transition: {action} on an episode that is {episode['state']}")
    if action == "status":
        return _view(episode, store)
    if action == "abandon":
        _step(store, episode, "abandoned", episode["rounds"], episode["observed"], None, "abandon", {})
        return {"status": "abandoned", "retrieval_id": rid}
    if action == "search":
        return _search(ctx, store, episode, args)
    return _finish(ctx, store, episode, args)


def _start(ctx: ToolContext, store: AssertionStore, args: Mapping[str, Any]) -> dict[str, Any]:
    question = question_arg(args, MAX_QUESTION)
    question_date_arg(args)
    identity = args.get("identity")
    if not isinstance(identity, Mapping) or identity.get("intent_type") not in INTENTS:
        raise ToolError(f"identity must be an object with intent_type one of {', '.join(INTENTS)}")
    extra = sorted(set(identity) - IDENTITY_KEYS)
    if extra:
        raise ToolError(f"identity does not take {', '.join(extra)}")
    if any(not isinstance(v, (str, int, float)) or isinstance(v, bool) for v in identity.values()):
        raise ToolError("identity values must be strings or numbers")
    reqs = args.get("requirements")
    if not isinstance(reqs, list) or not 1 <= len(reqs) <= MAX_SLOTS:
        raise ToolError(f"requirements must list 1-{MAX_SLOTS} slots {{slot_id, description, minimum_refs}}")
    slots: list[dict[str, Any]] = []
    for r in reqs:
        if not isinstance(r, Mapping) or set(r) - {"slot_id", "description", "minimum_refs"}:
            raise ToolError("each requirement is {slot_id, description, minimum_refs} and nothing else")
        sid, desc, minimum = r.get("slot_id"), r.get("description", ""), r.get("minimum_refs", 1)
        if not isinstance(sid, str) or not sid.strip() or len(sid) > 64 or any(s["slot_id"] == sid for s in slots):
            raise ToolError("each slot_id must be a unique non-empty string of at most 64 characters")
        if not isinstance(desc, str) or len(desc) > 500:
            raise ToolError("a slot description must be a string of at most 500 characters")
        if isinstance(minimum, bool) or not isinstance(minimum, int) or not 1 <= minimum <= MAX_CANDIDATES:
            raise ToolError(f"minimum_refs must be an integer 1-{MAX_CANDIDATES}")
        slots.append({"slot_id": sid, "description": desc, "minimum_refs": minimum})
    session = current_session(ctx) or ""
    if store.live_episodes(session) >= MAX_LIVE_EPISODES:
        raise ToolError(f"{MAX_LIVE_EPISODES} episodes are open in this session; finish or abandon one first")
    rid = "ret_" + uuid.uuid4().hex[:20]
    store.open_episode(rid, session, question, dict(identity), slots, time.time())
    return {"status": "open", "retrieval_id": rid, "slots": slots, "limits": _limits(0, [])}


def _limits(rounds: int, observed: list[dict[str, Any]]) -> dict[str, Any]:
    chars = sum(len(o["quote"]) for o in observed)
    return {"rounds_used": rounds, "rounds_left": MAX_ROUNDS - rounds, "candidates": len(observed),
            "max_candidates": MAX_CANDIDATES, "context_chars": chars, "max_context_chars": MAX_CONTEXT_CHARS,
            "context_tokens": sum(o["tokens"] for o in observed), "max_context_tokens": MAX_CONTEXT_TOKENS}


def _step(store: AssertionStore, episode: dict[str, Any], state: str, rounds: int, observed: list[dict[str, Any]],
          view: dict[str, Any] | None, action: str, trace: dict[str, Any]) -> None:
    if not store.step_episode(episode["retrieval_id"], episode["state"], state=state, rounds=rounds,
                              observed=observed, view=view, action=action, trace=trace, now=time.time()):
        raise ToolError("the episode changed meanwhile (another call moved it); ask for its status")


def _search(ctx: ToolContext, store: AssertionStore, episode: dict[str, Any],
            args: Mapping[str, Any]) -> dict[str, Any]:
    if episode["rounds"] >= MAX_ROUNDS:
        raise ToolError(f"illegal transition: all {MAX_ROUNDS} search rounds are used; finish or abandon")
    slot = args.get("missing_slot")
    if not isinstance(slot, str) or slot not in {s["slot_id"] for s in episode["requirements"]}:
        raise ToolError("missing_slot must be one of the episode's slot ids")
    name = args.get("tool")
    if name not in SEARCH_TOOLS:
        raise ToolError(f"tool must be one of {', '.join(SEARCH_TOOLS)}")
    tool_args = args.get("tool_args") or {}
    if not isinstance(tool_args, Mapping) or len(json.dumps(tool_args, default=str)) > MAX_TOOL_ARGS:
        raise ToolError(f"tool_args must be an object of at most {MAX_TOOL_ARGS} characters of JSON")
    result = ctx.call(name, dict(tool_args))
    if "error" in result:  # the callee's refusal (an argument it does not take too) refuses this step: no round
        raise ToolError(f"{name} refused its arguments: {result['error']}")
    observed = list(episode["observed"])
    added, skipped = _observe(ctx, result, observed, str(slot))
    trace = {"tool": name, "slot": slot, "tool_args": dict(tool_args), "refs_added": [o["ref"] for o in added],
             "refs_skipped_for_limits": skipped, "tool_status": result.get("status")}
    rounds = episode["rounds"] + 1
    _step(store, episode, "open", rounds, observed, None, "search", trace)
    return {"status": "open", "retrieval_id": episode["retrieval_id"], "round": rounds, "tool": name,
            "observed": added, "refs_skipped_for_limits": skipped, "limits": _limits(rounds, observed),
            "tool_result_status": result.get("status") or ("error" if "error" in result else "ok"),
            "tool_note": result.get("note") or result.get("reason")}


def _observe(ctx: ToolContext, result: Any, observed: list[dict[str, Any]], slot: str) -> tuple[list[dict], int]:
    """Record the exact refs in ``result`` (each verified against its stored row) within the caps."""
    found: list[tuple[int, int | None, int | None]] = []
    stack = [result]
    while stack and len(found) < 200:
        value = stack.pop(0)
        if isinstance(value, dict):
            sid, a, b = value.get("store_id"), value.get("span_start"), value.get("span_end")
            if isinstance(sid, int) and not isinstance(sid, bool):
                spans = isinstance(a, int) and isinstance(b, int)
                found.append((sid, a if spans else None, b if spans else None))
            elif isinstance(value.get("ref"), str):
                try:
                    c = parse_claim(value["ref"])
                    found.append((c.store_id, c.span_start, c.span_end))
                except RefError:
                    pass
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    rows = {r.store_id: r for r in ctx.runtime.store.get_many(sorted({f[0] for f in found}), ctx.visible)} \
        if found else {}
    ignored = ctx.runtime.filters.ignored_by
    known = {o["ref"] for o in observed}
    added: list[dict[str, Any]] = []
    skipped = 0
    for sid, a, b in found:
        row = rows.get(sid)
        if row is None or ignored(row.session_id, row.platform):
            continue
        start = a if a is not None else 0
        end = b if b is not None else len(row.content)
        ref = make_ref(row, start, min(end, start + MAX_EVIDENCE_CHARS))
        if ref.shorthand in known or not ref.quote:
            continue
        entry = {**ref.to_dict(), "role": row.role, "slot": slot, "tokens": tokens.count(ref.quote)}
        limits = _limits(0, [*observed, entry])
        if (len(observed) >= MAX_CANDIDATES or limits["context_chars"] > MAX_CONTEXT_CHARS
                or limits["context_tokens"] > MAX_CONTEXT_TOKENS):
            skipped += 1
            continue
        observed.append(entry)
        known.add(ref.shorthand)
        added.append(entry)
    return added, skipped


def _finish(ctx: ToolContext, store: AssertionStore, episode: dict[str, Any],
            args: Mapping[str, Any]) -> dict[str, Any]:
    selected = args.get("selected_refs")
    if not isinstance(selected, list) or not 1 <= len(selected) <= MAX_CANDIDATES:
        raise ToolError(f"selected_refs must list 1-{MAX_CANDIDATES} refs observed in this episode's searches")
    by_ref = {o["ref"]: o for o in episode["observed"]}
    chosen: list[dict[str, Any]] = []
    for raw in selected:
        try:
            claim = parse_claim(raw)
        except RefError as exc:
            raise ToolError(f"selected_refs: {exc}") from None
        short = shorthand(claim.store_id, claim.span_start, claim.span_end)
        seen = by_ref.get(short)
        if seen is None or (claim.quote is not None and claim.quote != seen["quote"]):
            raise ToolError(f"{short} was not observed in this episode's searches; only observed refs are accepted")
        chosen.append(seen)
    slots = {s["slot_id"]: s for s in episode["requirements"]}
    resolved = args.get("resolved_slots") or []
    if not isinstance(resolved, list) or len(resolved) > MAX_SLOTS \
            or any(not isinstance(r, str) or r not in slots for r in resolved):
        raise ToolError("resolved_slots must list slot ids of this episode")
    coverage = {sid: sum(1 for c in chosen if c["slot"] == sid) for sid in slots}
    short_of = [sid for sid in resolved if coverage[sid] < slots[sid]["minimum_refs"]]
    comp = args.get("computation")
    computation = _compute(ctx, episode, comp, by_ref) if comp is not None else None
    view = {"question": episode["question"], "identity": episode["identity"],
            "selected": [{k: c[k] for k in ("ref", "store_id", "span_start", "span_end", "quote", "content_sha256",
                                            "session_id", "timestamp", "role", "slot")} for c in chosen],
            "resolved_slots": resolved, "unresolved_slots": [s for s in slots if s not in resolved],
            "slots_short_of_minimum": short_of, "slot_coverage": coverage, "computation": computation}
    _step(store, episode, "finished", episode["rounds"], episode["observed"], view, "finish",
          {"selected": [c["ref"] for c in chosen], "computed": computation is not None})
    return {"status": "finished", "retrieval_id": episode["retrieval_id"], "evidence_view": view,
            "note": "this is evidence, not an answer: write the answer from these quotes and cite the refs"}


def _compute(ctx: ToolContext, episode: dict[str, Any], comp: Any, by_ref: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(comp, Mapping) or set(comp) - {"operands", "candidate_answer", "operation"}:
        raise ToolError("computation is {operands, candidate_answer, operation}")
    operands = comp.get("operands")
    if not isinstance(operands, list) or not operands:
        raise ToolError("computation.operands must list the operands")
    for op in operands:
        if not isinstance(op, Mapping):
            raise ToolError("each operand is an object")
        if "assertion_id" in op:
            continue
        try:
            claim = parse_claim({k: op[k] for k in ("store_id", "span_start", "span_end", "ref") if k in op})
        except RefError as exc:
            raise ToolError(f"computation operand: {exc}") from None
        if shorthand(claim.store_id, claim.span_start, claim.span_end) not in by_ref:
            raise ToolError("every computation operand must cite a ref observed in this episode")
    given = {k: comp[k] for k in ("candidate_answer", "operation") if comp.get(k) is not None}
    result = ctx.call("trove_compute", {"question": episode["question"], "operands": operands, **given})
    if "error" in result:
        raise ToolError(str(result["error"]))
    return result


def _view(episode: dict[str, Any], store: AssertionStore) -> dict[str, Any]:
    return {"status": episode["state"], "retrieval_id": episode["retrieval_id"], "question": episode["question"],
            "identity": episode["identity"], "slots": episode["requirements"],
            "limits": _limits(episode["rounds"], episode["observed"]),
            "observed": [{k: o[k] for k in ("ref", "slot", "role", "timestamp")} for o in episode["observed"]],
            "evidence_view": episode["view"], "trace": store.events(episode["retrieval_id"])}
