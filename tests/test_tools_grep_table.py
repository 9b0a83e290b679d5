"""trove_grep by table: every sort and mode over the same stored turns, the deprecated sort
spelling, argument errors, paging edges, and the fused raw + summary list through dispatch."""
from __future__ import annotations

import json

import pytest
from conftest import assistant, user

from hermes_trove.retrieval import search
from hermes_trove.store import SessionKey
from hermes_trove.tools import dispatch

BACKENDS = ("sqlite", "postgresql")  # every test here runs on the file and on a server

KEY = SessionKey("s1", platform="cli")
T0 = 1_700_000_000.0
DAY = 86400.0


def call(engine, **args):
    out = json.loads(dispatch(engine.tool_context(), "trove_grep", args))
    assert isinstance(out, dict)
    return out


def ok(engine, **args):
    out = call(engine, **args)
    assert "error" not in out, out
    return out


def ids(out, kind="message"):
    return [h["store_id"] if kind == "message" else h["node_id"] for h in out["results"] if h["type"] == kind]


@pytest.fixture
def turns(engine):
    """Four matching turns of growing age: the strongest match is the oldest."""
    msgs = [user("kiwi kiwi kiwi orchard harvest plan"),          # strongest, oldest
            assistant("the kiwi orchard needs water"),
            user("unrelated chatter about the weather"),
            user("one kiwi left")]                                # weakest, newest
    ats = [T0, T0 + 10 * DAY, T0 + 20 * DAY, T0 + 400 * DAY]
    for m, at in zip(msgs, ats, strict=True):
        m["timestamp"] = at
    return engine.runtime.store.append(KEY, msgs)


@pytest.mark.parametrize("sort", ["relevance", "recency", "recent_relevance", "hybrid", "RECENCY", " recency "])
def test_every_sort_returns_the_same_matching_rows(engine, turns, sort):
    out = ok(engine, query="kiwi orchard", sort=sort)
    assert sorted(ids(out)) == sorted([turns[0], turns[1], turns[3]])
    assert out["sort"] in search.SORTS


@pytest.mark.parametrize("sort, first", [("relevance", 0), ("recency", 3)])
def test_sort_decides_the_first_row(engine, turns, sort, first):
    assert ids(ok(engine, query="kiwi orchard", sort=sort))[0] == turns[first]


def test_recency_is_newest_first_throughout(engine, turns):
    assert ids(ok(engine, query="kiwi", sort="recency")) == [turns[3], turns[1], turns[0]]


@pytest.mark.parametrize("spelling", ["hybrid", "HYBRID", "Hybrid"])
def test_the_old_sort_spelling_runs_as_recent_relevance_and_says_so(engine, turns, spelling):
    old = ok(engine, query="kiwi orchard", sort=spelling)
    new = ok(engine, query="kiwi orchard", sort="recent_relevance")
    assert old["sort"] == "recent_relevance" and ids(old) == ids(new)
    assert old["warnings"] == ["sort='hybrid' is deprecated; it ran as sort='recent_relevance'"]
    assert "warnings" not in new


def test_recent_relevance_trades_relevance_for_age_through_the_recency_prior(engine, turns):
    rel = ids(ok(engine, query="kiwi orchard"))
    recent = ids(ok(engine, query="kiwi orchard", sort="recent_relevance"))
    assert set(rel) == set(recent)
    assert recent.index(turns[1]) <= rel.index(turns[1])  # the younger strong match does not fall


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_vector_modes_without_embeddings_answer_from_full_text_and_say_so(engine, turns, mode):
    out = ok(engine, query="kiwi orchard", mode=mode)
    assert out["mode"] == "full_text" and out["requested_mode"] == mode and out["degraded_to_fts"] is True
    assert out["degraded_reason"] and out["semantic"]["ran"] is False
    assert ids(out) == ids(ok(engine, query="kiwi orchard"))


def test_full_text_mode_does_not_touch_vectors(engine, turns):
    out = ok(engine, query="kiwi", mode="full_text")
    assert out["mode"] == "full_text" and "semantic" not in out and "degraded_to_fts" not in out


@pytest.mark.parametrize("args, message", [
    ({"sort": "best"}, "sort must be one of"),
    ({"sort": "relevant"}, "sort must be one of"),
    ({"mode": "vector"}, "mode must be one of"),
    ({"session_scope": "global"}, "session_scope must be one of"),
    ({"content_scope": "files"}, "content_scope must be one of"),
    ({"role": "bot"}, "role must be one of"),
    ({"session_scope": "session"}, "needs session_id"),
    ({"session_id": "s1"}, "only with session_scope='session'"),
    ({"session_scope": "all", "session_id": "s1"}, "only with session_scope='session'"),
    ({"externalized_refs": ["a"]}, "externalized_refs needs content_scope"),
    ({"externalized_refs": "a,b", "content_scope": "history"}, "externalized_refs needs content_scope"),
    ({"externalized_refs": [1, 2], "content_scope": "both"}, "must be a list of strings"),
    ({"limit": 0}, "limit"),
    ({"limit": -5}, "limit"),
    ({"offset": -1}, "offset"),
    ({"time_from": 300, "time_to": 100}, "after time_to"),
    ({"time_from": "yesterday-ish"}, "time_from"),
])
def test_argument_errors_table(engine, turns, args, message):
    out = call(engine, query="kiwi", **args)
    assert message in out.get("error", ""), out


@pytest.mark.parametrize("limit, offset, expected_ids, more", [
    (1, 0, [0], True),
    (2, 0, [0, 1], True),
    (3, 0, [0, 1, 3], False),
    (10, 0, [0, 1, 3], False),
    (1, 1, [1], True),
    (2, 2, [3], False),
    (5, 3, [], False),
    (5, 10000, [], False),
])
def test_paging_table(engine, turns, limit, offset, expected_ids, more):
    out = ok(engine, query="kiwi", limit=limit, offset=offset)
    assert ids(out) == [turns[i] for i in expected_ids]
    assert out["has_more"] is more and out["total_results"] == len(expected_ids)
    assert out["next_offset"] == (offset + len(expected_ids) if more else None)


def test_pages_of_one_join_up_to_the_whole_ranking(engine, turns):
    whole = ids(ok(engine, query="kiwi", limit=10))
    pages = [ids(ok(engine, query="kiwi", limit=1, offset=i))[0] for i in range(len(whole))]
    assert pages == whole


@pytest.mark.parametrize("limit, clamped", [(200, None), (201, 201), (10**6, 10**6)])
def test_limit_clamp_table(engine, turns, limit, clamped):
    out = ok(engine, query="kiwi", limit=limit)
    assert out["limit"] == min(limit, 200) and out.get("limit_clamped_from") == clamped


def test_the_response_echoes_what_ran(engine, turns, backend):
    out = ok(engine, query="kiwi", sort="recency", role="user", time_from=T0, session_scope="all")
    assert {k: out[k] for k in ("query", "sort", "mode", "session_scope", "content_scope", "limit", "offset")} == {
        "query": "kiwi", "sort": "recency", "mode": "full_text", "session_scope": "all",
        "content_scope": "history", "limit": 10, "offset": 0}
    assert out["role"] == "user" and out["time_from"].startswith("2023-11-14")
    assert out["fts_query"] == '"kiwi"' and out["archive_candidate_limit"] == search.ARCHIVE_CANDIDATES
    assert out.get("archive_common_candidate_limit") == (search.COMMON_CANDIDATES if backend == "sqlite" else None)


def test_a_long_query_is_echoed_shortened(engine, turns):
    out = ok(engine, query="kiwi " + "x" * 600)
    assert len(out["query"]) == 501 and out["query"].endswith("…")


@pytest.mark.parametrize("role, expected", [("user", [0, 3]), ("assistant", [1]), ("tool", []), ("system", [])])
def test_role_filter_table(engine, turns, role, expected):
    assert sorted(ids(ok(engine, query="kiwi", role=role))) == sorted(turns[i] for i in expected)


@pytest.mark.parametrize("window, expected", [
    ({"time_from": T0 + DAY}, [1, 3]),
    ({"time_to": T0 + DAY}, [0]),
    ({"time_from": T0, "time_to": T0}, [0]),                  # inclusive at both ends
    ({"time_from": T0 + 10 * DAY, "time_to": T0 + 10 * DAY}, [1]),
    ({"time_from": T0 + 500 * DAY}, []),
])
def test_time_window_table(engine, turns, window, expected):
    assert sorted(ids(ok(engine, query="kiwi", **window))) == sorted(turns[i] for i in expected)


# -- raw rows and summaries, fused ------------------------------------------------------------------

@pytest.fixture
def with_summary(engine, turns):
    node = engine.runtime.dag.add_leaf("s1", "kiwi orchard summary: harvest and water", turns[:2], token_count=8,
                                       source_token_count=30, earliest_at=T0, latest_at=T0 + 10 * DAY)
    return turns, node


@pytest.mark.parametrize("sort", search.SORTS)
def test_summaries_and_raw_rows_are_fused_in_every_sort(engine, with_summary, sort):
    turns, node = with_summary
    out = ok(engine, query="kiwi orchard", sort=sort)
    assert ids(out, "summary") == [node] and sorted(ids(out)) == sorted([turns[0], turns[1], turns[3]])


def test_relevance_interleaves_the_best_raw_row_and_the_best_summary_first(engine, with_summary):
    turns, node = with_summary
    kinds = [h["type"] for h in ok(engine, query="kiwi orchard")["results"]]
    assert kinds[:2] == ["message", "summary"]  # rank 1 of each list, the raw list first on the tie


def test_recency_puts_a_summary_by_its_latest_time(engine, with_summary):
    turns, node = with_summary
    order = [(h["type"], h.get("store_id", h.get("node_id"))) for h in
             ok(engine, query="kiwi", sort="recency")["results"]]
    assert order[0] == ("message", turns[3])  # newer than the summary's latest_at
    assert order.index(("summary", node)) < order.index(("message", turns[0]))


@pytest.mark.parametrize("args", [{"role": "user"}, {"time_from": T0}, {"session_scope": "all"},
                                  {"session_scope": "session", "session_id": "s1"}])
def test_filters_only_raw_rows_carry_leave_summaries_out(engine, with_summary, args):
    out = ok(engine, query="kiwi orchard", **args)
    assert ids(out, "summary") == [] and out["summary_results_omitted"] is True


def test_sessions_are_kept_apart_by_scope(engine, turns):
    other = engine.runtime.store.append(SessionKey("other", platform="cli"), [user("kiwi in another session")])
    assert other[0] not in ids(ok(engine, query="kiwi"))
    assert other[0] in ids(ok(engine, query="kiwi", session_scope="all"))
    assert ids(ok(engine, query="kiwi", session_scope="session", session_id="other")) == other
    assert ids(ok(engine, query="kiwi", session_scope="session", session_id="missing")) == []


# -- the request's own rules ----------------------------------------------------------------------

def request(**kw):
    base = {"query": "q", "limit": 10, "offset": 0, "sort": "relevance", "scope": "current",
            "content_scope": "history", "current": "s1"}
    return search.GrepRequest(**{**base, **kw})


@pytest.mark.parametrize("kw, filtered", [
    ({}, False), ({"role": "user"}, True), ({"time_from": 0.0}, True), ({"time_to": 5.0}, True),
    ({"source": "cli"}, False),  # summaries honour a source through their descendants
    ({"mode": "hybrid"}, False),
])
def test_raw_filtered_table(kw, filtered):
    assert request(**kw).raw_filtered is filtered


@pytest.mark.parametrize("turn_start, session, store_id, in_flight", [
    (None, "s1", 99, False),      # no turn in flight
    (10, "s1", 10, False),        # the last finished reply itself is history
    (10, "s1", 11, True),
    (10, "s1", 500, True),
    (10, "other", 11, False),     # another session's rows are never the caller's turn
    (0, "s1", 1, True),           # the first turn: every row of the session
])
def test_in_flight_table(turn_start, session, store_id, in_flight):
    row = type("Row", (), {"session_id": session, "store_id": store_id})()
    assert request(turn_start=turn_start).in_flight(row) is in_flight


def test_the_literal_fallback_also_leaves_the_turn_out(engine):
    live = [user("部署失败:数据库连接错误"), assistant("noted"), user("数据库?"),
            assistant("", [{"id": "c1", "type": "function", "function": {"name": "trove_grep",
                                                                       "arguments": '{"query": "数据库"}'}}])]
    out = json.loads(engine.handle_tool_call("trove_grep", {"query": "数据库"}, messages=live))
    texts = [r.content for r in engine.runtime.store.get_many(ids(out))]
    assert out.get("fallback") == "substring" and texts == ["部署失败:数据库连接错误"]


@pytest.mark.parametrize("query", ['"\x00"', 'kiwi "\x00"', '"kiwi\x00"', 'kiwi " + \x00 "'],
                         ids=["nul-phrase", "term-and-nul-phrase", "nul-in-phrase", "punctuation-and-nul-phrase"])
@pytest.mark.parametrize("tool", ["trove_grep", "trove_recall"])
def test_a_nul_inside_a_quoted_phrase_searches_instead_of_failing(engine, tool, query):
    engine.runtime.store.append(SessionKey("s2"), [user("the kiwi orchard needs water")])
    out = json.loads(dispatch(engine.tool_context(), tool, {"query": query, "session_scope": "all"}
                              if tool == "trove_grep" else {"query": query}))
    assert "error" not in out, out
    hits = out["results" if tool == "trove_grep" else "hits"]
    assert bool(hits) == ("kiwi" in query)
