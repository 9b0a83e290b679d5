"""Several processes write one session (gateway and CLI on one session id) while compacting:
0 lost, 0 duplicated, 0 multi-parent nodes, no overlapping coverage, integrity and FTS ok."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_config

from hermes_trove.runtime import build_runtime

from .checks import doctor_report, store_report

BACKENDS = ("sqlite", "postgresql")  # every test here runs on the file and on a server

pytestmark = pytest.mark.reliability

WRITER = Path(__file__).with_name("writer.py")
WRITERS = int(os.environ.get("TROVE_RELIABILITY_WRITERS", "3"))
EXCHANGES = int(os.environ.get("TROVE_RELIABILITY_EXCHANGES", "24"))


def test_writers_sharing_one_session_store_everything_once_and_condense_nothing_twice(tmp_path):
    build_runtime(make_config(tmp_path)).db.connect()  # schema first
    procs = [subprocess.Popen([sys.executable, str(WRITER), str(tmp_path), "shared", "0", str(EXCHANGES),
                               "--compress-every", str(2 + i % 3), "--slow-model", "0.005"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(WRITERS)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0 and out.rstrip().endswith("done"), err[-2000:]
    runtime = build_runtime(make_config(tmp_path))
    report = store_report(runtime, "shared", EXCHANGES)
    assert report["lost"] == 0 and report["duplicated"] == 0, report
    assert report["multi_parent"] == 0 and report["overlapping"] == 0, report
    assert report["integrity"] == "ok" and report["fts_ok"], report
    assert runtime.dag.frontier("shared"), "compaction ran"
    assert doctor_report(runtime)["overall"] != "unhealthy", doctor_report(runtime)
