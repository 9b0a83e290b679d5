"""The PostgreSQL test harness itself, against the real server (tests/conftest.py, docs/testing.md).

Each test gets an empty schema of its own through ``pg_database_url``; the schema is dropped
afterwards; ``unaccent`` is usable from it; and ``both_backends`` (or a module's ``BACKENDS``) runs a
test once per backend, every ``make_config`` of the PostgreSQL run selecting that test's schema.
"""
from __future__ import annotations

import uuid

import pytest
from conftest import drop_schema, with_search_path

psycopg = pytest.importorskip("psycopg")
from psycopg import sql  # noqa: E402


def tables(conn) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        " ORDER BY table_name")]


def schema_exists(url: str, schema: str) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is not None


@pytest.mark.both_backends
def test_config_names_the_backend_it_runs_on(config, backend, request, tmp_path):
    assert request.node.name.endswith(f"[{backend}]")
    if backend == "sqlite":
        assert config.database_url == ""
        assert config.database_path.endswith("trove.db")
    else:
        assert config.database_url.startswith("postgresql://")
        assert "options=-csearch_path%3Dt_" in config.database_url and config.database_url.endswith(",public")
        with psycopg.connect(config.database_url) as conn:
            assert conn.execute("SELECT current_schema()").fetchone()[0].startswith("t_")
    from conftest import make_config

    assert make_config(tmp_path / "other").database_url == config.database_url  # a test's own configs follow


def test_tests_without_the_marker_are_not_parametrized(request, backend):
    assert "[" not in request.node.name and backend == "sqlite"


def test_the_schema_search_path_reaches_psycopg_sessions(pg_database_url, pg_schema):
    with psycopg.connect(pg_database_url) as conn:
        assert conn.execute("SELECT current_schema()").fetchone()[0] == pg_schema
        assert conn.execute("SELECT current_schemas(false)").fetchone()[0] == [pg_schema, "public"]


def test_each_test_schema_starts_empty_and_sees_no_other(pg_url, pg_database_url, pg_schema):
    with psycopg.connect(pg_database_url, autocommit=True) as conn:
        assert tables(conn) == []
        conn.execute("CREATE TABLE messages (id bigint PRIMARY KEY, body text)")
        conn.execute("INSERT INTO messages VALUES (1, 'mine')")
        assert tables(conn) == ["messages"]
    other = f"t_{uuid.uuid4().hex}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(other)))
    try:
        with psycopg.connect(with_search_path(pg_url, other, "public"), autocommit=True) as conn:
            assert tables(conn) == []
            assert conn.execute("SELECT to_regclass('messages')").fetchone()[0] is None
    finally:
        assert drop_schema(pg_url, other)


def test_the_schema_is_dropped_after_the_test(pg_url, request):
    # Registered before the fixture is set up, so it runs after the fixture's teardown (LIFO).
    seen: list[str] = []

    def check_dropped() -> None:
        if seen and schema_exists(pg_url, seen[0]):
            pytest.fail(f"schema {seen[0]} survived its test")

    request.addfinalizer(check_dropped)
    schema = request.getfixturevalue("pg_schema")
    seen.append(schema)
    with psycopg.connect(request.getfixturevalue("pg_database_url"), autocommit=True) as conn:
        conn.execute("CREATE TABLE summaries (id bigint)")
    assert schema_exists(pg_url, schema)


def test_a_connection_left_in_a_transaction_does_not_keep_the_schema(pg_url):
    schema = f"t_{uuid.uuid4().hex}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    leftover = psycopg.connect(with_search_path(pg_url, schema, "public"))
    try:
        leftover.execute("CREATE TABLE held (id bigint)")
        leftover.commit()
        leftover.execute("SELECT * FROM held")  # idle in transaction, holding a lock on `held`
        assert drop_schema(pg_url, schema, lock_timeout="200ms")
        assert not schema_exists(pg_url, schema)
    finally:
        leftover.close()


def test_unaccent_is_available_from_every_test_schema(pg_database_url):
    with psycopg.connect(pg_database_url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS unaccent SCHEMA public")
        where = conn.execute("SELECT extnamespace::regnamespace::text FROM pg_extension"
                             " WHERE extname = 'unaccent'").fetchone()
        assert where == ("public",)
        assert conn.execute("SELECT unaccent('Crème brûlée à São Paulo')").fetchone()[0] == \
            "Creme brulee a Sao Paulo"


@pytest.mark.parametrize("url, expected", [
    ("postgresql://u@127.0.0.1:5/db", "postgresql://u@127.0.0.1:5/db?options=-csearch_path%3Ds1,public"),
    ("postgresql://u@127.0.0.1:5/db?sslmode=disable",
     "postgresql://u@127.0.0.1:5/db?sslmode=disable&options=-csearch_path%3Ds1,public"),
    ("postgres://u@h/db?options=-c%20work_mem%3D8MB&connect_timeout=5",
     "postgres://u@h/db?options=-c%20work_mem%3D8MB%20-csearch_path%3Ds1,public&connect_timeout=5"),
], ids=["plain", "query", "merged-options"])
def test_with_search_path_adds_or_merges_the_options_parameter(url, expected):
    assert with_search_path(url, "s1", "public") == expected


def test_with_search_path_keeps_the_url_query_working_with_psycopg(pg_url, pg_schema):
    url = with_search_path(pg_url + ("&" if "?" in pg_url else "?") + "options=-c%20work_mem%3D8MB"
                           + "&application_name=trove-harness", pg_schema, "public")
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT current_schema(), current_setting('work_mem'),"
                            " current_setting('application_name')").fetchone() == (pg_schema, "8MB", "trove-harness")


def test_with_search_path_accepts_a_key_value_connection_string(pg_url, pg_schema):
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    dsn = make_conninfo("", **conninfo_to_dict(pg_url), options="-c work_mem=8MB")
    with psycopg.connect(with_search_path(dsn, pg_schema, "public")) as conn:
        assert conn.execute("SELECT current_schema(), current_setting('work_mem')").fetchone() == (pg_schema, "8MB")


def test_an_embedding_worker_a_test_leaves_running_is_stopped_before_its_schema_is_reused(request, tmp_path):
    import dataclasses

    from conftest import make_config

    from hermes_trove.retrieval import indexer
    from hermes_trove.runtime import build_runtime

    left: list = []

    def check_stopped() -> None:  # after the fixture's teardown (registered before it: LIFO)
        if left and left[0].is_alive():
            left[0].stop()
            pytest.fail("the worker outlived its test: the next test on the schema would be handed it")

    request.addfinalizer(check_stopped)
    url = request.getfixturevalue("pg_store_url")
    cfg = dataclasses.replace(make_config(tmp_path, database_url=url), embeddings_enabled=True,
                              embedding_provider="openai", embedding_model="fake-32",
                              embedding_base_url="http://127.0.0.1:9")  # refused: no pass ever migrates
    worker = indexer.start_background(build_runtime(cfg))
    assert worker is not None and worker.is_alive()
    left.append(worker)


@pytest.mark.filterwarnings("ignore:PostgreSQL test schema .* not reused")  # the warning expected here
def test_a_schema_whose_test_left_a_pass_running_is_dropped_not_reused(request, pg_url, monkeypatch, tmp_path):
    import threading

    import conftest

    from hermes_trove.runtime import build_runtime

    release = threading.Event()
    seen: list[str] = []

    def check_dropped() -> None:
        release.set()
        if seen and (seen[0] in conftest._POOL or schema_exists(pg_url, seen[0])):
            pytest.fail(f"schema {seen[0]} was kept for the next test while a pass of this one still ran")

    request.addfinalizer(check_dropped)
    monkeypatch.setattr(conftest, "PASSES_BUDGET_S", 0.2)  # the wait for passes gives up at once
    url = request.getfixturevalue("pg_store_url")
    build_runtime(conftest.make_config(tmp_path, database_url=url)).db.read()  # migrated: a schema to reuse
    with psycopg.connect(url, autocommit=True) as conn:
        seen.append(conn.execute("SELECT current_schema()").fetchone()[0])
    assert seen[0].startswith("t_")
    threading.Thread(target=release.wait, args=(60,), name="trove-test-linger", daemon=True).start()
