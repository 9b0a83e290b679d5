"""Shared plumbing for the ``trove_*`` tools: the call context, argument parsing, time
values, content slices, bounded JSON and row rendering.

Everything here is pure. Bad arguments raise ``ToolError`` with a message written for the
model that made the call; ``tools.dispatch`` turns it into ``{"error": ...}``. Responses
are fitted under a hard character cap by dropping trailing items, never by cutting JSON.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from . import tokens
from .models import Complete
from .refs import MAX_QUOTE_CHARS, make_ref, shorthand
from .rows import TIME_MAX, TIME_MIN, json_or_text  # times outside TIME_MIN..TIME_MAX are refused
from .scope import EVERYTHING, Visibility

if TYPE_CHECKING:
    from .runtime import Runtime
    from .store import SessionKey

# How a tool reaches another: ``tools.dispatch`` injects its dict-returning core (toolkit never imports tools).
Dispatcher = Callable[["ToolContext", str, Mapping[str, Any]], dict[str, Any]]

# The bound of a context no dispatcher has narrowed; ``tools.dispatch`` sets each tool's own.
DEFAULT_RESPONSE_CAP = 32000
ROLES = ("system", "user", "assistant", "tool", "unknown")


class ToolError(ValueError):
    """A tool call the handler refuses, with a message that says how to fix it."""


# Bounds checked before any argument is parsed: the raw JSON text, each string, the node count.
MAX_ARGUMENTS_CHARS = 256 * 1024
MAX_STRING_CHARS = 32 * 1024
MAX_ARGUMENT_NODES = 4096
MAX_ARGUMENT_DEPTH = 16
# The largest integer every JSON reader holds exactly (RFC 7493); any number past it in an
# argument is refused, as are NaN and the infinities Python's json module reads.
MAX_SAFE_INTEGER = 2**53 - 1
ECHO_CHARS = 60
_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` safe to encode as UTF-8: lone surrogates become U+FFFD."""
    return _SURROGATE.sub("\ufffd", text) if has_lone_surrogate(text) else text


def has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def echo(value: Any, limit: int = ECHO_CHARS) -> str:
    """A value quoted for an error message: at most ``limit`` characters, never a raw surrogate."""
    text = value if isinstance(value, str) else str(value) if isinstance(value, (int, float)) \
        else type(value).__name__
    if isinstance(value, int) and not isinstance(value, bool) and len(text) > limit:
        return f"an integer of {len(text)} digits"
    cut = text[:limit]
    out = repr(cut)  # repr escapes lone surrogates as \udxxx
    return out + f" (+{len(text) - limit} more chars)" if len(text) > limit else out


def check_arguments(args: Mapping[str, Any]) -> None:
    """Refuse oversized, too deep or unencodable arguments before any handler parses them."""
    stack: list[tuple[Any, str, int, str]] = [(args, "arguments", 0, "arguments")]
    nodes = total = 0
    while stack:
        value, where, depth, top = stack.pop()  # top: the argument this value sits in, named by errors
        nodes += 1
        if nodes > MAX_ARGUMENT_NODES:
            raise ToolError(f"arguments are too large: more than {MAX_ARGUMENT_NODES} values")
        if depth > MAX_ARGUMENT_DEPTH:
            raise ToolError(f"{top} is nested too deeply (more than {MAX_ARGUMENT_DEPTH} levels)")
        if isinstance(value, str):
            total += len(value)
            if len(value) > MAX_STRING_CHARS:
                raise ToolError(f"{where} is too long: {len(value)} characters (at most {MAX_STRING_CHARS})")
            if has_lone_surrogate(value):
                raise ToolError(f"{where} contains invalid Unicode (a lone surrogate); send valid UTF-8 text")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            check_number(value, where)
        elif isinstance(value, Mapping):
            for k, v in value.items():
                key = str(k)
                if len(key) > 256 or has_lone_surrogate(key):
                    raise ToolError(f"argument name {echo(key, 40)} is not a valid name")
                stack.append((v, key if depth == 0 else f"{where}.{key}", depth + 1, key if depth == 0 else top))
        elif isinstance(value, (list, tuple)):
            stack.extend((v, f"{where}[{i}]", depth + 1, top) for i, v in enumerate(value))
        if total > MAX_ARGUMENTS_CHARS:
            raise ToolError(f"arguments are too large: over {MAX_ARGUMENTS_CHARS} characters in all")


def check_number(value: float, where: str) -> None:
    """Refuse NaN, the infinities and numbers past +-MAX_SAFE_INTEGER, naming the argument."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolError(f"{where} must be a finite number, got {spelled(value)}")
    if abs(value) > MAX_SAFE_INTEGER:
        raise ToolError(f"{where} is out of range: {spelled(value)}; numbers in tool arguments must lie between "
                        f"-{MAX_SAFE_INTEGER} and {MAX_SAFE_INTEGER}")


def spelled(value: float) -> str:
    """A number for an error message, as JSON writes it (NaN and Infinity as Python's json module
    does); a long integer by its length."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, float) and math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    text = repr(value)
    return f"an integer of {len(text.lstrip('-'))} digits" if len(text) > 24 else text


@dataclass(frozen=True)
class ToolContext:
    """What a tool handler may use: storage, the bound session, engine facts, the model."""

    runtime: Runtime
    session: SessionKey | None = None        # the bound session; None before any session binds
    snapshot: Mapping[str, Any] = None  # type: ignore[assignment]  # engine facts at call time
    complete: Complete | None = None         # the host's auxiliary model, for model-backed tools
    response_cap: int = DEFAULT_RESPONSE_CAP  # this call's response bound in JSON characters
    visible: Visibility = EVERYTHING          # the sessions this call may read; ``tools.dispatch`` sets it
    dispatcher: Dispatcher | None = None      # ``tools.dispatch`` sets it, so a handler can ``call`` another tool
    calling: tuple[str, ...] = ()             # the tools running in this call, outermost first
    mid_turn: bool = False                    # called by the model while it answers a turn of the session

    def call(self, name: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """Another tool's parsed reply, run through dispatch with its own checks and cap, the same
        session, Visibility and runtime. Never raises: a refusal is the callee's ``{"error": ...}``."""
        if self.dispatcher is None:
            return {"error": f"{name} cannot be called here: this context was not made by tools.dispatch"}
        return self.dispatcher(self, name, args)

    def ask_model(self, messages: list[dict[str, Any]], model: str = "", timeout_s: float = 60.0,
                  max_tokens: int = 2000) -> str:
        """One completion through the injected model; raises when there is none."""
        if self.complete is None:
            raise RuntimeError("no auxiliary model available (Hermes host not present)")
        return self.complete(messages, model, timeout_s, max_tokens)


def current_session(ctx: ToolContext) -> str | None:
    return (ctx.session.session_id or None) if ctx.session is not None else None


def turn_start(ctx: ToolContext) -> int | None:
    """Mid-turn, the bound session's rows above this store id are the turn being answered (its
    question, tool calls and results), which no search may return as evidence; None otherwise."""
    sid = current_session(ctx)
    return ctx.runtime.store.last_reply_store_id(sid) if ctx.mid_turn and sid else None


def question_arg(args: Mapping[str, Any], limit: int) -> str:
    """The required ``question``, stripped, of at most ``limit`` characters."""
    text = (str_arg(args, "question", required=True, allow_empty=False) or "").strip()
    if len(text) > limit:
        raise ToolError(f"question is longer than {limit} characters")
    return text


def require_session(ctx: ToolContext, tool: str) -> str:
    sid = current_session(ctx)
    if not sid:
        raise ToolError(f"{tool} reads the current session, but no session is bound yet; "
                        "use trove_grep with session_scope='all' or trove_load_session(session_id=...)")
    return sid


# -- arguments ---------------------------------------------------------------
_INT_TEXT = re.compile(r"[+-]?\d{1,20}")
_NUMBER_TEXT = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]?(?:inf|infinity|nan)", re.I)


def number(raw: Any, name: str, accepted: str) -> int | float:
    """A finite JSON number (or numeric string) within +-MAX_SAFE_INTEGER; ``accepted`` says what
    the argument takes, for the error."""
    if isinstance(raw, bool):
        raise ToolError(f"{name} must be {accepted}, got a boolean")
    value: int | float
    if isinstance(raw, (int, float)):
        value = raw
    elif isinstance(raw, str) and _NUMBER_TEXT.fullmatch(raw.strip()):
        text = raw.strip()
        value = int(text) if _INT_TEXT.fullmatch(text) else float(text)
    else:
        shown = echo(raw, 40) if isinstance(raw, str) else type(raw).__name__
        raise ToolError(f"{name} must be {accepted}, got {shown}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolError(f"{name} must be {accepted}, got {spelled(value)}")
    if abs(value) > MAX_SAFE_INTEGER:
        raise ToolError(f"{name} is out of range: {spelled(value)}; it must be {accepted}")
    return value


def whole_number(raw: Any, name: str, low: int, high: int, accepted: str = "") -> int:
    """An integer in ``[low, high]`` (a whole float such as 3.0 counts); anything else is refused,
    saying it must be ``accepted`` (by default the range)."""
    accepted = accepted or f"an integer from {low} to {high}"
    value = number(raw, name, accepted)
    if value != int(value) or not low <= value <= high:
        raise ToolError(f"{name} must be {accepted}, got {echo(raw)}")
    return int(value)


def clamped_number(raw: Any, name: str, low: int, high: int) -> int:
    """A whole number clamped into ``[low, high]`` (NaN, infinities and unsafe sizes are refused)."""
    value = number(raw, name, f"an integer from {low} to {high} (others are clamped into that range)")
    if value != int(value):
        raise ToolError(f"{name} must be an integer from {low} to {high}, got {echo(raw)}")
    return min(high, max(low, int(value)))


def int_arg(args: Mapping[str, Any], name: str, default: int | None, *, minimum: int = 0,
            cap: int | None = None, clamped: dict[str, Any] | None = None) -> int | None:
    """An integer argument; above ``cap`` it is clamped and the original is recorded."""
    raw = args.get(name)
    if raw is None or raw == "":
        return default
    accepted = "" if cap is None else \
        f"an integer from {minimum} to {cap} (larger values up to {MAX_SAFE_INTEGER} are clamped to {cap})"
    out = whole_number(raw, name, minimum, MAX_SAFE_INTEGER, accepted)
    if cap is not None and out > cap:
        if clamped is not None:
            clamped[f"{name}_clamped_from"] = out
        out = cap
    return out


def bool_arg(args: Mapping[str, Any], name: str, default: bool = False) -> bool:
    raw = args.get(name)
    if raw is None:
        return default
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, (int, float)) and raw in (0, 1):
        return bool(raw)
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
        return raw.strip().lower() in ("true", "1", "yes")
    raise ToolError(f"{name} must be true or false, got {echo(raw)}")


def str_arg(args: Mapping[str, Any], name: str, *, required: bool = False, allow_empty: bool = True) -> str | None:
    raw = args.get(name)
    if raw is None:
        if required:
            raise ToolError(f"{name} is required")
        return None
    if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
        raise ToolError(f"{name} must be a string, got {type(raw).__name__}")
    text = str(raw)
    if not allow_empty and not text.strip():
        raise ToolError(f"{name} must not be empty")
    return text


def enum_arg(args: Mapping[str, Any], name: str, choices: Sequence[str], default: str | None) -> str | None:
    raw = args.get(name)
    if raw is None or raw == "":
        return default
    value = str(raw).strip().lower()
    if value not in choices:
        raise ToolError(f"{name} must be one of {', '.join(choices)}; got {echo(raw, 40)}")
    return value


def str_list_arg(args: Mapping[str, Any], name: str, *, max_items: int = 256) -> list[str] | None:
    raw = args.get(name)
    if raw is None:
        return None
    if isinstance(raw, str):
        raw = [p for p in (s.strip() for s in raw.split(",")) if p]
    if not isinstance(raw, (list, tuple)) or not all(isinstance(x, str) for x in raw):
        raise ToolError(f"{name} must be a list of strings")
    if len(raw) > max_items:
        raise ToolError(f"{name} accepts at most {max_items} items, got {len(raw)}")
    return list(raw)


def int_list_arg(args: Mapping[str, Any], name: str, *, max_items: int = 50) -> list[int] | None:
    raw = args.get(name)
    if raw is None:
        return None
    if not isinstance(raw, (list, tuple)):
        raw = [raw]
    if len(raw) > max_items:
        raise ToolError(f"{name} accepts at most {max_items} items, got {len(raw)}")
    return [int_arg({name: x}, name, None, minimum=1) or 0 for x in raw]


# -- time --------------------------------------------------------------------
TIME_FORMS = ("unix seconds or an ISO 8601 time with a timezone (2025-03-01T09:00:00Z, 2025-03-01T11:00:00+02:00, "
              "2025-03-01Z)")
_DATE_WITH_ZONE = re.compile(r"(\d{4}-\d{2}-\d{2})([+-]\d{2}:?\d{2})?")
# The shape of an ISO 8601 date or time: one the calendar still refuses names no real day or hour.
_ISO_SHAPE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}(?::\d{2}(?::\d{2}(?:\.\d{1,6})?)?)?)?(?:[+-]\d{2}:?\d{2})?")


def parse_time(value: Any, name: str, *, naive_utc: bool = False) -> float | None:
    """Unix seconds or an ISO 8601 time with a timezone; a date with one (``2025-03-01Z``) is its
    midnight there. Naive dates and times are refused unless ``naive_utc`` reads them as UTC.
    Times outside TIME_MIN..TIME_MAX are refused."""
    if value is None or value == "":
        return None
    seconds = _iso_seconds(value.strip(), name, naive_utc) if isinstance(value, str) and \
        not _NUMBER_TEXT.fullmatch(value.strip()) else float(number(value, name, TIME_FORMS))
    low, high = TIME_MIN.timestamp(), TIME_MAX.timestamp()
    if not low <= seconds <= high:
        shown = echo(value) if isinstance(value, str) else spelled(value)
        raise ToolError(f"{name}={shown} is out of range: accepted {iso(low)} to {iso(high)} "
                        f"(unix seconds {low:.0f} to {high:.0f})")
    return seconds


def question_date_arg(args: Mapping[str, Any]) -> float | None:
    """``question_date``, the "now" of a question: any ``parse_time`` form, and a date or time
    without a timezone too (2026-12-01, 2026-12-01T10:00:00), read as UTC."""
    return parse_time(args.get("question_date"), "question_date", naive_utc=True)


def _iso_seconds(text: str, name: str, naive_utc: bool) -> float:
    body = text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text
    dated = _DATE_WITH_ZONE.fullmatch(body)
    try:
        parsed = datetime.fromisoformat(f"{dated.group(1)}T00:00:00{dated.group(2) or ''}" if dated else body)
    except ValueError as exc:
        if _ISO_SHAPE.fullmatch(body):  # well formed, but 2023-02-30 or 25:00 is no day or hour
            raise ToolError(f"{name}={echo(text)} is no such date or time ({exc})") from None
        raise ToolError(f"{name}={echo(text)} is not {TIME_FORMS}") from None
    if parsed.tzinfo is None and not naive_utc:
        fixed = f"{text}Z or {text}+02:00" if dated else f"{text[:19]}Z or {text[:19]}+02:00"
        raise ToolError(f"{name}={echo(text)} has no timezone; add one, e.g. {fixed}")
    try:
        return (parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)).timestamp()
    except (OverflowError, OSError, ValueError):
        raise ToolError(f"{name}={echo(text)} is out of range") from None


def time_window(args: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """The ``time_from``/``time_to`` arguments, refused when the window is inverted."""
    start = parse_time(args.get("time_from"), "time_from")
    end = parse_time(args.get("time_to"), "time_to")
    if start is not None and end is not None and start > end:
        raise ToolError("time_from is after time_to; swap them or widen the window")
    return start, end


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    try:
        return datetime.fromtimestamp(float(ts), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return None


# -- content slices ------------------------------------------------------------
def chars_within(text: str, offset: int, max_tokens: int) -> int:
    """How many characters of ``text`` from ``offset`` fit in ``max_tokens`` (at least one)."""
    remaining = len(text) - offset
    if remaining <= 0:
        return 0
    n = min(remaining, max(1, max_tokens) * 4)
    for _ in range(6):
        used = tokens.count(text[offset:offset + n])
        if used <= max_tokens or n <= 1:
            break
        n = max(1, int(n * max_tokens / used * 0.95))
    return max(1, n)


def content_slice(text: str, offset: int, max_chars: int) -> dict[str, Any]:
    """One page of ``text``: always at least one character when any remain."""
    total = len(text)
    if offset > total:
        raise ToolError(f"content_offset {offset} is past the end of the content ({total} chars)")
    end = min(total, offset + max(1, max_chars)) if offset < total else total
    more = end < total
    return {"content": text[offset:end], "content_chars": total, "content_offset": offset,
            "content_returned_chars": end - offset, "content_truncated": more,
            "next_content_offset": end if more else None, "has_more": more}


# -- bounded responses ----------------------------------------------------------
def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, default=str, separators=(",", ":"))


def fit_items(build: Callable[[int], dict[str, Any]], count: int, cap: int) -> tuple[dict[str, Any], int]:
    """The payload with the most leading items (of ``count``) whose JSON fits in ``cap``."""
    full = build(count)
    if count == 0 or len(dumps(full)) <= cap:
        return full, count
    lo, hi = 0, count - 1  # invariant: build(lo) fits or lo == 0
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(dumps(build(mid))) <= cap:
            lo = mid
        else:
            hi = mid - 1
    return build(lo), lo


def bound_json(payload: dict[str, Any], cap: int) -> str:
    """Serialize, shrinking the largest fields until the text fits ``cap`` characters."""
    text = dumps(payload)
    if len(text) <= cap:
        return text
    obj = dict(payload)
    obj["response_truncated"] = True
    for _ in range(64):
        text = dumps(obj)
        if len(text) <= cap:
            return text
        key = max((k for k in obj if k != "response_truncated"), key=lambda k: len(dumps(obj[k])), default=None)
        if key is None:
            break
        value = obj[key]
        big = (isinstance(value, (list, dict)) and len(value) > 1) or len(dumps(value)) > 200
        obj[key] = _shrink(value) if big else str(value)[:100]
    return dumps({"response_truncated": True, "error": "response too large to return within its bound"})


def _shrink(value: Any) -> Any:
    """A smaller ``value``: a list halved, a dict with its largest entry shrunk, anything else omitted."""
    if isinstance(value, list) and len(value) > 1:
        return value[: len(value) // 2]
    if isinstance(value, dict) and len(value) > 1:
        key = max(value, key=lambda k: len(dumps(value[k])))
        return {**value, key: _shrink(value[key])}
    return {"omitted": True, "chars": len(dumps(value))}


# -- rendering rows ---------------------------------------------------------------
TOOL_CALLS_PREVIEW_CHARS = 2000


def echo_filters(time_from: float | None = None, time_to: float | None = None, **given: Any) -> dict[str, Any]:
    """The filters a response repeats back: the ones that were set, times as ISO strings."""
    times = {"time_from": time_from, "time_to": time_to}
    return {k: v for k, v in given.items() if v} | {k: iso(t) for k, t in times.items() if t is not None}


def expand_hint(node: Any) -> str:
    """How to open one summary node: its stored hint, else the plain expand call."""
    return node.expand_hint or f"trove_expand(node_id={node.node_id})"


def message_meta(row: Any, current_session: str | None) -> dict[str, Any]:
    """Identity and provenance of one stored message (no content)."""
    out: dict[str, Any] = {"store_id": row.store_id, "session_id": row.session_id, "source": row.source,
                           "role": row.role, "timestamp": iso(row.created_at),
                           "from_current_session": bool(current_session) and row.session_id == current_session}
    return out | {k: getattr(row, k) for k in ("tool_call_id", "tool_name") if getattr(row, k)}


def message_item(row: Any, current_session: str | None, *, offset: int = 0, max_chars: int = 4000,
                 include_exact_ref: bool = False) -> dict[str, Any]:
    """A stored message with one content page; long tool-call arguments become a preview."""
    out = message_meta(row, current_session)
    if row.tool_calls:
        calls = row.tool_calls
        if len(calls) <= TOOL_CALLS_PREVIEW_CHARS:
            out["tool_calls"] = json_or_text(calls)
        else:
            out.update(tool_calls_preview=calls[:TOOL_CALLS_PREVIEW_CHARS], tool_calls_chars=len(calls),
                       tool_calls_truncated=True,
                       tool_calls_expand_args={"store_id": row.store_id, "part": "tool_calls"})
    if row.content_is_json:
        out["content_format"] = "json"
    page = content_slice(row.content, offset, max_chars)
    out.update(page)
    if include_exact_ref:
        end = offset + page["content_returned_chars"]
        out["exact_ref"] = shorthand(row.store_id, offset, end)
        out.update(full_exact_ref(row, offset, end))
    return out


def full_exact_ref(row: Any, start: int, end: int) -> dict[str, Any]:
    """``exact_ref_full``: the ref object of a returned slice (refs.py), or why there is none."""
    if end - start > MAX_QUOTE_CHARS:
        return {"exact_ref_full": None, "exact_ref_note": f"slice longer than {MAX_QUOTE_CHARS} characters is not "
                "citable; read a smaller page (max_tokens / max_content_chars) for a full ref"}
    return {"exact_ref_full": make_ref(row, start, end).to_dict()}
