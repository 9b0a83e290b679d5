"""Padding a LoCoMo memory for ``bench_recall.py --scale``: synthetic chat rows made of the dev
conversations' own vocabulary, up to N stored messages, and (with vectors) each padding row's
vector taken from a pool of texts embedded once. ``memory`` is ``bench_recall.Memory``.
"""
from __future__ import annotations

import random
import re
import time
from typing import Any


def vocabulary(memories: list[Any]) -> list[str]:
    words: list[str] = []
    for m in memories:
        for row in m.runtime.store.page(f"{m.name}-s1", 0, 1000):
            words += re.findall(r"[a-z]{3,}", row.content.lower())
    return words or ["alpha", "beta", "gamma"]


def pad_text(rng: random.Random, words: list[str]) -> str:
    return " ".join(rng.choice(words) for _ in range(rng.randint(6, 40)))


def pad_store(memory: Any, total: int, words: list[str], seed: int = 7,
              pool: list[str] | None = None) -> float:
    """Add synthetic sessions of chat-like rows until the store holds ``total`` messages.

    With ``pool`` each row's text is drawn from it; without, every row is fresh random words.
    """
    from hermes_trove.store import SessionKey

    rng = random.Random(seed)
    have = memory.runtime.store.count()
    start = time.perf_counter()
    t0 = 1_600_000_000.0
    n = 0
    while have + n < total:
        batch = min(400, total - have - n)
        msgs = [{"role": rng.choice(("user", "assistant")),
                 "content": rng.choice(pool) if pool else pad_text(rng, words),
                 "timestamp": t0 + (n + i) * 60} for i in range(batch)]
        memory.runtime.store.append_bulk(SessionKey(f"pad-{n // 400}", platform="bench"), msgs)
        n += batch
    return time.perf_counter() - start


def embed_pool(memory: Any, pool: list[str]) -> tuple[dict[str, tuple[bytes, float]], float]:
    """Chunk text -> (int8 vector bytes, scale) for every chunk of the pool texts, embedded
    once with the configured provider exactly as the indexer chunks and quantizes them."""
    from hermes_trove.retrieval import embed_text, semantic
    from hermes_trove.retrieval.vector_index import quantize

    chunks = sorted({text[s:e] for text in pool for s, e in embed_text.chunk_spans(text)})
    start = time.perf_counter()
    provider = semantic.get_provider(semantic.target_spec(memory.runtime))
    q, scale = quantize(provider.embed(chunks))
    return {c: (q[i].tobytes(), float(scale[i])) for i, c in enumerate(chunks)}, time.perf_counter() - start


def vectors_for_padding(memory: Any, cache: dict[str, tuple[bytes, float]]) -> dict[str, Any]:
    """Write vectors for every row past the active generation's message cursor, reading the rows
    through the vector store (as the indexer does) and taking each chunk's vector from ``cache``.
    A chunk not in the cache (none expected) is embedded with the provider."""
    from hermes_trove.retrieval import embed_text, semantic
    from hermes_trove.retrieval.vector_index import quantize
    from hermes_trove.retrieval.vector_store import VectorRow

    runtime = memory.runtime
    store = semantic.vector_store(runtime)
    gen = semantic.searched_generation(store)
    if gen is None:
        raise RuntimeError("no vector generation: the LoCoMo rows were not indexed")
    policy = runtime.config.embedding_tool_output_policy
    start = time.perf_counter()
    written = embedded = 0
    while True:
        items = store.pending_messages(gen.message_cursor, 2000)
        if not items:
            break
        rows: list[VectorRow] = []
        for item in items:
            text = embed_text.item_text(item, policy)
            for s, e in embed_text.chunk_spans(text):
                chunk = text[s:e]
                if chunk not in cache:
                    provider = semantic.get_provider(semantic.spec_for(runtime, gen))
                    q, sc = quantize(provider.embed([chunk]))
                    cache[chunk] = (q[0].tobytes(), float(sc[0]))
                    embedded += 1
                vec, scale = cache[chunk]
                rows.append(VectorRow(item.kind, item.item_id, s, e, item.session_id, item.at, vec, scale))
        written += store.write(gen.generation_id, rows, message_cursor=items[-1].item_id)
        gen = store.generation(gen.generation_id) or gen
    cov = semantic.coverage(runtime, gen, fresh=True)
    return {"vectors_written": written, "embedded_outside_pool": embedded, "generation": gen.generation_id,
            "generation_state": gen.state, "vectors_total": store.vector_count(gen.generation_id),
            "coverage": cov, "write_seconds": round(time.perf_counter() - start, 1)}
