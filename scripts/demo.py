#!/usr/bin/env python3
"""Replay a long agent conversation through the real trove engine, offline.

No Hermes, no API key: the summarizer runs its deterministic level. Prints the prompt
staying under the threshold, the summary DAG growing in depth, and an early exact
detail recovered from the store after it left the prompt. Exits non-zero if any of
those fails.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # the stand-in host loop
import _bootstrap  # noqa: E402,F401
from simulate import HostLoop, build_conversation  # noqa: E402

from hermes_trove.config import load_config  # noqa: E402
from hermes_trove.engine import TroveEngine  # noqa: E402
from hermes_trove.runtime import build_runtime  # noqa: E402
from hermes_trove.tools import dispatch  # noqa: E402

CANARY = "OPS-4417"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=300)
    ap.add_argument("--context-length", type=int, default=64000)
    ap.add_argument("--db", help="database path (default: a temporary directory)")
    ap.add_argument("--every", type=int, default=25, help="print a progress line every N turns")
    args = ap.parse_args(argv)

    home = Path(args.db).parent if args.db else Path(tempfile.mkdtemp(prefix="trove-demo-"))
    config = dataclasses.replace(load_config({}, hermes_home=str(home)),
                                 database_path=args.db or str(home / "trove.db"), leaf_chunk_tokens=6000)
    runtime = build_runtime(config)
    engine = TroveEngine(runtime)
    engine.update_model("offline-demo", args.context_length)
    engine.on_session_start("demo-session", platform="cli")
    loop = HostLoop(engine)
    print(f"trove demo: {args.turns} turns, context {args.context_length}, threshold {engine.threshold_tokens} "
          f"tokens, database {config.database_path}")
    print(f"{'turn':>5} {'stored':>7} {'prompt':>7} {'max prompt':>10} {'compactions':>11}  DAG nodes by depth")
    t0 = time.perf_counter()
    for i, turn in enumerate(build_conversation(args.turns)):
        loop.run_turn(turn)
        if (i + 1) % args.every == 0 or i + 1 == args.turns:
            depths = {f"d{d}": s["count"] for d, s in runtime.dag.depth_stats("demo-session").items()}
            print(f"{i + 1:>5} {runtime.store.count('demo-session'):>7} {loop.stats.prompts[-1]:>7} "
                  f"{max(loop.stats.prompts):>10} {loop.stats.compactions:>11}  {depths}")
    elapsed = time.perf_counter() - t0

    raw_in_prompt = any(CANARY in str(m.get("content")) for m in loop.messages if not m.get("_trove_summary"))
    in_summary = any(CANARY in str(m.get("content")) for m in loop.messages if m.get("_trove_summary"))
    recovered = recover(engine)
    max_depth = max(runtime.dag.depth_stats("demo-session"), default=-1)
    over = sum(p >= engine.threshold_tokens for p in loop.stats.prompts)
    print(f"\n{len(loop.stats.prompts)} model requests, {over} at or over the threshold; "
          f"deepest summary level d{max_depth}; engine time {elapsed:.2f}s")
    print(f"turn-0 detail {CANARY!r}: raw message still in the live prompt: {raw_in_prompt}; "
          f"mentioned by the summary prefix: {in_summary}")
    print("recovered through the store:")
    print(json.dumps(recovered, indent=2)[:1500])
    ok = over == 0 and max_depth >= 2 and bool(recovered.get("exact")) and CANARY in recovered["exact"]
    print("\nRESULT:", "ok" if ok else "FAILED")
    return 0 if ok else 1


def recover(engine: TroveEngine) -> dict:
    """Find the canary with trove_grep, then expand it to the exact message."""
    ctx = engine.tool_context()
    hits = json.loads(dispatch(ctx, "trove_grep", {"query": f'"{CANARY}" password rotation ticket'}))
    raw = [h for h in hits.get("results", []) if h.get("type") == "message"]
    if not raw:
        return {"via": "trove_grep", "error": hits.get("error", "no raw message matched")}
    got = json.loads(dispatch(ctx, "trove_expand", {"store_id": raw[0]["store_id"]}))
    return {"via": "trove_grep + trove_expand", "store_id": raw[0]["store_id"],
            "exact": got.get("content") or got.get("message", {}).get("content", "")}


if __name__ == "__main__":
    sys.exit(main())
