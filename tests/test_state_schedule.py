"""The background extraction schedule: ``hooks.post_llm_call`` and ``engine.on_session_start``
hand ``state.extract.schedule`` the engine's model. With assertions on a turn leads to one
bounded pass (message count and time budget); off, nothing is scheduled; two schedules never
run two passes at once; a failing model leaves its batch pending and a later pass stores it."""
from __future__ import annotations

import json
import re
import threading
import time

import pytest
from conftest import make_config, make_engine

from hermes_trove.hooks import make_hooks
from hermes_trove.runtime import build_runtime
from hermes_trove.state import contract, extract
from hermes_trove.state.assertion_store import AssertionStore

BACKENDS = ("sqlite", "postgresql")

_MSG = re.compile(r"--- message store_id=(\d+) role=(\w+) ---\n(.*?)(?=\n--- message|\n</messages>)", re.S)
_FACT = re.compile(r"my (\w+) is (\w+)")


class Model:
    """A fake extraction model: each "my X is Y" becomes an assertion quoting it. Records the
    store ids of every call, how many calls overlap, and can wait, sleep or fail."""

    def __init__(self, *, fail: bool = False, sleep_s: float = 0.0, gate: threading.Event | None = None):
        self.fail, self.sleep_s, self.gate = fail, sleep_s, gate
        self.calls: list[list[int]] = []
        self.inside = self.most_inside = 0
        self.entered = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, messages, model, timeout_s, max_tokens):
        text = messages[0]["content"]
        assert contract.MARKER in text
        with self._lock:
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
        self.entered.set()
        try:
            shown = [(int(m.group(1)), m.group(2), m.group(3)) for m in _MSG.finditer(text)]
            self.calls.append([sid for sid, _, _ in shown])
            if self.gate is not None:
                assert self.gate.wait(10)
            if self.sleep_s:
                time.sleep(self.sleep_s)
            if self.fail:
                raise TimeoutError("the model timed out")
            return json.dumps({"assertions": [
                {"store_id": sid, "quote": m.group(0), "subject": "user:self", "predicate": f"prefers_{m.group(1)}",
                 "value": m.group(2), "kind": "preference", "confidence": 0.9}
                for sid, role, body in shown if role == "user" for m in _FACT.finditer(body)]})
        finally:
            with self._lock:
                self.inside -= 1


@pytest.fixture(autouse=True)
def every_turn_may_schedule(monkeypatch):
    """The 20-second spacing between unforced passes would hide every pass after the first."""
    monkeypatch.setattr(extract, "PASS_INTERVAL_S", 0.0)


def history(n: int) -> list[dict[str, str]]:
    out = []
    for i in range(n):
        out.append({"role": "user", "content": f"turn {i}: my tool{i} is name{i}"})
        out.append({"role": "assistant", "content": f"noted {i}"})
    return out


def setup(tmp_path, model, **overrides):
    runtime = build_runtime(make_config(tmp_path, **overrides))
    engine = make_engine(runtime, complete=model)  # on_session_start schedules (nothing is stored yet)
    wait(runtime)
    return runtime, engine, make_hooks(runtime)


def wait(runtime) -> None:
    thread = extract._PASSES.threads.get(runtime.db.path)
    if thread is not None:
        thread.join(10)
        assert not thread.is_alive()


def turn(runtime, hooks, messages) -> None:
    hooks["post_llm_call"](session_id="s1", conversation_history=messages, platform="cli")


def test_a_turn_leads_to_one_pass_bounded_by_batches_and_messages(tmp_path):
    model = Model()
    runtime, _engine, hooks = setup(tmp_path, model, assertions_enabled=True, assertion_batch_messages=3,
                                    assertion_batches_per_pass=2)
    assert model.calls == []  # the session start found nothing to read
    store = AssertionStore(runtime.db)
    turn(runtime, hooks, history(6))  # 12 messages stored by the hook, a pass started behind it
    wait(runtime)
    assert [len(c) for c in model.calls] == [3, 3]  # at most batches x messages per pass
    assert store.backlog() == 6 and store.sizes()["assertions"] == 3
    turn(runtime, hooks, history(6))  # the same transcript again: nothing new stored, the pass continues
    wait(runtime)
    assert [len(c) for c in model.calls] == [3, 3, 3, 3] and store.backlog() == 0
    assert store.sizes()["assertions"] == 6
    seen = [sid for call in model.calls for sid in call]
    assert seen == sorted(seen) and len(set(seen)) == 12  # each message read once, in order


def test_a_pass_starts_no_new_call_past_its_time_budget(tmp_path):
    model = Model(sleep_s=0.15)
    runtime, _engine, hooks = setup(tmp_path, model, assertions_enabled=True, assertion_batch_messages=2,
                                    assertion_batches_per_pass=10, assertion_pass_budget_ms=100)
    turn(runtime, hooks, history(5))
    wait(runtime)
    assert len(model.calls) == 1  # the first call overran the 100 ms budget: no second one
    assert AssertionStore(runtime.db).backlog() == 8


def test_with_assertions_off_nothing_is_scheduled_or_created(tmp_path):
    model = Model()
    asked: list[str] = []
    runtime, engine, hooks = setup(tmp_path, model)
    real = engine.completion_for
    engine.completion_for = lambda task: asked.append(task) or real(task)  # type: ignore[method-assign]
    turn(runtime, hooks, history(4))
    engine.on_session_start("s2", platform="cli")
    assert extract.schedule(runtime, lambda: asked.append("direct") or model) is None
    assert runtime.db.path not in extract._PASSES.threads and asked == [] and model.calls == []
    assert not AssertionStore(runtime.db).present()
    runtime.store.settle()  # PostgreSQL: the turn waits in the local outbox until it ships
    assert runtime.db.read().execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 8  # the turn was stored


def test_two_schedules_in_a_row_never_run_two_passes_at_once(tmp_path):
    gate = threading.Event()
    model = Model(gate=gate)
    runtime, engine, hooks = setup(tmp_path, model, assertions_enabled=True, assertion_batch_messages=2,
                                   assertion_batches_per_pass=1)
    turn(runtime, hooks, history(3))
    assert model.entered.wait(10)  # the first pass is inside the model call, holding the lease
    first = extract._PASSES.threads[runtime.db.path]
    turn(runtime, hooks, history(3))  # a second turn: no second pass while the first runs
    engine.on_session_start("s1", platform="cli")
    assert extract._PASSES.threads[runtime.db.path] is first
    other = build_runtime(runtime.config)  # another process on the same file: the lease says busy
    assert extract.run_pass(other, model)["status"] == "busy"
    gate.set()
    wait(runtime)
    assert model.most_inside == 1 and len(model.calls) == 1
    turn(runtime, hooks, history(3))  # the first is done: the next turn starts the next pass
    wait(runtime)
    assert len(model.calls) == 2 and model.calls[0] != model.calls[1]


def test_a_failing_model_leaves_the_batch_pending_and_a_later_pass_stores_it(tmp_path):
    model = Model(fail=True)
    runtime, engine, hooks = setup(tmp_path, model, assertions_enabled=True, assertion_batch_messages=4)
    store = AssertionStore(runtime.db)
    turn(runtime, hooks, history(2))
    wait(runtime)
    assert len(model.calls) == 1  # the pass stopped at the failure
    assert store.cursor() == 0 and store.backlog() == 4 and store.sizes()["assertions"] == 0
    [error] = extract.status(runtime)["recent_errors"]
    assert error["outcome"] == "model_error" and "timed out" in error["error"]
    model.fail = False
    engine.on_session_start("s1", platform="cli")  # the next session start retries the same batch
    wait(runtime)
    assert model.calls[1] == model.calls[0]
    assert store.backlog() == 0 and store.sizes()["assertions"] == 2
