"""The semantic query API: embed a query, search the active vector generation, within a deadline.

``search`` never raises: whenever full text must answer (embeddings off or unavailable, no
vectors, a provider failure, a passed deadline) it gives ``ran=False`` and a ``degraded_reason``.
Hits are one per message (its best chunk, with its span) or summary. Also the pieces the indexer
shares: which provider serves a generation, and the remote spend guard.
"""
from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .embed_providers import (
    EmbeddingUnavailable,
    Provider,
    ProviderSpec,
    SpendGuard,
    SpendLimitReached,
    check_available,
    get_provider,
    spec_from_config,
)
from .vector_index import SemanticHit, index_for
from .vector_store import Generation, VectorStore

if TYPE_CHECKING:
    from ..runtime import Runtime

KINDS = ("message", "summary")
_COVERAGE_TTL_S = 30.0


@dataclass(frozen=True)
class SemanticResult:
    hits: tuple[SemanticHit, ...] = ()
    ran: bool = False
    degraded_reason: str | None = None
    provider: str | None = None     # "local:all-MiniLM-L6-v2-int8"
    generation: int | None = None
    coverage: float = 0.0           # indexed / eligible rows of the searched generation, 0..1
    elapsed_ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"ran": self.ran, "degraded_reason": self.degraded_reason, "provider": self.provider,
                "generation": self.generation, "coverage": self.coverage, "elapsed_ms": round(self.elapsed_ms, 1)}


def vector_store(runtime: Runtime) -> VectorStore:
    return VectorStore(runtime.db)


def target_spec(runtime: Runtime) -> ProviderSpec:
    """The provider the configuration asks for (new vectors are built with it)."""
    return spec_from_config(runtime.config)


def spec_for(runtime: Runtime, gen: Generation) -> ProviderSpec:
    """The provider that embeds queries for ``gen``: the configured one, or the generation's own
    (so an older generation stays searchable while its replacement builds)."""
    spec = target_spec(runtime)
    if (gen.provider, gen.model) == (spec.provider, spec.model):
        return spec
    return replace(spec, provider=gen.provider, model=gen.model, base_url=gen.base_url,
                   key_env=spec.key_env if gen.provider == "openai" else "")


def searched_generation(store: VectorStore) -> Generation | None:
    """The active generation; before any is complete, the newest one being built."""
    return store.active() or next((g for g in reversed(store.generations()) if g.state == "building"), None)


def spend_guard(runtime: Runtime, spec: ProviderSpec) -> SpendGuard | None:
    """The daily cap of a remote provider, charged in the database before each request."""
    cfg = runtime.config
    if spec.provider == "local" or not (cfg.embedding_max_texts_per_day or cfg.embedding_max_tokens_per_day):
        return None
    store = vector_store(runtime)

    def guard(texts: int, tokens: int) -> None:
        day = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
        if store.charge(day, texts, tokens, cfg.embedding_max_texts_per_day, cfg.embedding_max_tokens_per_day) is None:
            used = store.spend(day)
            raise SpendLimitReached(
                f"embedding spend guard: {used[0]} texts / ~{used[1]} tokens sent today; the cap is "
                f"TROVE_EMBEDDING_MAX_TEXTS_PER_DAY={cfg.embedding_max_texts_per_day}, "
                f"TROVE_EMBEDDING_MAX_TOKENS_PER_DAY={cfg.embedding_max_tokens_per_day}")
    return guard


_coverage_cache: dict[tuple[str, int], tuple[float, float]] = {}


def coverage(runtime: Runtime, gen: Generation, fresh: bool = False) -> float:
    """Indexed fraction of the eligible rows (cached for a few seconds: it counts rows)."""
    key = (runtime.db.path, gen.generation_id)
    hit = _coverage_cache.get(key)
    now = time.monotonic()
    if hit is not None and not fresh and now - hit[1] < _COVERAGE_TTL_S:
        return hit[0]
    value = vector_store(runtime).backlog(gen, runtime.config.embedding_tool_output_policy).coverage
    _coverage_cache[key] = (value, now)
    return value


def _off(reason: str, started: float, **kw: Any) -> SemanticResult:
    return SemanticResult(ran=False, degraded_reason=reason, elapsed_ms=(time.perf_counter() - started) * 1000, **kw)


def search(runtime: Runtime, query: str, *, kinds: Sequence[str] = KINDS, session_ids: Sequence[str] | None = None,
           since: float | None = None, before: float | None = None, limit: int = 50,
           deadline_s: float | None = None) -> SemanticResult:
    """Semantic hits for ``query``; ``ran=False`` with the reason whenever full text must answer.

    ``since``/``before`` are unix seconds, [since, before); ``session_ids`` None = every session.
    """
    return start(runtime, query, kinds=kinds, session_ids=session_ids, since=since, before=before, limit=limit,
                 deadline_s=deadline_s)()


def start(runtime: Runtime, query: str, *, kinds: Sequence[str] = KINDS, session_ids: Sequence[str] | None = None,
          since: float | None = None, before: float | None = None, limit: int = 50,
          deadline_s: float | None = None) -> Callable[[], SemanticResult]:
    """``search`` begun: the store is read on this thread, the query is embedded and searched on
    another, and the returned function waits for it (what is left of the deadline) and gives
    the result, so the caller can run its full-text arms meanwhile."""
    started = time.perf_counter()
    cfg = runtime.config
    if not cfg.embeddings_enabled:
        return _done(_off("embeddings are off (TROVE_EMBEDDINGS_ENABLED=false)", started))
    if not (query or "").strip():
        return _done(_off("empty query", started))
    try:
        store = vector_store(runtime)
        gen = searched_generation(store)
        # read on this thread's connection: the query thread then opens one only to load new rows
        head = store.scan_head(gen.generation_id) if gen is not None else (0, 0)
    except Exception as exc:
        return _done(_off(f"vector store unreadable: {type(exc).__name__}: {exc}"[:300], started))
    if gen is None:
        reason = check_available(target_spec(runtime)) or "no vectors yet: the background indexer has not run"
        return _done(_off(reason, started))
    spec = spec_for(runtime, gen)
    base: dict[str, Any] = {"provider": spec.label, "generation": gen.generation_id}
    unavailable = check_available(spec)
    if unavailable:
        return _done(_off(unavailable, started, **base))
    deadline = cfg.embedding_query_deadline_ms / 1000.0 if deadline_s is None else float(deadline_s)
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            provider: Provider = get_provider(spec)
            vec = provider.embed([query], spend_guard(runtime, spec))[0]
            if len(vec) != gen.dim:
                raise EmbeddingUnavailable(f"query vector has dimension {len(vec)}, generation {gen.label} "
                                           f"has {gen.dim}")
            index = index_for(runtime.db.path, gen.generation_id, gen.dim)
            with index.lock:
                if not index.current(head):
                    index.refresh(store)
                box["hits"] = index.search(vec, kinds=tuple(kinds), session_ids=session_ids, since=since,
                                           before=before, limit=limit)
        except Exception as exc:  # reported as the degradation reason, never raised
            box["error"] = exc
        box["done_at"] = time.perf_counter()

    worker = threading.Thread(target=work, name="trove-semantic-query", daemon=True)
    worker.start()
    return lambda: _finish(runtime, gen, worker, box, deadline, started, base)


def _done(result: SemanticResult) -> Callable[[], SemanticResult]:
    return lambda: result


def _finish(runtime: Runtime, gen: Generation, worker: threading.Thread, box: dict[str, Any], deadline: float,
            started: float, base: dict[str, Any]) -> SemanticResult:
    worker.join(max(0.0, deadline - (time.perf_counter() - started)))
    if worker.is_alive():
        return _off(f"semantic query passed its deadline of {deadline * 1000:.0f} ms", started, **base)
    if "error" in box:
        failure = box["error"]
        text = str(failure) if isinstance(failure, EmbeddingUnavailable) \
            else f"provider failed: {type(failure).__name__}: {failure}"
        return _off(text[:300], started, **base)
    try:
        cov = coverage(runtime, gen)
    except Exception:
        cov = 0.0
    return SemanticResult(hits=tuple(box.get("hits", [])), ran=True, degraded_reason=None, coverage=cov,
                          elapsed_ms=(box["done_at"] - started) * 1000, **base)  # the search's own time
