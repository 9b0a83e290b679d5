"""SIGKILL during a background pass (rollups, the embeddings backfill, assertion extraction): the
next process takes the dead holder's lease at once and finishes the work with nothing done twice;
a rollup left 'building' is rebuilt; the doctor names the leftovers and repair clears them."""
from __future__ import annotations

import multiprocessing
import os
import signal
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import make_config
from embed_fakes import FakeEmbeddings, fake_runtime, index_all
from test_state_assertions import FactModel

from hermes_trove import leases
from hermes_trove.ops import doctor, maintenance
from hermes_trove.retrieval import indexer
from hermes_trove.retrieval.vector_store import VectorStore
from hermes_trove.runtime import build_runtime
from hermes_trove.state import extract
from hermes_trove.state.assertion_store import AssertionStore
from hermes_trove.store import SessionKey
from hermes_trove.temporal import rollups
from hermes_trove.temporal.rollup_store import RollupStore

pytestmark = pytest.mark.reliability

BACKENDS = ("sqlite", "postgresql")

NOW = datetime(2024, 6, 10, 12, tzinfo=UTC).timestamp()


def _runtime(home: Any):
    return build_runtime(make_config(Path(home), temporal_rollups_enabled=True))


def _seed(runtime) -> None:
    t = datetime(2024, 5, 3, 9, tzinfo=UTC).timestamp()
    ids = runtime.store.append(SessionKey("s1"), [{"role": "user", "content": f"message {i}", "timestamp": t + i}
                                                  for i in range(2)])
    runtime.dag.add_leaf("s1", "leaf of 3 May: " + " ".join(f"detail{i}" for i in range(400)), ids,
                         token_count=450, source_token_count=900, earliest_at=t, latest_at=t + 1)


def _model(messages, model, timeout_s, max_tokens):
    return "ROLLUP: work on 3 May 2024.\nExpand for details about: the work"


def _killed_mid_pass(home: str, pipe: Any) -> None:
    def stuck(messages, model, timeout_s, max_tokens):
        pipe.send("in model")  # the row is 'building' and the lease held: die here
        os.kill(os.getpid(), signal.SIGKILL)
        return ""
    rollups.run_pass(_runtime(home), stuck, now=NOW, max_builds=10, budget_s=60)


def _kill_a_pass(home, target: Any = _killed_mid_pass, *args: Any) -> None:
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=target, args=(str(home), *args, child))
    proc.start()
    assert parent.poll(60) and parent.recv() in ("in model", "written")
    proc.join(30)
    assert proc.exitcode == -signal.SIGKILL


def _building(runtime) -> list[int]:
    return [s.rollup_id for s in RollupStore(runtime.db).states() if s.status == "building"]


def test_the_next_pass_takes_over_a_killed_holders_lease_at_once_and_rebuilds_its_row(tmp_path):
    runtime = _runtime(tmp_path)
    _seed(runtime)
    _kill_a_pass(tmp_path)
    assert _building(runtime) and leases.stale(runtime.db)
    checks = {c["check"]: c for c in doctor.run_doctor(runtime)["checks"]}
    assert checks["background_work"]["status"] == "warn", checks["background_work"]
    assert "stale lease" in checks["background_work"]["detail"] and "stuck building" in \
        checks["background_work"]["detail"]
    report = rollups.run_pass(runtime, _model, now=NOW, max_builds=10, budget_s=60)
    assert report["status"] == "ok" and report["built"], report  # not "busy" for the lease's 180 s
    assert _building(runtime) == [] and leases.stale(runtime.db) == []
    assert {c["check"]: c["status"] for c in doctor.run_doctor(runtime)["checks"]}["background_work"] == "pass"


def test_doctor_repair_apply_clears_a_killed_passs_lease_and_building_rows(tmp_path):
    runtime = _runtime(tmp_path)
    _seed(runtime)
    _kill_a_pass(tmp_path)
    preview = maintenance.diagnose(runtime)
    assert preview["needs_repair"] and preview["background"]["stale_leases"]
    assert preview["background"]["stuck_building_rollups"] == _building(runtime)
    out = maintenance.repair_fts(runtime, have_backup=True)  # a server's backup is the operator's pg_dump
    assert (out["backup"] or runtime.db.kind != "sqlite") and any("stale lease" in a for a in out["actions"]), \
        out["actions"]
    assert _building(runtime) == [] and leases.stale(runtime.db) == []
    assert out["after"]["background"] == {"stale_leases": [], "stuck_building_rollups": []}


def _killed_after_two_vector_groups(home: str, fake: FakeEmbeddings, pipe: Any) -> None:
    real = VectorStore.write
    written: list[int] = []

    def write(self, *args, **kwargs):
        out = real(self, *args, **kwargs)
        written.append(out)
        if len(written) == 2:  # two groups and the cursor committed, the lease held: die here
            pipe.send("written")
            os.kill(os.getpid(), signal.SIGKILL)
        return out
    VectorStore.write = write
    indexer.run_pass(fake_runtime(Path(home), fake, embedding_batch_size=4), budget_s=60)


def test_an_embeddings_pass_killed_midway_is_taken_over_at_once_and_embeds_each_message_once(tmp_path):
    pytest.importorskip("numpy", reason="the [embeddings] extra is not installed")
    with FakeEmbeddings() as fake:
        runtime = fake_runtime(tmp_path, fake, embedding_batch_size=4)
        ids = runtime.store.append(SessionKey("s1"), [{"role": "user", "content": f"note {i} about topic{i % 5}"}
                                                      for i in range(30)])
        _kill_a_pass(tmp_path, _killed_after_two_vector_groups, fake)
        assert leases.stale(runtime.db)
        assert indexer.run_pass(runtime, budget_s=60).status != "busy"  # not for the lease's 60 s
        index_all(runtime)
    rows = runtime.db.read().execute("SELECT item_id, COUNT(*) FROM embedding_vectors WHERE kind = 'message'"
                                     " GROUP BY item_id ORDER BY item_id").fetchall()
    assert [tuple(r) for r in rows] == [(i, 1) for i in ids] and leases.stale(runtime.db) == []


def _killed_in_the_second_extraction_call(home: str, pipe: Any) -> None:
    model, calls = FactModel(), []

    def stuck(*args):
        calls.append(1)
        if len(calls) == 2:  # the first batch and its cursor committed: die inside the next call
            pipe.send("in model")
            os.kill(os.getpid(), signal.SIGKILL)
        return model(*args)
    extract.run_pass(build_runtime(make_config(Path(home), assertions_enabled=True)), stuck, max_batches=10)


def test_an_extraction_pass_killed_in_its_model_call_is_taken_over_and_stores_each_fact_once(tmp_path):
    runtime = build_runtime(make_config(tmp_path, assertions_enabled=True))
    runtime.store.append(SessionKey("s1"), [{"role": "user", "content": f"I live in Town{i}"} for i in range(40)])
    _kill_a_pass(tmp_path, _killed_in_the_second_extraction_call)
    assert leases.stale(runtime.db) and 0 < AssertionStore(runtime.db).cursor()
    report = extract.run_pass(runtime, FactModel(), max_batches=50)
    assert report["status"] == "ok" and report["backlog"] == 0, report
    assert AssertionStore(runtime.db).sizes()["assertions"] == 40 and leases.stale(runtime.db) == []
