"""The window of a session that holds every id of its span is found in the full-text index alone:
no row is looked up per match, and the window starts where the walk over the rows would say."""
from __future__ import annotations

import random

import pytest
from conftest import make_config, user
from fts_probes import walks as walked

from hermes_trove import ftsbound
from hermes_trove.fulltext import build_match
from hermes_trove.runtime import build_runtime
from hermes_trove.store import SessionKey

WORDS = ["coffee", "note", "trip", "cake", "zanzibar", "river", "lamp"]


def window(runtime, chat: str, query: str, newest: int, by_session: bool, scoped: str = "m.session_id = ?",
           scope_args: list | None = None) -> ftsbound.Window:
    conn = runtime.db.read()
    low, high = conn.execute("SELECT MIN(store_id), MAX(store_id) FROM messages WHERE session_id = ?",
                             (chat,)).fetchone()
    return ftsbound.window(conn, ["messages_fts MATCH ?", "rowid BETWEEN ? AND ?"],
                           [build_match(query).expression, low, high], scoped,
                           [chat] if scope_args is None else scope_args, newest, None, [chat], (low, high),
                           by_session=by_session)


@pytest.fixture
def sqlite_only(backend):
    if backend != "sqlite":
        pytest.skip("FTS5's window")


def test_a_session_holding_its_span_finds_its_window_without_the_walk(runtime, sqlite_only, monkeypatch):
    monkeypatch.setattr(ftsbound, "RARE_BUDGET", 5)
    monkeypatch.setattr(ftsbound, "OWNED_STEP", 2)  # several steps over the session's ids
    runtime.store.append(SessionKey("long"), [user(f"coffee note {i}") for i in range(300)])
    coffee = sorted(row.store_id for row, _, _ in runtime.store.search('"coffee"', limit=1000))
    seen = walked(monkeypatch)
    for n in (1, 2, 7, 64, 250, 300):
        assert window(runtime, "long", "coffee", n, True).low == coffee[-n]
    assert seen == []  # no row looked up per match
    assert window(runtime, "long", "coffee", 301, True) == ftsbound.NO_WINDOW  # fewer match: no window
    assert seen == []
    assert window(runtime, "long", "coffee", 250, False).low == coffee[-250]
    assert seen == [250]  # not asked of the full-text index: the rows were walked


def test_phrases_counted_past_the_window_whose_or_matches_fewer_rows_walk_nothing(runtime, sqlite_only,
                                                                                   monkeypatch):
    """Every row holds both words: the counts (40 and 40) add up past a window of 50, but the OR
    matches 40 rows, which the full-text index tells without a row looked up."""
    runtime.store.append(SessionKey("long"), [user(f"coffee note {i}") for i in range(40)])
    runtime.store.append(SessionKey("other"), [user("coffee note elsewhere")])  # not in long's span
    seen = walked(monkeypatch)
    assert window(runtime, "long", "coffee note", 50, True) == ftsbound.NO_WINDOW
    assert seen == []
    assert window(runtime, "long", "coffee note", 50, False) == ftsbound.NO_WINDOW
    assert seen == [50]


def test_another_chats_row_in_the_span_sends_the_window_to_the_walk(runtime, sqlite_only, monkeypatch):
    monkeypatch.setattr(ftsbound, "RARE_BUDGET", 5)
    monkeypatch.setattr(ftsbound, "OWNED_STEP", 2)
    runtime.store.append(SessionKey("long"), [user(f"coffee note {i}") for i in range(40)])
    runtime.store.append(SessionKey("other"), [user("coffee elsewhere")])  # inside long's span from now on
    runtime.store.append(SessionKey("long"), [user(f"coffee again {i}") for i in range(20)])
    mine = sorted(row.store_id for row, _, _ in runtime.store.search('"coffee"', ["long"], limit=1000))
    seen = walked(monkeypatch)
    assert window(runtime, "long", "coffee", 10, True).low == mine[-10]  # the span above the other row: owned
    assert seen == []
    # the 30th newest match of the range is one id lower than the session's 30th: the other chat's row is skipped
    assert window(runtime, "long", "coffee", 30, True).low == mine[-30]
    assert seen == [30]


@pytest.mark.parametrize("by_chats", [False, True])
def test_a_hidden_session_falls_back_to_the_walk_and_a_gap_when_ids_are_stepped(runtime, sqlite_only, monkeypatch,
                                                                                 by_chats):
    """A gap (a deleted row) stops the step over the session's ids, which cannot tell it from another
    chat's row; asked session by session, the store shows no other chat there."""
    monkeypatch.setattr(ftsbound, "RARE_BUDGET", 5)
    monkeypatch.setattr(ftsbound, "CHAT_CHECK_IDS", 0 if by_chats else 10**9)
    runtime.store.append(SessionKey("long"), [user(f"coffee note {i}") for i in range(100)])
    coffee = sorted(row.store_id for row, _, _ in runtime.store.search('"coffee"', limit=1000))
    seen = walked(monkeypatch)
    # a scope that keeps none of the session's rows: its window is empty, as the walk finds
    assert window(runtime, "long", "coffee", 10, True, "m.session_id = ? AND m.role = ?", ["long", "tool"]) \
        == ftsbound.NO_WINDOW
    assert seen == [10]
    with runtime.db.transaction() as conn:  # a row gone from the middle of the span: no longer every id
        conn.execute("DELETE FROM messages WHERE store_id = ?", (coffee[-5],))
    seen.clear()
    assert window(runtime, "long", "coffee", 10, True).low == coffee[-11]
    assert seen == ([] if by_chats else [10])


def test_another_chat_found_session_by_session_or_too_many_chats_to_ask(runtime, sqlite_only, monkeypatch):
    """Asked session by session, another chat's row in the span sends the window to the walk; a store
    of more sessions than are asked has the session's ids stepped over instead."""
    monkeypatch.setattr(ftsbound, "RARE_BUDGET", 5)
    monkeypatch.setattr(ftsbound, "CHAT_CHECK_IDS", 0)
    monkeypatch.setattr(ftsbound, "OWNED_STEP", 2)  # stepping, the first step stays above zz-other's row
    runtime.store.append(SessionKey("long"), [user(f"coffee note {i}") for i in range(30)])
    runtime.store.append(SessionKey("zz-other"), [user("coffee elsewhere")])
    runtime.store.append(SessionKey("long"), [user(f"coffee again {i}") for i in range(30)])
    for name in ("a", "b", "c"):  # sessions with rows outside long's span
        runtime.store.append(SessionKey(name), [user("tea")])
    mine = sorted(row.store_id for row, _, _ in runtime.store.search('"coffee"', ["long"], limit=1000))
    seen = walked(monkeypatch)
    assert window(runtime, "long", "coffee", 20, True).low == mine[-20]  # the span above zz-other's row
    assert seen == []
    assert window(runtime, "long", "coffee", 40, True).low == mine[-40]  # zz-other's row in the span
    assert seen == [40]
    seen.clear()
    monkeypatch.setattr(ftsbound, "OWNED_SESSIONS", 3)  # five sessions: too many to ask, the ids are stepped
    assert window(runtime, "long", "coffee", 20, True).low == mine[-20]
    assert window(runtime, "long", "coffee", 40, True).low == mine[-40]
    assert seen == [40]


@pytest.mark.parametrize("seed", range(12))
def test_random_interleaved_chats_give_the_walks_window(tmp_path, backend, monkeypatch, seed):
    """Chats written in random runs (some long, some one row), deleted rows among them: the window with
    the full-text shortcut allowed is the window the walk over the rows gives, for every size asked."""
    if backend != "sqlite":
        pytest.skip("FTS5's window")
    rng = random.Random(seed)
    monkeypatch.setattr(ftsbound, "RARE_BUDGET", rng.choice([2, 5, 40]))
    monkeypatch.setattr(ftsbound, "OWNED_STEP", rng.choice([1, 2, 64]))
    monkeypatch.setattr(ftsbound, "CHAT_CHECK_IDS", rng.choice([0, 10**9]))
    monkeypatch.setattr(ftsbound, "OWNED_SESSIONS", rng.choice([1, 2, 32]))
    runtime = build_runtime(make_config(tmp_path))
    chats = ["a", "b", "c"]
    for _ in range(rng.randint(3, 12)):
        chat = rng.choice(chats)
        runtime.store.append(SessionKey(chat), [user(" ".join(rng.choices(WORDS, k=rng.randint(1, 4))))
                                                for _ in range(rng.choice([1, 2, 30, 90]))])
    if rng.random() < 0.5:
        with runtime.db.transaction() as conn:
            conn.execute("DELETE FROM messages WHERE store_id IN (SELECT store_id FROM messages"
                         " ORDER BY random() LIMIT 3)")
    compared = 0
    for chat in chats:
        if runtime.db.read().execute("SELECT 1 FROM messages WHERE session_id = ?", (chat,)).fetchone() is None:
            continue
        for _ in range(10):
            query, n = " ".join(rng.sample(WORDS, rng.randint(1, 2))), rng.choice([1, 3, 10, 40, 120])
            assert window(runtime, chat, query, n, True) == window(runtime, chat, query, n, False)
            compared += 1
    assert compared >= 10


def test_a_role_filter_keeps_the_walk_in_store_search(runtime, sqlite_only, monkeypatch):
    """``store.search`` allows the shortcut only when its filter is the session alone."""
    monkeypatch.setattr(ftsbound, "RARE_BUDGET", 5)
    runtime.store.append(SessionKey("long"), [user(f"coffee note {i}") for i in range(60)])
    seen = walked(monkeypatch)
    plain = runtime.store.search('"coffee"', ["long"], limit=5, snippets=False, max_candidates=20)
    assert seen == [] and len(plain) == 5
    by_role = runtime.store.search('"coffee"', ["long"], role="user", limit=5, snippets=False, max_candidates=20)
    assert seen == [20] and [r.store_id for r, _, _ in by_role] == [r.store_id for r, _, _ in plain]


def test_an_empty_filter_with_by_session_reads_as_no_filter(runtime, sqlite_only, monkeypatch):
    """No filter at all (``scoped`` empty) asks nothing of the session's rows: the window is the
    range's n-th newest match, as the walk without a filter gives it."""
    monkeypatch.setattr(ftsbound, "RARE_BUDGET", 5)
    runtime.store.append(SessionKey("long"), [user(f"coffee note {i}") for i in range(30)])
    runtime.store.append(SessionKey("other"), [user("coffee elsewhere")])
    runtime.store.append(SessionKey("long"), [user(f"coffee again {i}") for i in range(30)])
    every = sorted(row.store_id for row, _, _ in runtime.store.search('"coffee"', limit=1000))
    assert window(runtime, "long", "coffee", 40, True, "", []).low == every[-40]  # the other chat's row counts


@pytest.mark.parametrize("by_chats", [False, True])
def test_a_chat_sharing_the_newest_ids_costs_no_read_of_every_match(runtime, sqlite_only, monkeypatch, by_chats):
    """Two chats taking turns: the other chat's row just below the session's newest is found before the
    full-text index is read (stepping), or the index is read only above it (session by session), so
    the walk over the rows costs what it did before."""
    monkeypatch.setattr(ftsbound, "RARE_BUDGET", 5)
    monkeypatch.setattr(ftsbound, "CHAT_CHECK_IDS", 0 if by_chats else 10**9)
    for i in range(30):
        runtime.store.append(SessionKey("long"), [user(f"coffee note {i}")])
        runtime.store.append(SessionKey("other"), [user(f"coffee elsewhere {i}")])
    runtime.store.append(SessionKey("long"), [user("coffee last")])
    mine = sorted(row.store_id for row, _, _ in runtime.store.search('"coffee"', ["long"], limit=1000))
    conn = runtime.db.read()
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        assert window(runtime, "long", "coffee", 20, True).low == mine[-20]
    finally:
        conn.set_trace_callback(None)
    index_only = [sql for sql in seen if sql.startswith("SELECT rowid FROM messages_fts WHERE")
                  and "ORDER BY rowid DESC" in sql]  # the n-th newest match asked of the index alone
    if by_chats:
        assert len(index_only) == 1 and f"rowid >= {mine[-1]} " in index_only[0]  # above the other chat's row
    else:
        assert index_only == []


def test_matches_sparse_among_the_sessions_ids_are_walked_not_stepped_over(runtime, sqlite_only, monkeypatch):
    """One match in 40 of the session's rows (a store of too many sessions to ask one by one): the span
    to the window's 10th newest match holds some 400 ids, more than ``OWNED_IDS_PER_MATCH`` a match, so
    the walk (a row a match) finds the window and the session's ids are not stepped over past the first
    ``OWNED_STEP``; a denser session's span is still stepped over."""
    monkeypatch.setattr(ftsbound, "RARE_BUDGET", 5)
    monkeypatch.setattr(ftsbound, "CHAT_CHECK_IDS", 10**9)
    monkeypatch.setattr(ftsbound, "OWNED_STEP", 2)
    runtime.store.append(SessionKey("long"), [user("coffee note" if i % 40 == 0 else "tea") for i in range(600)])
    runtime.store.append(SessionKey("dense"), [user(f"coffee note {i}") for i in range(600)])
    conn = runtime.db.read()
    for chat, walks in (("long", [10]), ("dense", [])):
        mine = sorted(row.store_id for row, _, _ in runtime.store.search('"coffee"', [chat], limit=1000))
        seen, statements = walked(monkeypatch), []
        conn.set_trace_callback(statements.append)
        try:
            assert window(runtime, chat, "coffee", 10, True).low == mine[-10]
        finally:
            conn.set_trace_callback(None)
        steps = [sql for sql in statements if sql.startswith("SELECT store_id FROM messages WHERE session_id =")
                 and "ORDER BY store_id DESC" in sql]
        assert seen == walks
        assert (len(steps) == 1) if walks else (len(steps) > 1), steps  # the first OWNED_STEP ids only
