"""The pre-answer context within the host's cap on hook text.

Hermes cuts any ``pre_llm_call`` context longer than ``hooks.output_spill.max_chars`` (its
config.yaml; 10,000 characters by default, no cap with ``enabled: false``) to a head and tail
preview and writes the rest to a spill file, on every turn. The hook fills a ``ContextBudget``
part by part, most important first (the recall policy, then the summary context, then the
opt-in subsystems' evidence): a part that does not fit whole is left out, except the summary,
which sheds its oldest nodes (the omitted-nodes note says so) until it fits, and then the last
lines of the one node left (a closing line says how many, and where to read them). Nothing is cut
inside a line, so the model never reads a broken one, and the host never spills.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .compaction import assembly
from .models import host_config

if TYPE_CHECKING:
    from .dag import NodeRow

DEFAULT_CAP = 10_000  # the host's default (tools/hook_output_spill.py DEFAULT_MAX_CHARS)
SEPARATOR = "\n\n"  # how the hook joins its parts


def spill_cap(config: dict[str, Any] | None) -> int | None:
    """The longest hook context the host passes whole, read from its config as the host reads
    ``hooks.output_spill``: ``max_chars`` when a positive integer, else the default; None when
    ``enabled`` is false (the host then spills nothing)."""
    hooks = config.get("hooks") if isinstance(config, dict) else None
    section = hooks.get("output_spill") if isinstance(hooks, dict) else None
    section = section if isinstance(section, dict) else {}
    enabled = section.get("enabled", True)
    if enabled is not None and not bool(enabled):
        return None
    try:
        cap = int(section.get("max_chars"))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return DEFAULT_CAP
    return cap if cap > 0 else DEFAULT_CAP


def host_spill_cap() -> int | None:
    """``spill_cap`` of the host's current config.yaml (the host caches its read on the file's mtime and
    size, so a turn costs a few ``stat`` calls); the default outside Hermes or for a file it cannot read."""
    return spill_cap(host_config())


class ContextBudget:
    """Characters left for the hook's parts, joined by ``SEPARATOR``; ``cap`` None: no limit."""

    def __init__(self, cap: int | None) -> None:
        self.left = None if cap is None else cap + len(SEPARATOR)  # n parts need n-1 separators

    def room(self) -> int | None:
        """The longest next part that still fits (None: any)."""
        return None if self.left is None else max(0, self.left - len(SEPARATOR))

    def take(self, text: str) -> bool:
        """Count ``text`` in when it fits whole; whether it did."""
        if self.left is None:
            return True
        if len(text) + len(SEPARATOR) > self.left:
            return False
        self.left -= len(text) + len(SEPARATOR)
        return True


def fitted_summary(nodes: Sequence[NodeRow], omitted: Sequence[int], tools: bool, max_chars: int | None) -> str:
    """The summary block of ``nodes`` within ``max_chars``: the oldest nodes go first, each named in the
    omitted-nodes note; when the newest alone is still too long, its first whole lines, with a line saying
    how many follow (and, given the tools, where to read them); "" when not even one line fits."""
    kept, left_out = list(nodes), list(omitted)
    while kept:
        text = assembly.render_summary_text(kept, left_out, tools)
        if max_chars is None or len(text) <= max_chars:
            return text
        if len(kept) == 1:
            return head_of_node(kept[0], left_out, tools, max_chars)
        oldest = min(kept, key=lambda n: (n.latest_at or 0.0, n.node_id))
        kept.remove(oldest)
        left_out.append(oldest.node_id)
    return ""


def head_of_node(node: NodeRow, omitted: Sequence[int], tools: bool, max_chars: int) -> str:
    """The block of ``node`` alone with as many of its first lines as fit ``max_chars``, whole ("" if none)."""
    lines = node.summary.splitlines()
    for n in range(len(lines) - 1, 0, -1):
        more = len(lines) - n
        note = (f"[... {more} more line{'s' if more > 1 else ''} of this node"
                + (f": trove_expand(node_id={node.node_id}) shows them]" if tools else " not shown]"))
        text = assembly.render_summary_text([replace(node, summary="\n".join([*lines[:n], note]))], omitted, tools)
        if len(text) <= max_chars:
            return text
    return ""
