"""Plugin hooks: per-turn ingest (``post_llm_call``), recall-policy and summary injection
(``pre_llm_call``) and giant tool-result stubbing (``transform_tool_result``).

All act only for sessions a trove engine serves in this process, so loading the plugin
while another context engine runs changes nothing. Each callback has one boundary that
logs a failure and answers None; nothing raises into the host.
"""
from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import subsystems, tokens
from .backend import lock_busy, storage_error
from .compaction import assembly
from .config import scoped_home
from .dag import NodeRow
from .filters import UNSTORED, host_side_agent
from .hookcap import ContextBudget, fitted_summary, host_spill_cap
from .keptail import kept_tail_context
from .ops.maintenance import drop_unstored_row
from .payloads import replay
from .payloads import sidecar as payloads
from .payloads.redact import Redactor
from .pgdb import StoreSelectionError
from .scope import scope_for
from .store import SessionKey

if TYPE_CHECKING:
    from .runtime import Runtime

log = logging.getLogger("hermes_trove.hooks")
POLICY_PATH = Path(__file__).resolve().parent / "skills" / "hermes-trove" / "references" / "recall-policy.md"
SUMMARY_CONTEXT_TOKENS = 1500  # carried summaries shown before the first compaction of a session
# The ``on_session_finalize`` reasons with which a gateway ends a chat's session (/new, an idle reset).
CHAT_ENDS = frozenset({"new_session", "session_expired"})
FINALIZE_WAIT_S = 0.5  # the longest the finalize hook waits for each write lock of a busy store (on the event loop)


def recall_policy() -> str:
    """The canonical recall policy, byte for byte ("" when the file is unreadable)."""
    try:
        return POLICY_PATH.read_text(encoding="utf-8")
    except OSError:
        log.debug("trove: recall policy unreadable at %s", POLICY_PATH, exc_info=True)
        return ""


def summary_context(runtime: Runtime, session_id: str, history: list[Any], tools: bool = True,
                    max_chars: int | None = None) -> str:
    """Summary nodes the session can see but its transcript does not show yet (after /new).

    Compaction puts the summary message into the prompt; a fresh session that inherited
    summaries has none until then, so the hook brings the newest of them along once, within
    ``max_chars`` (the oldest nodes left out first; None: no limit).
    ``history`` is the host's list as given (entries that are no dict are passed over).
    """
    shown = runtime.marks.known(session_id, "summary", history, assembly.shows_summary)
    read = None
    if shown is None:  # only a whole look would tell (another list): none is needed while there is nothing to show
        read = read_frontier(runtime, session_id)  # a failure is said below only if not shown
        if read[0] == []:
            return ""
        shown = runtime.marks.look(session_id, "summary", history, assembly.shows_summary, 0)
    if shown:
        return ""
    frontier, failure = read or read_frontier(runtime, session_id)
    if failure is not None:  # a server that went away since the turn began: the rest of the context still goes
        if not storage_error(failure):
            raise failure
        log.warning("trove: no summary context for session %s this turn: the store did not answer (%s)",
                    session_id, str(failure).splitlines()[0][:200] if str(failure) else type(failure).__name__)
        shipper = getattr(runtime.store, "shipper", None)
        if shipper is not None:  # a server known down now: the next turns read nothing from it while it is
            shipper.failed(failure)
        return ""
    if not frontier:
        return ""
    return fitted_summary(*assembly.select_nodes(frontier, SUMMARY_CONTEXT_TOKENS), tools, max_chars)


def read_frontier(runtime: Runtime, session_id: str) -> tuple[list[NodeRow] | None, Exception | None]:
    """The session's summary frontier, or the error reading it raised."""
    try:
        return runtime.dag.frontier(session_id), None
    except Exception as exc:
        return None, exc


def before_answer(runtime: Runtime, user_message: Any, session_id: str) -> list[str]:
    """What the subsystems add before the model answers (opt-in); fail-open: an error adds nothing."""
    texts: list[str] = []
    for row in subsystems.SUBSYSTEMS:
        if row.before_answer is None or not isinstance(user_message, str):
            continue
        try:
            texts.append(row.before_answer(runtime, user_message, session_id))
        except Exception:
            log.warning("trove: %s failed before the answer; nothing added", row.name, exc_info=True)
    return [t for t in texts if t]


def hook_subject(kw: dict[str, Any]) -> str:
    """The session a hook call is about, as its log line names it: the turn's session, or a delegated
    child and the session that delegated it (``subagent_start`` names no ``session_id``)."""
    if kw.get("session_id") or not (kw.get("child_session_id") or kw.get("parent_session_id")):
        return f"session {kw.get('session_id')}"
    return f"child session {kw.get('child_session_id')} of session {kw.get('parent_session_id')}"


def guarded(name: str, callback: Callable[..., Any]) -> Callable[..., Any]:
    """The hook's one never-raise boundary: a failure is logged and answered with None."""

    @functools.wraps(callback)
    def hook(**kw: Any) -> Any:
        try:
            return callback(**kw)
        except StoreSelectionError:  # a served profile trove cannot serve: said once, where it was found
            return None
        except Exception:
            log.exception("trove: %s hook failed for %s (the host carries on)", name, hook_subject(kw))
            return None

    return hook


def end_later(runtime: Runtime, session_id: str, platform: str) -> None:
    """Mark a chat's end off the gateway's event loop, waiting for a busy store as every write does; a store that
    stays out of reach holds the end, as an outage does, and marks it once usable again (so does a store already
    known to be out of reach: no second wait). A session bound again meanwhile (resumed) is live: left alone."""
    if session_id in runtime.bound_sessions:
        return
    try:
        if runtime.health.usable or runtime.store.local_writes:  # an outbox takes it while the server is away
            runtime.store.mark_ended(session_id)
            return
    except Exception as exc:
        if not runtime.store_failed(exc, f"the end of {session_id}"):
            raise
    runtime.unstored.hold(SessionKey(session_id, "", platform), [], ended=True)


class LateEnds:
    """The ends the finalize hook found the store too busy to mark, marked in turn by one ``trove-finalize``
    thread. One at most: a gateway expiring many chats while another process holds the lock starts no thread
    per chat, and once the first wait fails the rest are held at once, so the thread (which the interpreter
    waits for at exit, as the end is written or held on disk) keeps a process for one busy timeout at most
    while the other writer keeps the lock (a writer that lets it go and takes it again makes each end wait)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pending: list[tuple[Runtime, str, str]] = []
        self.worker: threading.Thread | None = None

    def add(self, runtime: Runtime, session_id: str, platform: str, only_if_busy: bool = False) -> bool:
        """Queue an end (``only_if_busy``: only while an earlier one is being marked); whether it was queued."""
        with self.lock:
            if only_if_busy and self.worker is None:
                return False
            self.pending.append((runtime, session_id, platform))
            if self.worker is None:
                self.worker = threading.Thread(target=self.drain, name="trove-finalize")
                self.worker.start()
            return True

    def drain(self) -> None:
        try:
            while True:
                with self.lock:
                    if not self.pending:
                        self.worker = None
                        return
                    runtime, session_id, platform = self.pending.pop(0)
                guarded("on_session_finalize", end_later)(runtime=runtime, session_id=session_id, platform=platform)
        finally:  # ended by something no hook catches: the next end starts a thread again
            with self.lock:
                if self.worker is threading.current_thread():
                    self.worker = None


LATE_ENDS = LateEnds()


def make_hooks(base: Runtime) -> dict[str, Callable[..., Any]]:
    policy = recall_policy()

    def carries_policy(message: dict[str, Any]) -> bool:
        return policy in str(message.get("api_content") or "")

    def post_llm_call(**kw: Any) -> None:
        """Store the turn (a failed ingest is retried on the next turn: the store is idempotent)."""
        runtime = base.for_home(scoped_home())  # the turn's profile, in a gateway serving several
        session_id = str(kw.get("session_id") or "")
        history = kw.get("conversation_history")
        platform = str(kw.get("platform") or "")
        if runtime.bound_sessions.get(session_id) != "active" or not isinstance(history, list) \
                or host_side_agent(session_id, platform):  # e.g. the review fork
            return
        pending = SessionKey(session_id, "", platform)  # what is held while the store takes no writes
        if not runtime.store_usable(pending) and not runtime.store.local_writes:
            runtime.unstored.hold(pending, history)  # written on recovery
            return
        try:
            row = runtime.store.owner(session_id)
            platform, conversation = platform or (row.platform if row else ""), row.conversation_id if row else ""
            # A gateway session the host started without a session key takes its sender's scope here.
            scope = row.scope if row is not None and row.scope else scope_for(platform, conversation,
                                                                              str(kw.get("sender_id") or ""))
            key = SessionKey(session_id, conversation, platform, scope=scope)
            runtime.store.ingest(key, history, skip=runtime.skip_message)
        except Exception as exc:
            if not runtime.store_failed(exc, "ingest"):
                raise
            runtime.unstored.hold(pending, history)
            return
        engine = runtime.foreground_engine()
        if engine is not None:  # background passes over the new turn (opt-in, leased)
            subsystems.start("turn", runtime, lambda: engine.completion_for("compression"))

    def pre_llm_call(**kw: Any) -> Any:
        runtime = base.for_home(scoped_home())  # the turn's profile, in a gateway serving several
        session_id = str(kw.get("session_id") or "")
        if runtime.bound_sessions.get(session_id) != "active":
            return None
        # The host replays injected text with its user message on every later turn, so
        # each part is injected only while no live message already carries it.
        # Each look resumes where the last turn's ended (``HistoryMarks``): per-turn work follows the new messages.
        history = kw.get("conversation_history") or []
        history = history if isinstance(history, list) else list(history)
        parts = []
        # The host spills a context over its hooks.output_spill.max_chars: the parts go in by importance
        # (the policy, the summary, then evidence), each whole or not at all (hookcap.py)
        budget = ContextBudget(host_spill_cap())
        # An agent whose toolsets leave out the context engine's (a delegate_task child, an editor's ACP session,
        # a platform or --toolsets without context_engine) has no trove_* tools: no policy naming them.
        tools = runtime.gives_tools(session_id, str(kw.get("platform") or ""))
        if policy and tools and not runtime.marks.any(session_id, "policy", history, carries_policy) \
                and budget.take(policy):
            parts.append(policy)
        # nothing stored to show while the store is unusable, nor while its server is known to be down (the
        # outbox holds this machine's messages, no summaries): no read waits on the network then
        if runtime.health.usable and runtime.offline_view() is None:
            summary = summary_context(runtime, session_id, history, tools, budget.room())
            if summary and budget.take(summary):
                parts.append(summary)
            kept = kept_tail_context(runtime, session_id, history, budget.room())
            if kept and budget.take(kept):
                parts.append(kept)
            parts += [t for t in before_answer(runtime, kw.get("user_message"), session_id) if budget.take(t)]
        return {"context": "\n\n".join(parts)} if parts else None

    def transform_tool_result(**kw: Any) -> Any:
        """Stub a giant textual tool result before it enters the transcript (opt-in).

        The full text goes to a verified sidecar first; if that cannot be confirmed the
        result stays inline. Recovery tools are never stubbed.
        """
        runtime = base.for_home(scoped_home())  # the turn's profile, in a gateway serving several
        cfg = runtime.config
        if not (cfg.large_output_externalization_enabled and cfg.large_output_active_replay_stubbing_enabled):
            return None
        session_id = str(kw.get("session_id") or "")
        result = kw.get("result")
        if runtime.bound_sessions.get(session_id) != "active" or not isinstance(result, str) \
                or kw.get("tool_name") in replay.NEVER_STUB_TOOLS \
                or tokens.count(result) <= int(cfg.large_output_active_replay_stub_threshold_tokens):
            return None
        # The stub goes to the provider this turn: it previews the redacted text the sidecar
        # holds, never the raw result (every text leaving the process passes the same redaction).
        text = Redactor.from_config(cfg).redact(result)
        ref = payloads.externalize_text(runtime, session_id, text)
        if ref is None:
            return None
        return payloads.externalized_placeholder(ref, "tool_result", text, payloads.PREVIEW_CHARS)

    def subagent_start(**kw: Any) -> None:
        """A ``delegate_task`` child works for the session that delegated: its session takes that
        session's owner scope and names it as its previous one, so the parent's conversation can
        recall what the child saw (an unscoped child was readable by no other session). The child
        of a session trove stores nothing for (a cron job) is stateless like its parent."""
        runtime = base.for_home(scoped_home())
        parent, child = str(kw.get("parent_session_id") or ""), str(kw.get("child_session_id") or "")
        if not parent or runtime.bound_sessions.get(child) != "active":
            return
        mode = runtime.bound_sessions.get(parent, "")
        if mode in UNSTORED:
            runtime.bind(child, mode)
            runtime.inherit(child, mode)
            if runtime.store_usable():  # it bound as an ordinary session first: its empty row goes
                drop_unstored_row(runtime, child)
            return
        if not runtime.store_usable():
            return
        row, owner = runtime.store.session(child), runtime.store.session(parent)
        if row is not None and not row.scope and owner is not None and owner.scope:
            runtime.store.ensure_session(SessionKey(child, row.conversation_id, row.platform),
                                         previous_session_id=parent)

    def on_session_finalize(**kw: Any) -> None:
        """A gateway chat's /new, or its idle expiry, ends the chat's session. The chat's agent, whose clean-up
        ends it in trove too, may be gone already: ``/compress`` evicts it, so a ``/new`` right after has no
        agent to clean up. The end is marked here then (an unstored session, or one ended, is left alone).
        The hook runs on the gateway's event loop: it waits for no retry of an unusable store (the end is
        held, as an outage holds one) and for a busy write lock ``FINALIZE_WAIT_S`` at most per lock."""
        session_id, platform = str(kw.get("session_id") or ""), str(kw.get("platform") or "")
        runtime = base.for_home(scoped_home()).serving(session_id)
        if kw.get("reason") not in CHAT_ENDS or not session_id or runtime.unstored_reason(session_id, platform):
            return
        runtime.unbind(session_id)  # the session ended; its agent may be gone (a later bind brings it back)
        if not runtime.store.local_writes and not runtime.health.usable:  # an outbox takes it with no network
            runtime.unstored.hold(SessionKey(session_id, "", platform), [], ended=True)  # marked once usable
            return
        # this machine's row first, the server's only while the store is usable: no wait on the gateway's loop
        # for a server known to be away (one that hangs would hold it for the connect timeout)
        row = runtime.store.owner(session_id, remote=runtime.health.usable)  # (an ended one is left alone)
        if row is None or row.ended_at is not None or LATE_ENDS.add(runtime, session_id, platform, only_if_busy=True):
            return  # queued: it follows the ends already waiting
        try:
            runtime.store.mark_ended(session_id, wait_s=FINALIZE_WAIT_S)
        except Exception as exc:  # another process (or thread) holds the file's write lock: finished off the loop
            if not lock_busy(exc):
                raise
            LATE_ENDS.add(runtime, session_id, platform)

    callbacks = {"post_llm_call": post_llm_call, "pre_llm_call": pre_llm_call,
                 "transform_tool_result": transform_tool_result, "subagent_start": subagent_start,
                 "on_session_finalize": on_session_finalize}
    return {name: guarded(name, callback) for name, callback in callbacks.items()}
