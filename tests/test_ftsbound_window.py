"""The newest-N window of a bounded search: its matches are walked once, and not at all when the
phrases' counts already show fewer matches than the window holds."""
from __future__ import annotations

import pytest
from conftest import user
from fts_probes import walks

from hermes_trove import ftsbound
from hermes_trove.fulltext import build_match
from hermes_trove.store import SessionKey

CHAT = SessionKey("long-chat")


def test_too_few_needs_every_phrase_counted_exactly_and_their_sum_under_the_window():
    assert ftsbound.too_few([('"cake"', 3), ('"zanzibar"', 1)], 5, 20)
    assert not ftsbound.too_few([('"cake"', 3), ('"zanzibar"', 2)], 5, 20)  # as many as the window: it is full
    assert not ftsbound.too_few([], 5, 20)  # an expression that is no OR of phrases was not counted
    # a count that stopped past the budget says nothing of how many more there are
    assert not ftsbound.too_few([('"coffee"', 21)], 100, 20)
    assert ftsbound.too_few([('"coffee"', 20), ('"absent"', 0)], 100, 20)


def window(runtime, query: str, newest: int, common: int | None = None) -> ftsbound.Window:
    ids = [row.store_id for row in runtime.store.page("long-chat")]
    return ftsbound.window(runtime.db.read(), ["messages_fts MATCH ?", "rowid BETWEEN ? AND ?"],
                           [build_match(query).expression, min(ids), max(ids)], "m.session_id = ?",
                           ["long-chat"], newest, common)


def test_the_window_walks_its_newest_matches_once_and_not_when_the_counts_fall_short(runtime, backend,
                                                                                       monkeypatch):
    if backend != "sqlite":
        pytest.skip("FTS5's window")
    monkeypatch.setattr(ftsbound, "RARE_BUDGET", 20)
    runtime.store.append(CHAT, [user("the zanzibar trip, with cake")])
    runtime.store.append(CHAT, [user(f"coffee note {i}: the coffee was fine" + (" cake" if i < 2 else ""))
                                for i in range(40)])
    coffee = sorted(row.store_id for row, _, _ in runtime.store.search('"coffee"', limit=100))
    seen = walks(monkeypatch)

    assert window(runtime, "zanzibar cake", 8, 3) == ftsbound.NO_WINDOW  # 1 + 3 matches: nothing to walk
    assert seen == []
    mixed = window(runtime, "zanzibar coffee", 8, 3)  # a rare word keeps the whole window: walked once, for it
    assert seen == [8] and mixed == ftsbound.Window(coffee[-8], ['"zanzibar"'], False)
    seen.clear()
    common = window(runtime, "coffee note", 8, 3)  # every word common: the narrower window only
    assert seen == [3] and common == ftsbound.Window(coffee[-3], [], True)


def test_a_count_stopped_at_the_budget_never_stands_for_too_few_matches(runtime, backend, monkeypatch):
    """A window wider than the rare budget: a common phrase's count stops at the budget, so the walk decides."""
    if backend != "sqlite":
        pytest.skip("FTS5's window")
    monkeypatch.setattr(ftsbound, "RARE_BUDGET", 5)
    runtime.store.append(CHAT, [user(f"coffee note {i}") for i in range(40)])
    coffee = sorted(row.store_id for row, _, _ in runtime.store.search('"coffee"', limit=100))
    seen = walks(monkeypatch)
    assert window(runtime, "coffee", 20) == ftsbound.Window(coffee[-20], [], False)
    assert seen == [20]


def sorted_statements(conn, ranked_sql, ranked_args, filters, args, limit):
    """The reference ``_first_passing`` is held to: every ranked row joined to its message, filtered,
    then sorted by rank and store id and cut, in one statement."""
    return conn.execute(f"SELECT m.*, c.r AS _rank, '' AS _snippet FROM ({ranked_sql}) c JOIN messages m"
                        f" ON m.store_id = c.rid{filters} ORDER BY c.r, c.rid LIMIT ?",
                        [*ranked_args, *args, limit]).fetchall()


def test_rows_are_looked_up_a_batch_at_a_time_only_until_enough_pass(runtime, backend, monkeypatch):
    if backend != "sqlite":
        pytest.skip("FTS5's ranking")
    runtime.store.append(CHAT, [user(f"coffee note {i}" + " and more" * (i % 5)) for i in range(40)])
    conn = runtime.db.read()
    looked_up: list[int] = []
    conn.set_trace_callback(  # the ids a look-up names: its VALUES rows (the trace shows them filled in)
        lambda sql: looked_up.append(sql[sql.index("VALUES"):sql.index(") SELECT")].count("),(") + 1)
        if "VALUES" in sql else None)
    ranked_sql = ("SELECT rowid AS rid, bm25(messages_fts) AS r FROM messages_fts WHERE messages_fts MATCH ?"
                  " ORDER BY r, rid")

    def read(filters: str, limit: int) -> list[tuple]:
        got = [tuple(r) for r in ftsbound._first_passing(conn, ranked_sql, ['"coffee"'], filters, [], limit)]
        assert got == [tuple(r) for r in sorted_statements(conn, ranked_sql, ['"coffee"'], filters, [], limit)]
        return got

    try:
        assert len(read("", 5)) == 5 and looked_up == [5]  # every row passes: the first batch is the pool
        looked_up.clear()
        monkeypatch.setattr(ftsbound, "LOOKUP_ROWS", 6)
        odd = " WHERE m.content LIKE '%more%'"  # passes 4 rows of 5
        assert len(read(odd, 20)) == 20
        assert looked_up == [6, 6, 6, 6, 6]  # batches capped at LOOKUP_ROWS, stopped once 20 passed
        assert len(read(odd, -1)) == 32  # a negative limit: every row that passes
        assert read("", 0) == []
    finally:
        conn.set_trace_callback(None)


@pytest.mark.parametrize("limit", [1, 3, 7, 40])
def test_ranked_rows_read_best_first_are_the_sorted_statements_rows(runtime, backend, limit):
    """The window's rows looked up best first, until enough pass the filters, are the rows (ties and all)
    that sorting the whole joined window gives."""
    if backend != "sqlite":
        pytest.skip("FTS5's ranking")
    other = SessionKey("other-chat")
    for i in range(30):  # alike rows (tied ranks), other chats' rows and roles the filters drop
        runtime.store.append(CHAT if i % 3 else other, [user("coffee with cake" if i % 2 else f"coffee note {i}")])
    conn = runtime.db.read()
    fts_where, fts_args = ["messages_fts MATCH ?"], ['"coffee" OR "cake"']
    for where, args in ((["m.session_id = ?"], ["long-chat"]), (["m.role = ?"], ["user"]),
                        (["m.session_id = ?", "m.role = ?"], ["long-chat", "assistant"])):
        filters = " WHERE " + " AND ".join(where)
        for window in (limit, 4 * limit, -1):
            sorted_rows = conn.execute(
                "SELECT m.*, f.r AS _rank, '' AS _snippet FROM (SELECT rowid AS rid, bm25(messages_fts, 1.0, 0.6) AS r"
                " FROM messages_fts WHERE messages_fts MATCH ? ORDER BY r LIMIT ?) f JOIN messages m"
                f" ON m.store_id = f.rid{filters} ORDER BY f.r LIMIT ?", [*fts_args, window, *args, limit]).fetchall()
            best = ftsbound._best(conn, fts_where, fts_args, filters, args, window, limit)
            assert [tuple(r) for r in best] == [tuple(r) for r in sorted_rows], (where, window)
        ranked = ftsbound.ranked(conn, fts_where, fts_args, where, args, limit)
        assert [tuple(r) for r in ranked] == [tuple(r) for r in sorted_rows][:limit]


def test_older_rare_matches_and_the_window_give_what_the_sorted_statements_give(runtime, backend, monkeypatch):
    """Rows whose id order is not their rank order, read a batch at a time, come best first, as one
    statement sorting the whole joined window gives them."""
    if backend != "sqlite":
        pytest.skip("FTS5's ranking")
    monkeypatch.setattr(ftsbound, "RARE_BUDGET", 20)
    other = SessionKey("other-chat")
    for i in range(12):  # older rows naming the rare place, alike in pairs (tied ranks), some in another chat;
        # shorter, so better ranked, the newer they are: id order is not rank order
        runtime.store.append(CHAT if i % 4 else other,
                             [user("zanzibar trip over coffee" + " with a long aside" * (6 - i // 2))])
    runtime.store.append(CHAT, [user(f"coffee note {i}: the coffee was fine") for i in range(40)])
    def search(**kw):
        hits = runtime.store.search(build_match("zanzibar coffee").expression, limit=kw.pop("limit"), snippets=False,
                                    max_candidates=8, **kw)
        return [(row.store_id, rank) for row, rank, _ in hits]

    cases = [{"limit": 5, "session_ids": ["long-chat"]}, {"limit": 20, "session_ids": ["long-chat"]},
             {"limit": 6, "role": "user"}, {"limit": 30}]
    best_first = [search(**dict(case)) for case in cases]
    monkeypatch.setattr(ftsbound, "_first_passing", sorted_statements)
    assert best_first == [search(**dict(case)) for case in cases]
    assert any(len(hits) > 8 for hits in best_first)  # older rare rows were ranked past the window


def test_a_pool_of_one_or_two_is_the_sorted_statements(runtime, backend, monkeypatch):
    """Older rare matches whose id order is not their rank order, asked for one or two at a time,
    give the sorted statements' rows."""
    if backend != "sqlite":
        pytest.skip("FTS5's ranking")
    monkeypatch.setattr(ftsbound, "RARE_BUDGET", 20)
    for i in range(12):  # older rows naming the rare place, shorter (better ranked) the newer they are
        runtime.store.append(CHAT if i % 4 else SessionKey("other-chat"),
                             [user("zanzibar trip over coffee" + " with a long aside" * (6 - i // 2))])
    runtime.store.append(CHAT, [user(f"coffee note {i}: the coffee was fine") for i in range(40)])
    cases = [{"limit": 1}, {"limit": 1, "session_ids": ["long-chat"]}, {"limit": 2, "role": "user"}]

    def search(case):
        hits = runtime.store.search(build_match("zanzibar coffee").expression, snippets=False, max_candidates=8, **case)
        return [(row.store_id, rank) for row, rank, _ in hits]

    best_first = [search(dict(case)) for case in cases]
    monkeypatch.setattr(ftsbound, "_first_passing", sorted_statements)
    assert best_first == [search(dict(case)) for case in cases]
    assert all(best_first)


WORDS = ["cake", "coffee", "tea", "zanzibar", "ing-7731", "note", "trip", "fine", "alpha", "beta", "gamma", "delta"]


def random_store(runtime, rng) -> tuple[list[str], float]:
    """A small store of alike rows (tied ranks), several chats, roles, sources and times out of order."""
    chats, at = [f"chat-{i}" for i in range(rng.choice([1, 2, 4]))], 1_700_000_000.0
    for _ in range(rng.choice([5, 40, 150])):
        batch = []
        for _ in range(rng.choice([1, 1, 3])):
            at += rng.choice([60, 60, -300])
            words = WORDS[:rng.choice([3, 6, 12])]
            batch.append({"role": rng.choice(["user", "assistant"]), "timestamp": at,
                          "content": " ".join(rng.choice(words) for _ in range(rng.choice([1, 2, 3, 5])))})
        chat = rng.choice(chats) if rng.random() < 0.6 else chats[0]
        runtime.store.append(SessionKey(chat, source=rng.choice(["cli", "telegram"])), batch)
    return chats, at


@pytest.mark.parametrize("seed", range(16))
def test_random_searches_read_best_first_are_the_sorted_statements_rows(tmp_path, backend, monkeypatch, seed):
    """Every read best first (the window's, the older rare matches') on small random stores, the budgets
    lowered so the window, the rare matches past it and a thin session's ways all run, gives the rows
    and ranks the sorted statements give, pools of one included."""
    if backend != "sqlite":
        pytest.skip("FTS5's ranking")
    import random

    from conftest import make_config

    from hermes_trove.runtime import build_runtime

    rng = random.Random(seed)
    for name, values in (("RARE_BUDGET", [2, 3, 5, 8]), ("FEW_ROWS", [2, 4, 8]), ("ROWS_PER_MATCH", [1, 2, 6])):
        monkeypatch.setattr(ftsbound, name, rng.choice(values))
    runtime = build_runtime(make_config(tmp_path))
    chats, last = random_store(runtime, rng)
    asks = []
    for _ in range(80):
        kw = {"limit": rng.choice([1, 1, 2, 3, 5, 100]), "snippets": False,
              "max_candidates": rng.choice([1, 2, 4, 8, 50]), "common_candidates": rng.choice([None, 2, 3])}
        if rng.random() < 0.4:
            kw["session_ids"] = rng.sample(chats, 1)
        if rng.random() < 0.3:
            kw["role"] = rng.choice(["user", "assistant"])
        if rng.random() < 0.3:
            kw["time_from"] = last - rng.choice([600, 3000, 100000])
        asks.append((build_match(" ".join(rng.sample(WORDS, rng.choice([1, 2, 3])))).expression, kw))

    def hits():
        return [[(row.store_id, rank) for row, rank, _ in runtime.store.search(m, **dict(kw))] for m, kw in asks]

    best_first = hits()
    monkeypatch.setattr(ftsbound, "_first_passing", sorted_statements)
    assert best_first == hits()
    assert sum(len(h) > 1 for h in best_first) >= 10  # the searches found rows to order


def test_a_look_up_stays_within_the_oldest_sqlite_cap_on_parameters_whatever_the_filters_hold(runtime, backend):
    """SQLite builds before 3.32 refuse a statement of more than 999 parameters: a batch of looked-up
    rows (three parameters an id) beside a filter naming 300 sessions stays within it, as the sorted
    statement did."""
    if backend != "sqlite":
        pytest.skip("SQLite's cap on parameters")
    import sqlite3

    chats = [SessionKey(f"chat-{i}") for i in range(3)]
    for i in range(300):
        runtime.store.append(chats[i % 3], [user(f"coffee note {i}")])
    names = [c.session_id for c in chats] + [f"absent-{i}" for i in range(297)]

    conn = runtime.db.read()
    conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)  # before any statement is prepared (and cached)
    try:
        found = runtime.store.search(build_match("coffee").expression, names, limit=250, snippets=False)
    finally:
        conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 32766)
    best = conn.execute(f"SELECT rowid, {ftsbound._RANK} AS r FROM messages_fts WHERE messages_fts MATCH 'coffee'"
                        " ORDER BY r, rowid LIMIT 250").fetchall()
    assert [(row.store_id, rank) for row, rank, _ in found] == [(int(i), float(r)) for i, r in best]


def test_each_look_up_batch_names_twice_as_many_ids_as_the_last(runtime, backend):
    """A filter that passes few rows has them looked up in batches of the pool's size, then twice as many
    each time (fewer look-ups than a batch of the pool's size each time), with the sorted statement's rows."""
    if backend != "sqlite":
        pytest.skip("FTS5's ranking")
    runtime.store.append(CHAT, [user(f"coffee note {i}" + " and more" * (i % 5)) for i in range(60)])
    conn = runtime.db.read()
    looked_up: list[int] = []
    conn.set_trace_callback(
        lambda sql: looked_up.append(sql[sql.index("VALUES"):sql.index(") SELECT")].count("),(") + 1)
        if "VALUES" in sql else None)
    ranked_sql = ("SELECT rowid AS rid, bm25(messages_fts) AS r FROM messages_fts WHERE messages_fts MATCH ?"
                  " ORDER BY r, rid")
    few = " WHERE m.content LIKE '%more and more and more and more%'"  # 12 of 60 rows, the longest: ranked last
    try:
        got = [tuple(r) for r in ftsbound._first_passing(conn, ranked_sql, ['"coffee"'], few, [], 10)]
    finally:
        conn.set_trace_callback(None)
    assert got == [tuple(r) for r in sorted_statements(conn, ranked_sql, ['"coffee"'], few, [], 10)]
    assert len(got) == 10
    assert looked_up == [10, 20, 30]  # the last batch: the 30 ids left


def test_a_filter_of_many_arguments_shrinks_a_look_up_only_as_far_as_the_connections_cap_asks(runtime, backend):
    """Beside a filter of 1,200 arguments a build whose cap is 32,766 parameters still looks up the pool in
    one batch (a fixed cap of 999 left room for one id a statement: 40 look-ups for 40 rows); capped at
    999, the same search stays within it."""
    if backend != "sqlite":
        pytest.skip("SQLite's cap on parameters")
    import sqlite3

    runtime.store.append(CHAT, [user(f"coffee note {i}") for i in range(40)])
    conn = runtime.db.read()
    names = [CHAT.session_id, *(f"absent-{i}" for i in range(1199))]
    filters = f" WHERE m.session_id IN ({','.join('?' * len(names))})"
    ranked_sql = ("SELECT rowid AS rid, bm25(messages_fts) AS r FROM messages_fts WHERE messages_fts MATCH ?"
                  " ORDER BY r, rid")
    expected = [tuple(r) for r in sorted_statements(conn, ranked_sql, ['"coffee"'], filters, names, 40)]
    looked_up: list[str] = []
    conn.set_trace_callback(lambda sql: looked_up.append(sql) if "VALUES" in sql else None)
    try:
        got = ftsbound._first_passing(conn, ranked_sql, ['"coffee"'], filters, names, 40)
    finally:
        conn.set_trace_callback(None)
    assert [tuple(r) for r in got] == expected and len(expected) == 40
    assert conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) > 999 and len(looked_up) == 1
