"""Fusion and ordering, table by table: the arithmetic of ``retrieval.fusion`` (normalisation,
interpolation, RRF ties and weights, priors, context smoothing) and how trove_grep orders and
merges its lists through it (``search._order``, ``search._merge``)."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from hermes_trove.retrieval import fusion, search

APPROX = 1e-9


def close(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(math.isclose(a[k], b[k], abs_tol=APPROX) for k in a)


# -- normalisation ----------------------------------------------------------------------------

@pytest.mark.parametrize("scores, floor, expected", [
    ({}, None, {}),
    ({"a": 5.0}, None, {"a": 1.0}),                                  # one item: 1
    ({"a": 2.0, "b": 2.0}, None, {"a": 1.0, "b": 1.0}),              # all equal: 1
    ({"a": 1.0, "b": 3.0}, None, {"a": 0.0, "b": 1.0}),
    ({"a": 1.0, "b": 2.0, "c": 3.0}, None, {"a": 0.0, "b": 0.5, "c": 1.0}),
    ({"a": -4.0, "b": 0.0, "c": 4.0}, None, {"a": 0.0, "b": 0.5, "c": 1.0}),  # negative scores
    ({"a": 9.0, "b": 10.0}, 0.0, {"a": 0.9, "b": 1.0}),              # a floor keeps the magnitude
    ({"a": 5.0}, 0.0, {"a": 1.0}),
    ({"a": 2.0, "b": 4.0}, 3.0, {"a": 0.0, "b": 1.0}),               # a floor above the minimum: the minimum
    ({"a": 0.0, "b": 0.0}, 0.0, {"a": 1.0, "b": 1.0}),
])
def test_minmax_table(scores, floor, expected):
    assert close(fusion.minmax(scores, floor), expected)


@pytest.mark.parametrize("scores, expected", [
    ({}, {}),
    ({"a": 3.0}, {"a": 1.0}),
    ({"a": 1.0, "b": 1.0, "c": 1.0}, {"a": 1.0, "b": 1.0, "c": 1.0}),
    ({"a": 0.0, "b": 2.0}, {"a": 0.0, "b": 2.0}),                    # stdev 1: distances from the minimum
    ({"a": 10.0, "b": 14.0}, {"a": 0.0, "b": 2.0}),                  # shift-invariant
    ({"a": 0.0, "b": 20.0}, {"a": 0.0, "b": 2.0}),                   # scale-invariant
])
def test_zscore_table(scores, expected):
    assert close(fusion.zscore(scores), expected)


@pytest.mark.parametrize("scale, shift", [(1.0, 0.0), (3.0, 0.0), (1.0, 100.0), (0.01, -5.0)])
def test_both_normalisations_ignore_an_arms_own_scale_and_offset(scale, shift):
    base = {"a": 1.0, "b": 2.5, "c": 7.0, "d": 7.5}
    moved = {k: v * scale + shift for k, v in base.items()}
    assert close(fusion.minmax(moved), fusion.minmax(base))
    assert close(fusion.zscore(moved), fusion.zscore(base))


# -- interpolation ----------------------------------------------------------------------------

ARMS = {"fts": {"x": 4.0, "y": 2.0, "z": 0.0}, "semantic": {"y": 0.9, "w": 0.5, "z": 0.1}}


@pytest.mark.parametrize("weights, expected_order", [
    ({"fts": 1.0, "semantic": 0.0}, ["x", "y", "z"]),          # one arm: its own order, missing items gone
    ({"fts": 0.0, "semantic": 1.0}, ["y", "w", "z"]),
    ({"fts": 0.5, "semantic": 0.5}, ["y", "x", "w", "z"]),     # y is strong in both arms
    ({"fts": 0.9, "semantic": 0.1}, ["x", "y", "w", "z"]),     # z scores 0 in both
    ({"fts": 0.1, "semantic": 0.9}, ["y", "w", "x", "z"]),
])
def test_interpolate_weights_move_items_between_the_arms_orders(weights, expected_order):
    fused = fusion.interpolate(ARMS, weights, floors={"fts": 0.0, "semantic": None})
    assert fusion.ranked(fused) == expected_order


@pytest.mark.parametrize("weights", [{}, {"fts": 0.0}, {"fts": -1.0, "semantic": 0.0}, {"other": 1.0}])
def test_interpolate_without_a_positive_weight_returns_nothing(weights):
    assert fusion.interpolate(ARMS, weights) == {}


@pytest.mark.parametrize("w", [0.1, 1.0, 7.0])
def test_interpolate_weights_are_relative(w):
    a = fusion.interpolate(ARMS, {"fts": 1.0, "semantic": 1.0})
    b = fusion.interpolate(ARMS, {"fts": w, "semantic": w})
    assert close(a, b)


def test_interpolate_scores_lie_in_the_unit_range_with_minmax():
    fused = fusion.interpolate(ARMS, {"fts": 0.3, "semantic": 0.7})
    assert all(0.0 <= v <= 1.0 for v in fused.values())
    assert set(fused) == {"x", "y", "z", "w"}  # the union of the arms


def test_an_item_missing_from_an_arm_scores_zero_there():
    fused = fusion.interpolate({"a": {"p": 1.0, "q": 0.0}, "b": {"r": 1.0}}, {"a": 1.0, "b": 1.0})
    assert close(fused, {"p": 0.5, "q": 0.0, "r": 0.5})


# -- reciprocal rank fusion ---------------------------------------------------------------------

@pytest.mark.parametrize("arms, weights, expected", [
    ({}, {}, {}),
    ({"a": []}, {"a": 1.0}, {}),                                               # an empty arm
    ({"a": ["x"]}, {"a": 1.0}, {"x": 1 / 61}),
    ({"a": ["x", "y"]}, {"a": 1.0}, {"x": 1 / 61, "y": 1 / 62}),
    ({"a": ["x"], "b": ["x"]}, {"a": 1.0, "b": 1.0}, {"x": 2 / 61}),          # found twice: summed
    ({"a": ["x", "y"], "b": ["y", "x"]}, {"a": 1.0, "b": 1.0}, {"x": 1 / 61 + 1 / 62, "y": 1 / 62 + 1 / 61}),
    ({"a": ["x"], "b": ["y"]}, {"a": 2.0, "b": 1.0}, {"x": 2 / 61, "y": 1 / 61}),  # weights scale
    ({"a": ["x"], "b": ["y"]}, {"a": 1.0}, {"x": 1 / 61}),                     # an unweighted arm is skipped
    ({"a": ["x"], "b": ["y"]}, {"a": 1.0, "b": -1.0}, {"x": 1 / 61}),
])
def test_rrf_table(arms, weights, expected):
    assert close(fusion.rrf(arms, weights), expected)


@pytest.mark.parametrize("k", [1, 10, 60, 1000])
def test_rrf_k_sets_how_fast_rank_credit_falls(k):
    out = fusion.rrf({"a": ["x", "y"]}, {"a": 1.0}, k=k)
    assert math.isclose(out["x"], 1 / (k + 1)) and math.isclose(out["y"], 1 / (k + 2))


def test_one_rrf_constant_serves_recall_and_grep():
    assert fusion.RRF_K == 60
    assert not hasattr(search, "RRF_K")


@pytest.mark.parametrize("scores, expected", [
    ({}, []),
    ({"a": 1.0, "b": 2.0}, ["b", "a"]),
    ({"a": 1.0, "b": 1.0, "c": 1.0}, ["a", "b", "c"]),          # ties keep insertion order
    ({"c": 1.0, "a": 1.0, "b": 2.0}, ["b", "c", "a"]),
    ({"a": -1.0, "b": 0.0}, ["b", "a"]),
])
def test_ranked_is_best_first_with_stable_ties(scores, expected):
    assert fusion.ranked(scores) == expected


@pytest.mark.parametrize("method", fusion.FUSIONS)
def test_every_fusion_method_keeps_a_single_arm_in_its_order(method):
    arm = {"x": 9.0, "y": 4.0, "z": 1.0}
    assert fusion.ranked(fusion.fuse({"fts": arm}, {"fts": 1.0}, method)) == ["x", "y", "z"]


@pytest.mark.parametrize("method", fusion.FUSIONS)
def test_every_fusion_method_ranks_an_item_both_arms_found_first(method):
    arms = {"fts": {"both": 5.0, "fts_only": 6.0, "low": 0.5}, "semantic": {"both": 0.8, "sem_only": 0.9, "low": 0.1}}
    fused = fusion.fuse(arms, {"fts": 1.0, "semantic": 1.0}, method)
    assert fusion.ranked(fused)[0] == "both"
    assert set(fused) == {"both", "fts_only", "sem_only", "low"}


@pytest.mark.parametrize("method", ["", "RRF", "borda", None])
def test_an_unknown_fusion_method_is_refused(method):
    with pytest.raises(ValueError, match="unknown fusion"):
        fusion.fuse({"a": {"x": 1.0}}, {"a": 1.0}, method)  # type: ignore[arg-type]


# -- priors -----------------------------------------------------------------------------------

DAY = 86400.0


@pytest.mark.parametrize("age, half_life, floor, expected", [
    (0.0, DAY, 0.5, 1.0),
    (DAY, DAY, 0.5, 0.75),
    (2 * DAY, DAY, 0.5, 0.625),
    (DAY, DAY, 0.0, 0.5),
    (1e12, DAY, 0.2, 0.2),              # very old: the floor
    (-DAY, DAY, 0.5, 1.0),              # a future timestamp counts as age 0
    (5 * DAY, 0.0, 0.5, 1.0),           # half-life 0: off
    (DAY, DAY, 1.0, 1.0),               # floor 1: no decay
    (DAY, DAY, 2.0, 1.0),               # the floor is clamped into [0, 1]
    (DAY, DAY, -1.0, 0.5),
])
def test_recency_factor_table(age, half_life, floor, expected):
    assert math.isclose(fusion.recency_factor(age, half_life, floor), expected)


@pytest.mark.parametrize("bias, in_scope, expected", [
    (0.5, True, 1.5), (0.5, False, 1.0), (0.0, True, 1.0), (1.0, True, 2.0), (3.0, True, 2.0), (-1.0, True, 1.0),
])
def test_scope_factor_table(bias, in_scope, expected):
    assert fusion.scope_factor(bias, in_scope) == expected


# -- context smoothing ------------------------------------------------------------------------

@pytest.mark.parametrize("scores, groups, radius, weight, expected_order", [
    ({}, {}, 8, 0.5, []),
    ({1: 1.0, 2: 1.0}, {1: "s", 2: "s"}, 8, 0.0, [1, 2]),                       # weight 0: unchanged
    ({10: 1.0, 50: 1.0, 11: 0.5, 12: 0.5}, {10: "a", 50: "a", 11: "a", 12: "a"}, 2, 0.5, [10, 50, 11, 12]),
    ({10: 1.0, 50: 1.0, 51: 0.9}, {10: "a", 50: "a", 51: "a"}, 2, 0.5, [50, 51, 10]),  # 50 has a neighbour
    ({10: 1.0, 50: 1.0, 51: 0.9}, {10: "a", 50: "a", 51: "b"}, 2, 0.5, [10, 50, 51]),  # another session
    ({10: 1.0, 50: 1.0, 51: 0.9}, {10: "a", 50: "a", 51: "a"}, -1, 0.5, [10, 50, 51]),  # radius < 0: off
])
def test_context_smoothing_table(scores, groups, radius, weight, expected_order):
    assert fusion.ranked(fusion.context_smoothing(scores, groups, radius, weight)) == expected_order


def test_context_smoothing_with_weight_zero_max_normalises():
    assert close(fusion.context_smoothing({1: 2.0, 2: 1.0}, {}, 4, 0.0), {1: 1.0, 2: 0.5})


def test_context_smoothing_of_an_all_zero_pool_is_defined():
    out = fusion.context_smoothing({1: 0.0, 2: 0.0}, {1: "s", 2: "s"}, 3, 0.5)
    assert set(out) == {1, 2} and all(math.isfinite(v) for v in out.values())


# -- trove_grep's order and merge -------------------------------------------------------------

CFG = SimpleNamespace(recall_recency_half_life_days=30.0, recall_recency_floor=0.5)
NOW = 1_800_000_000.0


def hit(name, score=1.0, at=NOW, kind="message"):
    return search._Hit(kind, name, score, at)


def names(hits):
    return [h.item for h in hits]


@pytest.mark.parametrize("sort, hits, expected", [
    ("relevance", [hit("a", 1.0, NOW - 10), hit("b", 5.0, NOW)], ["a", "b"]),    # ranked order stands
    ("recency", [hit("a", 9.0, NOW - 10), hit("b", 1.0, NOW)], ["b", "a"]),
    ("recency", [hit("a", at=5.0), hit("b", at=5.0)], ["a", "b"]),               # equal times: stable
    ("recent_relevance", [hit("old", 1.0, NOW - 300 * DAY), hit("new", 0.9, NOW)], ["new", "old"]),
    ("recent_relevance", [hit("old", 5.0, NOW - 300 * DAY), hit("new", 1.0, NOW)], ["old", "new"]),
    ("recent_relevance", [hit("a", 1.0, NOW), hit("b", 1.0, NOW)], ["a", "b"]),
    ("recent_relevance", [], []),
])
def test_grep_orders_one_list_by_its_sort(sort, hits, expected):
    assert names(search._order(hits, sort, CFG, NOW)) == expected


def test_recent_relevance_uses_recalls_recency_prior():
    old = hit("old", 1.0, NOW - 30 * DAY)
    new = hit("new", 0.74, NOW)  # 30 days at half-life 30, floor 0.5: factor 0.75
    assert names(search._order([old, new], "recent_relevance", CFG, NOW)) == ["old", "new"]
    new = hit("new", 0.76, NOW)
    assert names(search._order([old, new], "recent_relevance", CFG, NOW)) == ["new", "old"]
    off = SimpleNamespace(recall_recency_half_life_days=0.0, recall_recency_floor=0.5)
    assert names(search._order([hit("a", 1.0, 0.0), hit("b", 2.0, NOW)], "recent_relevance", off, NOW)) == ["b", "a"]


def rrf_reference(lists):
    """The interleaving trove_grep used before it fused through ``fusion``: (-1/(60+pos+1), list, pos)."""
    scored = [(1.0 / (60 + pos + 1), n, pos, h) for n, lst in enumerate(lists) for pos, h in enumerate(lst)]
    scored.sort(key=lambda t: (-t[0], t[1], t[2]))
    return [t[3].item for t in scored]


@pytest.mark.parametrize("sizes", [(1, 1), (3, 0), (0, 3), (3, 2), (2, 5), (4, 4, 1), (10, 1, 3), (0, 0)])
def test_grep_merge_interleaves_lists_by_reciprocal_rank_as_before(sizes):
    lists = [[hit(f"{n}:{i}", kind=("message", "summary", "external")[n]) for i in range(size)]
             for n, size in enumerate(sizes)]
    merged = names(search._merge(lists, "relevance"))
    assert merged == rrf_reference([lst for lst in lists if lst])
    assert sorted(merged) == sorted(h.item for lst in lists for h in lst)  # nothing lost, nothing doubled


def test_grep_merge_puts_the_first_lists_hit_first_on_equal_rank():
    merged = names(search._merge([[hit("raw0"), hit("raw1")], [hit("node0", kind="summary")]], "relevance"))
    assert merged == ["raw0", "node0", "raw1"]


def test_grep_merge_by_recency_sorts_across_lists():
    lists = [[hit("raw_old", at=1.0), hit("raw_new", at=9.0)], [hit("node_mid", at=5.0, kind="summary")]]
    assert names(search._merge(lists, "recency")) == ["raw_new", "node_mid", "raw_old"]


@pytest.mark.parametrize("sort", search.SORTS)
def test_grep_merge_of_one_list_returns_it_unchanged(sort):
    one = [hit("b", at=1.0), hit("a", at=2.0)]
    assert search._merge([one, []], sort) == one
    assert search._merge([], sort) == []


def test_sort_names_and_the_deprecated_alias():
    assert search.SORTS == ("relevance", "recency", "recent_relevance")
    assert search.SORT_ALIASES == {"hybrid": "recent_relevance"}
    assert "hybrid" in search.MODES  # hybrid search is a mode, not a sort


def test_grep_hybrid_mode_interpolates_by_kind_and_keeps_full_text_snippets():
    fts = [search._Hit("message", SimpleNamespace(store_id=1), 8.0, 1.0, "fts snippet"),
           search._Hit("message", SimpleNamespace(store_id=2), 2.0, 2.0)]
    vec = [search._Hit("message", SimpleNamespace(store_id=3), 0.9, 3.0),
           search._Hit("message", SimpleNamespace(store_id=2), 0.8, 2.0)]
    out = search._interpolate(fts, vec)  # fts: 1 -> 1.0, 2 -> 0.25; vectors: 3 -> 1.0, 2 -> 0.0
    assert [h.item.store_id for h in out] == [1, 3, 2]
    assert [round(h.score, 6) for h in out] == [0.6, 0.4, 0.15]
    assert [h.snippet for h in out if h.item.store_id == 1] == ["fts snippet"]
    assert all(0.0 <= h.score <= 1.0 for h in out)
    assert search._interpolate([], []) == []
    only_vec = search._interpolate([], vec)
    assert [h.item.store_id for h in only_vec] == [3, 2]
