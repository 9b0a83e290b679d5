"""``/trove doctor clean|source|retention``: read-only scans and backup-first, narrow applies."""
from __future__ import annotations

import argparse
import sqlite3
import time
from pathlib import Path

import pytest
from conftest import assistant, make_config, user
from test_command import shippers_finish, store_dump  # noqa: F401  (shippers_finish: autouse)

from hermes_trove import command
from hermes_trove.engine import TroveEngine
from hermes_trove.ops import hygiene, maintenance
from hermes_trove.runtime import build_runtime
from hermes_trove.store import SessionKey

BACKENDS = ("sqlite", "postgresql")

DAY = 86400


def seed(rt, sid: str, n: int = 4, platform: str = "cli") -> list[int]:
    return rt.store.append(SessionKey(sid, platform=platform),
                           [user(f"{sid} asks about kestrels {i}") if i % 2 == 0 else assistant(f"{sid} reply {i}")
                            for i in range(n)])


def junk_runtime(tmp_path, **overrides):
    """Patterns added after some junk was already stored (the usual reason to clean)."""
    rt = build_runtime(make_config(tmp_path))
    seed(rt, "cron_nightly", 6)
    seed(rt, "probe_1", 2)
    seed(rt, "real", 8)
    seed(rt, "other", 2, platform="telegram")
    stamp = time.time() - 3 * DAY
    with rt.db.transaction() as c:
        c.execute("INSERT INTO sessions(session_id, created_at, updated_at) VALUES ('empty_old', ?, ?)", (stamp, stamp))
        c.execute("INSERT INTO sessions(session_id, created_at, updated_at) VALUES ('empty_new', ?, ?)",
                  (time.time(), time.time()))
    cfg = make_config(tmp_path, ignore_session_patterns=("cron_*",), stateless_session_patterns=("probe_*",),
                      **overrides)
    return build_runtime(cfg)


def sessions_in(rt) -> set[str]:
    conn = rt.db.read()
    return {r[0] for r in conn.execute("SELECT session_id FROM sessions UNION SELECT session_id FROM messages")}


def test_clean_scan_lists_pattern_matched_and_old_empty_sessions_and_writes_nothing(tmp_path):
    rt = junk_runtime(tmp_path)
    before = store_dump(rt)
    result = command.run(rt, ["doctor", "clean"])[1]
    assert result["read_only"] and result["apply_enabled"] is False
    reasons = {c["session_id"]: c["reason"] for c in result["candidates"]}
    assert set(reasons) == {"cron_nightly", "probe_1", "empty_old"}
    assert "ignore pattern 'cron_*'" in reasons["cron_nightly"]
    assert "stateless pattern 'probe_*'" in reasons["probe_1"]
    assert result["candidate_messages"] == 8
    assert store_dump(rt) == before


def test_clean_never_offers_the_bound_session(tmp_path):
    rt = junk_runtime(tmp_path)
    eng = TroveEngine(rt)
    eng.on_session_start("cron_nightly", platform="cli")
    result = command.run(rt, ["doctor", "clean"])[1]
    assert "cron_nightly" not in {c["session_id"] for c in result["candidates"]}
    assert {"session_id": "cron_nightly", "reason": "bound to a live engine"} in result["kept"]


def test_clean_apply_is_refused_without_the_flag_and_changes_nothing(tmp_path):
    rt = junk_runtime(tmp_path)
    before = store_dump(rt)
    result = command.run(rt, ["doctor", "clean", "apply"])[1]
    assert result["status"] == "refused" and "TROVE_DOCTOR_CLEAN_APPLY_ENABLED" in result["reason"]
    assert store_dump(rt) == before
    assert not (Path(rt.config.hermes_home) / "backups").exists()


def test_clean_apply_backs_up_then_deletes_only_the_candidates(tmp_path, backend):
    rt = junk_runtime(tmp_path, doctor_clean_apply_enabled=True)
    ids = [r[0] for r in rt.db.read().execute("SELECT store_id FROM messages WHERE session_id='cron_nightly'")]
    rt.dag.add_leaf("cron_nightly", "nightly job summary", ids, token_count=4, source_token_count=40,
                    earliest_at=None, latest_at=None)
    vouch = ["--have-backup"] if backend == "postgresql" else []  # a server store: the operator's own backup
    result = command.run(rt, ["doctor", "clean", "apply", *vouch])[1]
    assert result["status"] == "applied" and result["deleted_sessions"] == 3
    rows = result["deleted_rows"]
    assert (rows["messages"], rows["summary_nodes"], rows["carried_nodes"], rows["sessions"]) == (8, 1, 0, 3)
    for table in rows:  # every per-session table (e.g. a session frontier) is clean of the junk sessions
        left = rt.db.read().execute(f"SELECT COUNT(*) FROM {table} WHERE session_id IN"
                                    " ('cron_nightly', 'probe_1', 'empty_old')").fetchone()[0]
        assert left == 0, table
    assert sessions_in(rt) == {"real", "other", "empty_new"}
    assert maintenance.diagnose_fts(rt.db.read())["needs_repair"] is False
    assert rt.db.read().execute("SELECT COUNT(*) FROM node_messages").fetchone()[0] == 0
    assert command.run(rt, ["doctor", "clean", "apply"])[1]["status"] == "noop"
    if backend == "postgresql":  # no copy: the operator's word (--have-backup) stands in for it
        assert result["backup"] is None and "--have-backup" in result["backup_note"]
        return
    copy = sqlite3.connect(result["backup"])
    assert copy.execute("SELECT COUNT(*) FROM messages WHERE session_id='cron_nightly'").fetchone()[0] == 6


def test_a_server_clean_apply_without_the_operators_backup_is_refused_and_deletes_nothing(tmp_path, backend):
    if backend == "sqlite":
        pytest.skip("a SQLite store takes its own file backup first")
    rt = junk_runtime(tmp_path, doctor_clean_apply_enabled=True)
    before = store_dump(rt)
    result = command.run(rt, ["doctor", "clean", "apply"])[1]
    assert result["status"] == "refused" and command.exit_code(result) == 1
    assert " && pg_dump --format=custom" in result["pg_dump"] and "--have-backup" in result["fix"]
    assert store_dump(rt) == before and "cron_nightly" in sessions_in(rt)
    assert not (Path(rt.config.hermes_home) / "backups").exists()


def test_clean_keeps_a_junk_session_whose_summaries_live_on_elsewhere(tmp_path):
    # --have-backup is the operator's word on a PostgreSQL store; a SQLite store takes its backup anyway
    rt = junk_runtime(tmp_path, doctor_clean_apply_enabled=True)
    ids = [r[0] for r in rt.db.read().execute("SELECT store_id FROM messages WHERE session_id='cron_nightly'")]
    node = rt.dag.add_leaf("cron_nightly", "summary", ids, token_count=4, source_token_count=40,
                           earliest_at=None, latest_at=None)
    with rt.db.transaction() as c:
        c.execute("INSERT INTO carried_nodes VALUES ('real', ?, 'cron_nightly', 0)", (node,))
    result = command.run(rt, ["doctor", "clean", "apply", "--have-backup"])[1]
    assert "cron_nightly" in sessions_in(rt)
    assert result["deleted_sessions"] == 2
    assert rt.dag.is_visible("real", node)


def test_clean_keeps_an_old_empty_session_a_kept_session_continues(tmp_path):
    # /new twice with no turn between: the empty middle session is the only link from "real" back to "first"
    rt = junk_runtime(tmp_path, doctor_clean_apply_enabled=True)
    seed(rt, "first", 2)
    stamp = time.time() - 3 * DAY
    with rt.db.transaction() as c:
        c.execute("UPDATE sessions SET previous_session_id='first' WHERE session_id='empty_old'")
        c.execute("UPDATE sessions SET previous_session_id='empty_old' WHERE session_id='real'")
        c.execute("INSERT INTO sessions(session_id, created_at, updated_at, previous_session_id)"
                  " VALUES ('empty_gone', ?, ?, 'cron_nightly')", (stamp, stamp))
    scan = command.run(rt, ["doctor", "clean"])[1]
    assert {c["session_id"] for c in scan["candidates"]} == {"cron_nightly", "probe_1", "empty_gone"}
    assert any(k["session_id"] == "empty_old" and "real continues it" in k["reason"] for k in scan["kept"])
    result = command.run(rt, ["doctor", "clean", "apply", "--have-backup"])[1]
    assert result["deleted_sessions"] == 3 and {"first", "empty_old", "real"} <= sessions_in(rt)
    assert rt.store.session("real").previous_session_id == "empty_old"


def test_clean_keeps_a_chain_of_old_empty_sessions_a_kept_session_continues(tmp_path):
    # /new three times with no turn between: "real" -> empty_old -> empty_older, both empty rows are its lineage
    rt = junk_runtime(tmp_path, doctor_clean_apply_enabled=True)
    stamp = time.time() - 3 * DAY
    with rt.db.transaction() as c:
        c.execute("INSERT INTO sessions(session_id, created_at, updated_at) VALUES ('empty_older', ?, ?)",
                  (stamp, stamp))
        c.execute("UPDATE sessions SET previous_session_id='empty_older' WHERE session_id='empty_old'")
        c.execute("UPDATE sessions SET previous_session_id='empty_old' WHERE session_id='real'")
    scan = command.run(rt, ["doctor", "clean"])[1]
    assert {c["session_id"] for c in scan["candidates"]} == {"cron_nightly", "probe_1"}
    assert any(k["session_id"] == "empty_older" and "empty_old continues it" in k["reason"] for k in scan["kept"])
    command.run(rt, ["doctor", "clean", "apply", "--have-backup"])
    assert {"empty_older", "empty_old", "real"} <= sessions_in(rt)
    assert rt.store.session("empty_old").previous_session_id == "empty_older"


def test_plan_clean_keeps_what_a_kept_session_needs_through_every_link():
    from hermes_trove.filters import SessionFilters

    fp = hygiene.Footprint
    # a <- b <- c all empty and old, c continued by live "d"; x's summaries are carried into kept (empty) c
    prints = [fp(s, "", 0, 0, 0, 0, 1.0) for s in ("a", "b", "c", "x", "lone")] + [fp("d", "", 3, 30, 0, 0, 99.0)]
    plan = hygiene.plan_clean(prints, SessionFilters.build(), protected=[], carried_out={"x": {"c"}},
                              empty_min_age_s=10, now=100.0, continued_by={"a": {"b"}, "b": {"c"}, "c": {"d"}})
    assert [c.session_id for c in plan.candidates] == ["lone"]
    assert {k for k, _ in plan.kept} == {"a", "b", "c", "x"}
    gone = hygiene.plan_clean(prints[:5], SessionFilters.build(), protected=[], carried_out={"x": {"c"}},
                              empty_min_age_s=10, now=100.0, continued_by={"a": {"b"}, "b": {"c"}})
    assert [c.session_id for c in gone.candidates] == ["a", "b", "c", "x", "lone"]  # nothing kept needs them


def test_plan_clean_is_pure_over_footprints():
    from hermes_trove.filters import SessionFilters

    fp = hygiene.Footprint
    prints = [fp("cron_a", "", 3, 30, 0, 0, 2.0), fp("keep", "", 3, 30, 0, 0, 2.0),
              fp("ghost", "", 0, 0, 0, 0, 1.0), fp("fresh", "", 0, 0, 0, 0, 99.0)]
    plan = hygiene.plan_clean(prints, SessionFilters.build(ignore=["cron_*"]), protected=[], carried_out={},
                              empty_min_age_s=10, now=100.0)
    assert [c.session_id for c in plan.candidates] == ["cron_a", "ghost"]


def test_source_scan_and_apply_normalize_blank_rows_to_unknown(runtime, backend):
    ids = seed(runtime, "legacy", 4)
    seed(runtime, "modern", 2)
    with runtime.db.transaction() as c:
        c.execute("UPDATE messages SET source='' WHERE store_id IN (?, ?)", (ids[0], ids[1]))
    before = store_dump(runtime)
    scan = command.run(runtime, ["doctor", "source"])[1]
    assert scan["blank_source_rows"] == 2 and scan["by_session"] == [{"session_id": "legacy", "rows": 2}]
    assert store_dump(runtime) == before
    if backend == "postgresql":
        assert command.run(runtime, ["doctor", "source", "apply"])[1]["status"] == "refused"
        assert store_dump(runtime) == before
    applied = command.run(runtime, ["doctor", "source", "apply", "--have-backup"])[1]
    assert applied["status"] == "applied" and applied["updated_rows"] == 2
    assert Path(applied["backup"]).exists() if backend == "sqlite" else applied["backup"] is None
    assert {r[0] for r in runtime.db.read().execute("SELECT source FROM messages")} == {"cli"} | {"unknown"}
    assert maintenance.diagnose_fts(runtime.db.read())["needs_repair"] is False
    assert command.run(runtime, ["doctor", "source", "apply"])[1]["status"] == "noop"


def test_retention_reports_footprints_and_stale_totals_without_writing(runtime):
    seed(runtime, "ancient", 4)
    seed(runtime, "oldish", 2)
    seed(runtime, "today", 6)
    now = time.time()
    with runtime.db.transaction() as c:
        c.execute("UPDATE messages SET created_at=? WHERE session_id='ancient'", (now - 120 * DAY,))
        c.execute("UPDATE sessions SET created_at=?, updated_at=? WHERE session_id='ancient'",
                  (now - 120 * DAY, now - 120 * DAY))
        c.execute("UPDATE messages SET created_at=? WHERE session_id='oldish'", (now - 45 * DAY,))
        c.execute("UPDATE sessions SET created_at=?, updated_at=? WHERE session_id='oldish'",
                  (now - 45 * DAY, now - 45 * DAY))
    before = store_dump(runtime)
    report = command.run(runtime, ["doctor", "retention"])[1]
    tokens = {s["session_id"]: s["tokens"] for s in report["largest_sessions"]}
    assert report["sessions"] == 3 and report["messages"] == 12
    assert report["stale_30d"] == {"sessions": 2, "messages": 6, "tokens": tokens["ancient"] + tokens["oldish"]}
    assert report["stale_90d"] == {"sessions": 1, "messages": 4, "tokens": tokens["ancient"]}
    ages = {s["session_id"]: s["age_days"] for s in report["largest_sessions"]}
    assert ages["ancient"] >= 119 and ages["today"] < 1
    assert store_dump(runtime) == before


def test_the_cli_passes_have_backup_to_the_apply(runtime, capsys, backend):
    seed(runtime, "legacy", 2)
    with runtime.db.transaction() as c:
        c.execute("UPDATE messages SET source=''")
    parser = argparse.ArgumentParser(prog="hermes trove")
    command.setup_parser(parser)
    assert command.execute(parser.parse_args(["doctor", "source", "apply", "--json"]), runtime) == \
        (command.EXIT_PROBLEM if backend == "postgresql" else command.EXIT_OK)
    capsys.readouterr()
    args = parser.parse_args(["doctor", "source", "apply", "--have-backup", "--json"])
    assert command.execute(args, runtime) == command.EXIT_OK
    second = "applied" if backend == "postgresql" else "noop"  # SQLite applied the first time, backup taken
    assert f'"status": "{second}"' in capsys.readouterr().out
    assert "--have-backup" in command.help_text()
