#!/usr/bin/env python3
"""Per-turn engine cost as history grows, and auxiliary-model input per source token.

For each history size the session is pre-filled with that many stored (and already
summarised) messages, then a tool-heavy conversation runs through the host-loop
simulator with an instant fake model. Prints medians and p95 of the engine's own time
per turn (ingest, triggers, compaction; the model excluded) and of ingest alone, and the median CPU time
(this thread) of a quiet turn: the engine's calls of a turn that did not compact.
"""
from __future__ import annotations

import argparse
import cProfile
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import _bootstrap  # noqa: E402,F401
from simulate import HostLoop, build_conversation  # noqa: E402

from hermes_trove.compaction import assembly, policy  # noqa: E402
from hermes_trove.config import load_config  # noqa: E402
from hermes_trove.engine import TroveEngine  # noqa: E402
from hermes_trove.runtime import build_runtime  # noqa: E402
from hermes_trove.store import SessionKey  # noqa: E402


def fake_complete(messages, model, timeout_s, max_tokens):
    """Answers like a cooperative summarizer: about half its token budget of text."""
    text = messages[0]["content"]
    return text[-max(200, max_tokens):]


def prefill(runtime, session: str, n: int, sessions: int = 1) -> None:
    """``n`` stored messages already folded into a condensed DAG (fan-in 4 up to depth 3, and
    deeper where the engine's condensation policy would go past the cap).

    With ``sessions`` > 1 the history is spread over that many sessions, ``session`` being
    the last of them. Rows go in with executemany (``append_bulk``), one transaction.
    """
    batch = 5000
    per = -(-n // max(1, sessions))
    with runtime.db.transaction() as conn:
        for s in range(max(1, sessions)):
            name = session if s == sessions - 1 or sessions <= 1 else f"{session}-old-{s}"
            lo, hi = s * per, min(n, (s + 1) * per)
            if lo >= hi:
                continue
            key = SessionKey(name, platform="cli")
            leaves: list[int] = []
            for start in range(lo, hi, batch):
                msgs = [{"role": "user" if i % 2 == 0 else "assistant",
                         "content": f"historic message {i} about ledger shard {i % 97} and invoice {i * 7}"}
                        for i in range(start, min(hi, start + batch))]
                ids = runtime.store.append_bulk(key, msgs, conn=conn)
                for j in range(0, len(ids), 50):
                    chunk = ids[j:j + 50]
                    text = f"Summary of messages {chunk[0]}-{chunk[-1]}: " + " ".join(
                        f"ledger shard {k % 97} reconciled for invoice {k * 7};" for k in chunk[:20])
                    leaves.append(runtime.dag.add_leaf(name, text, chunk, token_count=len(text) // 4,
                                                       source_token_count=50 * 15, earliest_at=time.time(),
                                                       latest_at=time.time(), conn=conn))
            level = leaves
            for depth in (1, 2, 3):
                nxt = []
                for j in range(0, len(level) - len(level) % 4, 4):
                    text = f"Condensed d{depth} over {level[j:j + 4]}: " + "ledger reconciliation continued; " * 30
                    nxt.append(runtime.dag.add_condensed(name, depth, text, level[j:j + 4],
                                                         token_count=len(text) // 4,
                                                         source_token_count=3000 * 4 ** depth,
                                                         earliest_at=time.time(), latest_at=time.time(),
                                                         conn=conn))
                level = nxt
            while (group := policy.plan_condensation([assembly.node_info(x) for x in runtime.dag.frontier(name)],
                                                     4, 3)) is not None:  # the shape the engine keeps past the cap
                runtime.dag.add_condensed(name, group.depth + 1, f"Condensed over {group.node_ids}", group.node_ids,
                                          token_count=200, source_token_count=3000 * 4 ** group.depth,
                                          earliest_at=time.time(), latest_at=time.time(), conn=conn)
            conn.execute("UPDATE sessions SET frontier_store_id=(SELECT MAX(store_id) FROM messages"
                         " WHERE session_id=?) WHERE session_id=?", (name, name))


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def run(size: int, turns: int, context: int, sessions: int = 1, profile: str = "") -> dict:
    home = Path(tempfile.mkdtemp(prefix="trove-bench-"))
    cfg = dataclasses.replace(load_config({}, hermes_home=str(home)), database_path=str(home / "trove.db"))
    runtime = build_runtime(cfg)
    engine = TroveEngine(runtime, complete=fake_complete)
    engine.update_model("bench", context)
    engine.on_session_start("bench", platform="cli")
    t0 = time.perf_counter()
    prefill(runtime, "bench", size, sessions)
    runtime.db.read().execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the turns start from a checkpointed file
    fill_s = time.perf_counter() - t0
    ingest_times: list[float] = []
    store_ingest = runtime.store.ingest

    def timed_ingest(*a, **kw):
        t = time.perf_counter()
        try:
            return store_ingest(*a, **kw)
        finally:
            ingest_times.append(time.perf_counter() - t)

    runtime.store.ingest = timed_ingest  # type: ignore[method-assign]
    compress_cpu: list[float] = []  # CPU time per compaction: steadier than wall time on a busy machine
    compress = engine.compress

    def timed_compress(*a, **kw):
        t = time.process_time()
        try:
            return compress(*a, **kw)
        finally:
            compress_cpu.append((time.process_time() - t) * 1000)

    engine.compress = timed_compress  # type: ignore[method-assign]
    loop = HostLoop(engine)
    nodes_before = {n.node_id for n in runtime.dag.visible("bench")}
    profiler = cProfile.Profile() if profile else None
    if profiler:
        profiler.enable()
    for turn in build_conversation(turns, seed=3):
        loop.run_turn(turn)
    if profiler:
        profiler.disable()
        profiler.dump_stats(f"{profile}.{size}")
    new_nodes = [n for n in runtime.dag.visible("bench") if n.node_id not in nodes_before]
    leaf_source = sum(n.source_token_count for n in new_nodes if n.depth == 0)
    per_turn = [s * 1000 for s in loop.stats.engine_seconds]
    quiet_cpu = [c * 1000 for c, done in zip(loop.stats.engine_cpu, loop.stats.compacted, strict=True) if not done]
    return {"stored": runtime.store.count("bench"), "prefill_s": round(fill_s, 1),
            "turn_p50_ms": statistics.median(per_turn), "turn_p95_ms": pct(per_turn, 0.95),
            "turn_max_ms": max(per_turn), "quiet_cpu_p50_ms": statistics.median(quiet_cpu or [0.0]),
            "compact_cpu_p50_ms": statistics.median(compress_cpu or [0.0]),
            "compact_cpu_max_ms": max(compress_cpu or [0.0]),
            "frontier": len(runtime.dag.frontier("bench")),
            "ingest_p50_ms": statistics.median(ingest_times) * 1000, "ingest_p95_ms": pct(ingest_times, 0.95) * 1000,
            "compactions": loop.stats.compactions, "leaf_source_tokens": leaf_source,
            "max_prompt": max(loop.stats.prompts), "threshold": engine.threshold_tokens, "engine": engine}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--context-length", type=int, default=64000)
    ap.add_argument("--sessions", type=int, default=1, help="spread the stored history over this many sessions")
    ap.add_argument("--profile", default="", help="write a cProfile of the turns to PROFILE.<size>")
    args = ap.parse_args()
    print(f"{'history':>8} {'turn p50':>9} {'turn p95':>9} {'turn max':>9} {'ingest p50':>10} {'ingest p95':>10} "
          f"{'compactions':>11} {'frontier':>8} {'cpu/compaction p50':>18} {'max':>8} {'max prompt':>10} "
          f"{'threshold':>9} {'prefill':>8} {'quiet turn cpu':>14}")
    aux_in = aux_src = 0
    for size in (int(s) for s in args.sizes.split(",")):
        r = run(size, args.turns, args.context_length, args.sessions, args.profile)
        print(f"{size:>8} {r['turn_p50_ms']:>7.2f}ms {r['turn_p95_ms']:>7.2f}ms {r['turn_max_ms']:>7.2f}ms "
              f"{r['ingest_p50_ms']:>8.2f}ms {r['ingest_p95_ms']:>8.2f}ms {r['compactions']:>11} {r['frontier']:>8} "
              f"{r['compact_cpu_p50_ms']:>16.2f}ms {r['compact_cpu_max_ms']:>6.2f}ms "
              f"{r['max_prompt']:>10} {r['threshold']:>9} "
              f"{r['prefill_s']:>7}s {r['quiet_cpu_p50_ms']:>12.3f}ms")
        counters = r["engine"].runtime.counters
        aux_in += counters.get("aux_input_tokens", 0)
        aux_src += counters.get("compacted_source_tokens", 0)
    if aux_src:
        print(f"\nauxiliary-model input: {aux_in} tokens for {aux_src} source tokens compacted = "
              f"{1000 * aux_in / aux_src:.0f} per 1k source tokens ({aux_in / aux_src:.2f} per source token)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
