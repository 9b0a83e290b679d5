"""Pure ingest planning: which messages of a host transcript are new.

The host shows the engine the same transcript many times (preflight, tool calls, the
per-turn hook, retries, restarts, ``/resume``) and rewrites it after compaction. A
message's *identity* is a digest of what the model saw (role, content, tool calls, tool
call id); the per-session cursor remembers the transcript length and the identity of
the last message at the previous ingest. Planning costs O(new messages) on the normal
path; only an unrecognised transcript falls back to aligning against stored identities.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

# Keys the host adds for its own bookkeeping; never part of identity or stored content.
HOST_INTERNAL_KEYS = frozenset({
    "api_content", "_db_persisted", "_compressed_summary", "_todo_snapshot_synthetic",
    "finish_reason", "_trove_summary",
})
# The summary message opens with this whole sentence (compaction/assembly.py); a user may type the tag.
SUMMARY_MARKER = "[trove summary] Earlier conversation, compacted."
SUMMARY_FOOTER = "[end of trove summary]"  # the summary message's last line (compaction/assembly.py)
_SUMMARY_END = "\n\n" + SUMMARY_FOOTER + "\n\n"  # where the host joins a user message it merged into one
_SUMMARY_FLAGS = ("_trove_summary", "_compressed_summary")
# The host's own compaction scaffolding. Hermes marks it with underscore keys that never reach its
# state.db, so a transcript reloaded from there (a gateway does so every turn) shows plain messages:
# they are known by the host's fixed wording, whole: a user's message may open with a bracket tag.
# Its summaries open with this sentence, alone or after a message it merged them into; the todo
# snapshot it appends after a compaction is a block (the line, then one line per open item, pending
# or in progress) that it also merges into the user message before it, which stays the same message.
HOST_SUMMARY_OPENING = ("[CONTEXT COMPACTION \u2014 REFERENCE ONLY] Earlier turns were compacted "
                        "into the summary below.")
_HOST_MERGED_OPENING = "[PRIOR CONTEXT \u2014 for reference only; not a new message]\n"
_HOST_MERGED_SUMMARY = "\n\n[END OF PRIOR CONTEXT \u2014 COMPACTION SUMMARY BELOW]\n\n" + HOST_SUMMARY_OPENING
TODO_SNAPSHOT = "[Your active task list was preserved across context compression]"
_TODO_BLOCK = re.compile(r"(?:\A|\n\n)" + re.escape(TODO_SNAPSHOT)
                         + r"(?:\n- \[[ >]\] [^\n]* \((?:pending|in_progress)\))+(?=\n|\Z)")
# The request Hermes appends as a user message when a turn reaches its tool-call limit; only the
# whole sentence is the host's (a user quoting it, or writing more around it, is the user).
HOST_MAX_ITERATIONS = ("You've reached the maximum number of tool-calling iterations allowed. "
                       "Please provide a final response summarizing what you've found and accomplished so far, "
                       "without calling any more tools.")
# The pre-answer evidence block (state.preanswer) is fenced by these; a user message carrying
# it has the block stripped before storage, and a message made only of it is synthetic.
EVIDENCE_OPEN = "[trove evidence"
EVIDENCE_CLOSE = "[/trove evidence]"


# Exactly the encoder ``json.dumps(..., sort_keys=True, ensure_ascii=False, default=str,
# separators=(",", ":"))`` builds per call: stored digests depend on its output byte for byte.
_IDENTITY_JSON = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=str, separators=(",", ":"))
_json_str = json.encoder.encode_basestring  # what that encoder writes for a str


def message_identity(message: dict[str, Any]) -> str:
    """Stable digest of what a message says; survives host-internal key changes."""
    role = message.get("role") or ""
    content = message.get("content")
    if role == "user" and type(content) is str:
        if content.startswith(SUMMARY_MARKER):
            content = merged_after_summary(message) or content
        if TODO_SNAPSHOT in content:
            content = strip_todo_snapshot(content)
    calls = message.get("tool_calls") or None
    call_id = message.get("tool_call_id") or ""
    if calls is None and type(role) is str and type(content) is str and type(call_id) is str:
        # The common shape, written out as the encoder would write this list.
        raw = f"[{_json_str(role)},{_json_str(content)},null,{_json_str(call_id)}]"
    else:
        raw = _IDENTITY_JSON.encode([role, content if content is not None else "", calls, call_id])
    return hashlib.blake2b(raw.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def opens_summary(content: Any) -> bool:
    """Whether ``content`` is a trove summary message's text: the marker to the footer, or the footer then a
    message the host merged after it (a user's own message may open with the marker sentence)."""
    return (isinstance(content, str) and content.startswith(SUMMARY_MARKER)
            and (content.rstrip().endswith(SUMMARY_FOOTER) or _SUMMARY_END in content))


def merged_after_summary(message: dict[str, Any]) -> str | None:
    """What the host merged after a trove summary message: it joins two user messages in a row into
    one (in memory, and so in the transcript a gateway reloads), and the summary is a user message."""
    content = message.get("content")
    if message.get("role") != "user" or not isinstance(content, str) or not content.startswith(SUMMARY_MARKER):
        return None
    cut = content.find(_SUMMARY_END)
    return content[cut + len(_SUMMARY_END):] if cut >= 0 else None


def unmerged(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` as the user's own message when the host merged it into a trove summary, else itself."""
    rest = merged_after_summary(message)
    if rest is None:
        return message
    return {**{k: v for k, v in message.items() if k not in _SUMMARY_FLAGS}, "content": rest}


def is_synthetic(message: dict[str, Any]) -> bool:
    """Messages this engine or the host fabricated: never stored as conversation."""
    rest = merged_after_summary(message)
    if rest is not None:  # a summary with the user's message merged after it: that message is real
        return not strip_todo_snapshot(rest).strip()
    if message.get("_trove_summary") or message.get("_todo_snapshot_synthetic") or message.get("_compressed_summary"):
        return True
    content = message.get("content")
    if not isinstance(content, str):
        return False
    opening = content.lstrip()
    if message.get("role") == "user" and opening.rstrip() == HOST_MAX_ITERATIONS:
        return True
    return (opens_summary(content) or opening.startswith(HOST_SUMMARY_OPENING)
            or (opening.startswith(_HOST_MERGED_OPENING) and _HOST_MERGED_SUMMARY in opening)
            or (opening.startswith(EVIDENCE_OPEN) and not strip_evidence(content).strip())
            or (opening.startswith(TODO_SNAPSHOT) and not strip_todo_snapshot(opening).strip()))


def strip_todo_snapshot(text: str) -> str:
    """``text`` without the host's todo snapshot block(s) (and the blank line the host merged before one)."""
    return _TODO_BLOCK.sub("", text)


def strip_evidence(text: str) -> str:
    """``text`` without any fenced pre-answer evidence block (and the blank line the host put before it)."""
    while EVIDENCE_OPEN in text:
        start = text.index(EVIDENCE_OPEN)
        end = text.find(EVIDENCE_CLOSE, start)
        end = len(text) if end < 0 else end + len(EVIDENCE_CLOSE)
        text = text[:start].rstrip("\n") + text[end:]
    return text


class IdentityCache:
    """Digests that outlive one ingest: the host shows the same messages turn after turn (the cursor's
    message, the tail a compaction keeps, the copies in the list it hands back), so each is digested once.

    A digest depends on role, content, tool calls and tool call id alone. One is reused only for a
    message without tool calls whose content is the very string object digested (kept here, so its
    id names no other; strings do not change) and whose role and tool call id are equal; anything
    else is digested again. Bounded by entries and by the characters of the strings it holds on to (a
    longer string is not kept); full, it starts over.
    """

    ENTRIES = 2048
    CHARS = 8 << 20

    def __init__(self) -> None:
        self._known: dict[int, tuple[Any, str, Any, str]] = {}
        self._chars = 0

    def memo(self) -> Identify:
        """``message_identity`` for one ingest (or one compaction), remembered per message object, that reads
        and fills this cache."""
        local: dict[int, str] = {}
        known = self._known

        def identity(message: dict[str, Any]) -> str:
            ident = local.get(id(message))
            if ident is not None:
                return ident
            content, role, call_id = message.get("content"), message.get("role"), message.get("tool_call_id")
            kept = known.get(id(content))  # the string, held by the entry: its id names it alone
            # Role and call id only as plain strings: equal values of other types (1 and True) digest apart.
            plain = type(role) is str and (call_id is None or type(call_id) is str)
            if (plain and kept is not None and kept[1] is content and not message.get("tool_calls")
                    and kept[0] == role and kept[2] == call_id):
                ident = kept[3]
            else:
                ident = message_identity(message)
                if plain and type(content) is str and not message.get("tool_calls") and len(content) <= self.CHARS:
                    self._keep(id(content), (role, content, call_id, ident))
            local[id(message)] = ident
            return ident

        return identity

    def _keep(self, key: int, entry: tuple[Any, str, Any, str]) -> None:
        if len(self._known) >= self.ENTRIES or self._chars + len(entry[1]) > self.CHARS:
            self._known.clear()  # one call, safe beside another thread's reads
            self._chars = 0
        self._known[key] = entry
        self._chars += len(entry[1])


@dataclass(frozen=True)
class IngestCursor:
    length: int = 0
    identity: str = ""

    @classmethod
    def read(cls, length: Any, identity: Any) -> IngestCursor:
        """The cursor a sessions row holds. A length that is no count (a damaged row's text) reads as
        unknown: the next ingest then aligns on the stored messages instead of failing every turn."""
        return cls(length if type(length) is int and length >= 0 else 0, str(identity or ""))


@dataclass(frozen=True)
class IngestPlan:
    start: int  # messages[start:] are candidates to store
    reason: str
    parts: dict[int, dict[str, Any]] = field(default_factory=dict)  # index -> what to store in its place


Identify = Callable[[dict[str, Any]], str]


def plan_fast(messages: Sequence[dict[str, Any]], cursor: IngestCursor,
              identity: Identify = message_identity) -> IngestPlan | None:
    """The O(new) path: the transcript still holds the cursor's message at its place."""
    if cursor.length == 0 and not cursor.identity:
        return IngestPlan(0, "first ingest")
    n = len(messages)
    if n >= cursor.length > 0 and isinstance(at := messages[cursor.length - 1], dict) \
            and identity(at) == cursor.identity:
        return IngestPlan(cursor.length, "cursor matched")
    return None


def plan_aligned(messages: Sequence[dict[str, Any]], stored_tail: Sequence[str],
                 identity: Identify = message_identity) -> IngestPlan:
    """Align the transcript against the newest stored identities (oldest first).

    Walks the transcript from its end for the newest stored identity; a match counts only
    if the messages before it agree with the stored identities before it (a window), so
    repeated short messages ("ok") do not align at the wrong place.
    """
    if not stored_tail:
        return IngestPlan(0, "nothing stored")
    ids = [identity(m) if isinstance(m, dict) else "" for m in messages]  # not a message: matches nothing
    last = stored_tail[-1]
    window = min(8, len(stored_tail))
    best_partial = -1
    for i in range(len(ids) - 1, -1, -1):
        if ids[i] != last:
            continue
        k = 1
        while k < window and i - k >= 0 and ids[i - k] == stored_tail[-1 - k]:
            k += 1
        if k == window or i - k < 0:
            return IngestPlan(i + 1, "aligned on stored tail")
        if best_partial < 0:
            best_partial = i
    if best_partial >= 0:
        return IngestPlan(best_partial + 1, "aligned on newest stored message")
    return IngestPlan(-1, "no alignment; filter by known identities")


_JOIN = "\n\n"  # how the host joins two user messages in a row (its sequence repair): a blank line


def plan_joined(messages: Sequence[dict[str, Any]], cursor: IngestCursor, stored_tail: Sequence[str],
                identity: Identify = message_identity) -> IngestPlan | None:
    """The cursor's user message, stored last, with the next user message joined to it by the host
    (a turn that failed without a reply, then the next one): only the joined part is new.

    The first part must be that message exactly (its identity), so the part stored is the user's
    second message byte for byte, under the joined message's identity (a re-ingest knows it).
    """
    at = cursor.length - 1
    if at < 0 or len(messages) <= at or not stored_tail or stored_tail[-1] != cursor.identity:
        return None
    joined = messages[at]
    content = joined.get("content") if isinstance(joined, dict) else None
    if (type(content) is not str or joined.get("role") != "user" or joined.get("tool_calls")
            or joined.get("tool_call_id") or content.startswith(SUMMARY_MARKER) or TODO_SNAPSHOT in content):
        return None
    cut = _first_part_end(content, cursor.identity)
    if cut < 0:
        return None
    part = {**joined, "content": content[cut + len(_JOIN):]}
    if message_identity({"role": "user", "content": content[:cut]}) != cursor.identity:
        return None
    if is_synthetic(part):  # the host's own request (its iteration limit) joined to the user's message
        return IngestPlan(at + 1, "host joined its request to a stored user message")
    return IngestPlan(at, "host joined two user messages", {at: part})


def _first_part_end(content: str, wanted: str) -> int:
    """Where a user message whose identity is ``wanted`` ends in ``content``, before a join and a non-empty
    rest; -1 when none does. One pass: the digest of each candidate grows from the previous one's."""
    head = hashlib.blake2b(b'["user","', digest_size=12)
    done = 0
    cut = content.find(_JOIN, 1)
    while 0 < cut < len(content) - len(_JOIN):
        head.update(_json_str(content[done:cut])[1:-1].encode("utf-8", "surrogatepass"))
        done = cut
        probe = head.copy()
        probe.update(b'",null,""]')
        if probe.hexdigest() == wanted:
            return cut
        cut = content.find(_JOIN, cut + 1)
    return -1


def repeats_previous(session: Callable[[str], Any], session_id: str, messages: Sequence[Any], left: str = "",
                     answered: str = "") -> bool:
    """Whether ``messages``, handed at the end of ``session_id``, is only the transcript another session was
    last stored from: the one ``session_id`` follows, ``left``, the one this engine copy served before, or
    ``answered``, the one it last had a model answer in (its list is the agent's last). The CLI's exit after
    ``/new``, ``/branch`` or ``/resume`` (once or twice) with no new turn still hands the earlier session's
    list. After a model answer in ``session_id`` itself the list is its own, however it ends. An empty list
    brings nothing either. ``session`` reads this machine's row (it holds the ingest cursor)."""
    if not messages:
        return True
    if answered and answered == session_id:
        return False
    row = session(session_id) if isinstance(messages[-1], dict) else None
    if row is None:
        return False
    return repeats_cursor(session, end_cursor(messages), {row.previous_session_id or "", left, answered} - {session_id})


EndCursor = tuple[int, str]  # an end's list as an ingest cursor: its length and its last message's identity


def end_cursor(messages: Sequence[Any]) -> EndCursor:
    """``messages`` as the ingest cursor a session stored from exactly that list would hold."""
    last = messages[-1] if messages else None
    return (len(messages), message_identity(last)) if isinstance(last, dict) else (0, "")


def repeats_cursor(session: Callable[[str], Any], cursor: EndCursor, others: set[str] | Sequence[str]) -> bool:
    """Whether one of the sessions ``others`` was last stored from the list ``cursor`` stands for."""
    return bool(cursor[0]) and any((before := session(other)) is not None and before.ingest_len
                                   and (before.ingest_len, before.ingest_identity) == cursor
                                   for other in set(others) - {""})
