"""The payload report behind the doctor: inline payload rows, largest rows, sidecar directory census."""
from __future__ import annotations

import base64
import json
import random

from conftest import make_config, user
from test_command import shippers_finish  # noqa: F401  (autouse: background shipping ends with the test)
from test_payloads import remove_stored

from hermes_trove.payloads import guard, health
from hermes_trove.payloads import sidecar as payloads
from hermes_trove.runtime import build_runtime
from hermes_trove.store import SessionKey

BACKENDS = ("sqlite", "postgresql")


def test_doctor_reports_inline_payload_rows_largest_rows_and_dir_stats_without_content(tmp_path, monkeypatch,
                                                                                        backend):
    rt = build_runtime(make_config(tmp_path))
    uri = "data:image/png;base64," + base64.b64encode(random.Random(3).randbytes(3000)).decode()
    rt.store.ingest(SessionKey("s1"), [user(uri), user("hello")])  # guarded: goes to a sidecar
    rt.store.settle()  # PostgreSQL: the outbox ships before the direct append below
    monkeypatch.setattr(payloads.os, "replace", lambda *a: (_ for _ in ()).throw(OSError(28, "disk full")))
    inline = "data:image/png;base64," + base64.b64encode(random.Random(4).randbytes(3000)).decode()
    rt.store.append(SessionKey("s1"), [user("inline " + inline)])  # write fails: stays inline
    monkeypatch.undo()
    remove_stored(rt, payloads.refs_in(rt.store.page("s1")[0].content)[0])
    payloads.externalize_text(rt, "s1", "spare payload")
    rt.store.settle()  # PostgreSQL: the census is the server's table; the spare payload ships first
    report = health.doctor_report(rt)
    assert report["suspicious_inline_rows"] == 1
    assert report["suspicious_rows"][0]["reasons"] == ["data_uri"] and report["suspicious_rows"][0]["role"] == "user"
    assert report["largest_rows"][0]["store_id"] == rt.store.page("s1")[2].store_id
    assert set(report["largest_rows"][0]) == {"store_id", "role", "chars", "content_chars", "tool_call_chars"}
    pdir = report["payload_dir"]
    assert pdir["files"] == 1 and pdir["missing_refs"] == 1 and pdir["referenced_refs"] == 1 and pdir["bytes"] > 0
    assert inline[30:90] not in json.dumps(report) and "spare payload" not in json.dumps(report)


def test_doctor_handles_a_missing_payload_dir(tmp_path, backend):
    rt = build_runtime(make_config(tmp_path))
    rt.store.ingest(SessionKey("s1"), [user("hello")])
    report = health.doctor_report(rt)
    assert report["suspicious_inline_rows"] == 0
    if backend == "sqlite":
        assert report["payload_dir"]["exists"] is False
    else:  # the server's table is there from the first migration, empty
        assert report["payload_dir"]["table"] == "payloads" and report["payload_dir"]["files"] == 0


def test_inline_reasons_name_data_uris_and_random_base64_runs_only():
    run = base64.b64encode(random.Random(5).randbytes(1200)).decode()
    assert guard.inline_reasons("see data:image/png;base64," + run[:40]) == ["data_uri"]
    assert guard.inline_reasons("blob " + run) == ["base64_run"]
    assert guard.inline_reasons("a" * 2000) == [] and guard.inline_reasons("f0" * 800) == []


def test_doctor_counts_sidecars_of_sessions_the_store_no_longer_holds(tmp_path, backend):
    from hermes_trove.ops import doctor

    rt = build_runtime(make_config(tmp_path))
    uri = "data:image/png;base64," + base64.b64encode(random.Random(6).randbytes(3000)).decode()
    rt.store.ingest(SessionKey("s1"), [user(uri), user("hello")])  # guarded: a sidecar its row names
    payloads.externalize_text(rt, "s1", "a result a prompt stub showed")  # a live session's: never counted
    for text in ("a payload of a deleted session", "another of it"):
        payloads.externalize_text(rt, "gone", text)
    rt.store.settle()
    pdir = health.doctor_report(rt)["payload_dir"]
    assert pdir["files"] == 4 and pdir["referenced_refs"] == 1 and pdir["missing_refs"] == 0
    assert pdir["unreferenced_files"] == 2
    check = {c["check"]: c for c in doctor.run_doctor(rt)["checks"]}["payload_storage"]
    assert check["status"] == "pass" and "2 unreferenced (their sessions are gone)" in check["detail"], check
    rt.store.ensure_session(SessionKey("gone"))  # the owner is back: its files may back what it showed
    rt.store.settle()
    assert health.doctor_report(rt)["payload_dir"]["unreferenced_files"] == 0


def test_temp_files_of_a_gone_writer_or_past_their_age_are_stale_and_cleaned(tmp_path):
    import os
    import subprocess
    import sys

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # reaped: its pid names no process (until the system reuses it)
    ref = "trove-" + "a" * 32 + "-" + "b" * 8 + ".json"
    live = tmp_path / f".{ref}.{os.getpid()}.1.2.tmp"
    dead = tmp_path / f".{ref}.{gone.pid}.1.2.tmp"
    old = tmp_path / f".{ref}.{os.getpid()}.3.4.tmp"
    other = tmp_path / "notes.tmp"
    for path in (live, dead, old, other):
        path.write_text("x")
    os.utime(old, (1_000_000, 1_000_000))
    census = payloads.directory_census(tmp_path, [])
    assert (census["temp_files"], census["stale_temp_files"]) == (4, 2)
    assert payloads.clean_stale_temp(tmp_path) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, other.name])
    assert payloads.clean_stale_temp(tmp_path / "missing") == 0


def test_a_temp_file_naming_an_impossible_pid_is_stale_and_the_clean_up_never_raises(tmp_path):
    ref = "trove-" + "c" * 32 + "-" + "d" * 8 + ".json"
    impossible = tmp_path / f".{ref}.{10 ** 20}.1.2.tmp"  # no process id is that large
    impossible.write_text("x")
    census = payloads.directory_census(tmp_path, [])
    assert (census["temp_files"], census["stale_temp_files"]) == (1, 1)
    assert payloads.clean_stale_temp(tmp_path) == 1
    assert not impossible.exists()
