"""Exact evidence on LoCoMo: occurrence time in trove_evidence_pack, durations from trove_compute.

Every LoCoMo session is ingested as its own trove session, each turn one user message whose
timestamp is the session's real date (``session_N_date_time``, read as UTC). Then, through the
real tool dispatcher (no model anywhere):

* pack: for each category-2 question whose gold answer is a date, month, year or a relative
  form ("the week before <date>", ...), ``trove_evidence_pack`` gets the gold evidence turns as
  baseline refs (whole-message spans); a hit is an occurrence interval of the pack equal to an
  accepted gold interval (exact) or inside/around it (loose). Gold parsing and matching are
  bench_temporal's (imported, not copied).
* compute: for each question asking a duration ("how long", "how many weeks ...") with exactly
  two evidence turns, ``trove_compute`` gets the two refs and the question, with the gold as
  ``candidate_answer``; a hit is ``candidate_verification.agrees == true`` (the computed span,
  expressed in the gold's unit, equals the gold number or rounds to it).

    python bench/bench_evidence.py [--data ../shared/data/locomo-dev.json] [--examples 3]
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_temporal as bt  # noqa: E402  (gold parsing and matching rules)
from _locomo import DEFAULT_DATA, evidence_ids, load_dev_split, sessions  # noqa: E402

DURATION = re.compile(r"\bhow long\b|\bhow many (days|weeks|months|years)\b", re.I)


def ingest(runtime: Any, samples: list[dict[str, Any]]) -> dict[tuple[int, str], tuple[int, int]]:
    """(sample index, dia_id) -> (store_id, content length); one trove session per LoCoMo session."""
    from hermes_trove.store import SessionKey

    found: dict[tuple[int, str], tuple[int, int]] = {}
    for n, sample in enumerate(samples):
        for key, stamp, turns in sessions(sample["conversation"]):
            if stamp is None:
                continue
            texts = [str(t.get("text") or "") for t in turns]
            msgs = [{"role": "user", "content": text, "timestamp": stamp.timestamp()} for text in texts]
            ids = runtime.store.append(SessionKey(f"locomo{n}-{key}"), msgs)
            for turn, sid, text in zip(turns, ids, texts, strict=True):
                found[(n, str(turn.get("dia_id")))] = (sid, len(text))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--examples", type=int, default=3)
    args = parser.parse_args(argv)
    samples = load_dev_split(args.data, "bench_evidence")
    if samples is None:
        return 0
    from hermes_trove.config import load_config
    from hermes_trove.runtime import build_runtime
    from hermes_trove.store import SessionKey
    from hermes_trove.toolkit import ToolContext
    from hermes_trove.tools import dispatch

    home = Path(tempfile.mkdtemp(prefix="bench-evidence-"))
    import dataclasses

    config = dataclasses.replace(load_config({}, hermes_home=str(home)), database_path=str(home / "trove.db"))
    runtime = build_runtime(config)
    started = time.perf_counter()
    refs = ingest(runtime, samples)
    print(f"ingested {len(refs)} turns of {len(samples)} conversations in {time.perf_counter() - started:.1f}s")
    ctx = ToolContext(runtime, SessionKey("bench"))

    eligible = exact = loose = 0
    pack_ms: list[float] = []
    misses: list[str] = []
    d_total = d_hits = d_computed = 0
    statuses: Counter[str] = Counter()
    d_misses: list[str] = []
    compute_ms: list[float] = []
    for n, sample in enumerate(samples):
        turns = bt.turns_by_dia(sample["conversation"])
        for qa in sample.get("qa", []):
            if qa.get("category") != 2:
                continue
            dia = evidence_ids(qa.get("evidence"))
            cited = [(d, refs[(n, d)]) for d in dia if (n, d) in refs]
            if not cited:
                continue
            question = str(qa.get("question"))
            shorthand = [f"trove:{sid}:0-{length}" for _, (sid, length) in cited]
            first_stamp = turns[cited[0][0]][0]
            gold = bt.parse_gold(qa.get("answer"), first_stamp.year) if first_stamp else None
            if gold is not None:
                eligible += 1
                t0 = time.perf_counter()
                pack_args = {"question": question, "baseline_refs": shorthand}
                out = json.loads(dispatch(ctx, "trove_evidence_pack", pack_args))
                pack_ms.append((time.perf_counter() - t0) * 1000)
                spans = [(bt.date.fromisoformat(o["start"][:10]), bt.date.fromisoformat(o["end"][:10]))
                         for item in out.get("items", []) for o in item["occurrences"] if "start" in o]
                hit_exact, hit_loose = bt.judge(gold, spans)
                exact += hit_exact
                loose += hit_loose
                if not hit_exact:
                    shown = [o for item in out.get("items", []) for o in item["occurrences"]][:3]
                    observed = [i["observed_at"][:10] for i in out.get("items", [])]
                    misses.append(f"gold {qa.get('answer')!r}; observed {observed}; occurrences {shown}")
            if DURATION.search(question) and len(cited) == 2:
                d_total += 1
                t0 = time.perf_counter()
                out = json.loads(dispatch(ctx, "trove_compute", {"question": question, "operands": shorthand,
                                                                  "candidate_answer": str(qa.get("answer"))}))
                compute_ms.append((time.perf_counter() - t0) * 1000)
                statuses[out.get("status", "error")] += 1
                d_computed += out.get("status") in ("computed", "partial")
                agrees = (out.get("candidate_verification") or {}).get("agrees") is True
                d_hits += agrees
                if not agrees:
                    d_misses.append(f"{question!r} gold {qa.get('answer')!r} -> {out.get('status')} "
                                    f"{(out.get('answer') or {}).get('text') or out.get('reason')}")

    print(f"\ntrove_evidence_pack on date-like temporal questions: {eligible} eligible")
    if eligible:
        print(f"  exact-hit rate: {exact / eligible:.3f} ({exact}/{eligible})   target >= 0.80")
        print(f"  loose-hit rate: {loose / eligible:.3f} ({loose}/{eligible})")
        print(f"  pack latency: median {statistics.median(pack_ms):.2f} ms, max {max(pack_ms):.2f} ms")
        for line in misses[: args.examples]:
            print(f"    miss: {line[:300]}")
    print(f"\ntrove_compute on duration questions between two evidence turns: {d_total}")
    if d_total:
        print(f"  agrees with gold: {d_hits}/{d_total} ({d_hits / d_total:.3f}); computed (any value): "
              f"{d_computed}/{d_total}; statuses {dict(statuses)}")
        print(f"  compute latency: median {statistics.median(compute_ms):.2f} ms")
        for line in d_misses[: max(args.examples, 10)]:
            print(f"    miss: {line[:300]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
