"""TroveEngine: the Hermes context engine. A thin orchestrator with no SQL of its own.

It binds a session (from the host's lifecycle calls), ingests what the host shows it,
answers the host's compaction questions, and hands compaction to ``compaction.compactor``
and tool calls to ``tools.dispatch``. All durable state lives in the database keyed by
session, because the host deep-copies the engine for every agent it builds.

Ignored and stateless sessions, and every session while the store is unusable
(``Runtime.health``), are delegated to the host's built-in ``ContextCompressor``, so the
prompt stays bounded; the flags the host reads and writes are mirrored both ways. No host
entry point raises.
"""
from __future__ import annotations

import contextlib
import copy
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from . import tokens
from .compaction.compactor import CompactionLimits, Compactor, handover_reason, has_content
from .compaction.policy import trim_head_tail
from .compaction.summarize import Summarizer
from .compaction.window import measure_overhead, plan_trigger
from .config import reserve_floor_cap, scoped_home
from .filters import UNSTORED, chat_compaction_cleanup, delegated_child, host_side_agent, takes_foreground
from .hostbase import ContextEngine, branched_from, copy_attrs, host_entry, host_message_tokens, host_owner, nothing
from .ingest import Identify, repeats_previous
from .models import Complete, host_complete
from .ops.maintenance import drop_unstored_row, previous_in_chat, tidy_at_session_start
from .runtime import Runtime, build_runtime
from .scope import scope_for
from .spill import held_end
from .store import SessionKey
from .subsystems import start as start_subsystems
from .toolkit import ToolContext
from .tools import TOOL_SCHEMAS, dispatch

if TYPE_CHECKING:
    from .config import TroveConfig

log = logging.getLogger("hermes_trove.engine")

# When a compress made no progress, the trigger stays quiet until the prompt grows by this.
_NO_PROGRESS_REGROWTH = 0.05
# What the host writes on the engine that the built-in compressor's own triggers read.
_TO_NATIVE = ("last_prompt_tokens", "last_completion_tokens", "last_total_tokens",
              "awaiting_real_usage_after_compression", "last_compression_rough_tokens",
              "_verify_compaction_cleared_threshold")
# What the host reads after compress(), as the built-in compressor left it.
_FROM_NATIVE = ("_last_compress_aborted", "_last_summary_error", "_last_compression_made_progress",
                "_last_summary_fallback_used", "_last_aux_model_failure_error", "_last_aux_model_failure_model")
# Flags a usage update consumes (host-set after a compaction, cleared by the compressor).
_USAGE_FLAGS = ("awaiting_real_usage_after_compression", "_verify_compaction_cleared_threshold")


@dataclass
class SessionState:
    """What one engine copy knows about the session it serves (small, rebuilt from disk)."""

    key: SessionKey | None = None
    mode: str = "unbound"  # unbound | active | ignored | stateless
    matched_pattern: str = ""
    pending_reset_from: str = ""
    just_ended: str = ""  # /new ends the session before the reset; /resume and /branch do not
    left: str = ""  # the session this copy served before its latest rebind
    released: tuple[str, str] = ("", "")  # the delegated child this copy ended last, and its inherited mode
    compacted_only: str = ""  # compacted at its latest boundary, no model answer since (a side agent)
    answered: str = ""  # the session this copy last had a model answer in: the agent's list is its own
    last_status: str = "idle"
    last_reason: str = ""
    last_result: dict[str, Any] = field(default_factory=dict)
    no_progress_tokens: int = 0
    tools: bool = False  # the host asked this copy for its tools: its agent has them (Hermes asks no other)


class TroveEngine(ContextEngine):
    """Lossless context engine ``trove``.

    ``TroveEngine(runtime, complete=None)``: ``runtime`` defaults to one built from the
    environment. ``complete`` is the model behind summaries and model-backed tools, a
    ``(messages, model, timeout_s, max_tokens) -> text`` function; None means the host's
    auxiliary client (else ``ctx.llm``), routed with this copy's main-model settings.
    Deep copies keep the injected function.
    """

    # Ask the host to run preflight on nearly every turn; the engine decides itself.
    protect_first_n = 0
    protect_last_n = 1

    def __init__(self, runtime: Runtime | None = None, complete: Complete | None = None):
        self.runtime = runtime if runtime is not None else build_runtime()
        self.complete = complete
        self.state = SessionState()
        self.model = self.base_url = self.provider = self.api_mode = ""
        self.api_key: Any = ""
        self.context_length = 0
        self.threshold_tokens = self.overhead_tokens = 0  # overhead: the host's system prompt + tool schemas
        self.threshold_percent = float(self.runtime.config.context_threshold)
        self.compression_count = 0
        self.last_prompt_tokens = self.last_completion_tokens = self.last_total_tokens = 0
        self.last_usage: dict[str, Any] = {}
        self._last_compress_aborted = False
        self._last_compression_made_progress = False
        self._last_summary_error: str | None = None
        self._last_summary_fallback_used = False
        self._last_aux_model_failure_error: str | None = None
        self._last_aux_model_failure_model: str | None = None
        # written by the host after each compaction; mirrored into the delegate
        self.awaiting_real_usage_after_compression = False
        self.last_compression_rough_tokens = 0
        self._verify_compaction_cleared_threshold = False
        self._native: Any = None  # host ContextCompressor for delegated compaction (built lazily)
        self._host_db: Any = None  # the host's SessionDB (state.db), given by bind_session_state

    # -- identity ------------------------------------------------------------
    @property
    def name(self) -> str:
        return "trove"

    @property
    def config(self) -> TroveConfig:
        return self.runtime.config

    @property
    def session_id(self) -> str:
        return self.state.key.session_id if self.state.key else ""

    def __deepcopy__(self, memo: dict[int, Any]) -> TroveEngine:
        clone = copy.copy(self)
        clone.runtime = self.runtime.for_home(scoped_home())  # the host copies once per agent, in its profile
        clone.state = replace(self.state, last_result=dict(self.state.last_result))
        clone.last_usage = dict(self.last_usage)
        clone._native = None
        memo[id(self)] = clone
        return clone

    # -- model and thresholds -----------------------------------------------
    @host_entry(nothing)
    def update_model(self, model: str, context_length: int, base_url: str = "", api_key: Any = "",
                     provider: str = "", api_mode: str = "") -> None:
        self.model, self.base_url, self.api_key = model or "", base_url or "", api_key
        self.provider, self.api_mode = provider or "", api_mode or ""
        self.context_length = int(context_length or 0)
        self.threshold_tokens = self._compute_threshold()
        if self._native:  # a /model switch or a provider-reported limit reaches the delegate too
            self._native.update_model(model=self.model, context_length=self.context_length, base_url=self.base_url,
                                      api_key=self.api_key, provider=self.provider, api_mode=self.api_mode)

    def _compute_threshold(self) -> int:
        cfg, window = self.config, self.context_length
        caps = [int(cfg.max_assembly_tokens or 0), reserve_floor_cap(cfg, window) or 0]
        return plan_trigger(window, float(cfg.context_threshold), self.overhead_tokens, caps)  # window.py

    def runtime_info(self) -> dict[str, Any]:
        """Main-model runtime for the host's auxiliary client."""
        return {"model": self.model, "provider": self.provider, "base_url": self.base_url,
                "api_key": self.api_key, "api_mode": self.api_mode}

    def completion_for(self, task: str) -> Complete | None:
        """The model for ``task`` ("compression", "expand_query"): the injected one, else the
        host's auxiliary client; None when neither exists (summaries then truncate)."""
        if self.complete is not None:
            return self.complete
        return host_complete(self.runtime_info, self.runtime.llm, task=task)

    @host_entry(nothing)
    def update_from_response(self, usage: dict[str, Any]) -> None:
        usage = usage or {}
        self.last_usage = dict(usage)
        self.state.compacted_only, self.state.answered = "", self.session_id  # this copy runs turns of its own
        self.runtime.note_tools(self.session_id, self.state.tools)  # its agent's tools, not a helper's
        self.last_prompt_tokens = int(usage.get("prompt_tokens") or 0)
        self.last_completion_tokens = int(usage.get("completion_tokens") or 0)
        self.last_total_tokens = int(usage.get("total_tokens") or 0)
        if self._native:  # the delegate tracks usage too (its anti-thrash verdict lives here)
            delegating = self._delegating(probe=False)
            if delegating:
                copy_attrs(self, self._native, _TO_NATIVE)
            self._native.update_from_response(usage)
            if delegating:
                copy_attrs(self._native, self, _USAGE_FLAGS)

    def _threshold_reached(self, prompt_tokens: int | None = None) -> bool:
        tokens = self.last_prompt_tokens if prompt_tokens is None else int(prompt_tokens or 0)
        return self.threshold_tokens > 0 and tokens >= self.threshold_tokens

    @host_entry(_threshold_reached)
    def should_compress(self, prompt_tokens: int | None = None) -> bool:
        # only the agent running a turn asks (the gateway's helpers compact unasked): its word on the tools
        self.runtime.note_tools(self.session_id, self.state.tools)  # counts before it answers, as at preflight
        if self._delegating():
            native = self._native_compressor()
            if native is None:  # no host compressor: trim_head_tail runs on trove's own threshold
                return self._threshold_reached(prompt_tokens)
            copy_attrs(self, native, _TO_NATIVE)
            return bool(native.should_compress(prompt_tokens))
        tokens = self.last_prompt_tokens if prompt_tokens is None else int(prompt_tokens or 0)
        stuck = self.state.no_progress_tokens  # the last compress could not shrink this: no thrash until it grows
        return self._threshold_reached(prompt_tokens) and not (stuck and tokens < stuck * (1 + _NO_PROGRESS_REGROWTH))

    @host_entry(lambda self, rough_tokens: False)
    def should_defer_preflight_to_real_usage(self, rough_tokens: int) -> bool:
        if self._delegating():
            native = self._native_compressor()
            if native is not None and hasattr(native, "should_defer_preflight_to_real_usage"):
                copy_attrs(self, native, _TO_NATIVE)
                return bool(native.should_defer_preflight_to_real_usage(rough_tokens))
        return False

    @host_entry(lambda self, messages: True)
    def has_content_to_compress(self, messages: list[dict[str, Any]]) -> bool:
        self._helper_compacts()  # only gateway /compress asks, on its own agent: its binds decide nothing
        if self._delegating():
            native = self._native_compressor()
            return bool(native is None or native.has_content_to_compress(messages))
        return has_content(self.runtime, self.state.key, messages)  # what a forced compaction could fold

    # -- lifecycle -----------------------------------------------------------
    @host_entry(nothing)
    def on_session_start(self, session_id: str, **kwargs: Any) -> None:
        if kwargs.get("context_length") and not self.context_length:
            self.context_length = int(kwargs["context_length"])
            self.threshold_tokens = self._compute_threshold()
        old = kwargs.get("old_session_id") or ""
        compaction = kwargs.get("boundary_reason") == "compression"
        platform, conversation = host_owner(self._host_db, session_id, str(kwargs.get("platform") or ""),
                                            str(kwargs.get("conversation_id") or ""))
        key = SessionKey(session_id=session_id or "", conversation_id=conversation, platform=platform,
                         scope=scope_for(platform, conversation))
        if compaction:  # a legacy rotation to a new id: its status shows the compaction that made it
            self.runtime.compactions.carry(old, session_id)
        ended, mode = self.state.released  # the host ends a session it compacts before the boundary
        carried = self.runtime.inherited_mode(old, platform) or (mode if old and old == ended else "")
        if compaction and old and carried:  # a delegated child's continuation
            self.runtime.inherit(key.session_id, carried)
        self._bind(key)
        self.state.just_ended = ""  # an in-place compaction boundary ends nothing
        self.state.compacted_only = session_id if compaction else ""
        if compaction:  # a helper's boundary binds the session again: no word on the chat's tools either
            self._helper_compacts()
        if self.state.mode != "active" or not self.runtime.health.usable:
            return
        start_subsystems("session_start", self.runtime, lambda: self.completion_for("compression"))  # opt-in
        if not compaction:
            with self._storing(f"carry-over into {session_id}"):
                self._follow(previous_in_chat(self.runtime.store, key), key)
        elif old and old != session_id:  # legacy rotation to a child id: the summaries follow the conversation
            with self._storing(f"carry-over from {old} to {session_id}"):
                self.runtime.dag.carry_over(old, session_id, 0)
                if delegated_child(platform):  # and a delegated child's scope
                    self.runtime.store.ensure_session(key, previous_session_id=old)

    @host_entry(nothing)
    def bind_session_state(self, session_db: Any = None, session_id: str = "", *args: Any, **kwargs: Any) -> None:
        if not session_id:
            return
        self._host_db = session_db if session_db is not None else self._host_db
        previous = self.state.pending_reset_from or branched_from(self._host_db, session_id)
        base = self.state.key or SessionKey("")
        platform, conversation = host_owner(self._host_db, session_id, base.platform, base.conversation_id)
        key = SessionKey(session_id, conversation, platform, base.source,
                         base.scope if conversation == base.conversation_id else "")
        self._bind(key)
        if self.state.mode == "active" and self.runtime.health.usable:
            self._follow(previous, key)
        self.state.pending_reset_from = ""

    def _follow(self, previous: str, key: SessionKey) -> None:
        """A new session follows ``previous``: the retained summaries come along, and the link."""
        if not previous or previous == key.session_id:
            return
        self._carry_after_new(previous, key.session_id)
        with self._storing(f"linking {key.session_id} to {previous}"):
            self.runtime.store.ensure_session(key, previous_session_id=previous)

    @host_entry(nothing)
    def on_session_reset(self) -> None:
        super().on_session_reset()
        if self._native:
            self._native.on_session_reset()
        ended = self.state.just_ended
        self.state.pending_reset_from = self.session_id if ended and ended == self.session_id else ""
        self.state.just_ended = ""
        self.state.no_progress_tokens = 0
        self.state.last_status, self.state.last_reason = "idle", ""

    @host_entry(nothing)
    def on_session_end(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        """Flush the transcript; idempotent, tolerant of ``[]`` and of foreign ids. While the store is
        unusable the transcript is held (``Runtime.unstored``) and written once it is usable again. The end
        of a session trove stores nothing for (ignored, stateless, a side agent) stores and ends nothing."""
        own = bool(session_id) and session_id == self.session_id
        self.state.just_ended = session_id if own else self.state.just_ended
        try:
            self._end(session_id, messages)
        finally:  # the session this copy serves ended (not a live chat's compaction): its binding goes
            if own and not chat_compaction_cleanup(session_id, messages, self.state.compacted_only,
                                                   self.state.key.conversation_id if self.state.key else ""):
                self.runtime.unbind(session_id)  # a compaction boundary that follows binds it anew

    def _end(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        # A session this copy served before /new keeps its owner (conversation, platform, scope).
        key = replace(self.state.key or SessionKey(""), session_id=session_id)
        if self.runtime.unstored_reason(session_id, key.platform):  # a compaction boundary may follow: kept here
            released = self.runtime.release(session_id) or self.runtime.inherited_mode(session_id, key.platform)
            self.state.released = (session_id, released) if released else self.state.released
            return
        if not self.runtime.store.local_writes and not self.runtime.store_usable(self.state.key):
            self._hold(key, messages, end=True)
            return
        try:
            if session_id and not repeats_previous(self.runtime.store.owner, session_id, messages,
                                                   self.state.left, self.state.answered):
                self._ingest(key, messages)  # first: storing turns reopens a session
            # The clean-up of an agent the gateway built only to compact a live chat (/compress, hygiene)
            # ends nothing: the chat goes on.
            ends = session_id and not chat_compaction_cleanup(session_id, messages, self.state.compacted_only,
                                                              key.conversation_id)
            if ends and self.runtime.store.session(session_id):
                self.runtime.store.mark_ended(session_id)  # cleared again if the session binds anew
            if self.runtime.store.local_writes:  # the process may exit next: ship what waits (bounded)
                self.runtime.store.settle(timeout_s=5.0)
        except Exception as exc:  # never let a flush failure reach the host
            if self._storage_error(exc, f"the end-of-session flush of {session_id}"):
                self._hold(key, messages, end=True)

    def _helper_compacts(self) -> None:
        if not self.state.tools and self.state.answered != self.session_id:  # a copy with no word on the tools
            self.runtime.helper_compacted(self.session_id)

    def _bind(self, key: SessionKey) -> None:
        filters = self.runtime.filters
        ignored = filters.ignored_by(key.session_id, key.platform)
        stateless = None if ignored else (filters.stateless_by(key.session_id, key.platform)
                                          or host_side_agent(key.session_id, key.platform, api_key=self.api_key))
        if self.state.key and self.state.key.session_id != key.session_id:
            self.state.left = self.state.key.session_id
        # bound as an ordinary session, then named a side agent's platform (the curator's): drop its empty row
        renamed = self.state.mode == "active" and (self.state.key or SessionKey("")).session_id == key.session_id != ""
        self.state.key = key
        mode = "ignored" if ignored else "stateless" if stateless else "active"
        self.state.mode = self.runtime.inherited_modes.get(key.session_id, mode)  # a cron job's child: stateless
        self.state.matched_pattern = ignored or stateless or ""
        self.state.no_progress_tokens = 0
        if key.session_id:
            self.runtime.bind(key.session_id, self.state.mode, self.state.tools, self.state.answered == key.session_id)
            # /trove keeps serving the foreground conversation while a side session binds
            front = takes_foreground(self.state.mode, key.platform, session_id=key.session_id)
            if front or self.runtime.foreground_engine() is None:
                self.runtime.set_foreground(self)
        if self.state.mode == "active" and self.runtime.store_usable():
            with self._storing(f"recording session {key.session_id}"):
                self.runtime.store.ensure_session(key)
                tidy_at_session_start(self.runtime)  # at most every few minutes; cheap under its threshold
        elif renamed and self.state.mode != "active" and self.runtime.store_usable():
            with self._storing(f"dropping the empty row of {key.session_id}"):
                drop_unstored_row(self.runtime, key.session_id)

    def _carry_after_new(self, old: str, new: str) -> None:
        # a /branch continues its parent's conversation: every summary comes along, not only the deep ones
        depth = -1 if branched_from(self._host_db, new) == old else int(self.config.new_session_retain_depth)
        if depth == 0:
            return
        with self._storing(f"carry-over from {old} to {new}"):
            # Only summaries the new session may read come along (TROVE_MEMORY_SCOPE=session: none).
            visible = self.runtime.visibility(self.state.key)
            if self.runtime.store.count(new) == 0 and old != new and visible.mode != "session" \
                    and self.runtime.store.visible_session(old, visible):
                self.runtime.dag.carry_over(old, new, 0 if depth < 0 else depth)

    def _bypassed(self) -> bool:  # or turned stateless after its bind (the subagent of a cron job)
        return self.state.mode in UNSTORED or self.runtime.bound_sessions.get(self.session_id) in UNSTORED

    def _delegating(self, probe: bool = True) -> str:
        """Why compaction goes to the host's compressor now ("" = trove compacts). ``probe`` lets an
        unusable store be retried here once its backoff has passed."""
        if self._bypassed():
            return f"{self.runtime.bound_sessions.get(self.session_id, self.state.mode)} session"
        usable = self.runtime.store_usable(self.state.key) if probe else self.runtime.health.usable
        return "" if usable else "store unusable"

    @contextlib.contextmanager
    def _storing(self, where: str) -> Iterator[None]:
        """A storage call its caller carries on after: a failure is logged as ``_storage_error`` says."""
        try:
            yield
        except Exception as exc:
            self._storage_error(exc, where)

    def _storage_error(self, exc: BaseException, where: str) -> bool:
        """Log a failed storage call; a storage error marks the store unusable (True)."""
        if self.runtime.store_failed(exc, where):
            return True
        log.exception("trove: %s failed", where)
        return False

    def _hold(self, key: SessionKey, messages: list[dict[str, Any]], end: bool = False) -> None:
        """Keep what an active session showed while the store takes no writes (``end``: the list of its end, which
        marks the session ended once written, as a live end does: not a live chat's compaction clean-up)."""
        if not (messages or end) or self.runtime.unstored_reason(key.session_id, key.platform):
            return
        state = self.state  # an end's list may be another session's: replayed only if it is not
        ended = end and not chat_compaction_cleanup(key.session_id, messages, state.compacted_only, key.conversation_id)
        self.runtime.unstored.hold(key, messages, held_end(key.session_id, messages, state.left, state.answered)
                                   if end else None, ended)

    # -- ingest --------------------------------------------------------------
    def ingest(self, messages: list[dict[str, Any]]) -> int:
        """Store what is new in ``messages`` for the bound session; returns rows added. A storage
        error marks the store unusable and is raised."""
        if self.state.key is None or self._bypassed():
            return 0
        try:
            return self._ingest(self.state.key, messages)
        except Exception as exc:
            self.runtime.store_failed(exc, "ingest")
            raise

    def _ingest(self, key: SessionKey, messages: list[dict[str, Any]], identity: Identify | None = None) -> int:
        if self.runtime.unstored_reason(key.session_id, key.platform):
            return 0
        result = self.runtime.store.ingest(key, messages, skip=self.runtime.skip_message, identity=identity)
        return len(result.store_ids)

    # -- compaction ----------------------------------------------------------
    def compress(self, messages: list[dict[str, Any]], current_tokens: int | None = None,
                 focus_topic: str | None = None, force: bool = False, memory_context: str = "") -> list[dict[str, Any]]:
        """The host's compaction call; the one place its failures stop.

        Trove compacts unless the session is delegated (``_delegating``); a trove compaction that
        fails hands this call to the host's compressor, so the prompt stays bounded. Only when
        that fails too is the transcript left unchanged.
        """
        self._last_compress_aborted = False
        self._last_summary_error = None
        before = self.state.last_result  # trove's compaction replaces it
        self._helper_compacts()
        try:
            why = self._delegating()
            if not why:
                try:
                    return self._compress(messages, current_tokens, focus_topic, force, memory_context)
                except Exception as exc:
                    why = handover_reason(self.runtime, exc)
            return self._compress_delegated(why, messages, current_tokens, focus_topic, force, memory_context)
        except Exception as exc:  # the host must never crash because of us
            log.exception("trove: compress failed; transcript left unchanged")
            self._last_summary_error = str(exc)
            self._last_compression_made_progress = False
            self.state.last_status, self.state.last_reason = "error", str(exc)[:300]
            return messages
        finally:  # /trove status of the chat's own copy reads it (the gateway compacts on a temporary one)
            if not self._bypassed():  # a call on an ignored or stateless session says nothing of it
                report = self.state.last_result
                self.runtime.compactions.note(self.session_id, self.state.last_status, self.state.last_reason,
                                              None if report is before else report)

    def _compress(self, messages: list[dict[str, Any]], current_tokens: int | None, focus_topic: str | None,
                  force: bool, memory_context: str) -> list[dict[str, Any]]:
        self._last_compression_made_progress = False
        if self.state.key is None or self._learn_overhead(messages, current_tokens, force):
            return messages
        identity = self.runtime.store.identities.memo()  # ingest and the compactor share digests
        self._ingest(self.state.key, messages, identity)
        self.runtime.store.settle()  # a server store: what the outbox holds ships before compaction reads
        compactor = Compactor(self.runtime, self.state.key,
                              CompactionLimits(int(self.threshold_tokens or 0), int(self.context_length or 0),
                                               self.overhead_tokens),
                              Summarizer(self.config, self.completion_for("compression")))
        result = compactor.run(messages, current_tokens=current_tokens, focus_topic=focus_topic,
                               force=force, memory_context=memory_context, identity=identity)
        self.state.last_result = result.report
        self.state.last_status, self.state.last_reason = result.status, result.reason
        self._last_compression_made_progress = result.progress
        self._last_summary_fallback_used = result.fallback_used
        if not result.progress:
            self.state.no_progress_tokens = int(current_tokens or self.last_prompt_tokens or 0) or 1
            return messages
        self.state.no_progress_tokens = 0
        self.compression_count += 1
        start_subsystems("compaction", self.runtime, lambda: self.completion_for("compression"))  # new leaves
        return result.messages

    def _learn_overhead(self, messages: list[dict[str, Any]], current_tokens: int | None, force: bool) -> bool:
        """Measure the host's fixed overhead (system prompt, tool schemas) and move the trigger with it;
        True when this automatic call came only from the trigger this measurement just raised (nothing
        to do, no model call). A call under a trigger that stood (a provider's overflow or 413 retry)
        still compacts."""
        before = int(self.threshold_tokens or 0)
        if current_tokens and self.context_length:
            counts = (tokens.count_messages(messages), host_message_tokens(messages))
            self.overhead_tokens = measure_overhead(int(current_tokens), counts, self.context_length)
            self.threshold_tokens = self._compute_threshold()
        if force or not current_tokens or not before <= int(current_tokens) < self.threshold_tokens:
            return False
        self.state.last_status, self.state.last_reason = "deferred", "under the trigger once the overhead is known"
        return True

    def _native_compressor(self) -> Any:
        """The host's ``ContextCompressor`` built as the host builds its fallback (HOST.md §9), with
        ``config_context_length`` so it probes nothing; None without a host or a known window."""
        if self._native is None and self.context_length > 0:
            try:
                from agent.context_compressor import ContextCompressor

                self._native = ContextCompressor(
                    self.model, threshold_percent=max(0.5, float(self.config.context_threshold)),
                    base_url=self.base_url, api_key=self.api_key, provider=self.provider,
                    api_mode=self.api_mode, config_context_length=self.context_length, quiet_mode=True)
            except Exception:  # no host (or an incompatible one): trim_head_tail bounds the prompt
                log.debug("trove: host ContextCompressor unavailable", exc_info=True)
                self._native = False
        return self._native or None

    def _compress_delegated(self, why: str, messages: list[dict[str, Any]], current_tokens: int | None,
                            focus_topic: str | None, force: bool, memory_context: str) -> list[dict[str, Any]]:
        """The host's compressor bounds the prompt. An ignored/stateless session stores nothing; an active
        one whose store is unusable has its transcript held for the store first (an outbox takes it at once)."""
        if not self._bypassed() and not self.runtime.health.usable and self.state.key is not None:
            if not self.runtime.to_outbox(self.state.key, messages, "keeping what the built-in compressor drops"):
                self._hold(self.state.key, messages)  # a file store, or an outbox that failed too
        native = self._native_compressor()
        if native is not None:
            copy_attrs(self, native, _TO_NATIVE)
            out = native.compress(messages, current_tokens=current_tokens, focus_topic=focus_topic, force=force,
                                  **({"memory_context": memory_context} if memory_context else {}))
            copy_attrs(native, self, _FROM_NATIVE)
        else:
            out = trim_head_tail(messages, budget=max(1, int(self.threshold_tokens * 0.6)))
            self._last_compression_made_progress = out != messages
        if out != messages:
            self.compression_count += 1
        if not self._bypassed():
            self.state.last_status, self.state.last_reason = "delegated", why
        return out

    # -- tools ---------------------------------------------------------------
    @host_entry(lambda self: [])
    def get_tool_schemas(self) -> list[dict[str, Any]]:
        self.state.tools = True  # the host binds the session again (on_session_start) once it has asked
        return [dict(s) for s in TOOL_SCHEMAS]

    @host_entry(lambda self, name, args, **kw: json.dumps({"error": f"trove: {name} failed; see the Hermes log"}))
    def handle_tool_call(self, name: str, args: dict[str, Any], **kwargs: Any) -> str:
        """Store the live transcript first (so tools see this turn), then dispatch (never raises)."""
        live = kwargs.get("messages")
        if isinstance(live, list) and name != "trove_inspect" and self.runtime.store_usable(self.state.key):
            try:
                self.ingest(live)
                self.runtime.store.settle(timeout_s=2.0)  # a server store: the tool reads this turn too
            except Exception:  # a failed ingest must not cost the model its tool answer
                log.debug("trove: ingest before %s failed", name, exc_info=True)
        ctx = self.tool_context(mid_turn=isinstance(live, list))
        offline = self.runtime.offline_view()  # a server store that is down: answer from the outbox
        return dispatch(ctx if offline is None else replace(ctx, runtime=offline), name, args)

    def tool_context(self, mid_turn: bool = False) -> ToolContext:
        """What the tools see of this engine: storage, the bound session, facts, the model."""
        return ToolContext(runtime=self.runtime, session=self.state.key, snapshot=self.snapshot(),
                           complete=self.completion_for("expand_query"), mid_turn=mid_turn)

    # -- status --------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """The engine-side facts tools and commands report (no storage reads)."""
        key = self.state.key or SessionKey("(unbound)")
        why = self._delegating(probe=False)
        status, reason, report = self.runtime.compactions.latest(  # the newest of any copy in this process
            key.session_id, (self.state.last_status, self.state.last_reason, self.state.last_result))
        return {
            "session_id": key.session_id, "conversation_id": key.conversation_id, "platform": key.platform,
            "session_mode": self.state.mode, "matched_pattern": self.state.matched_pattern,
            "model": self.model, "provider": self.provider, "context_length": self.context_length,
            "threshold_tokens": self.threshold_tokens if self.threshold_tokens else "(uninitialized)",
            "context_threshold": float(self.config.context_threshold), "overhead_tokens": self.overhead_tokens,
            "last_prompt_tokens": self.last_prompt_tokens, "last_usage": dict(self.last_usage),
            "compression_count": self.compression_count, "store_state": self.runtime.health.state(),
            "compaction_route": f"built-in compressor ({why})" if why else "trove",
            "last_compression_status": status, "last_compression_reason": reason,
            "last_compression": report, "snapshot_at": time.time(),
        }

    @host_entry(lambda self: {})
    def get_status(self) -> dict[str, Any]:
        status = super().get_status()
        status.update(self.snapshot())
        return status
