#!/usr/bin/env python3
"""Benchmark active-replay stubbing and the storage-boundary transform.

A tool-heavy session (ten ~30k-token tool results, then a tail of two user/assistant
pairs) is replayed with stubbing off and on; prints provider-visible prompt tokens, the
per-message stub time, byte-exact recovery, and per-row storage transform cost. Medians
over ``--repeat`` runs; everything happens in a temporary directory.
"""
from __future__ import annotations

import argparse
import base64
import dataclasses
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import _bootstrap  # noqa: E402,F401  (registers this checkout as the hermes_trove package)

from hermes_trove import tokens  # noqa: E402
from hermes_trove.config import load_config  # noqa: E402
from hermes_trove.payloads import guard, replay  # noqa: E402
from hermes_trove.payloads import sidecar as payloads  # noqa: E402
from hermes_trove.runtime import build_runtime  # noqa: E402


def tool_output(rng: random.Random, target_tokens: int) -> str:
    lines, total = [], 0
    while total < target_tokens:
        line = (f"src/module_{rng.randrange(500)}/file_{rng.randrange(9000)}.py:{rng.randrange(1, 4000)}:"
                f" result value={rng.random():.6f} status={rng.choice(['ok', 'warn', 'fail'])}\n")
        lines.append(line)
        total += tokens.count(line)
    return "".join(lines)


def session(rng: random.Random, results: int, result_tokens: int, tail_pairs: int) -> list[dict]:
    msgs: list[dict] = [{"role": "system", "content": "You are a coding agent."}]
    for i in range(results):
        call_id = f"call_{i}"
        msgs.append({"role": "user", "content": f"Run check {i} over the repository."})
        msgs.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": "terminal", "arguments": f'{{"cmd": "check {i}"}}'}}]})
        msgs.append({"role": "tool", "tool_call_id": call_id, "name": "terminal",
                     "content": tool_output(rng, result_tokens)})
        msgs.append({"role": "assistant", "content": f"Check {i} finished; see the output above."})
    for i in range(tail_pairs):
        msgs.append({"role": "user", "content": f"Follow-up question {i}?"})
        msgs.append({"role": "assistant", "content": f"Answer {i}."})
    return msgs


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def bench_stubbing(args: argparse.Namespace) -> None:
    rng = random.Random(7)
    msgs = session(rng, args.results, args.result_tokens, args.tail_pairs)
    protect_from = len(msgs) - 2 * args.tail_pairs
    off_tokens = tokens.count_messages(msgs)
    plan_s, stub_s, per_msg, on_tokens, stubbed = [], [], [], 0, 0
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            cfg = dataclasses.replace(load_config({}, hermes_home=tmp), database_path=str(Path(tmp) / "trove.db"),
                                      large_output_externalization_enabled=True,
                                      large_output_active_replay_stubbing_enabled=True)
            rt = build_runtime(cfg)
            t0 = time.perf_counter()
            picked = replay.plan_stubs(msgs, threshold_tokens=cfg.large_output_active_replay_stub_threshold_tokens,
                                       protect_from=protect_from, count_tokens=tokens.count_message)
            plan_s.append(time.perf_counter() - t0)
            out = list(msgs)
            t1 = time.perf_counter()
            for i in picked:
                t = time.perf_counter()
                text = replay.stub_source_text(out[i])
                ref = payloads.externalize_text(rt, "bench", text or "")
                if ref is not None:
                    out[i] = replay.stub_message(out[i], ref, payloads.PREVIEW_CHARS)
                per_msg.append(time.perf_counter() - t)
            stub_s.append(time.perf_counter() - t1)
            on_tokens, stubbed = tokens.count_messages(out), len(picked)
            for i in picked:  # byte-exact recovery through paging
                ref = payloads.refs_in(out[i]["content"])[0]
                got, offset = [], 0
                while True:
                    page = payloads.read_ref(rt, ref, content_offset=offset, max_chars=20000, session_id="bench")
                    got.append(page["content"])
                    if not page["has_more"]:
                        break
                    offset = page["next_content_offset"]
                assert "".join(got) == msgs[i]["content"], "recovery mismatch"
    if not per_msg:
        raise SystemExit(f"bench_stubbing: no tool result exceeded the stub threshold "
                         f"({cfg.large_output_active_replay_stub_threshold_tokens} tokens); raise --result-tokens")
    print(f"token counter: {tokens.backend()}")
    print(f"session: {args.results} tool results of ~{args.result_tokens} tokens, tail of {args.tail_pairs} pairs,"
          f" {len(msgs)} messages")
    print(f"provider-visible prompt tokens, stubbing off: {off_tokens}")
    print(f"provider-visible prompt tokens, stubbing on:  {on_tokens}  ({stubbed} results stubbed,"
          f" {100 * (1 - on_tokens / off_tokens):.1f}% fewer)")
    print(f"plan_stubs median: {median_ms(plan_s):.2f} ms; whole stub pass median: {median_ms(stub_s):.2f} ms")
    print(f"per-message stub (externalize + fsync + verify + stub) median: {median_ms(per_msg):.2f} ms"
          f" over {len(per_msg)} samples")
    print("recovery: byte-identical for every stubbed result")


def bench_transform(args: argparse.Namespace) -> None:
    rng = random.Random(3)
    rows = {
        "small text (fast path)": {"role": "user", "content": "Please check the failing test in module 12."},
        "4k-char prose": {"role": "assistant", "content": "word " * 800},
        "120k-char tool output": {"role": "tool", "content": tool_output(rng, 30000)},
        "data URI (90 KB)": {"role": "user", "content": "see data:image/png;base64,"
                             + base64.b64encode(rng.randbytes(90000)).decode()},
    }
    print("storage transform per row (median; rows repeat, so sidecars already exist and no fsync is timed):")
    for label, externalize, redact in (("guard only", False, False), ("guard + externalization", True, False),
                                       ("guard + externalization + redaction", True, True)):
        with tempfile.TemporaryDirectory() as tmp:
            cfg = dataclasses.replace(load_config({}, hermes_home=tmp), database_path=str(Path(tmp) / "trove.db"),
                                      large_output_externalization_enabled=externalize,
                                      sensitive_patterns_enabled=redact)
            transform = guard.storage_transform(cfg)
            assert transform is not None
            parts = []
            for name, row in rows.items():
                cols = {"session_id": "bench", "role": row["role"], "content": row["content"], "content_is_json": 0,
                        "tool_calls": None, "tool_call_id": None, "tool_name": None, "extra": None,
                        "token_count": 0, "created_at": None}
                samples = []
                for _ in range(args.repeat * 4):
                    t = time.perf_counter()
                    transform(cols)
                    samples.append(time.perf_counter() - t)
                parts.append(f"{name}: {statistics.median(samples) * 1e6:.1f} µs")
            print(f"  {label}: " + "; ".join(parts))


def main() -> None:
    p = argparse.ArgumentParser(description="Benchmark active-replay stubbing and the storage transform.")
    p.add_argument("--results", type=int, default=10)
    p.add_argument("--result-tokens", type=int, default=30000)
    p.add_argument("--tail-pairs", type=int, default=2)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    bench_stubbing(args)
    bench_transform(args)


if __name__ == "__main__":
    main()
