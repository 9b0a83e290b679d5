"""One import run: plan (dry run) or apply, over SQLite or JSONL sources.

Every run walks the source once per pass and counts the same way; an apply first makes a cheap pass
that stops at the first new row (nothing new: no backup, no write), then backs up an existing target
and writes everything inside ONE transaction, so the target ends up either untouched or fully imported.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import load_config
from ..pathprobe import sidecar_of
from ..runtime import build_runtime
from ..scope import LOCAL
from ..store import SessionKey
from . import jsonl, pipe
from .claw_db import ClawSource, Conversation
from .report import ImportFailure, ImportReport
from .rows import SKIP_BRANCH, SKIP_EMPTY, SKIP_INVALID, SKIP_SYNTHETIC, SourceMessage, SourceSummary, Unit, batches
from .target import (
    BackgroundSync,
    ReadOnlyLedger,
    Writer,
    backup,
    default_import_id,
    discard,
    imported_session_ids,
    publish,
    staging_file,
    unjournaled,
)

if TYPE_CHECKING:
    from ..runtime import Runtime

DRY = -1      # "would be stored" marker for dry runs
SKIPPED = 0   # a deliberately skipped source message (empty, synthetic): summaries may ignore it
IDENTITIES = ("session_id", "session_key")
Units = Callable[[], Iterator[Unit]]  # each call walks the source's units once more


@dataclass(frozen=True)
class ImportOptions:
    target_db: str
    source_db: str | None = None
    source_jsonl: tuple[str, ...] = ()
    source_jsonl_dirs: tuple[str, ...] = ()
    agent: str = "unknown"
    namespace: str | None = None
    session_identity: str = "session_id"
    import_id: str | None = None
    include_summaries: bool = False
    apply: bool = False
    remaps: tuple[tuple[str, str], ...] = ()
    busy_timeout_s: float = 2.0
    batch_size: int = 500
    reader_process: bool = True   # apply: convert a SQLite source in a forked child while writing
    allow_duplicate_sources: bool = False  # import sessions another source already brought in
    progress: Callable[[int], None] | None = None  # called with the rows scanned so far, per batch


def validate(opts: ImportOptions) -> None:
    """Reject contradictory options before anything is opened."""
    has_jsonl = bool(opts.source_jsonl or opts.source_jsonl_dirs)
    if not opts.target_db:
        raise ImportFailure("--target-db is required")
    sidecar = sidecar_of(opts.target_db)
    if sidecar is not None:
        raise ImportFailure(f"--target-db {opts.target_db} is the {sidecar[1][1:]} file SQLite keeps beside the"
                            f" database {sidecar[0]}, which SQLite deletes or truncates when that database"
                            " checkpoints or closes: give the database file itself or a file of its own")
    if bool(opts.source_db) == has_jsonl:
        raise ImportFailure("give exactly one kind of source: --source-db, or --source-jsonl/--source-jsonl-dir")
    if opts.session_identity not in IDENTITIES:
        raise ImportFailure(f"--session-identity must be one of {', '.join(IDENTITIES)}")
    if has_jsonl and opts.include_summaries:
        raise ImportFailure("--include-summaries needs --source-db: JSONL exports carry no summary DAG")
    if has_jsonl and opts.session_identity != "session_id":
        raise ImportFailure("--session-identity applies to --source-db only")
    if not opts.agent or ":" in opts.agent:
        raise ImportFailure("--agent must be a non-empty label without ':'")


def target_session(namespace: str, agent: str, session: str) -> str:
    return f"{namespace}:agent:{agent}:{session}"


def run_import(opts: ImportOptions, env: Mapping[str, str] | None = None) -> ImportReport:
    """Run one import and return its report; raises ImportFailure when nothing could run."""
    validate(opts)
    target = Path(opts.target_db).expanduser().resolve()
    report = ImportReport(mode="apply" if opts.apply else "dry-run", target_db=str(target), agent=opts.agent,
                          session_identity=opts.session_identity)
    source: ClawSource | None = None
    try:
        if opts.source_db:
            source = ClawSource(opts.source_db, opts.remaps, opts.busy_timeout_s)
            for note in source.notes:
                report.warn(note)
            report.source_kind, report.source_db = "sqlite", str(source.path)
            report.namespace = opts.namespace or "openclaw-trove"
            paths: Sequence[Path] = [source.path]
            units = _sqlite_units(source, opts.session_identity)
        else:
            files, problems = jsonl.expand_sources(opts.source_jsonl, opts.source_jsonl_dirs)
            for p in problems:
                report.warn(p)
            if not files:
                raise ImportFailure("no readable JSONL source: " + "; ".join(problems))
            report.source_kind, report.source_jsonl = "jsonl", [str(p) for p in files]
            report.namespace = opts.namespace or "openclaw-jsonl"
            paths = files
            units = _jsonl_units(files)
        report.import_id = opts.import_id or default_import_id(paths)
        dedupe = _without_duplicates(target, report, opts)
        units = dedupe(units)
        if not opts.apply:
            _pass(units, ReadOnlyLedger(target), None, report, opts)
            return report
        probe = dataclasses.replace(report, warnings=[])
        if not _pass(units, ReadOnlyLedger(target), None, probe, opts, stop_early=True):
            probe.warnings = report.warnings + probe.warnings
            probe.skipped_duplicate_sessions = report.skipped_duplicate_sessions
            return probe  # nothing new: no backup, no write
        _write(units, dedupe, source, target, report, opts, env)
        return report
    finally:
        if source is not None:
            if source.undecodable:
                report.warn(f"{len(source.undecodable)} source value(s) held text whose bytes are no UTF-8: it was read"
                            " with U+FFFD in place of those bytes")
            source.close()


def source_identity(session_id: str) -> tuple[str, str] | None:
    """``(agent, source session)`` of an imported session id ``<namespace>:agent:<agent>:<session>``."""
    _, sep, rest = session_id.partition(":agent:")
    agent, sep2, session = rest.partition(":")
    return (agent, session) if sep and sep2 and session else None


def _without_duplicates(target: Path, report: ImportReport, opts: ImportOptions) -> Callable[[Units], Units]:
    """A filter marking source sessions another source (other namespace) already imported, unless
    allowed: their rows are scanned and counted as existing, never written. Every pass applies it.

    The same OpenClaw session read from the SQLite database and from its JSONL export has the
    same agent and session id; importing both would store every message twice.
    """
    seen: dict[tuple[str, str], str] = {}
    for sid in imported_session_ids(target):
        ident = source_identity(sid)
        if ident is not None and not sid.startswith(report.namespace + ":agent:"):
            seen.setdefault(ident, sid)
    if not seen:
        return lambda units: units
    if opts.allow_duplicate_sources:
        report.warn("--allow-duplicate-sources: sessions already imported from another source are imported again")
        return lambda units: units

    skipped: set[str] = set()  # counted once although every pass walks the units

    def filtered(units: Units) -> Iterator[Unit]:
        for unit in units():
            other = seen.get((opts.agent, unit.session))
            if other is None:
                yield unit
                continue
            if unit.session not in skipped:
                skipped.add(unit.session)
                report.skipped_duplicate_sessions += 1
                report.warn(f"{unit.label}: source session {unit.session!r} is already imported as {other!r}"
                            " (the same OpenClaw session from another source); skipped."
                            " Pass --allow-duplicate-sources to import it again")
            yield dataclasses.replace(unit, summaries=None, imported_as=other)  # scanned, never written
    return lambda units: lambda: filtered(units)


def _write(units: Units, dedupe: Callable[[Units], Units], source: ClawSource | None, target: Path,
           report: ImportReport, opts: ImportOptions, env: Mapping[str, str] | None) -> None:
    """The writing pass: into the existing target after a backup, or into a staged new one."""
    staged = None if target.exists() else staging_file(target)
    if staged is None:
        report.backup_path = backup(target)
    try:
        config = dataclasses.replace(load_config(os.environ if env is None else env),
                                     database_path=str(staged or target))
        runtime = build_runtime(config)  # opens nothing yet: safe to fork the reader after it
        reader = _reader(source, runtime, report.namespace, opts)
        syncing = None
        try:
            if staged is not None:
                unjournaled(runtime.db.connect())
                syncing = BackgroundSync(staged)
            if reader is not None and source is not None:
                units = dedupe(_sqlite_units(source, opts.session_identity, reader))  # the same sessions skipped
            _apply(units, runtime, report, opts)
            if staged is not None:
                runtime.db.connect().execute("PRAGMA journal_mode=WAL")  # what Hermes will open
        finally:
            if syncing is not None:
                syncing.stop()
            if reader is not None:
                reader.close()
            runtime.db.close()
        if staged is not None:
            publish(staged, target)
    finally:
        if staged is not None:
            discard(staged)


def _apply(units: Callable[[], Iterator[Unit]], runtime: Runtime, report: ImportReport, opts: ImportOptions) -> None:
    with runtime.db.transaction() as conn:
        writer = Writer(runtime, conn, report.import_id)
        writer.record_import(report.source_kind, [report.source_db] if report.source_db else report.source_jsonl,
                             {"agent": opts.agent, "namespace": report.namespace,
                              "session_identity": opts.session_identity,
                              "include_summaries": opts.include_summaries})
        _pass(units, writer, writer, report, opts)


def _reader(source: ClawSource | None, runtime: Runtime, namespace: str,
            opts: ImportOptions) -> pipe.ForkedReader | None:
    """A child process converting the source (and preparing store rows) for the writing pass."""
    if source is None or not opts.reader_process or not pipe.available():
        return None
    sessions = [(c.conversation_id, target_session(namespace, opts.agent, session_of(c, opts.session_identity)))
                for c in source.conversations()]
    return pipe.ForkedReader(str(source.path), sessions, runtime.store, opts.remaps, opts.busy_timeout_s,
                             opts.batch_size)


def session_of(conv: Conversation, identity: str) -> str:
    """The source session a conversation's messages belong to, before namespacing."""
    return (conv.session_key if identity == "session_key" else None) or conv.session_id \
        or f"conversation:{conv.conversation_id}"


def _sqlite_units(source: ClawSource, identity: str,
                  reader: pipe.ForkedReader | None = None) -> Callable[[], Iterator[Unit]]:
    def unit(conv: Conversation) -> Unit:
        session = session_of(conv, identity)
        messages = ((lambda: reader.messages(conv.conversation_id)) if reader is not None
                    else (lambda: source.messages(conv)))
        return Unit(label=f"conversation {conv.conversation_id}", session=session,
                    messages=messages, summaries=lambda: source.summaries(conv))
    return lambda: (unit(c) for c in source.conversations())


def _jsonl_units(files: Sequence[Path]) -> Callable[[], Iterator[Unit]]:
    def gen() -> Iterator[Unit]:
        for path in files:
            try:
                yield jsonl.read_file(path)
            except OSError as exc:
                yield Unit(label=str(path), session=path.stem, messages=lambda: (),
                           notes=(f"{path}: unreadable: {exc}",))
    return gen


_SKIP_COUNTER = {SKIP_EMPTY: "skipped_empty", SKIP_SYNTHETIC: "skipped_synthetic", SKIP_BRANCH: "skipped_branch",
                 SKIP_INVALID: "invalid_rows"}


def _live(batch: list[SourceMessage], report: ImportReport, states: dict[Any, int] | None) -> list[SourceMessage]:
    """The rows of ``batch`` to store; skipped rows, notes and resolved files are counted on ``report``."""
    live: list[SourceMessage] = []
    for m in batch:
        report.scanned += 1
        if m.note:
            report.warn(m.note)
        if m.skip:
            setattr(report, _SKIP_COUNTER[m.skip], getattr(report, _SKIP_COUNTER[m.skip]) + 1)
            if states is not None and m.skip in (SKIP_EMPTY, SKIP_SYNTHETIC):
                states[m.source_id] = SKIPPED
            continue
        if m.meta and '"externalized_file"' in m.meta:
            report.files_resolved += 1
        elif m.meta and '"unresolved_file"' in m.meta:
            report.files_unresolved += 1
        live.append(m)
    return live


def _pass(units: Callable[[], Iterator[Unit]], ledger: Any, writer: Writer | None, report: ImportReport,
          opts: ImportOptions, stop_early: bool = False) -> bool:
    """Walk every unit once, counting (and writing when ``writer`` is set). True if anything is new."""
    import_id = report.import_id
    sessions: set[str] = set()
    try:
        for unit in units():
            report.conversations += 1
            for note in unit.notes:
                report.warn(note)
            sid = target_session(report.namespace, opts.agent, unit.session)
            # The profile owner's history: the owner's local sessions read it, gateway chats do not.
            key = SessionKey(sid, platform="openclaw", source=sid, scope=LOCAL)
            states: dict[Any, int] | None = {} if opts.include_summaries and unit.summaries else None
            lossy = 0
            for batch in batches(unit.messages(), opts.batch_size):
                live = _live(batch, report, states)
                if unit.imported_as:  # already imported from another source: eligible, not new
                    report.eligible += len(live)
                    report.skipped_existing += len(live)
                    continue
                lossy += sum(1 for m in live if m.meta and '"lossy"' in m.meta)
                if not live:
                    continue
                existing = ledger.messages(import_id, [m.key for m in live])
                new = [m for m in live if m.key not in existing]
                if opts.progress is not None:
                    opts.progress(report.scanned)
                report.eligible += len(live)
                report.skipped_existing += len(live) - len(new)
                report.would_import += len(new)
                sessions.add(sid)
                if stop_early and new:
                    return True
                ids = writer.append(key, new) if writer is not None and new else [DRY] * len(new)
                if writer is not None:
                    report.imported += len(ids)
                if states is not None:
                    states.update({m.source_id: existing[m.key] for m in live if m.key in existing})
                    states.update({m.source_id: i for m, i in zip(new, ids, strict=True)})
            if writer is not None and sid in sessions:
                writer.settle_session_times(sid)
            if lossy:
                report.warn(f"{unit.label}: {lossy} row(s) rebuilt from plain text only (the source kept no "
                            "message_parts for them: tool calls and tool call ids were never recorded)")
            if states is not None and unit.summaries is not None:
                if _summaries(unit.summaries(), sid, states, ledger, writer, report, unit.label) and stop_early:
                    return True
    finally:
        if writer is None:  # a dry run's ReadOnlyLedger; the writer's connection is the caller's
            ledger.close()
    report.sessions = len(sessions)
    return report.would_import + report.summaries_would_import > 0


def _summaries(nodes: list[SourceSummary], sid: str, states: dict[Any, int], ledger: Any, writer: Writer | None,
               report: ImportReport, label: str) -> bool:
    """Import a conversation's DAG bottom-up; a node waits until all its sources exist."""
    report.summaries_scanned += len(nodes)
    existing = ledger.nodes(report.import_id, [s.key for s in nodes])
    resolved = {s.summary_id: (existing[s.key], s.depth) for s in nodes if s.key in existing}
    pending = [s for s in nodes if s.key not in existing]
    report.summaries_skipped_existing += len(nodes) - len(pending)
    found = False
    progress = True
    while pending and progress:
        progress, waiting = False, []
        for s in pending:
            plan = _resolve(s, states, resolved)
            if plan is None:
                waiting.append(s)
                continue
            depth, sources = plan
            node = writer.add_node(sid, s, depth, sources) if writer is not None else DRY
            resolved[s.summary_id] = (node, depth)
            report.summaries_would_import += 1
            report.summaries_imported += writer is not None
            progress = found = True
        pending = waiting
    for s in pending:
        report.summaries_skipped_unresolved += 1
        report.warn(f"{label}: summary {s.summary_id} not imported: some of its sources were not imported")
    return found


def _resolve(s: SourceSummary, states: dict[Any, int], resolved: dict[str, tuple[int, int]]
             ) -> tuple[int, list[int]] | None:
    """(depth, source ids) once every source of ``s`` exists in the target, else None."""
    if s.child_ids:
        if not all(c in resolved for c in s.child_ids):
            return None
        return max(resolved[c][1] for c in s.child_ids) + 1, [resolved[c][0] for c in s.child_ids]
    found = [states.get(mid) for mid in s.message_ids]  # None: not in the target (yet)
    mapped = [state for state in found if state is not None and state != SKIPPED]
    return (0, mapped) if mapped and None not in found else None
