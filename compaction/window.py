"""The window plan: when to compact and what a compaction aims at, given the host's fixed overhead.

Every request carries a fixed part the engine does not control: the host's system prompt and
tool schemas (together the overhead). In a small window that part can eat most of the trigger
``TROVE_CONTEXT_THRESHOLD`` sets, leaving the conversation too little room for its fresh tail
and any summary. Two rules keep the conversation a workable share:

* the trigger is raised, when needed, so that the conversation gets at least
  ``CONVERSATION_SHARE`` of the window above the overhead, but a raise never takes the
  trigger past ``TRIGGER_CEILING`` of the window (room for the reply and one turn's growth),
  and an overhead already past that ceiling raises nothing;
* a compaction aims the conversation at ``TARGET_RATIO`` of the trigger minus the overhead,
  and never at less than half of the conversation's share at the trigger, so each compaction
  frees room for several turns instead of running again on the next one.

When the overhead is small against the window both rules are inactive and the trigger is
exactly ``TROVE_CONTEXT_THRESHOLD`` of the window. Pure: numbers in, numbers out.
"""
from __future__ import annotations

from collections.abc import Sequence

CONVERSATION_SHARE = 0.2  # the conversation's least share of the window at the trigger
TRIGGER_CEILING = 0.6     # a raise never takes the trigger past this share of the window
TARGET_RATIO = 0.7        # after compaction the prompt aims at this share of the trigger
MIN_TARGET = 512          # the smallest conversation a compaction aims at, whatever the overhead


def plan_trigger(window: int, ratio: float, overhead: int, caps: Sequence[int] = ()) -> int:
    """The compaction trigger for ``window`` tokens with ``overhead`` tokens fixed per request.

    ``ratio`` is TROVE_CONTEXT_THRESHOLD; ``caps`` are the operator's hard prompt caps
    (TROVE_MAX_ASSEMBLY_TOKENS, the TROVE_RESERVE_TOKENS_FLOOR cap), which always win.
    An overhead of 0 means unknown, and one at or past the ceiling leaves nothing to make room
    with: the trigger is then the ratio's alone.
    """
    window, overhead = max(0, int(window)), max(0, int(overhead))
    base = int(window * float(ratio))
    needed, ceiling = overhead + int(window * CONVERSATION_SHARE), int(window * TRIGGER_CEILING)
    # An overhead at or past the ceiling leaves no room a raise could give: the base stays.
    trigger = max(base, min(needed, ceiling)) if 0 < overhead < ceiling else base
    return max(0, min([trigger, *[int(c) for c in caps if c]]))


def plan_target(trigger: int, overhead: int) -> int:
    """The conversation size (messages only) one compaction aims at under ``trigger``."""
    trigger, overhead = max(0, int(trigger)), max(0, int(overhead))
    return max(MIN_TARGET, int(trigger * TARGET_RATIO) - overhead, (trigger - overhead) // 2)


def measure_overhead(prompt_tokens: int, message_counts: Sequence[int], window: int) -> int:
    """The host's fixed overhead in one request: its prompt count minus the messages' tokens.

    ``message_counts`` are the messages' size by every counter at hand (trove's, the host's
    rough one); the largest is taken, so a counter that undercounts never inflates the
    overhead. Clamped to the window.
    """
    messages = max([0, *[int(c) for c in message_counts]])
    return max(0, min(int(prompt_tokens) - messages, max(0, int(window))))
