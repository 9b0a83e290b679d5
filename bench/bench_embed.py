"""Embeddings cost: local-provider throughput and memory, and vector search at 100k / 1M.

1. Throughput: the first ``--texts`` LoCoMo dev turns embedded by the local provider (int8
   MiniLM, onnxruntime, CPU arena off) in its default batches; load time, emb/s of bare
   turns, one-query p50/p95, RSS after load and peak RSS. Then the indexer itself: the same
   turns stored in a real trove.db (one session per LoCoMo session) and embedded by indexing
   passes with ``--context`` (default text): messages/s until the vectors are searchable (a
   new space is built with vector context first) and until the configured recipe is done.
2. Search: ``--sizes`` random unit vectors (dim 384) stored as int8 + scale in a real trove.db
   (``vector_store``), loaded into a ``VectorIndex`` (load time, RAM), then p50/p95 of top-50
   queries by the shipped plan (exact int8 up to 20k candidates, else sign-bit prescreen of
   max(4000, 1%) + int8 rescoring), beside a full exact int8 scan; recall@10 of the plan
   against the exact scan. A size whose database does not fit is skipped with a message.

    python bench/bench_embed.py [--texts 1000] [--sizes 100000 1000000] [--queries 100]
    python bench/bench_embed.py --texts 400 --indexer-only 3 [--context text|vector|none]   # medians of 3
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _locomo import DEFAULT_DATA, load_package, sessions  # noqa: E402


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def turns(limit: int) -> list[str]:
    data = json.loads(DEFAULT_DATA.read_text())
    out: list[str] = []
    for conv in data:
        for _, _, session_turns in sessions(conv["conversation"]):
            for t in session_turns:
                out.append(f"{t.get('speaker', '')}: {t.get('text', '')}")
                if len(out) >= limit:
                    return out
    return out


def bench_throughput(n: int) -> dict:
    from hermes_trove.retrieval.embed_providers import LOCAL_MODEL, LocalProvider, ProviderSpec

    texts = turns(n)
    base = rss_mb()
    provider = LocalProvider(ProviderSpec("local", LOCAL_MODEL, batch_size=8, threads=int(os.environ.get(
        "TROVE_EMBEDDING_THREADS", "1"))))
    t0 = time.perf_counter()
    provider.embed(["load"])
    load_s = time.perf_counter() - t0
    loaded = rss_mb()
    t0 = time.perf_counter()
    for i in range(0, len(texts), 32):  # the indexer hands the provider groups of rows
        provider.embed(texts[i:i + 32])
    elapsed = time.perf_counter() - t0
    lat = []
    for t in texts[:100]:
        t1 = time.perf_counter()
        provider.embed([t])
        lat.append((time.perf_counter() - t1) * 1000)
    return {"texts": len(texts), "threads": provider.spec.threads, "load_s": round(load_s, 3),
            "emb_per_s": round(len(texts) / elapsed, 1), "query_p50_ms": round(pct(lat, 50), 2),
            "query_p95_ms": round(pct(lat, 95), 2), "rss_before_mb": round(base), "rss_loaded_mb": round(loaded),
            "rss_after_mb": round(rss_mb()), "peak_rss_mb": round(peak_mb())}


def bench_indexer(n: int, workdir: Path, context: str = "text") -> dict:
    """Messages/s through the real indexer (recipe, SQLite writes, cursors) on a real trove.db: until
    the first vectors are searchable, and until the configured recipe has been applied to all."""
    import dataclasses

    from hermes_trove.config import load_config
    from hermes_trove.retrieval import indexer
    from hermes_trove.retrieval.vector_store import VectorStore
    from hermes_trove.runtime import build_runtime
    from hermes_trove.store import SessionKey

    home = workdir / "indexer"
    home.mkdir()
    cfg = dataclasses.replace(load_config({}, hermes_home=str(home)), database_path=str(home / "trove.db"),
                              embeddings_enabled=True, embedding_context=context)
    runtime = build_runtime(cfg)
    data = json.loads(DEFAULT_DATA.read_text())
    stored = 0
    for conv in data:
        for key, _, session_turns in sessions(conv["conversation"]):
            take = session_turns[:n - stored]
            runtime.store.append(SessionKey(f"{conv['sample_id']}-{key}"), [
                {"role": "user" if i % 2 == 0 else "assistant",
                 "content": f"{t.get('speaker', '')}: {t.get('text', '')}"} for i, t in enumerate(take)])
            stored += len(take)
            if stored >= n:
                break
        if stored >= n:
            break
    indexer.warmup(runtime)
    store = VectorStore(runtime.db)
    t0, c0 = time.perf_counter(), time.process_time()
    searchable = None
    while True:
        report = indexer.run_pass(runtime, budget_s=5.0, max_items=2048)
        if searchable is None and store.active() is not None:
            searchable = (time.perf_counter() - t0, time.process_time() - c0, store.active().recipe)
        if report.status != "partial":
            break
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert searchable is not None, report
    # CPU seconds of this process too: on a shared machine wall time mostly measures the neighbours
    return {"messages": stored, "recipe": store.active().recipe, "status": report.status,
            "searchable_recipe": searchable[2], "searchable_messages_per_s": round(stored / searchable[0], 1),
            "searchable_messages_per_cpu_s": round(stored / searchable[1], 1),
            "messages_per_s": round(stored / elapsed, 1), "seconds": round(elapsed, 1),
            "messages_per_cpu_s": round(stored / cpu, 1), "cpu_seconds": round(cpu, 1)}


def bench_search(n: int, queries: int, workdir: Path) -> dict:
    import numpy as np

    from hermes_trove.db import Database
    from hermes_trove.retrieval import vector_index
    from hermes_trove.retrieval.vector_store import VectorRow, VectorStore

    dim = 384
    rng = np.random.default_rng(0)
    db = Database(workdir / f"vectors-{n}.db")
    store = VectorStore(db)
    gen = store.ensure("local", "bench", dim)
    t0 = time.perf_counter()
    step = 50000
    for start in range(0, n, step):
        v = rng.standard_normal((min(step, n - start), dim)).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        q, scale = vector_index.quantize(v)
        store.write(gen.generation_id, [VectorRow("message", start + i, 0, 100, f"s{(start + i) // 2000}",
                                                  float(start + i), q[i].tobytes(), float(scale[i]))
                                        for i in range(len(v))])
    write_s = time.perf_counter() - t0
    file_mb = os.path.getsize(db.path) / 2**20
    before = rss_mb()
    index = vector_index.VectorIndex(gen.generation_id, dim)
    t0 = time.perf_counter()
    index.refresh(store)
    load_s = time.perf_counter() - t0
    ram = rss_mb() - before
    qs = rng.standard_normal((queries, dim)).astype(np.float32)
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)
    index.search(qs[0], limit=50)  # builds the column-major sign bits once
    plan, exact, overlap = [], [], []
    for q in qs:
        t1 = time.perf_counter()
        got = index.search(q, limit=50)
        plan.append((time.perf_counter() - t1) * 1000)
        saved = vector_index.EXACT_LIMIT
        vector_index.EXACT_LIMIT = 10**9
        t1 = time.perf_counter()
        ref = index.search(q, limit=10)
        exact.append((time.perf_counter() - t1) * 1000)
        vector_index.EXACT_LIMIT = saved
        overlap.append(len({h.item_id for h in got[:10]} & {h.item_id for h in ref}) / 10)
    one_session = []
    for q in qs[:20]:
        t1 = time.perf_counter()
        index.search(q, session_ids=["s3"], limit=50)
        one_session.append((time.perf_counter() - t1) * 1000)
    db.close()
    return {"vectors": n, "write_s": round(write_s, 1), "file_mb": round(file_mb), "load_s": round(load_s, 2),
            "index_ram_mb": round(ram), "index_bytes_mb": round(index.nbytes / 2**20),
            "plan_p50_ms": round(pct(plan, 50), 2), "plan_p95_ms": round(pct(plan, 95), 2),
            "exact_int8_p50_ms": round(pct(exact, 50), 2), "exact_int8_p95_ms": round(pct(exact, 95), 2),
            "plan_recall_at_10_vs_exact": round(statistics.mean(overlap), 3),
            "one_session_p50_ms": round(pct(one_session, 50), 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--texts", type=int, default=1000)
    parser.add_argument("--sizes", type=int, nargs="*", default=[100000])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--indexer-only", type=int, default=0, metavar="RUNS",
                        help="only the indexer, RUNS times on fresh stores; prints each run and the medians")
    parser.add_argument("--context", choices=("text", "vector", "none"), default="text",
                        help="TROVE_EMBEDDING_CONTEXT of the indexer runs (default text, the shipped one)")
    args = parser.parse_args(argv)
    load_package()
    with tempfile.TemporaryDirectory(prefix="trove-bench-embed-") as tmp:
        if args.indexer_only:
            runs = []
            for i in range(args.indexer_only):
                (Path(tmp) / str(i)).mkdir()
                runs.append(bench_indexer(args.texts, Path(tmp) / str(i), args.context))
                print(json.dumps({"indexer": runs[-1]}), flush=True)
            print(json.dumps({"indexer_median": {k: statistics.median(r[k] for r in runs) for k in (
                "searchable_messages_per_s", "searchable_messages_per_cpu_s", "messages_per_s",
                "messages_per_cpu_s", "seconds", "cpu_seconds")}}))
            return 0
        if not args.skip_throughput:
            print(json.dumps({"throughput": bench_throughput(args.texts)}), flush=True)
            print(json.dumps({"indexer": bench_indexer(args.texts, Path(tmp), args.context)}), flush=True)
        for n in args.sizes:
            free_mb = os.statvfs(tmp).f_bavail * os.statvfs(tmp).f_frsize / 2**20
            if free_mb < n * 500 / 2**20 * 2:
                print(json.dumps({"search": {"vectors": n, "skipped": f"only {free_mb:.0f} MB free in {tmp}"}}))
                continue
            print(json.dumps({"search": bench_search(n, args.queries, Path(tmp))}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
