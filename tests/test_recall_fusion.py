from __future__ import annotations

import pytest

from hermes_trove.retrieval import fusion


def test_minmax_scales_to_unit_range_and_equal_scores_to_one():
    assert fusion.minmax({"a": 2.0, "b": 4.0, "c": 3.0}) == {"a": 0.0, "b": 1.0, "c": 0.5}
    assert fusion.minmax({"a": 5.0, "b": 5.0}) == {"a": 1.0, "b": 1.0}
    assert fusion.minmax({}) == {}


def test_minmax_with_a_floor_keeps_magnitude_of_a_near_equal_pool():
    out = fusion.minmax({"a": 9.0, "b": 10.0}, floor=0.0)
    assert out == {"a": 0.9, "b": 1.0}


def test_interpolate_is_a_weighted_mean_and_missing_items_score_zero_in_that_arm():
    arms = {"fts": {"x": 10.0, "y": 0.0}, "semantic": {"y": 0.9, "z": 0.1}}
    out = fusion.interpolate(arms, {"fts": 1.0, "semantic": 1.0})
    assert out["x"] == pytest.approx(0.5)   # top of fts, absent from semantic
    assert out["y"] == pytest.approx(0.5)   # bottom of fts, top of semantic
    assert out["z"] == pytest.approx(0.0)
    heavier = fusion.interpolate(arms, {"fts": 3.0, "semantic": 1.0})
    assert heavier["x"] == pytest.approx(0.75) and heavier["y"] == pytest.approx(0.25)


def test_interpolate_ignores_zero_weight_arms_and_one_arm_keeps_its_order():
    arms = {"fts": {"a": 1.0, "b": 3.0}, "semantic": {"c": 1.0}}
    out = fusion.interpolate(arms, {"fts": 0.3, "semantic": 0.0})
    assert "c" not in out and fusion.ranked(out) == ["b", "a"]


def test_zscore_measures_standard_deviations_above_the_pool_minimum():
    out = fusion.zscore({"a": 1.0, "b": 2.0, "c": 3.0})
    sd = (2 / 3) ** 0.5
    assert out == pytest.approx({"a": 0.0, "b": 1 / sd, "c": 2 / sd})
    assert fusion.zscore({"a": 7.0}) == {"a": 1.0} and fusion.zscore({"a": 2.0, "b": 2.0}) == {"a": 1.0, "b": 1.0}
    assert fusion.zscore({}) == {}
    # one outlying top score does not squash the rest of the pool, as min-max does
    pool = {i: float(i % 10) for i in range(100)} | {"top": 1000.0}
    assert fusion.minmax(pool)[9] < 0.01 < fusion.zscore(pool)[9]


def test_zscore_fusion_weights_arms_in_their_own_standard_deviations():
    arms = {"fts": {"x": 10.0, "y": 0.0}, "semantic": {"y": 0.9, "z": 0.1}}
    out = fusion.fuse(arms, {"fts": 1.0, "semantic": 1.0}, "zscore")
    assert out["x"] == pytest.approx(1.0) and out["y"] == pytest.approx(1.0) and out["z"] == pytest.approx(0.0)
    heavier = fusion.fuse(arms, {"fts": 1.0, "semantic": 3.0}, "zscore")
    assert fusion.ranked(heavier)[0] == "y"


def test_rrf_sums_weighted_reciprocal_ranks():
    out = fusion.rrf({"a": ["x", "y"], "b": ["y"]}, {"a": 1.0, "b": 2.0}, k=60)
    assert out["x"] == pytest.approx(1 / 61)
    assert out["y"] == pytest.approx(1 / 62 + 2 / 61)


def test_fuse_dispatches_by_method_and_refuses_unknown_methods():
    arms = {"a": {"x": 2.0, "y": 1.0}}
    assert fusion.ranked(fusion.fuse(arms, {"a": 1.0}, "rrf")) == ["x", "y"]
    assert fusion.ranked(fusion.fuse(arms, {"a": 1.0}, "interpolate")) == ["x", "y"]
    assert fusion.ranked(fusion.fuse(arms, {"a": 1.0}, "zscore")) == ["x", "y"]
    assert fusion.ranked(fusion.fuse(arms, {"a": 1.0})) == ["x", "y"]  # zscore is the default
    with pytest.raises(ValueError):
        fusion.fuse(arms, {"a": 1.0}, "borda")


def test_recency_factor_halves_towards_the_floor_and_can_be_off():
    day = 86400.0
    assert fusion.recency_factor(0, 30 * day, 0.5) == pytest.approx(1.0)
    assert fusion.recency_factor(30 * day, 30 * day, 0.5) == pytest.approx(0.75)
    assert fusion.recency_factor(3000 * day, 30 * day, 0.5) == pytest.approx(0.5)
    assert fusion.recency_factor(-5 * day, 30 * day, 0.5) == pytest.approx(1.0)
    assert fusion.recency_factor(99 * day, 0, 0.5) == 1.0


def test_scope_factor_is_clamped_and_only_applies_inside_scope():
    assert fusion.scope_factor(0.5, True) == 1.5
    assert fusion.scope_factor(0.5, False) == 1.0
    assert fusion.scope_factor(7.0, True) == 2.0


def test_context_smoothing_lifts_a_hit_whose_session_neighbours_also_match():
    # 10 and 50 score the same; 10 sits among other matching turns of its session
    scores = {10: 1.0, 11: 0.5, 12: 0.5, 50: 1.0, 90: 0.5}
    groups = {10: "s", 11: "s", 12: "s", 50: "t", 90: "s"}
    out = fusion.context_smoothing(scores, groups, radius=4, weight=0.4)
    assert out[10] > out[50]
    assert out[90] < out[11]  # far from the cluster: no lift from it
    plain = fusion.context_smoothing(scores, groups, radius=4, weight=0.0)
    assert plain == {k: v / 1.0 for k, v in scores.items()}


def test_context_smoothing_does_not_mix_sessions():
    scores = {10: 1.0, 11: 1.0, 12: 1.0}
    out = fusion.context_smoothing(scores, {10: "a", 11: "b", 12: "c"}, radius=5, weight=1.0)
    assert out[10] == out[11] == out[12]
