"""Retrieval quality of trove_grep on LoCoMo questions (turn-level recall, no LLM).

Each conversation is ingested as one session (one stored message per turn, text
"Speaker: text"); each question of categories 1-4 goes verbatim to trove_grep through
``tools.dispatch`` on a real engine with limit 10. A question counts as found at k when
any of its evidence turns is among the top k raw-message hits. Prints R@5, R@10 and
query latency (p50/p95).

    python bench/bench_retrieval.py [--data ../shared/data/locomo-dev.json] [--sort relevance]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _locomo import DEFAULT_DATA, evidence_ids, load_package, turns  # noqa: E402


def plain_or(question: str) -> str:
    """The reference baseline's query: every word of the question, OR-ed, no stopword removal."""
    words = dict.fromkeys(w.lower() for w in re.findall(r"[^\W_]+", question))
    return " OR ".join(f'"{w}"' for w in words)


def run(data_path: Path, sort: str, limit: int) -> dict:
    load_package()
    from hermes_trove.config import load_config
    from hermes_trove.engine import TroveEngine
    from hermes_trove.runtime import build_runtime
    from hermes_trove.store import SessionKey
    from hermes_trove.tools import dispatch

    data = json.loads(data_path.read_text(encoding="utf-8"))
    tmp = tempfile.mkdtemp(prefix="trove-bench-")
    cfg = dataclasses.replace(load_config({}, hermes_home=tmp), database_path=f"{tmp}/trove.db",
                              memory_scope="profile")  # one person's archive under a made-up platform
    runtime = build_runtime(cfg)
    hits5 = hits10 = total = skipped = 0
    base5 = base10 = 0
    latencies: list[float] = []
    per_category: dict[int, list[int]] = {}
    for sample in data:
        sid = f"locomo-{sample['sample_id']}"
        rows = turns(sample["conversation"])
        msgs = []
        for role, turn, ts in rows:
            msg = {"role": role, "content": f"{turn['speaker']}: {turn['text']}"}
            if ts is not None:
                msg["timestamp"] = ts
            msgs.append(msg)
        ids = runtime.store.append(SessionKey(sid, platform="bench"), msgs)
        store_to_dia = {store_id: turn["dia_id"] for store_id, (_, turn, _) in zip(ids, rows, strict=True)}
        engine = TroveEngine(runtime)
        engine.on_session_start(sid, platform="bench")
        for qa in sample["qa"]:
            if qa.get("category") not in (1, 2, 3, 4):
                continue
            gold = set(evidence_ids(qa.get("evidence")))
            if not gold:
                skipped += 1
                continue
            start = time.perf_counter()
            out = json.loads(dispatch(engine.tool_context(), "trove_grep",
                                      {"query": qa["question"], "limit": limit, "sort": sort}))
            latencies.append((time.perf_counter() - start) * 1000)
            ranked = [store_to_dia.get(h["store_id"]) for h in out.get("results", []) if h.get("type") == "message"]
            plain = runtime.store.search(plain_or(qa["question"]), session_ids=[sid], limit=limit, snippets=False)
            base = [store_to_dia.get(row.store_id) for row, _, _ in plain]
            base5 += bool(gold & set(base[:5]))
            base10 += bool(gold & set(base[:10]))
            h5 = int(bool(gold & set(ranked[:5])))
            h10 = int(bool(gold & set(ranked[:10])))
            hits5 += h5
            hits10 += h10
            total += 1
            per_category.setdefault(qa["category"], [0, 0, 0])
            per_category[qa["category"]][0] += h5
            per_category[qa["category"]][1] += h10
            per_category[qa["category"]][2] += 1
    latencies.sort()
    return {"questions": total, "skipped_without_evidence": skipped,
            "R@5": hits5 / total if total else 0.0, "R@10": hits10 / total if total else 0.0,
            "baseline_R@5": base5 / total if total else 0.0, "baseline_R@10": base10 / total if total else 0.0,
            "latency_ms_p50": statistics.median(latencies) if latencies else 0.0,
            "latency_ms_p95": latencies[int(0.95 * (len(latencies) - 1))] if latencies else 0.0,
            "by_category": {c: {"R@5": v[0] / v[2], "R@10": v[1] / v[2], "n": v[2]}
                            for c, v in sorted(per_category.items())}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--sort", default="relevance", choices=["relevance", "recency", "hybrid"])
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    if not args.data.exists():
        print(f"skipped: {args.data} not found (LoCoMo dev split lives in ../shared/data)")
        return 0
    result = run(args.data, args.sort, args.limit)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"LoCoMo dev ({args.data.name}), categories 1-4, n={result['questions']} "
          f"(skipped {result['skipped_without_evidence']} without evidence), sort={args.sort}")
    print(f"turn-level R@5  {result['R@5']:.3f}")
    print(f"turn-level R@10 {result['R@10']:.3f}")
    print(f"plain FTS5 BM25 over OR-ed question words on the same data: R@5 {result['baseline_R@5']:.3f}"
          f"  R@10 {result['baseline_R@10']:.3f}")
    print(f"query latency   p50 {result['latency_ms_p50']:.2f} ms   p95 {result['latency_ms_p95']:.2f} ms")
    for cat, v in result["by_category"].items():
        print(f"  category {cat}: R@5 {v['R@5']:.3f}  R@10 {v['R@10']:.3f}  (n={v['n']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
