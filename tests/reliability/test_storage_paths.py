"""Unusable database paths name the path and the variable; a payload directory that
is a file fails the doctor; stale sidecar temp files are removed; hard links are refused."""
from __future__ import annotations

import os
import time

import pytest
from conftest import make_config

from hermes_trove.db import Database, UnusableDatabaseError
from hermes_trove.ops import doctor, maintenance
from hermes_trove.payloads.sidecar import PayloadError, load_record, write_payload
from hermes_trove.runtime import build_runtime

pytestmark = pytest.mark.reliability


@pytest.mark.parametrize("make, why", [
    (lambda p: p.mkdir(), "it is a directory"),
    (lambda p: p.write_bytes(b"this is plainly not sqlite " * 200), "it is not a SQLite database"),
    (lambda p: (p.parent / "afile").write_text("x"), "is not a directory"),
])
def test_an_unusable_database_path_names_itself_and_the_variable(tmp_path, make, why):
    path = tmp_path / "trove.db"
    make(path)
    target = tmp_path / "afile" / "trove.db" if why == "is not a directory" else path
    with pytest.raises(UnusableDatabaseError) as err:
        Database(target).connect()
    msg = str(err.value)
    assert str(target) in msg and "TROVE_DATABASE_PATH" in msg and why in msg


def test_the_doctor_reports_an_unusable_database_with_its_path(tmp_path):
    (tmp_path / "trove.db").mkdir()
    report = doctor.run_doctor(build_runtime(make_config(tmp_path)))
    assert report["overall"] == "unhealthy"
    assert "TROVE_DATABASE_PATH" in report["checks"][0]["detail"]


def test_a_payload_directory_that_is_a_file_fails_the_doctor(tmp_path):
    (tmp_path / "payloads-file").write_text("oops")
    rt = build_runtime(make_config(tmp_path, large_output_externalization_enabled=True,
                                   large_output_externalization_path=str(tmp_path / "payloads-file")))
    check = {c["check"]: c for c in doctor.run_doctor(rt)["checks"]}["payload_storage"]
    assert check["status"] == "fail" and "is a file" in check["detail"]


def stale_tmp(directory, pid, age_s=0.0):
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f".trove-{'a' * 32}-{'b' * 8}.json.{pid}.1.2.tmp"
    path.write_bytes(b"partial")
    if age_s:
        old = time.time() - age_s
        os.utime(path, (old, old))
    return path


def dead_pid():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def test_startup_removes_temp_files_of_dead_writers_and_old_ones_but_not_live_ones(tmp_path):
    rt = build_runtime(make_config(tmp_path))
    crashed = stale_tmp(rt.payload_dir, dead_pid())
    old = stale_tmp(rt.payload_dir, os.getpid(), age_s=7200)
    old.rename(old.with_name(old.name.replace(".1.2.", ".1.3.")))
    live = stale_tmp(rt.payload_dir, os.getpid())
    check = {c["check"]: c for c in doctor.run_doctor(rt)["checks"]}["payload_storage"]
    assert check["status"] == "warn" and "2 stale temp files" in check["detail"]
    maintenance.startup(rt, background=False)
    assert not crashed.exists() and live.exists()
    assert [p.name for p in rt.payload_dir.iterdir()] == [live.name]


def test_a_hard_link_into_the_payload_directory_is_refused(tmp_path):
    directory = tmp_path / "payloads"
    ref = write_payload(directory, "s1", "payload text", kind="tool_result")
    assert load_record(directory, ref)["payload"] == "payload text"
    outside = tmp_path / "outside.json"
    os.link(directory / ref, outside)  # the same inode now lives outside the directory too
    with pytest.raises(PayloadError, match="hard link"):
        load_record(directory, ref)
