"""SIGKILL while a file is being made beside the database (a backup's copy, a new import target):
the half-made file is never mistaken for a finished one, and the next run or a restart deletes it,
while a copy a live process is still making stays."""
from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import make_config

from hermes_trove import backups
from hermes_trove.db import HOST
from hermes_trove.importer import ImportOptions, run_import
from hermes_trove.leases import process_gone
from hermes_trove.ops import maintenance
from hermes_trove.runtime import build_runtime
from hermes_trove.store import SessionKey

pytestmark = pytest.mark.reliability


def _die_at(name: str) -> None:
    """Make this (forked, throwaway) process die when it moves a finished file into place
    (``os.replace`` or ``os.link``)."""
    setattr(os, name, lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL))


def _killed(target: Any, *args: Any) -> None:
    proc = multiprocessing.get_context("fork").Process(target=target, args=args)
    proc.start()
    proc.join(60)
    assert proc.exitcode == -signal.SIGKILL


def _backup_killed_before_its_rename(home: str) -> None:
    _die_at("replace")
    backups.take_backup(build_runtime(make_config(Path(home))))


def _seeded(home: Path):
    runtime = build_runtime(make_config(home))
    runtime.store.append(SessionKey("s"), [{"role": "user", "content": f"message {i}"} for i in range(20)])
    return runtime


def test_a_killed_backups_half_made_copy_goes_at_the_next_backup_and_at_startup(tmp_path):
    runtime = _seeded(tmp_path)
    folder = backups.backup_dir(runtime.config)
    _killed(_backup_killed_before_its_rename, str(tmp_path))
    left = list(folder.glob(".*.partial"))
    assert len(left) == 1 and left[0].stat().st_size > 0 and not list(folder.glob("*.sqlite3"))
    maintenance.startup(runtime, background=False)  # what a restart runs
    assert not left[0].exists()
    _killed(_backup_killed_before_its_rename, str(tmp_path))
    made = backups.take_backup(runtime)
    assert [p.name for p in folder.iterdir()] == [Path(made.path).name]


def test_a_copy_a_live_process_is_making_is_left_alone(tmp_path):
    runtime = _seeded(tmp_path)
    folder = backups.backup_dir(runtime.config)
    folder.mkdir(parents=True)
    mine = folder / f".trove-20240101_000000.sqlite3.{os.getpid()}@{HOST}.1.partial"
    odd = folder / f".trove-20240101_000000.sqlite3.{2**64}@{HOST}.1.partial"  # no pid at all: kept, never an error
    for path in (mine, odd):
        path.write_bytes(b"being copied")
    maintenance.startup(runtime, background=False)
    backups.take_backup(runtime)
    assert mine.exists() and odd.exists()


def _import_killed_before_it_links_the_target(home: str) -> None:
    _die_at("link")
    _import(Path(home))


def _import(home: Path):
    source = home / "export.jsonl"
    source.write_text("".join(f'{{"role": "user", "content": "line {i}"}}\n' for i in range(30)))
    return run_import(ImportOptions(target_db=str(home / "trove.db"), source_jsonl=(str(source),), apply=True), env={})


def test_a_new_target_a_killed_import_left_half_made_goes_at_the_next_import(tmp_path):
    _killed(_import_killed_before_it_links_the_target, str(tmp_path))
    assert not (tmp_path / "trove.db").exists()
    assert len(list(tmp_path.glob(".trove.db.*.importing"))) == 1
    assert _import(tmp_path).imported == 30
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export.jsonl", "trove.db"]


# A Hermes in another container shares the folder: its own pid namespace and host name. This one
# burns pids first, so its pid there is one no process has here.
_OTHER_CONTAINER = r"""
import dataclasses, os, socket, sys, time
sys.path.insert(0, sys.argv[1] + "/scripts")
import _bootstrap
from hermes_trove import backups
from hermes_trove.config import load_config
from hermes_trove.runtime import build_runtime
home = sys.argv[2]
config = dataclasses.replace(load_config({}, hermes_home=home), database_path=home + "/trove.db")
os.replace = lambda *a, **k: (print(os.getpid(), socket.gethostname(), flush=True), time.sleep(120))
backups.take_backup(build_runtime(config))
"""


def test_a_copy_a_live_process_in_another_container_is_making_is_left_alone(tmp_path):
    if shutil.which("unshare") is None:
        pytest.skip("no unshare")
    runtime = _seeded(tmp_path)
    script = tmp_path / "other.py"
    script.write_text(_OTHER_CONTAINER)
    burn = "i=0; while [ $i -lt 400 ]; do /bin/true; i=$((i+1)); done"
    command = f"hostname other-box && {burn} && {sys.executable} {script} {Path(backups.__file__).parent} {tmp_path}"
    other = subprocess.Popen(["unshare", "--pid", "--uts", "--fork", "--kill-child", "sh", "-c", command],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = other.stdout.readline() if other.stdout else ""
        if not line:
            pytest.skip(f"no new pid namespace here: {other.stderr.read() if other.stderr else ''}")
        pid = int(line.split()[0])
        if not process_gone(pid):
            pytest.skip(f"pid {pid} of the other namespace runs here too")
        copy = list(backups.backup_dir(runtime.config).glob(".*.partial"))
        assert len(copy) == 1
        maintenance.startup(runtime, background=False)
        backups.take_backup(runtime)
        assert copy[0].exists()
    finally:
        other.kill()
        other.wait()
