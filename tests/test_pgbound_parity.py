"""The common-word rule on both stores at once: the same rows written to a SQLite file and to a
PostgreSQL schema, random queries and filters with the rare budget lowered; the rule fires on
both or on neither, and where it fires both give the same page."""
from __future__ import annotations

import random

import pytest
from conftest import assistant, make_config, user

from hermes_trove import ftsbound
from hermes_trove.fulltext import build_match
from hermes_trove.runtime import build_runtime
from hermes_trove.scope import Visibility
from hermes_trove.store import SessionKey

# words both stemmers leave as they are, so both stores match the same rows
WORDS = ("cake", "tea", "lamp", "river", "stone", "bird", "map", "fog")
SESSIONS = ("a", "b", "c", "d")
QUERIES = ("cake", "cake tea", "tea lamp river", '"lamp river"', "riv* cake", '"cake tea" stone', "bird fog",
           "map", "fog stone tea", "st* ri*", "zebra cake", "owl", "owl tea", "owl zebra",
           'cake "!!!"', '"cake tea" "..." tea')
RULE = (ftsbound.ALL_RANK, ftsbound.ANY_RANK)


def page(store, query: str, **kw) -> list[tuple[int, float]]:
    return [(row.store_id, rank) for row, rank, _ in store.search(build_match(query).expression, **kw)]


def fill(stores, seed: int) -> None:
    """About 160 rows in four sessions written in turns, so each session's id range holds the others' rows;
    no row holds "zebra"."""
    pick = random.Random(seed)
    at = 1_700_000_000.0
    for _ in range(pick.randint(6, 10)):
        for name in SESSIONS:
            words = (*WORDS, "owl", "owl") if name == "d" else WORDS  # "owl": common in d, in no other session
            texts = [" ".join(pick.choice(words[:pick.randint(3, len(words))]) for _ in range(pick.randint(1, 4)))
                     for _ in range(pick.randint(0, 6))]
            batch = []
            for text in texts:
                at += 1
                batch.append({**(user(text) if pick.random() < 0.6 else assistant(text)), "timestamp": at})
            written = [s.append(SessionKey(name), batch) for s in stores] if batch else []
            assert all(ids == written[0] for ids in written), "the two stores gave the rows different ids"


@pytest.mark.parametrize("seed", range(12))
def test_both_stores_fire_the_common_word_rule_alike_and_give_the_same_page(tmp_path, pg_database_url, seed,
                                                                           monkeypatch):
    lite = build_runtime(make_config(tmp_path / "lite", database_url=""))
    server = build_runtime(make_config(tmp_path / "server", database_url=pg_database_url))
    assert lite.db.kind == "sqlite" and server.db.kind == "postgresql"
    fill([lite.store, server.store], seed)
    pick = random.Random(1000 + seed)
    fired = compared = 0
    for _ in range(60):
        monkeypatch.setattr(ftsbound, "RARE_BUDGET", pick.randint(2, 30))
        kw: dict = {"limit": pick.choice((1, 3, 7, 40)), "max_candidates": pick.choice((10, 60)),
                    "common_candidates": pick.choice((2, 5, 20)), "snippets": pick.random() < 0.3}
        if pick.random() < 0.4:
            kw["session_ids"] = pick.sample(SESSIONS, pick.randint(1, 2))
        if pick.random() < 0.3:
            kw["role"] = pick.choice(("user", "assistant"))
        if pick.random() < 0.2:
            kw["visible"] = Visibility(mode="session", session_id=pick.choice(SESSIONS))
        query = pick.choice(QUERIES)
        a, b = page(lite.store, query, **kw), page(server.store, query, **kw)
        took = [bool(p) and p[0][1] in RULE for p in (a, b)]
        compared += 1
        assert took[0] == took[1], (query, kw, ftsbound.RARE_BUDGET, a, b)
        if took[0]:
            fired += 1
            assert a == b, (query, kw, ftsbound.RARE_BUDGET)
    assert compared == 60 and 0 < fired < compared  # both ways were taken


def test_a_servers_common_word_statement_holds_no_query_text_and_is_never_prepared(tmp_path, pg_database_url,
                                                                                    monkeypatch):
    """The words are parameters, so no query text is written into the SQL, and a query of one shape has
    one statement (the statement cache does not grow with distinct greps). It is never prepared: a
    prepared statement's generic plan, from its sixth call on, would not see the words."""
    from hermes_trove import pgdb

    monkeypatch.setattr(ftsbound, "RARE_BUDGET", 3)
    server = build_runtime(make_config(tmp_path, database_url=pg_database_url))
    server.store.append(SessionKey("a"), [user(f"cake tea note {i} word{i}") for i in range(30)])
    sent: list[tuple[str, object]] = []
    real = pgdb.PgConnection.run

    def run(self, sql, params=(), prepare=None):
        if "message_search" in sql:
            sent.append((sql, prepare))
        return real(self, sql, params, prepare)

    monkeypatch.setattr(pgdb.PgConnection, "run", run)
    for snippets in (False, True):  # the two shapes: BM25 folded in, or snippets asked after
        page(server.store, "cake tea", limit=5, max_candidates=20, common_candidates=10, snippets=snippets)
    before = pgdb.translated.cache_info().currsize
    sent.clear()
    for i in range(12):  # "zebra{i}" is in no row: each query is common words only
        for snippets in (False, True):
            hits = page(server.store, f"cake zebra{i}", limit=5, max_candidates=20, common_candidates=10,
                        snippets=snippets)
            assert [rank for _, rank in hits] == [ftsbound.ANY_RANK] * 5, hits
    rule = [(sql, prepare) for sql, prepare in sent if "gate" in sql]
    assert len(rule) == 24 and len({sql for sql, _ in rule}) == 2, len(rule)
    assert all("zebra" not in sql and prepare is False for sql, prepare in rule)
    assert pgdb.translated.cache_info().currsize == before
