"""A search over more sessions than a statement may take parameters gives the rows it gives uncapped.

SQLite builds before 3.32 cap a statement at 999 parameters (``SQLITE_LIMIT_VARIABLE_NUMBER``), and a
search names its session list in several statements; a server's protocol caps one at 65,535. The
list goes as one parameter once it is long (``idlist.among``): the rows, their order and their ranks
are those the same search gives with the cap out of reach.
"""
from __future__ import annotations

import sqlite3

import pytest
from conftest import assistant, user

from hermes_trove import ftsbound, idlist
from hermes_trove.fulltext import build_match
from hermes_trove.store import SessionKey

BACKENDS = ("sqlite", "postgresql")
CAP = 50  # parameters a statement may take: a long list here is 7 ids
WORDS = ["coffee", "budget", "trip", "plan", "note", "review", "garden", "harbour"]
# ids a JSON text or a hex literal must carry exactly: quotes, a backslash, a newline, non-ASCII, an emoji, a NUL
ODD = ['quote"d', "back\\slash", "new\nline", "café", "emoji-\U0001F600", "nul\x00id", "it's"]


def fill(runtime, sessions: list[str]) -> None:
    """Six rounds, one row per session each, so every session's rows are spread among the others'."""
    at = 1_700_000_000.0
    for r in range(6):
        for k, name in enumerate(sessions):
            at += 60
            text = " ".join(WORDS[(k * (r + 2) + j) % len(WORDS)] for j in range(1 + (k + r) % 4))
            text += " zanzibar" if (k * 7 + r) % 41 == 3 else ""
            row = (user if (k + r) % 2 else assistant)(f"{text} row {k}")
            runtime.store.append(SessionKey(name), [{**row, "timestamp": at}])


def searches(sessions: list[str]) -> list[tuple[str, dict]]:
    """Queries and filters over lists longer than a capped connection's short list; some name unknown ids."""
    few = sessions[::9]  # spread thin over the range: ranked among the sessions' own ids
    ghosts = [f"gone-{i}" for i in range(40)]
    out = []
    for query in ("coffee", "budget plan", "zanzibar", '"trip plan"', "gard*", "harbour note"):
        out += [(query, dict(session_ids=sessions, limit=7)),
                (query, dict(session_ids=few, limit=3)),
                (query, dict(session_ids=[*few, *ghosts], limit=5, role="user")),
                (query, dict(session_ids=sessions[:60], limit=6, max_candidates=30, common_candidates=5)),
                (query, dict(session_ids=sessions, limit=4, time_from=1_700_000_000.0 + 60 * 100,
                             time_to=1_700_000_000.0 + 60 * 400, snippets=True))]
    out += [("", dict(session_ids=sessions, limit=9, literal="ROW 1")),
            ("", dict(session_ids=few, limit=9, literal="zanzibar", max_candidates=500))]
    return out


def run(store, query: str, kw: dict) -> list[tuple[int, str, float, str]]:
    expression = build_match(query).expression if query else ""
    return [(row.store_id, row.session_id, rank, snip) for row, rank, snip in store.search(expression, **kw)]


def test_a_search_over_more_sessions_than_the_cap_gives_the_uncapped_rows(runtime, backend, monkeypatch):
    sessions = [*ODD, *(f"chat-{i:03d}" for i in range(120))]
    fill(runtime, sessions)
    plan = searches(sessions)
    uncapped = [run(runtime.store, q, kw) for q, kw in plan]
    assert sum(1 for rows in uncapped if rows) > len(plan) // 2  # the searches find rows
    assert backend != "sqlite" or any(sid == "nul\x00id" for rows in uncapped for _, sid, _, _ in rows)
    conn = runtime.store.db.read()
    if backend == "sqlite":
        assert isinstance(conn, sqlite3.Connection)
        conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, CAP)
    thin = []  # the thin-session way (ids listed) is taken, with its list as one parameter
    real_among = ftsbound._among
    monkeypatch.setattr(ftsbound, "_among", lambda *a, **k: thin.append(1) or real_among(*a, **k))
    try:
        capped = [run(runtime.store, q, kw) for q, kw in plan]
        if backend == "sqlite":  # a build without JSON functions: the ids as hex literals, no parameter
            monkeypatch.setattr(idlist, "_JSON", [False])
            literal = [run(runtime.store, q, kw) for q, kw in plan]
            assert literal == uncapped
    finally:
        if backend == "sqlite":
            conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 250000)
    assert capped == uncapped
    assert thin or backend != "sqlite"


def test_a_server_search_names_more_sessions_than_its_protocol_takes_parameters(runtime, backend):
    if backend != "postgresql":
        pytest.skip("a server's cap: 65,535 parameters a statement")
    sessions = [f"chat-{i:03d}" for i in range(30)]
    fill(runtime, sessions)
    many = [*sessions, *(f"gone-{i}" for i in range(70_000))]
    found = 0
    for query in ("coffee", "zanzibar", "budget plan"):
        for kw in (dict(limit=5), dict(limit=5, max_candidates=40, common_candidates=5), dict(limit=5, role="user")):
            got = run(runtime.store, query, dict(kw, session_ids=many))
            assert got == run(runtime.store, query, dict(kw, session_ids=sessions)), (query, kw)
            found += len(got)
    assert found


def test_a_short_list_keeps_its_placeholders_and_a_long_one_is_one_parameter(tmp_path):
    conn = sqlite3.connect(tmp_path / "x.db")
    conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 80)
    assert idlist.among(conn, "c", ["a", "b"]) == ("c IN (?,?)", ["a", "b"])
    sql, args = idlist.among(conn, "c", [f"s{i}" for i in range(11)])
    assert sql == "c IN (SELECT value FROM json_each(?))" and len(args) == 1
    sql, args = idlist.among(conn, "c", [*(f"s{i}" for i in range(11)), "a\x00b"])
    assert sql.count("?") == len(args) == 1 and "X'610062'" in sql


def test_a_long_list_holding_a_nul_id_still_seeks_the_session_index(runtime, backend):
    """The id with a NUL is one more member of the same list: the statement seeks each session's rows on
    ``messages_session`` instead of reading the whole table (an OR with ``hex(session_id)`` scanned it)."""
    if backend != "sqlite":
        pytest.skip("SQLite's list forms (a server takes one array)")
    sessions = [*(f"chat-{i:03d}" for i in range(20)), "nul\x00id"]
    fill(runtime, sessions)
    wanted = [*sessions[:-1:2], sessions[-1]]  # 11 ids: past a cap of 50's short list
    conn = runtime.store.db.read()
    conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, CAP)
    try:
        held, args = idlist.among(conn, "session_id", wanted)
        sql = f"SELECT COUNT(*), MIN(store_id), MAX(store_id) FROM messages WHERE {held}"
        plan = [str(r[3]) for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}", args)]
        got = tuple(conn.execute(sql, args).fetchone())
    finally:
        conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 250000)
    assert len(args) == 1 and not any(step.startswith("SCAN messages") for step in plan), plan
    assert any("messages_session" in step for step in plan), plan
    assert got == tuple(conn.execute(
        f"SELECT COUNT(*), MIN(store_id), MAX(store_id) FROM messages WHERE session_id IN"
        f" ({','.join('?' * len(wanted))})", wanted).fetchone())
    assert got[0] == 6 * len(wanted)
