"""Whole-memory recall on LoCoMo: trove_recall beside trove_grep session_scope='all' (no LLM).

Each LoCoMo conversation is one user's memory, built in its own trove.db: every LoCoMo
session is ingested as its OWN Hermes session (``<conv>-s<N>``) with its real date as the
message timestamps (one message per turn, "Speaker: text" plus " [image: caption]" when the
turn shares an image), and each question of categories 1-4 is asked verbatim through
``tools.dispatch`` from a NEW session. A question's score at k is the fraction of its
evidence turns among the top k message hits (the definition of
../shared/reference/embeddings-offline.md §4); "hit@k" is whether any evidence turn is there.
Figures are per conversation and pooled; leave-one-conversation-out (LOO) picks a knob on
four conversations and scores the fifth.

    python scripts/bench_recall.py [--data ../shared/data/locomo-dev.json]
    python scripts/bench_recall.py --embeddings          # + semantic-only and hybrid recall
    python scripts/bench_recall.py --sweep               # LOO over fusion weights / pool sizes
    python scripts/bench_recall.py --scale 100000        # recall latency with N stored messages
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo-dev.json"
_DIA = re.compile(r"D\d+:\d+")
KS = (5, 10)


def load_package() -> Any:
    """Register this checkout as ``hermes_trove`` (scripts/_bootstrap.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _bootstrap  # noqa: F401
    return sys.modules["hermes_trove"]


def session_time(text: str) -> float | None:
    """LoCoMo session stamps look like '1:56 pm on 8 May, 2023' (read as UTC)."""
    try:
        return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC).timestamp()
    except (ValueError, AttributeError):
        return None


def evidence_ids(raw: list) -> set[str]:
    """Evidence dialog ids; malformed entries like 'D8:6; D9:17' are split into their ids."""
    out: set[str] = set()
    for item in raw or []:
        out.update(_DIA.findall(str(item)))
    return out


def turn_text(turn: dict) -> str:
    text = f"{turn['speaker']}: {turn['text']}"
    return text + (f" [image: {turn['blip_caption']}]" if turn.get("blip_caption") else "")


@dataclasses.dataclass
class Memory:
    """One conversation's store: its runtime, the asking engine, and store_id -> dia_id."""

    name: str
    runtime: Any
    engine: Any
    dia: dict[int, str]
    questions: list[tuple[str, set[str], int]]  # (question, gold dia ids, category)


def build_memory(sample: dict, tmp: Path, overrides: dict[str, Any]) -> Memory:
    from hermes_trove.config import load_config
    from hermes_trove.engine import TroveEngine
    from hermes_trove.runtime import build_runtime
    from hermes_trove.store import SessionKey

    name = str(sample["sample_id"])
    home = tmp / name
    home.mkdir(parents=True, exist_ok=True)
    cfg = dataclasses.replace(load_config({}, hermes_home=str(home)), database_path=str(home / "trove.db"),
                              **overrides)
    runtime = build_runtime(cfg)
    conv = sample["conversation"]
    speaker_a = conv.get("speaker_a")
    dia: dict[int, str] = {}
    keys = sorted((k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1]))
    for key in keys:
        base = session_time(conv.get(f"{key}_date_time", "")) or 0.0
        msgs = [{"role": "user" if t.get("speaker") == speaker_a else "assistant", "content": turn_text(t),
                 "timestamp": base + 30 * i} for i, t in enumerate(conv[key])]
        ids = runtime.store.append(SessionKey(f"{name}-s{key.split('_')[1]}", platform="bench"), msgs)
        dia.update({sid: t["dia_id"] for sid, t in zip(ids, conv[key], strict=True)})
    engine = TroveEngine(runtime)
    engine.on_session_start(f"{name}-ask", platform="bench")
    questions = [(str(qa["question"]), evidence_ids(qa.get("evidence")), int(qa["category"]))
                 for qa in sample["qa"] if qa.get("category") in (1, 2, 3, 4) and evidence_ids(qa.get("evidence"))]
    return Memory(name, runtime, engine, dia, questions)


def ask(memory: Memory, tool: str, args: dict[str, Any]) -> tuple[list[str | None], float]:
    from hermes_trove.tools import dispatch

    start = time.perf_counter()
    out = json.loads(dispatch(memory.engine.tool_context(), tool, args))
    elapsed = (time.perf_counter() - start) * 1000
    if "error" in out:
        raise RuntimeError(f"{tool}: {out['error']}")
    items = out.get("hits", out.get("results", []))
    return [memory.dia.get(h["store_id"]) for h in items if "store_id" in h and h.get("kind", h.get("type"))
            in ("message_excerpt", "message")], elapsed


@dataclasses.dataclass
class Score:
    recall: dict[int, list[float]] = dataclasses.field(default_factory=lambda: {k: [] for k in KS})
    hit: dict[int, list[float]] = dataclasses.field(default_factory=lambda: {k: [] for k in KS})
    latency: list[float] = dataclasses.field(default_factory=list)
    by_category: dict[int, list[float]] = dataclasses.field(default_factory=dict)

    def add(self, ranked: list[str | None], gold: set[str], category: int, ms: float) -> None:
        for k in KS:
            top = set(ranked[:k])
            self.recall[k].append(len(gold & top) / len(gold))
            self.hit[k].append(float(bool(gold & top)))
        self.by_category.setdefault(category, []).append(len(gold & set(ranked[:10])) / len(gold))
        self.latency.append(ms)

    def merge(self, other: Score) -> None:
        for k in KS:
            self.recall[k] += other.recall[k]
            self.hit[k] += other.hit[k]
        self.latency += other.latency
        for c, v in other.by_category.items():
            self.by_category.setdefault(c, []).extend(v)

    def summary(self) -> dict[str, Any]:
        lat = sorted(self.latency)
        mean = statistics.fmean
        return {"n": len(self.recall[10]), **{f"R@{k}": round(mean(self.recall[k]), 4) for k in KS},
                **{f"hit@{k}": round(mean(self.hit[k]), 4) for k in KS},
                "p50_ms": round(statistics.median(lat), 2), "p95_ms": round(lat[int(0.95 * (len(lat) - 1))], 2),
                "R@10_by_category": {c: round(mean(v), 4) for c, v in sorted(self.by_category.items())}}


Mode = tuple[str, str, dict[str, Any]]  # (label, tool, extra args)


def evaluate(memories: list[Memory], modes: list[Mode]) -> dict[str, dict[str, Score]]:
    """Scores per mode and conversation."""
    out: dict[str, dict[str, Score]] = {label: {} for label, _, _ in modes}
    for memory in memories:
        for label, tool, extra in modes:
            score = Score()
            for question, gold, category in memory.questions:
                ranked, ms = ask(memory, tool, {"query": question, "limit": 10, **extra})
                score.add(ranked, gold, category, ms)
            out[label][memory.name] = score
    return out


def pooled(per_conv: dict[str, Score]) -> Score:
    total = Score()
    for s in per_conv.values():
        total.merge(s)
    return total


def with_config(memories: list[Memory], **overrides: Any) -> None:
    """Swap every memory's config in place (the runtime is shared by its engine)."""
    for m in memories:
        m.runtime.config = dataclasses.replace(m.runtime.config, **overrides)


def loo(memories: list[Memory], grid: list[dict[str, Any]], mode: Mode) -> dict[str, Any]:
    """Leave one conversation out: pick the grid point best on four, score it on the fifth."""
    table: list[tuple[dict[str, Any], dict[str, float]]] = []
    for point in grid:
        with_config(memories, **point)
        scores = evaluate(memories, [mode])[mode[0]]
        table.append((point, {name: statistics.fmean(s.recall[10]) for name, s in scores.items()},))
        # weight by question count: a conversation's R@10 sum
        table[-1][1].update({f"{name}#sum": sum(s.recall[10]) for name, s in scores.items()})
        table[-1][1].update({f"{name}#n": len(s.recall[10]) for name, s in scores.items()})
    names = [m.name for m in memories]
    held: dict[str, Any] = {}
    total_sum = total_n = 0.0
    for out in names:
        def train(row: dict[str, float], out: str = out) -> float:
            return sum(row[f"{n}#sum"] for n in names if n != out) / sum(row[f"{n}#n"] for n in names if n != out)
        best_point, best_row = max(table, key=lambda pr: train(pr[1]))
        held[out] = {"chosen": best_point, "held_out_R@10": round(best_row[out], 4)}
        total_sum += best_row[f"{out}#sum"]
        total_n += best_row[f"{out}#n"]
    grid_rows = [{"point": p, "R@10": round(sum(r[f"{n}#sum"] for n in names) / sum(r[f"{n}#n"] for n in names), 4),
                  "per_conversation": {n: round(r[n], 4) for n in names}} for p, r in table]
    return {"grid": grid_rows, "loo": held, "loo_pooled_R@10": round(total_sum / total_n, 4)}


# -- scale -------------------------------------------------------------------------
_WORDS = None


def _vocabulary(memories: list[Memory]) -> list[str]:
    words: list[str] = []
    for m in memories:
        for row in m.runtime.store.page(f"{m.name}-s1", 0, 1000):
            words += re.findall(r"[a-z]{3,}", row.content.lower())
    return words or ["alpha", "beta", "gamma"]


def pad_store(memory: Memory, total: int, words: list[str], seed: int = 7) -> float:
    """Add synthetic sessions of chat-like rows until the store holds ``total`` messages."""
    from hermes_trove.store import SessionKey

    rng = random.Random(seed)
    have = memory.runtime.store.count()
    start = time.perf_counter()
    t0 = 1_600_000_000.0
    n = 0
    while have + n < total:
        batch = min(400, total - have - n)
        msgs = [{"role": rng.choice(("user", "assistant")),
                 "content": " ".join(rng.choice(words) for _ in range(rng.randint(6, 40))),
                 "timestamp": t0 + (n + i) * 60} for i in range(batch)]
        memory.runtime.store.append_bulk(SessionKey(f"pad-{n // 400}", platform="bench"), msgs)
        n += batch
    return time.perf_counter() - start


def scale(memories: list[Memory], total: int, extra: dict[str, Any]) -> dict[str, Any]:
    memory = memories[0]
    seconds = pad_store(memory, total, _vocabulary(memories))
    out = {"stored_messages": memory.runtime.store.count(), "pad_seconds": round(seconds, 1)}
    for label, tool, args in (("trove_recall", "trove_recall", extra),
                              ("trove_grep all", "trove_grep", {"session_scope": "all"})):
        score = Score()
        for question, gold, category in memory.questions:
            ranked, ms = ask(memory, tool, {"query": question, "limit": 10, **args})
            score.add(ranked, gold, category, ms)
        out[label] = {k: v for k, v in score.summary().items() if k in ("n", "R@10", "p50_ms", "p95_ms")}
    return out


def print_table(result: dict[str, dict[str, Score]], write: Callable[[str], None] = print) -> None:
    names = sorted({n for per in result.values() for n in per})
    write(f"{'mode':<28} {'R@5':>6} {'R@10':>6} {'hit@10':>7} {'p50ms':>7} {'p95ms':>7}   R@10 per conversation")
    for label, per in result.items():
        s = pooled(per).summary()
        convs = "  ".join(f"{n}:{statistics.fmean(per[n].recall[10]):.3f}" for n in names if n in per)
        write(f"{label:<28} {s['R@5']:>6.3f} {s['R@10']:>6.3f} {s['hit@10']:>7.3f} {s['p50_ms']:>7.2f} "
              f"{s['p95_ms']:>7.2f}   {convs}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--embeddings", action="store_true",
                        help="also run semantic-only and hybrid recall (needs the embeddings extra)")
    parser.add_argument("--sweep", action="store_true", help="leave-one-conversation-out over fusion knobs")
    parser.add_argument("--scale", type=int, default=0, help="pad the first conversation's store to N messages")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not args.data.exists():
        print(f"skipped: {args.data} not found (the LoCoMo dev split lives in ../shared/data)")
        return 0
    load_package()
    data = json.loads(args.data.read_text(encoding="utf-8"))
    tmp = Path(tempfile.mkdtemp(prefix="trove-bench-recall-"))
    overrides: dict[str, Any] = {"embeddings_enabled": True} if args.embeddings else {}
    memories = [build_memory(sample, tmp, overrides) for sample in data]
    if args.embeddings:
        _index_vectors(memories)
    report: dict[str, Any] = {"data": str(args.data), "conversations": len(memories),
                              "questions": sum(len(m.questions) for m in memories)}
    modes: list[Mode] = [("trove_recall full-text", "trove_recall", {}),
                         ("trove_grep session_scope=all", "trove_grep", {"session_scope": "all"})]
    if args.embeddings:
        with_config(memories, embeddings_enabled=False)
    result = evaluate(memories, modes)
    if args.embeddings:
        with_config(memories, embeddings_enabled=True)
        result.update(evaluate(memories, [("trove_recall hybrid", "trove_recall", {})]))
        with_config(memories, recall_fts_weight=0.0, recall_summary_weight=0.0)
        result.update(evaluate(memories, [("trove_recall semantic-only", "trove_recall", {})]))
        with_config(memories, recall_fts_weight=1.0, recall_summary_weight=1.0)
    report["modes"] = {label: {"pooled": pooled(per).summary(),
                               "per_conversation": {n: s.summary() for n, s in per.items()}}
                       for label, per in result.items()}
    if args.sweep:
        mode: Mode = ("recall", "trove_recall", {})
        if args.embeddings:
            grid = [{"recall_fusion": f, "recall_semantic_weight": w} for f in ("interpolate", "rrf")
                    for w in (0.25, 0.5, 1.0, 1.5, 2.0)]
        else:
            grid = [{"recall_candidates": c, "recall_context_weight": w} for c in (100, 400)
                    for w in (0.0, 0.2, 0.4, 0.7, 1.0)]
        report["sweep"] = loo(memories, grid, mode)
    if args.scale:
        report["scale"] = scale(memories, args.scale, {})
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"LoCoMo ({args.data.name}): {report['conversations']} conversations, one store each, every LoCoMo "
          f"session its own Hermes session; {report['questions']} questions (categories 1-4) asked from a new "
          "session. R@k = share of a question's evidence turns in the top k message hits.")
    print_table(result)
    for label, v in report["modes"].items():
        print(f"  {label}: R@10 by category {v['pooled']['R@10_by_category']}")
    if "sweep" in report:
        sweep = report["sweep"]
        print("sweep (pooled R@10 per grid point):")
        for row in sweep["grid"]:
            print(f"  {row['point']}: {row['R@10']:.4f}  {row['per_conversation']}")
        print(f"leave-one-conversation-out R@10 {sweep['loo_pooled_R@10']:.4f}:")
        for name, v in sweep["loo"].items():
            print(f"  held out {name}: chose {v['chosen']} -> {v['held_out_R@10']:.4f}")
    if "scale" in report:
        print(f"scale: {json.dumps(report['scale'])}")
    return 0


def _index_vectors(memories: list[Memory]) -> None:
    """Embed every stored row through the embeddings indexer."""
    from hermes_trove.retrieval import indexer

    for m in memories:
        indexer.backfill(m.runtime)


if __name__ == "__main__":
    raise SystemExit(main())
