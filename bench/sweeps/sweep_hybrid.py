"""Fusion designs for hybrid trove_recall, each scored by leave-one-conversation-out (no LLM).

Builds bench_recall's LoCoMo memories once (every LoCoMo session its own Hermes session, real
dates, vectors for every row through the product's indexer), then captures per question what
the product's arms see: the full-text arm's candidates with trove's own re-ranked scores
BEFORE recall's context smoothing (``recall_search.fts_arm`` runs with a context weight of 0,
which leaves its scores max-normalised and unsmoothed), and the vector hits of the
whole conversation. Each design is then a pure function of those captures, with ONE
parameter (the dense share ``a`` in [0, 1]) chosen by leave-one-conversation-out; nothing is
fitted beyond it. The recency prior is the product's (constant on this data: all of it is
years old). The "full text" and "shipped" rows reproduce bench_recall's recall full-text and
hybrid figures (a check the capture is faithful). The vectors are the product's: each message
chunk embedded with the two turns before it (``TROVE_EMBEDDING_CONTEXT_MESSAGES``).

    python bench/sweeps/sweep_hybrid.py [--data ../shared/data/locomo-dev.json] [--json]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _locomo import DEFAULT_DATA, load_dev_split  # noqa: E402

KS = (5, 10)
GRID = (0.0, 0.1, 0.2, 0.25, 0.33, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
DENSE_ALL = 100_000  # "every vector of the conversation"


@dataclasses.dataclass
class Capture:
    """One question: the product's full-text arm before smoothing, and dense cosines."""

    gold: set[str]
    reranked: dict[int, float]   # store_id -> trove's re-ranked full-text score (max-normalised, unsmoothed)
    groups: dict[int, str]       # store_id -> session id (every row seen by either arm)
    dense: list[tuple[int, float]]  # (store_id, cosine) best first, whole conversation
    at: dict[int, float]         # store_id -> created_at


@dataclasses.dataclass
class Conv:
    name: str
    dia: dict[int, str]
    captures: list[Capture]


def capture(memories: list[Any]) -> list[Conv]:
    from hermes_trove.retrieval import recall_search, semantic
    from hermes_trove.retrieval.query import build_match

    convs: list[Conv] = []
    for m in memories:
        rt = m.runtime
        cfg = rt.config
        unsmoothed = dataclasses.replace(rt, config=dataclasses.replace(cfg, recall_context_weight=0.0))
        caps: list[Capture] = []
        for question, gold, _cat in m.questions:
            req = recall_search.RecallRequest(query=question, limit=10, current=f"{m.name}-ask")
            gate = recall_search.Gate(rt, req)
            rows: dict[int, Any] = {}
            report = recall_search.ArmReport("fts", 1.0)
            fts = recall_search.fts_arm(unsmoothed, req, build_match(question), max(int(cfg.recall_candidates), 40),
                                        gate, rows, {}, report)
            scores = {item_id: score for (_kind, item_id), score in fts.items()}
            res = semantic.search(rt, question, kinds=("message",), limit=DENSE_ALL, deadline_s=120.0)
            if not res.ran:
                raise RuntimeError(f"vector arm did not run: {res.degraded_reason}")
            dense = [(int(h.item_id), float(h.score)) for h in res.hits]
            missing = [i for i, _ in dense if i not in rows]
            for row in rt.store.get_many(missing):
                rows[row.store_id] = row
            dense = [(i, s) for i, s in dense if i in rows and gate.admit_row(rows[i])]
            groups = {i: rows[i].session_id for i in rows}
            caps.append(Capture(gold, scores, groups, dense,
                                {i: float(rows[i].created_at or 0.0) for i in rows}))
        convs.append(Conv(m.name, m.dia, caps))
    return convs


# -- designs: (capture, a, cfg) -> {store_id: score} ------------------------------------

RADIUS = 8


def _smooth(scores: dict[int, float], c: Capture, weight: float) -> dict[int, float]:
    from hermes_trove.retrieval import fusion
    return fusion.context_smoothing(scores, c.groups, RADIUS, weight)


def _mix(arms: list[tuple[dict[int, float], float]]) -> dict[int, float]:
    out: dict[int, float] = {}
    for scores, w in arms:
        if w <= 0:
            continue
        for k, v in scores.items():
            out[k] = out.get(k, 0.0) + w * v
    return out


def _minmax(s: dict[int, float], floor: float | None = None) -> dict[int, float]:
    from hermes_trove.retrieval import fusion
    return fusion.minmax(s, floor)


def _zscore(s: dict[int, float]) -> dict[int, float]:
    from hermes_trove.retrieval import fusion
    return fusion.zscore(s)


def _rank(s: dict[int, float], k: float) -> dict[int, float]:
    """Reciprocal rank ``(k+1)/(k+rank)``: 1 at the top."""
    order = sorted(s, key=lambda x: -s[x])
    return {key: (k + 1) / (k + r) for r, key in enumerate(order, 1)}


def _rbp(s: dict[int, float], p: float) -> dict[int, float]:
    order = sorted(s, key=lambda x: -s[x])
    return {key: p ** (r - 1) for r, key in enumerate(order, 1)}


def _dense(c: Capture, pool: int, only: set[int] | None = None) -> dict[int, float]:
    hits = c.dense[:pool] if only is None else [(i, s) for i, s in c.dense if i in only]
    return dict(hits)


Design = Callable[[Capture, float, float], dict[int, float]]  # (capture, a, context weight)


def fts_only(c: Capture, a: float, cw: float) -> dict[int, float]:
    return _smooth(c.reranked, c, cw)


def product(c: Capture, a: float, cw: float, pool: int = 400) -> dict[int, float]:
    """Smooth full text, then min-max interpolation with the dense top-``pool`` (``recall_fusion=interpolate``)."""
    return _mix([(_minmax(_smooth(c.reranked, c, cw), 0.0), 1 - a), (_minmax(_dense(c, pool)), a)])


def product_all(c: Capture, a: float, cw: float) -> dict[int, float]:
    return product(c, a, cw, DENSE_ALL)


def product_50(c: Capture, a: float, cw: float) -> dict[int, float]:
    return product(c, a, cw, 50)


def union_only(c: Capture, a: float, cw: float) -> dict[int, float]:
    """No dense rescue: the vector arm re-scores only the full-text pool."""
    pool = set(c.reranked)
    return _mix([(_minmax(_smooth(c.reranked, c, cw), 0.0), 1 - a), (_minmax(_dense(c, DENSE_ALL, pool)), a)])


def fuse_then_smooth(c: Capture, a: float, cw: float) -> dict[int, float]:
    """Interpolate raw full text with dense, then smooth the fused score by context."""
    fused = _mix([(_minmax(c.reranked, 0.0), 1 - a), (_minmax(_dense(c, 400)), a)])
    return _smooth(fused, c, cw)


def smooth_both(c: Capture, a: float, cw: float) -> dict[int, float]:
    """Each arm smoothed by its own context, then interpolated."""
    d = _minmax(_dense(c, 400))
    return _mix([(_minmax(_smooth(c.reranked, c, cw), 0.0), 1 - a), (_minmax(_smooth(d, c, cw), 0.0), a)])


def zscore(c: Capture, a: float, cw: float) -> dict[int, float]:
    """Shipped (``recall_fusion=zscore``): smooth full text, then z-score interpolation with the dense top-400."""
    return _mix([(_zscore(_smooth(c.reranked, c, cw)), 1 - a), (_zscore(_dense(c, 400)), a)])


def rrf60(c: Capture, a: float, cw: float) -> dict[int, float]:
    return _mix([(_rank(_smooth(c.reranked, c, cw), 60), 1 - a), (_rank(_dense(c, 400), 60), a)])


def rrf_k400(c: Capture, a: float, cw: float) -> dict[int, float]:
    """Reciprocal rank with a large k (= the pool): near-linear in rank."""
    return _mix([(_rank(_smooth(c.reranked, c, cw), 400), 1 - a), (_rank(_dense(c, 400), 400), a)])


def rbp(c: Capture, a: float, cw: float) -> dict[int, float]:
    """Rank-biased weights p^(rank-1), p = 0.98 (the patience of a ~50-deep reader)."""
    return _mix([(_rbp(_smooth(c.reranked, c, cw), 0.98), 1 - a), (_rbp(_dense(c, 400), 0.98), a)])


def gated(c: Capture, a: float, cw: float) -> dict[int, float]:
    """Dense share scaled by full text's doubt: a_q = a * (s10 / s1) of the smoothed FTS scores
    (a flat top ten -> full dense weight; one clear winner -> little)."""
    f = _smooth(c.reranked, c, cw)
    top = sorted(f.values(), reverse=True)
    doubt = (top[min(9, len(top) - 1)] / top[0]) if top and top[0] > 0 else 1.0
    aq = a * doubt
    return _mix([(_minmax(f, 0.0), 1 - aq), (_minmax(_dense(c, 400)), aq)])


def _doubt(f: dict[int, float], nth: int) -> float:
    """How little full text separates its best hit from its ``nth``: s_nth / s_1 in [0, 1]."""
    top = sorted(f.values(), reverse=True)
    return (top[min(nth - 1, len(top) - 1)] / top[0]) if top and top[0] > 0 else 1.0


def gated_gap2(c: Capture, a: float, cw: float) -> dict[int, float]:
    """The gate on the gap between the top two full-text hits: a_q = a * s2 / s1."""
    f = _smooth(c.reranked, c, cw)
    aq = a * _doubt(f, 2)
    return _mix([(_minmax(f, 0.0), 1 - aq), (_minmax(_dense(c, 400)), aq)])


def gated_then_smooth(c: Capture, a: float, cw: float) -> dict[int, float]:
    """The s10/s1 gate (on raw full text) with the fused score smoothed by context."""
    aq = a * _doubt(c.reranked, 10)
    return _smooth(_mix([(_minmax(c.reranked, 0.0), 1 - aq), (_minmax(_dense(c, 400)), aq)]), c, cw)


def gated_union(c: Capture, a: float, cw: float) -> dict[int, float]:
    """The doubt gate with the vector arm re-scoring only the full-text pool (no rescue)."""
    f = _smooth(c.reranked, c, cw)
    top = sorted(f.values(), reverse=True)
    doubt = (top[min(9, len(top) - 1)] / top[0]) if top and top[0] > 0 else 1.0
    aq = a * doubt
    return _mix([(_minmax(f, 0.0), 1 - aq), (_minmax(_dense(c, DENSE_ALL, set(c.reranked))), aq)])


def dense_floor0(c: Capture, a: float, cw: float) -> dict[int, float]:
    """Dense arm floored at cosine 0 instead of the pool minimum (keeps its magnitude)."""
    return _mix([(_minmax(_smooth(c.reranked, c, cw), 0.0), 1 - a), (_minmax(_dense(c, 400), 0.0), a)])


DESIGNS: dict[str, Design] = {
    "shipped (smooth FTS, then z-score, dense top-400)": zscore,
    "min-max instead (smooth FTS, dense top-400)": product,
    "same, dense top-50": product_50,
    "same, dense over whole store": product_all,
    "union only (no dense rescue)": union_only,
    "fuse raw, then smooth fused": fuse_then_smooth,
    "smooth both arms, then fuse": smooth_both,
    "dense floored at cosine 0": dense_floor0,
    "reciprocal rank k=60": rrf60,
    "reciprocal rank k=400": rrf_k400,
    "rank-biased p=0.98": rbp,
    "gated by FTS doubt (s10/s1)": gated,
    "gated, union only": gated_union,
    "gated by top-2 gap (s2/s1)": gated_gap2,
    "gated (s10/s1), fuse raw then smooth": gated_then_smooth,
}


def ranked_ids(c: Capture, scores: dict[int, float], now: float, half_life_s: float, floor: float) -> list[int]:
    from hermes_trove.retrieval import fusion
    final = {k: v * fusion.recency_factor(now - c.at.get(k, 0.0), half_life_s, floor) for k, v in scores.items()}
    return sorted(final, key=lambda k: (-final[k], -c.at.get(k, 0.0), k))


def score_conv(conv: Conv, design: Design, a: float, cw: float, prior: tuple[float, float, float]) -> dict[str, Any]:
    rec: dict[int, list[float]] = {k: [] for k in KS}
    for c in conv.captures:
        ids = ranked_ids(c, design(c, a, cw), *prior)
        for k in KS:
            top = {conv.dia.get(i) for i in ids[:k]}
            rec[k].append(len(c.gold & top) / len(c.gold))
    return {"n": len(rec[10]), **{f"sum@{k}": sum(rec[k]) for k in KS}}


def loo(convs: list[Conv], design: Design, cw: float, prior: tuple[float, float, float],
        grid: tuple[Any, ...] = GRID) -> dict[str, Any]:
    """Choose a grid point on four conversations, score the fifth. A grid point is ``a`` or,
    for a two-knob check, ``(a, context weight)``."""
    def run(point: Any, conv: Conv) -> dict[str, Any]:
        a, w = point if isinstance(point, tuple) else (point, cw)
        return score_conv(conv, design, a, w, prior)

    table = {a: {c.name: run(a, c) for c in convs} for a in grid}
    names = [c.name for c in convs]

    def r(row: dict[str, dict[str, float]], k: int, which: list[str]) -> float:
        return sum(row[n][f"sum@{k}"] for n in which) / sum(row[n]["n"] for n in which)

    held: dict[str, Any] = {}
    s5 = s10 = n = 0.0
    for out in names:
        train = [x for x in names if x != out]
        best = max(grid, key=lambda a: round(r(table[a], 10, train), 9))  # ties: the earlier point
        row = table[best][out]
        held[out] = {"a": best, "R@5": row["sum@5"] / row["n"], "R@10": row["sum@10"] / row["n"]}
        s5, s10, n = s5 + row["sum@5"], s10 + row["sum@10"], n + row["n"]
    curve = {a: round(r(table[a], 10, names), 4) for a in grid}
    return {"held": held, "loo_R@5": s5 / n, "loo_R@10": s10 / n, "curve": curve}


def oracle(convs: list[Conv], cw: float, prior: tuple[float, float, float], a: float = 0.5) -> float:
    """Headroom of any per-query switch: each question takes the better R@10 of full text and of
    the shipped fusion at ``a`` (an upper bound no gate can pass; not a design)."""
    total = n = 0.0
    for conv in convs:
        for c in conv.captures:
            best = 0.0
            for ids in (ranked_ids(c, fts_only(c, 0, cw), *prior), ranked_ids(c, zscore(c, a, cw), *prior)):
                best = max(best, len(c.gold & {conv.dia.get(i) for i in ids[:10]}) / len(c.gold))
            total, n = total + best, n + 1
    return total / n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    data = load_dev_split(args.data, "sweep_hybrid")
    if data is None:
        return 0
    import bench_recall

    tmp = Path(tempfile.mkdtemp(prefix="trove-sweep-hybrid-"))
    started = time.perf_counter()
    memories = [bench_recall.build_memory(s, tmp, {"embeddings_enabled": True}) for s in data]
    bench_recall.index_vectors(memories)
    convs = capture(memories)
    built = time.perf_counter() - started
    cfg = memories[0].runtime.config
    cw = float(cfg.recall_context_weight)
    prior = (time.time(), float(cfg.recall_recency_half_life_days) * 86400.0, float(cfg.recall_recency_floor))
    base = loo(convs, fts_only, cw, prior, grid=(0.0,))
    results = {"full text (recall today)": base}
    for label, design in DESIGNS.items():
        results[label] = loo(convs, design, cw, prior)
    results["shipped, a and context weight both by LOO"] = loo(
        convs, zscore, cw, prior, grid=tuple((a, w) for w in (0.0, 0.25, 0.5, 1.0) for a in GRID[:8]))
    names = [c.name for c in convs]
    if args.json:
        for res in results.values():
            res["curve"] = {str(a): v for a, v in res["curve"].items()}
        print(json.dumps({"build_and_capture_s": round(built, 1), "questions": sum(len(c.captures) for c in convs),
                          "oracle_R@10": round(oracle(convs, cw, prior), 4), "designs": results}, indent=2))
        return 0
    print(f"LoCoMo ({args.data.name}): {sum(len(c.captures) for c in convs)} questions, {len(convs)} conversations; "
          f"build + capture {built:.0f} s. a = dense share chosen on four conversations, scored on the fifth.")
    ft = {n: base["held"][n]["R@10"] for n in names}
    print(f"{'design':<50} {'LOO R@5':>7} {'LOO R@10':>8} {'vs FT':>6} {'worst conv':>10}   "
          "held-out R@10 per conversation (a chosen)")
    for label, res in results.items():
        per = "  ".join(f"{n.replace('conv-', '')}:{res['held'][n]['R@10']:.3f}({res['held'][n]['a']})" for n in names)
        worst = min(res["held"][n]["R@10"] - ft[n] for n in names)
        print(f"{label:<50} {res['loo_R@5']:>7.4f} {res['loo_R@10']:>8.4f} {res['loo_R@10'] - base['loo_R@10']:>+6.3f} "
              f"{worst:>+10.3f}   {per}")
    print(f"headroom: a per-question oracle switching between full text and the shipped fusion (a = 0.5) reaches "
          f"R@10 {oracle(convs, cw, prior):.4f}")
    print("pooled R@10 by a (flatness):")
    for label, res in results.items():
        if 1 < len(res["curve"]) <= len(GRID):
            print(f"  {label:<48} " + " ".join(f"{a}:{v:.3f}" for a, v in res["curve"].items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
