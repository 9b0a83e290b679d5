"""Configuration: one spec table naming every ``TROVE_*`` variable once.

``load_config(mapping)`` turns an environment-like mapping into a frozen
``TroveConfig``. Bad values never raise: they log a warning naming the variable and
what it accepts, and the default is used. This module reads no files and opens nothing.
"""
from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

log = logging.getLogger("hermes_trove.config")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@dataclass(frozen=True)
class Var:
    """One configuration variable: env name, type, default, accepted range, doc."""

    name: str
    kind: str  # bool | int | float | str | csv
    default: Any
    doc: str
    minimum: float | None = None
    maximum: float | None = None
    group: str = "core"

    @property
    def field(self) -> str:
        return self.name[len("TROVE_"):].lower()

    def accepts(self) -> str:
        if self.kind == "bool":
            return "one of 1/true/yes/on or 0/false/no/off"
        if self.kind in ("int", "float"):
            lo = "-inf" if self.minimum is None else f"{self.minimum:g}"
            hi = "inf" if self.maximum is None else f"{self.maximum:g}"
            return f"a{'n integer' if self.kind == 'int' else ' number'} in [{lo}, {hi}]"
        if self.kind == "csv":
            return "a comma-separated list"
        return "a string"


def _v(name, kind, default, doc, lo=None, hi=None, group="core") -> Var:
    return Var(name, kind, default, doc, lo, hi, group)


SPEC: tuple[Var, ...] = (
    # Trigger, tail and compaction
    _v("TROVE_CONTEXT_THRESHOLD", "float", 0.35, "Fraction of the context window that triggers compaction.", 0.05, 0.95),
    _v("TROVE_FRESH_TAIL_COUNT", "int", 32, "Most recent messages protected from compaction.", 1, 10000),
    _v("TROVE_FRESH_TAIL_MAX_TOKENS", "int", 0, "Optional token cap on the protected tail (0 disables).", 0),
    _v("TROVE_LEAF_CHUNK_TOKENS", "int", 20000, "Raw tokens summarised per leaf node (base target with dynamic chunking).", 500),
    _v("TROVE_DYNAMIC_LEAF_CHUNK_ENABLED", "bool", False, "Grow the leaf chunk (doubling) while the raw backlog is large."),
    _v("TROVE_DYNAMIC_LEAF_CHUNK_MAX", "int", 40000, "Upper bound for dynamic leaf chunks.", 500),
    _v("TROVE_INCREMENTAL_MAX_DEPTH", "int", 3, "Max condensation depth (-1 unlimited, 0 leaf only).", -1, 64),
    _v("TROVE_CONDENSATION_FANIN", "int", 4, "Same-depth nodes condensed into one parent.", 2, 64),
    _v("TROVE_THRESHOLD_FULL_SWEEP_ENABLED", "bool", False, "At threshold, drain the raw backlog in one bounded sweep."),
    _v("TROVE_SUMMARY_PREFIX_TARGET_TOKENS", "int", 0, "Sweep-only summary-prefix target (0 = one leaf chunk).", 0),
    _v("TROVE_CRITICAL_BUDGET_PRESSURE_RATIO", "float", 0.0, "Pressure ratio that allows bypassing polite gates (0 disables).", 0.0, 1.0),
    _v("TROVE_MAX_ASSEMBLY_TOKENS", "int", 0, "Hard cap on the assembled prompt (0 = threshold decides).", 0),
    _v("TROVE_RESERVE_TOKENS_FLOOR", "int", 0, "Keep this many tokens of the window free (0 disables).", 0),
    _v("TROVE_NEW_SESSION_RETAIN_DEPTH", "int", 2, "Summary depth carried into a session after /new (-1 all, 0 none).", -1, 64),
    # Summarizer
    _v("TROVE_SUMMARY_MODEL", "str", "", "Summarization model (empty = host auxiliary 'compression' default).", group="models"),
    _v("TROVE_SUMMARY_FALLBACK_MODELS", "csv", (), "Models tried after the summary model fails.", group="models"),
    _v("TROVE_SUMMARY_TIMEOUT_MS", "int", 60000, "Timeout for one summarization call.", 1000, group="models"),
    _v("TROVE_SUMMARY_CIRCUIT_BREAKER_FAILURE_THRESHOLD", "int", 2, "Consecutive failures before a route is skipped.", 1, group="models"),
    _v("TROVE_SUMMARY_CIRCUIT_BREAKER_COOLDOWN_SECONDS", "int", 300, "Seconds an open route is skipped.", 0, group="models"),
    _v("TROVE_L2_BUDGET_RATIO", "float", 0.5, "Aggressive (bullet) budget as a fraction of the normal budget.", 0.05, 1.0, group="models"),
    _v("TROVE_L3_TRUNCATE_TOKENS", "int", 512, "Size of the deterministic truncation summary.", 64, group="models"),
    _v("TROVE_CUSTOM_INSTRUCTIONS", "str", "", "Extra instructions appended to every summary prompt.", group="models"),
    _v("TROVE_EXPANSION_MODEL", "str", "", "trove_expand_query model (empty = summary model).", group="models"),
    _v("TROVE_EXPANSION_CONTEXT_TOKENS", "int", 32000, "Context budget for trove_expand_query.", 1000, group="models"),
    _v("TROVE_EXPANSION_TIMEOUT_MS", "int", 120000, "Timeout for one trove_expand_query call.", 1000, group="models"),
    # Storage, filters, diagnostics
    _v("TROVE_DATABASE_PATH", "str", "", "SQLite path (empty = $HERMES_HOME/trove.db).", group="storage"),
    _v("TROVE_IGNORE_SESSION_PATTERNS", "csv", (), "Session globs never stored (compaction delegated to the host).", group="storage"),
    _v("TROVE_STATELESS_SESSION_PATTERNS", "csv", (), "Session globs kept read-only.", group="storage"),
    _v("TROVE_IGNORE_MESSAGE_PATTERNS", "csv", (), "Regexes; matching messages are not stored.", group="storage"),
    _v("TROVE_FTS_INTEGRITY_CHECK_INTERVAL_HOURS", "float", 24.0, "Hours between startup FTS deep checks (0 always, <0 never).", group="storage"),
    _v("TROVE_ENABLE_SLASH_COMMAND", "bool", False, "Register the /trove operator command.", group="storage"),
    _v("TROVE_DOCTOR_CLEAN_APPLY_ENABLED", "bool", False, "Allow /trove doctor clean apply.", group="storage"),
    _v("TROVE_EMPTY_LIFECYCLE_GC_ENABLED", "bool", True, "Prune lifecycle rows of sessions that stored nothing.", group="storage"),
    _v("TROVE_EMPTY_LIFECYCLE_GC_THRESHOLD", "int", 200, "Lifecycle rows at which the empty-row GC fires.", 1, group="storage"),
    _v("TROVE_EMPTY_LIFECYCLE_GC_MAX_AGE_HOURS", "float", 24.0, "Minimum age of empty lifecycle rows the GC deletes.", 0, group="storage"),
    # Payloads and redaction
    _v("TROVE_LARGE_OUTPUT_EXTERNALIZATION_ENABLED", "bool", False, "Store oversized payloads in sidecar files.", group="payloads"),
    _v("TROVE_LARGE_OUTPUT_EXTERNALIZATION_THRESHOLD_CHARS", "int", 12000, "Externalization threshold in characters.", 256, group="payloads"),
    _v("TROVE_LARGE_OUTPUT_EXTERNALIZATION_PATH", "str", "", "Payload directory (empty = beside the database).", group="payloads"),
    _v("TROVE_LARGE_OUTPUT_ACTIVE_REPLAY_STUBBING_ENABLED", "bool", False, "Replace big tool results in the replayed prompt with refs.", group="payloads"),
    _v("TROVE_LARGE_OUTPUT_ACTIVE_REPLAY_STUB_THRESHOLD_TOKENS", "int", 25000, "Token threshold for active-replay stubbing.", 100, group="payloads"),
    _v("TROVE_LARGE_OUTPUT_TRANSCRIPT_GC_ENABLED", "bool", False, "Rewrite externalized, summarized tool rows to placeholders.", group="payloads"),
    _v("TROVE_SENSITIVE_PATTERNS_ENABLED", "bool", False, "Redact named secret patterns before storage.", group="payloads"),
    _v("TROVE_SENSITIVE_PATTERNS", "csv", ("api_key", "bearer_token", "password_assignment", "private_key"),
       "Named redaction patterns to apply.", group="payloads"),
)

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
        return text
    value: float = int(text) if var.kind == "int" else float(text)
    if (var.minimum is not None and value < var.minimum) or (var.maximum is not None and value > var.maximum):
        raise ValueError(raw)
    return value


def _make_config_class() -> type:
    fields = [(v.field, Any, field(default=v.default)) for v in SPEC]
    fields += [
        ("hermes_home", str, field(default="")),
        ("sources", Any, field(default=(), compare=False)),
        ("warnings", Any, field(default=(), compare=False)),
    ]
    cls = dataclasses.make_dataclass("TroveConfig", fields, frozen=True)
    cls.__module__ = __name__
    cls.__doc__ = "Frozen hermes-trove configuration; vary it in tests with dataclasses.replace."
    return cls


TroveConfig: Any = _make_config_class()


def default_hermes_home(mapping: Mapping[str, str] | None = None) -> str:
    env = os.environ if mapping is None else mapping
    return env.get("HERMES_HOME") or str(Path.home() / ".hermes")


def load_config(mapping: Mapping[str, str] | None = None, hermes_home: str | None = None,
                warn: Callable[[str], None] | None = None) -> Any:
    """Build a TroveConfig from ``mapping`` (default ``os.environ``)."""
    env = os.environ if mapping is None else mapping
    warn = warn or log.warning
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    warnings: list[str] = []
    for var in SPEC:
        raw = env.get(var.name)
        if raw is None:
            sources[var.field] = "default"
            continue
        try:
            values[var.field] = _parse(var, raw)
            sources[var.field] = "env"
        except ValueError:
            msg = f"{var.name}={raw!r} is invalid: expected {var.accepts()}; using default {var.default!r}"
            warn(msg)
            warnings.append(msg)
            sources[var.field] = "default (invalid env)"
    home = hermes_home or default_hermes_home(env)
    return TroveConfig(**values, hermes_home=home, sources=tuple(sorted(sources.items())),
                       warnings=tuple(warnings))


def database_path(config: Any) -> Path:
    """``TROVE_DATABASE_PATH`` if set, else ``$HERMES_HOME/trove.db``."""
    if config.database_path:
        return Path(os.path.expanduser(config.database_path))
    return Path(config.hermes_home) / "trove.db"


def payload_dir(config: Any) -> Path:
    if config.large_output_externalization_path:
        return Path(os.path.expanduser(config.large_output_externalization_path))
    return database_path(config).parent / "trove-payloads"


def public_view(config: Any) -> dict[str, Any]:
    """Config values with their sources, for status output (no secrets live here)."""
    src = dict(config.sources)
    return {v.name: {"value": list(getattr(config, v.field)) if v.kind == "csv" else getattr(config, v.field),
                     "source": src.get(v.field, "default")} for v in SPEC}
