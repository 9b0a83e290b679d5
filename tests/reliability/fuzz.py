"""A seeded fuzzer over every tool in the table (used by the suite and bench/bench_reliability.py)."""
from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field
from typing import Any

from hermes_trove.tools import TOOLS, dispatch

OTHER_MARK = "ZQX-OTHER-SESSION-PAYLOAD-TAIL"


def _strings(rng: random.Random, refs: list[str]) -> list[Any]:
    n = rng.choice([0, 1, 5, 40, 300, 5000, 40000])
    shapes = ["(" * n + "x", '"' * n, "a'" * (n // 2 + 1), "x's " * (n // 4 + 1), "a-" * (n // 2 + 1), "*" * n,
              "\ud800" + "q", "caf\u00e9 \u2603 \U0001F600", "", " ", "\x00nul", "../../etc/passwd", "trove:1:0-5",
              "2025-03-01T09:00:00Z", "2025-03-01T09:00:00", "yesterday", "last week", "NaN", "1e999", "-1",
              "current", "all", "history", "payloads", "user", "assistant", "tool", "relevance", "recency",
              "s1", "other", "deploy key", "pooler port", "%00", "{\"a\":1}", *refs]
    return shapes


def _value(rng: random.Random, refs: list[str], depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 2 else 6)
    if kind == 0:
        return rng.choice([0, 1, -1, 2, 7, 50, 2**31, 2**63 - 1, 2**63, 2**64 + 3, -(2**63) - 5, 10**30])
    if kind == 1:
        return rng.choice([0.5, -0.0, 1e300, float("inf"), float("-inf"), float("nan"), 3.0, 1e-9])
    if kind == 2:
        return rng.choice([True, False, None])
    if kind in (3, 4, 5):
        return rng.choice(_strings(rng, refs))
    if kind in (6, 7):
        return [_value(rng, refs, depth + 1) for _ in range(rng.choice([0, 1, 3, 60]))]
    keys = ["a", "store_id", "span_start", "quote"] if rng.random() < 0.95 else ["\ud801", "x" * 300]
    return {rng.choice(keys): _value(rng, refs, depth + 1)}


def random_args(rng: random.Random, tool: Any, refs: list[str]) -> Any:
    params = sorted(tool.parameters)
    roll = rng.random()
    if roll < 0.05:
        return rng.choice(["", "not json", "[1,2]", "{", "null", "\"s\"", "{\"query\": \"\\ud800\"}", "[" * 3000])
    if roll < 0.08:
        return rng.choice([None, 7, ["a"], b"bytes"])
    args: dict[str, Any] = {}
    required = list(tool.schema["parameters"].get("required") or [])
    if rng.random() < 0.6:  # reach past "x is required" into the handlers
        for name in required:
            args[name] = rng.choice(["deploy key", "pooler port", "last week", "How much in total?", "s1",
                                     "trove:1:0-5", *refs])
    bogus = rng.random() < 0.04
    for _ in range(rng.randrange(0, len(params) + 2)):
        name = rng.choice(["bogus", "\ud800k", "q" * 400]) if bogus or not params else rng.choice(params)
        args[name] = _value(rng, refs)
    if rng.random() < 0.3:
        return json.dumps(args, ensure_ascii=True, allow_nan=True)
    return args


@dataclass
class FuzzReport:
    calls: int = 0
    escapes: list[str] = field(default_factory=list)     # internal failures: exceptions that reached dispatch
    over_cap: list[str] = field(default_factory=list)
    slow: list[tuple[str, float]] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)
    bad_json: list[str] = field(default_factory=list)
    max_seconds: float = 0.0
    by_tool: dict[str, int] = field(default_factory=dict)


def fuzz(ctx: Any, calls: int, seed: int, refs: list[str], slow_s: float = 1.0) -> FuzzReport:
    rng = random.Random(seed)
    report = FuzzReport()
    for i in range(calls):
        tool = TOOLS[i % len(TOOLS)]
        args = random_args(rng, tool, refs)
        start = time.perf_counter()
        out = dispatch(ctx, tool.name, args)
        took = time.perf_counter() - start
        report.calls += 1
        report.by_tool[tool.name] = report.by_tool.get(tool.name, 0) + 1
        report.max_seconds = max(report.max_seconds, took)
        label = f"#{i} {tool.name} {str(args)[:160]!r}"
        try:
            out.encode("utf-8")
            body = json.loads(out)
        except (UnicodeEncodeError, ValueError):
            report.bad_json.append(label)
            continue
        if len(out) > tool.response_cap:
            report.over_cap.append(f"{label} -> {len(out)} chars")
        if took > slow_s:
            report.slow.append((label, took))
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, str) and f"{tool.name} failed:" in error:
            report.escapes.append(f"{label} -> {error[:300]}")
        if OTHER_MARK in out:
            report.leaks.append(label)
    return report
