"""Runtime: the shared objects one plugin load builds once (config, database, store, DAG).

Engine copies, tools, hooks and commands all reach storage through one ``Runtime``; it
holds no live handle (``Database`` is a path), so deep copies share it unchanged. It also
owns the store's health: ``StoreHealth`` (is the store usable, why not, when to retry) and
``Unstored`` (what the host showed while the store took no writes, kept on disk by ``Spill`` and
written once it does, by this process or the next one).
"""
from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from .backend import storage_error
from .config import TroveConfig, database_path, load_config, names_server, payload_dir, profile_environ
from .dag import SummaryDAG
from .db import Database, UnusableDatabaseError
from .filters import UNSTORED, SessionFilters, host_side_agent
from .historymarks import HistoryMarks
from .ingest import is_synthetic, message_identity, plan_aligned
from .lastcompaction import LastCompactions
from .offers import ToolOffers
from .outbox import Outbox, Shipper, ShippingStore, outbox_path
from .payloads.guard import map_strings, storage_transform
from .payloads.redact import Redactor
from .payloads.spool import SpoolDir
from .pgdb import PgDatabase, StoreSelectionError
from .scope import Visibility
from .spill import SPILL_DIR, HeldEnd, Spill, repeats_held_end, replay_end
from .store import MessageStore, SessionKey

log = logging.getLogger("hermes_trove.runtime")

RETRY_FIRST_S = 15.0  # the first retry of an unusable store; each failure doubles it...
RETRY_MAX_S = 60.0    # ...up to this
DELEGATED = "compaction delegated to the built-in compressor"
_PROFILES: dict[str, Runtime] = {}  # profile home -> its runtime, in a process serving several
_UNSELECTED: dict[str, str] = {}  # profile home -> why its .env selects no store
_PROFILES_LOCK = threading.Lock()
MAX_INHERITED = 1024  # delegated children whose inherited mode is remembered; the oldest go first
_INHERITED_LOCK = threading.Lock()  # children of several chats are announced on their own threads
MAX_BOUND = 4096  # sessions whose binding mode is remembered; an entry goes when its session ends, or past this
_BOUND_LOCK = threading.Lock()  # the engine copies of several chats bind on their own threads


def store_reason(exc: BaseException) -> str | None:
    """The short reason ``exc`` says the store is unusable, or None when it is not a storage error."""
    if isinstance(exc, UnusableDatabaseError) and exc.why:
        return exc.why
    if storage_error(exc):
        return f"{type(exc).__name__}: {exc}"[:300]
    return None


# The words (lower case) of a reason, any one of which names the fix; the first match wins, the last row always.
SERVER_FIXES = (  # a URL that reaches the server but cannot be used
    (("newer hermes-trove",), "a newer hermes-trove migrated the server's schema: upgrade hermes-trove on this"
     " machine and restart Hermes, or point TROVE_DATABASE_URL at another database or schema"),
    (("permission denied",), "the user may not create trove's tables there: give it a schema (CREATE SCHEMA <name>"
     " AUTHORIZATION <user>) and name it first in the URL: options=-csearch_path%3D<name>,public"),
    (("authentication failed",), "the server refused the password: correct it in TROVE_DATABASE_URL (or ~/.pgpass)"),
    (('role "',), "the user in TROVE_DATABASE_URL does not exist on the server: create it (CREATE ROLE ... LOGIN)"),
    (('database "',), "the database in TROVE_DATABASE_URL does not exist: create it (CREATE DATABASE ... OWNER"
     " <user>) or correct its name"),
    (("unaccent",), "as a database owner run CREATE EXTENSION IF NOT EXISTS unaccent SCHEMA public, and keep public"
     " on the search_path"),
    ((), "check that the PostgreSQL server in TROVE_DATABASE_URL runs and this machine reaches it (host, port,"
     " credentials, pg_hba.conf)"),
)
FILE_FIXES = (  # {path}: the store's file, {folder}: its directory
    (("not a directory",), "a file sits where a directory of {path} should be: move it away, or set"
     " TROVE_DATABASE_PATH to a file in a writable directory"),
    (("full",), "free space on the disk holding {folder}, or set TROVE_DATABASE_PATH to a file on another disk"),
    (("readonly", "read-only", "not writable", "permission", "unable to open"), "make {folder} and {path} writable"
     " for the user Hermes runs as, or set TROVE_DATABASE_PATH to a writable file"),
    (("newer hermes-trove",), "upgrade hermes-trove and restart Hermes, or set TROVE_DATABASE_PATH to another file"),
    (("is a directory",), "{path} is a directory: move it away, or set TROVE_DATABASE_PATH to a file path"),
    (("not a sqlite database", "not a database", "malformed"), "move {path} aside and restore a backup (`hermes"
     " trove backup` writes them), or let trove start a new file there"),
    ((), "check {path} and its directory (permissions, free space), or set TROVE_DATABASE_PATH to another file"),
)


def store_fix(path: str, reason: str) -> str:
    """What the operator does about ``reason`` (a ``store_reason`` or ``pathprobe.probe_path`` answer)."""
    low = reason.lower()
    server = names_server(path)
    table = SERVER_FIXES if server else FILE_FIXES
    fix = next(f for words, f in table if not words or any(w in low for w in words))
    if server:
        return fix + "; turns keep writing to the local outbox, which ships when it answers"
    return fix.format(path=path, folder=str(Path(path).parent))


@dataclass
class StoreHealth:
    """Whether the store takes writes. While it does not, compaction is delegated and retried
    after a bounded backoff (``RETRY_FIRST_S`` doubling up to ``RETRY_MAX_S``)."""

    reason: str = ""
    failures: int = 0
    since: float = 0.0     # wall clock of the first failure
    retry_at: float = 0.0  # ``clock()`` time of the next retry
    clock: Callable[[], float] = time.monotonic

    @property
    def usable(self) -> bool:
        return not self.reason

    def fail(self, reason: str) -> bool:
        """Record a failure; True when the store was usable until now."""
        first = self.usable
        self.reason = reason[:300] or "unknown storage error"
        self.failures += 1
        self.since = self.since if not first else time.time()
        self.retry_at = self.clock() + min(RETRY_MAX_S, RETRY_FIRST_S * 2 ** max(0, min(self.failures - 1, 8)))
        return first

    def recover(self) -> None:
        self.reason, self.failures, self.since, self.retry_at = "", 0, 0.0, 0.0

    def retry_in(self) -> int:
        return max(0, math.ceil(self.retry_at - self.clock()))

    def state(self) -> str:
        if self.usable:
            return "ok"
        return f"degraded: store unusable: {self.reason}; {DELEGATED}; retry in {self.retry_in()}s"


MAX_HELD_SESSIONS = 16
MAX_HELD_MESSAGES = 5000        # per session
MAX_HELD_CHARS = 32_000_000     # per session


@dataclass
class Unstored:
    """Transcripts the host showed while the store took no writes, merged per session in order.

    The host's compressor drops the middle of a transcript it compacts; holding it here lets
    the store get every message once it is usable again. Bounded: past the limits the oldest
    held messages go (and are counted). ``spill`` keeps what is held on disk too.
    """

    sessions: dict[str, tuple[SessionKey, list[dict[str, Any]]]] = field(default_factory=dict)
    dropped: int = 0
    spill: Spill | None = None
    # session id -> the end its held copy came from, while that copy is only an end's list that may be another
    # session's (``spill.HeldEnd``): it is written last, and only if it repeats no other session's list
    ends: dict[str, HeldEnd] = field(default_factory=dict)
    # sessions whose held copy ends with the session's end: marked ended once written, as a live end marks them
    closed: set[str] = field(default_factory=set)

    @property
    def count(self) -> int:
        return sum(len(msgs) for _, msgs in self.sessions.values())

    def hold(self, key: SessionKey, messages: Sequence[Any], end: HeldEnd | None = None, ended: bool = False) -> int:
        """Add what ``messages`` holds past the held copy of ``key``'s session; returns how many. ``end``:
        ``messages`` is a session end's list that may be another session's (``spill.HeldEnd``). ``ended``: the
        session ended with it (its end is marked once written); a hold without it is a turn: the session goes on."""
        if not key.session_id:
            return 0
        closing = ended != (key.session_id in self.closed)  # the file must say so too
        (self.closed.add if ended else self.closed.discard)(key.session_id)
        raw = [m for m in messages if isinstance(m, dict) and not is_synthetic(m)]
        _, held = self.sessions.pop(key.session_id, (key, []))
        new = [dict(m) for m in raw[_new_from(raw, held):]]  # copy only what is new
        if end is not None and not held:
            self.ends[key.session_id] = end
        elif new:  # the session's own turns, or an end after them: its held copy is its own
            self.ends.pop(key.session_id, None)
        held.extend(new)
        self.sessions[key.session_id] = (key, held)  # most recently held last
        self._bound(held)
        if (new or closing) and self.spill is not None:
            self.spill.append(key, new, held, self.ends.get(key.session_id), ended)
        while len(self.sessions) > MAX_HELD_SESSIONS:
            oldest = next(iter(self.sessions))
            self.dropped += len(self.sessions.pop(oldest)[1])
            self._forget(oldest)
        return len(new)

    def reopen(self, session_id: str) -> None:
        """The session binds anew after its held end (a compaction boundary, /resume): no end to mark."""
        if session_id in self.closed and session_id in self.sessions:
            self.hold(self.sessions[session_id][0], [])

    def _forget(self, session_id: str) -> None:
        self.ends.pop(session_id, None)
        self.closed.discard(session_id)
        if self.spill is not None:
            self.spill.forget(session_id)

    def _bound(self, held: list[dict[str, Any]]) -> None:
        chars = sum(len(str(m.get("content") or "")) for m in held)
        while held and (len(held) > MAX_HELD_MESSAGES or chars > MAX_HELD_CHARS):
            chars -= len(str(held.pop(0).get("content") or ""))
            self.dropped += 1

    def flush(self, store: MessageStore, skip: Callable[[dict[str, Any]], bool] | None = None) -> int:
        """Write every spilled session (of any process), then every held one (each one ingest); returns
        rows added. The files first: they keep what the memory bound dropped, and a held copy stored
        first would make those older messages look stored. Raises on a storage error, keeping what is
        not written yet."""
        added = self.spill.restore(store, skip) if self.spill is not None else 0
        for sid in sorted(self.sessions, key=lambda s: s in self.ends):  # an end's list last: it may repeat one
            key, held = self.sessions[sid]
            if held and not repeats_held_end(store, sid, self.ends.get(sid)):  # an end alone makes no row
                added += len(store.ingest(key, held, skip=skip).store_ids)
            if sid in self.closed:
                replay_end(store, sid)
            del self.sessions[sid]
            self._forget(sid)
        return added


def _new_from(raw: list[dict[str, Any]], held: list[dict[str, Any]]) -> int:
    """Where ``raw`` continues past ``held`` (0 when nothing is held): aligned on the held tail,
    else past the last message both share."""
    if not held:
        return 0
    plan = plan_aligned(raw, [message_identity(m) for m in held[-8:]])
    if plan.start >= 0:
        return plan.start
    known = {message_identity(m) for m in held}
    return max((i + 1 for i, m in enumerate(raw) if message_identity(m) in known), default=0)


@dataclass
class Runtime:
    config: TroveConfig
    db: Database
    store: MessageStore
    dag: SummaryDAG
    filters: SessionFilters
    llm: Any = None  # ctx.llm captured at register(); optional
    plugin_path: str = str(Path(__file__).resolve().parent)
    counters: dict[str, int] = field(default_factory=dict)
    # session id -> mode ("active", "ignored", "stateless") for sessions a trove engine serves here; written
    # through ``bind`` (oldest first, bounded by ``MAX_BOUND``), an entry goes at its session's end (``unbind``)
    bound_sessions: dict[str, str] = field(default_factory=dict)
    # whether each session's agent has the trove_* tools (its engine copy was asked for them; offers.py)
    tool_offers: ToolOffers = field(default_factory=ToolOffers)
    # delegate_task child session id -> the mode it took from the session that delegated (subagent_start);
    # an entry goes when the child's session ends (``inherit``/``release``), and past ``MAX_INHERITED``
    inherited_modes: dict[str, str] = field(default_factory=dict)
    health: StoreHealth = field(default_factory=StoreHealth)
    unstored: Unstored = field(default_factory=Unstored)
    degraded: str = ""  # set on the outbox view below: every tool reply carries it
    empty_gc_due: float = 0.0  # monotonic time before which a session's start skips the empty-row tidy-up
    marks: HistoryMarks = field(default_factory=HistoryMarks)  # where the per-turn hook last looked in each history
    compactions: LastCompactions = field(default_factory=LastCompactions)  # each session's newest, by any copy

    # the engine is typed loosely here: naming it would make runtime and engine import each other
    _foreground: weakref.ref[Any] | None = field(default=None, repr=False)
    _chats: weakref.WeakValueDictionary[str, Any] = field(default_factory=weakref.WeakValueDictionary, repr=False)

    def __deepcopy__(self, memo: dict[int, Any]) -> Runtime:
        return self

    def for_home(self, home: str) -> Runtime:
        """The runtime serving profile home ``home`` (``scoped_home()``): this one, or, when one process
        serves several profiles, that profile's own, built once from its settings and its ``trove.db``."""
        if not home:  # the common case, every turn: no profile scope, no path resolved
            return self
        key, own = os.path.realpath(home), os.path.realpath(self.config.hermes_home)
        if key == own:
            return self
        with _PROFILES_LOCK:
            _PROFILES.setdefault(own, self)
            if key in _UNSELECTED:
                raise StoreSelectionError(_UNSELECTED[key])
            if key not in _PROFILES:
                try:
                    _PROFILES[key] = build_runtime(load_config(profile_environ(key), hermes_home=key), llm=self.llm)
                except StoreSelectionError as exc:  # no other store is guessed: its turns must not go astray
                    _UNSELECTED[key] = (f"profile {Path(key).name!r}: {exc} (in {Path(key) / '.env'}); its agents"
                                        " run on Hermes' built-in compressor until that is fixed and the gateway"
                                        " restarted")
                    log.error("trove: %s", _UNSELECTED[key])
                    raise StoreSelectionError(_UNSELECTED[key]) from None
                _PROFILES[key].restore_spilled()
            return _PROFILES[key]

    def serving(self, session_id: str) -> Runtime:
        """The runtime of this process ``session_id`` was bound in: this one, or the served profile's that
        bound it (a gateway fires some hooks in no profile's scope: its session-expiry watcher); else this."""
        if not session_id or session_id in self.bound_sessions:
            return self
        with _PROFILES_LOCK:
            runtimes = list(_PROFILES.values())
        return next((r for r in runtimes if session_id in r.bound_sessions), self)

    def settle(self) -> None:
        """Before a background pass reads the store: ship this machine's waiting writes (a SQLite
        store has none); an unreachable server is the pass's own to find."""
        with contextlib.suppress(Exception):
            self.store.settle(timeout_s=5.0)

    def offline_view(self) -> Runtime | None:
        """While a PostgreSQL store is known to be unreachable: a runtime over the local outbox (this
        machine's own messages, shipped or not; no summaries), marked degraded. None otherwise."""
        store = self.store
        if not isinstance(store, ShippingStore) or not store.shipper.state.down_recently():
            return None
        note = (f"degraded: the PostgreSQL store is unreachable ({store.shipper.state.last_error[:160]}); this"
                " answer comes from this machine's own messages only (no summaries, no other machine's turns)")
        return Runtime(config=self.config, db=store.outbox.db, store=store.outbox.store,
                       dag=SummaryDAG(store.outbox.db), filters=self.filters, llm=self.llm,
                       bound_sessions=self.bound_sessions, tool_offers=self.tool_offers, degraded=note)

    def set_foreground(self, engine: Any) -> None:
        """Remember the engine copy that bound a session most recently, and each gateway chat's (for /trove)."""
        self._foreground = weakref.ref(engine)
        key = engine.state.key
        if key is not None and key.conversation_id:
            self._chats[key.conversation_id] = engine

    def foreground_engine(self, chat: str = "") -> Any:
        """The most recently bound engine copy still alive (of gateway chat ``chat``), or None."""
        if chat:
            return self._chats.get(chat)
        return self._foreground() if self._foreground is not None else None

    @property
    def payload_dir(self) -> Path:
        return payload_dir(self.config)

    def bump(self, name: str, n: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + n

    def visibility(self, key: SessionKey | None) -> Visibility:
        """What a caller bound to ``key`` may read across sessions (TROVE_MEMORY_SCOPE; no key = local)."""
        mode = self.config.memory_scope
        if mode == "profile":
            return Visibility()
        sid = key.session_id if key is not None else ""
        row = self.store.session(sid) if sid and self.health.usable else None  # an unusable store: the key's scope
        scope = row.scope if row is not None and row.scope else key.effective_scope if key is not None else "local"
        return Visibility(mode, scope, sid)

    def skip_message(self, message: dict[str, Any]) -> bool:
        """The ingest skip callback of every path (engine, hook): a filtered message is counted."""
        if self.filters.skip_message(message):
            self.bump("ignored_message_count")
            return True
        return False

    # -- sessions trove stores nothing for -----------------------------------------
    def unstored_reason(self, session_id: str, platform: str = "") -> str | None:
        """Why trove stores nothing for ``session_id`` (and so ends nothing of it), or None: an operator's
        ignore or stateless pattern, one of the host's side agents, or the mode it was bound in here (a
        cron job's delegated child is stateless like the job)."""
        bound = self.bound_sessions.get(session_id) or self.inherited_modes.get(session_id)
        return (self.filters.ignored_by(session_id, platform) or self.filters.stateless_by(session_id, platform)
                or host_side_agent(session_id, platform) or (f"{bound} session" if bound in UNSTORED else None))

    def bind(self, session_id: str, mode: str, tools: bool | None = None, answered: bool = False) -> None:
        """Remember that ``session_id`` is served here in ``mode``; bounded. Past ``MAX_BOUND`` the oldest active
        session's entry goes first: a session with no entry reads as one served by no trove engine here, so its
        hooks store and inject nothing (its engine copy still stores its turns at compaction, tool calls and its
        end, and its next bind brings the entry back). An ignored or stateless entry goes only when no other
        is active (a long-running gateway with that many unstored sessions that never ended): losing one could
        turn a delegated child that became stateless after its bind (``subagent_start``) into a stored one.
        ``tools``: whether the binding copy's agent has the trove_* tools (None: not known), ``answered``:
        whether that copy answered on the session before (``ToolOffers.bound``)."""
        self.unstored.reopen(session_id)  # a held end of it is no end now (a live bind clears the mark)
        with _BOUND_LOCK:
            self.bound_sessions.pop(session_id, None)
            self.bound_sessions[session_id] = mode  # newest last
            self.tool_offers.bound(session_id, tools, answered)
            while len(self.bound_sessions) > MAX_BOUND:  # never the session binding now
                active = (s for s, m in self.bound_sessions.items() if m not in UNSTORED and s != session_id)
                gone = next(active, next(iter(self.bound_sessions)))
                self.bound_sessions.pop(gone, None)
                self.tool_offers.ended(gone)

    def unbind(self, session_id: str) -> None:
        """Forget the binding of a session that ended (its next bind, a compaction boundary's too, brings it back)."""
        with _BOUND_LOCK:
            self.bound_sessions.pop(session_id, None)
            self.tool_offers.ended(session_id)  # what its agent had is kept: a compaction boundary binds it again
        self.marks.forget(session_id)  # they hold two of its messages each

    def note_tools(self, session_id: str, tools: bool) -> None:
        """The copy whose agent answers on bound ``session_id`` says whether it has the trove_* tools: its word wins
        over an earlier agent's kept by ``bind`` (a chat's agent rebuilt with other toolsets)."""
        if self.tool_offers.says(session_id, tools):  # every turn asks: the usual answer takes no lock
            return
        with _BOUND_LOCK:
            if session_id in self.bound_sessions:
                self.tool_offers.answered(session_id, tools)

    def helper_compacted(self, session_id: str) -> None:
        """A copy without the tools compacted ``session_id`` before answering there: a helper's bind decides nothing."""
        self.tool_offers.helper(session_id)

    def gives_tools(self, session_id: str, platform: str = "") -> bool:
        """Whether the agent of ``session_id`` has the trove_* tools: as its engine copy learnt it (Hermes asks a
        copy for them only when its agent's toolsets take the context engine's), else by its platform; a
        doubted offer reads as none (``ToolOffers``)."""
        return self.tool_offers.gives(session_id, platform)

    def inherit(self, child: str, mode: str) -> None:
        """Remember that delegated child ``child`` runs in ``mode``; bounded, the oldest entry goes first."""
        with _INHERITED_LOCK:
            self.inherited_modes.pop(child, None)
            self.inherited_modes[child] = mode  # newest last
            while len(self.inherited_modes) > MAX_INHERITED:
                self.inherited_modes.pop(next(iter(self.inherited_modes)), None)

    def inherited_mode(self, session_id: str, platform: str = "") -> str:
        """The mode delegated child ``session_id`` took from the session that delegated it ("" when none):
        its entry, or, once the bound evicted that while the child still runs, the mode it is bound in here
        when no pattern or side-agent rule gives it (only ``subagent_start`` binds a session so otherwise)."""
        inherited = self.inherited_modes.get(session_id, "")
        bound = self.bound_sessions.get(session_id, "")
        if inherited or bound not in UNSTORED or self.filters.ignored_by(session_id, platform) \
                or self.filters.stateless_by(session_id, platform) or host_side_agent(session_id, platform):
            return inherited
        return bound

    def release(self, session_id: str) -> str:
        """Forget the inherited mode of a child whose session ended; returns it ("" when none). The engine
        copy that ended it keeps it for a compaction boundary that follows (the host ends a session it
        compacts first)."""
        with _INHERITED_LOCK:
            return self.inherited_modes.pop(session_id, "")

    # -- store health -------------------------------------------------------
    def store_failed(self, exc: BaseException, where: str) -> bool:
        """Mark the store unusable when ``exc`` is a storage error (True), logging the first time."""
        reason = store_reason(exc)
        if reason is None:
            return False
        if self.health.fail(reason):
            log.error("trove: the store %s is unusable (%s, during %s); %s until it is usable again, retried in"
                      " %ds. Fix: %s", self.db.path, reason, where, DELEGATED, self.health.retry_in(),
                      store_fix(self.db.path, reason))
        else:
            log.info("trove: the store %s is still unusable (%s); next retry in %ds", self.db.path, reason,
                     self.health.retry_in())
        return True

    def restore_spilled(self) -> None:
        """At load: write what Hermes processes held on disk while the store was unusable (never raises;
        a storage error marks the store unusable, and the retry writes them). A server store holds nothing
        there, but writes what the home's file store held before it moved to the server."""
        spill = self.unstored.spill or Spill(Path(self.config.hermes_home) / SPILL_DIR)
        if not self.health.usable or not spill.pending():
            return
        try:
            log.info("trove: %d held messages from an earlier run stored", spill.restore(self.store, self.skip_message))
        except Exception as exc:
            if not self.store_failed(exc, "writing held messages"):
                log.exception("trove: writing held messages failed; they stay in %s", spill.folder)

    def to_outbox(self, key: SessionKey, messages: list[dict[str, Any]], where: str) -> bool:
        """Write ``messages`` to a server store's local outbox (no network); True when nothing is left to
        keep. False on a file store, and when the outbox failed too (logged): the caller holds them then."""
        if not self.store.local_writes:
            return False
        if self.unstored_reason(key.session_id, key.platform):
            return True
        try:
            self.store.ingest(key, messages, skip=self.skip_message)
        except Exception as exc:
            if not self.store_failed(exc, where):
                log.exception("trove: %s failed", where)
            return False
        return True

    def store_usable(self, key: SessionKey | None = None) -> bool:
        """True when trove may use its store now. While it is unusable, a retry runs once the backoff
        has passed: open the file, write the held transcripts and ``key``'s session row."""
        if self.health.usable:
            return True
        if self.health.clock() < self.health.retry_at:  # the backoff has not passed
            return False
        try:
            self.store.probe()
            written = self.unstored.flush(self.store, self.skip_message)
            if key is not None and key.session_id:
                self.store.ensure_session(key)
        except Exception as exc:
            if not self.store_failed(exc, "a retry"):
                self.health.fail(f"{type(exc).__name__}: {exc}")
            return False
        self.health.recover()
        log.warning("trove: the store %s is usable again; trove compaction resumes (%d held messages stored)",
                    self.db.path, written)
        return True


def open_database(config: TroveConfig) -> Database:
    """The store ``config`` selects: PostgreSQL when ``TROVE_DATABASE_URL`` is set (checked now, connected
    on first use), else the SQLite file. A bad URL or a missing driver raises ``StoreSelectionError``."""
    if config.database_url:
        return PgDatabase(config.database_url)  # type: ignore[return-value]
    return Database(database_path(config))


def build_runtime(config: TroveConfig | None = None, llm: Any = None) -> Runtime:
    """Build the runtime from a config (default: the environment)."""
    config = config if config is not None else load_config()
    db = open_database(config)
    if isinstance(db, PgDatabase):
        outbox = Outbox(outbox_path(database_path(config).parent), transform=storage_transform(config))
        store: MessageStore = ShippingStore(db, outbox, Shipper(outbox, db, payloads=SpoolDir(payload_dir(config))))
        unstored = Unstored()  # the outbox is on disk already
    else:
        store = MessageStore(db, transform=storage_transform(config))
        redactor = Redactor.from_config(config)
        scrub = partial(map_strings, fn=redactor.redact) if redactor.enabled and redactor.patterns else None
        unstored = Unstored(spill=Spill(Path(config.hermes_home) / SPILL_DIR, scrub))
    return Runtime(config=config, db=db, store=store, dag=SummaryDAG(db),
                   filters=SessionFilters.from_config(config), llm=llm, unstored=unstored)
