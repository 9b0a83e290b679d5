"""Temporal rollups: period planning, builds through the summarizer, staleness from new
leaves, operator rebuilds and status, and the lease that keeps two processes from building
the same rollup."""
from __future__ import annotations

import dataclasses
import io
import json
import multiprocessing
import time
from datetime import UTC, datetime

import pytest
from conftest import make_config, make_engine

from hermes_trove import command, leases
from hermes_trove.runtime import build_runtime
from hermes_trove.store import SessionKey
from hermes_trove.temporal import rollup_plan as plan
from hermes_trove.temporal import rollups
from hermes_trove.temporal.rollup_store import RollupStore
from hermes_trove.tools import dispatch

BACKENDS = ("sqlite", "postgresql")


def at(day: int, hour: int = 12, month: int = 5) -> float:
    return datetime(2024, month, day, hour, tzinfo=UTC).timestamp()


NOW = at(10, month=6)  # every May 2024 period is closed


class Model:
    """A fake completion function: a short dated answer per call, every prompt recorded."""

    def __init__(self, delay: float = 0.0):
        self.prompts: list[str] = []
        self.delay = delay

    def __call__(self, messages, model, timeout_s, max_tokens):
        if self.delay:
            time.sleep(self.delay)
        self.prompts.append(messages[0]["content"])
        notes = " ".join(f"note{i}" for i in range(120))  # days big enough that weeks need the model too
        return f"ROLLUP #{len(self.prompts)}: work on 3 May 2024. {notes}\nExpand for details about: the work"


def add_leaf(runtime, day: int, text: str = "", session: str = "s1", month: int = 5, hours=(9, 11),
             platform: str = "", conversation_id: str = "") -> int:
    key = SessionKey(session, conversation_id, platform)
    ids = runtime.store.append(key, [{"role": "user", "content": f"message {day}/{month} {h}",
                                      "timestamp": at(day, h, month)} for h in hours])
    body = text or f"leaf of {month}/{day}: " + " ".join(f"detail{i}" for i in range(400))
    return runtime.dag.add_leaf(session, body, ids, token_count=450, source_token_count=900,
                                earliest_at=at(day, hours[0], month), latest_at=at(day, hours[-1], month))


@pytest.fixture(autouse=True)
def _no_background_passes(request, monkeypatch):
    """Engines schedule passes on their own threads; tests build synchronously instead
    (except the test of that schedule)."""
    if "schedules" not in request.node.name:
        monkeypatch.setattr("hermes_trove.temporal.rollups.schedule", lambda *a, **k: None)


@pytest.fixture
def on(tmp_path):
    return build_runtime(make_config(tmp_path, temporal_rollups_enabled=True))


def by_period(runtime) -> dict[tuple[str, str], object]:
    store = RollupStore(runtime.db)
    return {(s.kind, s.key.label): store.get(s.rollup_id) for s in store.states()}


# ---- planning ----------------------------------------------------------------------------

def test_a_leaf_touches_its_days_their_iso_weeks_and_months():
    keys = plan.periods_for_leaves([(at(30, 22, 4), at(1, 2))])  # 30 April 22:00 to 1 May 02:00
    labels = sorted((k.kind, k.label) for k in keys)
    assert labels == [("day", "2024-04-30"), ("day", "2024-05-01"), ("month", "2024-04"), ("month", "2024-05"),
                      ("week", "2024-W18")]


def test_a_month_is_built_from_its_whole_weeks_and_edge_days():
    may = plan.period_of("month", at(15))
    parts = [(p.kind, p.label) for p in plan.parts_of(may)]
    assert parts[:5] == [("day", f"2024-05-0{d}") for d in range(1, 6)]
    assert parts[5:9] == [("week", "2024-W19"), ("week", "2024-W20"), ("week", "2024-W21"), ("day", "2024-05-27")]
    assert parts[-1] == ("day", "2024-05-31") and len(parts) == 5 + 3 + 5
    assert sum(p.end - p.start for p in plan.parts_of(may)) == may.end - may.start


def test_builds_go_days_first_newest_first_and_wait_for_their_parts():
    def day(rollup_id: int, ts: float, status: str = "pending") -> plan.RollupState:
        key = plan.period_of("day", ts)
        return plan.RollupState(rollup_id, "day", key.start, key.end, status)

    week = plan.period_of("week", at(1))
    rows = [day(1, at(1)), day(2, at(2), "ready"), day(3, at(3)),
            plan.RollupState(9, "week", week.start, week.end, "pending"), day(10, NOW + 86400)]
    picked = plan.plan_builds(rows, NOW, limit=10, claim_ttl=60, retry_after=60)
    assert [r.rollup_id for r in picked] == [3, 1]  # the week waits; tomorrow is not closed
    ready = [dataclasses.replace(r, status="ready") if r.kind == "day" else r for r in rows[:4]]
    assert [r.rollup_id for r in plan.plan_builds(ready, NOW, limit=10, claim_ttl=60, retry_after=60)] == [9]


def test_coverage_takes_the_largest_ready_rollups_and_names_what_is_missing():
    week = plan.period_of("week", at(1))
    d = {n: plan.period_of("day", at(n)) for n in range(6, 9)}
    rows = {("week", week.start): plan.RollupState(1, "week", week.start, week.end, "ready"),
            ("day", d[6].start): plan.RollupState(2, "day", d[6].start, d[6].end, "ready"),
            ("day", d[7].start): plan.RollupState(3, "day", d[7].start, d[7].end, "stale")}
    leaf_days = [plan.period_of("day", at(n)).start for n in (1, 2, 6, 7)]
    cov = plan.plan_coverage(week.start, d[8].end, rows, leaf_days)
    assert [s.rollup_id for s in cov.sections] == [1, 2]
    assert [(k.label, st) for k, st in cov.missing] == [("2024-05-07", "stale")]
    assert cov.covered_days == 3
    whole = plan.plan_coverage(week.start, d[6].end, rows, leaf_days)
    assert [s.rollup_id for s in whole.sections] == [1, 2] and not whole.missing


# ---- building ----------------------------------------------------------------------------

def test_a_pass_builds_days_then_the_week_then_the_month_with_lineage(on):
    leaves = {d: add_leaf(on, d) for d in (1, 2, 3)}
    model = Model()
    report = rollups.run_pass(on, model, now=NOW, max_builds=10, budget_s=60)
    assert report["status"] == "ok" and report["remaining"] == 0
    assert [(b["kind"], b["period"], b["outcome"]) for b in report["built"]] == [
        ("day", "2024-05-03", "ready"), ("day", "2024-05-02", "ready"), ("day", "2024-05-01", "ready"),
        ("week", "2024-W18", "ready"), ("month", "2024-05", "ready")]
    rows = by_period(on)
    assert all(r.status == "ready" and r.summary.startswith("ROLLUP #") for r in rows.values())
    store = RollupStore(on.db)
    assert store.source_node_ids(rows[("day", "2024-05-02")].rollup_id) == [leaves[2]]
    assert sorted(store.source_node_ids(rows[("month", "2024-05")].rollup_id)) == sorted(leaves.values())
    assert len(model.prompts) == 5 and sum(r.model_calls for r in rows.values()) == 5
    day_prompt, week_prompt = model.prompts[0], model.prompts[3]
    assert "Friday 3 May 2024" in day_prompt and f"summary node {leaves[3]}" in day_prompt
    assert "absolute calendar date" in day_prompt
    assert "ISO week 2024-W18" in week_prompt and "ROLLUP #1" in week_prompt  # weeks are written from days


def test_a_pass_respects_its_build_count_and_time_budget(on):
    for d in (1, 2, 3):
        add_leaf(on, d)
    first = rollups.run_pass(on, Model(), now=NOW, max_builds=2, budget_s=60)
    assert len(first["built"]) == 2 and first["remaining"] == 1  # the week and month wait for 1 May
    ticks = iter(range(100))
    none = rollups.run_pass(on, Model(), now=NOW, max_builds=10, budget_s=1.5, clock=lambda: next(ticks))
    assert len(none["built"]) == 1  # the clock passed the budget after one build


def test_without_a_model_every_rollup_still_gets_text(on):
    for d in (1, 2):
        add_leaf(on, d)
    add_leaf(on, 3, text="tiny leaf")  # below the model threshold: kept verbatim
    report = rollups.run_pass(on, None, now=NOW, max_builds=10, budget_s=60)
    assert {b["outcome"] for b in report["built"]} == {"ready"}
    rows = by_period(on)
    assert rows[("day", "2024-05-03")].level == "verbatim" and "tiny leaf" in rows[("day", "2024-05-03")].summary
    assert rows[("day", "2024-05-01")].level == "deterministic" and rows[("day", "2024-05-01")].model_calls == 0


def test_a_new_leaf_in_a_closed_period_marks_its_rollups_stale_and_the_next_pass_rebuilds(on):
    add_leaf(on, 2)
    rollups.run_pass(on, Model(), now=NOW, max_builds=10, budget_s=60)
    assert {r.status for r in by_period(on).values()} == {"ready"}
    late = add_leaf(on, 2, session="s2", hours=(15, 16))
    rows = by_period(on)
    assert {k: r.status for k, r in rows.items()} == {("day", "2024-05-02"): "stale", ("week", "2024-W18"): "stale",
                                                     ("month", "2024-05"): "stale"}
    report = rollups.run_pass(on, Model(), now=NOW, max_builds=10, budget_s=60)
    assert [b["kind"] for b in report["built"]] == ["day", "week", "month"]
    day = by_period(on)[("day", "2024-05-02")]
    assert day.status == "ready" and late in RollupStore(on.db).source_node_ids(day.rollup_id)


def test_a_build_that_races_a_new_leaf_is_not_stored_as_ready(on):
    add_leaf(on, 2)
    rollups.sync(on)
    store = RollupStore(on.db)
    state = next(s for s in store.states() if s.kind == "day")
    generation = store.claim(state, NOW)
    add_leaf(on, 2, session="s2", hours=(18, 19))  # lands while the model is "thinking"
    assert not store.finish(state.rollup_id, generation, summary="old", token_count=1, source_token_count=1,
                            level="normal", model="m", model_calls=1, input_tokens=1, node_ids=[1], now=NOW)
    assert store.get(state.rollup_id).status == "stale"


def test_removing_a_leaf_marks_its_rollups_stale(on):
    node = add_leaf(on, 2)
    rollups.run_pass(on, Model(), now=NOW, max_builds=10, budget_s=60)
    with on.db.transaction() as conn:
        conn.execute("DELETE FROM summary_nodes WHERE node_id = ?", (node,))
    assert {r.status for r in by_period(on).values()} == {"stale"}
    report = rollups.run_pass(on, Model(), now=NOW, max_builds=10, budget_s=60)
    assert {b["outcome"] for b in report["built"]} == {"discarded"} and by_period(on) == {}


def test_rollups_off_means_no_pass_and_no_schedule(tmp_path):
    runtime = build_runtime(make_config(tmp_path))
    add_leaf(runtime, 2)
    assert rollups.run_pass(runtime, Model(), now=NOW)["status"] == "disabled"
    assert rollups.schedule(runtime, lambda: Model(), force=True) is None
    assert by_period(runtime) == {}


def test_the_engine_schedules_a_background_pass_after_a_compaction(tmp_path):
    runtime = build_runtime(make_config(tmp_path, temporal_rollups_enabled=True, fresh_tail_count=4,
                                        leaf_chunk_tokens=500))
    engine = make_engine(runtime, complete=Model())
    old = at(2)
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "x " * 300,
                 "timestamp": old + i} for i in range(40)]
    engine.compress(messages, current_tokens=200000, force=True)
    assert engine.compression_count == 1
    thread = rollups._PASSES.threads.get(runtime.db.path)
    assert thread is not None
    thread.join(30)
    rows = by_period(runtime)
    assert rows[("day", "2024-05-02")].status == "ready"


def test_a_rollup_lineage_node_expands_in_the_session_that_owns_it(on):
    node = add_leaf(on, 2)
    rollups.run_pass(on, Model(), now=NOW, max_builds=10, budget_s=60)
    engine = make_engine(on, session="s1")
    ids = RollupStore(on.db).source_node_ids(by_period(on)[("day", "2024-05-02")].rollup_id)
    payload = json.loads(dispatch(engine.tool_context(), "trove_expand", {"node_id": ids[0]}))
    assert ids == [node] and "error" not in payload
    assert [s["content"] for s in payload["expanded"]] == ["message 2/5 9", "message 2/5 11"]


# ---- operators -----------------------------------------------------------------------------

def test_rollups_status_reports_counts_spend_and_what_waits(on):
    for d in (1, 2):
        add_leaf(on, d)
    rollups.run_pass(on, Model(), now=NOW, max_builds=1, budget_s=60)
    name, result = command.run(on, ["rollups"])
    assert name == "rollups" and result["enabled"] is True
    assert result["kinds"]["day"]["statuses"] == {"ready": 1, "pending": 1}
    assert result["kinds"]["day"]["model_calls"] == 1 and result["buildable_now"] >= 1
    assert "trove rollups" in command.render(name, result)


def test_rebuild_previews_by_default_and_apply_marks_and_rebuilds(on):
    for d in (1, 2):
        add_leaf(on, d)
    rollups.run_pass(on, Model(), now=NOW, max_builds=10, budget_s=60)
    before = {k: r.generation for k, r in by_period(on).items()}
    name, preview = command.run(on, ["rollups", "rebuild", "day", "2024-05-02"])
    assert name == "rollups rebuild" and preview["status"] == "preview" and preview["would_rebuild"] == 1
    assert {k: r.generation for k, r in by_period(on).items()} == before  # a preview writes nothing
    result = rollups.rebuild(on, Model(), "day", "2024-05-02", apply=True, now=NOW)
    assert result["status"] == "ok" and result["marked_stale"] == 1
    after = by_period(on)
    assert after[("day", "2024-05-02")].generation == before[("day", "2024-05-02")] + 1
    assert after[("day", "2024-05-01")].generation == before[("day", "2024-05-01")]
    assert after[("week", "2024-W18")].generation == before[("week", "2024-W18")] + 1  # written from that day
    _, marked = command.run(on, ["rollups", "rebuild", "all", "apply"])  # no model in this process
    assert marked["marked_stale"] == 4 and marked["built"] == [] and "no model" in marked["note"]
    assert {r.status for r in by_period(on).values()} == {"stale"}
    engine = make_engine(on, complete=Model())  # inside Hermes the live engine's model builds them
    _, rebuilt = command.run(on, ["rollups", "rebuild", "all", "apply"], engine=engine)
    assert len(rebuilt["built"]) == 4 and {r.status for r in by_period(on).values()} == {"ready"}


def test_rebuild_apply_is_refused_with_rollups_off_and_bad_words_answer_usage(tmp_path):
    runtime = build_runtime(make_config(tmp_path))
    add_leaf(runtime, 2)
    assert command.run(runtime, ["rollups", "rebuild", "day", "apply"])[1]["status"] == "refused"
    for words in (["rollups", "rebuild"], ["rollups", "rebuild", "year", "apply"],
                  ["rollups", "rebuild", "day", "someday"]):
        result = command.run(runtime, words)[1]
        assert result["status"] == "usage" and command.exit_code(result) == command.EXIT_USAGE, (words, result)
    assert "accepted forms" in command.run(runtime, ["rollups", "rebuild", "day", "someday"])[1]["error"]


def test_the_operator_cli_runs_rollups_against_a_database(on, monkeypatch, backend):
    add_leaf(on, 2)
    monkeypatch.setenv("TROVE_TEMPORAL_ROLLUPS_ENABLED", "1")
    if backend == "postgresql":  # an operator selects the server as the plugin does, by the variable
        monkeypatch.setenv("TROVE_DATABASE_URL", on.config.database_url)
        target = []
    else:
        target = ["--db", on.db.path]
    out = io.StringIO()
    code = command.main(["rollups", "rebuild", "all", "2024-05", "apply", *target, "--json"], out=out)
    result = json.loads(out.getvalue())
    assert code == 0 and result["status"] == "ok" and result["marked_stale"] == 3 and result["remaining"] == 1
    out = io.StringIO()
    assert command.main(["rollups", *target, "--json"], out=out) == 0
    assert json.loads(out.getvalue())["kinds"]["month"]["statuses"] == {"stale": 1}


# ---- two processes, one database -------------------------------------------------------------

def _builder(home: str, start, report_q) -> None:
    runtime = build_runtime(make_config(__import__("pathlib").Path(home), temporal_rollups_enabled=True))
    start.wait(30)
    outcomes = []
    for _ in range(40):
        report = rollups.run_pass(runtime, Model(delay=0.02), now=NOW, max_builds=3, budget_s=60)
        outcomes.append(report)
        if report["status"] == "ok" and report["remaining"] == 0:
            break
        time.sleep(0.01)
    report_q.put(outcomes)


def test_two_processes_never_build_the_same_rollup_twice(on):
    for d in range(1, 11):
        add_leaf(on, d)
    ctx = multiprocessing.get_context("fork")
    start, q = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_builder, args=(on.config.hermes_home, start, q)) for _ in range(2)]
    for p in procs:
        p.start()
    start.set()
    outcomes = [q.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    built = [b for reports in outcomes for r in reports if r["status"] == "ok" for b in r["built"]]
    rows = by_period(on)
    assert len(rows) == 10 + 2 + 1  # 10 days, ISO weeks 18 and 19, May
    assert sorted(b["rollup_id"] for b in built) == sorted(r.rollup_id for r in rows.values())  # each once
    assert all(r.status == "ready" and r.generation == 1 for r in rows.values())
    assert any(r["status"] == "busy" for reports in outcomes for r in reports)  # they did contend
    assert leases.holder(on.db, rollups.LEASE) is None


# ---- owner scopes ----------------------------------------------------------------------------
A_KEY, B_KEY = "agent:main:telegram:dm:111", "agent:main:telegram:dm:222"
A_SCOPE, B_SCOPE = f"telegram:{A_KEY}", f"telegram:{B_KEY}"
FILLER = " ".join(f"detail{i}" for i in range(400))


class EchoModel(Model):
    """Model whose answer repeats which scope markers (ALPHA, BRAVO) its input held."""

    def __call__(self, messages, model, timeout_s, max_tokens):
        answer = super().__call__(messages, model, timeout_s, max_tokens)
        marks = [m for m in ("ALPHA", "BRAVO") if m in messages[0]["content"]]
        return f"[{' '.join(marks)}] {answer}"


def two_scopes(runtime) -> None:
    """A (sessions a1) and B (b1) each wrote one leaf on 3 May, A another on 6 May."""
    add_leaf(runtime, 3, "ALPHA secret deploy key 7731. " + FILLER, session="a1", platform="telegram",
             conversation_id=A_KEY)
    add_leaf(runtime, 6, "ALPHA moved the server. " + FILLER, session="a1", platform="telegram",
             conversation_id=A_KEY)
    add_leaf(runtime, 3, "BRAVO bought a bike. " + FILLER, session="b1", platform="telegram",
             conversation_id=B_KEY, hours=(10, 12))


def test_two_scopes_leaves_on_one_day_make_two_rollups_each_written_only_from_its_own_scope(on):
    two_scopes(on)
    model = EchoModel()
    report = rollups.run_pass(on, model, now=NOW, max_builds=50, budget_s=60)
    assert report["remaining"] == 0
    store = RollupStore(on.db)
    rows = [store.get(s.rollup_id) for s in store.states()]
    days = sorted((r.scope, r.key.label) for r in rows if r.period_kind == "day")
    assert days == [(A_SCOPE, "2024-05-03"), (A_SCOPE, "2024-05-06"), (B_SCOPE, "2024-05-03")]
    assert {r.scope for r in rows if r.period_kind in ("week", "month")} == {A_SCOPE, B_SCOPE}
    assert model.prompts and all(("ALPHA" in p) != ("BRAVO" in p) for p in model.prompts)
    owner = {"a1": A_SCOPE, "b1": B_SCOPE}
    for r in rows:
        other = "BRAVO" if r.scope == A_SCOPE else "ALPHA"
        assert other not in r.summary
        assert r.scope == A_SCOPE or "7731" not in r.summary
        sessions = {on.dag.get(n).session_id for n in store.source_node_ids(r.rollup_id)}
        assert {owner[s] for s in sessions} == {r.scope}
    status = rollups.status(on, now=NOW)
    assert status["scope"] == "all" and status["scopes"] == {A_SCOPE: 5, B_SCOPE: 3}  # A: 2 days, 2 weeks, 1 month
    assert rollups.status(on, now=NOW, scope=B_SCOPE)["kinds"]["day"]["statuses"] == {"ready": 1}


def test_a_new_leaf_marks_only_its_own_scopes_rollups_stale(on):
    two_scopes(on)
    rollups.run_pass(on, EchoModel(), now=NOW, max_builds=50, budget_s=60)
    add_leaf(on, 3, "ALPHA later note. " + FILLER, session="a1", platform="telegram", conversation_id=A_KEY,
             hours=(20, 21))
    store = RollupStore(on.db)
    stale = {(s.scope, s.kind) for s in store.states() if s.status == "stale"}
    assert stale == {(A_SCOPE, "day"), (A_SCOPE, "week"), (A_SCOPE, "month")}
    assert {s.status for s in store.states(B_SCOPE)} == {"ready"}


def test_rebuild_can_target_one_scope(on):
    two_scopes(on)
    rollups.run_pass(on, EchoModel(), now=NOW, max_builds=50, budget_s=60)
    preview = rollups.rebuild(on, None, "day", "2024-05-03", apply=False, now=NOW, scope=B_SCOPE)
    assert preview["would_rebuild"] == 1 and preview["target"].endswith(f"of scope {B_SCOPE}")
    assert rollups.rebuild(on, None, "day", "2024-05-03", apply=False, now=NOW)["would_rebuild"] == 2
    name, via_command = command.run(on, ["Rollups", "rebuild", "day", "2024-05-03", f"scope={B_SCOPE}"])
    assert name == "rollups rebuild" and via_command["would_rebuild"] == 1
    assert command.run(on, ["rollups", "rebuild", "day", "2024-05-03", "scope=telegram:AGENT"])[1]["would_rebuild"] == 0
    done = rollups.rebuild(on, EchoModel(), "day", "2024-05-03", apply=True, now=NOW, scope=B_SCOPE)
    assert done["marked_stale"] == 1 and {b["scope"] for b in done["built"]} == {B_SCOPE}


def test_an_upgraded_database_drops_rollups_built_over_every_scope_and_rebuilds_them_per_scope(tmp_path, backend):
    if backend == "postgresql":
        pytest.skip("replays SQLite's migration 0013 on a pre-scope file; the PostgreSQL schema was born scoped")
    cfg = make_config(tmp_path, temporal_rollups_enabled=True)
    runtime = build_runtime(cfg)
    two_scopes(runtime)
    rollups.run_pass(runtime, EchoModel(), now=NOW, max_builds=50, budget_s=60)
    with runtime.db.transaction() as conn:  # the rows as a release before owner scopes left them
        conn.execute("DELETE FROM temporal_rollups WHERE scope = ?", (B_SCOPE,))
        conn.execute("UPDATE temporal_rollups SET scope = 'all', summary = 'MIXED: ALPHA 7731 and BRAVO bike'")
        conn.execute("DELETE FROM schema_migrations WHERE name = '0013_rollup_owner_scope'")
    runtime.db.close()
    upgraded = build_runtime(cfg)
    assert RollupStore(upgraded.db).states() == [] and RollupStore(upgraded.db).leaf_cursor() == 0
    b = make_engine(upgraded, session="b1", platform="telegram")
    before = dispatch(b.tool_context(), "trove_recent", {"period": "2024-05-03"})
    assert "MIXED" not in before and "ALPHA" not in before and "7731" not in before
    rollups.run_pass(upgraded, EchoModel(), now=NOW, max_builds=50, budget_s=60)
    after = json.loads(dispatch(b.tool_context(), "trove_recent", {"period": "2024-05-03"}))
    assert after["mode"] == "rollups" and "BRAVO" in json.dumps(after)
    assert "ALPHA" not in json.dumps(after) and "MIXED" not in json.dumps(after)


def test_a_rollup_request_fits_the_summary_models_window(tmp_path):
    # TROVE_SUMMARY_CONTEXT_LENGTH says the summary model holds 8,000 tokens; a day of thirty leaves
    # is about 13,000 tokens of record, under TROVE_ROLLUP_INPUT_MAX_TOKENS' 60,000. The record is cut to
    # what a summary request may hold in that window and the answer allowance fits beside it, so the
    # model writes the rollup instead of refusing it.
    from hermes_trove import tokens

    window, asked = 8000, []
    runtime = build_runtime(make_config(tmp_path, temporal_rollups_enabled=True, summary_context_length=window))
    for h in range(30):
        add_leaf(runtime, 3, hours=(h % 24, h % 24), text=f"leaf {h}: " + " ".join(f"d{h}x{i}" for i in range(300)))

    def model(messages, name, timeout_s, max_tokens):
        need = tokens.count(messages[0]["content"]) + max_tokens
        asked.append(need)
        if need > window:
            raise RuntimeError(f"maximum context length is {window} tokens, {need} requested")
        return "ROLLUP: the work of 3 May 2024.\nExpand for details about: the work"

    report = rollups.run_pass(runtime, model, now=NOW, max_builds=1, budget_s=60)
    day = by_period(runtime)[("day", "2024-05-03")]
    assert [b["outcome"] for b in report["built"]] == ["ready"]
    assert asked and max(asked) <= window, asked
    assert day.level == "normal" and day.summary.startswith("ROLLUP"), (day.level, asked)


def test_a_summary_window_too_small_for_any_request_cuts_the_rollup_without_asking(tmp_path):
    runtime = build_runtime(make_config(tmp_path, temporal_rollups_enabled=True, summary_context_length=300))
    for d in (1, 2):
        add_leaf(runtime, d)
    model = Model()
    report = rollups.run_pass(runtime, model, now=NOW, max_builds=1, budget_s=60)
    day = by_period(runtime)[("day", "2024-05-02")]
    assert [b["outcome"] for b in report["built"]] == ["ready"] and model.prompts == []
    assert day.level == "deterministic" and day.model_calls == 0 and day.summary
