"""Configuration: the frozen ``TroveConfig``, one typed field per ``TROVE_*`` variable.

Each knob field is read from ``TROVE_<FIELD NAME>``; its metadata holds its doc line, group
and accepted range; ``SPEC`` is the same table read back from ``dataclasses.fields``.
``load_config(mapping)`` parses an environment-like mapping: bad values never raise, they log
a warning naming the variable and what it accepts, and the default is used.
This module reads no files and opens nothing.
"""
from __future__ import annotations

import contextlib
import dataclasses
import difflib
import logging
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

log = logging.getLogger("hermes_trove.config")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}
# A field's annotation decides how its variable is parsed (annotations are strings here).
_KINDS = {"bool": "bool", "int": "int", "float": "float", "str": "str", "tuple[str, ...]": "csv"}

_T = TypeVar("_T")


def knob(default: _T, doc: str, *, lo: float | None = None, hi: float | None = None,
         group: str = "core", choices: tuple[str, ...] = ()) -> _T:
    """A ``TroveConfig`` field read from ``TROVE_<FIELD NAME>``; ``lo``/``hi`` bound numbers (inclusive),
    ``choices`` strings."""
    meta = {"doc": doc, "minimum": lo, "maximum": hi, "group": group, "choices": choices}
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class TroveConfig:
    """Frozen hermes-trove configuration; vary it in tests with ``dataclasses.replace``."""

    # Trigger, tail and compaction
    context_threshold: float = knob(0.35, "Fraction of the context window that triggers compaction.", lo=0.05, hi=0.95)
    fresh_tail_count: int = knob(32, "Most recent messages protected from compaction.", lo=1, hi=10000)
    fresh_tail_max_tokens: int = knob(0, "Optional token cap on the protected tail (0 disables).", lo=0)
    leaf_chunk_tokens: int = knob(
        20000, "Raw tokens summarised per leaf node (base target with dynamic chunking; at most half the"
        " model's window).", lo=500)
    dynamic_leaf_chunk_enabled: bool = knob(False, "Grow the leaf chunk (doubling) while the raw backlog is large.")
    dynamic_leaf_chunk_max: int = knob(40000, "Upper bound for dynamic leaf chunks.", lo=500)
    incremental_max_depth: int = knob(
        3, "Max condensation depth (-1 unlimited, 0 leaf only); past 48 frontier nodes, full groups go deeper.",
        lo=-1, hi=64)
    condensation_fanin: int = knob(4, "Same-depth nodes condensed into one parent.", lo=2, hi=64)
    threshold_full_sweep_enabled: bool = knob(False, "At threshold, drain the raw backlog in one bounded sweep.")
    summary_prefix_target_tokens: int = knob(0, "Sweep-only summary-prefix target (0 = one leaf chunk).", lo=0)
    critical_budget_pressure_ratio: float = knob(
        0.0, "Pressure ratio that allows bypassing polite gates (0 disables).", lo=0.0, hi=1.0)
    max_assembly_tokens: int = knob(0, "Hard cap on the assembled prompt (0 = threshold decides).", lo=0)
    reserve_tokens_floor: int = knob(0, "Keep this many tokens of the window free (0 disables).", lo=0)
    new_session_retain_depth: int = knob(
        2, "Summary depth carried into a session after /new (-1 all, 0 none).", lo=-1, hi=64)
    memory_scope: str = knob(
        "conversation",
        "Sessions cross-session reads see: conversation (a gateway chat its own, CLI/local sessions share one),"
        " profile (every session) or session (only the current one).", choices=("conversation", "profile", "session"))

    # Summarizer and expansion models
    summary_model: str = knob("", "Summarization model (empty = host auxiliary 'compression' default).", group="models")
    summary_fallback_models: tuple[str, ...] = knob((), "Models tried after the summary model fails.", group="models")
    summary_context_length: int = knob(
        0, "Context window of the summary model and its fallbacks (0 = unknown: the host's"
        " auxiliary.compression.context_length when TROVE_SUMMARY_MODEL is empty, else the chat model's);"
        " also bounds assertion extraction batches, except while TROVE_SUMMARY_MODEL names a model and"
        " TROVE_ASSERTION_EXTRACTION_MODEL is empty (extraction then takes the host's default).",
        lo=0, hi=100_000_000, group="models")
    summary_timeout_ms: int = knob(60000, "Timeout for one summarization call.", lo=1000, group="models")
    summary_circuit_breaker_failure_threshold: int = knob(
        2, "Consecutive failures before a route is skipped.", lo=1, group="models")
    summary_circuit_breaker_cooldown_seconds: int = knob(300, "Seconds an open route is skipped.", lo=0, group="models")
    l2_budget_ratio: float = knob(
        0.5, "Aggressive (bullet) budget as a fraction of the normal budget.", lo=0.05, hi=1.0, group="models")
    l3_truncate_tokens: int = knob(512, "Size of the deterministic truncation summary.", lo=64, group="models")
    custom_instructions: str = knob("", "Extra instructions appended to every summary prompt.", group="models")
    expansion_model: str = knob("", "trove_expand_query model (empty = summary model).", group="models")
    expansion_context_tokens: int = knob(32000, "Context budget for trove_expand_query.", lo=1000, group="models")
    expansion_timeout_ms: int = knob(120000, "Timeout for one trove_expand_query call.", lo=1000, group="models")

    # Storage, filters and diagnostics
    database_path: str = knob(
        "", "SQLite path (empty = $HERMES_HOME/trove.db; a relative path is inside $HERMES_HOME).", group="storage")
    database_url: str = knob(
        "", "PostgreSQL URL (postgresql://...) or libpq service name (service=NAME); set, it replaces the"
        " SQLite file as the store (needs the postgres extra).", group="storage")
    ignore_session_patterns: tuple[str, ...] = knob(
        (), "Session globs never stored (compaction delegated to the host).", group="storage")
    stateless_session_patterns: tuple[str, ...] = knob((), "Session globs kept read-only.", group="storage")
    ignore_message_patterns: tuple[str, ...] = knob((), "Regexes; matching messages are not stored.", group="storage")
    fts_integrity_check_interval_hours: float = knob(
        24.0, "Hours between startup FTS deep checks (0 always, <0 never).", group="storage")
    enable_slash_command: bool = knob(False, "Register the /trove operator command.", group="storage")
    doctor_clean_apply_enabled: bool = knob(False, "Allow /trove doctor clean apply.", group="storage")
    empty_lifecycle_gc_enabled: bool = knob(
        True, "Prune lifecycle rows of sessions that stored nothing.", group="storage")
    empty_lifecycle_gc_threshold: int = knob(
        200, "Lifecycle rows at which the empty-row GC fires.", lo=1, group="storage")
    empty_lifecycle_gc_max_age_hours: float = knob(
        24.0, "Minimum age of empty lifecycle rows the GC deletes.", lo=0, group="storage")

    # Large payloads and redaction
    large_output_externalization_enabled: bool = knob(
        False, "Store oversized payloads in sidecar files.", group="payloads")
    large_output_externalization_threshold_chars: int = knob(
        12000, "Externalization threshold in characters.", lo=256, group="payloads")
    large_output_externalization_path: str = knob(
        "", "Payload directory (empty = beside the database; a relative path is inside $HERMES_HOME).",
        group="payloads")
    large_output_active_replay_stubbing_enabled: bool = knob(
        False, "Replace big tool results in the replayed prompt with refs.", group="payloads")
    large_output_active_replay_stub_threshold_tokens: int = knob(
        25000, "Token threshold for active-replay stubbing.", lo=100, group="payloads")
    large_output_transcript_gc_enabled: bool = knob(
        False, "Rewrite externalized, summarized tool rows to placeholders.", group="payloads")
    sensitive_patterns_enabled: bool = knob(False, "Redact named secret patterns before storage.", group="payloads")
    sensitive_patterns: tuple[str, ...] = knob(
        ("api_key", "bearer_token", "password_assignment", "private_key"), "Named redaction patterns to apply.",
        group="payloads")

    # Embeddings (opt-in semantic retrieval; see docs/embeddings.md)
    embeddings_enabled: bool = knob(
        False, "Build and search embedding vectors (off = full text only).", group="embeddings")
    embedding_provider: str = knob(
        "local", "local (in-process ONNX MiniLM) or openai (any /v1/embeddings API).", group="embeddings",
        choices=("local", "openai"))
    embedding_model: str = knob("", "Embedding model (empty = the provider's default).", group="embeddings")
    embedding_base_url: str = knob(
        "", "openai provider: API base URL ending in /v1 (empty = api.openai.com).", group="embeddings")
    embedding_api_key_env: str = knob(
        "OPENAI_API_KEY", "openai provider: NAME of the variable holding the key (the key itself is never stored).",
        group="embeddings")
    embedding_batch_size: int = knob(
        0, "Texts per embedding call (0 = provider default: local 8, openai 64).", lo=0, hi=2048, group="embeddings")
    embedding_timeout_ms: int = knob(30000, "Timeout of one embedding request.", lo=100, group="embeddings")
    embedding_max_texts_per_day: int = knob(
        0, "Spend guard: texts sent to a remote provider per UTC day (0 = no cap).", lo=0, group="embeddings")
    embedding_max_tokens_per_day: int = knob(
        0, "Spend guard: tokens sent to a remote provider per UTC day (0 = no cap).", lo=0, group="embeddings")
    embedding_query_deadline_ms: int = knob(
        2000, "Deadline of one semantic query; past it, full text answers.", lo=10, group="embeddings")
    embedding_tool_output_policy: str = knob(
        "none", "Tool outputs get vectors: none (default) or all.", group="embeddings")
    embedding_context: str = knob(
        "text",
        "How a message chunk's vector carries the turns before it: text (the model reads the chunk followed by the"
        " earlier messages; a new vector space is built first with vector context, about 3x faster, then embedded"
        " again in place), vector (each chunk embedded alone, mixed with the previous message's vector), none."
        " Changing it re-embeds messages in place.", group="embeddings", choices=("text", "vector", "none"))
    embedding_context_messages: int = knob(
        2, "Earlier user/assistant messages embedded after each chunk with embedding_context=text (0 = none).",
        lo=0, hi=8, group="embeddings")
    embedding_pass_budget_ms: int = knob(
        2000, "Time budget of one background indexing pass.", lo=50, group="embeddings")
    embedding_pass_max_items: int = knob(
        256, "Messages plus summaries read per background pass.", lo=1, group="embeddings")
    embedding_idle_seconds: float = knob(
        5.0, "Background indexer sleep when nothing is pending.", lo=0.05, group="embeddings")
    embedding_threads: int = knob(
        1, "onnxruntime threads of the local provider (leave cores to the agent).", lo=1, hi=64, group="embeddings")

    # Whole-memory recall (trove_recall; see docs/retrieval-tools.md)
    recall_fusion: str = knob(
        "zscore",
        "How recall fuses its arms: zscore or interpolate (weighted z-score or min-max normalised scores), or rrf.",
        group="recall", choices=("zscore", "interpolate", "rrf"))
    recall_fts_weight: float = knob(
        1.0, "Weight of the full-text arm over raw messages.", lo=0.0, hi=100.0, group="recall")
    recall_summary_weight: float = knob(
        1.0, "Weight of the full-text arm over summary nodes.", lo=0.0, hi=100.0, group="recall")
    recall_semantic_weight: float = knob(
        1.0, "Weight of the vector arm beside full text 1.0 (leave-one-conversation-out optimum).", lo=0.0, hi=100.0,
        group="recall")
    recall_candidates: int = knob(
        400, "Candidates each recall arm ranks before fusion.", lo=10, hi=2000, group="recall")
    recall_context_weight: float = knob(
        0.5, "Boost a raw hit by the full-text strength of the turns around it in its session (0 off).", lo=0.0,
        hi=10.0, group="recall")
    recall_recency_half_life_days: float = knob(
        30.0, "Recency prior half-life in days (0 turns it off).", lo=0.0, hi=36500.0, group="recall")
    recall_recency_floor: float = knob(
        0.5, "Smallest recency multiplier, reached by very old hits.", lo=0.0, hi=1.0, group="recall")

    # Temporal rollups (opt-in day/week/month summaries; see the operator guide)
    temporal_rollups_enabled: bool = knob(
        False, "Build day/week/month rollups of leaf summaries in the background.", group="temporal")
    rollup_daily_target_tokens: int = knob(1200, "Size a day rollup aims at.", lo=100, hi=15000, group="temporal")
    rollup_aggregate_target_tokens: int = knob(
        2000, "Size a week or month rollup aims at.", lo=100, hi=20000, group="temporal")
    rollup_input_max_tokens: int = knob(
        60000, "Most input tokens one rollup build sends to the model.", lo=1000, group="temporal")
    rollup_builds_per_pass: int = knob(2, "Most rollups one background pass builds.", lo=1, hi=1000, group="temporal")
    rollup_maintenance_budget_ms: int = knob(
        5000, "A pass starts no new build after this many milliseconds.", lo=10, group="temporal")
    rollup_lease_ttl_seconds: int = knob(
        180, "Lifetime of the cross-process rollup lease (renewed per build; a dead holder's is taken over at once).",
        lo=5, group="temporal")

    # Remembered state (opt-in assertions, adaptive retrieval, pre-answer evidence; see docs/state.md)
    assertions_enabled: bool = knob(
        False, "Create the assertion tables, extract assertions in the background and answer trove_query_state.",
        group="state")
    assertion_extraction_model: str = knob(
        "", "Model of assertion extraction (empty = the auxiliary default).", group="state")
    assertion_batch_messages: int = knob(
        8, "Messages sent to the model in one extraction call.", lo=1, hi=32, group="state")
    assertion_batches_per_pass: int = knob(
        4, "Most extraction calls one background pass makes.", lo=1, hi=100, group="state")
    assertion_pass_budget_ms: int = knob(
        20000, "A pass starts no new extraction call after this many milliseconds.", lo=100, group="state")
    assertion_timeout_seconds: float = knob(30.0, "Timeout of one extraction call.", lo=0.1, hi=120.0, group="state")
    adaptive_retrieval_enabled: bool = knob(
        False, "Enable trove_retrieve, the bounded retrieval controller (its tables are created on first use).",
        group="state")
    preanswer_evidence_enabled: bool = knob(
        False, "Add a small fenced block of exact evidence for the user's message before each answer.", group="state")

    # Not variables: where the host keeps its state, and how each value was obtained.
    hermes_home: str = ""
    sources: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    warnings: tuple[str, ...] = field(default=(), compare=False)


@dataclass(frozen=True)
class Var:
    """One ``TROVE_*`` variable as read from a ``TroveConfig`` field: the docs and the parser use it."""

    name: str
    field: str
    kind: str  # bool | int | float | str | csv
    default: Any
    doc: str
    minimum: float | None = None
    maximum: float | None = None
    group: str = "core"
    choices: tuple[str, ...] = ()

    def accepts(self) -> str:
        if self.kind == "bool":
            return "one of 1/true/yes/on or 0/false/no/off"
        if self.kind in ("int", "float"):
            lo = "-inf" if self.minimum is None else f"{self.minimum:g}"
            hi = "inf" if self.maximum is None else f"{self.maximum:g}"
            return f"a{'n integer' if self.kind == 'int' else ' number'} in [{lo}, {hi}]"
        if self.kind == "csv":
            return "a comma-separated list"
        return f"one of {', '.join(self.choices)}" if self.choices else "a string"


def _var(f: dataclasses.Field[Any]) -> Var:
    kind = _KINDS.get(str(f.type))
    if kind is None:
        raise TypeError(f"TroveConfig.{f.name}: annotation {f.type!r} is not one of {sorted(_KINDS)}")
    m = f.metadata
    return Var(name="TROVE_" + f.name.upper(), field=f.name, kind=kind, default=f.default, doc=m["doc"],
               minimum=m["minimum"], maximum=m["maximum"], group=m["group"], choices=m["choices"])


SPEC: tuple[Var, ...] = tuple(_var(f) for f in dataclasses.fields(TroveConfig) if "doc" in f.metadata)
BY_NAME: dict[str, Var] = {v.name: v for v in SPEC}


def _parse(var: Var, raw: str) -> Any:
    text = raw.strip()
    if var.kind == "bool":
        low = text.lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise ValueError(raw)
    if var.kind == "csv":
        return tuple(p.strip() for p in raw.split(",") if p.strip())
    if var.kind == "str":
        if var.choices and text.lower() not in var.choices:
            raise ValueError(raw)
        return text.lower() if var.choices else text
    if len(text) > 64:  # no sane number is this long; int() of a huge digit string is slow
        raise ValueError(raw)
    value = int(text) if var.kind == "int" else float(text)
    # NaN and inf compare False with everything: refuse them before the range check.
    if not math.isfinite(value) or abs(value) > SANITY_LIMIT:
        raise ValueError(raw)
    if (var.minimum is not None and value < var.minimum) or (var.maximum is not None and value > var.maximum):
        raise ValueError(raw)
    return value


# Knobs without an upper bound still refuse absurd magnitudes (token counts, hours, ratios).
SANITY_LIMIT = 1_000_000_000


def _rules(v: Mapping[str, Any]) -> tuple[tuple[str, bool, str], ...]:
    """Rules between knobs as (field, whether ``v`` keeps it, why not); a broken one falls back to its default."""
    return (("dynamic_leaf_chunk_max", v["dynamic_leaf_chunk_max"] >= v["leaf_chunk_tokens"],
             "must be at least TROVE_LEAF_CHUNK_TOKENS"),
            ("fresh_tail_max_tokens", v["fresh_tail_max_tokens"] == 0 or v["fresh_tail_max_tokens"] >= 64,
             "a protected tail under 64 tokens cannot hold one exchange"),
            ("reserve_tokens_floor", v["reserve_tokens_floor"] <= 10_000_000,
             "is larger than any model's context window"))


def check_consistency(values: dict[str, Any], warn: Callable[[str], None], sources: dict[str, str]) -> None:
    """Reset knobs that contradict the others to their defaults, warning by name (in place)."""
    for name, fine, why in _rules({**{v.field: v.default for v in SPEC}, **values}):
        if fine or name not in values:
            continue
        var = next(v for v in SPEC if v.field == name)
        warn(f"{var.name}={values.pop(name)!r} {why}; using default {var.default!r}")
        sources[name] = "default (inconsistent env)"


def reserve_floor_cap(config: TroveConfig, context_length: int) -> int | None:
    """The prompt cap ``TROVE_RESERVE_TOKENS_FLOOR`` implies for a window, or None.

    A floor that leaves less than a quarter of the window is ignored (with a warning naming
    the variable): honouring it would shrink the compaction threshold to a handful of tokens.
    """
    floor = int(config.reserve_tokens_floor or 0)
    if not floor or context_length <= 0:
        return None
    if context_length - floor < context_length // 4:
        log.warning("TROVE_RESERVE_TOKENS_FLOOR=%d leaves under a quarter of the %d-token window; ignored "
                    "(using default 0)", floor, context_length)
        return None
    return context_length - floor


def default_hermes_home(mapping: Mapping[str, str] | None = None) -> str:
    env = os.environ if mapping is None else mapping
    return env.get("HERMES_HOME") or str(Path.home() / ".hermes")


def scoped_home() -> str:
    """The profile home the host scoped this turn to (a gateway serving several profiles); "" if none."""
    try:
        from hermes_constants import get_hermes_home_override

        return get_hermes_home_override() or ""
    except Exception:
        return ""


def profile_environ(home: str, inherit: bool = False) -> dict[str, str]:
    """A served profile's settings: the environment's, with the TROVE_* ones of ``<home>/.env`` only
    (``inherit``: over the environment's own, as Hermes loads its home's ``.env`` at start), then the
    TROVE_* ones of the managed-scope ``.env`` over both, as Hermes applies that file last."""
    env = {k: v for k, v in os.environ.items() if inherit or not k.startswith("TROVE_")}
    env.update(_trove_values(Path(home) / ".env"))
    folder = managed_dir()
    env.update({} if folder is None else _trove_values(folder / ".env"))
    return env


def managed_dir() -> Path | None:
    """The managed-scope folder whose ``.env`` Hermes applies over every other source, or None:
    ``$HERMES_MANAGED_DIR`` when set (and a folder), else ``/etc/hermes`` when it is one. Hermes's
    own rule when it is importable (it also ignores ``/etc/hermes`` under its test runner)."""
    try:
        from hermes_cli.managed_scope import get_managed_dir  # type: ignore[import-untyped]

        found = get_managed_dir()
        return Path(found) if found is not None else None
    except Exception:
        override = os.environ.get("HERMES_MANAGED_DIR", "").strip()
        path = Path(override) if override else Path("/etc/hermes")
        return path if path.is_dir() else None


def _trove_values(path: Path) -> dict[str, str]:
    """The TROVE_* entries of the ``.env`` file at ``path``, parsed as Hermes parses one when it loads
    that file at start (python-dotenv: ``KEY=7  # note`` is 7); {} when it is missing or unreadable."""
    if not path.is_file():
        return {}
    with contextlib.suppress(Exception):
        from dotenv import dotenv_values

        for encoding in ("utf-8", "latin-1"):  # Hermes's own fallback for a file that is not UTF-8
            with contextlib.suppress(UnicodeDecodeError):
                values = dotenv_values(path, encoding=encoding)
                return {k: v for k, v in values.items() if k.startswith("TROVE_") and v is not None}
    with contextlib.suppress(Exception):
        from agent.secret_scope import load_env_file

        return {k: v for k, v in load_env_file(path).items() if k.startswith("TROVE_")}
    return {}


def load_config(mapping: Mapping[str, str] | None = None, hermes_home: str | None = None,
                warn: Callable[[str], None] | None = None) -> TroveConfig:
    """Build a TroveConfig from ``mapping`` (default ``os.environ``)."""
    env = os.environ if mapping is None else mapping
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    warnings: list[str] = []

    def say(msg: str) -> None:  # logged (or ``warn``ed) now, and kept on the config for the doctor
        (warn or log.warning)(msg)
        warnings.append(msg)

    for var in SPEC:
        raw = env.get(var.name)
        if raw is None:
            sources[var.field] = "default"
            continue
        try:
            values[var.field] = _parse(var, raw)
            sources[var.field] = "env"
        except (ValueError, OverflowError):
            say(f"{var.name}={raw[:80]!r} is invalid: expected {var.accepts()}; using default {var.default!r}")
            sources[var.field] = "default (invalid env)"
    check_consistency(values, say, sources)
    for msg in misspelled(env):
        say(msg)
    home = hermes_home or default_hermes_home(env)
    return TroveConfig(**values, hermes_home=home, sources=tuple(sorted(sources.items())),
                       warnings=tuple(warnings))


def misspelled(env: Mapping[str, str]) -> list[str]:
    """A warning for each ``TROVE_*`` variable that is no setting but one or two letters from one
    (``TROVE_CONTEXT_TRESHOLD``): set, it would be ignored without a word. A name far from every
    setting belongs to something else and is left alone."""
    known = [var.name for var in SPEC]
    return [f"{name[:80]} is not a hermes-trove setting and is ignored; did you mean {near[0]}?"
            for name in sorted(n for n in env if n.startswith("TROVE_") and n not in known)
            if (near := difflib.get_close_matches(name, known, n=1, cutoff=0.9))]


OUTBOX_FILE = "trove-outbox.db"  # a PostgreSQL store's local outbox, in the database path's folder
PAYLOAD_DIR = "trove-payloads"  # the payload directory's name beside the store when its path is unset


def home_path(config: TroveConfig, value: str) -> Path:
    """A path setting as a file name: ``~`` expanded, and a relative one taken inside ``$HERMES_HOME`` (the
    gateway, cron jobs and ``hermes`` typed in any directory read the same setting: one file for all)."""
    path = Path(os.path.expanduser(value))
    return path if path.is_absolute() else Path(config.hermes_home) / path


def stranded_store(config: TroveConfig, cwd: str | None = None) -> str:
    """Where a relative ``TROVE_DATABASE_PATH`` (or payload directory) put its files before it was taken
    inside ``$HERMES_HOME`` (the working directory, ``cwd``), and what to do, when they are still there and
    are not the ones in use; "" otherwise. They are no longer read: their turns look lost until moved.
    With ``TROVE_DATABASE_URL`` set the path places the outbox, whose unshipped messages wait there."""
    db, pay = config.database_path, config.large_output_externalization_path
    beside = Path(os.path.expanduser(db)).parent if db else None  # the old place of files kept beside the store
    notes = []
    for name, setting, rel, new, kind in (
            ("TROVE_DATABASE_PATH", db, "" if config.database_url else db, database_path(config),
             "store (and its -wal, -shm files)"),
            ("TROVE_DATABASE_PATH", db, str(beside / OUTBOX_FILE) if beside and config.database_url else "",
             database_path(config).parent / OUTBOX_FILE, "outbox (and its -wal, -shm files)"),
            ("TROVE_LARGE_OUTPUT_EXTERNALIZATION_PATH", pay, pay, payload_dir(config), "payload directory"),
            # unset, the payload directory sits beside the store: a relative store path moved it too
            ("TROVE_DATABASE_PATH", db, str(beside / PAYLOAD_DIR) if beside and not pay else "",
             payload_dir(config), "payload directory")):
        plain = os.path.expanduser(rel or "")
        if not plain or os.path.isabs(plain):
            continue
        try:  # (a working directory deleted under the process: nothing to look at)
            old = Path(cwd or os.getcwd()) / plain
            if not old.exists() or (new.exists() and old.samefile(new)):
                continue
            both = new.exists()
        except OSError:
            continue
        what = kind.split(" (")[0]
        # moving onto a store in use would replace it: with both present the user picks one by its path
        act = (f"{new} exists too (the {what} in use), so do not move one onto the other: set {name} to the"
               " absolute path of the one to keep" if both else
               f"with Hermes stopped, move that {kind} to {new}, or set {name} to its absolute path")
        notes.append(f"{name}={setting} is relative, so it names {new} (inside $HERMES_HOME); earlier versions"
                     f" took it from the working directory, and {old.absolute()} is such a {what},"
                     f" no longer read: {act}")
    return "; ".join(notes)


def database_path(config: TroveConfig) -> Path:
    """``TROVE_DATABASE_PATH`` if set, else ``$HERMES_HOME/trove.db``."""
    if config.database_path:
        return home_path(config, config.database_path)
    return Path(config.hermes_home) / "trove.db"


_LIBPQ = re.compile(r"[A-Za-z_]+\s*=")  # a libpq key=value string starts with a keyword


def names_server(text: str) -> bool:
    """``text`` names a PostgreSQL store (a ``postgresql://`` URL or a libpq ``service=NAME`` string),
    not a SQLite file path."""
    value = (text or "").strip()
    return "://" in value or bool(_LIBPQ.match(value))


def with_store(config: TroveConfig, db: str) -> TroveConfig:
    """``config`` reading the store an operator names (``--db``): a server URL or libpq string selects
    that server (its outbox stays where the plugin keeps it); anything else is the SQLite file path,
    which, as TROVE_DATABASE_PATH does, places the outbox when TROVE_DATABASE_URL selects a server."""
    if names_server(db):
        return dataclasses.replace(config, database_url=db.strip())
    return dataclasses.replace(config, database_path=os.path.abspath(os.path.expanduser(db)))


def payload_dir(config: TroveConfig) -> Path:
    if config.large_output_externalization_path:
        return home_path(config, config.large_output_externalization_path)
    return database_path(config).parent / PAYLOAD_DIR


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (status and logs never show it)."""
    return re.sub(r"(://[^:/@]*:)[^/]*@", r"\1***@", _PASSWORD.sub(r"\1***", url))


# libpq's ``password = 'a b'`` (blanks around "=", a quoted value) as well as a URL's ``password=x&...``
_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s&]+)", re.IGNORECASE)


def public_view(config: TroveConfig) -> dict[str, Any]:
    """Config values with their sources, for status output (no secrets live here)."""
    src = dict(config.sources)
    return {v.name: {"value": list(getattr(config, v.field)) if v.kind == "csv" else
                     redact_url(config.database_url) if v.field == "database_url" else getattr(config, v.field),
                     "source": src.get(v.field, "default")} for v in SPEC}
