#!/usr/bin/env python3
"""CPU time of the per-turn plugin hooks as the host's list grows.

A runtime on a temporary ``trove.db`` serves one active session; the hooks ``make_hooks``
returns are called as the host calls them each turn: ``pre_llm_call`` with the turn's
history, then ``post_llm_call`` with the history and the turn's new messages. The list
holds user, assistant and tool messages, the recall policy in the ``api_content`` of the
user message it was injected into, and (``compacted``) the summary message a compaction
put first. ``fresh`` is a session with no summary anywhere: the hook scans for one and
reads the frontier. ``--reload`` gives each call a copy of every dict, as a gateway that
reloads its transcript each turn does. Prints the median and p95 CPU time (this thread)
per call, in milliseconds.
"""
from __future__ import annotations

import argparse
import dataclasses
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import _bootstrap  # noqa: E402,F401

from hermes_trove.compaction import assembly  # noqa: E402
from hermes_trove.config import load_config  # noqa: E402
from hermes_trove.engine import TroveEngine  # noqa: E402
from hermes_trove.hooks import make_hooks, recall_policy  # noqa: E402
from hermes_trove.runtime import build_runtime  # noqa: E402

SESSION = "bench-hooks"


def no_model(messages, model, timeout_s, max_tokens):
    raise RuntimeError("no model in this benchmark")


def exchange(i: int) -> list[dict]:
    """One turn's messages: a user request, a tool call and its result every third turn, an answer."""
    out: list[dict] = [{"role": "user", "content": f"turn {i}: check invoice {i * 7} on ledger shard {i % 97}"}]
    if i % 3 == 0:
        call = {"id": f"call_{i}", "type": "function",
                "function": {"name": "read_file", "arguments": f'{{"path": "ledger/{i % 97}.csv"}}'}}
        out += [{"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": f"call_{i}", "name": "read_file",
                 "content": f"row {i},invoice {i * 7},amount {i * 13 % 1000}.00\n" * 5}]
    out.append({"role": "assistant", "content": f"Invoice {i * 7} is reconciled on shard {i % 97}."})
    return out


def history_of(size: int, policy: str, summary: dict | None) -> list[dict]:
    msgs: list[dict] = [summary] if summary is not None else []
    i = 0
    while len(msgs) < size:
        msgs += exchange(i)
        i += 1
    first_user = next(m for m in msgs if m["role"] == "user" and m is not summary)
    first_user["api_content"] = first_user["content"] + "\n\n" + policy  # where the hook injected it
    return msgs[:size]


def run(size: int, turns: int, kind: str, reload: bool) -> dict:
    home = Path(tempfile.mkdtemp(prefix="trove-bench-hooks-"))
    try:
        return timed(home, size, turns, kind, reload)
    finally:  # each run's store is megabytes at the larger sizes: none is left behind
        shutil.rmtree(home, ignore_errors=True)


def timed(home: Path, size: int, turns: int, kind: str, reload: bool) -> dict:
    cfg = dataclasses.replace(load_config({}, hermes_home=str(home)), database_path=str(home / "trove.db"))
    runtime = build_runtime(cfg)
    engine = TroveEngine(runtime, complete=no_model)
    engine.update_model("bench", 1_000_000)
    engine.on_session_start(SESSION, platform="cli")
    hooks = make_hooks(runtime)
    policy = recall_policy()
    history = history_of(size, policy, None)
    hooks["post_llm_call"](session_id=SESSION, conversation_history=history, platform="cli")  # stored once, untimed
    if kind == "compacted":
        ids = [r.store_id for r in runtime.store.page(SESSION, limit=40)]
        runtime.dag.add_leaf(SESSION, "The user reconciled invoices on several ledger shards.", ids,
                             token_count=12, source_token_count=400, earliest_at=time.time(), latest_at=time.time())
        summary = assembly.render_summary_message(*assembly.select_nodes(runtime.dag.frontier(SESSION), 1500))
        history = [summary, *history[40:]]
    pre_ms: list[float] = []
    post_ms: list[float] = []
    contexts = set()
    for t in range(turns):
        turn = exchange(100_000 + t)
        asked = [*history, turn[0]]
        listed = [dict(m) for m in asked] if reload else asked
        c0 = time.thread_time()
        out = hooks["pre_llm_call"](session_id=SESSION, conversation_history=listed, platform="cli",
                                    user_message=turn[0]["content"])
        pre_ms.append((time.thread_time() - c0) * 1000)
        context = (out or {}).get("context", "")
        contexts.add(context)
        if context:  # the host appends it to the user message and replays it on later turns
            turn[0]["api_content"] = turn[0]["content"] + "\n\n" + context
        history = [*asked, *turn[1:]]
        listed = [dict(m) for m in history] if reload else history
        c0 = time.thread_time()
        hooks["post_llm_call"](session_id=SESSION, conversation_history=listed, platform="cli")
        post_ms.append((time.thread_time() - c0) * 1000)
    runtime.db.close()
    return {"size": size, "kind": kind, "pre_p50": statistics.median(pre_ms),
            "pre_p95": sorted(pre_ms)[int(0.95 * len(pre_ms))], "post_p50": statistics.median(post_ms),
            "post_p95": sorted(post_ms)[int(0.95 * len(post_ms))], "contexts": len(contexts)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="50,500,5000", help="host list lengths")
    ap.add_argument("--turns", type=int, default=200, help="turns timed per size")
    ap.add_argument("--kinds", nargs="+", default=["fresh", "compacted"], choices=["fresh", "compacted"])
    ap.add_argument("--reload", action="store_true", help="copy every dict each call (a gateway's reload)")
    args = ap.parse_args()
    print(f"{'kind':<10} {'list':>6} {'pre p50':>8} {'pre p95':>8} {'post p50':>9} {'post p95':>9}  (CPU ms per call)")
    for kind in args.kinds:
        for size in (int(s) for s in args.sizes.split(",")):
            r = run(size, args.turns, kind, args.reload)
            print(f"{kind:<10} {size:>6} {r['pre_p50']:>8.3f} {r['pre_p95']:>8.3f} "
                  f"{r['post_p50']:>9.3f} {r['post_p95']:>9.3f}")


if __name__ == "__main__":
    main()
