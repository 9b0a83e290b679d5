"""Pure compaction policy: fresh tail, hard budget, leaf chunks, condensation groups, node selection.

Every function takes plain values (message dicts, token counts, node summaries) and
returns indices or frozen plans; nothing here reads the database or calls a model.
Tool-call groups (an assistant message with ``tool_calls`` and the tool results that
follow it) are never split by any boundary chosen here.
"""
from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import tokens

CountFn = Callable[[dict[str, Any]], int]


def is_group_start(messages: Sequence[dict[str, Any]], i: int) -> bool:
    """True when a boundary may sit before ``messages[i]`` (it is not a tool result)."""
    return i >= len(messages) or messages[i].get("role") != "tool"


def _back_to_group_start(messages: Sequence[dict[str, Any]], i: int) -> int:
    while i > 0 and not is_group_start(messages, i):
        i -= 1
    return i


def forward_to_group_start(messages: Sequence[dict[str, Any]], i: int) -> int:
    while i < len(messages) and not is_group_start(messages, i):
        i += 1
    return i


def select_fresh_tail(messages: Sequence[dict[str, Any]], count: int, max_tokens: int,
                      count_tokens: CountFn) -> int:
    """Start index of the protected tail.

    At most ``count`` messages and (when ``max_tokens`` > 0) at most ``max_tokens``;
    the newest message is always kept, and a boundary inside a tool group moves back to
    the group's assistant message even when that exceeds a bound.
    """
    n = len(messages)
    if n == 0:
        return 0
    start = max(0, n - max(1, count))
    if max_tokens > 0:
        total, i = 0, n
        while i > start:
            t = count_tokens(messages[i - 1])
            if total + t > max_tokens and i < n:
                break
            total += t
            i -= 1
        start = i
    return _back_to_group_start(messages, start)


def enforce_budget(messages: Sequence[dict[str, Any]], start: int, budget: int, count_tokens: CountFn) -> int:
    """Move a tail start forward until the tail fits ``budget`` (a hard ceiling).

    Unlike the configured bounds this never moves back: when the protected tail alone is
    too big for the prompt, older groups leave the tail (they will be compacted). The
    newest group is always kept even if it alone exceeds the budget.
    """
    n = len(messages)
    sizes = [count_tokens(m) for m in messages]
    total = sum(sizes[start:])
    last_group = _back_to_group_start(messages, n - 1) if n else 0
    while total > budget and start < last_group:
        nxt = min(forward_to_group_start(messages, start + 1), last_group)
        total -= sum(sizes[start:nxt])
        start = nxt
    return start


@dataclass(frozen=True)
class Chunk:
    start: int  # index into the candidate list
    end: int    # exclusive
    tokens: int


def taken_back(live_ids: Sequence[int], stored_ids: Sequence[int]) -> frozenset[int]:
    """Stored ids the host took back (``/undo``, ``/retry``): rows stored between two messages
    the list shows side by side. A row the list still shows something in place of (a rewritten
    message, id 0 there) or one older than the list is not taken back. ``stored_ids`` ascend."""
    out: set[int] = set()
    for before, after in zip(live_ids, live_ids[1:], strict=False):
        if before and after > before:
            out.update(stored_ids[bisect.bisect_right(stored_ids, before):bisect.bisect_left(stored_ids, after)])
    return frozenset(out)


def host_keeps_tail(live_ids: Sequence[int], stored_ids: Sequence[int]) -> bool:
    """True when the store goes on past the list the host passed: more rows are stored after its
    newest stored message than the list shows after it (a message shown rewritten, id 0, stands in
    for its row). ``/compress here N`` hands over the conversation only up to the user's boundary
    and keeps the newest N exchanges itself, verbatim, after what comes back: on that explicit request
    the passed prefix is compacted whole, as a tail of trove's own inside it would keep up to
    TROVE_FRESH_TAIL_COUNT messages more (a short chat not compacted at all). ``stored_ids`` ascend."""
    shown = [i for i, sid in enumerate(live_ids) if sid]
    if not shown:
        return False
    newest = live_ids[shown[-1]]
    after_in_store = len(stored_ids) - bisect.bisect_right(stored_ids, newest)
    return after_in_store > len(live_ids) - 1 - shown[-1]


def pulled_back(live_ids: Sequence[int], stored: Sequence[tuple[int, str]]) -> list[int]:
    """``live_ids`` with each stored message moved to the earliest row of the same identity that keeps
    store order (``stored``: ``(store_id, identity)`` ascending). Pairing from the end gives a repeated
    message (a reply "Done." in every turn) the newest row: for a prefix the host passes, that is a row
    of the tail it keeps, and the prefix would read as the whole conversation. Same messages, same order."""
    where = {sid: pos for pos, (sid, _) in enumerate(stored)}
    rows: dict[str, list[int]] = {}
    for pos, (_, ident) in enumerate(stored):
        rows.setdefault(ident, []).append(pos)
    out, floor = list(live_ids), -1
    for i, sid in enumerate(live_ids):
        if not sid or sid not in where:
            continue
        same = rows[stored[where[sid]][1]]
        pos = same[bisect.bisect_right(same, floor)]  # never past where[sid]: that row itself qualifies
        out[i], floor = stored[pos][0], pos
    return out


def keeps_tail_after(live_ids: Sequence[int], stored: Sequence[tuple[int, str]]) -> list[int] | None:
    """The store ids a forced compaction of a prefix maps the list to when the host keeps a tail after
    it (``host_keeps_tail``, repeated messages placed earliest by ``pulled_back``); None otherwise."""
    stored_ids = [sid for sid, _ in stored]
    if host_keeps_tail(live_ids, stored_ids):
        return list(live_ids)
    early = pulled_back(live_ids, stored)
    return early if host_keeps_tail(early, stored_ids) else None


MIN_LEAF_CHUNK_TOKENS = 500  # the knob's floor: a chunk smaller than this says too little to summarise


def summary_window(chat_window: int, summary_window: int) -> int:
    """The window a summary request must fit: the smaller of the chat model's and the summary
    model's, each when known (> 0); 0 when neither is. A summary model with a larger window than
    the chat model's changes nothing: chunks are cut from the chat model's backlog anyway."""
    known = [w for w in (chat_window, summary_window) if w > 0]
    return min(known) if known else 0


def summary_input_cap(window: int) -> int:
    """The most one summary request's record (a leaf chunk, a condensation group) may hold in a known
    ``window``: half of it (the request also carries its instructions and asks for an answer), never
    under MIN_LEAF_CHUNK_TOKENS; 0 (no cap) when the window is unknown."""
    return max(MIN_LEAF_CHUNK_TOKENS, window // 2) if window > 0 else 0


def chunk_target(backlog_tokens: int, base: int, maximum: int, dynamic: bool, window: int = 0) -> int:
    """Leaf chunk size: the base, or (dynamic) doubled while the backlog is over twice it; never
    more than ``summary_input_cap`` of a known ``window`` (a model that small, a fallback for one,
    would refuse a whole default chunk)."""
    size = base
    while dynamic and backlog_tokens > 2 * size and size * 2 <= maximum:
        size *= 2
    size = min(max(size, base), max(maximum, base))
    return min(size, summary_input_cap(window)) if window > 0 else size


SUMMARY_INSTRUCTION_TOKENS = 200  # the summary prompt's own words around the record (about 155 now)


MIN_SUMMARY_BUDGET = 32  # the summarizer's smallest budget; it lets a model answer twice its budget
LEAF_BUDGET_FLOOR = 256  # the smallest budget a leaf or a merge asks for (compactor.leaf_budget, condense_budget)


def smallest_summary_window(own_instruction_tokens: int = 0) -> int:
    """The smallest window in which a summary request is worth a model call: a record of half the
    window (``summary_input_cap``), the instructions (with ``own_instruction_tokens`` of the
    operator's) and the answer the smallest leaf budget is allowed (twice LEAF_BUDGET_FLOOR). Below
    it every answer is squeezed under that budget, and a record that cannot fit is cut without one."""
    return 2 * (SUMMARY_INSTRUCTION_TOKENS + max(0, own_instruction_tokens) + 2 * LEAF_BUDGET_FLOOR)


def budget_within(budget: int, request_tokens: int, window: int) -> int:
    """A summary's budget, lowered so that its request fits a known ``window``: ``request_tokens``
    (the record, the added context and the instructions) plus the answer allowed, twice the budget.
    Never under MIN_SUMMARY_BUDGET (a request that cannot fit then fails, and the deterministic level answers)."""
    if window <= 0:
        return budget
    return max(MIN_SUMMARY_BUDGET, min(budget, (window - request_tokens) // 2))


def request_fits(request_tokens: int, window: int) -> bool:
    """Whether a summary request of ``request_tokens`` leaves a known ``window`` room for the
    smallest answer (twice MIN_SUMMARY_BUDGET)."""
    return window <= 0 or request_tokens + 2 * MIN_SUMMARY_BUDGET <= window


def plan_leaf_chunks(messages: Sequence[dict[str, Any]], sizes: Sequence[int], target: int) -> list[Chunk]:
    """Split candidates, oldest first, into chunks of about ``target`` tokens at group boundaries."""
    chunks: list[Chunk] = []
    n = len(messages)
    i = 0
    while i < n:
        j, total = i, 0
        while j < n:
            k = forward_to_group_start(messages, j + 1)  # the whole group starting at j
            group = sum(sizes[j:k])
            if total and total + group > target:
                break
            total += group
            j = k
        chunks.append(Chunk(i, j, total))
        i = j
    return chunks


@dataclass(frozen=True)
class NodeInfo:
    node_id: int
    depth: int
    tokens: int
    order: float  # chronological key (earliest_at)


@dataclass(frozen=True)
class CondensationGroup:
    depth: int  # depth of the children; the new node has depth + 1
    node_ids: tuple[int, ...]
    tokens: int


FRONTIER_BOUND = 48  # frontier nodes past which condensation may go below the depth cap


def plan_condensation(frontier: Sequence[NodeInfo], fanin: int, max_depth: int,
                      allow_partial: bool = False, max_tokens: int = 0) -> CondensationGroup | None:
    """The next group to condense: the oldest ``fanin`` frontier nodes of the lowest full depth.

    ``max_depth`` -1 is unlimited, 0 disables condensation. ``allow_partial`` (pressure or
    sweep) also accepts a group of two or more at the lowest depth that has them. A frontier
    of more than ``FRONTIER_BOUND`` nodes may condense full groups past ``max_depth`` (only
    then), so its size stays bounded at any history length. ``max_tokens`` (> 0) caps the
    group: only the oldest nodes that fit it together (never fewer than two) are taken, and the
    rest stay on the frontier for a later condensation.
    """
    if max_depth == 0:
        return None
    by_depth: dict[int, list[NodeInfo]] = {}
    for node in frontier:
        by_depth.setdefault(node.depth, []).append(node)
    over = len(frontier) > FRONTIER_BOUND
    for depth in sorted(by_depth):
        capped = max_depth > 0 and depth + 1 > max_depth
        if capped and not over:
            continue
        nodes = sorted(by_depth[depth], key=lambda n: (n.order, n.node_id))
        if len(nodes) >= fanin or (allow_partial and not capped and len(nodes) >= 2):
            group = _fitting(nodes[:fanin], max_tokens)
            return CondensationGroup(depth, tuple(n.node_id for n in group), sum(n.tokens for n in group))
    return None


def _fitting(nodes: list[NodeInfo], max_tokens: int) -> list[NodeInfo]:
    """The oldest of ``nodes`` whose tokens fit ``max_tokens`` together (0: all), never fewer than two."""
    if max_tokens <= 0:
        return nodes
    used = 0
    for i, node in enumerate(nodes):
        used += node.tokens
        if used > max_tokens and i >= 2:
            return nodes[:i]
    return nodes


def select_summary_nodes(frontier: Sequence[NodeInfo], budget: int) -> tuple[list[int], list[int]]:
    """Frontier nodes that fit ``budget`` tokens, newest kept first; returns (kept, omitted).

    The kept ids come back in display order: highest depth first, then chronological.
    """
    newest_first = sorted(frontier, key=lambda n: (n.order, n.node_id), reverse=True)
    kept, omitted, used = [], [], 0
    for node in newest_first:
        if used + node.tokens <= budget:
            kept.append(node)
            used += node.tokens
        else:
            omitted.append(node.node_id)
    kept.sort(key=lambda n: (-n.depth, n.order, n.node_id))
    return [n.node_id for n in kept], omitted


def drop_orphan_tool_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Remove tool results whose call is not in an earlier assistant message of the list."""
    seen: set[str] = set()
    out = []
    for m in messages:
        if m.get("role") == "assistant":
            for call in m.get("tool_calls") or []:
                if isinstance(call, dict) and call.get("id"):
                    seen.add(str(call["id"]))
        if m.get("role") == "tool" and str(m.get("tool_call_id") or "") not in seen:
            continue
        out.append(m)
    return out


def trim_head_tail(messages: list[dict[str, Any]], budget: int,
                   count_tokens: CountFn = tokens.count_message) -> list[dict[str, Any]]:
    """Last-resort bound for sessions trove does not own: first user turn plus a fitting tail."""
    if sum(count_tokens(m) for m in messages) <= budget or len(messages) < 3:
        return messages
    head = [dict(messages[0])] if messages and messages[0].get("role") == "user" else []
    start = select_fresh_tail(messages, len(messages), max(1, budget - sum(count_tokens(m) for m in head)),
                              count_tokens)
    start = enforce_budget(messages, max(start, len(head)), budget, count_tokens)
    note = {"role": "user", "content": f"[{start - len(head)} earlier messages trimmed to fit the context window]"}
    tail = [{k: v for k, v in m.items() if k != "_db_persisted"} for m in messages[start:]]
    return drop_orphan_tool_results(head + [note] + tail)
