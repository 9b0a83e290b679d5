"""SIGKILL at random points (inside ingest, compaction and sidecar writes), then restart:
0 lost, 0 duplicated, doctor healthy, no stray temp files after the restart."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import make_config

from hermes_trove.ops import maintenance
from hermes_trove.runtime import build_runtime

from .checks import doctor_report, store_report, temp_files

BACKENDS = ("sqlite", "postgresql")  # every test here runs on the file and on a server

pytestmark = pytest.mark.reliability

WRITER = Path(__file__).with_name("writer.py")
KILLS = int(os.environ.get("TROVE_RELIABILITY_KILLS", "6"))


def run_with_kills(home: Path, kills: int, seed: int) -> int:
    """Kill a writer ``kills`` times at random moments, restarting where it acknowledged; returns the
    number of exchanges acknowledged in all."""
    rng = random.Random(seed)
    acked = -1
    for _ in range(kills):
        proc = subprocess.Popen([sys.executable, str(WRITER), str(home), "s", str(acked + 1), "400",
                                 "--compress-every", "3", "--slow-model", "0.02", "--slow-fsync", "0.01"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        time.sleep(rng.uniform(0.6, 1.6))  # interpreter start-up takes ~0.4 s
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        done = [int(x) for x in out.split() if x.isdigit()]
        acked = max([acked, *done])
    proc = subprocess.run([sys.executable, str(WRITER), str(home), "s", str(acked + 1), "3"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return acked + 1 + 3


def test_sigkills_lose_nothing_duplicate_nothing_and_leave_no_temp_files(tmp_path):
    build_runtime(make_config(tmp_path)).db.connect()
    total = run_with_kills(tmp_path, KILLS, seed=17)
    runtime = build_runtime(make_config(tmp_path, large_output_externalization_enabled=True))
    maintenance.startup(runtime, background=False)  # what a restart runs
    report = store_report(runtime, "s", total)
    assert report["lost"] == 0 and report["duplicated"] == 0, report
    assert report["multi_parent"] == 0 and report["overlapping"] == 0, report
    assert report["integrity"] == "ok" and report["fts_ok"], report
    assert doctor_report(runtime)["overall"] != "unhealthy", doctor_report(runtime)
    assert temp_files(runtime.payload_dir) == []
