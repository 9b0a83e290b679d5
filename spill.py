"""Held transcripts on disk: what ``runtime.Unstored`` holds while the store takes no writes, appended
to one JSON-lines file per session under ``<HERMES_HOME>/trove-held/``, so a Hermes that exits before
the store is usable again loses none of it. The next start or recovery, in any process, writes each
file into the store and removes it once that is committed. A PostgreSQL store never spills: its local
outbox is on disk already. This module owns the files; what to hold is ``Unstored``'s business.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from .backend import storage_error
from .ingest import EndCursor, Identify, end_cursor, message_identity, repeats_cursor
from .rows import SessionKey

try:
    import fcntl
except ImportError:  # pragma: no cover - no flock on this platform: one Hermes per home is assumed
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from .store import MessageStore

log = logging.getLogger("hermes_trove.spill")
SPILL_DIR = "trove-held"
MAX_SPILL_BYTES = 64_000_000  # per session file (or twice its last rewrite): past it, the held copy replaces it
_KEY_FIELDS = {f.name for f in fields(SessionKey)}
Run = tuple[SessionKey, list[Any], list[str]]  # one process's held transcript of a session, with identities
# A transcript held from a session's end that may be another session's list (no model answer in it here): the
# end's cursor and the sessions it may repeat. It is replayed as a normal end is stored: only if it repeats none.
HeldEnd = tuple[EndCursor, tuple[str, ...]]


def held_end(session_id: str, messages: Sequence[Any], left: str, answered: str) -> HeldEnd | None:
    """What a held end of ``session_id`` with the list ``messages`` must remember (``left`` and ``answered``
    as ``ingest.repeats_previous`` takes them); None after a model answer in the session: the list is its own."""
    if not messages or answered == session_id:
        return None
    return end_cursor(messages), tuple(s for s in (left, answered) if s and s != session_id)


def repeats_held_end(store: Any, session_id: str, end: HeldEnd | None) -> bool:
    """Whether the held end ``end`` of ``session_id`` only repeats what another session was stored from
    (``ingest.repeats_previous``'s rule, read now that the store takes writes); False without ``end``."""
    if end is None:
        return False
    row = store.owner(session_id)
    others = {*end[1], row.previous_session_id if row is not None else ""} - {session_id}
    return repeats_cursor(store.owner, end[0], others)


def spill_line(run: str, key: SessionKey, messages: Sequence[dict[str, Any]],
               scrub: Callable[[Any], Any] | None = None, end: HeldEnd | None = None, ended: bool = False) -> bytes:
    """One batch as a JSON line: the run it continues, the session, each message's identity (of the
    message as shown, so a later ingest aligns it) and the messages, each passed through ``scrub``; and,
    for a run held only from an end (``HeldEnd``), that end; ``ended``: the session ended after these."""
    shown = [scrub(m) for m in messages] if scrub is not None else list(messages)
    record: dict[str, Any] = {"run": run, "key": asdict(key), "ids": [message_identity(m) for m in messages],
                              "messages": shown}
    if end is not None:
        record["end"] = [end[0][0], end[0][1], list(end[1])]
    if ended:
        record["ended"] = True
    return json.dumps(record, default=str).encode("ascii") + b"\n"


def _held_end(value: Any) -> HeldEnd | None:
    """A spill line's "end" as ``HeldEnd``; None when absent or damaged: the run is then replayed whole,
    as a line without the field is (nothing is lost; at worst an end's list is stored once more)."""
    if not (isinstance(value, list) and len(value) == 3 and isinstance(value[1], str)
            and isinstance(value[2], list) and all(isinstance(s, str) for s in value[2])):
        return None
    try:
        return (int(value[0]), value[1]), tuple(value[2])
    except (ValueError, TypeError, OverflowError):
        return None


def read_held(data: bytes) -> list[tuple[Run, HeldEnd | None, bool]]:
    """Each run's transcript in a spill file, in order, with the file's newest session key, the end the
    run was held from when its last whole line names one (else None), and whether that line says the
    session ended; a line that does not parse (a write torn by a kill or a full disk) or is not whole
    (no session, an id per message) is skipped."""
    key = None
    runs: dict[str, tuple[list[Any], list[str], list[Any]]] = {}
    for line in data.split(b"\n"):
        try:
            record = json.loads(line)
            messages, ids = list(record["messages"]), [str(i) for i in record["ids"]]
            named = SessionKey(**{k: str(v) for k, v in record["key"].items() if k in _KEY_FIELDS})
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
        if len(messages) == len(ids) and named.session_id:  # its key too is only a whole line's
            key = named
            held, known, last = runs.setdefault(str(record.get("run")), ([], [], [None, False]))
            held += messages
            known += ids
            last[:] = [_held_end(record.get("end")), record.get("ended") is True]
    return [((key, held, known), *last) for held, known, last in runs.values()] if key is not None else []


def replay_end(store: Any, session_id: str) -> None:
    """Mark the end of ``session_id`` that was held, as a live end marks it: a session with a row only, and
    not again when it is marked already (a held copy replayed from its file and from memory)."""
    row = store.session(session_id)
    if row is not None and row.ended_at is None:
        store.mark_ended(session_id)


def _identities(messages: list[Any], ids: list[str]) -> Identify:
    known = {id(m): i for m, i in zip(messages, ids, strict=True)}
    return lambda m: known.get(id(m)) or message_identity(m)


def _read(path: Path) -> bytes | None:
    """A held file's bytes, read under its lock; None when it is gone, is no regular file (a folder, or a
    pipe whose open would wait for a writer) or cannot be read (logged: it stays, the others go on)."""
    if not path.is_file():
        return None
    try:
        with _locked(path, create=False) as f:
            return f.read() if f is not None else None
    except OSError as exc:  # this entry's fault, not the store's
        log.warning("trove: the held messages in %s cannot be read (%s); the file stays", path, exc)
        return None


@contextlib.contextmanager
def _locked(path: Path, create: bool) -> Iterator[IO[bytes] | None]:
    """``path`` open and locked against other processes (None when it is gone and not ``create``);
    a file that was replaced or removed while this waited for the lock is opened anew."""
    while True:
        try:
            fd = os.open(path, (os.O_RDWR | os.O_CREAT) if create else os.O_RDONLY, 0o600)
        except FileNotFoundError:
            if create:
                raise
            yield None
            return
        f = os.fdopen(fd, "r+b" if create else "rb")
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        if os.fstat(fd).st_nlink:
            break
        f.close()
    with f:
        yield f


def _sync(fd: int) -> None:
    """fsync ``fd``; a file system that cannot sync (some network and FUSE mounts) keeps what was written."""
    with contextlib.suppress(OSError):
        os.fsync(fd)


def _sync_dirs(*folders: Path) -> None:
    """Make the entries of ``folders`` durable; a file system that cannot sync a folder is left as it is."""
    for folder in folders:
        with contextlib.suppress(OSError):
            fd = os.open(folder, os.O_RDONLY)
            try:
                _sync(fd)
            finally:
                os.close(fd)


@dataclass
class Spill:
    """The spill folder of one Hermes home. ``append`` never raises (a failure is logged once and
    the held copy stays in memory only); ``restore`` raises on a storage error, keeping the files."""

    folder: Path
    scrub: Callable[[Any], Any] | None = None  # a message redacted, when redaction is on: no secret reaches the files
    runs: dict[str, str] = field(default_factory=dict)  # session id -> the run this process appends to
    rewritten: dict[str, int] = field(default_factory=dict)  # session id -> the size its last rewrite left
    failed: bool = False

    def path(self, session_id: str) -> Path:
        digest = hashlib.blake2b(session_id.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()
        return self.folder / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', session_id)[:64]}-{digest}.jsonl"

    def forget(self, session_id: str) -> None:
        """The held copy of the session is gone from memory: a later one starts a new run."""
        self.runs.pop(session_id, None)
        self.rewritten.pop(session_id, None)

    def append(self, key: SessionKey, new: Sequence[dict[str, Any]], held: Sequence[dict[str, Any]],
               end: HeldEnd | None = None, ended: bool = False) -> None:
        """Add ``new`` to the session's file, or all of ``held`` as a new run when this process has no
        run there yet (a first spill, a file another process wrote into the store, a failed write);
        ``end``: the held copy is only an end's list so far (``HeldEnd``); ``ended``: the session ended."""
        run = self.runs.pop(key.session_id, "")
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            path = self.path(key.session_id)
            with _locked(path, create=True) as f:
                assert f is not None
                size = f.seek(0, os.SEEK_END)
                continues = bool(run and size)
                run = run if continues else uuid.uuid4().hex
                line = spill_line(run, key, new if continues else held, self.scrub, end, ended)
                # bounded: the held copy alone replaces the file; past twice its size when that is larger,
                # so a held copy over the bound is not copied again at every append
                if size + len(line) > max(MAX_SPILL_BYTES, 2 * self.rewritten.get(key.session_id, 0)):
                    run = uuid.uuid4().hex
                    data = spill_line(run, key, held, self.scrub, end, ended)
                    self._replace(path, data)
                    self.rewritten[key.session_id] = len(data)
                else:
                    if size:
                        f.seek(size - 1)
                        line = line if f.read(1) == b"\n" else b"\n" + line  # end a torn line first
                    f.write(line)
                    f.flush()
                    _sync(f.fileno())  # one fsync per held write: holding is rare, a power loss keeps it
            if not size:  # a new file: its name (and a new folder's) must survive a power loss too
                _sync_dirs(self.folder, self.folder.parent)
            self.runs[key.session_id] = run
        except Exception as exc:
            if not self.failed:
                self.failed = True
                log.warning("trove: held messages cannot be saved in %s (%s); until the store is usable they are"
                            " kept in memory only, and lost if Hermes exits first", self.folder, exc)

    def _replace(self, path: Path, data: bytes) -> None:
        temp = path.with_name(path.name + ".tmp")
        with os.fdopen(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as out:
            out.write(data)
            out.flush()
            _sync(out.fileno())
        os.replace(temp, path)
        _sync_dirs(path.parent)

    def pending(self) -> int:
        """How many session files wait to be written into the store."""
        return len(list(self.folder.glob("*.jsonl")))

    def restore(self, store: MessageStore, skip: Callable[[dict[str, Any]], bool] | None = None) -> int:
        """Write every spilled session into ``store``, each run one ingest (which adds only what is not
        stored yet), and remove a file once that is committed unless it grew meanwhile; returns rows added.
        A run held only from an end (``HeldEnd``) goes last, and only if it repeats no other session's list."""
        added, later = 0, []
        for path in sorted(self.folder.glob("*.jsonl")):
            count, held_at = self._restore_unless_ended(store, skip, path)
            added += count
            later += held_at
        for _, path in sorted(later):  # in the order they were held: an end may repeat the one before
            data = _read(path)  # read again now: one file in memory at a time
            if data is not None:
                added += self._restore_file(store, skip, path, data, read_held(data))
        return added

    def _restore_unless_ended(self, store: MessageStore, skip: Callable[[dict[str, Any]], bool] | None,
                              path: Path) -> tuple[int, list[tuple[int, Path]]]:
        """Restore the file at ``path`` (rows added, []) unless a run in it was held from an end: then
        (0, [(its mtime, path)]) for later ([] when it is gone)."""
        data = _read(path)
        if data is None:
            return 0, []
        runs = read_held(data)
        if any(end is not None for _, end, _ in runs):
            try:
                return 0, [(path.stat().st_mtime_ns, path)]
            except OSError:
                return 0, []
        return self._restore_file(store, skip, path, data, runs), []

    def _restore_file(self, store: MessageStore, skip: Callable[[dict[str, Any]], bool] | None, path: Path,
                      data: bytes, runs: list[tuple[Run, HeldEnd | None, bool]]) -> int:
        added = 0
        try:
            for (key, messages, ids), end, ended in runs:
                if messages and not repeats_held_end(store, key.session_id, end):  # an end alone makes no row
                    added += len(store.ingest(key, messages, skip=skip, identity=_identities(messages, ids)).store_ids)
                if ended:
                    replay_end(store, key.session_id)
        except Exception as exc:
            if storage_error(exc):
                raise
            log.exception("trove: the held messages in %s cannot be stored; the file stays", path)
            return added  # one bad file must not keep the store from recovering
        with contextlib.suppress(OSError), _locked(path, create=False) as f:  # else a later restore retries
            if f is not None and os.fstat(f.fileno()).st_size == len(data):
                path.unlink()
        return added
