"""SIGKILL of the real host while its compaction's summary call is in flight, then a restart.

A first host process stores eight long turns. A second resumes the session and forces a
compaction; the fake model holds the summary request and the test kills that process (SIGKILL)
while it waits. A third process resumes from the same saved transcript (the host passes it
again), compacts and adds a turn: every message is stored once, the compaction is done, the
summary lineage reaches stored messages, and ``hermes trove doctor`` finds nothing to fail.
"""
from __future__ import annotations

import json
import signal
from typing import Any

import pytest

from .harness import content_counts, query

TURNS = [f"turn {i}: the lantern-{i} log reads " + " ".join(f"entry{i}x{j}" for j in range(300)) for i in range(8)]


@pytest.fixture(scope="module")
def crash(make_home, fake_llm) -> dict[str, Any]:
    home = make_home(TROVE_FRESH_TAIL_COUNT="4")
    history = str(home.root / "history.json")
    sid = home.run_driver({"turns": TURNS, "history_out": history}, "first")["session_id"]
    stored_before = query(home.db_path, "SELECT COUNT(*) FROM messages")[0][0]
    fake_llm.hold_summaries.set()
    try:
        proc = home.start_driver({"session_id": sid, "history_in": history, "compress_focus": "lantern"}, "killed")
        assert fake_llm.summary_held.wait(120), "the host never asked for a summary"
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        fake_llm.hold_summaries.clear()
    killed = {"returncode": proc.returncode, "stored": query(home.db_path, "SELECT COUNT(*) FROM messages")[0][0],
              "nodes": query(home.db_path, "SELECT COUNT(*) FROM summary_nodes")[0][0]}
    resumed = home.run_driver({"session_id": sid, "history_in": history, "compress_focus": "lantern",
                               "turns_after_compress": ["turn 9: back after the crash"], "history_out": history},
                              "resumed")
    with open(history, encoding="utf-8") as fh:
        final = json.load(fh)
    return {"home": home, "sid": sid, "before": stored_before, "killed": killed, "resumed": resumed, "history": final}


def test_the_kill_landed_inside_the_summary_call_and_lost_nothing_stored(crash):
    assert crash["killed"]["returncode"] == -signal.SIGKILL
    assert crash["killed"]["stored"] == crash["before"] and crash["killed"]["nodes"] == 0


def test_the_restarted_host_compacts_and_stores_every_message_once(crash):
    home, sid = crash["home"], crash["sid"]
    assert crash["resumed"]["forced_compaction"]["compression_count"] == 1
    counts = content_counts(home.db_path, sid)
    for turn in TURNS + ["turn 9: back after the crash"]:
        assert counts.get(("user", turn)) == 1, (turn[:20], counts.get(("user", turn)))
    assert all(n == 1 for n in counts.values()), {k[1][:40]: n for k, n in counts.items() if n != 1}
    nodes = query(home.db_path, "SELECT COUNT(*) FROM summary_nodes WHERE session_id = ?", (sid,))[0][0]
    assert nodes >= 1
    dangling = query(home.db_path, "SELECT COUNT(*) FROM node_messages nm LEFT JOIN messages m"
                                   " ON m.store_id = nm.store_id WHERE m.store_id IS NULL")[0][0]
    assert dangling == 0


def test_the_doctor_finds_the_store_sound_after_the_crash(crash):
    done = crash["home"].hermes("trove", "doctor", "--json")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    report = json.loads(done.stdout)
    failed = [c for c in report["checks"] if c["status"] == "fail"]
    assert failed == [], failed
    assert query(crash["home"].db_path, "PRAGMA integrity_check")[0][0] == "ok"
