#!/usr/bin/env python3
"""Turn latency with several processes writing one trove.db, and where the time goes.

Each writer process runs its own session through the host-loop simulator
(``bench/simulate.py``: tool-heavy turns, compaction with an instant fake model when the
engine asks for it); a turn's time is the engine's own time, the model excluded. Inside it,
each turn records the time spent waiting to start write transactions (cross-process lock waits), committing
them (WAL appends; checkpoints and their fsyncs land here) and the rest (statements,
Python). Prints p50/p95/max per writer count; figures on a shared machine are noisy.

    python bench/bench_contention.py                    # 1 and 8 writers, 120 turns each
    python bench/bench_contention.py --writers 1 4 8 --turns 200
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import _bootstrap  # noqa: E402,F401


def fake_complete(messages, model, timeout_s, max_tokens):
    return "Summary: " + str(messages[-1].get("content", ""))[-max(200, max_tokens):]


def instrument() -> dict[str, float]:
    """Wrap ``db.transaction`` and ``db.retry`` to time BEGIN IMMEDIATE and COMMIT per thread."""
    from hermes_trove import db as dbmod

    totals = {"begin_wait": 0.0, "commit": 0.0, "held": 0.0, "transactions": 0}
    phase = threading.local()
    real_retry, real_transaction = dbmod.retry, dbmod.Database.transaction

    def timed_retry(fn, attempts=5):
        start = time.perf_counter()
        try:
            return real_retry(fn, attempts)
        finally:
            which = getattr(phase, "next", None)
            if which is not None:
                totals["begin_wait" if which == "begin" else "commit"] += time.perf_counter() - start
                phase.next = "commit" if which == "begin" else None

    def timed_transaction(self):
        import contextlib

        @contextlib.contextmanager
        def cm():
            outer = getattr(phase, "depth", 0)
            phase.depth = outer + 1
            if outer == 0:
                phase.next = "begin"
                totals["transactions"] += 1
            start = time.perf_counter()
            try:
                with real_transaction(self) as conn:
                    yield conn
            finally:
                if outer == 0:
                    totals["held"] += time.perf_counter() - start
                phase.depth = outer
                phase.next = None
        return cm()

    dbmod.retry = timed_retry
    dbmod.Database.transaction = timed_transaction
    return totals


def worker(home: str, name: str, turns: int, start_at: float, context_length: int) -> None:
    totals = instrument()
    from hermes_trove.config import load_config
    from hermes_trove.engine import TroveEngine
    from hermes_trove.runtime import build_runtime

    env = {"TROVE_DATABASE_PATH": str(Path(home) / "trove.db"), "TROVE_FRESH_TAIL_COUNT": "8",
           "TROVE_LEAF_CHUNK_TOKENS": "2000"}
    if os.environ.get("TROVE_BENCH_PAYLOADS"):  # sidecar files (with their fsyncs) and redaction on
        env.update({"TROVE_LARGE_OUTPUT_EXTERNALIZATION_ENABLED": "1", "TROVE_SENSITIVE_PATTERNS_ENABLED": "1",
                    "TROVE_LARGE_OUTPUT_EXTERNALIZATION_THRESHOLD_CHARS": "2000"})
    cfg = load_config(env, hermes_home=home, warn=lambda m: None)
    eng = TroveEngine(build_runtime(cfg), complete=fake_complete)
    eng.update_model("fake", context_length)
    eng.on_session_start(name, platform="cli", conversation_id=None)
    from simulate import HostLoop, build_conversation

    loop = HostLoop(eng)
    conversation = list(build_conversation(turns, seed=sum(map(ord, name))))
    while time.time() < start_at:
        time.sleep(0.001)
    rows = []
    for turn in conversation:
        before = dict(totals)
        seen = len(loop.stats.engine_seconds)
        loop.run_turn(turn)
        took = sum(loop.stats.engine_seconds[seen:])  # the engine's own time (the model excluded)
        rows.append({"turn_s": took, "begin_wait_s": totals["begin_wait"] - before["begin_wait"],
                     "commit_s": totals["commit"] - before["commit"],
                     "held_s": totals["held"] - before["held"] - (totals["begin_wait"] - before["begin_wait"]),
                     "transactions": totals["transactions"] - before["transactions"]})
    print(json.dumps(rows))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def run(writers: int, turns: int, context_length: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as home:
        # the schema first, so no writer times a migration
        from hermes_trove.db import Database
        Database(Path(home) / "trove.db").connect()
        start_at = time.time() + 1.5
        procs = [subprocess.Popen([sys.executable, __file__, "--worker", home, f"w{i}", str(turns), repr(start_at),
                                   str(context_length)], stdout=subprocess.PIPE, text=True) for i in range(writers)]
        rows = []
        for p in procs:
            out, _ = p.communicate(timeout=900)
            if p.returncode != 0:
                raise SystemExit(f"writer failed with {p.returncode}")
            rows += json.loads(out.strip().splitlines()[-1])
        wal = Path(home) / "trove.db-wal"
        wal_bytes = wal.stat().st_size if wal.exists() else 0
    turn = [r["turn_s"] * 1000 for r in rows]
    wait = [r["begin_wait_s"] * 1000 for r in rows]
    commit = [r["commit_s"] * 1000 for r in rows]
    other = [t - w - c for t, w, c in zip(turn, wait, commit, strict=True)]
    held = [r["held_s"] * 1000 for r in rows]
    slow = [r for r in rows if r["turn_s"] * 1000 >= pct(turn, 0.95)]
    slow_s = max(1e-9, sum(r["turn_s"] for r in slow))
    return {"writers": writers, "turns": len(rows), "p50_ms": statistics.median(turn), "p95_ms": pct(turn, 0.95),
            "max_ms": max(turn), "lock_wait_p95_ms": pct(wait, 0.95), "commit_p95_ms": pct(commit, 0.95),
            "other_p95_ms": pct(other, 0.95), "held_p95_ms": pct(held, 0.95),
            "slowest5pct_share_lock_wait": sum(r["begin_wait_s"] for r in slow) / slow_s,
            "slowest5pct_share_commit": sum(r["commit_s"] for r in slow) / slow_s,
            "transactions_per_turn": statistics.mean(r["transactions"] for r in rows), "wal_bytes_end": wal_bytes}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _, _, home, name, turns, start_at, context_length = sys.argv
        worker(home, name, int(turns), float(start_at), int(context_length))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--writers", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--turns", type=int, default=120)
    ap.add_argument("--context-length", type=int, default=32000)
    ap.add_argument("--payloads", action="store_true",
                    help="turn on externalization (sidecar files and their fsyncs) and redaction")
    args = ap.parse_args()
    print(f"cpus={os.cpu_count()} turns/writer={args.turns} (times in ms; noisy on shared cores)")
    if args.payloads:
        os.environ["TROVE_BENCH_PAYLOADS"] = "1"
    for n in args.writers:
        r = run(n, args.turns, args.context_length)
        print(f"writers={r['writers']:2d} turns={r['turns']:5d} p50={r['p50_ms']:7.1f} p95={r['p95_ms']:7.1f}"
              f" max={r['max_ms']:7.1f} | p95 lock-wait={r['lock_wait_p95_ms']:7.1f} commit={r['commit_p95_ms']:6.1f}"
              f" other={r['other_p95_ms']:6.1f} held={r['held_p95_ms']:6.1f}"
              f" | slowest 5%: {r['slowest5pct_share_lock_wait']:.0%} lock wait,"
              f" {r['slowest5pct_share_commit']:.0%} commit | {r['transactions_per_turn']:.1f} tx/turn")


if __name__ == "__main__":
    main()
