"""Search latency over an archive whose rows are long: every third row a large tool output.

An agent's archive holds tool outputs of tens of thousands of characters (files read,
logs, test runs) among short chat turns. This builds ``--sessions`` sessions of 100 rows
where every third row is a tool output of ``--words`` words (about 7 characters each)
drawn from a small vocabulary, the others 30-word turns of the same words, then times
``trove_recall`` and archive-wide ``trove_grep`` through ``tools.dispatch`` from a new
session. Prints median and p95 per tool; no LLM, no vectors.

    python bench/bench_long_rows.py [--sessions 20] [--words 4000] [--repeat 5]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import _bootstrap  # noqa: E402,F401

from hermes_trove.config import load_config  # noqa: E402
from hermes_trove.engine import TroveEngine  # noqa: E402
from hermes_trove.runtime import build_runtime  # noqa: E402
from hermes_trove.store import SessionKey  # noqa: E402
from hermes_trove.tools import dispatch  # noqa: E402

WORDS = ("invoice ledger rounding currency latency worker queue shard replica index cache vector matrix refund "
         "customer").split()
QUERIES = ("invoice rounding for the customer refund", "latency of the worker queue", "which shard replica index",
           "cache vector matrix")


def build(home: Path, sessions: int, words: int, seed: int = 5) -> TroveEngine:
    cfg = dataclasses.replace(load_config({}, hermes_home=str(home)), database_path=str(home / "trove.db"),
                              memory_scope="profile")
    runtime = build_runtime(cfg)
    rng = random.Random(seed)
    for s in range(sessions):
        msgs = []
        for i in range(100):
            at = 1.0 + s * 1000 + i
            if i % 3 == 2:
                text = " ".join(rng.choice(WORDS) + (str(rng.randint(0, 99)) if rng.random() < 0.5 else "")
                                for _ in range(words))
                msgs.append({"role": "tool", "content": text, "tool_call_id": f"c{s}-{i}", "timestamp": at})
            else:
                msgs.append({"role": "user" if i % 3 == 0 else "assistant",
                             "content": " ".join(rng.choices(WORDS, k=30)), "timestamp": at})
        runtime.store.append(SessionKey(f"s{s}", platform="cli"), msgs)
    engine = TroveEngine(runtime)
    engine.on_session_start("ask", platform="cli")
    return engine


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--words", type=int, default=4000, help="words per tool output")
    parser.add_argument("--repeat", type=int, default=5, help="rounds over the four queries")
    args = parser.parse_args()
    engine = build(Path(tempfile.mkdtemp(prefix="trove-bench-long-")), args.sessions, args.words)
    sample = engine.runtime.store.get(3)
    print(f"{engine.runtime.store.count()} rows in {args.sessions} sessions; a tool output is about "
          f"{len(sample.content) if sample else 0:,} characters")
    for tool, extra in (("trove_recall", {}), ("trove_grep", {"session_scope": "all"})):
        times = []
        for _ in range(args.repeat):
            for query in QUERIES:
                start = time.perf_counter()
                out = json.loads(dispatch(engine.tool_context(), tool, {"query": query, **extra}))
                times.append((time.perf_counter() - start) * 1000)
                if "error" in out:
                    raise RuntimeError(out["error"])
        times.sort()
        p95 = times[int(0.95 * (len(times) - 1))]
        print(f"  {tool:<12} median {statistics.median(times):7.1f} ms   p95 {p95:7.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
