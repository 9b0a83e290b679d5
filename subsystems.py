"""The opt-in subsystems, one ``Subsystem`` row each: embeddings, rollups, assertions.

A row says what the host edge and the operators do for its family: the config switch, its
opt-in migration set, the background work it starts on an event (plugin load, session start,
a stored turn, a compaction), its status section and doctor checks, its ``/trove`` subcommands
and any text it adds before the model answers. Engine, hooks, command, status and doctor loop
over ``SUBSYSTEMS`` and name no family; the work itself stays in the families.
"""
from __future__ import annotations

import logging
import sqlite3
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .models import Complete
from .retrieval import indexer
from .state import extract, preanswer
from .state.assertion_store import FEATURE as STATE_TABLES
from .state.assertion_store import AssertionStore
from .temporal import rollups
from .toolkit import echo
from .version import install_hint

if TYPE_CHECKING:
    from .runtime import Runtime

log = logging.getLogger("hermes_trove.subsystems")

EVENTS = ("load", "session_start", "turn", "compaction")
Completion = Callable[[], Complete | None]  # asked for the model only when a pass starts
Check = tuple[str, str, str]  # a doctor check's (status, detail, guidance or "")


@dataclass(frozen=True)
class Request:
    """One run of a subsystem's subcommand."""

    runtime: Runtime
    words: tuple[str, ...]  # the words after the subcommand's own
    model: Completion       # the model an operator's run writes with (None: no model in this process)
    in_host: bool           # inside Hermes (runs are bounded) or the CLI (runs to the end, shows progress)


Handler = Callable[[Request], dict[str, Any]]


@dataclass(frozen=True)
class Subsystem:
    name: str
    switch: str                  # the TroveConfig field that turns it on
    migrations: str | None       # its opt-in set in migrations.OPTIONAL_MIGRATIONS (None: core tables only)
    background: Mapping[str, Callable[[Runtime, Completion], object]]  # event -> start its pass
    commands: Mapping[tuple[str, ...], tuple[Handler, str]]  # /trove words -> (handler, help line)
    usage: str                   # its part of the /trove usage line
    takes_words: tuple[tuple[str, ...], ...] = ()  # subcommands whose trailing words are arguments
    section: str = ""            # its key in the status report ("": none)
    status: Callable[[Runtime], dict[str, Any]] | None = None
    inspect_omits: tuple[str, ...] | None = None  # trove_inspect shows its section without these (None: not at all)
    checks: tuple[tuple[str, Callable[[Runtime, sqlite3.Connection, dict[str, Any]], Check]], ...] = ()
    before_answer: Callable[[Runtime, str, str], str] | None = None  # (runtime, user message, session) -> text


def start(event: str, runtime: Runtime, completion: Completion = lambda: None) -> None:
    """Start each subsystem's background work for ``event``; a failure is logged, never raised."""
    for row in SUBSYSTEMS:
        begin = row.background.get(event)
        if begin is None:
            continue
        try:
            begin(runtime, completion)
        except Exception:
            log.exception("trove: %s did not start its background work (%s); the rest carries on", row.name, event)


# -- embeddings -----------------------------------------------------------------------------------

def _backfill(r: Request) -> dict[str, Any]:
    """Inside Hermes a backfill is bounded; the CLI runs it to the end, with progress on a terminal."""
    progress = None if r.in_host else indexer.tty_progress()
    result = indexer.backfill(r.runtime, max_seconds=60.0 if r.in_host else None, progress=progress)
    if progress is not None:
        sys.stderr.write("\n")
    return result


def _check_embeddings(runtime: Runtime, conn: sqlite3.Connection, ctx: dict[str, Any]) -> Check:
    report = indexer.status(runtime)
    if not report.get("enabled"):
        return "pass", "embeddings off (full-text retrieval only)", ""
    if not report.get("available"):
        return "warn", str(report.get("unavailable_reason")), \
            f"install the extra: {install_hint('embeddings')}"
    detail = (f"{report.get('provider')}, generation {report.get('generation')} ({report.get('generation_state')}),"
              f" coverage {report.get('coverage')}, backlog {report.get('backlog')}, worker {report.get('worker')}")
    if report.get("last_error"):
        return "warn", f"{detail}; last error: {report['last_error']}", \
            "check the provider (base URL, key variable, spend guard); /trove embed warmup tests it"
    return "pass", detail, ""


EMBEDDINGS = Subsystem(
    name="embeddings", switch="embeddings_enabled", migrations=None,
    background={"load": lambda runtime, completion: indexer.start_background(runtime)},
    commands={("embed",): (lambda r: indexer.status(r.runtime),
                           "embeddings: provider, generation, coverage, backlog, last error"),
              ("embed", "status"): (lambda r: indexer.status(r.runtime), "the same"),
              ("embed", "warmup"): (lambda r: indexer.warmup(r.runtime),
                                    "load the embedding provider and embed one text"),
              ("embed", "backfill"): (_backfill, "index every pending row now (60 s per call inside Hermes; the CLI"
                                                 " runs to the end)")},
    usage="embed [status|warmup|backfill]",
    section="embeddings", status=indexer.status, inspect_omits=("generations", "last_pass"),
    checks=(("embeddings", _check_embeddings),))


# -- rollups --------------------------------------------------------------------------------------

def _rollups_rebuild(r: Request) -> dict[str, Any]:
    scopes = [w[len("scope="):] for w in r.words if w.lower().startswith("scope=")]
    words = [w for w in r.words if not w.lower().startswith("scope=")]
    apply = bool(words) and words[-1] == "apply"
    words = words[:-1] if apply else words
    if not 1 <= len(words) <= 2 or len(scopes) > 1:
        return {"status": "usage", "error": "usage: rollups rebuild day|week|month|all [DATE] [scope=SCOPE] [apply]"}
    # Inside Hermes the live engine's model (or the plugin's host model) writes the rollups;
    # a bare `python -m hermes_trove` has none, so it only marks them for Hermes to rebuild.
    complete = r.model()
    return rollups.rebuild(r.runtime, complete, words[0], words[1] if len(words) == 2 else None,
                           apply=apply, build=complete is not None, scope=scopes[0] if scopes else None)


ROLLUPS = Subsystem(
    name="rollups", switch="temporal_rollups_enabled", migrations=None,
    background={"session_start": lambda runtime, completion: rollups.schedule(runtime, completion),
                "compaction": lambda runtime, completion: rollups.schedule(runtime, completion, force=True)},
    commands={("rollups",): (lambda r: rollups.status(r.runtime), "temporal rollups: counts per status, model spend"),
              ("rollups", "rebuild"): (_rollups_rebuild, "day|week|month|all [DATE] [scope=SCOPE] [apply]: preview,"
                                                         " or mark stale and rebuild in one bounded pass (needs"
                                                         " TROVE_TEMPORAL_ROLLUPS_ENABLED)")},
    usage="rollups [rebuild day|week|month|all [DATE] [apply]]", takes_words=(("rollups", "rebuild"),))


# -- assertions (remembered state) ----------------------------------------------------------------

def _assertions(r: Request) -> dict[str, Any]:
    """``assertions [status] | rebuild [--apply] [--limit N] [--reset] | drop [--apply]``."""
    words = [w.lower() for w in r.words]
    action = words[0] if words else "status"
    apply = "--apply" in words or "apply" in words[1:]
    stray = _stray_word(action, words[1:])
    if stray is not None:  # a word the action does not take is usage, never silently a dry run
        return {"status": "usage", "error": f"assertions {action} does not take {echo(stray, 40)}; usage: assertions"
                                            " [status] | rebuild [--apply] [--limit N] [--reset] | drop [--apply]"}
    if action == "status":
        return extract.status(r.runtime)
    if action == "drop":
        return extract.drop(r.runtime, apply=apply)
    if action != "rebuild":
        return {"status": "usage", "error": "usage: assertions [status] | rebuild [--apply] [--limit N] [--reset] |"
                                            " drop [--apply]"}
    limit = None
    if "--limit" in words:
        at = words.index("--limit")
        if at + 1 >= len(words) or not words[at + 1].isdigit() or int(words[at + 1]) < 1:
            return {"status": "usage", "error": "--limit needs a positive number of messages"}
        limit = int(words[at + 1])
    progress = None
    if not r.in_host and sys.stderr.isatty():
        def progress(p: dict[str, Any]) -> None:
            sys.stderr.write(f"\rassertions: {p['messages']} messages read, {p['stored']} stored, "
                             f"{p['backlog']} left   ")
    result = extract.rebuild(r.runtime, r.model() if apply else None, apply=apply, limit=limit,
                             reset="--reset" in words, progress=progress)
    if progress is not None:
        sys.stderr.write("\n")
    return result


# The words each ``assertions`` action takes after its name (``--limit`` with its number).
_ASSERTION_WORDS = {"status": frozenset(), "drop": frozenset({"--apply", "apply"}),
                    "rebuild": frozenset({"--apply", "apply", "--reset", "--limit"})}


def _stray_word(action: str, rest: list[str]) -> str | None:
    """The first of ``rest`` that ``action`` does not take (the number after ``--limit`` is its own)."""
    takes = _ASSERTION_WORDS.get(action)
    if takes is None:
        return None  # an unknown action: the usage answer below names it
    for i, word in enumerate(rest):
        if word not in takes and not (i and rest[i - 1] == "--limit"):
            return word
    return None


def _check_state(runtime: Runtime, conn: sqlite3.Connection, ctx: dict[str, Any]) -> Check:
    """The opt-in state tables: absent and off is healthy; on (or present) they must be whole."""
    report = extract.status(runtime)
    on = [n for n in ("assertions_enabled", "adaptive_retrieval_enabled", "preanswer_evidence_enabled") if report[n]]
    missing = AssertionStore(runtime.db).missing() if report["tables_present"] else []  # either backend's catalogue
    if missing:
        return "fail", f"state tables incomplete: missing {', '.join(missing)}", \
            "turn the options off, `/trove assertions drop --apply`, then turn them on again to recreate them"
    if report["assertions_enabled"] and not report["window_holds_a_message"]:  # advice, after any failure
        return "warn", (f"assertion extraction waits: the {report['extraction_window']}-token auxiliary window cannot"
                        " hold the extraction instructions, an answer and a message"), \
            f"raise {extract.window_setting(runtime.config)} to the model's real window"
    if not report["tables_present"]:
        return "pass", f"state tables absent; on: {', '.join(on) or 'none'}", ""
    detail = (f"on: {', '.join(on) or 'none'}; {report['tables']['assertions']} assertions,"
              f" backlog {report['backlog']} messages")
    if report["recent_errors"]:
        return "warn", f"{detail}; last error: {report['recent_errors'][0]['error']}", \
            "check the auxiliary model; `/trove assertions status` lists the failed batches"
    return "pass", detail, ""


def _evidence(runtime: Runtime, user_message: str, session_id: str) -> str:
    """The fenced pre-answer evidence block, when TROVE_PREANSWER_EVIDENCE_ENABLED is on."""
    if not runtime.config.preanswer_evidence_enabled:
        return ""
    return preanswer.evidence_block(runtime, user_message, session_id)


ASSERTIONS = Subsystem(
    name="assertions", switch="assertions_enabled", migrations=STATE_TABLES,
    background={"session_start": lambda runtime, completion: extract.schedule(runtime, completion),
                "turn": lambda runtime, completion: extract.schedule(runtime, completion)},
    commands={("assertions",): (_assertions, "remembered state: status | rebuild [--apply] [--limit N] [--reset]"
                                             " (dry run by default) | drop [--apply] (turn the options off first;"
                                             " backup first)")},
    usage="assertions [status|rebuild|drop] [--apply] [--limit N]", takes_words=(("assertions",),),
    section="remembered_state", status=extract.status, checks=(("remembered_state", _check_state),),
    before_answer=_evidence)

SUBSYSTEMS: tuple[Subsystem, ...] = (EMBEDDINGS, ROLLUPS, ASSERTIONS)
