"""Where the needed turns of multi-evidence questions sit in recall's arms, and designs that read the
candidate pool's own statistics, each scored leaving one conversation out.

Builds bench_recall's LoCoMo memories (with ``--embeddings`` a vector for every row) and asks every
question once through ``recall_search.recall``, keeping each arm's scores as fusion receives them and
the fused hits as re-scoring receives them. It prints, for every needed turn of a multi-evidence
question that the shipped top 10 misses, its place in the full-text arm, the vector arm and the
shipped order, its length, whether it shares a content word other than a name with the question, and
how many turns and sessions its question needs. Then each design re-fuses or re-orders the captured
pool (re-scoring runs as recall runs it):

- ``common``: a full-text candidate whose matched question words are all held by more than a share S
  of the full-text pool (a speaker's name that labels half the turns) keeps no full-text score of
  its own (the arm's lowest): its place comes from the vector arm (``--embeddings`` only);
- ``arm weight``: the vector arm's weight 1 + K x the share of full-text candidates matched only by
  such common words, per question (``--embeddings`` only);
- ``rescore scaled``: the re-scoring weight times F + (1 - F) x the share of the question's words
  that at most half the full-text pool holds: the lexical signals count less when they tell the
  candidates apart less;
- ``set cover``: the top 10 taken greedily from the best 30, each pick's score over the best one's
  plus L x the rarity-weighted share of the question's words it adds to those already placed (a set
  objective: a turn that covers what the placed ones lack goes up; nothing is penalised);
- ``head signal`` (``--embeddings``): within the best 100, L x the cosine of the hit's vector to the
  question's head (its content words without framing and names, ``sweep_subject.head_words``),
  min-max scaled over the 100.

Knobs are chosen on four conversations and the fifth is scored (bench_recall's ``choose``); the
table prints those held-out figures, pooled. Nothing here changes the product.

Measured on the LoCoMo dev split (786 questions, 215 multi-evidence; held-out R@10 pooled, all /
multi; the shipped order as replayed here, without the changed-fact and repeated-text steps):

| design | full text | hybrid |
|---|---|---|
| shipped | 0.772 / 0.484 | 0.819 / 0.538 |
| common, S 0.5 | - | 0.797 / 0.520 |
| common (S chosen) | - | 0.800 / 0.522 |
| arm weight | - | 0.816 / 0.537 |
| rescore scaled | 0.775 / 0.486 | 0.816 / 0.538 |
| set cover | 0.773 / 0.480 | 0.818 / 0.538 |
| head signal | - | 0.817 / 0.535 |

No design gains 0.015 on multi-evidence questions either way; "rescore scaled" over full text
gains in three conversations and loses in two.

    python bench/sweeps/sweep_pool_evidence.py [--embeddings] [--data ../shared/data/locomo-dev.json]
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _locomo import DEFAULT_DATA, load_dev_split  # noqa: E402

_TOKEN = re.compile(r"[^\W\d_]+", re.UNICODE)
SET_DEPTH = 30
HEAD_DEPTH = 100


@dataclasses.dataclass
class Asked:
    """One question, its gold turns, the arms as fusion received them and the recall call's parts."""

    memory: Any
    question: str
    gold: set[str]
    category: int
    arms: dict[str, dict[Any, float]]
    call: tuple[Any, ...]  # (runtime, request, match, fused hits) at the re-scoring hook
    weights: Any           # the re-scoring weights recall used
    common: dict[float, tuple[set[Any], int]] = dataclasses.field(default_factory=dict)


def capture(memories: list[Any]) -> list[Asked]:
    from hermes_trove.retrieval import fusion, recall_search

    seen: dict[str, Any] = {}
    fuse, hook = fusion.fuse, recall_search.rescored

    def fuse_seen(arms: Any, weights: Any, method: str = "zscore", floors: Any = None) -> Any:
        seen["arms"] = {name: dict(scores) for name, scores in arms.items()}
        return fuse(arms, weights, method, floors)

    def hook_seen(runtime: Any, req: Any, match: Any, hits: list[Any], weights: Any) -> list[Any]:
        seen["call"], seen["weights"] = (runtime, req, match, hits), weights
        return hits

    out = []
    fusion.fuse, recall_search.rescored = fuse_seen, hook_seen  # type: ignore[assignment]
    try:
        for m in memories:
            for question, gold, category in m.questions:
                seen.clear()
                recall_search.recall(m.runtime, recall_search.RecallRequest(query=question, limit=HEAD_DEPTH))
                out.append(Asked(m, question, gold, category, seen.get("arms", {}), seen["call"], seen["weights"]))
    finally:
        fusion.fuse, recall_search.rescored = fuse, hook  # type: ignore[assignment]
    return out


def stems(question: str) -> list[str]:
    from hermes_trove.retrieval.query import build_match, rough_stem

    return [s for s in dict.fromkeys(rough_stem(t) for t in build_match(question).terms) if s]


def common_only(a: Asked, share: float) -> tuple[set[Any], int]:
    """(the full-text candidates matching only words more than ``share`` of that pool holds, pool size)."""
    if share not in a.common:
        hits = {(h.kind, h.item_id): h for h in a.call[3]}
        words = stems(a.question)
        held = {key: {s for s in words if s in text_of(hits[key]).lower()}
                for key in a.arms.get("fts", {}) if key in hits}
        df = Counter(s for h in held.values() for s in h)
        rare = {s for s in words if df[s] <= share * max(1, len(held))}
        a.common[share] = ({key for key, h in held.items() if not h & rare}, len(held))
    return a.common[share]


def text_of(hit: Any) -> str:
    return str(hit.row.content if hit.row is not None else hit.node.summary if hit.node is not None else hit.snippet)


def refused(a: Asked, arms: dict[str, dict[Any, float]], weights: dict[str, float]) -> list[Any]:
    """The captured hits re-fused from ``arms`` by ``weights`` (recall's floors and method)."""
    from hermes_trove.retrieval import fusion

    runtime = a.call[0]
    fused = fusion.fuse({n: s for n, s in arms.items() if s}, weights, runtime.config.recall_fusion,
                        floors={"fts": 0.0, "summary": 0.0, "semantic": None})
    by_key = {(h.kind, h.item_id): h for h in a.call[3]}
    hits = [dataclasses.replace(by_key[k], score=s) for k, s in fused.items() if k in by_key]
    return sorted(hits, key=lambda h: (-h.score, -h.at, h.kind, h.item_id))


def finish(a: Asked, hits: list[Any] | None = None, weights: Any = None,
           post: Callable[[Asked, list[Any]], list[Any]] | None = None) -> list[str | None]:
    """Re-scoring as recall runs it, then ``post``; the message hits' dialog ids best first."""
    from hermes_trove.retrieval import recall_search

    runtime, req, match, fused = a.call
    out = recall_search.rescored(runtime, req, match, fused if hits is None else hits,
                                 a.weights if weights is None else weights)
    if post is not None:
        out = post(a, out)
    return [a.memory.dia.get(h.item_id) for h in out if h.kind == "message"]


def arm_weights(a: Asked) -> dict[str, float]:
    cfg = a.call[0].config
    return {"fts": float(cfg.recall_fts_weight), "summary": float(cfg.recall_summary_weight),
            "semantic": float(cfg.recall_semantic_weight)}


def common_design(a: Asked, share: float) -> list[str | None]:
    fts = a.arms.get("fts", {})
    if not fts:
        return finish(a)
    plain, _ = common_only(a, share)
    low = min(fts.values())
    return finish(a, refused(a, {**a.arms, "fts": {k: low if k in plain else v for k, v in fts.items()}},
                             arm_weights(a)))


def weight_design(a: Asked, k: float) -> list[str | None]:
    plain, n = common_only(a, 0.5)
    w = arm_weights(a)
    return finish(a, refused(a, a.arms, {**w, "semantic": w["semantic"] * (1 + k * len(plain) / max(1, n))}))


def scaled_design(a: Asked, floor: float) -> list[str | None]:
    hits = {(h.kind, h.item_id): h for h in a.call[3]}
    texts = [text_of(hits[key]).lower() for key in a.arms.get("fts", {}) if key in hits]
    words = stems(a.question)
    if not texts or not words:
        return finish(a)
    rare = sum(1 for s in words if sum(s in t for t in texts) <= 0.5 * len(texts)) / len(words)
    return finish(a, weights=dataclasses.replace(a.weights, rescore=a.weights.rescore * (floor + (1 - floor) * rare)))


def set_cover(weight: float) -> Callable[[Asked, list[Any]], list[Any]]:
    def post(a: Asked, hits: list[Any]) -> list[Any]:
        words = stems(a.question)
        head = hits[:SET_DEPTH]
        if weight <= 0 or not words or not head:
            return hits
        has = [{i for i, s in enumerate(words) if s in text_of(h).lower()} for h in head]
        idf = [math.log(1 + len(head) / (1 + sum(i in h for h in has))) for i in range(len(words))]
        total = sum(idf) or 1.0
        top = head[0].score or 1.0
        left, placed, covered = list(range(len(head))), [], set()
        while left and len(placed) < 10:
            j = max(left, key=lambda j: head[j].score / top + weight * sum(idf[i] for i in has[j] - covered) / total)
            left.remove(j)
            placed.append(j)
            covered |= has[j]
        return [head[j] for j in placed + left] + hits[SET_DEPTH:]
    return post


class HeadVectors:
    """Each memory's unit row vectors and the question heads' vectors (``sweep_subject.Archive``)."""

    def __init__(self, memories: list[Any]):
        from sweep_subject import Archive

        self.archives = {id(m): Archive(m, True) for m in memories}
        self.index = {key: {sid: i for i, sid in enumerate(arc.ids)} for key, arc in self.archives.items()}
        self.sims: dict[tuple[int, str], Any] = {}

    def of(self, a: Asked) -> Any:
        import numpy as np
        from sweep_subject import head_words, names_in

        key = (id(a.memory), a.question)
        if key not in self.sims:
            arc = self.archives[id(a.memory)]
            v = np.asarray(arc.provider.embed([head_words(a.question, names_in(a.question))])[0], np.float32)
            self.sims[key] = arc.matrix @ (v / (np.linalg.norm(v) or 1.0))
        return self.sims[key]

    def signal(self, weight: float) -> Callable[[Asked, list[Any]], list[Any]]:
        def post(a: Asked, hits: list[Any]) -> list[Any]:
            head = hits[:HEAD_DEPTH]
            if weight <= 0 or not head:
                return hits
            sims, index = self.of(a), self.index[id(a.memory)]
            cos = [float(sims[index[h.item_id]]) if h.kind == "message" and h.item_id in index else 0.0 for h in head]
            lo, hi = min(cos), max(cos)
            top = head[0].score or 1.0
            moved = sorted(zip(head, cos, strict=True),
                           key=lambda p: -(p[0].score / top + weight * (p[1] - lo) / ((hi - lo) or 1.0)))
            return [h for h, _ in moved] + hits[HEAD_DEPTH:]
        return post


def census(asked_all: list[Asked], vectors: bool) -> None:
    """Where the needed turns the shipped top 10 misses sit (multi-evidence questions)."""
    from sweep_subject import names_in

    counts: Counter[tuple[str, str]] = Counter()
    missed = 0
    for a in asked_all:
        if len(a.gold) < 2:
            continue
        inv = {d: sid for sid, d in a.memory.dia.items()}
        order = [h.item_id for h in _shipped(a) if h.kind == "message"]
        ranks = {name: [k[1] for k in sorted(arm, key=lambda k: -arm[k]) if k[0] == "message"]
                 for name, arm in a.arms.items()}
        rows = {r.store_id: r for r in a.memory.runtime.store.get_many(sorted(inv[d] for d in a.gold if d in inv))}
        asked = {w.lower() for w in _TOKEN.findall(a.question)} - names_in(a.question)
        words = [s for s in stems(a.question) if s in asked or any(w.startswith(s) for w in asked)]
        sessions = len({r.session_id for r in rows.values()})
        for sid, row in rows.items():
            place = order.index(sid) + 1 if sid in order else None
            if place is not None and place <= 10:
                continue
            missed += 1
            counts[("shipped order", "absent" if place is None else "11-30" if place <= 30
                    else "31-100" if place <= 100 else "101+")] += 1
            for name in ("fts",) + (("semantic",) if vectors else ()):
                r = ranks.get(name, []).index(sid) + 1 if sid in ranks.get(name, []) else None
                counts[(f"{name} arm", "absent" if r is None else "1-50" if r <= 50 else "51-400")] += 1
            text = row.content.lower()
            counts[("shares a non-name word", "yes" if any(s in text for s in words) else "no")] += 1
            size = len(row.content)
            counts[("length", "<100" if size < 100 else "100-199" if size < 200 else "200+")] += 1
            counts[("turns needed", str(min(len(a.gold), 5)) + ("+" if len(a.gold) >= 5 else ""))] += 1
            counts[("sessions", str(min(sessions, 4)) + ("+" if sessions >= 4 else ""))] += 1
    print(f"needed turns of multi-evidence questions missing from the shipped top 10: {missed}")
    for (what, value), n in sorted(counts.items()):
        print(f"  {what:<24} {value:<8} {n:>4} ({n / max(1, missed):.0%})")


def _shipped(a: Asked) -> list[Any]:
    from hermes_trove.retrieval import recall_search

    runtime, req, match, hits = a.call
    return recall_search.rescored(runtime, req, match, hits, a.weights)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--embeddings", action="store_true", help="hybrid recall, and the vector designs")
    args = parser.parse_args()
    data = load_dev_split(args.data, "sweep_pool_evidence")
    if data is None:
        return 0
    from bench_recall import Score, build_memory, choose, index_vectors

    tmp = Path(tempfile.mkdtemp(prefix="trove-sweep-pool-"))
    memories = [build_memory(s, tmp, {"embeddings_enabled": True, "embedding_query_deadline_ms": 120_000}
                             if args.embeddings else {}) for s in data]
    if args.embeddings:
        index_vectors(memories)
    asked_all = capture(memories)
    census(asked_all, args.embeddings)
    designs: dict[str, list[tuple[dict[str, Any], Callable[[Asked], list[str | None]]]]] = {
        "shipped": [({}, finish)],
        "rescore scaled": [({"floor": f}, lambda a, f=f: scaled_design(a, f)) for f in (0.0, 0.25, 0.5, 1.0)],
        "set cover": [({"weight": w}, lambda a, w=w: finish(a, post=set_cover(w))) for w in (0.0, 0.05, 0.1, 0.2, 0.4)]}
    if args.embeddings:
        heads = HeadVectors(memories)
        designs["common, S 0.5"] = [({}, lambda a: common_design(a, 0.5))]
        designs["common"] = [({"share": s}, lambda a, s=s: common_design(a, s)) for s in (0.2, 0.35, 0.5, 0.7)]
        designs["arm weight"] = [({"k": k}, lambda a, k=k: weight_design(a, k)) for k in (0.0, 0.5, 1.0, 2.0, 4.0)]
        designs["head signal"] = [({"weight": w}, lambda a, w=w: finish(a, post=heads.signal(w)))
                                  for w in (0.0, 0.1, 0.2, 0.4, 0.8)]
    names = [m.name for m in memories]
    print(f"LoCoMo ({args.data.name}), {len(asked_all)} questions, recall "
          f"{'hybrid' if args.embeddings else 'full text'}; held-out (leave one conversation out):")
    for design, grid in designs.items():
        table = []
        for point, order in grid:
            scores = {n: Score() for n in names}
            for a in asked_all:
                scores[a.memory.name].add(order(a), a.gold, a.category, 0.0)
            table.append((point, scores))
        sweep = choose(table, names)
        s = sweep["loo_pooled"]
        by = s["R@10_by_evidence"]
        chosen = sorted({str(v["chosen"]) for v in sweep["loo"].values()})
        folds = " ".join(f"{v['held_out_R@10']:.3f}" for v in sweep["loo"].values())
        print(f"  {design:<15} R@10 {s['R@10']:.4f}  R@5 {s['R@5']:.4f}  single {by['single']['R@10']:.4f}  "
              f"multi {by['multi']['R@10']:.4f}  folds {folds}  chosen {'; '.join(chosen)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
