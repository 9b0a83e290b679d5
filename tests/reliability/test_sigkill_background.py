"""SIGKILL during a background rollup pass: the next process takes the dead holder's lease at
once and rebuilds the row it left 'building'; the doctor names the leftovers and repair clears them."""
from __future__ import annotations

import multiprocessing
import os
import signal
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import make_config

from hermes_trove import leases
from hermes_trove.ops import doctor, maintenance
from hermes_trove.runtime import build_runtime
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


def _kill_a_pass(home) -> None:
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_killed_mid_pass, args=(str(home), child))
    proc.start()
    assert parent.poll(60) and parent.recv() == "in model"
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
