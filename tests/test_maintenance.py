"""Backups, FTS diagnosis and repair, startup checks and empty lifecycle-row GC on real files."""
from __future__ import annotations

import contextlib
import dataclasses
import glob
import logging
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from conftest import assistant, make_config, user
from test_command import shippers_finish, store_dump  # noqa: F401  (shippers_finish: autouse)

from hermes_trove import backups, emptyrows, packed
from hermes_trove.db import blank_schema, fts_sync, meta_value
from hermes_trove.ops import maintenance, server_schema
from hermes_trove.runtime import build_runtime
from hermes_trove.store import SessionKey

BACKENDS = ("sqlite", "postgresql")
UNREACHABLE = "postgresql://trove@127.0.0.1:1/trove"  # nothing listens on port 1: refused at once


def sqlite_only(backend: str, why: str) -> None:
    if backend == "postgresql":
        pytest.skip(f"about {why}; a PostgreSQL store's counterpart is tested beside it")


def server_only(backend: str) -> None:
    if backend == "sqlite":
        pytest.skip("about a PostgreSQL store (the SQLite file's counterpart is tested beside it)")


def lose_search_document(runtime, store_id: int) -> None:
    """A stored row without its search document: search would miss it (the index's damage on either store)."""
    with runtime.db.transaction() as c:
        if runtime.db.kind == "sqlite":
            c.execute("INSERT INTO messages_fts(messages_fts, rowid, content, tool_calls) SELECT 'delete', store_id,"
                      " content, tool_calls FROM messages WHERE store_id=?", (store_id,))
        else:
            c.execute("DELETE FROM message_search WHERE store_id=?", (store_id,))


def seed(runtime, session_id: str = "s1", n: int = 10, platform: str = "cli") -> list[int]:
    msgs = [user(f"question {i} about pelicans") if i % 2 == 0 else assistant(f"answer {i} about herons")
            for i in range(n)]
    return runtime.store.append(SessionKey(session_id, platform=platform), msgs)


def raw(runtime) -> sqlite3.Connection:
    return runtime.db.read()


# -- backups --------------------------------------------------------------------------

def test_backup_is_a_timestamped_single_file_copy_that_opens_and_matches(runtime, backend):
    sqlite_only(backend, "a SQLite file copy")
    seed(runtime, n=12)
    b = backups.take_backup(runtime)
    path = Path(b.path)
    assert path.parent == Path(runtime.config.hermes_home) / "backups" / "trove"
    assert path.name.startswith("trove-") and path.suffix == ".sqlite3"
    assert b.bytes == path.stat().st_size > 0
    assert not list(path.parent.glob("*.partial"))
    copy = sqlite3.connect(path)
    assert copy.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert copy.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert copy.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 12
    assert copy.execute("SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH 'pelicans'").fetchone()[0] == 6
    copy.close()


def test_two_backups_in_the_same_second_keep_both(runtime, backend):
    sqlite_only(backend, "SQLite file copies")
    seed(runtime, n=2)
    a = backups.backup_to(runtime, backups.timestamped_backup_path(runtime, now=1_700_000_000))
    b = backups.backup_to(runtime, backups.timestamped_backup_path(runtime, now=1_700_000_000))
    assert a.path != b.path and Path(a.path).exists() and Path(b.path).exists()


WRITER = textwrap.dedent("""
    import sqlite3, sys, time
    conn = sqlite3.connect(sys.argv[1], timeout=30, isolation_level=None)
    conn.execute("PRAGMA busy_timeout=30000")
    deadline = time.time() + float(sys.argv[2])
    i = 0
    print("started", flush=True)
    while time.time() < deadline:
        conn.execute("BEGIN IMMEDIATE")
        for _ in range(5):
            cur = conn.execute("INSERT INTO messages(session_id, role, content, identity, created_at, ingested_at)"
                               " VALUES ('w', 'user', ?, ?, ?, ?)",
                               (f"seq {i:08d} writer row", str(i), time.time(), time.time()))
            conn.execute("INSERT INTO messages_fts(rowid, content, tool_calls) VALUES (?, ?, NULL)",
                         (cur.lastrowid, f"seq {i:08d} writer row"))  # as the store indexes new rows
            i += 1
        conn.execute("COMMIT")
    print(i, flush=True)
""")


def test_backup_taken_while_another_process_writes_is_consistent(runtime, tmp_path, backend):
    sqlite_only(backend, "SQLite's online backup while another process writes the file")
    seed(runtime, n=4)
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    proc = subprocess.Popen([sys.executable, str(script), runtime.db.path, "3"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
    taken = []
    try:
        for _ in range(4):
            time.sleep(0.3)
            taken.append(backups.take_backup(runtime))
    finally:
        written = int(proc.communicate(timeout=60)[0].strip())
    assert proc.returncode == 0 and written > 0
    seen = []
    for b in taken:
        conn = sqlite3.connect(b.path)
        packed.register(conn)  # the index reads its rows through trove_text
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES('integrity-check', 1)")  # raises if torn
        seqs = [int(r[0].split()[1]) for r in conn.execute(
            "SELECT content FROM messages WHERE session_id='w' ORDER BY store_id")]
        # Whole transactions only: a gap-free prefix whose length is a multiple of the batch size.
        assert seqs == list(range(len(seqs))) and len(seqs) % 5 == 0
        seen.append(len(seqs))
        conn.close()
    assert seen == sorted(seen) and len(set(seen)) > 1  # the writer really ran between backups


def test_a_server_store_is_not_copied_to_a_file_and_the_refusal_names_pg_dump(tmp_path, backend):
    server_only(backend)
    url = "postgresql://trove:s3cret@db.internal:5432/fleet?options=-csearch_path%3Dtrove_a%2Cpublic"
    rt = build_runtime(make_config(tmp_path, database_url=url))  # never connects: no server is asked
    try:
        backups.take_backup(rt)
        raise AssertionError("a server store has no file backup")
    except backups.FileBackupUnavailable as exc:
        refusal = exc.refusal()
    cmd = refusal["pg_dump"]
    folder = backups.backup_dir(rt.config)
    assert cmd.startswith(f"mkdir -p {folder} && pg_dump --format=custom --file={folder}/trove-")
    assert " --schema=trove_a " in cmd and "trove@db.internal:5432/fleet" in cmd and "s3cret" not in str(refusal)
    assert refusal["status"] == "refused" and "--have-backup" in refusal["fix"] and cmd in refusal["reason"]
    assert backups.backup_first(rt, have_backup=True) is None and not backups.backup_dir(rt.config).exists()


@pytest.mark.parametrize("url", [
    "postgresql://trove:s3cret@db.internal/fleet?options=-csearch_path%3Dtrove_a",
    "postgresql://trove@db.internal/fleet?password=s3cret&sslmode=require&options=-csearch_path%3Dtrove_a",
    "host=db.internal user=trove password='s 3cret' dbname=fleet options=-csearch_path=trove_a",
])
def test_the_pg_dump_line_sends_no_password_so_pgpassword_or_pgpass_gives_it(tmp_path, backend, url):
    """A password shown as *** in --dbname would be sent as the password itself: libpq reads PGPASSWORD and
    ~/.pgpass only for a connection string that names none."""
    from psycopg.conninfo import conninfo_to_dict

    server_only(backend)
    rt = build_runtime(make_config(tmp_path, database_url=url))  # never connects: no server is asked
    with pytest.raises(backups.FileBackupUnavailable) as refused:
        backups.take_backup(rt)
    words = shlex.split(refused.value.refusal()["pg_dump"])
    dbname = next(w.split("=", 1)[1] for w in words if w.startswith("--dbname="))
    params = conninfo_to_dict(dbname)
    assert "password" not in params and params["user"] == "trove" and params["host"] == "db.internal", params
    assert "sslmode" not in url or params["sslmode"] == "require"
    assert "s3cret" not in refused.value.refusal()["reason"] and "--schema=trove_a" in words


def server_with_pg_dump(tmp_path, backend, pg_database_url):
    """A server store holding one exchange, and an environment whose PATH finds the server's pg_dump."""
    server_only(backend)
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_dump")) or [shutil.which("pg_dump") or ""]
    if not found[-1]:
        pytest.skip("no pg_dump here")
    rt = build_runtime(make_config(tmp_path, database_url=pg_database_url))
    rt.store.ingest(SessionKey("s1"), [user("kept on the server"), assistant("ok")])
    rt.store.settle()
    return rt, {**os.environ, "PATH": f"{os.path.dirname(found[-1])}:{os.environ.get('PATH', '')}"}


def test_the_backup_line_the_refusal_gives_runs_as_given_into_a_folder_not_made_yet(tmp_path, backend,
                                                                                     pg_database_url):
    rt, env = server_with_pg_dump(tmp_path, backend, pg_database_url)
    with pytest.raises(backups.FileBackupUnavailable) as refused:
        backups.take_backup(rt)
    reason = refused.value.refusal()["reason"]
    line = reason[reason.index("`") + 1:reason.rindex("`")]
    done = subprocess.run(["bash", "-c", line], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    dumps = list(backups.backup_dir(rt.config).glob("trove-*.dump"))
    assert len(dumps) == 1 and dumps[0].stat().st_size > 0
    rt.db.close()


@pytest.mark.parametrize("words", [["backup"], ["doctor", "repair", "apply"]])
def test_the_pg_dump_field_of_each_refusal_runs_as_given_in_a_home_with_no_backups_folder(tmp_path, backend,
                                                                                        pg_database_url, words):
    """Not only the reason's line: the ``pg_dump`` field that `hermes trove backup` and a refused apply
    answer with makes the folder its --file names, so it runs as given in a new home."""
    from hermes_trove import command

    rt, env = server_with_pg_dump(tmp_path, backend, pg_database_url)
    _, answer = command.run(rt, words)
    assert answer["status"] == "refused" and not backups.backup_dir(rt.config).exists(), answer
    done = subprocess.run(["bash", "-c", answer["pg_dump"]], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    dumps = list(backups.backup_dir(rt.config).glob("trove-*.dump"))
    assert len(dumps) == 1 and dumps[0].stat().st_size > 0
    rt.db.close()


def test_the_pg_dump_line_names_the_schema_a_service_file_or_pgoptions_chose(tmp_path, backend, pg_url, pg_schema,
                                                                            monkeypatch):
    server_only(backend)
    monkeypatch.setenv("PGOPTIONS", f"-csearch_path={pg_schema},public")  # the URL names no schema
    rt = build_runtime(make_config(tmp_path, database_url=pg_url))
    with pytest.raises(backups.FileBackupUnavailable) as refused:
        backups.take_backup(rt)
    assert f" --schema={pg_schema} " in refused.value.refusal()["pg_dump"]  # not the whole database
    rt.db.close()


# -- FTS diagnosis and repair ----------------------------------------------------------

def corrupt_with_ghost(runtime) -> None:
    """An FTS document with no content row: search would point at a message that does not exist."""
    with runtime.db.transaction() as c:
        c.execute("INSERT INTO messages_fts(rowid, content, tool_calls) VALUES (999999, 'ghost words', NULL)")


def test_diagnosis_of_a_sound_database_needs_no_repair_and_writes_nothing(runtime, backend):
    seed(runtime)
    before = store_dump(runtime)
    report = maintenance.diagnose_fts(raw(runtime))
    assert report["needs_repair"] is False
    index = "messages_fts" if backend == "sqlite" else "message_search"
    assert report["fts"][index] == {"present": True, "content_rows": 10, "indexed_rows": 10,
                                    "unindexed_rows": 0, "ghost_rows": 0, "in_sync": True, "integrity": "ok"}
    assert store_dump(runtime) == before


class CommitsBetween:
    """A read connection after each statement of which another writer commits a message."""

    def __init__(self, conn, commit):
        self.conn, self.commit = conn, commit

    def execute(self, sql, *args):
        row = self.conn.execute(sql, *args).fetchone()
        self.commit()
        return type("Done", (), {"fetchone": staticmethod(lambda: row)})()


def test_the_index_counts_agree_while_another_writer_commits_between_statements(runtime, backend):
    seed(runtime)

    def commit():
        seed(runtime, "s2", n=1)
        runtime.store.settle()

    between = CommitsBetween(raw(runtime), commit)
    found = fts_sync(between, "messages_fts") if backend == "sqlite" else \
        server_schema.search_sync(between, "message_search")
    assert found.ok and found.content_rows == found.indexed_rows == 10, found  # not "indexes 11 of 10 rows"


def test_a_row_without_its_search_document_is_found_and_repair_apply_restores_it(runtime, backend):
    ids = seed(runtime)
    lose_search_document(runtime, ids[0])
    index = "messages_fts" if backend == "sqlite" else "message_search"
    report = maintenance.diagnose_fts(raw(runtime))
    assert report["needs_repair"] and report["fts"][index]["unindexed_rows"] == 1
    assert ids[0] not in [h[0].store_id for h in runtime.store.search("pelicans", limit=50)]
    result = maintenance.repair_fts(runtime, have_backup=True)
    assert result["status"] == "repaired" and f"rebuilt {index}" in result["actions"]
    assert ids[0] in [h[0].store_id for h in runtime.store.search("pelicans", limit=50)]
    if backend == "postgresql":
        assert result["backup"] is None and "--have-backup" in result["backup_note"]
        assert "refreshed search statistics" in result["actions"]


def test_a_server_repair_without_the_operators_backup_is_refused_and_changes_nothing(runtime, backend):
    server_only(backend)
    ids = seed(runtime)
    lose_search_document(runtime, ids[0])
    before = store_dump(runtime)
    result = maintenance.repair_fts(runtime)
    assert result["status"] == "refused" and " && pg_dump " in result["pg_dump"]
    assert result["before"]["fts"]["message_search"]["unindexed_rows"] == 1
    assert store_dump(runtime) == before


def test_ghost_fts_rows_are_detected_and_repair_apply_removes_them_after_a_backup(runtime, backend):
    sqlite_only(backend, "an FTS5 ghost row and a file backup")
    seed(runtime)
    corrupt_with_ghost(runtime)
    report = maintenance.diagnose_fts(raw(runtime))
    assert report["needs_repair"] and report["fts"]["messages_fts"]["ghost_rows"] == 1
    assert "malformed" in report["fts"]["messages_fts"]["integrity"]
    result = maintenance.repair_fts(runtime)
    assert result["status"] == "repaired" and Path(result["backup"]).exists()
    assert "rebuilt messages_fts" in result["actions"]
    assert result["after"]["needs_repair"] is False
    assert maintenance.fts_integrity(raw(runtime), "messages_fts") is None
    assert raw(runtime).execute("SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH 'ghost'").fetchone()[0] == 0
    # The backup preserved the pre-repair state, ghost included.
    copy = sqlite3.connect(result["backup"])
    assert copy.execute("SELECT COUNT(*) FROM messages_fts_docsize").fetchone()[0] == 11


def test_lost_docsize_rows_and_content_drift_are_found_by_the_deep_check_and_fixed(runtime, backend):
    sqlite_only(backend, "FTS5 shadow tables and triggers")
    ids = seed(runtime)
    with runtime.db.transaction() as c:
        c.execute("DELETE FROM messages_fts_docsize WHERE id=?", (ids[0],))
        c.execute("DROP TRIGGER messages_fts_update")
        c.execute("UPDATE messages SET content='flamingo' WHERE store_id=?", (ids[1],))
    report = maintenance.diagnose_fts(raw(runtime))
    assert report["missing_triggers"] == ["messages_fts_update"]
    assert report["fts"]["messages_fts"]["unindexed_rows"] == 1
    assert report["fts"]["messages_fts"]["integrity"] != "ok"
    result = maintenance.repair_fts(runtime)
    assert "created trigger messages_fts_update" in result["actions"]
    assert result["status"] == "repaired"
    hits = runtime.store.search("flamingo")
    assert [h[0].store_id for h in hits] == [ids[1]]
    runtime.store.db.read().execute("SELECT 1")
    with runtime.db.transaction() as c:  # the recreated trigger keeps the index current again
        c.execute("UPDATE messages SET content='albatross' WHERE store_id=?", (ids[2],))
    assert [h[0].store_id for h in runtime.store.search("albatross")] == [ids[2]]


def test_repair_recreates_a_dropped_fts_table_and_reindexes_every_row(own_runtime, backend):
    runtime = own_runtime
    seed(runtime, n=6)
    index = "messages_fts" if backend == "sqlite" else "message_search"
    with runtime.db.transaction() as c:
        c.execute(f"DROP TABLE {index}")
    assert maintenance.check_structure(raw(runtime)).missing_fts == (index,)
    result = maintenance.repair_fts(runtime, have_backup=True)
    assert result["status"] == "repaired" and f"created {index}" in result["actions"]
    assert len(runtime.store.search("pelicans", limit=50)) == 3
    assert maintenance.check_structure(raw(runtime)).ok


def test_a_server_repair_rebuilds_drifted_documents_and_a_dropped_trigger(own_runtime, backend):
    server_only(backend)
    runtime = own_runtime
    ids = seed(runtime)
    with runtime.db.transaction() as c:
        c.execute("DROP TRIGGER temporal_rollups_leaf_changed ON summary_nodes")
        c.execute("UPDATE messages SET content='flamingo' WHERE store_id=?", (ids[1],))  # behind the index's back
    assert maintenance.diagnose_fts(raw(runtime))["missing_triggers"] == ["temporal_rollups_leaf_changed"]
    assert runtime.store.search("flamingo") == []
    result = maintenance.repair_fts(runtime, have_backup=True)
    assert "created trigger temporal_rollups_leaf_changed" in result["actions"] and result["status"] == "repaired"
    assert [h[0].store_id for h in runtime.store.search("flamingo")] == [ids[1]]


def test_expected_schema_is_what_the_migrations_leave_not_what_they_once_created(runtime, backend):
    if backend == "postgresql":  # the server's expectation is read from its migrations' statements
        assert maintenance.check_structure(raw(runtime)).ok
        assert "payloads" in maintenance.server_schema.expected(raw(runtime))["tables"]
        return
    expected = blank_schema()
    assert "messages_fts_insert" not in expected.triggers  # retired by 0004: the store indexes batches
    assert "imported_messages_store" not in expected.indexes  # gone with 0005's rebuilt ledger table
    assert "WITHOUT ROWID" in expected.tables["imported_messages"]
    assert maintenance.check_structure(raw(runtime)).ok


def test_a_dropped_index_is_reported_and_repair_recreates_it(own_runtime):
    runtime = own_runtime
    seed(runtime, n=4)
    with runtime.db.transaction() as c:
        c.execute("DROP INDEX messages_identity")
    structure = maintenance.check_structure(raw(runtime))
    assert structure.missing_indexes == ("messages_identity",) and not structure.ok
    assert maintenance.diagnose_fts(raw(runtime))["needs_repair"] is True
    result = maintenance.repair_fts(runtime, have_backup=True)
    assert "created index messages_identity" in result["actions"] and result["status"] == "repaired"
    assert maintenance.check_structure(raw(runtime)).ok


def test_repair_recreates_an_index_whose_shadow_tables_are_too_damaged_to_rebuild(runtime, backend):
    sqlite_only(backend, "FTS5 shadow tables")
    seed(runtime, n=6)
    with runtime.db.transaction() as c:
        c.execute("UPDATE messages_fts_config SET v=99 WHERE k='version'")
    runtime.db.close()  # a fresh connection reads the damaged config
    assert "fts5" in (maintenance.diagnose_fts(raw(runtime))["fts"]["messages_fts"]["integrity"])
    result = maintenance.repair_fts(runtime)
    assert "recreated and rebuilt messages_fts" in result["actions"]
    assert result["status"] == "repaired"
    assert len(runtime.store.search("herons", limit=50)) == 3


# -- startup ---------------------------------------------------------------------------

def runtime_with(tmp_path, **overrides):
    return build_runtime(make_config(tmp_path, **overrides))


def test_startup_runs_the_deep_check_once_per_interval_and_remembers_when(tmp_path):
    rt = runtime_with(tmp_path)
    seed(rt)
    first = maintenance.startup(rt, background=False, now=1000.0)
    assert first is not None and first.deep_check == "ok" and first.structure.ok and first.counts_in_sync
    stamp = meta_value(raw(rt), maintenance.META_CHECKED_AT)
    assert stamp is not None
    later = float(stamp) + 3600
    assert maintenance.startup(rt, background=False, now=later).deep_check == "not_due"
    assert maintenance.startup(rt, background=False, now=float(stamp) + 24 * 3600 + 1).deep_check == "ok"


def test_interval_zero_checks_every_startup_and_negative_never_checks(tmp_path):
    # On PostgreSQL both runtimes share the test's store: the one that never checks goes first.
    never = runtime_with(tmp_path / "b", fts_integrity_check_interval_hours=-1.0)
    assert maintenance.startup(never, background=False).deep_check == "skipped"
    assert meta_value(raw(never), maintenance.META_CHECKED_AT) is None
    always = runtime_with(tmp_path / "a", fts_integrity_check_interval_hours=0.0)
    assert maintenance.startup(always, background=False).deep_check == "ok"
    assert maintenance.startup(always, background=False).deep_check == "ok"


def test_startup_records_corruption_and_warns_with_the_repair_command(tmp_path, caplog, backend):
    rt = runtime_with(tmp_path)
    ids = seed(rt)
    if backend == "sqlite":
        corrupt_with_ghost(rt)
    else:
        lose_search_document(rt, ids[0])
    with caplog.at_level(logging.WARNING, logger="hermes_trove.ops.maintenance"):
        report = maintenance.startup(rt, background=False)
    assert report is not None and report.deep_check == "failed" and not report.counts_in_sync
    assert "/trove doctor repair apply" in caplog.text
    recorded = maintenance.fts_health(raw(rt))["recorded_failure"]
    assert ("messages_fts" if backend == "sqlite" else "message_search") in recorded["tables"]
    maintenance.repair_fts(rt, have_backup=True)
    assert maintenance.fts_health(raw(rt))["recorded_failure"] is None


def test_startup_notices_a_missing_trigger_without_changing_the_schema(tmp_path, caplog, backend, request):
    url = {"database_url": request.getfixturevalue("pg_database_url")} if backend == "postgresql" else {}
    rt = runtime_with(tmp_path, fts_integrity_check_interval_hours=-1.0, **url)  # a schema of its own
    trigger = "nodes_fts_insert" if backend == "sqlite" else "temporal_rollups_leaf_added"
    with rt.db.transaction() as c:
        c.execute(f"DROP TRIGGER {trigger}" + ("" if backend == "sqlite" else " ON summary_nodes"))
    with caplog.at_level(logging.WARNING, logger="hermes_trove.ops.maintenance"):
        report = maintenance.startup(rt, background=False)
    assert report is not None and report.structure.missing_triggers == (trigger,)
    assert trigger in caplog.text and "repair apply" in caplog.text
    assert maintenance.check_structure(raw(rt)).missing_triggers == (trigger,)


def test_background_deep_check_finishes_and_stamps_meta(tmp_path):
    rt = runtime_with(tmp_path)
    seed(rt)
    assert maintenance.startup(rt).deep_check == "started"
    deadline = time.time() + 10
    while meta_value(raw(rt), maintenance.META_CHECKED_AT) is None and time.time() < deadline:
        time.sleep(0.02)
    assert meta_value(raw(rt), maintenance.META_CHECKED_AT) is not None


def test_startup_never_raises_even_when_the_database_cannot_open(tmp_path, backend):
    blocker = tmp_path / "not-a-db"
    blocker.mkdir()
    cfg = dataclasses.replace(make_config(tmp_path), database_path=str(blocker))
    if backend == "postgresql":
        cfg = dataclasses.replace(cfg, database_path=str(tmp_path / "trove.db"), database_url=UNREACHABLE)
    assert maintenance.startup(build_runtime(cfg), background=False) is None


# -- empty lifecycle-row GC -------------------------------------------------------------

def add_empty_sessions(runtime, n: int, age_s: float, prefix: str = "empty") -> None:
    stamp = time.time() - age_s
    with runtime.db.transaction() as c:
        c.executemany("INSERT INTO sessions(session_id, created_at, updated_at) VALUES (?,?,?)",
                      [(f"{prefix}-{i}", stamp, stamp) for i in range(n)])


def count_sessions(runtime) -> int:
    return raw(runtime).execute("SELECT COUNT(*) FROM sessions").fetchone()[0]


def test_gc_prunes_only_old_empty_rows_once_the_table_passes_the_threshold(tmp_path):
    rt = runtime_with(tmp_path, empty_lifecycle_gc_threshold=10, empty_lifecycle_gc_max_age_hours=24.0)
    seed(rt, "real-old")
    with rt.db.transaction() as c:
        c.execute("UPDATE sessions SET created_at=0, updated_at=0 WHERE session_id='real-old'")
    add_empty_sessions(rt, 6, age_s=48 * 3600, prefix="old")
    add_empty_sessions(rt, 3, age_s=60, prefix="young")
    assert maintenance.gc_empty_lifecycle(rt) == 0  # 10 rows: not above the threshold
    add_empty_sessions(rt, 2, age_s=48 * 3600, prefix="older")
    rt.bound_sessions["old-0"] = "active"
    assert maintenance.gc_empty_lifecycle(rt) == 7  # old-1..5 and older-0..1; old-0 is bound
    left = {r[0] for r in raw(rt).execute("SELECT session_id FROM sessions")}
    assert left == {"real-old", "old-0", "young-0", "young-1", "young-2"}


def test_a_sessions_start_tidies_empty_rows_at_most_once_per_interval(tmp_path, monkeypatch):
    """The pass reads the whole sessions table: a gateway starting chats all day runs it every few minutes,
    not at every start; an operator's minimum age shorter than the interval shortens it."""
    rt = runtime_with(tmp_path, empty_lifecycle_gc_threshold=1, empty_lifecycle_gc_max_age_hours=24.0)
    clock = [1000.0]
    monkeypatch.setattr(maintenance.time, "monotonic", lambda: clock[0])
    add_empty_sessions(rt, 3, age_s=48 * 3600, prefix="old")
    assert maintenance.tidy_at_session_start(rt) == 3
    add_empty_sessions(rt, 2, age_s=48 * 3600, prefix="later")
    clock[0] += maintenance.TIDY_EVERY_S - 1
    assert maintenance.tidy_at_session_start(rt) == 0 and count_sessions(rt) == 2  # within the interval
    clock[0] += 1
    assert maintenance.tidy_at_session_start(rt) == 2 and count_sessions(rt) == 0
    quick = runtime_with(tmp_path / "quick", empty_lifecycle_gc_threshold=1, empty_lifecycle_gc_max_age_hours=0.0)
    for prefix in ("a", "b"):  # rows that may go at once are tidied at every start
        add_empty_sessions(quick, 2, age_s=10, prefix=prefix)
        assert maintenance.tidy_at_session_start(quick) == 2


def test_the_start_up_pass_counts_as_the_tidy_up_a_sessions_start_would_run(tmp_path, monkeypatch):
    """Start-up tidies empty rows; the first session bound right after it (seconds later) need not read the
    whole sessions table again: the next pass is due an interval after start-up's."""
    rt = runtime_with(tmp_path, empty_lifecycle_gc_threshold=1, empty_lifecycle_gc_max_age_hours=24.0)
    clock = [1000.0]
    monkeypatch.setattr(maintenance.time, "monotonic", lambda: clock[0])
    seed(rt, "stored")
    add_empty_sessions(rt, 3, age_s=48 * 3600, prefix="old")
    report = maintenance.startup(rt, background=False)
    assert report is not None and report.gc_deleted == 3
    add_empty_sessions(rt, 2, age_s=48 * 3600, prefix="later")
    assert maintenance.tidy_at_session_start(rt) == 0 and count_sessions(rt) == 3  # the first session's start
    clock[0] += maintenance.TIDY_EVERY_S
    assert maintenance.tidy_at_session_start(rt) == 2 and count_sessions(rt) == 1


def test_two_sessions_starting_together_run_one_tidy_up(tmp_path, monkeypatch):
    """A gateway builds agents on several threads: two starts that both read the clock before either marks the
    pass taken must not both read the whole sessions table. Each thread's clock read waits for the other's
    (or gives up after a moment): without one claim under a lock both find the pass due."""
    rt = runtime_with(tmp_path, empty_lifecycle_gc_threshold=1, empty_lifecycle_gc_max_age_hours=24.0)
    add_empty_sessions(rt, 3, age_s=48 * 3600, prefix="old")
    meet = threading.Barrier(2, timeout=1.0)

    def clock() -> float:
        with contextlib.suppress(threading.BrokenBarrierError):
            meet.wait()
        return 1000.0

    passes = []
    delete = rt.store.delete_empty_sessions
    monkeypatch.setattr(rt.store, "delete_empty_sessions", lambda *a, **k: passes.append(1) or delete(*a, **k))
    monkeypatch.setattr(maintenance.time, "monotonic", clock)
    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(maintenance.tidy_at_session_start(rt)))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(passes) == 1 and sorted(results) == [0, 3] and count_sessions(rt) == 0


def test_the_tidy_up_spares_many_bound_sessions_under_sqlites_oldest_cap_on_parameters(tmp_path, backend):
    # A gateway may hold thousands of bound sessions (runtime.MAX_BOUND); a SQLite built with the old cap of 999
    # parameters must still take the statement (the spared ids were bound three times over: past 331, "too many
    # SQL variables", which the tidy-up logs and skips, so no empty row ever went)
    sqlite_only(backend, "SQLite's cap on a statement's parameters")
    rt = runtime_with(tmp_path, empty_lifecycle_gc_threshold=1, empty_lifecycle_gc_max_age_hours=0.0)
    rt.db.connect().setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)
    add_empty_sessions(rt, 1200, age_s=10, prefix="bound")
    add_empty_sessions(rt, 5, age_s=10, prefix="gone")
    odd = ["nul\x00id", 'quote"back\\slash \u00e9 \U0001f642']  # spared whatever their characters
    add_linked_sessions(rt, {sid: None for sid in odd})
    for sid in [f"bound-{i}" for i in range(1200)] + odd:
        rt.bound_sessions[sid] = "active"
    assert maintenance.gc_empty_lifecycle(rt) == 5 and count_sessions(rt) == 1202 and set(odd) <= session_ids(rt)


def test_a_bound_id_no_store_can_hold_spares_nothing_and_stops_no_tidy_up(tmp_path, backend):
    # a session id with a lone surrogate has no UTF-8 form: no row holds it, and a server's driver refused to
    # send it, so the whole tidy-up failed (and was logged as an error) at every pass while it stayed bound
    rt = runtime_with(tmp_path, empty_lifecycle_gc_threshold=1, empty_lifecycle_gc_max_age_hours=0.0)
    add_empty_sessions(rt, 5, age_s=10, prefix="gone")
    add_empty_sessions(rt, 1, age_s=10, prefix="bound")
    rt.bound_sessions["bound-0"] = "active"
    rt.bound_sessions["lone\ud800id"] = "active"
    assert maintenance.gc_empty_lifecycle(rt) == 5 and session_ids(rt) == {"bound-0"}


def test_a_session_bound_while_the_tidy_up_reads_the_bound_list_stops_nothing(tmp_path, monkeypatch):
    # the list of bound sessions is read while another thread may bind one: each id is judged (holdable) from a
    # sorted copy, so a bind between two of them changes nothing here (judged on the dict itself: "dictionary
    # changed size during iteration", and the pass failed)
    rt = runtime_with(tmp_path, empty_lifecycle_gc_threshold=1, empty_lifecycle_gc_max_age_hours=0.0)
    add_empty_sessions(rt, 3, age_s=10, prefix="gone")
    add_empty_sessions(rt, 2, age_s=10, prefix="bound")
    rt.bound_sessions.update({"bound-0": "active", "bound-1": "active"})
    judge = emptyrows.holdable

    def binding_meanwhile(session_ids):
        def each():
            for session_id in session_ids:
                rt.bound_sessions.setdefault("late", "active")  # another thread's bind, between two ids
                yield session_id
        return judge(list(each()))

    monkeypatch.setattr(emptyrows, "holdable", binding_meanwhile)
    assert maintenance.gc_empty_lifecycle(rt) == 3 and session_ids(rt) == {"bound-0", "bound-1"}


def test_gc_keeps_empty_rows_that_received_carried_summaries(tmp_path):
    rt = runtime_with(tmp_path, empty_lifecycle_gc_threshold=1, empty_lifecycle_gc_max_age_hours=0.0)
    ids = seed(rt, "parent")
    node = rt.dag.add_leaf("parent", "summary of birds", ids, token_count=5, source_token_count=50,
                           earliest_at=None, latest_at=None)
    add_empty_sessions(rt, 2, age_s=10, prefix="child")
    with rt.db.transaction() as c:
        c.execute("INSERT INTO carried_nodes VALUES ('child-0', ?, 'parent', 0)", (node,))
    assert maintenance.gc_empty_lifecycle(rt) == 1
    assert {r[0] for r in raw(rt).execute("SELECT session_id FROM sessions")} == {"parent", "child-0"}


def test_gc_keeps_an_empty_row_a_continued_session_names_as_its_previous_one(tmp_path):
    # /new twice with no turn between: the middle session is empty, and the only link from the last to the first
    rt = runtime_with(tmp_path, empty_lifecycle_gc_threshold=1, empty_lifecycle_gc_max_age_hours=0.0)
    seed(rt, "first")
    add_empty_sessions(rt, 2, age_s=10, prefix="middle")
    rt.store.ensure_session(SessionKey("middle-0"), previous_session_id="first")
    rt.store.ensure_session(SessionKey("last"), previous_session_id="middle-0")
    seed(rt, "last")
    with rt.db.transaction() as c:
        c.execute("UPDATE sessions SET updated_at=0 WHERE session_id='middle-0'")
    assert maintenance.gc_empty_lifecycle(rt) == 1  # middle-1: empty, and no session continues it
    assert {r[0] for r in raw(rt).execute("SELECT session_id FROM sessions")} == {"first", "middle-0", "last"}
    assert rt.store.session("last").previous_session_id == "middle-0"
    assert rt.store.session("middle-0").previous_session_id == "first"
    assert maintenance.drop_unstored_row(rt, "middle-0") is False  # nor does the one-row drop take it


def add_linked_sessions(runtime, links: dict[str, str | None], age_s: float = 10) -> None:
    """Session rows by id, each naming its previous one (None: none), created and updated ``age_s`` ago."""
    stamp = time.time() - age_s
    with runtime.db.transaction() as c:
        c.executemany("INSERT INTO sessions(session_id, previous_session_id, created_at, updated_at) VALUES (?,?,?,?)",
                      [(sid, previous, stamp, stamp) for sid, previous in links.items()])


def session_ids(runtime) -> set[str]:
    return {str(r[0]) for r in raw(runtime).execute("SELECT session_id FROM sessions")}


def test_gc_drops_empty_rows_that_only_name_each_other_and_keeps_what_a_stored_session_follows(tmp_path, backend):
    # A resume loop (a and b each the other's previous), a self-loop, and a chain of empty rows nothing stored
    # follows all go; an empty loop or chain a stored session follows stays whole, and a stored row always stays.
    rt = runtime_with(tmp_path, empty_lifecycle_gc_threshold=1, empty_lifecycle_gc_max_age_hours=0.0)
    add_linked_sessions(rt, {"loop-a": "loop-b", "loop-b": "loop-a", "self": "self",
                             "chain-1": None, "chain-2": "chain-1", "chain-3": "chain-2",
                             "held-a": "held-b", "held-b": "held-a", "stored": "held-a",
                             "kept-1": None, "kept-2": "kept-1", "young-after": "kept-2",
                             "full-a": "full-b", "full-b": "full-a"})
    seed(rt, "stored")
    seed(rt, "full-a")
    with rt.db.transaction() as c:  # updated now: too young for the tidy-up, so what it follows stays too
        c.execute("UPDATE sessions SET created_at=?, updated_at=? WHERE session_id='young-after'",
                  (time.time() + 3600, time.time() + 3600))
    assert maintenance.gc_empty_lifecycle(rt) == 6
    assert session_ids(rt) == {"held-a", "held-b", "stored", "kept-1", "kept-2", "young-after", "full-a", "full-b"}
    assert rt.store.session("stored").previous_session_id == "held-a"


def test_gc_keeps_a_long_chain_and_what_a_bound_session_follows_and_drops_empty_rows_naming_a_kept_one(tmp_path,
                                                                                                      backend):
    # a stored session at the end of 60 empty rows keeps them all (the walk back is one step per row); a
    # session bound here keeps the empty row it follows; an empty row that follows a kept one keeps nothing
    rt = runtime_with(tmp_path, empty_lifecycle_gc_threshold=1, empty_lifecycle_gc_max_age_hours=0.0)
    links: dict[str, str | None] = {f"long-{i}": f"long-{i - 1}" if i else None for i in range(60)}
    links.update({"long-head": "long-59", "bound-prev": None, "bound": "bound-prev", "branch-a": "long-30",
                  "branch-b": "branch-a"})
    add_linked_sessions(rt, links)
    seed(rt, "long-head")
    rt.bind("bound", "active")
    assert maintenance.gc_empty_lifecycle(rt) == 2
    assert session_ids(rt) == {*(f"long-{i}" for i in range(60)), "long-head", "bound-prev", "bound"}


def test_the_one_row_drop_takes_a_row_only_when_no_other_row_follows_it(tmp_path, backend):
    rt = runtime_with(tmp_path)
    add_linked_sessions(rt, {"loop-a": "loop-b", "loop-b": "loop-a", "self": "self", "alone": None})
    assert maintenance.drop_unstored_row(rt, "loop-a") is False  # loop-b, which stays, follows it
    assert maintenance.drop_unstored_row(rt, "self") is True  # following itself keeps nothing
    assert maintenance.drop_unstored_row(rt, "alone") is True
    assert session_ids(rt) == {"loop-a", "loop-b"}


def test_the_one_row_drop_seeks_the_rows_that_follow_it_and_reads_no_whole_table(tmp_path, backend):
    # The tidy-up at every session end: its statement must find "who names this row as previous" on an
    # index, whatever the size of the sessions table (a whole-table read per end grows with history).
    sqlite_only(backend, "SQLite's plan of the statement as run")
    rt = runtime_with(tmp_path)
    add_linked_sessions(rt, {f"s{i}": f"s{i - 1}" if i % 3 == 0 and i else None for i in range(300)})
    conn = rt.db.connect()
    ran: list[str] = []
    conn.set_trace_callback(ran.append)  # each statement as run, its parameters in place
    try:
        assert maintenance.drop_unstored_row(rt, "s7") is True
    finally:
        conn.set_trace_callback(None)
    [delete] = [sql for sql in ran if sql.lstrip().upper().startswith("DELETE FROM SESSIONS")]
    plan = [str(r[3]) for r in conn.execute(f"EXPLAIN QUERY PLAN {delete}")]
    assert any("USING INDEX sessions_previous" in step for step in plan), plan
    # every table is sought by key; only the statement's own short lists (the row, what it needs) are read through
    scanned = {step.split()[1] for step in plan if step.startswith("SCAN ")}
    assert scanned <= {"dropped", "d", "needed", "w"}, plan


def server_plan(rt, only: str, setting: str) -> str:
    """The server's plan of the empty-row deletion (``only``: the one-row form) over 300 sessions, every
    third naming the one before, with ``setting`` in force for the statement."""
    add_linked_sessions(rt, {f"s{i}": f"s{i - 1}" if i % 3 == 0 and i else None for i in range(300)})
    with rt.db.transaction() as conn:
        conn.execute(f"SET LOCAL {setting}")
        return "\n".join(str(r[0]) for r in conn.execute(
            f"EXPLAIN {emptyrows.deletion((), only, True)}", emptyrows.deletion_arguments(time.time(), (), only, True)))


def test_the_one_row_drop_can_seek_the_rows_that_follow_it_on_the_server(tmp_path, backend):
    # the server's planner picks by table size: with sequential reads priced out, the plan shows the
    # partial index serves the statement (its predicate is implied by the equality it seeks)
    server_only(backend)
    rt = runtime_with(tmp_path)
    plan = server_plan(rt, "s7", "enable_seqscan = off")
    assert "sessions_previous" in plan and "Seq Scan on sessions" not in plan, plan
    assert maintenance.drop_unstored_row(rt, "s7") is True


def test_the_whole_tidy_up_on_the_server_sets_what_stays_apart_by_a_join_not_a_look_up_per_row(tmp_path, backend):
    # "id NOT IN (SELECT id FROM needed)" can only be a subplan on a server (needed.id might be NULL to the
    # planner); once needed outgrows work_mem it is a list read through for every candidate, so a table of
    # 200,000 sessions, half of them empty, ran past the statement timeout. An anti-join spills to disk instead.
    server_only(backend)
    rt = runtime_with(tmp_path, empty_lifecycle_gc_threshold=1, empty_lifecycle_gc_max_age_hours=0.0)
    plan = server_plan(rt, "", "work_mem = '64kB'")  # stands in for a table whose rows outgrow the default
    per_row = [line for line in plan.splitlines() if "NOT (SubPlan" in line or "NOT (hashed SubPlan" in line]
    assert not per_row and "Anti Join" in plan, plan
    assert maintenance.gc_empty_lifecycle(rt) == 300 and session_ids(rt) == set()  # empty rows naming empty rows


def test_the_whole_tidy_up_on_the_server_judges_each_rows_emptiness_once(tmp_path, backend):
    # on a server "is a candidate" is asked of the rows that follow a candidate, and of the rows the walk back
    # reaches, as a look-up in the candidates already read: the emptiness sub-queries again hashed the whole
    # table at each step (200,000 sessions, a third of the empty ones continued: most of the statement)
    server_only(backend)
    plan = server_plan(runtime_with(tmp_path), "", "enable_seqscan = off")
    assert len(re.findall(r" on messages ", plan)) == 1, plan


def test_the_server_plans_the_tidy_up_without_jit_in_its_own_transaction_only(tmp_path, backend):
    server_only(backend)
    rt = runtime_with(tmp_path)
    add_linked_sessions(rt, {f"s{i}": None for i in range(20)})
    conn = rt.db.connect()
    if not conn.execute("SELECT pg_jit_available()").fetchone()[0]:  # a plan would show no JIT with or without
        pytest.skip("this PostgreSQL server was built without JIT: nothing to turn off")
    conn.execute("SET jit = on")
    conn.execute("SET jit_above_cost = 0")  # this connection would compile every statement
    with rt.db.transaction() as tx:
        emptyrows.lock_on_server(tx, time.time(), (), "")
        assert tx.execute("SHOW jit").fetchone()[0] == "off"
        plan = "\n".join(str(r[0]) for r in tx.execute(
            f"EXPLAIN {emptyrows.deletion((), '', True)}",
            emptyrows.deletion_arguments(time.time(), (), "", True)))
    assert "JIT" not in plan, plan
    assert conn.execute("SHOW jit").fetchone()[0] == "on"  # the setting ended with the transaction


def test_gc_does_nothing_when_disabled(tmp_path):
    rt = runtime_with(tmp_path, empty_lifecycle_gc_enabled=False, empty_lifecycle_gc_threshold=1,
                      empty_lifecycle_gc_max_age_hours=0.0)
    add_empty_sessions(rt, 5, age_s=10)
    assert maintenance.gc_empty_lifecycle(rt) == 0 and count_sessions(rt) == 5


def test_startup_runs_the_gc(tmp_path):
    rt = runtime_with(tmp_path, empty_lifecycle_gc_threshold=2, empty_lifecycle_gc_max_age_hours=1.0,
                      fts_integrity_check_interval_hours=-1.0)
    add_empty_sessions(rt, 4, age_s=7200)
    report = maintenance.startup(rt, background=False)
    assert report is not None and report.gc_deleted == 4 and count_sessions(rt) == 0


def test_deep_check_schedule_is_a_pure_decision():
    assert maintenance.deep_check_due(24, None, 100.0)
    assert maintenance.deep_check_due(0, 99.0, 100.0)
    assert not maintenance.deep_check_due(-1, None, 100.0)
    assert not maintenance.deep_check_due(24, 100.0, 100.0 + 23 * 3600)
    assert maintenance.deep_check_due(24, 100.0, 100.0 + 24 * 3600)
    # only a negative interval means never: one that is not a number still allows the first check
    # (never checked) and no later one
    assert maintenance.deep_check_due(float("nan"), None, 100.0)
    assert not maintenance.deep_check_due(float("nan"), 100.0, 100.0 + 10**9)
