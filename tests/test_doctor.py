"""``run_doctor``: every check on real databases, healthy and damaged, and that it never writes."""
from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import psycopg
import pytest
from conftest import ROOT, assistant, make_config, make_engine, user
from test_command import shippers_finish, store_dump  # noqa: F401  (shippers_finish: autouse)

from hermes_trove import command, tokens
from hermes_trove.ops import doctor, maintenance, status
from hermes_trove.runtime import build_runtime
from hermes_trove.store import SessionKey
from hermes_trove.version import install_hint

BACKENDS = ("sqlite", "postgresql")
UNREACHABLE = "postgresql://trove@127.0.0.1:1/trove"  # nothing listens on port 1: refused at once
# A trigger each store keeps (SQLite's FTS upkeep; the server's rollup staleness) and its table's name.
TRIGGER = {"sqlite": "messages_fts_delete", "postgresql": "temporal_rollups_leaf_added"}


def drop_trigger(rt, name: str) -> None:
    with rt.db.transaction() as c:
        c.execute(f"DROP TRIGGER {name}" + ("" if rt.db.kind == "sqlite" else " ON summary_nodes"))


def seed(rt, sid: str = "s1", n: int = 6) -> list[int]:
    return rt.store.append(SessionKey(sid, platform="cli"),
                           [user(f"ask {i} about ospreys") if i % 2 == 0 else assistant(f"say {i}") for i in range(n)])


def by_check(report: dict) -> dict[str, dict]:
    return {c["check"]: c for c in report["checks"]}


def test_a_sound_database_is_healthy_and_every_check_reports(engine, backend):
    seed(engine.runtime)
    report = doctor.run_doctor(engine.runtime, engine.snapshot())
    assert report["overall"] == "healthy" and report["guidance"] == []
    assert [c["check"] for c in report["checks"]] == [name for name, _ in doctor.all_checks(engine.runtime)]
    assert all(c["status"] == "pass" for c in report["checks"])
    checks = by_check(report)
    assert "session s1" in checks["context_pressure"]["detail"]
    assert report["session_id"] == "s1"
    if backend == "sqlite":
        assert checks["journal_mode"]["detail"] == "journal_mode=wal"
        assert "messages_fts: 6/6 indexed" in checks["fts_index_sync"]["detail"]
        assert checks["outbox"]["detail"] == "the SQLite file is the store (no outbox waiting)"
        return
    assert not set(checks) & doctor.SQLITE_ONLY  # no pragma, file size or FTS5 check on a server
    assert "message_search: 6/6 indexed, 0 unindexed" in checks["fts_index_sync"]["detail"]
    assert checks["schema_core_tables"]["detail"].startswith("core tables, search side tables")
    assert checks["outbox"]["detail"].startswith("outbox ") and "payload table 0 rows" in \
        checks["payload_storage"]["detail"]


def test_the_doctor_writes_nothing(engine):
    seed(engine.runtime)
    engine.ingest([user("a turn through the outbox")])
    before = store_dump(engine.runtime)
    doctor.run_doctor(engine.runtime, engine.snapshot())
    assert store_dump(engine.runtime) == before


def test_a_missing_search_document_warns_and_repair_apply_fixes_it(runtime, backend):
    if backend == "sqlite":
        pytest.skip("a server's side tables (SQLite's FTS5 damage is the next test)")
    ids = seed(runtime)
    # the host that ran trove selected it (with no config.yaml it runs its compressor, which doctor warns about)
    (Path(runtime.config.hermes_home) / "config.yaml").write_text("context:\n  engine: trove\n", encoding="utf-8")
    with runtime.db.transaction() as c:
        c.execute("DELETE FROM message_search WHERE store_id=?", (ids[0],))
    report = doctor.run_doctor(runtime)
    check = by_check(report)["fts_index_sync"]
    assert report["overall"] == "warnings" and check["status"] == "warn"
    assert "message_search: 5/6 indexed, 1 unindexed" in check["detail"]
    assert any("/trove doctor repair apply" in g for g in report["guidance"])
    maintenance.repair_fts(runtime, have_backup=True)
    assert doctor.run_doctor(runtime)["overall"] == "healthy"


def test_corrupted_fts_is_unhealthy_and_guidance_names_the_repair(runtime, backend):
    if backend == "postgresql":
        pytest.skip("writes an FTS5 ghost row; a server has no FTS5 tables (see the search document test)")
    seed(runtime)
    # the host that ran trove selected it (with no config.yaml it runs its compressor, which doctor warns about)
    (Path(runtime.config.hermes_home) / "config.yaml").write_text("context:\n  engine: trove\n", encoding="utf-8")
    with runtime.db.transaction() as c:
        c.execute("INSERT INTO messages_fts(rowid, content, tool_calls) VALUES (424242, 'phantom', NULL)")
    report = doctor.run_doctor(runtime)
    checks = by_check(report)
    assert report["overall"] == "unhealthy"
    assert checks["fts_integrity"]["status"] == "fail" and "messages_fts" in checks["fts_integrity"]["detail"]
    assert checks["fts_index_sync"]["status"] == "warn" and "1 ghost" in checks["fts_index_sync"]["detail"]
    assert any("/trove doctor repair apply" in g for g in report["guidance"])
    maintenance.repair_fts(runtime)
    assert doctor.run_doctor(runtime)["overall"] == "healthy"


def test_a_missing_trigger_is_reported(own_runtime, backend):
    drop_trigger(own_runtime, TRIGGER[backend])
    check = by_check(doctor.run_doctor(own_runtime))["schema_core_tables"]
    assert check["status"] == "warn" and f"trigger {TRIGGER[backend]}" in check["detail"]


def test_a_missing_core_table_fails_without_hiding_the_other_checks(own_runtime, backend):
    with own_runtime.db.transaction() as c:
        c.execute("DROP TABLE carried_nodes")
    report = doctor.run_doctor(own_runtime)
    checks = by_check(report)
    schema = checks["schema_core_tables"]
    assert schema["status"] == "fail" and "carried_nodes" in schema["detail"]
    assert list(checks) == [name for name, _ in doctor.all_checks(own_runtime)]
    if backend == "sqlite":  # a server may resolve the name in a later schema of the search_path instead
        assert checks["lifecycle"]["status"] == "fail" and "check crashed" in checks["lifecycle"]["detail"]
    assert checks["database_integrity" if backend == "sqlite" else "orphaned_lineage"]["status"] == "pass"
    assert report["overall"] == "unhealthy"


def test_orphaned_lineage_is_found(runtime):
    ids = seed(runtime)
    leaf = runtime.dag.add_leaf("s1", "leaf", ids[:2], token_count=2, source_token_count=8,
                                earliest_at=None, latest_at=None)
    runtime.dag.add_condensed("s1", 1, "parent", [leaf, 99999], token_count=2, source_token_count=4,
                              earliest_at=None, latest_at=None)
    with runtime.db.transaction() as c:
        c.execute("DELETE FROM messages WHERE store_id=?", (ids[0],))
    check = by_check(doctor.run_doctor(runtime))["orphaned_lineage"]
    assert check["status"] == "warn"
    assert "node_messages -> missing messages: 1" in check["detail"]
    assert "node_children -> missing nodes: 1" in check["detail"]


def test_a_frontier_beyond_the_last_message_is_a_lifecycle_warning(runtime):
    seed(runtime)
    runtime.store.advance_frontier("s1", 10_000)
    check = by_check(doctor.run_doctor(runtime))["lifecycle"]
    assert check["status"] == "warn" and "1 with a frontier beyond" in check["detail"]


@pytest.mark.parametrize("overrides,needle", [
    ({"fresh_tail_count": 1}, "TROVE_FRESH_TAIL_COUNT=1"),
    ({"context_threshold": 0.95}, "TROVE_CONTEXT_THRESHOLD=0.95"),
    ({"incremental_max_depth": 0}, "TROVE_INCREMENTAL_MAX_DEPTH=0"),
    ({"doctor_clean_apply_enabled": True}, "destructive clean apply"),
])
def test_odd_configuration_values_are_warnings(tmp_path, overrides, needle):
    check = by_check(doctor.run_doctor(build_runtime(make_config(tmp_path, **overrides))))["config_validation"]
    assert check["status"] == "warn" and needle in check["detail"]


def test_message_patterns_without_the_regex_package_name_the_command_for_this_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "regex", None)  # the package absent: importing it fails
    check = by_check(doctor.run_doctor(build_runtime(make_config(
        tmp_path, ignore_message_patterns=("^HEARTBEAT",)))))["config_validation"]
    assert check["status"] == "warn" and "message filtering is off" in check["detail"]
    assert f"({install_hint('regex')})" in check["detail"]  # pip: the extra; a plugin directory: its packages


def test_a_summary_window_too_small_for_a_useful_request_is_a_warning(tmp_path):
    # A leaf chunk is half the window; with the instructions and the smallest leaf budget's answer a
    # request needs 1,424 tokens (more with the operator's own instructions).
    floor = 2 * (200 + 2 * 256)
    small = by_check(doctor.run_doctor(build_runtime(make_config(tmp_path, summary_context_length=1000))))
    check = small["config_validation"]
    assert check["status"] == "warn", check
    assert "TROVE_SUMMARY_CONTEXT_LENGTH=1000" in check["detail"] and f"at least {floor:,}" in check["detail"]
    enough = by_check(doctor.run_doctor(build_runtime(make_config(tmp_path, summary_context_length=floor))))
    assert enough["config_validation"]["status"] == "pass"
    custom = make_config(tmp_path, summary_context_length=floor, custom_instructions="keep every name " * 25)
    assert by_check(doctor.run_doctor(build_runtime(custom)))["config_validation"]["status"] == "warn"
    # the operator guide quotes the figures the code derives from its constants
    from hermes_trove.compaction import policy

    guide = " ".join((ROOT / "docs" / "operator-guide.md").read_text(encoding="utf-8").split())
    assert policy.smallest_summary_window() == floor
    assert (f"about {floor:,} tokens: half the window for the record, about {policy.SUMMARY_INSTRUCTION_TOKENS} for"
            f" the instructions") in guide and f"and {2 * policy.LEAF_BUDGET_FLOOR} for the answer" in guide


@pytest.mark.parametrize("summary_model,warned", [("", True), ("named-model", False)])
def test_a_small_host_auxiliary_window_warns_while_summaries_take_that_route(tmp_path, monkeypatch, summary_model,
                                                                             warned):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HERMES_HOME", str(home))
    (home / "config.yaml").write_text("auxiliary:\n  compression:\n    context_length: 900\n", encoding="utf-8")
    check = by_check(doctor.run_doctor(build_runtime(make_config(home, summary_model=summary_model))))
    detail = check["config_validation"]["detail"]
    assert ("auxiliary.compression.context_length=900" in detail) is warned, detail
    assert check["config_validation"]["status"] == ("warn" if warned else "pass")


def test_a_small_summary_window_is_logged_once_at_load(tmp_path, monkeypatch, caplog):
    import hermes_trove

    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    monkeypatch.setenv("TROVE_SUMMARY_CONTEXT_LENGTH", "800")

    class Ctx:
        def register_context_engine(self, engine):
            self.engine = engine

        def register_cli_command(self, *a, **k):
            pass

    with caplog.at_level("WARNING", logger="hermes_trove"):
        hermes_trove.register(Ctx())
    said = [r for r in caplog.records if "TROVE_SUMMARY_CONTEXT_LENGTH=800" in r.getMessage()]
    assert len(said) == 1 and said[0].levelname == "WARNING", [r.getMessage() for r in caplog.records]


def test_a_refused_configuration_value_fails_the_config_check(tmp_path):
    cfg = make_config(tmp_path, warnings=("TROVE_CONTEXT_THRESHOLD='lots' is invalid",))
    check = by_check(doctor.run_doctor(build_runtime(cfg)))["config_validation"]
    assert check["status"] == "fail" and "'lots' is invalid" in check["detail"]


def test_context_pressure_far_past_the_threshold_warns(engine):
    engine.update_from_response({"prompt_tokens": 100_000})
    check = by_check(doctor.run_doctor(engine.runtime, engine.snapshot()))["context_pressure"]
    assert check["status"] == "warn" and "100000/44800" in check["detail"]


def test_context_pressure_warns_when_the_hosts_overhead_leaves_the_conversation_no_room(runtime):
    eng = make_engine(runtime, context_length=64000)
    msgs = [user("hello"), assistant("hi")]
    eng.compress(msgs, current_tokens=17000 + tokens.count_messages(msgs))  # measures the overhead
    check = by_check(doctor.run_doctor(runtime, eng.snapshot()))["context_pressure"]
    assert check["status"] == "pass"
    eng.compress(msgs, current_tokens=40000 + tokens.count_messages(msgs))  # past 60% of the window
    report = doctor.run_doctor(runtime, eng.snapshot())
    check = by_check(report)["context_pressure"]
    assert check["status"] == "warn" and "tool schemas take" in check["detail"], check
    assert any(g.startswith("context_pressure:") and "toolsets" in g for g in report["guidance"])
    eng.last_prompt_tokens = -1  # as the host leaves it after that compaction: the overhead still leaves no room
    check = by_check(doctor.run_doctor(runtime, eng.snapshot()))["context_pressure"]
    assert check["status"] == "warn" and "tool schemas take" in check["detail"], check
    assert "no prompt measured since" in check["detail"] and "-1/" not in check["detail"], check


def test_pressure_right_after_a_compaction_says_no_prompt_was_measured_not_minus_one(engine):
    """The host writes -1 into last_prompt_tokens after each compaction until the next answer's usage."""
    engine.update_from_response({"prompt_tokens": 30000})
    engine.last_prompt_tokens = -1  # as the host leaves it after a compaction
    check = by_check(doctor.run_doctor(engine.runtime, engine.snapshot()))["context_pressure"]
    assert check["status"] == "pass" and "no prompt measured since" in check["detail"], check
    assert "-1/" not in check["detail"] and "-0%" not in check["detail"]
    pressure = status.build_status(engine.runtime, engine.snapshot())["context_pressure"]
    assert pressure["ratio"] is None and pressure["measured"] is False and "compacted" in pressure["note"]


def test_an_outbox_left_beside_a_sqlite_store_with_unshipped_turns_warns_and_names_the_file(tmp_path, backend):
    """TROVE_DATABASE_URL was set (turns went to the outbox), then removed before they shipped."""
    from hermes_trove.outbox import Outbox

    if backend != "sqlite":
        pytest.skip("a SQLite store's check (a server store's outbox check is the one above)")

    rt = build_runtime(make_config(tmp_path))
    seed(rt)
    clean = by_check(doctor.run_doctor(rt))["outbox"]
    assert clean["status"] == "pass", clean
    box = Outbox(Path(rt.db.path).parent / "trove-outbox.db")
    ids = box.store.append(SessionKey("s-pg", platform="cli"), [user("written for the server"), assistant("ok")])
    report = doctor.run_doctor(rt)
    check = by_check(report)["outbox"]
    assert check["status"] == "warn" and "2 message(s)" in check["detail"] and box.path in check["detail"], check
    assert report["overall"] == "warnings" and any("TROVE_DATABASE_URL" in g for g in report["guidance"])
    box.advance(max(ids), 0.0)  # shipped after all: nothing waits
    assert by_check(doctor.run_doctor(rt))["outbox"]["status"] == "pass"


def test_an_outbox_left_beside_a_sqlite_store_holding_only_set_aside_rows_names_their_time_and_the_retry(
        tmp_path, backend):
    """Rows the server refused sit behind the shipping cursor: the next turn does not ship them, a retry does."""
    from hermes_trove import outboxaside
    from hermes_trove.outbox import Outbox

    if backend != "sqlite":
        pytest.skip("a SQLite store's check")
    rt = build_runtime(make_config(tmp_path))
    seed(rt)
    box = Outbox(Path(rt.db.path).parent / "trove-outbox.db")
    ids = box.store.append(SessionKey("s-pg", platform="cli"), [user("written for the server"), assistant("ok")])
    box.advance(max(ids), 0.0, [outboxaside.Aside("message", str(ids[0]), "s-pg", "DataError: refused")])
    report = doctor.run_doctor(rt)
    check = by_check(report)["outbox"]
    assert check["status"] == "warn" and "1 message(s)" in check["detail"], check
    assert "None" not in check["detail"] and "set aside" in check["detail"], check
    assert any("doctor outbox retry" in g for g in report["guidance"]), report["guidance"]


def test_hermes_compression_switched_off_is_a_warning_naming_the_command(tmp_path, backend):
    """compression.enabled: false stops Hermes asking any engine to compact: the doctor must not say healthy."""
    rt = build_runtime(make_config(tmp_path))
    seed(rt)
    (tmp_path / "config.yaml").write_text("context:\n  engine: trove\n", encoding="utf-8")
    assert by_check(doctor.run_doctor(rt))["plugin_identity"]["status"] == "pass"
    (tmp_path / "config.yaml").write_text("context:\n  engine: trove\ncompression:\n  enabled: false\n",
                                          encoding="utf-8")
    report = doctor.run_doctor(rt)
    check = by_check(report)["plugin_identity"]
    assert check["status"] == "warn" and "compression.enabled is off" in check["detail"], check
    assert any("hermes config set compression.enabled true" in g for g in report["guidance"])
    assert report["plugin"]["host"]["compression_enabled"] is False


def test_each_problem_of_the_plugin_check_is_named_when_there_are_several(tmp_path):
    """Hermes on its own compressor AND compression switched off: the check names both and both fixes."""
    rt = build_runtime(make_config(tmp_path))
    seed(rt)
    (tmp_path / "config.yaml").write_text("context:\n  engine: compressor\ncompression:\n  enabled: false\n",
                                          encoding="utf-8")
    report = doctor.run_doctor(rt)
    check = by_check(report)["plugin_identity"]
    assert check["status"] == "warn" and "fallback" in check["detail"], check
    assert "compression.enabled is off" in check["detail"], check
    (fix,) = [g for g in report["guidance"] if g.startswith("plugin_identity: ")]
    assert "context.engine trove" in fix and "compression.enabled true" in fix, fix


@pytest.mark.parametrize("written, on", [("", False), ('"on"', False), ("2", False), ("disabled", False),
                                         ("off", False), ('"True"', True), ("yes", True), ("1", True)])
def test_compression_enabled_is_read_as_hermes_reads_it(tmp_path, written, on):
    """Hermes counts the switch on only when its text is true, 1 or yes: an empty value, "on" or 2 is off."""
    from hermes_trove.ops import install

    (tmp_path / "config.yaml").write_text(f"context:\n  engine: trove\ncompression:\n  enabled: {written}\n",
                                          encoding="utf-8")
    assert install.compression_off(str(tmp_path)) is (not on), written
    rt = build_runtime(make_config(tmp_path))
    seed(rt)
    assert by_check(doctor.run_doctor(rt))["plugin_identity"]["status"] == ("pass" if on else "warn"), written


def test_without_an_engine_pressure_says_unbound(runtime):
    check = by_check(doctor.run_doctor(runtime))["context_pressure"]
    assert check["status"] == "pass" and check["detail"].startswith("(unbound)")


def test_largest_rows_are_metadata_only(runtime):
    runtime.store.append(SessionKey("big"), [user("secret-ish " * 400)])
    detail = by_check(doctor.run_doctor(runtime))["largest_rows"]["detail"]
    assert detail.startswith("#1 user in big:") and "secret-ish" not in detail


def test_payload_report_feeds_the_payload_check(runtime, monkeypatch):
    fake = {"suspicious_inline_rows": 2,
            "payload_dir": {"files": 1, "bytes": 9, "missing_refs": 0, "unreadable_refs": 0}}
    monkeypatch.setattr(doctor.payload_health, "doctor_report", lambda rt: fake)
    report = doctor.run_doctor(runtime)
    check = by_check(report)["payload_storage"]
    assert check["status"] == "warn" and "2 suspicious inline" in check["detail"]
    assert report["payloads"]["suspicious_inline_rows"] == 2


def test_an_unopenable_database_is_unhealthy_not_an_exception(tmp_path, backend):
    blocker = tmp_path / "dir.db"
    blocker.mkdir()
    where = {"database_path": str(blocker)} if backend == "sqlite" else {"database_url": UNREACHABLE}
    report = doctor.run_doctor(build_runtime(make_config(tmp_path, **where)))
    assert report["overall"] == "unhealthy" and report["checks"][0]["check"] == "database_open"
    assert doctor.run_doctor(None)["overall"] == "unhealthy"


def test_doctor_text_marks_failures(own_runtime, backend):
    drop_trigger(own_runtime, "nodes_fts_insert" if backend == "sqlite" else "temporal_rollups_leaf_removed")
    text = command.make_handler(own_runtime)("doctor")
    assert text.startswith("trove doctor: warnings") and "[WARN] schema_core_tables" in text
    assert "guidance:" in text


def test_store_usable_is_checked_first_and_an_unusable_path_fails_with_the_fix(tmp_path, backend):
    if backend == "postgresql":
        pytest.skip("about the SQLite file's directory; an unreachable server is the next test")
    blocker = tmp_path / "afile"
    blocker.write_text("x", encoding="utf-8")
    report = doctor.run_doctor(build_runtime(make_config(tmp_path, database_path=str(blocker / "trove.db"))))
    checks = by_check(report)
    assert report["overall"] == "unhealthy"
    assert checks["database_open"]["status"] == "fail" and checks["store_usable"]["status"] == "fail"
    assert f"its parent {blocker} is not a directory" in checks["store_usable"]["detail"]
    assert "TROVE_DATABASE_PATH" in report["guidance"][0] and "retries by itself" in report["guidance"][0]
    assert doctor.CHECKS[0][0] == "store_usable"


def test_an_unreachable_server_fails_the_doctor_first_with_the_fix(tmp_path, backend):
    if backend == "sqlite":
        pytest.skip("about a PostgreSQL server")
    report = doctor.run_doctor(build_runtime(make_config(tmp_path, database_url=UNREACHABLE)))
    checks = by_check(report)
    assert report["overall"] == "unhealthy" and report["database_path"] == UNREACHABLE
    assert checks["database_open"]["status"] == "fail" and checks["store_usable"]["status"] == "fail"
    assert "OperationalError" in checks["store_usable"]["detail"]
    assert "TROVE_DATABASE_URL" in report["guidance"][0] and "retries by itself" in report["guidance"][0]


def test_a_store_a_live_engine_found_full_fails_the_doctor_even_when_the_file_opens(engine, backend):
    engine.runtime.health.fail("OperationalError: database or disk is full")
    report = doctor.run_doctor(engine.runtime, engine.snapshot())
    check = by_check(report)["store_usable"]
    assert report["overall"] == "unhealthy" and check["status"] == "fail"
    assert check["detail"].startswith("degraded: store unusable: OperationalError: database or disk is full;"
                                      " compaction delegated to the built-in compressor; retry in ")
    fix = "free space" if backend == "sqlite" else "TROVE_DATABASE_URL"  # runtime.store_fix: a file's, a server's
    assert any(fix in g for g in report["guidance"])


def test_messages_waiting_for_an_unreachable_server_are_counted_dated_and_kept(tmp_path, backend):
    if backend == "sqlite":
        pytest.skip("about a PostgreSQL store's outbox")
    rt = build_runtime(make_config(tmp_path, database_url=UNREACHABLE))
    rt.store.outbox.store.ingest(SessionKey("s1"), [user("written while the server was away"), assistant("ok")])
    report = doctor.run_doctor(rt)
    check = by_check(report)["outbox"]
    assert report["overall"] == "unhealthy" and check["status"] == "warn"
    assert check["detail"].startswith(f"2 message(s) written here wait in {rt.store.outbox.path}, the oldest since 20")
    assert "the server cannot take them (OperationalError" in check["detail"]
    assert any(g.startswith("outbox: they exist only on this machine") and "TROVE_DATABASE_URL" in g
               for g in report["guidance"])


def test_a_new_process_asks_a_stalled_server_once(tmp_path, backend):
    if backend == "sqlite":
        pytest.skip("about a PostgreSQL server")
    from test_status import stalled_server

    url, accepted = stalled_server()
    report = doctor.run_doctor(build_runtime(make_config(tmp_path, database_url=url)))
    assert report["overall"] == "unhealthy" and "timeout" in by_check(report)["store_usable"]["detail"]
    assert len(accepted) == 1  # one bounded probe: no ship, read or second probe waits on it too


def test_a_store_a_newer_build_migrated_is_fixed_by_an_upgrade_and_a_restart_not_by_waiting(tmp_path, backend):
    config = make_config(tmp_path)
    first = build_runtime(config)
    first.store.ingest(SessionKey("s1"), [user("kept"), assistant("ok")])
    if backend == "sqlite":
        first.db.close()  # as a new process would, the next runtime opens (and checks) the file anew
        with sqlite3.connect(config.database_path) as conn:
            conn.execute("INSERT INTO schema_migrations(name, applied_at) VALUES ('9999_from_the_future', 0)")
    else:
        first.store.settle()  # the schema is made as the outbox ships
        with psycopg.connect(config.database_url, autocommit=True) as conn:
            conn.execute("INSERT INTO schema_migrations(name, applied_at) VALUES ('pg9999_from_the_future', 0)")
    report = doctor.run_doctor(build_runtime(config))
    assert report["overall"] == "unhealthy"
    advice = report["guidance"][0]
    assert "upgrade hermes-trove" in advice and "restart Hermes" in advice, advice
    assert "no restart needed" not in advice and "pg_hba.conf" not in advice, advice
