"""The summarizer on its own: the escalation ladder, routes, circuit breakers, truncation."""
from __future__ import annotations

import pytest
from conftest import make_config

from hermes_trove import tokens
from hermes_trove.compaction.summarize import (
    BREAKERS,
    MIN_MODEL_INPUT_TOKENS,
    TRUNCATION_MARKER,
    Summarizer,
    expand_hint,
    truncate_deterministic,
)
from hermes_trove.models import clean_output, host_complete

RECORD = "\n".join(f"[USER]: step {i}: ran make test in src/pkg_{i}, saw error E{i} and fixed it" for i in range(120))


class Model:
    """A fake completion function: answers from a script, one entry per call, and records calls."""

    def __init__(self, *answers: str | Exception):
        self.answers = list(answers)
        self.calls: list[dict] = []

    def __call__(self, messages, model, timeout_s, max_tokens):
        self.calls.append({"prompt": messages[0]["content"], "model": model, "timeout_s": timeout_s,
                           "max_tokens": max_tokens})
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


class Clock:
    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def cfg(tmp_path):
    return make_config(tmp_path, summary_circuit_breaker_failure_threshold=100)


class TestLadder:
    def test_a_good_answer_is_accepted_at_the_normal_level(self, cfg):
        model = Model("Fixed errors E0-E119.\nExpand for details about: make test runs")
        res = Summarizer(cfg, model).summarize(RECORD, 0, 400)
        assert (res.level, res.model, res.calls) == ("normal", "auxiliary", 1)
        assert res.text.startswith("Fixed errors") and res.tokens == tokens.count(res.text)
        assert res.input_tokens == tokens.count(model.calls[0]["prompt"])
        assert res.errors == ()

    def test_the_model_gets_the_record_the_budget_and_the_timeout(self, cfg):
        model = Model("short")
        Summarizer(cfg, model).summarize(RECORD, 0, 400, focus="error E7", extra="memory says: E7 matters")
        call = model.calls[0]
        assert "<record>\n" + RECORD + "\n</record>" in call["prompt"]
        assert "about 400 tokens" in call["prompt"] and call["max_tokens"] == 800
        assert "error E7" in call["prompt"] and "memory says: E7 matters" in call["prompt"]
        assert call["timeout_s"] == cfg.summary_timeout_ms / 1000.0

    def test_a_failed_normal_level_escalates_to_aggressive_bullets(self, cfg):
        model = Model(TimeoutError("slow"), "- fixed E0-E119")
        res = Summarizer(cfg, model).summarize(RECORD, 0, 400)
        assert res.level == "aggressive" and res.text == "- fixed E0-E119" and res.calls == 2
        assert "terse bullet points" in model.calls[1]["prompt"]
        assert model.calls[1]["max_tokens"] == 2 * int(400 * cfg.l2_budget_ratio)
        assert len(res.errors) == 1 and "normal: TimeoutError: slow" in res.errors[0]

    def test_an_answer_not_smaller_than_its_input_is_rejected(self, cfg):
        res = Summarizer(cfg, Model(RECORD + RECORD)).summarize(RECORD, 0, 400)
        assert res.level == "deterministic" and res.calls == 2
        assert all("not smaller than its input" in e for e in res.errors)

    def test_reasoning_only_answers_are_rejected(self, cfg):
        res = Summarizer(cfg, Model("<think>I should summarise</think>")).summarize(RECORD, 0, 400)
        assert res.level == "deterministic"
        assert all("reasoning-only" in e for e in res.errors)

    def test_every_level_failing_ends_in_a_smaller_deterministic_truncation(self, cfg):
        res = Summarizer(cfg, Model(RuntimeError("down"))).summarize(RECORD, 0, 400)
        assert (res.level, res.model, res.calls) == ("deterministic", "", 2)
        assert TRUNCATION_MARKER.strip() in res.text
        assert res.tokens < tokens.count(RECORD) and res.tokens <= 400

    def test_without_a_model_the_ladder_truncates_and_calls_nothing(self, cfg):
        res = Summarizer(cfg, None).summarize(RECORD, 0, 400)
        assert (res.level, res.calls, res.input_tokens) == ("deterministic", 0, 0)

    def test_allow_model_false_truncates_without_calling_the_model(self, cfg):
        model = Model("never used")
        res = Summarizer(cfg, model).summarize(RECORD, 0, 400, allow_model=False)
        assert res.level == "deterministic" and model.calls == []

    def test_inputs_too_small_to_pay_off_never_reach_the_model(self, cfg):
        text = "short record " * 20
        assert tokens.count(text) < MIN_MODEL_INPUT_TOKENS
        model = Model("never used")
        res = Summarizer(cfg, model).summarize(text, 0, 400)
        assert res.level == "deterministic" and model.calls == []
        assert res.tokens < tokens.count(text)

    def test_the_deterministic_level_respects_the_l3_size(self, tmp_path):
        cfg = make_config(tmp_path, l3_truncate_tokens=100)
        res = Summarizer(cfg, None).summarize(RECORD, 0, 4000)
        assert res.tokens <= 100


class TestRoutes:
    def test_routes_are_the_summary_model_then_fallbacks_without_repeats(self, tmp_path):
        cfg = make_config(tmp_path, summary_model="a", summary_fallback_models=("b", "a", "c"))
        assert Summarizer(cfg, None).routes() == ["a", "b", "c"]

    def test_no_configured_model_means_the_auxiliary_default_route(self, cfg):
        assert Summarizer(cfg, None).routes() == [""]

    def test_each_level_tries_every_route_in_order(self, tmp_path):
        cfg = make_config(tmp_path, summary_model="a", summary_fallback_models=("b",),
                          summary_circuit_breaker_failure_threshold=100)
        model = Model(RuntimeError("down"))
        res = Summarizer(cfg, model).summarize(RECORD, 0, 400)
        assert [c["model"] for c in model.calls] == ["a", "b", "a", "b"]
        assert res.level == "deterministic"

    def test_a_fallback_route_that_answers_names_itself(self, tmp_path):
        cfg = make_config(tmp_path, summary_model="a", summary_fallback_models=("b",))
        res = Summarizer(cfg, Model(RuntimeError("down"), "from b")).summarize(RECORD, 0, 400)
        assert (res.level, res.model, res.text) == ("normal", "b", "from b")


class TestBreakers:
    def test_a_route_opens_after_the_failure_threshold_and_is_skipped(self, tmp_path):
        cfg = make_config(tmp_path, summary_model="a", summary_circuit_breaker_failure_threshold=2,
                          summary_circuit_breaker_cooldown_seconds=60)
        clock = Clock()
        model = Model(RuntimeError("down"))
        Summarizer(cfg, model, clock=clock).summarize(RECORD, 0, 400)  # normal + aggressive: two failures
        assert BREAKERS.is_open("a", clock.now)
        assert BREAKERS.is_open("a", clock.now + 59.9) and not BREAKERS.is_open("a", clock.now + 60)  # 60 s
        res = Summarizer(cfg, model, clock=clock).summarize(RECORD, 0, 400)
        assert len(model.calls) == 2 and res.calls == 0
        assert res.errors == ("a: circuit open", "a: circuit open") and res.level == "deterministic"

    def test_after_the_cooldown_the_route_is_tried_again_and_a_success_closes_it(self, tmp_path):
        cfg = make_config(tmp_path, summary_model="a", summary_circuit_breaker_failure_threshold=2,
                          summary_circuit_breaker_cooldown_seconds=60)
        clock = Clock()
        Summarizer(cfg, Model(RuntimeError("down")), clock=clock).summarize(RECORD, 0, 400)
        clock.now += 61  # half-open: the next summary may call the route once more
        assert not BREAKERS.is_open("a", clock.now)
        res = Summarizer(cfg, Model("back up"), clock=clock).summarize(RECORD, 0, 400)
        assert (res.level, res.model) == ("normal", "a")
        assert not BREAKERS.is_open("a", 0.0)  # its opening is forgotten, not only past

    def test_a_success_resets_the_consecutive_failure_count(self, tmp_path):
        cfg = make_config(tmp_path, summary_model="a", summary_circuit_breaker_failure_threshold=2)
        clock = Clock()
        for _ in range(2):  # fail, succeed; fail, succeed: never two failures in a row
            Summarizer(cfg, Model(RuntimeError("blip"), "ok"), clock=clock).summarize(RECORD, 0, 400)
        assert not BREAKERS.is_open("a", clock.now)

    def test_a_failure_after_the_cooldown_counts_towards_a_new_opening(self, tmp_path):
        cfg = make_config(tmp_path, summary_model="a", summary_circuit_breaker_failure_threshold=2,
                          summary_circuit_breaker_cooldown_seconds=60)
        clock = Clock()
        model = Model(RuntimeError("down"))
        Summarizer(cfg, model, clock=clock).summarize(RECORD, 0, 400)
        clock.now += 61
        Summarizer(cfg, model, clock=clock).summarize(RECORD, 0, 400)
        assert len(model.calls) == 4 and BREAKERS.is_open("a", clock.now)

    def test_breakers_are_per_route(self, tmp_path):
        cfg = make_config(tmp_path, summary_model="a", summary_fallback_models=("b",),
                          summary_circuit_breaker_failure_threshold=2)
        clock = Clock()

        def complete(messages, model, timeout_s, max_tokens):
            if model == "a":
                raise RuntimeError("a is down")
            return "from b"

        for _ in range(2):
            Summarizer(cfg, complete, clock=clock).summarize(RECORD, 0, 400)
        assert BREAKERS.is_open("a", clock.now) and not BREAKERS.is_open("b", clock.now)


class TestTruncateDeterministic:
    def test_text_that_fits_is_returned_unchanged(self):
        assert truncate_deterministic("a short note", 100) == "a short note"

    def test_long_text_keeps_its_head_and_tail_around_the_marker(self):
        out = truncate_deterministic(RECORD, 200)
        assert tokens.count(out) <= 200
        head, tail = out.split(TRUNCATION_MARKER)
        assert RECORD.startswith(head) and RECORD.endswith(tail) and head and tail

    def test_the_cut_uses_nearly_all_of_the_budget(self):
        assert tokens.count(truncate_deterministic(RECORD, 200)) >= 190

    def test_a_cut_never_splits_an_earlier_marker(self):
        """A condensation of deterministic leaves truncates text that already holds markers; a cut
        inside one left half a marker ("[... deterministic truncation; ex") in the summary."""
        core = TRUNCATION_MARKER.strip()
        leaf = "the ferry leaves Piraeus at 7am and docks in Naxos by noon " * 12
        source = "\n---\n".join(leaf[:300] + TRUNCATION_MARKER + leaf[-300:] for _ in range(4))
        for budget in range(40, 400, 3):
            out = truncate_deterministic(source, budget)
            assert out.count("[...") == out.count("...]") == out.count(core), (budget, out)

    def test_a_budget_below_the_marker_leaves_only_the_marker(self):
        assert truncate_deterministic(RECORD, 1) == TRUNCATION_MARKER.strip()


class TestOutputHelpers:
    def test_clean_output_strips_closed_reasoning_and_refuses_open_reasoning(self):
        assert clean_output("<think>plan</think>\nThe summary.") == "The summary."
        assert clean_output("<thinking>never closed") is None
        assert clean_output("   ") is None

    def test_expand_hint_takes_the_last_expand_line(self):
        assert expand_hint("Summary.\nExpand for details about: paths, errors") == "paths, errors"
        assert expand_hint("no hint here") == ""


def test_host_complete_routes_through_the_host_auxiliary_client(monkeypatch):
    aux = pytest.importorskip("agent.auxiliary_client")
    seen = []

    def call_llm(**kw):
        seen.append(kw)
        return "response"

    monkeypatch.setattr(aux, "call_llm", call_llm)
    monkeypatch.setattr(aux, "extract_content_or_reasoning", lambda resp: f"text of {resp}")
    runtime_info = {"model": "main", "provider": "custom", "base_url": "", "api_key": "k", "api_mode": ""}
    complete = host_complete(lambda: runtime_info, None, task="compression")
    assert complete is not None
    assert complete([{"role": "user", "content": "hi"}], "small-model", 12.0, 100) == "text of response"
    assert seen[0]["task"] == "compression" and seen[0]["main_runtime"] == runtime_info
    assert seen[0]["model"] == "small-model" and seen[0]["timeout"] == 12.0 and seen[0]["max_tokens"] == 100
