"""Known rows matched on their own: the same matches and snippets as the archive's index gives them.

A page of results takes its snippets from a scratch FTS5 table holding only the page's short rows
(long rows still ask ``messages_fts``); what the user sees must not change with the route. A row
too long for FTS5's snippet() to read whole in reasonable time (it weighs every match against
every other) takes the snippet of its best piece.
"""
from __future__ import annotations

import sqlite3

import pytest
from conftest import assistant, tool_call, tool_result, user

from hermes_trove import ftsrows
from hermes_trove.fulltext import build_match
from hermes_trove.store import SessionKey

KEY = SessionKey("rows-chat")
LONG = " ".join(f"filler{i}" for i in range(400)) + " and at last the deploys were running again"
TEXTS = [
    "Running the deploys took all morning",
    "the café served a naïve résumé of the outage",
    "ticket ING-7731 failed twice on src/app.py",
    "we deploy tonight, with the exact phrase in the notes",
    "nothing to see here",
    LONG,
    "deploys " + "x" * (ftsrows.SCRATCH_MAX_CHARS - 8),  # exactly at the bound: the scratch table
    "deploys " + "x" * (ftsrows.SCRATCH_MAX_CHARS - 7),  # one past it: the archive's index
]
QUERIES = ["run deploy", "cafe resume", "ING-7731", '"exact phrase"', "deploy*", "src/app.py", "outage OR nothing",
           "grep_logs", "absentword"]


@pytest.fixture
def stored(runtime, backend):
    if backend != "sqlite":
        pytest.skip("the scratch table is SQLite's; PostgreSQL snippets are tested in test_pgtext")
    runtime.store.append(KEY, [user(t) for t in TEXTS] + [
        assistant("", [tool_call("c1", "grep_logs", '{"pattern": "deploy failures"}')]),
        tool_result("c1", "3 deploy failures in the last hour")])
    conn = runtime.db.read()
    return runtime, conn, [int(r[0]) for r in conn.execute("SELECT store_id FROM messages ORDER BY store_id")]


def through_the_index(conn: sqlite3.Connection, expression: str, ids: list[int]) -> list[tuple[int, str]]:
    marks = ",".join("?" * len(ids))
    return sorted((int(r[0]), str(r[1])) for r in conn.execute(
        "SELECT rowid, snippet(messages_fts, -1, '>>>', '<<<', '…', 40) FROM messages_fts"
        f" WHERE messages_fts MATCH ? AND rowid IN ({marks})", (expression, *ids)))


@pytest.mark.parametrize("query", QUERIES)
def test_matches_and_snippets_equal_the_archive_index(stored, query):
    _, conn, ids = stored
    expression = build_match(query).expression
    got = [(int(r["store_id"]), snip) for r, snip in ftsrows.matching(conn, expression, ids, [], [])]
    assert got == through_the_index(conn, expression, ids)


def test_every_route_is_taken_and_each_matching_row_comes_back_once_in_store_order(stored):
    _, conn, ids = stored
    got = ftsrows.matching(conn, build_match("deploys").expression, list(reversed(ids)) + ids, [], [])
    chars = [int(r["_chars"]) for r, _ in got]
    assert [int(r["store_id"]) for r, _ in got] == sorted({int(r["store_id"]) for r, _ in got})
    assert any(c <= ftsrows.SCRATCH_MAX_CHARS for c in chars) and any(c > ftsrows.SCRATCH_MAX_CHARS for c in chars)
    assert all(">>>" in snip for _, snip in got)


def test_filters_snippets_off_and_the_row_cap(stored, monkeypatch):
    _, conn, ids = stored
    expression = build_match("deploy").expression
    tools = ftsrows.matching(conn, expression, ids, ["m.role=?"], ["tool"])
    assert [r["content"] for r, _ in tools] == ["3 deploy failures in the last hour"]
    assert {snip for _, snip in ftsrows.matching(conn, expression, ids, [], [], snippets=False)} == {""}
    monkeypatch.setattr(ftsrows, "MAX_ROWS", 1)
    assert len(ftsrows.matching(conn, expression, ids, [], [])) <= 1
    assert ftsrows.matching(conn, expression, [], [], []) == []
    assert ftsrows.matching(conn, "", ids, [], []) == []


def test_the_scratch_table_is_left_empty_even_when_the_expression_is_refused(stored):
    _, conn, ids = stored
    ftsrows.matching(conn, build_match("deploy").expression, ids, [], [])
    assert conn.execute("SELECT count(*) FROM temp.trove_rows_fts").fetchone()[0] == 0
    with pytest.raises(sqlite3.OperationalError):
        ftsrows.matching(conn, '"unclosed', ids, [], [])
    assert conn.execute("SELECT count(*) FROM temp.trove_rows_fts").fetchone()[0] == 0


def test_matching_writes_nothing_that_stays_in_the_scratch_table(stored):
    """Its rows are rolled back, not deleted: a DELETE leaves FTS5 segments behind, page after page."""
    _, conn, ids = stored
    expression = build_match("deploy").expression
    ftsrows.matching(conn, expression, ids, [], [])
    shadow = "SELECT (SELECT count(*) FROM temp.trove_rows_fts_data), (SELECT count(*) FROM temp.trove_rows_fts_idx)"
    before = conn.execute(shadow).fetchone()
    for _ in range(3):
        assert ftsrows.matching(conn, expression, ids, [], [])
    assert conn.execute(shadow).fetchone() == before
    assert not conn.in_transaction


def test_matching_inside_a_transaction_undoes_only_its_own_rows(stored):
    runtime, _, ids = stored
    with runtime.db.transaction() as conn:
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS outer_note(x)")
        conn.execute("INSERT INTO outer_note VALUES (1)")
        got = ftsrows.matching(conn, build_match("deploy").expression, ids, [], [])
        assert got and conn.in_transaction
        assert conn.execute("SELECT count(*) FROM outer_note").fetchone()[0] == 1
        assert conn.execute("SELECT count(*) FROM temp.trove_rows_fts").fetchone()[0] == 0


def test_a_full_temp_schema_is_reported_as_full_and_the_connection_stays_usable(runtime, backend):
    """SQLITE_FULL rolls the whole transaction back, savepoint and all: the error the operator needs
    (a full disk) is the one raised, not a complaint about the vanished savepoint."""
    if backend != "sqlite":
        pytest.skip("the scratch table is SQLite's")
    runtime.store.append(SessionKey("full-chat"), [user("deploy " + " ".join(f"w{i}x{j}" for j in range(200)))
                                                   for i in range(40)])
    conn = runtime.db.read()
    ids = [int(r[0]) for r in conn.execute("SELECT store_id FROM messages ORDER BY store_id")]
    expression = build_match("deploy").expression
    assert len(ftsrows.matching(conn, expression, ids[:1], [], [])) == 1  # the scratch table exists
    pages = conn.execute("PRAGMA temp.page_count").fetchone()[0]
    conn.execute(f"PRAGMA temp.max_page_count={pages}")  # the temp schema cannot grow: forty rows do not fit
    try:
        with pytest.raises(sqlite3.OperationalError, match="full"):
            ftsrows.matching(conn, expression, ids, [], [])
        assert not conn.in_transaction
    finally:
        conn.execute("PRAGMA temp.max_page_count=1073741823")
    assert len(ftsrows.matching(conn, expression, ids, [], [])) == 40
    assert conn.execute("SELECT count(*) FROM temp.trove_rows_fts").fetchone()[0] == 0


def test_store_search_over_known_rows_keeps_its_shape(stored):
    runtime, _, ids = stored
    hits = runtime.store.search(build_match("deploy").expression, store_ids=ids, limit=2)
    assert len(hits) == 2
    assert all(rank == 0.0 and ">>>" in snip and row.session_id == KEY.session_id for row, rank, snip in hits)
    assert runtime.store.search(build_match("deploy").expression, store_ids=[], limit=5) == []


def test_the_scratch_tokenizer_is_the_one_messages_fts_was_created_with(stored):
    _, conn, _ = stored
    sql = conn.execute("SELECT sql FROM sqlite_master WHERE name='messages_fts'").fetchone()[0]
    assert f"tokenize='{ftsrows.MESSAGES_TOKENIZE}'" in sql


def test_a_huge_row_full_of_the_query_takes_its_snippet_from_a_piece_never_the_whole_row(runtime, backend):
    if backend != "sqlite":
        pytest.skip("the scratch table is SQLite's")
    log = " ".join(f"deploy worker{i % 7} ok" for i in range(20000))  # 400 KB, 20,000 matches of "deploy"
    rare = log[:200_000] + " the rollback finally ran " + log[200_000:]
    [plain, tail] = runtime.store.append(KEY, [tool_result("c1", log), tool_result("c2", rare)])
    conn = runtime.db.read()
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        got = dict((int(r["store_id"]), snip) for r, snip in
                   ftsrows.matching(conn, build_match("deploy rollback").expression, [plain, tail], [], []))
    finally:
        conn.set_trace_callback(None)
    assert not [sql for sql in statements if "snippet(messages_fts" in sql]  # never over a whole 400 KB row
    assert sorted(got) == [plain, tail]
    assert got[plain].startswith(">>>deploy<<<") and got[plain].endswith("…") and len(got[plain]) < 400
    assert ">>>rollback<<<" in got[tail] and got[tail].startswith("…")  # the best piece: the rare word's


@pytest.mark.parametrize("max_candidates", [None, 5000], ids=["unbounded", "newest-window"])
def test_a_ranked_search_builds_snippets_only_for_the_rows_it_returns(runtime, backend, max_candidates):
    """snippet() in the ranking query ran for every matching row, not the page: a session of
    twenty 280 KB rows made one trove_expand_query search take 48 s."""
    if backend != "sqlite":
        pytest.skip("the scratch table is SQLite's")
    runtime.store.append(KEY, [user(f"deploy note {i}: " + "the deploy ran " * 30) for i in range(30)])
    conn = runtime.db.read()
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        hits = runtime.store.search(build_match("deploy").expression, session_ids=[KEY.session_id], limit=3,
                                    max_candidates=max_candidates)
    finally:
        conn.set_trace_callback(None)
    assert len(hits) == 3 and all(">>>deploy<<<" in snip for _, _, snip in hits)
    assert not [sql for sql in statements if "snippet(messages_fts" in sql]
    inserted = [sql for sql in statements if sql.startswith("INSERT INTO temp.trove_rows_fts")]
    assert len(inserted) == 3, inserted  # the three rows returned, each matched once in the scratch table
