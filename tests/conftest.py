"""Test setup: import the checkout as ``hermes_trove`` and build engines on temp databases."""
from __future__ import annotations

import dataclasses
import os
import sys
import threading
import uuid
import warnings
from pathlib import Path
from typing import NoReturn
from urllib.parse import quote, unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"

# The checkout root is the package itself; as a plain sys.path entry (``python -m pytest``
# adds the working directory) its modules (tools.py, config.py, ...) would shadow the
# host's top-level packages of the same names.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT]

sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "bench"))  # simulate.py, the stand-in host loop
import _bootstrap  # noqa: E402,F401  (registers this checkout as the hermes_trove package)

from hermes_trove.config import load_config, redact_url  # noqa: E402
from hermes_trove.engine import TroveEngine  # noqa: E402
from hermes_trove.filters import offers_engine_tools  # noqa: E402
from hermes_trove.runtime import build_runtime  # noqa: E402


class _CheckoutAsPlainDirectory:
    """Collect the checkout root as a plain directory, not as a test package.

    Its ``__init__.py`` would make pytest import the checkout under its folder's name and put
    the folder's parent (or, for a name like ``hermes-trove``, the checkout itself) on sys.path.
    """

    @pytest.hookimpl(tryfirst=True)
    def pytest_collect_directory(self, path: Path, parent: pytest.Collector) -> pytest.Collector | None:
        return pytest.Dir.from_parent(parent, path=path) if path == ROOT else None


def pytest_configure(config: pytest.Config) -> None:
    # Registered as a plugin: a conftest's own hooks never see the directories above it.
    if hasattr(pytest, "Dir"):
        config.pluginmanager.register(_CheckoutAsPlainDirectory(), "trove-checkout-as-plain-directory")


# The PostgreSQL URL of the test running now on that backend (see ``backend``): every config
# ``make_config`` builds during that test selects it (in its subprocesses too, through
# TROVE_TEST_STORE_URL), so tests that build their own runtimes follow.
_BACKEND_URL: list[str] = []


def make_config(tmp_path: Path, **overrides):
    cfg = load_config({}, hermes_home=str(tmp_path))
    cfg = dataclasses.replace(cfg, database_path=str(tmp_path / "trove.db"))
    url = _BACKEND_URL[-1] if _BACKEND_URL else os.environ.get("TROVE_TEST_STORE_URL", "")
    if url and "database_url" not in overrides:
        cfg = dataclasses.replace(cfg, database_url=url)
    return dataclasses.replace(cfg, **overrides) if overrides else cfg


# Provider credentials and endpoints a developer's shell may carry; tests never see them.
PROVIDER_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENROUTER_API_KEY",
                "GOOGLE_API_KEY", "GEMINI_API_KEY", "NOUS_API_KEY", "DEEPSEEK_API_KEY", "XAI_API_KEY",
                "MISTRAL_API_KEY", "GROQ_API_KEY", "TOGETHER_API_KEY", "HF_TOKEN", "HERMES_INFERENCE_PROVIDER")
_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", ""}


def is_loopback(host: object) -> bool:
    import ipaddress

    if host is None:
        return True
    text = host.decode() if isinstance(host, bytes) else str(host)
    text = text.strip("[]").split("%", 1)[0].lower()
    if text in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        return False


class OutgoingConnectionRefused(ConnectionRefusedError):
    """A test tried to reach a host other than 127.0.0.1 (tests never reach a real provider)."""


def _guard_sockets(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex
    real_create, real_getaddrinfo = socket.create_connection, socket.getaddrinfo

    def check(sock: socket.socket | None, address: object) -> None:
        if sock is not None and sock.family not in (socket.AF_INET, socket.AF_INET6):
            return  # Unix sockets stay local
        host = address[0] if isinstance(address, tuple) and address else address
        if not is_loopback(host):
            raise OutgoingConnectionRefused(f"test network guard: connection to {address!r} refused")

    def connect(self: socket.socket, address: object) -> None:
        check(self, address)
        return real_connect(self, address)  # type: ignore[arg-type]

    def connect_ex(self: socket.socket, address: object) -> int:
        check(self, address)
        return real_connect_ex(self, address)  # type: ignore[arg-type]

    def create_connection(address: tuple, *args: object, **kwargs: object) -> socket.socket:
        check(None, address)
        return real_create(address, *args, **kwargs)  # type: ignore[arg-type]

    def getaddrinfo(host: object, *args: object, **kwargs: object) -> list:
        check(None, (host,))  # no DNS lookups of outside names either
        return real_getaddrinfo(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "create_connection", create_connection)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every test: a temporary HERMES_HOME, no provider credentials, only 127.0.0.1 reachable."""
    monkeypatch.setenv("HERMES_HOME", str(tmp_path_factory.mktemp("hermes-home")))
    for name in PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)
    _guard_sockets(monkeypatch)


@pytest.fixture(autouse=True)
def _fresh_circuit_breakers():
    """Breakers are per process; each test starts with every summary route closed."""
    from hermes_trove.compaction.summarize import BREAKERS

    BREAKERS.reset()
    yield
    BREAKERS.reset()


# Storage backends. The ``config`` fixture is SQLite's unless a module sets ``BACKENDS`` (a tuple
# of these names) or a test, class or module carries ``@pytest.mark.both_backends``: then it runs
# once per backend, ids ``[sqlite]`` and ``[postgresql]``, the second on its own empty schema.
BACKEND_NAMES = ("sqlite", "postgresql")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    backends = getattr(metafunc.module, "BACKENDS", None)
    if metafunc.definition.get_closest_marker("both_backends") is not None:
        backends = BACKEND_NAMES
    if not backends or "backend" not in metafunc.fixturenames:
        return
    unknown = [name for name in backends if name not in BACKEND_NAMES]
    if unknown:
        raise pytest.UsageError(f"{metafunc.module.__name__}.BACKENDS names {unknown}; known: {BACKEND_NAMES}")
    metafunc.parametrize("backend", list(backends), indirect=True)


@pytest.fixture(autouse=True)
def backend(request: pytest.FixtureRequest):
    """The storage backend this test runs on: "sqlite" unless parametrized (above). On
    "postgresql" every ``make_config`` of the test selects an empty schema of its own."""
    name = getattr(request, "param", "sqlite")
    if name != "postgresql":
        yield name
        return
    _BACKEND_URL.append(request.getfixturevalue("pg_store_url"))
    os.environ["TROVE_TEST_STORE_URL"] = _BACKEND_URL[-1]  # the test's subprocesses follow too
    try:
        yield name
    finally:
        _BACKEND_URL.pop()
        os.environ.pop("TROVE_TEST_STORE_URL", None)


@pytest.fixture
def config(tmp_path, backend):
    return make_config(tmp_path)


@pytest.fixture
def runtime(config):
    return build_runtime(config)


@pytest.fixture
def own_runtime(tmp_path, backend, request):
    """A runtime on a store of this test's own, for tests that damage the schema (on PostgreSQL a
    throwaway schema, dropped after, never one a later test reuses)."""
    if backend == "postgresql":
        return build_runtime(make_config(tmp_path, database_url=request.getfixturevalue("pg_database_url")))
    return build_runtime(make_config(tmp_path))


def no_model(messages, model, timeout_s, max_tokens):
    """The fake model of tests that want none: every call fails, so summaries truncate."""
    raise RuntimeError("no model in this test")


def make_engine(runtime, complete=no_model, *, session="s1", context_length=128000, platform="cli", tools=None):
    """An engine on ``runtime`` bound to ``session``, with ``complete`` as its (fake) model.

    ``complete=None`` would route to the host's auxiliary client; tests never want that. ``tools``: whether
    the host gives the agent the context engine's tools (None: as Hermes 0.19 does on ``platform``).
    """
    eng = TroveEngine(runtime, complete=complete)
    eng.update_model("fake-model", context_length)
    if offers_engine_tools(platform) if tools is None else tools:
        eng.get_tool_schemas()  # Hermes asks only an agent whose toolsets take the context engine's
    eng.on_session_start(session, platform=platform, conversation_id=None)
    return eng


@pytest.fixture
def engine(runtime):
    return make_engine(runtime)


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def assistant(text: str, calls: list | None = None) -> dict:
    msg = {"role": "assistant", "content": text}
    if calls:
        msg["tool_calls"] = calls
    return msg


def stamped(msgs: list, t0: float = 1_700_000_000.0) -> list:
    """``msgs`` with host timestamps a minute apart from ``t0``."""
    for i, m in enumerate(msgs):
        m["timestamp"] = t0 + 60 * i
    return msgs


def expected_interval(expected: str) -> tuple:
    """'2024-05-11' or '2024-05-11..2024-05-12' as the half-open day interval a table row means."""
    from datetime import date, timedelta

    first, _, last = expected.partition("..")
    return date.fromisoformat(first), date.fromisoformat(last or first) + timedelta(days=1)


def assert_means(observed: str, text: str, expected: str) -> None:
    """A time-table row: said at 15:00 UTC on ``observed``, ``text`` names one time, the interval
    ``expected`` gives, or is refused with the reason after ``unresolvable: ``."""
    from datetime import UTC, datetime

    from hermes_trove.dates import resolve_occurrences

    at = datetime.fromisoformat(observed).replace(hour=15, tzinfo=UTC)
    found = resolve_occurrences(text, at)
    assert len(found) == 1, [o.to_dict() for o in found]
    occurrence = found[0]
    if expected.startswith("unresolvable: "):
        assert occurrence.unresolved == expected.removeprefix("unresolvable: ")
        return
    assert occurrence.unresolved is None, occurrence.unresolved
    assert occurrence.start is not None and occurrence.end is not None
    assert (occurrence.start.date(), occurrence.end.date()) == expected_interval(expected)


def tool_call(call_id: str, name: str, args: str = "{}") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def tool_result(call_id: str, text: str, name: str = "terminal") -> dict:
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": text}


# PostgreSQL: a real server, never a mock. scripts/test.sh starts a throwaway one and exports its
# URL as TROVE_TEST_DATABASE_URL; each test gets an empty schema of its own (docs/testing.md).
PG_REQUIRED = os.environ.get("TROVE_PG_REQUIRED") == "1"


def _pg_unavailable(reason: str) -> NoReturn:
    if PG_REQUIRED:
        pytest.fail(f"{reason} (TROVE_PG_REQUIRED=1: PostgreSQL tests may not skip)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def pg_url() -> str:
    """The PostgreSQL test server's URL (TROVE_TEST_DATABASE_URL), checked to answer once, with the
    ``unaccent`` extension created in schema public. Skips when unset (fails under TROVE_PG_REQUIRED=1)."""
    url = os.environ.get("TROVE_TEST_DATABASE_URL", "").strip()
    if not url:
        _pg_unavailable("no PostgreSQL test server: TROVE_TEST_DATABASE_URL is unset"
                        " (scripts/test.sh starts one; see docs/testing.md)")
    try:
        import psycopg
    except ImportError:
        _pg_unavailable("psycopg is not installed (pip install -e '.[postgres]')")
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn, conn.transaction():
            # Several runs may share one server: serialize the one-time setup.
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('hermes-trove test setup'))")
            conn.execute("CREATE EXTENSION IF NOT EXISTS unaccent SCHEMA public")
    except psycopg.Error as exc:
        pytest.fail(f"PostgreSQL test server {redact_url(url)} (TROVE_TEST_DATABASE_URL) is unusable: {exc}",
                    pytrace=False)
    return url


def with_search_path(url: str, *schemas: str) -> str:
    """``url`` whose sessions start with ``search_path`` set to ``schemas``: an ``options`` query
    parameter on a URL (merged with one already there), or an ``options`` keyword on a
    ``key=value`` connection string."""
    setting = "-csearch_path=" + ",".join(schemas)
    if not url.startswith(("postgresql://", "postgres://")):
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        before = str(conninfo_to_dict(url).get("options") or "")
        return make_conninfo(url, options=f"{before} {setting}".strip())
    base, _, fragment = url.partition("#")
    head, _, query = base.partition("?")
    params = [p for p in query.split("&") if p]
    for i, param in enumerate(params):
        key, _, value = param.partition("=")
        if unquote(key) == "options":
            params[i] = "options=" + quote(f"{unquote(value)} {setting}", safe=",")
            break
    else:
        params.append("options=" + quote(setting, safe=","))
    return f"{head}?{'&'.join(params)}" + (f"#{fragment}" if fragment else "")


def drop_schema(url: str, schema: str, lock_timeout: str = "5s") -> bool:
    """DROP SCHEMA ... CASCADE, waiting at most ``lock_timeout`` for locks. Backends that still hold locks in
    the schema (a connection the test left open mid-transaction) are terminated and the drop is
    tried once more; if that fails too the schema is left behind with a warning. True if dropped."""
    import psycopg
    from psycopg import sql

    drop = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(lock_timeout)))
        for attempt in (1, 2):
            try:
                conn.execute(drop)
                return True
            except psycopg.errors.LockNotAvailable:
                if attempt == 2:
                    break
                conn.execute("SELECT pg_terminate_backend(l.pid) FROM pg_locks l"
                             " JOIN pg_class c ON c.oid = l.relation JOIN pg_namespace n ON n.oid = c.relnamespace"
                             " WHERE n.nspname = %s AND l.pid <> pg_backend_pid() GROUP BY l.pid", (schema,))
    warnings.warn(f"PostgreSQL test schema {schema} left behind: its locks were still held", stacklevel=1)
    return False


@pytest.fixture
def pg_schema(pg_url: str):
    """A new empty schema ``t_<uuid hex>`` for one test, dropped (CASCADE) after it; yields its name."""
    import psycopg
    from psycopg import sql

    schema = f"t_{uuid.uuid4().hex}"
    with psycopg.connect(pg_url, autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    yield schema
    drop_schema(pg_url, schema)


@pytest.fixture
def pg_database_url(pg_url: str, pg_schema: str):
    """A URL whose sessions see only this test's empty schema, then public (where ``unaccent`` is).
    The connections the product opened to it in this process are closed after the test."""
    from hermes_trove.pgdb import close_connections

    url = with_search_path(pg_url, pg_schema, "public")
    before = set(threading.enumerate())
    yield url
    background_passes_finish(before)
    close_connections()


def stop_index_workers(since: set) -> None:
    """Stop the embedding workers (``trove-embeddings`` threads) started since ``since``. A worker runs
    until stopped, and the process keeps one per store URL: left running on a pooled schema, it would be
    the worker the next test on that schema is handed, indexing with this test's settings."""
    from hermes_trove.retrieval.indexer import IndexWorker

    for thread in threading.enumerate():
        if isinstance(thread, IndexWorker) and thread not in since:
            thread.stop()


PASSES_BUDGET_S = 10.0


def background_passes_finish(since: set, budget_s: float | None = None) -> None:
    """Wait (bounded) for the product's background passes (``trove-*`` threads) started since
    ``since`` (the threads alive when the test began) to end."""
    import threading
    import time as _time

    deadline = _time.monotonic() + (PASSES_BUDGET_S if budget_s is None else budget_s)
    for thread in [t for t in threading.enumerate() if t.name.startswith("trove-") and t not in since]:
        thread.join(max(0.0, deadline - _time.monotonic()))


# Migrated schemas a finished PostgreSQL-backend test left empty: the next one reuses them, which
# spares it the schema's creation (about 0.4 s of DDL on this machine).
_POOL: list[str] = []


@pytest.fixture
def pg_store_url(pg_url: str):
    """A URL for one test's store: a schema holding the product's tables and no rows (from the pool,
    or new and migrated on first use). Afterwards the product's connections are closed and the
    rows are removed (identities restarted) so the next test finds it as new; a schema that took
    an opt-in set, or whose cleanup failed, is dropped instead."""
    import psycopg
    from psycopg import sql

    from hermes_trove import pgschema
    from hermes_trove.pgdb import PgConnection, close_connections

    schema = _POOL.pop() if _POOL else f"t_{uuid.uuid4().hex}"
    url = with_search_path(pg_url, schema, "public")
    with psycopg.connect(pg_url, autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
    before = set(threading.enumerate())
    yield url
    from hermes_trove.ops import server_schema

    stop_index_workers(before)  # never ends by itself: the next test on this schema would be handed it
    background_passes_finish(before)  # a pass still shipping or building would land in the next test's store
    lingering = sorted(t.name for t in threading.enumerate() if t.name.startswith("trove-") and t not in before)
    close_connections()
    if lingering:  # it would write into the next test's store: this schema is dropped, never reused
        warnings.warn(f"PostgreSQL test schema {schema} not reused: {', '.join(lingering)} still running",
                      stacklevel=1)
        drop_schema(pg_url, schema)
        return
    core = {name for name, _ in pgschema.migrations()}
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            applied = {r[0] for r in conn.execute("SELECT name FROM schema_migrations")} \
                if conn.execute("SELECT to_regclass('schema_migrations')").fetchone()[0] else set()
            tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s"
                                                 " AND tablename <> 'schema_migrations'", (schema,))]
            if applied == core and any(server_schema.missing(PgConnection(conn)).values()):
                applied = set()  # a test dropped part of the schema: drop it, never reuse it
            if applied == core:
                idents = conn.execute("SELECT table_name, column_name FROM information_schema.columns"
                                      " WHERE table_schema = %s AND is_identity = 'YES'", (schema,)).fetchall()
                # DELETE, not TRUNCATE: a handful of rows each, and TRUNCATE makes every table anew.
                # The roots first: their rows take the rows that reference them along (ON DELETE CASCADE).
                roots = [t for t in ("messages", "summary_nodes", "temporal_rollups", "embedding_generations")
                         if t in tables]
                with conn.transaction():
                    conn.execute("SET LOCAL lock_timeout = '5s'")
                    for t in [*roots, *(t for t in tables if t not in roots)]:
                        conn.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(schema, t)))
                    for t, column in idents:
                        conn.execute(sql.SQL("ALTER TABLE {} ALTER COLUMN {} RESTART").format(
                            sql.Identifier(schema, t), sql.Identifier(column)))
                _POOL.append(schema)
                return
    except psycopg.Error:
        pass
    drop_schema(pg_url, schema)
