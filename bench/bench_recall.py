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

    python bench/bench_recall.py [--data ../shared/data/locomo-dev.json]
    python bench/bench_recall.py --embeddings          # + semantic-only and hybrid recall
    python bench/bench_recall.py --sweep               # LOO over fusion weights / pool sizes
    python bench/bench_recall.py --rescore-sweep [--embeddings]   # LOO over the re-scoring weights
    python bench/bench_recall.py --lowercase [--embeddings]       # + every question typed in lower case, no "?"
    python bench/bench_recall.py --address-sweep [--embeddings]   # LOO over what an addressed name counts
    python bench/bench_recall.py --scale 100000        # recall latency with N stored messages
    python bench/bench_recall.py --scale 100000 --embeddings --scale-only   # ... with a vector for every row
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _locomo import DEFAULT_DATA, evidence_ids, load_dev_split, sessions  # noqa: E402
from _padding import embed_pool, pad_store, pad_text, vectors_for_padding, vocabulary  # noqa: E402

KS = (5, 10)


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


def build_memory(sample: dict, tmp: Path, overrides: dict[str, Any], chat: str = "") -> Memory:
    """The conversation's store; with ``chat``, its sessions and the asking one are that gateway chat's."""
    from hermes_trove.config import load_config
    from hermes_trove.engine import TroveEngine
    from hermes_trove.runtime import build_runtime
    from hermes_trove.store import SessionKey

    name = str(sample["sample_id"])
    home = tmp / name
    home.mkdir(parents=True, exist_ok=True)
    # One person's archive under a made-up platform: every session is the caller's (a personal install).
    cfg = dataclasses.replace(load_config({}, hermes_home=str(home)), database_path=str(home / "trove.db"),
                              **{"memory_scope": "profile", **overrides})
    runtime = build_runtime(cfg)
    conv = sample["conversation"]
    speaker_a = conv.get("speaker_a")
    dia: dict[int, str] = {}
    for key, stamp, turns in sessions(conv):
        base = stamp.timestamp() if stamp else 0.0
        msgs = [{"role": "user" if t.get("speaker") == speaker_a else "assistant", "content": turn_text(t),
                 "timestamp": base + 30 * i} for i, t in enumerate(turns)]
        ids = runtime.store.append(SessionKey(f"{name}-s{key.split('_')[1]}", chat, platform="bench"), msgs)
        dia.update({sid: t["dia_id"] for sid, t in zip(ids, turns, strict=True)})
    engine = TroveEngine(runtime)
    engine.on_session_start(f"{name}-ask", platform="bench", conversation_id=chat or None)
    questions = [(str(qa["question"]), set(evidence_ids(qa.get("evidence"))), int(qa["category"]))
                 for qa in sample["qa"] if qa.get("category") in (1, 2, 3, 4) and evidence_ids(qa.get("evidence"))]
    return Memory(name, runtime, engine, dia, questions)


def ask(memory: Memory, tool: str, args: dict[str, Any],
        sink: dict[str, Any] | None = None) -> tuple[list[str | None], float]:
    """Dispatch one call; (dia ids of the message hits in order, wall ms). ``sink`` gets the response."""
    from hermes_trove.tools import dispatch

    start = time.perf_counter()
    out = json.loads(dispatch(memory.engine.tool_context(), tool, args))
    elapsed = (time.perf_counter() - start) * 1000
    if sink is not None:
        sink.update(out)
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
    by_evidence: dict[str, list[float]] = dataclasses.field(default_factory=lambda: {"single": [], "multi": []})

    def add(self, ranked: list[str | None], gold: set[str], category: int, ms: float) -> None:
        for k in KS:
            top = set(ranked[:k])
            self.recall[k].append(len(gold & top) / len(gold))
            self.hit[k].append(float(bool(gold & top)))
        self.by_category.setdefault(category, []).append(len(gold & set(ranked[:10])) / len(gold))
        self.by_evidence["multi" if len(gold) > 1 else "single"].append(len(gold & set(ranked[:10])) / len(gold))
        self.latency.append(ms)

    def merge(self, other: Score) -> None:
        for k in KS:
            self.recall[k] += other.recall[k]
            self.hit[k] += other.hit[k]
        self.latency += other.latency
        for c, v in other.by_category.items():
            self.by_category.setdefault(c, []).extend(v)
        for e, v in other.by_evidence.items():
            self.by_evidence[e] += v

    def summary(self) -> dict[str, Any]:
        lat = sorted(self.latency)
        mean = statistics.fmean
        return {"n": len(self.recall[10]), **{f"R@{k}": round(mean(self.recall[k]), 4) for k in KS},
                **{f"hit@{k}": round(mean(self.hit[k]), 4) for k in KS},
                "p50_ms": round(statistics.median(lat), 2), "p95_ms": round(lat[int(0.95 * (len(lat) - 1))], 2),
                "R@10_by_category": {c: round(mean(v), 4) for c, v in sorted(self.by_category.items())},
                "R@10_by_evidence": {e: {"n": len(v), "R@10": round(mean(v), 4) if v else None}
                                     for e, v in self.by_evidence.items()}}


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


def lowercase_modes(memories: list[Memory], embeddings: bool) -> dict[str, dict[str, Score]]:
    """``trove_recall`` with every question typed the way people often type: lower case, no "?"."""
    asked = [m.questions for m in memories]
    for m in memories:
        m.questions = [(q.lower().rstrip(" ?"), gold, cat) for q, gold, cat in m.questions]
    try:
        if embeddings:
            with_config(memories, embeddings_enabled=False)
        out = evaluate(memories, [("trove_recall full-text, lower case", "trove_recall", {})])
        if embeddings:
            with_config(memories, embeddings_enabled=True)
            out.update(evaluate(memories, [("trove_recall hybrid, lower case", "trove_recall", {})]))
    finally:
        for m, questions in zip(memories, asked, strict=True):
            m.questions = questions
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


# the re-scoring stage off, then its weight x the neighbour signal's share
RESCORE_GRID = [{"rescore": 0.0}] + [{"rescore": r, "neighbours": n} for r in (1.0, 2.0, 4.0) for n in (1.0, 3.0)]
# what a question's name counts in the names signal when a hit only addresses it (1: as any other)
ADDRESS_CREDITS = (1.0, 0.5, 0.0, -0.5, -1.0, -2.0)


def loo(memories: list[Memory], grid: list[dict[str, Any]], mode: Mode) -> dict[str, Any]:
    """Leave one conversation out: pick the grid point best on four, score it on the fifth."""
    table: list[tuple[dict[str, Any], dict[str, Score]]] = []
    for point in grid:
        with_config(memories, **point)
        table.append((point, evaluate(memories, [mode])[mode[0]]))
    return choose(table, [m.name for m in memories])


def rescore_table(memories: list[Memory], grid: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Score]]]:
    """Scores of ``trove_recall`` per re-scoring grid point: each question is asked once through
    ``tools.dispatch`` with the fused hits captured at the re-scoring hook, then every point
    re-orders those hits exactly as the hook would (``recall_search.rescored``)."""
    from hermes_trove.retrieval import recall_search, rescore

    hook = recall_search.rescored
    seen: list[tuple[Any, ...]] = []

    def capture(runtime: Any, req: Any, match: Any, hits: list[Any], weights: Any) -> list[Any]:
        seen.append((runtime, req, match, hits))
        return hits

    asked: list[tuple[Memory, set[str], int, tuple[Any, ...]]] = []
    recall_search.rescored = capture
    try:
        for memory in memories:
            for question, gold, category in memory.questions:
                ask(memory, "trove_recall", {"query": question, "limit": 10})
                asked.append((memory, gold, category, seen.pop()))
    finally:
        recall_search.rescored = hook
    table: list[tuple[dict[str, Any], dict[str, Score]]] = []
    for point in grid:
        weights = dataclasses.replace(rescore.Weights(), **point)
        scores: dict[str, Score] = {m.name: Score() for m in memories}
        for memory, gold, category, (runtime, req, match, hits) in asked:
            start = time.perf_counter()
            top = hook(runtime, req, match, hits, weights)[:req.limit]
            ms = (time.perf_counter() - start) * 1000
            scores[memory.name].add([memory.dia.get(h.item_id) for h in top if h.kind == "message"], gold,
                                    category, ms)
        table.append((point, scores))
    return table


def choose(table: list[tuple[dict[str, Any], dict[str, Score]]], names: list[str]) -> dict[str, Any]:
    """The leave-one-conversation-out choice over a table of (grid point, scores per conversation)."""
    held: dict[str, Any] = {}
    held_out = Score()  # each conversation scored at the point chosen without it
    for out in names:
        def train(scores: dict[str, Score], out: str = out) -> float:
            # weighted by question count: the R@10 sum over the other conversations
            return pooled({n: s for n, s in scores.items() if n != out}).summary()["R@10"]
        best_point, best = max(table, key=lambda pr: train(pr[1]))
        held[out] = {"chosen": best_point, "held_out_R@10": round(statistics.fmean(best[out].recall[10]), 4)}
        held_out.merge(best[out])
    grid_rows = [{"point": p, "R@10": pooled(r).summary()["R@10"],
                  "R@10_by_evidence": pooled(r).summary()["R@10_by_evidence"],
                  "per_conversation": {n: round(statistics.fmean(r[n].recall[10]), 4) for n in names}}
                 for p, r in table]
    summary = held_out.summary()
    return {"grid": grid_rows, "loo": held, "loo_pooled_R@10": summary["R@10"], "loo_pooled": summary}


def print_sweep(title: str, sweep: dict[str, Any], write: Callable[[str], None] = print) -> None:
    write(f"{title} (pooled R@10 per grid point: the figures the choice is made on):")
    for row in sweep["grid"]:
        write(f"  {row['point']}: {row['R@10']:.4f}  {row['per_conversation']}")
    s = sweep["loo_pooled"]
    write(f"leave-one-conversation-out R@10 {s['R@10']:.4f} (R@5 {s['R@5']:.4f}; by evidence "
          f"{s['R@10_by_evidence']}; by category {s['R@10_by_category']}):")
    for name, v in sweep["loo"].items():
        write(f"  held out {name}: chose {v['chosen']} -> {v['held_out_R@10']:.4f}")


# -- scale -------------------------------------------------------------------------
# ``--scale N`` pads the first conversation's store with synthetic chat rows up to N messages
# and measures recall there. With ``--embeddings`` every padding row also gets its vector
# without embedding N texts: the padding texts are drawn from a pool of ``--pad-pool``
# distinct texts embedded once with the configured provider, and each padding row's vector
# is its own text's vector, written through ``VectorStore.write`` (cursor and coverage real).


class _Probe:
    """Bench-only stage timers for the hybrid path, patched in around the product's functions
    while one mode is measured (the product itself only reports the semantic arm's elapsed_ms)."""

    STAGES = ("query_embed_ms", "index_refresh_ms", "vector_search_ms", "fts_arm_ms", "summary_arm_ms")

    def __init__(self) -> None:
        self.t: dict[str, float] = {}
        self._undo: list[tuple[Any, str, Any]] = []

    def _timed(self, stage: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*a: Any, **kw: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.t[stage] = self.t.get(stage, 0.0) + (time.perf_counter() - start) * 1000
        return wrapper

    def _patch(self, owner: Any, name: str, value: Any) -> None:
        self._undo.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    def __enter__(self) -> _Probe:
        from hermes_trove.retrieval import recall_search, semantic, vector_index

        probe = self
        real_provider = semantic.get_provider

        class Timed:
            def __init__(self, inner: Any):
                self.inner = inner

            def embed(self, texts: Any, guard: Any = None) -> Any:
                return probe._timed("query_embed_ms", self.inner.embed)(texts, guard)

            def __getattr__(self, name: str) -> Any:
                return getattr(self.inner, name)

        self._patch(semantic, "get_provider", lambda spec: Timed(real_provider(spec)))
        index = vector_index.VectorIndex
        self._patch(index, "refresh", self._timed("index_refresh_ms", index.refresh))
        self._patch(index, "search", self._timed("vector_search_ms", index.search))
        self._patch(recall_search, "fts_arm", self._timed("fts_arm_ms", recall_search.fts_arm))
        self._patch(recall_search, "summary_arm", self._timed("summary_arm_ms", recall_search.summary_arm))
        return self

    def __exit__(self, *exc: Any) -> None:
        while self._undo:
            owner, name, value = self._undo.pop()
            setattr(owner, name, value)


def _pct(values: list[float]) -> dict[str, float]:
    s = sorted(values)
    return {"p50": round(statistics.median(s), 2), "p95": round(s[int(0.95 * (len(s) - 1))], 2)}


def _until_vectors_answer(memory: Memory, tool: str, args: dict[str, Any], limit_s: float = 300.0) -> float:
    """Ms from now until a query's vector arm runs: a large mirror loads past the query deadline
    (the queries meanwhile fall back to full text), and the latency is measured once it is warm."""
    start = time.perf_counter()
    while True:
        out: dict[str, Any] = {}
        ask(memory, tool, args, sink=out)
        if tool != "trove_recall" or out.get("provenance", {}).get("coverage", {}).get("semantic", {}).get("ran"):
            return (time.perf_counter() - start) * 1000
        if time.perf_counter() - start > limit_s:
            raise RuntimeError(f"the vector arm did not answer within {limit_s:.0f} s")
        time.sleep(0.5)


def measure(memory: Memory, label: str, tool: str, args: dict[str, Any], embeddings: bool) -> dict[str, Any]:
    """One mode over the conversation's questions: R@10, latency, and (hybrid) the stage breakdown."""
    memory.runtime.config = dataclasses.replace(memory.runtime.config, embeddings_enabled=embeddings)
    score = Score()
    stages: dict[str, list[float]] = {}
    first = memory.questions[0][0]
    cold = ask(memory, tool, {"query": first, "limit": 10, **args})[1]  # loads model / vector index
    warm_after = _until_vectors_answer(memory, tool, {"query": first, "limit": 10, **args}) if embeddings else 0.0
    with _Probe() as probe:
        for question, gold, category in memory.questions:
            probe.t = {}
            out: dict[str, Any] = {}
            ranked, ms = ask(memory, tool, {"query": question, "limit": 10, **args}, sink=out)
            score.add(ranked, gold, category, ms)
            if tool == "trove_recall":
                sem = out.get("provenance", {}).get("coverage", {}).get("semantic", {})
                if embeddings and not sem.get("ran"):
                    raise RuntimeError(f"{label}: the vector arm did not run: {sem.get('reason')}")
                row = {k: probe.t.get(k, 0.0) for k in _Probe.STAGES if embeddings or k.endswith("arm_ms")}
                if embeddings:
                    row["semantic_total_ms"] = float(sem.get("elapsed_ms", 0.0))
                    row["semantic_overhead_ms"] = row["semantic_total_ms"] - row["query_embed_ms"] - \
                        row["index_refresh_ms"] - row["vector_search_ms"]
                # the vector arm runs while the full-text arms do: the slower of the two is the arms' time
                row["rest_ms"] = ms - max(row.get("semantic_total_ms", 0.0), row["fts_arm_ms"] + row["summary_arm_ms"])
                for k, v in row.items():
                    stages.setdefault(k, []).append(v)
    s = score.summary()
    result: dict[str, Any] = {"n": s["n"], "R@10": s["R@10"], "p50_ms": s["p50_ms"], "p95_ms": s["p95_ms"],
                              "cold_first_query_ms": round(cold, 1)}
    if embeddings:
        result["vectors_answer_after_ms"] = round(warm_after, 1)
    if stages:
        result["stages"] = {k: _pct(v) for k, v in stages.items()}
    return result


def scale(memories: list[Memory], total: int, embeddings: bool, pool_size: int = 1000) -> dict[str, Any]:
    """Recall / grep at the conversation's own size, then padded to ``total`` stored messages."""
    memory = memories[0]
    modes: list[tuple[str, str, dict[str, Any], bool]] = [("trove_recall full-text", "trove_recall", {}, False)]
    if embeddings:
        modes.append(("trove_recall hybrid", "trove_recall", {}, True))
    modes.append(("trove_grep all", "trove_grep", {"session_scope": "all"}, False))
    out: dict[str, Any] = {"conversation": memory.name, "questions": len(memory.questions),
                           "before": {"stored_messages": memory.runtime.store.count()}}
    for label, tool, args, emb in modes:
        out["before"][label] = measure(memory, label, tool, args, emb)
    words = vocabulary(memories)
    pool: list[str] | None = None
    if embeddings:
        rng = random.Random(11)
        pool = sorted({pad_text(rng, words) for _ in range(pool_size)})
        cache, seconds = embed_pool(memory, pool)
        out["pad_pool"] = {"texts": len(pool), "chunks": len(cache), "embed_seconds": round(seconds, 1)}
    out["pad_seconds"] = round(pad_store(memory, total, words, pool=pool), 1)
    if embeddings:
        out["pad_vectors"] = vectors_for_padding(memory, cache)
        if out["pad_vectors"]["coverage"] != 1.0:
            raise RuntimeError(f"padding left the vector coverage at {out['pad_vectors']['coverage']}")
    out["after"] = {"stored_messages": memory.runtime.store.count()}
    for label, tool, args, emb in modes:
        out["after"][label] = measure(memory, label, tool, args, emb)
    if embeddings:
        from hermes_trove.retrieval import semantic
        from hermes_trove.retrieval.vector_index import index_for

        gen = semantic.searched_generation(semantic.vector_store(memory.runtime))
        if gen is not None:
            idx = index_for(memory.runtime.db.path, gen.generation_id, gen.dim)
            out["vector_index"] = {"rows": len(idx), "ram_mb": round(idx.nbytes / 1e6, 1)}
    return out


def print_scale(report: dict[str, Any], write: Callable[[str], None] = print) -> None:
    write(f"scale ({report['conversation']}, {report['questions']} questions; medians of one run on a shared "
          "machine):")
    if "pad_pool" in report:
        write(f"  padding pool: {json.dumps(report['pad_pool'])}; vectors: {json.dumps(report['pad_vectors'])}")
    write(f"  padding: {report['pad_seconds']} s")
    for phase in ("before", "after"):
        block = report[phase]
        write(f"  {phase} padding: {block['stored_messages']} stored messages")
        for label, v in block.items():
            if not isinstance(v, dict):
                continue
            write(f"    {label:<24} R@10 {v['R@10']:.3f}  p50 {v['p50_ms']:7.2f} ms  p95 {v['p95_ms']:7.2f} ms  "
                  f"(first query {v['cold_first_query_ms']} ms" + (f", vectors answer after "
                  f"{v['vectors_answer_after_ms']} ms" if "vectors_answer_after_ms" in v else "") + ")")
            for stage, pv in v.get("stages", {}).items():
                write(f"      {stage:<22} p50 {pv['p50']:7.2f}  p95 {pv['p95']:7.2f}")
    if "vector_index" in report:
        write(f"  vector index: {json.dumps(report['vector_index'])}")


def print_table(result: dict[str, dict[str, Score]], write: Callable[[str], None] = print) -> None:
    names = sorted({n for per in result.values() for n in per})
    width = max([28, *map(len, result)])
    write(f"{'mode':<{width}} {'R@5':>6} {'R@10':>6} {'hit@10':>7} {'p50ms':>7} {'p95ms':>7}   R@10 per conversation")
    for label, per in result.items():
        s = pooled(per).summary()
        convs = "  ".join(f"{n}:{statistics.fmean(per[n].recall[10]):.3f}" for n in names if n in per)
        write(f"{label:<{width}} {s['R@5']:>6.3f} {s['R@10']:>6.3f} {s['hit@10']:>7.3f} {s['p50_ms']:>7.2f} "
              f"{s['p95_ms']:>7.2f}   {convs}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--embeddings", action="store_true",
                        help="also run semantic-only and hybrid recall (needs the embeddings extra)")
    parser.add_argument("--sweep", action="store_true", help="leave-one-conversation-out over fusion knobs")
    parser.add_argument("--rescore-sweep", action="store_true",
                        help="leave-one-conversation-out over the recall re-scoring weights (full text, and "
                             "hybrid with --embeddings)")
    parser.add_argument("--scale", type=int, default=0, help="pad the first conversation's store to N messages")
    parser.add_argument("--scale-only", action="store_true",
                        help="with --scale: build only the first conversation and skip the dev-split table")
    parser.add_argument("--pad-pool", type=int, default=1000,
                        help="with --scale --embeddings: distinct padding texts embedded once (default 1000)")
    parser.add_argument("--address-sweep", action="store_true",
                        help="leave-one-conversation-out over what an addressed name counts in re-scoring")
    parser.add_argument("--lowercase", action="store_true",
                        help="also ask every question in lower case without its question mark (recall modes)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    data = load_dev_split(args.data, "bench_recall")
    if data is None:
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="trove-bench-recall-"))
    overrides: dict[str, Any] = {"embeddings_enabled": True} if args.embeddings else {}
    if args.scale and args.scale_only:
        data = data[:1]
    memories = [build_memory(sample, tmp, overrides) for sample in data]
    if args.embeddings:
        index_vectors(memories)
    if args.scale and args.scale_only:
        result = scale(memories, args.scale, args.embeddings, args.pad_pool)
        if args.json:
            print(json.dumps({"data": str(args.data), "scale": result}, indent=2))
        else:
            print_scale(result)
        return 0
    report: dict[str, Any] = {"data": str(args.data), "conversations": len(memories),
                              "questions": sum(len(m.questions) for m in memories)}
    modes: list[Mode] = [("trove_recall full-text", "trove_recall", {}),
                         ("trove_grep session_scope=all", "trove_grep", {"session_scope": "all"})]
    if args.embeddings:
        with_config(memories, embeddings_enabled=False)
    result = evaluate(memories, modes)
    if args.embeddings:
        with_config(memories, embeddings_enabled=True)
        result.update(evaluate(memories, [("trove_recall hybrid", "trove_recall", {}),
                                          ("trove_grep session_scope=all mode=hybrid", "trove_grep",
                                           {"session_scope": "all", "mode": "hybrid"})]))
        with_config(memories, recall_fts_weight=0.0, recall_summary_weight=0.0)
        result.update(evaluate(memories, [("trove_recall semantic-only", "trove_recall", {})]))
        with_config(memories, recall_fts_weight=1.0, recall_summary_weight=1.0)
    if args.lowercase:
        result.update(lowercase_modes(memories, args.embeddings))
    report["modes"] = {label: {"pooled": pooled(per).summary(),
                               "per_conversation": {n: s.summary() for n, s in per.items()}}
                       for label, per in result.items()}
    if args.sweep:
        mode: Mode = ("recall", "trove_recall", {})
        if args.embeddings:
            grid = [{"recall_fusion": f, "recall_semantic_weight": w} for f in ("zscore", "interpolate", "rrf")
                    for w in (0.25, 0.5, 1.0, 1.5, 2.0)]
        else:
            grid = [{"recall_candidates": c, "recall_context_weight": w} for c in (100, 400)
                    for w in (0.0, 0.2, 0.4, 0.7, 1.0)]
        report["sweep"] = loo(memories, grid, mode)
    if args.rescore_sweep:
        if args.embeddings:
            with_config(memories, embeddings_enabled=False)
        names = [m.name for m in memories]
        report["rescore_sweep"] = choose(rescore_table(memories, RESCORE_GRID), names)
        if args.embeddings:
            with_config(memories, embeddings_enabled=True)
            report["rescore_sweep_hybrid"] = choose(rescore_table(memories, RESCORE_GRID), names)
    if args.address_sweep:
        from hermes_trove.retrieval import rescore

        if args.embeddings:
            with_config(memories, embeddings_enabled=False)
        names = [m.name for m in memories]
        report["address_sweep"] = choose(rescore_table(memories, [
            {"rescore": rescore.DEFAULT.rescore, "addressed": a} for a in ADDRESS_CREDITS]), names)
        if args.embeddings:
            with_config(memories, embeddings_enabled=True)
            report["address_sweep_hybrid"] = choose(rescore_table(memories, [
                {"rescore": rescore.WITH_VECTORS.rescore, "addressed": a} for a in ADDRESS_CREDITS]), names)
    if args.scale:
        report["scale"] = scale(memories, args.scale, args.embeddings, args.pad_pool)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"LoCoMo ({args.data.name}): {report['conversations']} conversations, one store each, every LoCoMo "
          f"session its own Hermes session; {report['questions']} questions (categories 1-4) asked from a new "
          "session. R@k = share of a question's evidence turns in the top k message hits.")
    print_table(result)
    for label, v in report["modes"].items():
        print(f"  {label}: R@10 by category {v['pooled']['R@10_by_category']}, "
              f"by evidence {v['pooled']['R@10_by_evidence']}")
    for key in ("sweep", "rescore_sweep", "rescore_sweep_hybrid", "address_sweep", "address_sweep_hybrid"):
        if key in report:
            print_sweep(key.replace("_", " "), report[key])
    if "scale" in report:
        print_scale(report["scale"])
    return 0


def index_vectors(memories: list[Memory]) -> None:
    """Embed every stored row through the embeddings indexer."""
    from hermes_trove.retrieval import indexer

    for m in memories:
        indexer.backfill(m.runtime)


if __name__ == "__main__":
    raise SystemExit(main())
