"""Designs for questions whose answer needs several turns, each scored leaving one conversation out.

Builds bench_recall's LoCoMo memories once (every LoCoMo session its own Hermes session, real
dates; with ``--embeddings`` a vector for every row through the product's indexer) and asks
every question once through ``recall_search.recall`` for its best 100 hits: the shipped order.
Each design then re-orders those hits, some after one more search:

- ``cap``: at most N hits of one session in the top 10 (the rest keep their order below);
- ``cluster``: at most N hits within R turns of each other in one session (the rest below);
- ``tail``: the first K hits kept, then the top 10 filled first by hits more than R turns from
  every placed hit of their session (R none: of another session);
- ``spread`` (``--embeddings``): maximal marginal relevance over the best D hits, each pick's score
  over the best one's less L x its highest cosine to a hit already placed;
- ``words``: a second full-text query of the best K hits' rarest words (rarity over the
  conversation's own turns), its hits added with weight W below the shipped scores;
- ``names``: the same with the words the best K hits write capitalised inside a sentence;
- ``vector`` (``--embeddings``): a second vector query, the question's vector moved toward the
  mean of the best K hits' vectors by G, its cosines added with weight W.

A design's knobs are chosen on four conversations and the fifth is scored (bench_recall's
``choose``); the table prints those held-out figures, pooled, for all and multi-evidence
questions. Nothing here changes the product.

    python bench/sweeps/sweep_multi_evidence.py [--embeddings] [--data ../shared/data/locomo-dev.json]
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
from _locomo import DEFAULT_DATA, load_dev_split  # noqa: E402

POOL = 100
_WORD = re.compile(r"[^\W\d_]{3,}", re.UNICODE)


@dataclasses.dataclass
class Asked:
    """One question: its gold turns and the shipped order (store_id, score, text, session) best first."""

    memory: Any
    question: str
    gold: set[str]
    category: int
    hits: list[tuple[int, float, str, str]]
    second: dict[tuple[Any, ...], list[tuple[int, float]]] = dataclasses.field(default_factory=dict)


def ask_all(memories: list[Any]) -> list[Asked]:
    from hermes_trove.retrieval.recall_search import RecallRequest, recall

    out = []
    for m in memories:
        for question, gold, category in m.questions:
            result = recall(m.runtime, RecallRequest(query=question, limit=POOL))
            hits = [(h.item_id, h.score, h.row.content, h.session_id) for h in result.hits
                    if h.kind == "message" and h.row]
            out.append(Asked(m, question, gold, category, hits))
    return out


def body(text: str) -> str:
    """A stored turn without its "Speaker: " label."""
    head, sep, rest = text.partition(": ")
    return rest if sep and len(head) < 40 else text


def rare_words(asked: Asked, k: int, df: Counter[str], n: int) -> list[str]:
    own = {w.lower() for w in _WORD.findall(asked.question)}
    weight: Counter[str] = Counter()
    for rank, (_, _, text, _) in enumerate(asked.hits[:k]):
        for w in {w.lower() for w in _WORD.findall(body(text))} - own:
            weight[w] += 1.0 / (1 + rank)
    return [w for w, _ in sorted(weight.items(), key=lambda kv: -kv[1] * math.log(n / (1 + df[kv[0]])))]


def hit_names(asked: Asked, k: int) -> list[str]:
    own = {w.lower() for w in _WORD.findall(asked.question)}
    seen: Counter[str] = Counter()
    for rank, (_, _, text, _) in enumerate(asked.hits[:k]):
        for sentence in re.split(r"[.!?]\s+", body(text)):
            for w in _WORD.findall(sentence)[1:]:
                if w[:1].isupper() and w.lower() not in own:
                    seen[w.lower()] += 1.0 / (1 + rank)
    return [w for w, _ in seen.most_common()]


def second_text(asked_all: list[Asked], fts: Callable[[str], Any]) -> None:
    """The ``words`` and ``names`` second queries for every question (K seeds, M words)."""
    from hermes_trove.retrieval.query import build_match

    by_memory: dict[int, tuple[Counter[str], int]] = {}
    for a in asked_all:
        if id(a.memory) not in by_memory:
            texts = [body(r.content) for r in a.memory.runtime.store.get_many(sorted(a.memory.dia))]
            by_memory[id(a.memory)] = (Counter(w for t in texts for w in {x.lower() for x in _WORD.findall(t)}),
                                       len(texts))
        df, n = by_memory[id(a.memory)]
        for k in (3, 5, 10):
            for kind, words in (("words", rare_words(a, k, df, n)), ("names", hit_names(a, k))):
                for m in (3, 5, 8):
                    expression = build_match(" ".join(words[:m])).expression if words else ""
                    found = fts(a, expression) if expression else []
                    a.second[(kind, k, m)] = [(row.store_id, -float(rank)) for row, rank, _ in found]


def second_vectors(asked_all: list[Asked]) -> None:
    """The ``vector`` second query: the question's vector moved toward its best K hits' vectors."""
    import numpy as np

    from hermes_trove.retrieval import semantic
    from hermes_trove.retrieval.vector_index import index_for

    opened: dict[int, Any] = {}
    for a in asked_all:
        rt = a.memory.runtime
        if id(rt) not in opened:
            store = semantic.vector_store(rt)
            gen = semantic.searched_generation(store)
            index = index_for(rt.db.path, gen.generation_id, gen.dim)
            index.refresh(store)
            opened[id(rt)] = (store, gen, index, semantic.get_provider(semantic.spec_for(rt, gen)))
        store, gen, index, provider = opened[id(rt)]
        query = np.asarray(provider.embed([a.question])[0], np.float32)
        for k in (3, 5, 10):
            seeds = []
            for store_id, _, _, _ in a.hits[:k]:
                chunks = [np.frombuffer(v, np.int8).astype(np.float32) * s
                          for v, s in store.message_vectors(gen.generation_id, store_id)]
                if chunks:
                    seeds.append(np.mean(chunks, axis=0))
            if not seeds:
                continue
            centre = np.mean([v / np.linalg.norm(v) for v in seeds], axis=0)
            for g in (0.5, 1.0, 2.0):
                moved = query + g * centre / np.linalg.norm(centre)
                found = index.search(moved / np.linalg.norm(moved), kinds=("message",), limit=POOL)
                a.second[("vector", k, g)] = [(s.item_id, s.score) for s in found]


def with_second(a: Asked, key: tuple[Any, ...], weight: float) -> list[int]:
    """The shipped order with the second query's hits added: scores over the best one's, plus
    ``weight`` x the second query's min-max normalised score."""
    top = a.hits[0][1] if a.hits and a.hits[0][1] else 1.0
    score = {sid: s / top for sid, s, _, _ in a.hits}
    second = a.second.get(key, [])
    if second:
        hi, lo = second[0][1], second[-1][1]
        for sid, s in second:
            score[sid] = score.get(sid, 0.0) + weight * (s - lo) / ((hi - lo) or 1.0)
    return sorted(score, key=lambda sid: -score[sid])


def capped(a: Asked, cap: int) -> list[int]:
    counts: Counter[str] = Counter()
    head, tail = [], []
    for sid, _, _, session in a.hits:
        counts[session] += 1
        (head if counts[session] <= cap else tail).append(sid)
    return head + tail


def clustered(a: Asked, cap: int, radius: int) -> list[int]:
    head: list[tuple[int, str]] = []
    tail = []
    for sid, _, _, session in a.hits:
        near = sum(1 for h, s in head if s == session and abs(h - sid) <= radius)
        if near < cap:
            head.append((sid, session))
        else:
            tail.append(sid)
    return [sid for sid, _ in head] + tail


def tail_spread(a: Asked, keep: int, radius: int | None) -> list[int]:
    placed = [(sid, session) for sid, _, _, session in a.hits[:keep]]
    for sid, _, _, session in a.hits[keep:]:
        if len(placed) >= 10:
            break
        if not any(s == session and (radius is None or abs(h - sid) <= radius) for h, s in placed):
            placed.append((sid, session))
    first = {sid for sid, _ in placed}
    return [sid for sid, _ in placed] + [hit[0] for hit in a.hits if hit[0] not in first]


def hit_vectors(asked_all: list[Asked]) -> dict[tuple[int, int], Any]:
    """Each hit's vector (the mean of its chunks, unit length), keyed by (memory, store_id)."""
    import numpy as np

    from hermes_trove.retrieval import semantic

    out: dict[tuple[int, int], Any] = {}
    for a in asked_all:
        store = semantic.vector_store(a.memory.runtime)
        gen = semantic.searched_generation(store)
        for sid, _, _, _ in a.hits:
            if (id(a.memory), sid) not in out:
                chunks = [np.frombuffer(v, np.int8).astype(np.float32) * s
                          for v, s in store.message_vectors(gen.generation_id, sid)]
                if chunks:
                    v = np.mean(chunks, axis=0)
                    out[(id(a.memory), sid)] = v / np.linalg.norm(v)
    return out


def spread(a: Asked, vectors: dict[tuple[int, int], Any], weight: float, depth: int) -> list[int]:
    top = a.hits[0][1] if a.hits and a.hits[0][1] else 1.0
    left = [(sid, score / top, vectors.get((id(a.memory), sid))) for sid, score, _, _ in a.hits[:depth]]
    placed: list[tuple[int, Any]] = []
    while left:
        def value(c: tuple[int, float, Any]) -> float:
            close = max((float(c[2] @ v) for _, v in placed if v is not None and c[2] is not None), default=0.0)
            return c[1] - weight * close
        best = max(left, key=value)
        left.remove(best)
        placed.append((best[0], best[2]))
    return [sid for sid, _ in placed] + [hit[0] for hit in a.hits[depth:]]


def table(asked_all: list[Asked], order: Callable[[Asked], list[int]]) -> dict[str, Any]:
    from bench_recall import Score

    scores = {m: Score() for m in dict.fromkeys(a.memory.name for a in asked_all)}
    for a in asked_all:
        scores[a.memory.name].add([a.memory.dia.get(sid) for sid in order(a)], a.gold, a.category, 0.0)
    return scores


def asked_dev(args: argparse.Namespace, name: str, prefix: str) -> tuple[list[Any], list[Asked]] | None:
    """The dev split's memories (their vectors indexed with ``--embeddings``) and every question asked
    once through the shipped recall; None when the split is absent (``load_dev_split`` says so)."""
    data = load_dev_split(args.data, name)
    if data is None:
        return None
    from bench_recall import build_memory, index_vectors

    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    memories = [build_memory(s, tmp, {"embeddings_enabled": True} if args.embeddings else {}) for s in data]
    if args.embeddings:
        index_vectors(memories)
    return memories, ask_all(memories)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--embeddings", action="store_true", help="hybrid recall, and the vector second query")
    args = parser.parse_args()
    built = asked_dev(args, "sweep_multi_evidence", "trove-sweep-multi-")
    if built is None:
        return 0
    memories, asked_all = built
    from bench_recall import choose

    from hermes_trove.retrieval.recall_search import ARCHIVE_CANDIDATES

    second_text(asked_all, lambda a, expr: a.memory.runtime.store.search(
        expr, limit=POOL, snippets=False, max_candidates=ARCHIVE_CANDIDATES))
    designs: dict[str, list[tuple[dict[str, Any], Callable[[Asked], list[int]]]]] = {
        "shipped": [({}, lambda a: [hit[0] for hit in a.hits])],
        "cap": [({"cap": c}, lambda a, c=c: capped(a, c)) for c in (2, 3, 4)],
        "cluster": [({"cap": c, "turns": r}, lambda a, c=c, r=r: clustered(a, c, r))
                    for c in (2, 3, 4, 5) for r in (1, 2, 4, 8)],
        "tail": [({"keep": k, "turns": r}, lambda a, k=k, r=r: tail_spread(a, k, r))
                 for k in (3, 5, 7, 9) for r in (None, 1, 2, 4, 8)],
        "words": [], "names": []}
    for kind in ("words", "names"):
        designs[kind] = [({"seeds": k, "words": m, "weight": w},
                          lambda a, key=(kind, k, m), w=w: with_second(a, key, w))
                         for k in (3, 5, 10) for m in (3, 5, 8) for w in (0.1, 0.2, 0.3, 0.5)]
    if args.embeddings:
        vectors = hit_vectors(asked_all)
        designs["spread"] = [({"weight": w, "depth": d}, lambda a, w=w, d=d: spread(a, vectors, w, d))
                             for w in (0.05, 0.1, 0.2, 0.3, 0.5) for d in (20, 40)]
        second_vectors(asked_all)
        designs["vector"] = [({"seeds": k, "toward": g, "weight": w},
                              lambda a, key=("vector", k, g), w=w: with_second(a, key, w))
                             for k in (3, 5, 10) for g in (0.5, 1.0, 2.0) for w in (0.05, 0.1, 0.2, 0.4)]
    names = [m.name for m in memories]
    print(f"LoCoMo ({args.data.name}), {len(asked_all)} questions, recall "
          f"{'hybrid' if args.embeddings else 'full text'}; held-out R@10 (leave one conversation out):")
    for design, grid in designs.items():
        sweep = choose([(point, table(asked_all, order)) for point, order in grid], names)
        s = sweep["loo_pooled"]
        chosen = sorted({str(v["chosen"]) for v in sweep["loo"].values()})
        print(f"  {design:<8} R@10 {s['R@10']:.4f}  single {s['R@10_by_evidence']['single']['R@10']:.4f}  "
              f"multi {s['R@10_by_evidence']['multi']['R@10']:.4f}  chosen {'; '.join(chosen)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
