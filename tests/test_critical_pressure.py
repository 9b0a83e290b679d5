"""TROVE_CRITICAL_BUDGET_PRESSURE_RATIO: at or above that share of the window, compaction catches up
deferred work (bounded extra leaf passes past "already fits", partial condensation groups)."""
from __future__ import annotations

from conftest import assistant, make_config, make_engine, user
from test_compaction import fake_model

from hermes_trove.compaction.compactor import CATCHUP_LEAVES
from hermes_trove.runtime import build_runtime


def compact_once(tmp_path, ratio: float, current_tokens: int | None = None) -> tuple[dict, dict]:
    rt = build_runtime(make_config(tmp_path, leaf_chunk_tokens=1500, fresh_tail_count=4,
                                   critical_budget_pressure_ratio=ratio))
    eng = make_engine(rt, fake_model(), context_length=64000)
    msgs = [user(f"question {i} " + "word " * 400) if i % 2 == 0 else assistant(f"answer {i} " + "text " * 400)
            for i in range(60)]
    eng.ingest(msgs)
    eng.compress(msgs, current_tokens=eng.threshold_tokens + 1 if current_tokens is None else current_tokens)
    return dict(eng.state.last_result), rt.dag.depth_stats("s1")


def test_critical_pressure_catches_up_deferred_leaves_and_condenses_partial_groups(tmp_path):
    polite, polite_depths = compact_once(tmp_path / "off", 0.0)
    critical, critical_depths = compact_once(tmp_path / "on", 0.3)  # 22 401 of 64 000 tokens is over 0.3
    assert polite["critical_pressure"] is False and polite["catchup_leaf_passes"] == 0
    assert critical["critical_pressure"] is True and critical["catchup_leaf_passes"] == CATCHUP_LEAVES
    assert critical["leaf_passes"] == polite["leaf_passes"] + CATCHUP_LEAVES
    assert critical["condensation_passes"] > polite["condensation_passes"]
    assert max(critical_depths) > max(polite_depths)
    assert critical["tokens_after"] < polite["tokens_after"]


def test_below_the_ratio_the_polite_gates_stay(tmp_path):
    below, _ = compact_once(tmp_path / "below", 0.9)
    off, _ = compact_once(tmp_path / "off", 0.0)
    assert below["critical_pressure"] is False
    assert (below["leaf_passes"], below["condensation_passes"]) == (off["leaf_passes"], off["condensation_passes"])


def test_pressure_falls_back_to_the_transcript_when_the_host_sends_no_token_count(tmp_path):
    result, _ = compact_once(tmp_path, 0.3, current_tokens=0)
    assert result["critical_pressure"] is True  # 30 000 transcript tokens >= 0.3 x 64 000
