"""Re-ranking full-text hits: ``rerank`` refines a BM25 candidate pool by term coverage and
adjacent-turn context; ``adjacent_*`` score the turns beside the best hits that the pool lacks.
The MATCH grammar itself lives in the kernel (``fulltext``). Pure.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from ..fulltext import Match as Match
from ..fulltext import build_match as build_match
from ..fulltext import own_tool_echo as own_tool_echo

_SUFFIXES = ("ingly", "edly", "ing", "ies", "ied", "ed", "es", "ly", "s")


def rough_stem(term: str) -> str:
    """A crude prefix stem for containment checks: 'joined', 'joins' and 'joining' share 'join'."""
    core = term.rstrip("*").lower()
    for suffix in _SUFFIXES:
        if core.endswith(suffix) and len(core) - len(suffix) >= 3:
            core = core[: -len(suffix)]
            break
    return core[: len(core) - 1] if len(core) > 5 else core


@dataclass(frozen=True)
class Candidate:
    """One full-text hit to re-rank: ``score`` is higher-is-better (negated BM25)."""

    key: int
    group: str
    score: float
    text: str


# Re-ranking weights: fixed, documented defaults (not fitted to any benchmark's questions).
COVERAGE_WEIGHT = 0.5  # boost rows that contain more of the distinct query terms
NEIGHBOR_WEIGHT = 0.25  # share of the best adjacent hit's score (same session, next/previous row)


def rerank(candidates: list[Candidate], terms: tuple[str, ...], coverage_weight: float = COVERAGE_WEIGHT,
           neighbor_weight: float = NEIGHBOR_WEIGHT, pooled: bool = False) -> list[tuple[int, float]]:
    """Order BM25 candidates by term coverage and conversational context.

    BM25 over an OR query rewards one rare term repeated; a row that mentions more of the
    question's terms is usually the better answer. Turns adjacent to a strong hit share
    its topic (question and answer, tool call and result), so each row gains a fraction of
    its best neighbour's score. ``pooled`` weighs each term by its rarity among the candidates
    (``log(1 + n / (1 + df))``): a speaker's name that most of them hold tells them apart little,
    however rare the archive makes it. Returns ``(key, score)`` best first; ties keep input order.
    """
    stems = [s for s in dict.fromkeys(rough_stem(t) for t in terms) if s]
    has = [[s in c.text for s in stems] for c in candidates]
    idf = [math.log(1 + len(has) / (1 + sum(h[i] for h in has))) if pooled else 1.0 for i in range(len(stems))]
    total = sum(idf)
    scored: dict[int, float] = {}
    groups: dict[int, str] = {}
    for c, h in zip(candidates, has, strict=True):
        coverage = sum([w for w, x in zip(idf, h, strict=True) if x]) / total if stems else 0.0
        scored[c.key] = c.score * (1.0 + coverage_weight * coverage)
        groups[c.key] = c.group
    out = []
    for c in candidates:
        best = 0.0  # the best positive score of a neighbour in the same group, else nothing
        for k in (c.key - 1, c.key + 1):
            near = scored.get(k)
            if near is not None and near > best and groups[k] == c.group:
                best = near
        out.append((c.key, scored[c.key] + neighbor_weight * best))
    order = {c.key: i for i, c in enumerate(candidates)}
    return sorted(out, key=lambda kv: (-kv[1], order[kv[0]]))


def adjacent_ids(scores: Mapping[int, float], seeds: int) -> list[int]:
    """The ids one before and one after the ``seeds`` best of ``scores`` that ``scores`` lacks."""
    best = sorted(scores, key=lambda k: -scores[k])[:seeds]
    return sorted({k + d for k in best for d in (-1, 1)} - set(scores))


def adjacent_scores(scores: Mapping[int, float], groups: Mapping[int, str], found: Mapping[int, str],
                    share: float) -> dict[int, float]:
    """A score for each row of ``found`` (id -> group) beside a scored row of its own group (session):
    ``share`` of the best such neighbour's score. An answer often repeats none of the question's
    words while the turn it answers holds them, so the pool would miss it."""
    out: dict[int, float] = {}
    for key, group in found.items():
        near = [scores[k] for k in (key - 1, key + 1) if k in scores and groups.get(k) == group]
        if near and key not in scores:
            out[key] = share * max(near)
    return out
