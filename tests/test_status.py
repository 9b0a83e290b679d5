"""``build_status``: engine facts, store and DAG counts, filters, lifecycle, identity, config."""
from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import threading

import pytest
from conftest import ROOT, assistant, make_config, user
from test_command import shippers_finish  # noqa: F401  (autouse: background shipping ends with the test)

from hermes_trove.config import SPEC
from hermes_trove.engine import TroveEngine
from hermes_trove.ops import install, status
from hermes_trove.runtime import build_runtime, store_fix
from hermes_trove.store import SessionKey

BACKENDS = ("sqlite", "postgresql")
UNREACHABLE = "postgresql://trove@127.0.0.1:1/trove"  # nothing listens on port 1: refused at once


def file_store_only(backend: str) -> None:
    if backend == "postgresql":
        pytest.skip("about the SQLite file at TROVE_DATABASE_PATH; a PostgreSQL store's outage is tested below")


def test_status_without_an_engine_says_unbound_plainly_and_still_counts_the_database(runtime):
    runtime.store.append(SessionKey("old"), [user("hello"), assistant("hi")])
    s = status.build_status(runtime)
    assert s["session_id"] == "(unbound)" and s["bound"] is False
    assert s["engine"]["session_id"] == "(unbound)"
    assert s["store"]["total_messages"] == 2 and s["store"]["total_sessions"] == 1
    assert "session" not in s["store"] and "lifecycle" not in s
    assert s["runtime"]["healthy"] is True and s["runtime"]["database_path"] == runtime.db.path


def test_status_with_no_runtime_at_all_does_not_raise():
    assert status.build_status(None) == {"session_id": "(unbound)", "error": "no runtime"}


def test_status_of_a_bound_session_reports_counts_pressure_dag_and_lifecycle(engine):
    ids = engine.runtime.store.ingest(engine.state.key, [user("one"), assistant("two"), user("three")]).store_ids
    engine.runtime.dag.add_leaf("s1", "a summary", ids[:2], token_count=3, source_token_count=12,
                                earliest_at=None, latest_at=None)
    engine.update_from_response({"prompt_tokens": 22400, "completion_tokens": 10})
    s = status.build_status(engine.runtime, engine.snapshot())
    assert s["session_id"] == "s1" and s["bound"] is True
    assert s["engine"]["threshold_tokens"] == 44800
    assert s["context_pressure"] == {"last_prompt_tokens": 22400, "threshold_tokens": 44800, "ratio": 0.5,
                                     "measured": True}
    assert s["store"]["session"]["messages"] == 3
    assert s["dag"]["nodes"] == 1 and s["dag"]["depths"]["d0"]["source_tokens"] == 12
    assert s["lifecycle"]["recorded"] and s["lifecycle"]["frontier_store_id"] == 0
    assert s["lifecycle"]["last_rotate_at"] is None


def test_a_named_session_is_reported_without_an_engine(runtime):
    runtime.store.append(SessionKey("cli-7", platform="cli"), [user("x")])
    s = status.build_status(runtime, session_id="cli-7")
    assert s["session_id"] == "cli-7" and s["store"]["session"]["messages"] == 1


def test_filters_show_an_ignored_session_and_the_ignored_message_count(tmp_path):
    pytest.importorskip("regex")  # message filters need it; without it they are disabled
    rt = build_runtime(make_config(tmp_path, ignore_session_patterns=("cron_*",),
                                   ignore_message_patterns=("^HEARTBEAT",)))
    eng = TroveEngine(rt)
    eng.on_session_start("cron_1", platform="cli")
    f = status.build_status(eng.runtime, eng.snapshot())["session_filters"]
    assert f["current_session_ignored"] and f["matched_pattern"] == "cron_*"
    live = TroveEngine(rt)
    live.on_session_start("chat", platform="cli")
    live.ingest([user("HEARTBEAT ok"), user("real question")])
    f = status.build_status(live.runtime, live.snapshot())["session_filters"]
    assert not f["current_session_ignored"] and f["ignored_message_count"] == 1
    assert f["ignore_message_patterns"] == ["^HEARTBEAT"] and f["message_filter_state"] == "on"


def test_config_lists_every_variable_with_its_source(tmp_path):
    s = status.build_status(build_runtime(make_config(tmp_path)))
    assert set(s["config"]) == {v.name for v in SPEC}
    assert s["config"]["TROVE_FRESH_TAIL_COUNT"] == {"value": 32, "source": "default"}
    assert s["runtime"]["token_counter"].startswith(("tiktoken", "estimate"))


def test_git_identity_is_null_outside_a_checkout(tmp_path):
    install.git_identity.cache_clear()
    assert install.git_identity(str(tmp_path)) == {"plugin_git_commit": None, "plugin_git_branch": None,
                                                  "plugin_git_dirty": None}


def test_git_identity_names_commit_branch_and_dirtiness_of_a_checkout(tmp_path):
    repo = tmp_path / "plugin"
    repo.mkdir()

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                              env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
                                   "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
                                   "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}).stdout.strip()

    try:
        git("init", "-q", "-b", "feature")
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("git is not available")
    (repo / "f.txt").write_text("1")
    git("add", "f.txt")
    git("commit", "-q", "-m", "one")
    install.git_identity.cache_clear()
    ident = install.git_identity(str(repo))
    assert ident == {"plugin_git_commit": git("rev-parse", "HEAD"), "plugin_git_branch": "feature",
                     "plugin_git_dirty": False}
    (repo / "f.txt").write_text("2")
    install.git_identity.cache_clear()
    assert install.git_identity(str(repo))["plugin_git_dirty"] is True
    sub = repo / "nested"
    sub.mkdir()
    assert install.git_identity(str(sub))["plugin_git_commit"] is None  # inside, but not the checkout root


def test_status_reports_a_broken_database_instead_of_raising(tmp_path, backend):
    file_store_only(backend)
    blocker = tmp_path / "db-is-a-directory"
    blocker.mkdir()
    rt = build_runtime(make_config(tmp_path, database_path=str(blocker)))
    s = status.build_status(rt)
    assert s["runtime"]["healthy"] is False and "error" in s["runtime"]
    assert "store_error" in s


def test_a_healthy_store_says_ok_and_overall_healthy(runtime):
    runtime.db.connect()
    s = status.build_status(runtime)
    assert s["overall"] == "healthy" and s["store_health"] == {"usable": True, "database_path": runtime.db.path,
                                                                "state": "ok"}


def test_an_unusable_store_makes_status_unhealthy_with_the_reason_and_fix(tmp_path, backend):
    file_store_only(backend)
    blocker = tmp_path / "afile"
    blocker.write_text("x", encoding="utf-8")
    rt = build_runtime(make_config(tmp_path, database_path=str(blocker / "sub" / "trove.db")))
    s = status.build_status(rt)
    health = s["store_health"]
    assert s["overall"] == "unhealthy" and health["usable"] is False
    assert health["reason"] == f"its parent {blocker} is not a directory"
    assert health["state"].startswith("unusable: its parent") and "built-in compressor" in health["state"]
    assert "TROVE_DATABASE_PATH" in health["fix"] and not (blocker / "sub").exists()


def test_a_directory_at_the_database_path_is_unhealthy(tmp_path, backend):
    file_store_only(backend)
    blocker = tmp_path / "db-is-a-directory"
    blocker.mkdir()
    s = status.build_status(build_runtime(make_config(tmp_path, database_path=str(blocker))))
    assert s["overall"] == "unhealthy" and "is a directory" in s["store_health"]["reason"]


def test_a_server_store_reports_its_backend_and_outbox_instead_of_file_sizes(runtime, backend):
    runtime.store.ingest(SessionKey("s1"), [user("hello")])
    section = status.build_status(runtime)["runtime"]
    assert section["backend"] == backend and section["healthy"] is True
    if backend == "sqlite":
        assert section["database_bytes"] > 0 and "outbox" not in section
        assert section["payload_store"] == str(runtime.payload_dir)
    else:
        assert section["payload_store"].startswith("the payloads table of postgresql://")
        assert "database_bytes" not in section and "wal_bytes" not in section
        assert section["outbox"]["outbox"] == runtime.store.outbox.path and section["outbox"]["reachable"] is True
        assert "pg0005_payloads" in section["schema_migrations"]


def test_the_outbox_figures_are_those_after_the_status_shipped_what_waited(tmp_path, backend):
    if backend == "sqlite":
        pytest.skip("about a PostgreSQL store's outbox")
    rt = build_runtime(make_config(tmp_path))
    rt.store.outbox.store.ingest(SessionKey("s1"), [user("written while the URL was wrong"), assistant("ok")])
    s = status.build_status(rt)  # as `hermes trove status` after the URL was corrected: it ships them
    assert s["store"]["total_messages"] == 2
    outbox = s["runtime"]["outbox"]
    assert outbox["pending"] == 0 and outbox["oldest_pending_at"] is None and outbox["shipped_this_process"] == 2


def test_an_unreachable_server_makes_status_unhealthy_with_the_reason_and_fix(tmp_path, backend):
    if backend == "sqlite":
        pytest.skip("about a PostgreSQL server; the SQLite file's failures are tested above")
    rt = build_runtime(make_config(tmp_path, database_url=UNREACHABLE + "?password=hunter2"))
    s = status.build_status(rt)
    health = s["store_health"]
    assert s["overall"] == "unhealthy" and health["usable"] is False and s["runtime"]["healthy"] is False
    assert "OperationalError" in health["reason"] and "TROVE_DATABASE_URL" in health["fix"]
    assert "store_error" in s and "hunter2" not in str(s)


@pytest.mark.parametrize("secret_part", ["password = hunter2", "password='my hunter2'"])
def test_a_libpq_password_stays_out_of_status_and_the_log(tmp_path, backend, caplog, secret_part):
    if backend == "sqlite":
        pytest.skip("about a PostgreSQL URL")
    url = f"host=127.0.0.1 port=1 user=trove {secret_part} dbname=trove"
    s = status.build_status(build_runtime(make_config(tmp_path, database_url=url)))
    assert s["store_health"]["usable"] is False and "***" in s["runtime"]["database_path"]
    assert "hunter2" not in str(s) and "hunter2" not in caplog.text and caplog.records


@pytest.mark.parametrize("problem, fix", [
    ("database", "the database in TROVE_DATABASE_URL does not exist: create it"),
    ("role", "the user in TROVE_DATABASE_URL does not exist on the server: create it"),
    ("extension", "CREATE EXTENSION IF NOT EXISTS unaccent SCHEMA public"),
    ("schema", "give it a schema (CREATE SCHEMA <name> AUTHORIZATION <user>)"),
])
def test_a_server_that_answers_but_cannot_hold_the_store_names_the_fix(tmp_path, backend, pg_url, pg_schema,
                                                                      problem, fix):
    if backend == "sqlite":
        pytest.skip("about a PostgreSQL URL")
    from psycopg.conninfo import make_conninfo

    url = {"database": make_conninfo(pg_url, dbname="trove_no_such_database"),
           "role": make_conninfo(pg_url, user="trove_no_such_role"),
           "extension": make_conninfo(pg_url, options=f"-csearch_path={pg_schema}"),  # unaccent lives in public
           "schema": make_conninfo(pg_url, options="-csearch_path=trove_no_such_schema,public")}[problem]
    health = status.build_status(build_runtime(make_config(tmp_path, database_url=url)))["store_health"]
    assert health["usable"] is False and fix in health["fix"]


def test_a_refused_password_names_the_fix():
    reason = 'OperationalError: connection failed: FATAL:  password authentication failed for user "u"'
    assert store_fix("postgresql://u:***@db/trove", reason).startswith("the server refused the password")


def stalled_server() -> tuple[str, list[socket.socket]]:
    """A URL whose listener accepts every connection and never answers (a hung server), and the
    connections it accepted."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: [accepted.append(listener.accept()[0]) for _ in iter(int, 1)],
                     daemon=True).start()
    return f"postgresql://trove@127.0.0.1:{listener.getsockname()[1]}/trove", accepted


def test_a_new_process_asks_a_stalled_server_once_and_says_the_outbox_cannot_ship(tmp_path, backend):
    if backend == "sqlite":
        pytest.skip("about a PostgreSQL server")
    url, accepted = stalled_server()
    rt = build_runtime(make_config(tmp_path, database_url=url))  # what a new `status` process starts with
    rt.store.outbox.store.ingest(SessionKey("s1"), [user("an earlier process wrote"), assistant("kept on disk")])
    s = status.build_status(rt)
    outbox = s["runtime"]["outbox"]
    assert s["overall"] == "unhealthy" and s["store_health"]["usable"] is False
    assert outbox["reachable"] is False and "timeout" in outbox["last_error"] and outbox["pending"] == 2
    assert len(accepted) == 1  # one bounded probe; no section waits on the server again


def test_inspect_lists_a_sessions_payload_refs_and_which_no_longer_read(tmp_path):
    from test_payloads import overwrite_stored, png_uri

    from hermes_trove.payloads.sidecar import refs_in

    rt = build_runtime(make_config(tmp_path))
    rt.store.ingest(SessionKey("s1"), [user(png_uri(seed=1)), user(png_uri(seed=2))])
    rows = rt.store.page("s1")
    overwrite_stored(rt, refs_in(rows[0].content)[0], "not the payload")
    found = status.build_inspect(rt, None, "s1")["externalized_refs"]
    assert [(r["store_id"], r["readable"]) for r in found["refs"]] == [(rows[1].store_id, True),
                                                                      (rows[0].store_id, False)]
    assert found["unreadable"] == 1 and "integrity" in found["refs"][1]["reason"]
    assert found["payload_dir"] == status.build_status(rt)["runtime"]["payload_store"]


def test_status_in_another_process_shows_the_newest_compaction_the_store_holds(tmp_path):
    # the usual operator case: `hermes trove status --session s1` at a shell, while the chat that compacted
    # s1 ran (and kept its report) in a process of its own
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT / 'tests')!r})
        from pathlib import Path
        from conftest import make_config, make_engine, user, assistant
        from hermes_trove.runtime import build_runtime
        rt = build_runtime(make_config(Path({str(tmp_path)!r}), fresh_tail_count=4))
        eng = make_engine(rt, lambda *a, **k: "the lantern codes were noted", session="s1", context_length=64000)
        chat = [m for i in range(8) for m in (user(f"turn {{i}}: lantern code {{1000 + i}}"), assistant("noted"))]
        eng.ingest(chat)
        eng.compress(chat, current_tokens=2000, force=True)
        assert eng.state.last_status == "compacted", eng.state.last_reason
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rt = build_runtime(make_config(tmp_path, fresh_tail_count=4))  # this process compacted nothing
    nodes = sorted(rt.dag.visible("s1"), key=lambda n: n.node_id, reverse=True)
    assert nodes and len(rt.compactions) == 0
    shown = status.build_status(rt, None, session_id="s1")["last_compaction"]
    assert shown["source"] == "store" and shown["last_compression_status"] == "compacted"
    assert [n["node_id"] for n in shown["newest_nodes"]] == [n.node_id for n in nodes][:status.NEWEST_NODES]
    newest = shown["newest_nodes"][0]
    covered = rt.dag.descendant_store_ids(nodes[0].node_id)
    assert (newest["first_store_id"], newest["last_store_id"], newest["messages"]) == \
        (covered[0], covered[-1], len(covered))
    assert newest["depth"] == nodes[0].depth and newest["tokens"] == nodes[0].token_count > 0
    assert shown["written_at"] == newest["written_at"] == nodes[0].created_at > 0  # epoch seconds, as *_at keys are
    assert shown["covered_through_store_id"] == rt.dag.highest_covered_store_id("s1") < rt.store.count("s1") + 1
    # a session with no summary nodes has no such section
    rt.store.append(SessionKey("s2"), [user("hello"), assistant("hi")])
    assert "last_compaction" not in status.build_status(rt, None, session_id="s2")
    # a copy bound to s1 here (a resumed chat) that has run no compress call yet shows the stored one too;
    # once a copy here runs a compress call, its own report speaks and the section is not repeated
    eng = TroveEngine(rt, complete=lambda *a, **k: "the lantern codes again")
    eng.update_model("m", 64000)
    eng.on_session_start("s1", platform="cli", conversation_id=None)
    assert eng.snapshot()["last_compression_status"] == "idle"
    assert status.build_status(rt, eng.snapshot())["last_compaction"] == shown
    chat = [m for i in range(8, 16) for m in (user(f"turn {i}: lantern code {1000 + i}"), assistant("noted"))]
    eng.ingest(chat)
    eng.compress(chat, current_tokens=2000, force=True)
    assert eng.snapshot()["last_compression_status"] not in ("idle", "error"), eng.state.last_reason
    assert "last_compaction" not in status.build_status(rt, eng.snapshot())


def test_the_stored_compaction_reads_damaged_node_values_as_unknown_not_as_an_error(runtime, backend):
    file_store_only(backend)  # a server's typed columns take no text in a number column
    ids = runtime.store.append(SessionKey("s1"), [user(f"harbour note {i}") for i in range(4)])
    leaf = runtime.dag.add_leaf("s1", "harbour notes", ids[:3], token_count=9, source_token_count=30,
                                earliest_at=None, latest_at=None)
    with runtime.db.transaction() as conn:
        conn.execute("UPDATE summary_nodes SET created_at = 'yesterday', depth = 'deep', token_count = -5,"
                     " source_token_count = 1e300 WHERE node_id = ?", (leaf,))
    report = status.build_status(runtime, None, session_id="s1")
    assert "store_error" not in report
    (node,) = report["last_compaction"]["newest_nodes"]
    assert node == {"node_id": leaf, "depth": 0, "written_at": None, "tokens": 0, "source_tokens": 0,
                    "first_store_id": ids[0], "last_store_id": ids[2], "messages": 3}
    assert report["last_compaction"]["written_at"] is None


def test_the_stored_compaction_counts_each_raw_message_once_however_the_lineage_repeats_it(runtime):
    # an imported leaf may name one message twice, and two leaves a condensed node holds may overlap
    # (the doctor's "covered by more than one frontier node"): `messages` counts raw messages, not lineage rows
    ids = runtime.store.append(SessionKey("s1"), [user(f"harbour note {i}") for i in range(5)])
    times = dict(token_count=5, source_token_count=20, earliest_at=None, latest_at=None)
    twice = runtime.dag.add_leaf("s1", "notes 0-2", [ids[0], ids[1], ids[1], ids[2]], **times)
    other = runtime.dag.add_leaf("s1", "notes 2-4", ids[2:], **times)
    top = runtime.dag.add_condensed("s1", 1, "all the notes", [twice, other], **times)
    report = status.build_status(runtime, None, session_id="s1")
    shown = {n["node_id"]: n for n in report["last_compaction"]["newest_nodes"]}
    assert [shown[k]["messages"] for k in (top, other, twice)] == [5, 3, 3]
    assert (shown[top]["first_store_id"], shown[top]["last_store_id"]) == (ids[0], ids[4])


@pytest.mark.parametrize("cell", ["'lost'", "2.5"])
def test_a_damaged_lineage_cell_is_left_out_of_the_stored_compaction_as_trove_expand_leaves_it(runtime, backend,
                                                                                                cell):
    """A lineage cell holding text or a fraction is no id: status stays readable (no store_error, the
    lifecycle kept) and counts the node's messages as trove_expand reads them."""
    file_store_only(backend)  # a server's typed columns take neither in an id column
    ids = runtime.store.append(SessionKey("s1"), [user(f"harbour note {i}") for i in range(4)])
    leaf = runtime.dag.add_leaf("s1", "harbour notes", ids[:3], token_count=9, source_token_count=30,
                                earliest_at=None, latest_at=None)
    with runtime.db.transaction() as conn:
        conn.execute(f"UPDATE node_messages SET store_id = {cell} WHERE node_id = ? AND ordinal = 2", (leaf,))
    report = status.build_status(runtime, None, session_id="s1")
    assert "store_error" not in report and "lifecycle" in report
    (node,) = report["last_compaction"]["newest_nodes"]
    readable = runtime.dag.source_ids(runtime.dag.get(leaf))
    assert node["messages"] == len(readable) == 2, node
    assert (node["first_store_id"], node["last_store_id"]) == (ids[0], ids[1])
