"""Assembly: how summary nodes enter the prompt, for the compactor and the pre-LLM hook alike.

It picks the frontier nodes that fit a budget, renders them as one labelled block (or one
user message) and rebuilds the live message list around that block. Pure: it takes node
rows and message dicts and returns new ones; reading the frontier is the caller's job.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from .. import tokens
from ..dag import NodeRow
from ..ingest import SUMMARY_FOOTER, SUMMARY_MARKER, is_synthetic, merged_after_summary, opens_summary, unmerged
from . import policy

SUMMARY_HEADER = (SUMMARY_MARKER + " Nothing is lost: exact messages are "
                  "recoverable with trove_grep, trove_describe and trove_expand(node_id=N).")
NODE_LABEL_TOKENS = 30       # the "[dN node K | from to UTC]" line above each node
ASSEMBLY_SLACK_TOKENS = 120  # header, footer and the omitted-nodes note
SUMMARY_FLOOR_TOKENS = 1500  # summary room kept when the newest messages alone fill the target


def node_info(node: NodeRow) -> policy.NodeInfo:
    """What the pure planners need of a node: id, depth, rendered size, age."""
    return policy.NodeInfo(node.node_id, node.depth, node.token_count + NODE_LABEL_TOKENS,
                           node.earliest_at or node.created_at)


def select_nodes(frontier: Sequence[NodeRow], budget: int) -> tuple[list[NodeRow], list[int]]:
    """The frontier nodes that fit ``budget`` in display order, and the ids left out."""
    kept_ids, omitted = policy.select_summary_nodes([node_info(n) for n in frontier], budget)
    by_id = {n.node_id: n for n in frontier}
    return [by_id[i] for i in kept_ids], omitted


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(ts)) if ts else "?"


def render_summary_text(nodes: Sequence[NodeRow], omitted: Sequence[int] = (), tools: bool = True) -> str:
    """The visible summary nodes as one block of text, each labelled with its node id; ``tools`` False (an
    agent given no trove_* tools: a delegate_task child, an editor over ACP) names none of them."""
    parts = [SUMMARY_HEADER if tools else SUMMARY_MARKER]
    if omitted:
        parts.append(f"({len(omitted)} older summary nodes are not shown to save space"
                     + ("; trove_describe lists them.)" if tools else ".)"))
    parts += [f"[d{n.depth} node {n.node_id} | {_when(n.earliest_at)} to {_when(n.latest_at)} UTC]\n{n.summary}"
              for n in nodes]
    return "\n\n".join([*parts, SUMMARY_FOOTER])


def render_summary_message(nodes: Sequence[NodeRow], omitted: Sequence[int] = (), tools: bool = True,
                           ) -> dict[str, Any]:
    """One user-role message holding the visible summary nodes."""
    return {"role": "user", "content": render_summary_text(nodes, omitted, tools), "_trove_summary": True,
            "_compressed_summary": True}


def carries_injected_summary(message: dict[str, Any]) -> bool:
    """True when the hook's summary block rides in this message's ``api_content``: the host writes that as
    the message's own content, then the injected text; only the latter counts (a user may quote the marker)."""
    api, own = str(message.get("api_content") or ""), message.get("content")
    injected = api[len(own):] if isinstance(own, str) and api.startswith(own) else api
    return SUMMARY_MARKER in injected  # the marker opens every header


def shows_summary(message: dict[str, Any]) -> bool:
    """True when the message already puts a trove summary in front of the model."""
    return opens_summary(message.get("content")) or carries_injected_summary(message)


def split_host_merge(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The transcript with each user message Hermes joined onto a summary message given back.

    Hermes repairs two consecutive user turns by appending the second to the first after a blank
    line, in its own transcript; after a compaction whose tail starts with a user message that
    puts the user's message inside the summary message, where it would read as summary text.
    """
    out = []
    for m in messages:
        rest = merged_after_summary(m) if isinstance(m, dict) else None
        if rest is not None and rest.strip():
            summary = m["content"][:len(m["content"]) - len(rest)].rstrip("\n")
            out += [{**m, "content": summary}, unmerged(m)]
        else:
            out.append(m)
    return out


def turn_request(kept: Sequence[dict[str, Any]], messages: Sequence[dict[str, Any]],
                 budget: int) -> dict[str, Any] | None:
    """The user message the turn answers, to follow the summary again, or None.

    A compaction between a turn's tool calls can fold the turn's own request into a summary when
    the budget leaves only the newest tool group; when ``kept`` (the raw messages the prompt keeps)
    holds no user message, the newest one of ``messages`` comes back, unless it alone is over
    ``budget`` (its summary carries it). ``assemble`` counts it with the kept messages.
    """
    if any(m.get("role") == "user" and not is_synthetic(m) for m in kept):
        return None
    newest = next((m for m in reversed(messages) if m.get("role") == "user" and not is_synthetic(m)), None)
    if newest is None or tokens.count_message(newest) > budget:
        return None
    return unsaved(newest)


def unsaved(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` without the host's ``_db_persisted`` flag: a compacted list is saved anew (HOST.md)."""
    return {k: v for k, v in message.items() if k != "_db_persisted"}


def assemble(frontier: Sequence[NodeRow], raw_keep: list[dict[str, Any]], tail: list[dict[str, Any]],
             target: int, room: int = 0, request: dict[str, Any] | None = None, tools: bool = True,
             ) -> tuple[list[dict[str, Any]], list[int]]:
    """The prompt after compaction: one summary message, the turn's ``request`` (``turn_request``),
    then the kept raw messages.

    The nodes get what the kept messages leave of ``target``; when long newest messages leave
    less than ``SUMMARY_FLOOR_TOKENS``, up to that much of ``room`` (the messages' share under
    the trigger), so one pasted message does not hide every summary while the window has space.
    Returns the new message dicts and the ids of frontier nodes left out for space.
    """
    if request is not None:
        raw_keep = [request, *raw_keep]
    live_tokens = tokens.count_messages(raw_keep) + tokens.count_messages(tail)
    floor = min(SUMMARY_FLOOR_TOKENS, room - live_tokens - ASSEMBLY_SLACK_TOKENS)
    nodes, omitted = select_nodes(frontier, max(0, target - live_tokens - ASSEMBLY_SLACK_TOKENS, floor))
    out = [render_summary_message(nodes, omitted, tools)] if nodes or omitted else []
    for m in raw_keep + tail:
        kept = unsaved(m)
        if carries_injected_summary(kept):
            kept.pop("api_content")  # the summary message now replaces the injected block
        out.append(kept)
    return policy.drop_orphan_tool_results(out), omitted
