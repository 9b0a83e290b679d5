"""Pure score fusion for retrieval arms: normalisation, weighted interpolation, RRF, priors.

An *arm* (full text over raw rows or summaries, vectors) maps item keys to higher-is-better
scores on its own scale, so each arm is normalised (z-score by default, which one outlying top
score cannot squash, or min-max) and the arms are combined by weight; both beat reciprocal-rank
fusion with a small embedder on the LoCoMo dev split, and RRF stays for comparison.
"""
from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)

FUSIONS = ("zscore", "interpolate", "rrf")
RRF_K = 60


def minmax(scores: Mapping[K, float], floor: float | None = None) -> dict[K, float]:
    """Scores scaled to [0, 1]: ``(s - lo) / (hi - lo)``.

    ``lo`` is the smallest score unless ``floor`` is given (full-text arms pass 0, the score
    of a row the query does not match, so a pool of near-equal hits keeps its magnitude).
    A pool whose scores are all equal maps every item to 1.
    """
    if not scores:
        return {}
    hi = max(scores.values())
    lo = min(scores.values()) if floor is None else min(floor, min(scores.values()))
    span = hi - lo
    if span <= 0:
        return {k: 1.0 for k in scores}
    return {k: (v - lo) / span for k, v in scores.items()}


def zscore(scores: Mapping[K, float]) -> dict[K, float]:
    """Scores in standard deviations above the pool's lowest: ``(s - min) / stdev``.

    The lowest item of the pool scores 0, as an item the arm missed does. A pool of one item,
    or of equal scores, maps every item to 1.
    """
    if not scores:
        return {}
    values = list(scores.values())
    n = len(values)
    mean = sum(values) / n
    sd = (sum((v - mean) ** 2 for v in values) / n) ** 0.5
    if n < 2 or sd <= 0:
        return {k: 1.0 for k in scores}
    lo = min(values)
    return {k: (v - lo) / sd for k, v in scores.items()}


def interpolate(arms: Mapping[str, Mapping[K, float]], weights: Mapping[str, float],
                floors: Mapping[str, float | None] | None = None, normalise: str = "minmax") -> dict[K, float]:
    """Weighted mean of normalised arm scores; an item an arm missed gets 0 there.

    ``normalise`` is ``minmax`` (each arm to [0, 1]; ``floors`` per arm) or ``zscore``.
    Weights are relative: they are divided by the sum of the weights of the arms given, so
    one arm alone keeps its own normalised order whatever its weight.
    """
    floors = floors or {}
    used = {name: float(weights.get(name, 0.0)) for name in arms if float(weights.get(name, 0.0)) > 0}
    total = sum(used.values())
    out: dict[K, float] = {}
    if total <= 0:
        return out
    for name, w in used.items():
        scaled = zscore(arms[name]) if normalise == "zscore" else minmax(arms[name], floors.get(name))
        for key, value in scaled.items():
            out[key] = out.get(key, 0.0) + value * w / total
    return out


def rrf(arms: Mapping[str, Sequence[K]], weights: Mapping[str, float], k: int = RRF_K) -> dict[K, float]:
    """Weighted reciprocal-rank fusion ``sum(w / (k + rank))`` over ranked lists (ranks from 1)."""
    out: dict[K, float] = {}
    for name, ranked in arms.items():
        w = float(weights.get(name, 0.0))
        if w <= 0:
            continue
        for rank, key in enumerate(ranked, 1):
            out[key] = out.get(key, 0.0) + w / (k + rank)
    return out


def ranked(scores: Mapping[K, float]) -> list[K]:
    """Keys best first; ties keep insertion order."""
    order = {key: i for i, key in enumerate(scores)}
    return sorted(scores, key=lambda key: (-scores[key], order[key]))


def fuse(arms: Mapping[str, Mapping[K, float]], weights: Mapping[str, float], method: str = "zscore",
         floors: Mapping[str, float | None] | None = None) -> dict[K, float]:
    """One fused score per item by ``method``: ``zscore`` or ``interpolate`` (min-max), weighted
    means of normalised scores, or ``rrf``."""
    if method == "rrf":
        return rrf({name: ranked(scores) for name, scores in arms.items()}, weights)
    if method not in FUSIONS:
        raise ValueError(f"unknown fusion {method!r}; expected one of {', '.join(FUSIONS)}")
    return interpolate(arms, weights, floors, "zscore" if method == "zscore" else "minmax")


def context_smoothing(scores: Mapping[int, float], groups: Mapping[int, str], radius: int,
                      weight: float) -> dict[int, float]:
    """Scores raised by the strength of their conversational neighbourhood.

    Relevant turns cluster: the turns around an answer share its topic even when they share
    few of the question's words. Each item keeps its max-normalised score and gains ``weight``
    times the (max-normalised) sum of the normalised scores of the pool items of the same
    group (session) within ``radius`` positions (store ids), itself included. ``weight`` 0
    returns the max-normalised scores unchanged in order.
    """
    if not scores:
        return {}
    top = max(scores.values())
    norm = {k: (v / top if top > 0 else 1.0) for k, v in scores.items()}
    if weight <= 0 or radius < 0:
        return norm
    by_group: dict[str, list[int]] = {}
    for key in norm:
        by_group.setdefault(groups.get(key, ""), []).append(key)
    context: dict[int, float] = {}
    for keys in by_group.values():
        keys.sort()
        lo = hi = 0
        window = 0.0
        for key in keys:  # sliding window over sorted positions: O(n log n) overall
            while hi < len(keys) and keys[hi] <= key + radius:
                window += norm[keys[hi]]
                hi += 1
            while keys[lo] < key - radius:
                window -= norm[keys[lo]]
                lo += 1
            context[key] = window
    peak = max(context.values()) or 1.0
    return {k: norm[k] + weight * context[k] / peak for k in norm}


def recency_factor(age_s: float, half_life_s: float, floor: float) -> float:
    """A multiplier in ``[floor, 1]`` halving its distance to ``floor`` every ``half_life_s``.

    Future timestamps count as age 0; a half-life of 0 turns the prior off (factor 1).
    """
    if half_life_s <= 0:
        return 1.0
    floor = min(1.0, max(0.0, floor))
    return floor + (1.0 - floor) * 0.5 ** (max(0.0, age_s) / half_life_s)


def scope_factor(bias: float, in_scope: bool) -> float:
    """The soft current-conversation boost: ``1 + bias`` inside, 1 elsewhere."""
    return 1.0 + max(0.0, min(1.0, bias)) if in_scope else 1.0
