"""trove_recent latency over a year of synthetic history, and the model cost of rollups.

History is written straight through the store and the DAG (no compaction run): DAYS days
ending yesterday, each with SESSIONS sessions of MESSAGES messages and one leaf summary per
LEAF_SIZE messages; today's messages stay unsummarised (the raw-messages mode). Latency is
one ``tools.dispatch`` call (parse, query, shape, bound JSON), for a mix of periods, first
with rollups off (leaf summaries), then with every rollup built (rollups mode). The build
uses a fake model that records its calls and input, giving the cost per day of conversation.

    python bench/bench_recent.py [--days 365] [--repeat 20]
"""
from __future__ import annotations

import argparse
import dataclasses
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

SESSIONS, MESSAGES, LEAF_SIZE = 2, 40, 10
WORDS = ("deploy", "kiln", "invoice", "router", "garden", "schema", "pottery", "backup", "budget", "trail")


def _bootstrap() -> None:
    """Register this checkout as ``hermes_trove`` (scripts/_bootstrap.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    import _bootstrap  # noqa: F401


def build_history(runtime: Any, days: int, today: datetime) -> tuple[int, int]:
    from hermes_trove.store import SessionKey

    rng = random.Random(7)
    n_messages = n_leaves = 0
    for back in range(days, -1, -1):
        day = today - timedelta(days=back)
        with runtime.db.transaction() as conn:
            for s in range(SESSIONS):
                sid = f"{day.date().isoformat()}-{s}"
                base = day.timestamp() + 3600 * (8 + 6 * s)
                msgs = [{"role": "user" if i % 2 == 0 else "assistant",
                         "content": " ".join(rng.choice(WORDS) for _ in range(60)), "timestamp": base + 60 * i}
                        for i in range(MESSAGES)]
                ids = runtime.store.append_bulk(SessionKey(sid, platform="cli"), msgs, conn=conn)
                n_messages += len(ids)
                if back == 0:
                    continue  # today: nothing summarised yet
                for k in range(0, len(ids), LEAF_SIZE):
                    chunk = ids[k:k + LEAF_SIZE]
                    text = f"On {day.date():%d %B %Y} the session worked on " + " ".join(
                        rng.choice(WORDS) for _ in range(220))
                    runtime.dag.add_leaf(sid, text, chunk, token_count=300, source_token_count=1000,
                                         earliest_at=base + 60 * k, latest_at=base + 60 * (k + len(chunk) - 1),
                                         conn=conn)
                    n_leaves += 1
    return n_messages, n_leaves


PERIODS = ("yesterday", "today", "last week", "this week", "last month", "7d", "30d", "last 24h")


def measure(ctx: Any, repeat: int, today: datetime) -> dict[str, Any]:
    from hermes_trove.tools import dispatch

    rng = random.Random(11)
    samples: list[float] = []
    modes: Counter[str] = Counter()
    sizes: list[int] = []
    import json

    for _ in range(repeat):
        periods = list(PERIODS) + [(today - timedelta(days=rng.randint(2, 360))).date().isoformat(),
                                   (today - timedelta(days=rng.randint(8, 350))).strftime("%G-W%V"),
                                   (today - timedelta(days=rng.randint(40, 330))).strftime("%Y-%m")]
        for period in periods:
            t0 = time.perf_counter()
            text = dispatch(ctx, "trove_recent", {"period": period})
            samples.append((time.perf_counter() - t0) * 1000)
            out = json.loads(text)
            modes[out.get("mode", "error")] += 1
            sizes.append(len(text))
    samples.sort()
    return {"calls": len(samples), "p50_ms": round(statistics.median(samples), 2),
            "p95_ms": round(samples[int(0.95 * (len(samples) - 1))], 2), "max_ms": round(samples[-1], 2),
            "modes": dict(modes), "max_chars": max(sizes)}


class FakeModel:
    def __init__(self) -> None:
        self.calls = 0
        self.input_chars = 0

    def __call__(self, messages: list[dict[str, Any]], model: str, timeout_s: float, max_tokens: int) -> str:
        self.calls += 1
        self.input_chars += sum(len(m["content"]) for m in messages)
        return "A day of work on deploys and pottery, dated 3 May 2024. " * 20 + "\nExpand for details about: work"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args(argv)
    _bootstrap()
    from hermes_trove.config import load_config
    from hermes_trove.runtime import build_runtime
    from hermes_trove.store import SessionKey
    from hermes_trove.temporal import rollups
    from hermes_trove.toolkit import ToolContext

    tmp = Path(tempfile.mkdtemp(prefix="bench-recent-"))
    today = datetime.combine(datetime.now(UTC).date(), datetime.min.time(), tzinfo=UTC)
    config = dataclasses.replace(load_config({}), database_path=str(tmp / "trove.db"))
    runtime = build_runtime(config)
    t0 = time.perf_counter()
    n_messages, n_leaves = build_history(runtime, args.days, today)
    print(f"history: {args.days + 1} days, {n_messages} messages, {n_leaves} leaf summaries "
          f"({time.perf_counter() - t0:.1f} s to write)")
    ctx = ToolContext(runtime=runtime, session=SessionKey(f"{today.date().isoformat()}-0"), snapshot={})

    off = measure(ctx, args.repeat, today)
    print(f"rollups off: {off}")

    on_runtime = dataclasses.replace(runtime, config=dataclasses.replace(config, temporal_rollups_enabled=True))
    model = FakeModel()
    t0 = time.perf_counter()
    built = Counter()
    while True:
        report = rollups.run_pass(on_runtime, model, max_builds=1000, budget_s=600)
        built.update(b["kind"] for b in report["built"])
        if not report["built"] or report["remaining"] == 0:
            break
    seconds = time.perf_counter() - t0
    days = args.days
    print(f"rollup build: {dict(built)} in {seconds:.1f} s; fake model calls {model.calls} "
          f"({model.calls / days:.2f} per day of conversation), input {model.input_chars} chars "
          f"({model.input_chars / days:.0f} per day)")
    on_ctx = dataclasses.replace(ctx, runtime=on_runtime)
    on = measure(on_ctx, args.repeat, today)
    print(f"rollups on:  {on}")
    target = max(off["p95_ms"], on["p95_ms"])
    print(f"RESULT: p95 {target} ms (target < 50 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
