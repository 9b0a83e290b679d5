"""Summaries: depth-aware prompts, the escalation ladder, model routes and circuit breakers.

``Summarizer.summarize(text, depth, budget)`` tries the normal prompt, then aggressive
bullets, on each configured route (summary model, then fallbacks), and finally a
deterministic truncation that needs no model. Each level is accepted only if it is
smaller than its input, so compaction always converges, with or without a host.
The breaker state is per process and shared by every engine copy.
"""
from __future__ import annotations

import functools
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .. import tokens
from ..models import Complete, clean_output, host_task_window
from .policy import (
    LEAF_BUDGET_FLOOR,
    MIN_SUMMARY_BUDGET,
    SUMMARY_INSTRUCTION_TOKENS,
    budget_within,
    request_fits,
    smallest_summary_window,
    summary_input_cap,
    summary_window,
)

if TYPE_CHECKING:
    from ..config import TroveConfig

DEPTH_GUIDANCE = {
    0: ("Keep every decision and its reason, constraints, facts the user stated, names, identifiers, "
        "file paths, commands and their outcomes, error messages, numbers, and open tasks."),
    1: ("Distil the arc: what changed, what was decided and why, the current state, what remains open. "
        "Keep identifiers, paths and values that later work depends on; drop turn-by-turn detail."),
    2: ("Write a durable record: decisions still in force, finished milestones with dates, standing facts "
        "about the user and the project, unresolved work. Drop process detail."),
}
DATES = ("Messages are dated (UTC). Write every date as an absolute calendar date, e.g. 'on 7 May 2023', "
         "resolving words like 'yesterday' or 'last week' against the date of the message that used them.")
MIN_MODEL_INPUT_TOKENS = 300  # smaller inputs are shortened deterministically; a model call cannot pay off
TRUNCATION_MARKER = "\n[... deterministic truncation; exact text available through trove_expand ...]\n"


@dataclass(frozen=True)
class SummaryResult:
    text: str
    level: str  # normal | aggressive | deterministic
    model: str
    tokens: int
    calls: int
    input_tokens: int
    errors: tuple[str, ...] = ()

    @property
    def failed_over(self) -> bool:
        """A model was asked and failed (or its route's breaker was open), so a weaker level stands in.
        A source too small for a model call, or a spent call budget, is shortened by design instead."""
        return self.level != "normal" and bool(self.errors)


class _Breakers:
    """Per-route consecutive-failure counters, shared by all engine copies in a process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fails: dict[str, int] = {}
        self._open_until: dict[str, float] = {}

    def is_open(self, route: str, now: float) -> bool:
        with self._lock:
            return self._open_until.get(route, 0.0) > now

    def record(self, route: str, ok: bool, threshold: int, cooldown: float, now: float) -> None:
        with self._lock:
            if ok:
                self._fails.pop(route, None)
                self._open_until.pop(route, None)
                return
            n = self._fails.get(route, 0) + 1
            self._fails[route] = n
            if n >= threshold:
                self._open_until[route] = now + cooldown
                self._fails[route] = 0

    def reset(self) -> None:
        with self._lock:
            self._fails.clear()
            self._open_until.clear()


BREAKERS = _Breakers()


def build_prompt(text: str, depth: int, budget: int, *, aggressive: bool = False, focus: str = "",
                 custom: str = "", task: str = "") -> str:
    """One user-message prompt for a summary of ``text`` at ``depth``.

    ``task`` replaces the normal level's opening (rollups describe a period); ``{budget}`` in
    it becomes the token budget.
    """
    if aggressive:
        head = (f"Compress the conversation record below into terse bullet points, at most {budget} tokens. "
                "Keep only decisions, facts, identifiers, file paths, commands, errors and the current state "
                "of open work. No preamble.")
    elif task:
        head = task.replace("{budget}", str(budget))
    else:
        guidance = DEPTH_GUIDANCE[min(depth, 2)]
        kind = "conversation segment" if depth == 0 else f"set of depth-{depth - 1} summaries"
        head = (f"Summarise this {kind} so an assistant can continue the work later without the original. "
                f"{guidance} Drop repetition and filler. Aim for about {budget} tokens. End with one line "
                "'Expand for details about: <topics covered>'.")
    parts = [head, DATES]
    if focus:
        parts.append(f"Give most of the budget to what concerns: {focus.strip()[:300]}")
    if custom:
        parts.append(custom.strip())
    parts.append("<record>\n" + text + "\n</record>")
    return "\n\n".join(parts)


def truncate_deterministic(text: str, max_tokens: int) -> str:
    """Head and tail of ``text`` around a marker, shrunk until it fits ``max_tokens``.

    A marker ``text`` already holds (a condensation of truncated leaves) is kept whole or cut
    whole, never split."""
    if tokens.count(text) <= max_tokens:
        return text
    core = TRUNCATION_MARKER.strip()
    spans = [(m.start(), m.end()) for m in re.finditer(re.escape(core), text)]
    lo, hi = 0, len(text)
    best = core
    while lo <= hi:  # binary search on kept characters
        mid = (lo + hi) // 2
        cut, start = mid // 2 + mid % 2, len(text) - mid // 2 if mid // 2 else len(text)
        cut = next((a for a, b in spans if a < cut < b), cut)
        start = next((b for a, b in spans if a < start < b), start)
        head, tail = text[:cut], text[start:]
        cand = head + TRUNCATION_MARKER + tail
        if tokens.count(cand) <= max_tokens:
            best, lo = cand, mid + 1
        else:
            hi = mid - 1
    return best


CUT_NOTE_OPENING = "[Read in part:"  # how a leaf's read-in-part line (``cut_note``) begins


def expand_hint(summary: str) -> str:
    """The topics after a summary's last 'Expand for details about:', up to a read-in-part line (a
    merge that keeps a leaf's tail, such as a deterministic one, carries that line after them)."""
    idx = summary.rfind("Expand for details about:")
    if idx < 0:
        return ""
    return summary[idx + len("Expand for details about:"):].split(CUT_NOTE_OPENING, 1)[0].strip()[:300]


class Summarizer:
    """Runs the escalation ladder over the configured routes."""

    def __init__(self, config: TroveConfig, complete: Complete | None, clock: Callable[[], float] = time.time,
                 host_window: Callable[[], int] | None = None):
        self.config = config
        self.complete = complete
        self.clock = clock
        # the host's setting in this runtime's profile home, whichever thread asks
        self.host_window = host_window or functools.partial(host_task_window, home=config.hermes_home)

    def window(self, chat_window: int) -> int:
        """The window every summary request must fit (``policy.summary_window``): the chat model's,
        or the summary model's when it is known to be smaller. That one is TROVE_SUMMARY_CONTEXT_LENGTH,
        else, when summaries take the host's auxiliary route (no TROVE_SUMMARY_MODEL), the host's
        ``auxiliary.compression.context_length``."""
        own = int(self.config.summary_context_length or 0)
        if not own and not self.config.summary_model:
            own = self.host_window()
        return summary_window(chat_window, own)

    @staticmethod
    def record_cap(window: int) -> int:
        """The most tokens one summary record may hold in ``window`` (``policy.summary_input_cap``; 0 = no cap)."""
        return summary_input_cap(window)

    def budget_in(self, text: str, budget: int, window: int, task: str = "") -> int | None:
        """``budget`` lowered so the request summarising ``text`` (with ``task``, the custom instructions
        and the prompt's own words) and its answer fit ``window``; None when not even the smallest
        answer would (the record is then cut without asking)."""
        asked = tokens.count(text) + tokens.count(task + self.config.custom_instructions) + SUMMARY_INSTRUCTION_TOKENS
        return budget_within(budget, asked, window) if request_fits(asked, window) else None

    def routes(self) -> list[str]:
        return list(dict.fromkeys([self.config.summary_model, *self.config.summary_fallback_models]))

    def summarize(self, text: str, depth: int, budget: int, focus: str = "", extra: str = "", *,
                  allow_model: bool = True, task: str = "") -> SummaryResult:
        """Summarise ``text``; ``extra`` is added context (e.g. memory-provider notes).

        ``allow_model=False`` goes straight to the deterministic level (a spent call budget);
        ``task`` is the normal level's own opening (see ``build_prompt``).
        """
        source_tokens = tokens.count(text)
        budget = max(MIN_SUMMARY_BUDGET, min(budget, max(MIN_SUMMARY_BUDGET, source_tokens - 1)))
        errors: list[str] = []
        calls = input_tokens = 0
        cfg = self.config
        if allow_model and self.complete is not None and source_tokens >= MIN_MODEL_INPUT_TOKENS:
            aggressive_budget = max(MIN_SUMMARY_BUDGET, int(budget * cfg.l2_budget_ratio))
            for level, aggressive, level_budget in (("normal", False, budget), ("aggressive", True, aggressive_budget)):
                custom = "\n\n".join(p for p in (cfg.custom_instructions, extra) if p)
                prompt = build_prompt(text, depth, level_budget, aggressive=aggressive, focus=focus, custom=custom,
                                      task=task)
                for route in self.routes():
                    now = self.clock()
                    if BREAKERS.is_open(route, now):
                        errors.append(f"{route or 'auxiliary'}: circuit open")
                        continue
                    calls += 1
                    input_tokens += tokens.count(prompt)
                    try:
                        raw = self.complete([{"role": "user", "content": prompt}], route,
                                            cfg.summary_timeout_ms / 1000.0, level_budget * 2)
                        out = clean_output(raw)
                        if out is None:
                            raise ValueError("empty or reasoning-only output")
                        n = tokens.count(out)
                        if n >= source_tokens:
                            raise ValueError(f"summary not smaller than its input ({n} >= {source_tokens})")
                    except Exception as exc:  # any model failure escalates
                        errors.append(f"{route or 'auxiliary'}/{level}: {type(exc).__name__}: {str(exc)[:200]}")
                        BREAKERS.record(route, False, cfg.summary_circuit_breaker_failure_threshold,
                                        cfg.summary_circuit_breaker_cooldown_seconds, self.clock())
                        continue
                    BREAKERS.record(route, True, 1, 0, self.clock())
                    return SummaryResult(out, level, route or "auxiliary", n, calls, input_tokens, tuple(errors))
        limit = max(16, min(int(cfg.l3_truncate_tokens), budget, max(16, source_tokens - 1)))
        out = truncate_deterministic(text, limit)
        return SummaryResult(out, "deterministic", "", tokens.count(out), calls, input_tokens, tuple(errors))


def window_warnings(config: TroveConfig, host_window: Callable[[], int] | None = None) -> list[str]:
    """A warning for a summary window set too small for a useful summary request
    (``policy.smallest_summary_window``): TROVE_SUMMARY_CONTEXT_LENGTH, or the host's
    ``auxiliary.compression.context_length`` while summaries take the host's route without it."""
    floor = smallest_summary_window(tokens.count(config.custom_instructions))
    why = (f"under the {floor:,} tokens a summary request needs (half the window for the record, the"
           f" instructions and a {2 * LEAF_BUDGET_FLOOR}-token answer): summaries are squeezed or cut"
           f" without a model; give the model's real window, at least {floor:,}")
    own = int(config.summary_context_length or 0)
    if own:
        return [f"TROVE_SUMMARY_CONTEXT_LENGTH={own} is {why}"] if own < floor else []
    if config.summary_model:
        return []
    host = (host_window or functools.partial(host_task_window, home=config.hermes_home))()
    return [f"the host's auxiliary.compression.context_length={host} is {why}"] if 0 < host < floor else []


def _dated(value: Any) -> datetime | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    try:
        return datetime.fromtimestamp(float(value), tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


PER_MESSAGE_CHARS = 6000  # of one message a summary record shows: its first and last halves


CUT_NOTE_NAMES = 3  # the most messages a leaf's read-in-part line names; the rest are counted


def cut_note(rows: Sequence[Any], per_message_chars: int = PER_MESSAGE_CHARS) -> str:
    """A line naming each stored row the summary record showed only in part (its middle left out),
    so the summary says what its writer did not read and where the whole text is; "" when none.
    It names the CUT_NOTE_NAMES longest (in store order) and counts the rest, so a leaf of many long
    tool outputs carries one short line, not one entry per message on every later prompt."""
    cut = [(int(r.store_id), n) for r in rows if hasattr(r, "to_message")
           for n in (len(tokens.message_text({"content": r.to_message().get("content")})),) if n > per_message_chars]
    if not cut:
        return ""
    longest = sorted(sorted(cut, key=lambda c: -c[1])[:CUT_NOTE_NAMES])
    named = ", ".join(f"store_id {sid} ({n:,} characters)" for sid, n in longest)
    more = len(cut) - len(longest)
    if more:
        named += f" and {more} more message{'s' if more > 1 else ''} over {per_message_chars:,} characters"
    where = "trove_expand(store_id=N) reads a message whole" + (
        "; trove_expand(node_id=N) of this summary lists them all" if more else "")
    return f"{CUT_NOTE_OPENING} the middle of {named} was not shown to the summarizer; {where}.]"


def serialize_messages(rows: Sequence[Any], per_message_chars: int = PER_MESSAGE_CHARS) -> str:
    """Render stored rows as the summarizer's record: ``[ROLE HH:MM]: text`` blocks under a
    ``=== Friday 3 May 2024 (UTC) ===`` line wherever the date changes, so the model can
    write absolute dates (rows without a time get plain ``[ROLE]`` labels)."""
    blocks = []
    day = None
    for r in rows:
        msg = r.to_message() if hasattr(r, "to_message") else r
        when = _dated(getattr(r, "created_at", None) if hasattr(r, "to_message") else msg.get("timestamp"))
        header = ""
        if when is not None and when.date() != day:
            day = when.date()
            header = f"=== {when.strftime('%A')} {when.day} {when.strftime('%B %Y')} (UTC) ===\n"
        text = tokens.message_text({"content": msg.get("content")})
        if len(text) > per_message_chars:
            keep = per_message_chars // 2
            text = text[:keep] + f"\n...[{len(text) - 2 * keep} chars omitted]...\n" + text[-keep:]
        label = (f"TOOL RESULT {msg.get('name') or ''} {msg.get('tool_call_id') or ''}".strip()
                 if msg.get("role") == "tool" else str(msg.get("role", "?")).upper())
        if when is not None:
            label += f" {when.strftime('%H:%M')}"
        line = f"{header}[{label}]: {text}"
        calls = msg.get("tool_calls")
        for call in calls if isinstance(calls, list) else []:  # a damaged row's may be a number or an object
            fn = call.get("function") if isinstance(call, dict) else None
            fn = fn if isinstance(fn, dict) else {}
            line += f"\n[TOOL CALL {fn.get('name', '?')}]: {str(fn.get('arguments', ''))[:600]}"
        blocks.append(line)
    return "\n\n".join(blocks)
