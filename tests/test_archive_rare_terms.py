"""An archive-wide search ranks every older match of the query's rare terms, past the newest-N window.

A name said once in an old conversation must not fall out of the window behind newer rows that
share only a common word with the question; its score is the one the whole query gives it.
"""
from __future__ import annotations

import json

import pytest
from conftest import assistant, make_engine, user

from hermes_trove import ftsbound, pgtext
from hermes_trove.fulltext import build_match, matching_ids
from hermes_trove.retrieval import recall_search
from hermes_trove.scope import EVERYTHING, Visibility
from hermes_trove.store import SessionKey
from hermes_trove.tools import dispatch

OLD = SessionKey("old-chat")
NEW = SessionKey("new-chat")


def fill(runtime, newer: int = 60) -> int:
    """One old row naming a rare place, then ``newer`` rows sharing only the common word; the old row's id."""
    runtime.store.append(OLD, [{**user("we planned the zanzibar trip over coffee"), "timestamp": 1_700_000_000.0}])
    runtime.store.append(NEW, [{**user(f"coffee note {i}: the coffee was fine"), "timestamp": 1_700_100_000.0}
                               for i in range(newer)])
    return runtime.store.search('"zanzibar"', limit=1)[0][0].store_id


def refreshed(runtime, backend: str) -> None:
    """On a server, ship the rows and refresh the term statistics: rare means rare by the last refresh there."""
    if backend == "postgresql":
        runtime.store.settle()
        with runtime.db.transaction() as conn:
            pgtext.refresh_stats(conn)


def ranked(runtime, query: str, bound: int | None, **kw) -> list[tuple[int, float]]:
    hits = runtime.store.search(build_match(query).expression, limit=kw.pop("limit", 10), snippets=False,
                                max_candidates=bound, **kw)
    return [(row.store_id, rank) for row, rank, _ in hits]


def test_phrases_split_only_what_build_match_writes():
    expr = build_match('"exact phrase" deploy* src/app.py ING-7731 won\'t').expression
    assert " OR ".join(ftsbound.phrases(expr)) == expr
    assert ftsbound.phrases('"a" OR "b ""c"""*') == ['"a"', '"b ""c"""*']
    for other in ("", "a OR b", '"a" AND "b"', '"a" OR', 'NEAR("a" "b")', '"a" "b"'):
        assert ftsbound.phrases(other) == []


def test_pick_rare_takes_the_rarest_phrases_within_the_budget():
    counts = [('"coffee"', 5001), ('"zanzibar"', 3), ('"trip"', 900), ('"absent"', 0), ('"plan"', 4200)]
    assert ftsbound.pick_rare(counts, 5000) == ['"zanzibar"', '"trip"']
    assert ftsbound.pick_rare(counts, 2) == []
    assert ftsbound.pick_rare([], 10) == []


def test_an_old_rare_match_outside_the_window_is_ranked_with_the_whole_querys_score(runtime, backend, monkeypatch):
    if backend != "sqlite":
        pytest.skip("about FTS5's window; PostgreSQL's candidate set is tested in test_pgtext")
    old_id = fill(runtime)
    exact = dict(ranked(runtime, "zanzibar coffee", None, limit=100))
    bounded = ranked(runtime, "zanzibar coffee", 5)
    assert bounded[0][0] == old_id  # the rare name wins although its row is far older than the window
    assert bounded[0][1] == pytest.approx(exact[old_id], rel=1e-9, abs=1e-12)
    # 61 matches in all fit the rare budget: every one is ranked, as an unbounded search ranks them
    assert len(bounded) == 10
    assert all(rank == pytest.approx(exact[i], rel=1e-9, abs=1e-12) for i, rank in bounded)
    # a word with more matches than the budget keeps its newest-N window; the rarer name still ranks
    monkeypatch.setattr(ftsbound, "RARE_BUDGET", 20)
    assert old_id not in [i for i, _ in ranked(runtime, "coffee", 5)]
    bounded = ranked(runtime, "zanzibar coffee", 5)
    assert bounded[0][0] == old_id and len(bounded) == 6  # the window's five newest, plus the older rare match
    assert all(rank == pytest.approx(exact[i], rel=1e-9, abs=1e-12) for i, rank in bounded)


def test_older_rare_matches_still_obey_the_filters_and_scopes(runtime, backend, monkeypatch):
    if backend != "sqlite":
        pytest.skip("about FTS5's window; PostgreSQL's candidate set is tested in test_pgtext")
    monkeypatch.setattr(ftsbound, "RARE_BUDGET", 20)
    old_id = fill(runtime)
    assert old_id not in [i for i, _ in ranked(runtime, "zanzibar coffee", 5, role="assistant")]
    assert old_id not in [i for i, _ in ranked(runtime, "zanzibar coffee", 5, time_from=1_700_050_000.0)]
    assert old_id in [i for i, _ in ranked(runtime, "zanzibar coffee", 5, time_from=1_600_000_000.0)]
    own = Visibility(mode="session", session_id="new-chat")
    mine = ranked(runtime, "zanzibar coffee", 5, visible=own)
    assert old_id not in [i for i, _ in mine] and len(mine) == 5  # another session's row never shows
    theirs = ranked(runtime, "zanzibar coffee", 5, visible=Visibility(mode="session", session_id="old-chat"))
    assert [i for i, _ in theirs] == [old_id]


def test_snippets_are_built_for_older_rows_too(runtime, backend, monkeypatch):
    if backend != "sqlite":
        pytest.skip("about FTS5's window")
    monkeypatch.setattr(ftsbound, "RARE_BUDGET", 20)
    old_id = fill(runtime)
    hits = runtime.store.search(build_match("zanzibar coffee").expression, limit=3, max_candidates=5)
    snip = {row.store_id: s for row, _, s in hits}
    assert ">>>zanzibar<<<" in snip[old_id]


def test_matching_ids_and_recall_find_the_old_name_in_a_full_archive(runtime, backend, monkeypatch):
    monkeypatch.setattr(recall_search, "ARCHIVE_CANDIDATES", 5)
    monkeypatch.setattr(ftsbound, "RARE_BUDGET", 20)
    old_id = fill(runtime)
    if backend == "sqlite":
        import hermes_trove.fulltext as fulltext
        monkeypatch.setattr(fulltext, "ARCHIVE_CANDIDATES", 5)
        assert matching_ids(runtime.store, "zanzibar coffee", 3, None, EVERYTHING)[0] == old_id
    if backend == "postgresql":  # rare means rare by the last stats refresh there
        runtime.store.settle()
        pgtext.refresh_stats(runtime.store.db)
    engine = make_engine(runtime, session="asker")
    out = json.loads(dispatch(engine.tool_context(), "trove_recall", {"query": "zanzibar coffee"}))
    assert "error" not in out, out
    assert any("zanzibar" in json.dumps(item) for item in out["hits"][:3]), out


def test_a_long_sessions_grep_ranks_its_newest_matches_and_every_rare_match(runtime, backend, monkeypatch):
    from hermes_trove.retrieval import search as grep_search
    monkeypatch.setattr(grep_search, "ARCHIVE_CANDIDATES", 5)
    monkeypatch.setattr(ftsbound, "RARE_BUDGET", 20)
    key = SessionKey("long-chat")
    runtime.store.append(key, [user("the zanzibar trip, over coffee coffee coffee")])
    runtime.store.append(key, [user(f"coffee note {i}: the coffee was fine today") for i in range(40)])
    if backend == "postgresql":
        runtime.store.settle()
        pgtext.refresh_stats(runtime.store.db)
    engine = make_engine(runtime, session="long-chat")

    def grep(query: str) -> list[str]:
        out = json.loads(dispatch(engine.tool_context(), "trove_grep", {"query": query, "limit": 10}))
        assert "error" not in out, out
        return [hit["snippet"] for hit in out["results"] if hit.get("store_id")]

    assert "zanzibar" in grep("zanzibar coffee")[0]  # the oldest row, but its rare word ranks it
    common = grep("coffee")
    assert len(common) == 5 and not any("zanzibar" in s for s in common)  # only the newest 5 matches
    assert all(any(f"note {i}" in s for s in common) for i in range(35, 40))


def test_rare_matches_already_inside_the_window_add_nothing(runtime, backend, monkeypatch):
    if backend != "sqlite":
        pytest.skip("about FTS5's window")
    monkeypatch.setattr(ftsbound, "RARE_BUDGET", 20)
    runtime.store.append(OLD, [user(f"coffee note {i}: the coffee was fine") for i in range(40)])
    new_id = runtime.store.append(NEW, [user("the zanzibar coffee plan")])[0]
    bounded = ranked(runtime, "zanzibar coffee", 5)
    assert bounded[0][0] == new_id and len(bounded) == 5  # the window alone: the rare row is its newest
    assert min(i for i, _ in bounded) == new_id - 4


def test_all_common_needs_counted_phrases_each_over_the_budget():
    assert ftsbound.all_common([('"coffee"', 21), ('"note"', 40)], 20)
    assert ftsbound.all_common([('"coffee"', 21), ('"absent"', 0)], 20)  # a phrase with no match is no rare one
    assert not ftsbound.all_common([('"coffee"', 21), ('"zanzibar"', 1)], 20)
    assert not ftsbound.all_common([], 20)  # an expression that is no OR of phrases was not counted


@pytest.mark.both_backends
def test_a_grep_of_common_words_only_ranks_the_newest_common_candidates(runtime, backend, monkeypatch):
    from hermes_trove.retrieval import search as grep_search
    monkeypatch.setattr(grep_search, "ARCHIVE_CANDIDATES", 8)
    monkeypatch.setattr(grep_search, "COMMON_CANDIDATES", 3)
    monkeypatch.setattr(ftsbound, "RARE_BUDGET", 20)
    key = SessionKey("long-chat")
    runtime.store.append(key, [user("the zanzibar trip, over coffee coffee coffee")])
    runtime.store.append(key, [user(f"coffee note {i}: the coffee was fine today") for i in range(40)])
    refreshed(runtime, backend)
    engine = make_engine(runtime, session="long-chat")

    def grep(query: str) -> list[str]:
        out = json.loads(dispatch(engine.tool_context(), "trove_grep", {"query": query, "limit": 10}))
        assert "error" not in out, out
        return [hit["snippet"] for hit in out["results"] if hit.get("store_id")]

    common = grep("coffee note")  # both words have more matches than the rare budget: the newest three
    assert len(common) == 3 and all(any(f" {i}: the" in s for s in common) for i in range(37, 40))
    mixed = grep("zanzibar coffee")  # a rare word keeps the whole window and its older match
    assert "zanzibar" in mixed[0] and len(mixed) == 9


@pytest.mark.both_backends
def test_the_store_window_narrows_only_for_a_query_of_common_phrases(runtime, backend, monkeypatch):
    monkeypatch.setattr(ftsbound, "RARE_BUDGET", 20)
    old_id = fill(runtime, newer=30)
    refreshed(runtime, backend)
    newest = max(i for i, _ in ranked(runtime, "coffee", None, limit=100))
    common = ranked(runtime, "coffee fine", 10, common_candidates=4, limit=100)
    assert sorted(i for i, _ in common) == list(range(newest - 3, newest + 1))
    assert len(ranked(runtime, "coffee fine", 10, limit=100)) == 10  # without it, the whole window
    assert len(ranked(runtime, "coffee fine", 10, common_candidates=40, limit=100)) == 10  # never wider
    mixed = [i for i, _ in ranked(runtime, "zanzibar coffee", 10, common_candidates=4, limit=100)]
    assert len(mixed) == 11 and old_id in mixed


def test_a_session_search_counts_rarity_inside_the_session(runtime, backend, monkeypatch):
    """A word common elsewhere in the archive but said once, long ago, in this session is still its rare word."""
    if backend != "sqlite":
        pytest.skip("about FTS5's window")
    from hermes_trove.retrieval import search as grep_search
    monkeypatch.setattr(grep_search, "ARCHIVE_CANDIDATES", 5)
    monkeypatch.setattr(ftsbound, "RARE_BUDGET", 20)
    runtime.store.append(SessionKey("travel-desk"), [user(f"zanzibar fare {i}") for i in range(30)])
    key = SessionKey("long-chat")
    runtime.store.append(key, [user("the zanzibar trip, over coffee")])
    runtime.store.append(key, [user(f"coffee note {i}: the coffee was fine today") for i in range(40)])
    engine = make_engine(runtime, session="long-chat")
    out = json.loads(dispatch(engine.tool_context(), "trove_grep", {"query": "zanzibar coffee", "limit": 10}))
    assert "error" not in out, out
    assert "zanzibar trip" in out["results"][0]["snippet"].replace(">>>", "").replace("<<<", ""), out



@pytest.mark.both_backends
def test_a_session_search_window_counts_only_the_sessions_own_matches(runtime, backend, monkeypatch):
    """Another chat's rows written between this session's first and last message never fill its window."""
    from hermes_trove.retrieval import search as grep_search
    monkeypatch.setattr(grep_search, "ARCHIVE_CANDIDATES", 8)
    monkeypatch.setattr(grep_search, "COMMON_CANDIDATES", 3)
    monkeypatch.setattr(ftsbound, "RARE_BUDGET", 20)
    key = SessionKey("long-chat")
    runtime.store.append(key, [user(f"coffee note {i}: kept for the long chat") for i in range(2)])
    runtime.store.append(SessionKey("busy-chat"), [user(f"coffee note {i}: the other chat") for i in range(40)])
    runtime.store.append(key, [user("coffee note 2: kept for the long chat, said last")])
    own = [row.store_id for row in runtime.store.page("long-chat")]
    for bound, common in ((3, None), (8, 3)):  # the window alone; a query of common words only
        hits = ranked(runtime, "coffee note", bound, session_ids=["long-chat"], common_candidates=common, limit=10)
        assert sorted(i for i, _ in hits) == own, (bound, common)
    engine = make_engine(runtime, session="long-chat")
    out = json.loads(dispatch(engine.tool_context(), "trove_grep", {"query": "coffee note", "limit": 10}))
    assert "error" not in out, out
    assert sorted(hit["store_id"] for hit in out["results"] if hit.get("store_id")) == own, out


@pytest.mark.both_backends
def test_the_common_term_window_is_named_only_where_it_applies(runtime, backend):
    runtime.store.append(NEW, [user(f"coffee note {i}") for i in range(3)])
    engine = make_engine(runtime, session="new-chat")
    out = json.loads(dispatch(engine.tool_context(), "trove_grep", {"query": "coffee", "session_scope": "all"}))
    assert "error" not in out and out["archive_candidate_limit"] == 5000, out
    assert out["archive_common_candidate_limit"] == 1000, out  # both stores narrow a query of common words


@pytest.mark.both_backends
def test_a_filtered_search_window_counts_only_the_rows_its_filters_keep(runtime, backend, monkeypatch):
    """Common words asked about an earlier period, role or source: newer rows the filters drop never fill the window."""
    monkeypatch.setattr(ftsbound, "RARE_BUDGET", 20)
    runtime.store.append(OLD, [{**user(f"coffee note {i} from spring"), "timestamp": 1_700_000_000.0}
                               for i in range(3)])
    runtime.store.append(NEW, [{**assistant(f"coffee note {i} from summer"), "timestamp": 1_710_000_000.0}
                               for i in range(40)])
    old = sorted(row.store_id for row, _, _ in runtime.store.search('"spring"', limit=10))
    for bound, common in ((8, None), (8, 3)):  # the window alone; a query of common words only
        before = ranked(runtime, "coffee note", bound, time_to=1_705_000_000.0, common_candidates=common, limit=10)
        assert sorted(i for i, _ in before) == old, (bound, common)
        said = ranked(runtime, "coffee note", bound, role="user", common_candidates=common, limit=10)
        assert sorted(i for i, _ in said) == old, (bound, common)


def test_phrase_counts_stop_one_past_the_budget_and_count_exactly_below_it(runtime, backend):
    if backend != "sqlite":
        pytest.skip("FTS5's phrase counts")
    runtime.store.append(NEW, [user(f"coffee note {i}" + (" with cake" if i < 4 else "")) for i in range(12)])
    conn = runtime.db.read()
    expression = build_match("coffee cake zanzibar").expression
    assert ftsbound.phrase_counts(conn, expression, budget=5) == [('"coffee"', 6), ('"cake"', 4), ('"zanzibar"', 0)]
    assert ftsbound.phrase_counts(conn, expression, budget=12) == [('"coffee"', 12), ('"cake"', 4), ('"zanzibar"', 0)]
    assert ftsbound.phrase_counts(conn, expression, budget=11) == [('"coffee"', 12), ('"cake"', 4), ('"zanzibar"', 0)]
    first, last = (row.store_id for row in (runtime.store.page("new-chat")[0], runtime.store.page("new-chat")[-1]))
    inside = ftsbound.phrase_counts(conn, expression, ["rowid BETWEEN ? AND ?"], [first + 2, last], budget=5)
    assert inside == [('"coffee"', 6), ('"cake"', 2), ('"zanzibar"', 0)]  # counted inside the id range only


@pytest.mark.both_backends
def test_a_window_of_common_words_only_is_taken_newest_first_rows_holding_every_word_first(runtime, backend,
                                                                                           monkeypatch):
    """No bm25() over common words: the window's rows holding every phrase, newest first, then the newest others."""
    monkeypatch.setattr(ftsbound, "RARE_BUDGET", 5)
    key = SessionKey("long-chat")
    ids = runtime.store.append(key, [user(f"coffee note {i}" + (" and cake" if i in (4, 21, 24) else ""))
                                     for i in range(30)])
    ids += runtime.store.append(key, [assistant(f"cake slice {i}") for i in range(10)])
    both_old, both_mid, both_new = ids[4], ids[21], ids[24]
    hits = ranked(runtime, "coffee cake", 30, common_candidates=20, limit=6, session_ids=["long-chat"])
    # the newest 20 matches are ids[20:]; ids[4] holds both words but lies outside them
    assert hits == [(both_new, ftsbound.ALL_RANK), (both_mid, ftsbound.ALL_RANK),
                    *[(i, ftsbound.ANY_RANK) for i in reversed(ids[36:])]]
    assert both_old not in [i for i, _ in ranked(runtime, "coffee cake", 30, common_candidates=20, limit=100)]
    shown = runtime.store.search(build_match("coffee cake").expression, limit=6, max_candidates=30,
                                 common_candidates=20, session_ids=["long-chat"])  # the same page, with snippets
    assert [(row.store_id, rank) for row, rank, _ in shown] == hits and all(">>>" in s for _, _, s in shown)
    # filters still apply inside the window (the newest 5 assistant rows), newest first
    only = ranked(runtime, "coffee cake", 30, common_candidates=5, limit=3, role="assistant")
    assert only == [(i, ftsbound.ANY_RANK) for i in reversed(ids[37:])]
    monkeypatch.setattr(ftsbound, "RARE_BUDGET", 13)  # "cake" (13 matches) is no longer common: bm25() ranks
    refreshed(runtime, backend)
    scored = ranked(runtime, "coffee cake", 30, common_candidates=20, limit=100)
    assert both_old in [i for i, _ in scored] and not {r for _, r in scored} & {ftsbound.ALL_RANK, ftsbound.ANY_RANK}


@pytest.mark.both_backends
def test_a_grep_of_common_words_only_shows_the_windows_rows_holding_every_word_first(runtime, backend, monkeypatch):
    from hermes_trove.retrieval import search as grep_search
    monkeypatch.setattr(grep_search, "COMMON_CANDIDATES", 20)
    monkeypatch.setattr(ftsbound, "RARE_BUDGET", 5)
    key = SessionKey("long-chat")
    ids = runtime.store.append(key, [user(f"coffee note {i}" + (" and cake" if i in (4, 21, 24) else ""))
                                     for i in range(30)])
    ids += runtime.store.append(key, [assistant(f"cake slice {i}") for i in range(10)])
    engine = make_engine(runtime, session="long-chat")
    out = json.loads(dispatch(engine.tool_context(), "trove_grep", {"query": "coffee cake", "limit": 10}))
    assert "error" not in out, out
    shown = [hit["store_id"] for hit in out["results"] if hit.get("store_id")]
    assert shown[:2] == [ids[24], ids[21]] and len(shown) == 10  # every word, newest first; ids[4] is past the window
    assert ids[4] not in shown and set(shown) <= set(ids[20:])


def test_counting_a_phrase_under_the_budget_costs_no_more_than_one_bounded_count(runtime, backend):
    """The probe past the budget reads a rare phrase's every match; counting them again must not
    cost more than the single bounded count of them did (SQLite's VM steps, not time)."""
    if backend != "sqlite":
        pytest.skip("FTS5's phrase counts")
    runtime.store.append(NEW, [user(f"coffee note {i}" + (" with cake" if i % 3 == 0 else "")) for i in range(300)])
    conn = runtime.db.read()
    steps = [0]

    def step() -> int:
        steps[0] += 1
        return 0

    def cost(read) -> tuple[object, int]:
        steps[0] = 0
        conn.set_progress_handler(step, 1)
        try:
            return read(), steps[0]
        finally:
            conn.set_progress_handler(None, 1)

    bounded = "SELECT count(*) FROM (SELECT 1 FROM messages_fts WHERE messages_fts MATCH ? LIMIT ?)"
    for budget in (100, 299, 300):
        once, single = cost(lambda b=budget: conn.execute(bounded, ('"cake"', b + 1)).fetchone()[0])
        counts, spent = cost(lambda b=budget: ftsbound.phrase_counts(conn, '"cake"', budget=b))
        assert counts == [('"cake"', once)], budget
        assert spent <= single, (budget, spent, single)
    counts, _ = cost(lambda: ftsbound.phrase_counts(conn, '"coffee"', budget=299))
    assert counts == [('"coffee"', 300)]  # past the budget: the probe alone answers


@pytest.mark.parametrize("phrase", ['"cake"', '"coffee note"', '"caf"*', '"note 1"*'])
def test_phrase_counts_match_a_bounded_count_for_every_phrase_shape_at_and_around_the_budget(runtime, backend,
                                                                                              phrase):
    if backend != "sqlite":
        pytest.skip("FTS5's phrase counts")
    ids = runtime.store.append(NEW, [user(f"coffee note {i}" + (" with cake" if i % 2 else " at the cafe"))
                                     for i in range(40)])
    conn = runtime.db.read()
    bounded = ("SELECT count(*) FROM (SELECT 1 FROM messages_fts WHERE messages_fts MATCH ?{} LIMIT ?)")
    for narrow, args in (((), ()), (("rowid BETWEEN ? AND ?",), (ids[3], ids[-5]))):
        where = "".join(f" AND {w}" for w in narrow)
        total = conn.execute(bounded.format(where), (phrase, *args, 10_000)).fetchone()[0]
        assert total > 0, phrase
        for budget in (0, total - 1, total, total + 1):
            said = ftsbound.phrase_counts(conn, phrase, narrow, args, budget=budget)
            assert said == [(phrase, min(total, budget + 1))], (phrase, narrow, budget)


@pytest.mark.both_backends
def test_the_common_word_pool_is_the_filtered_windows_every_word_rows_then_the_rest_newest_first(runtime, backend,
                                                                                                  monkeypatch):
    """``ftsbound.newest`` (``pgbound.newest`` on a server) against a reading of its rule done here from
    each phrase's matches: a row outside a filter or a scope never shows, none inside the window goes
    missing, the order is fixed; the same pages on both stores (a server's time filter keeps BM25)."""
    import random
    monkeypatch.setattr(ftsbound, "RARE_BUDGET", 15)
    pick = random.Random(7)
    words = ["coffee", "cake", "tea", "note", "apple", "cafe", "cafeteria"]
    for n, name in enumerate(("a", "b", "c") * 3):
        texts = [" ".join(pick.choice(words) for _ in range(pick.randint(1, 4))) for _ in range(40)]
        runtime.store.append(SessionKey(name), [{**(user(t) if pick.random() < 0.5 else assistant(t)),
                                                 "timestamp": 1_700_000_000.0 + 400 * n + i}
                                                for i, t in enumerate(texts)])
    conn = runtime.db.read()
    rows = {int(r["store_id"]): r for r in conn.execute("SELECT store_id, session_id, role, created_at FROM messages")}
    filters = [({}, lambda r: True), ({"role": "user"}, lambda r: r["role"] == "user"),
               ({"session_ids": ["b"]}, lambda r: r["session_id"] == "b"),
               ({"time_from": 1_700_000_300.0, "time_to": 1_700_002_000.0},
                lambda r: 1_700_000_300.0 <= r["created_at"] <= 1_700_002_000.0),
               ({"session_ids": ["a"], "role": "assistant"},
                lambda r: r["session_id"] == "a" and r["role"] == "assistant"),
               ({"visible": Visibility(mode="session", session_id="c")}, lambda r: r["session_id"] == "c")]
    fired = 0
    for query in ("coffee cake", "tea note apple", "caf* cake", "coffee"):
        parts = ftsbound.phrases(build_match(query).expression)
        held = [{row.store_id for row, _, _ in runtime.store.search(p, limit=1000, snippets=False)} for p in parts]
        for kw, keep in filters:
            for common, limit in ((20, 7), (20, 50), (10, 3)):
                got = ranked(runtime, query, 60, common_candidates=common, limit=limit, **kw)
                # the rule fires when each phrase has no match or more than the budget in the searched
                # range (the sessions' ids, else the store) and the window fills; a server's time filter keeps BM25
                ids = [i for i in rows if rows[i]["session_id"] in kw.get("session_ids", "abc")]
                counts = [sum(min(ids) <= i <= max(ids) for i in h) for h in held]
                visible = sorted((i for i in set().union(*held) if keep(rows[i])), reverse=True)
                expect = all(c == 0 or c > 15 for c in counts) and len(visible) >= common \
                    and not (backend == "postgresql" and "time_from" in kw)
                took = bool(got) and got[0][1] in (ftsbound.ALL_RANK, ftsbound.ANY_RANK)
                assert took == expect, (query, kw, common, limit, counts, got)
                if not took:
                    continue  # not every phrase is common in this scope: bm25() ranks it
                fired += 1
                window = visible[:common]
                every = [i for i in window if all(i in h for h in held)] if len(parts) > 1 else []
                want = [(i, ftsbound.ALL_RANK) for i in every] + [(i, ftsbound.ANY_RANK) for i in window
                                                                  if i not in every]
                assert got == want[:limit], (query, kw, common, limit)
    assert fired >= 40  # the common-word path answered most of these searches
