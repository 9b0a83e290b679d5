from __future__ import annotations

import json
import random
import string

import pytest
from conftest import assistant, tool_call, tool_result, user

from hermes_trove.store import SessionKey
from hermes_trove.tools import dispatch

BACKENDS = ("sqlite", "postgresql")  # every test here runs on the file and on a server

KEY = SessionKey("s1", platform="cli")


def call(engine, name, **args):
    out = dispatch(engine.tool_context(), name, args)
    assert isinstance(out, str)
    return json.loads(out)


def seed(runtime, session=KEY, messages=None, t0=1_700_000_000.0):
    msgs = messages or [
        user("Where is the staging deploy key kept?"),
        assistant("Let me check.",
                  [tool_call("c1", "terminal", json.dumps({"cmd": "ls /etc/keys/staging-deploy.pem"}))]),
        tool_result("c1", "/etc/keys/staging-deploy.pem"),
        assistant("The staging deploy key is /etc/keys/staging-deploy.pem."),
        user("Thanks. Now, what database port did we pick?"),
        assistant("We chose port 6543 for the postgres pooler."),
    ]
    for i, m in enumerate(msgs):
        m.setdefault("timestamp", t0 + 60 * i)
    return runtime.store.append(session, msgs)


def test_natural_language_question_finds_the_answering_message(engine):
    ids = seed(engine.runtime)
    out = call(engine, "trove_grep", query="Which port did we choose for the pooler?")
    assert out["results"][0]["store_id"] == ids[5]
    hit = out["results"][0]
    assert hit["type"] == "message" and hit["from_current_session"] is True
    assert set(hit) >= {"store_id", "session_id", "source", "role", "timestamp", "snippet"}
    assert ">>>" in hit["snippet"]


def test_tool_call_arguments_are_searchable(engine):
    ids = seed(engine.runtime)
    out = call(engine, "trove_grep", query="ls /etc/keys", role="assistant")
    assert ids[1] in [h["store_id"] for h in out["results"]]


def test_identifier_query_ranks_the_exact_path_first(engine):
    ids = seed(engine.runtime)
    out = call(engine, "trove_grep", query="staging-deploy.pem")
    assert out["results"][0]["store_id"] in (ids[2], ids[3], ids[1])
    assert out["fts_query"].startswith('"staging deploy pem"')


def test_summary_nodes_visible_in_the_session_are_returned_with_expand_hints(engine):
    ids = seed(engine.runtime)
    node = engine.runtime.dag.add_leaf("s1", "Discussed the postgres pooler port choice.", ids[4:],
                                       token_count=9, source_token_count=40, earliest_at=1.0, latest_at=2.0)
    out = call(engine, "trove_grep", query="postgres pooler")
    summaries = [h for h in out["results"] if h["type"] == "summary"]
    assert summaries and summaries[0]["node_id"] == node
    assert set(summaries[0]) >= {"node_id", "depth", "snippet", "token_count", "earliest_at", "latest_at",
                                 "expand_hint"}


def test_raw_message_filters_drop_summaries_and_say_so(engine):
    ids = seed(engine.runtime)
    engine.runtime.dag.add_leaf("s1", "postgres pooler port", ids[4:], token_count=5, source_token_count=40,
                                earliest_at=None, latest_at=None)
    out = call(engine, "trove_grep", query="postgres", role="assistant")
    assert out["summary_results_omitted"] is True
    assert all(h["type"] == "message" and h["role"] == "assistant" for h in out["results"])


def test_time_window_accepts_unix_seconds_and_aware_iso(engine):
    ids = seed(engine.runtime, t0=1_700_000_000.0)
    out = call(engine, "trove_grep", query="port", time_from=1_700_000_000 + 290)
    assert [h["store_id"] for h in out["results"]] == [ids[5]]
    out = call(engine, "trove_grep", query="port", time_to="2023-11-14T22:17:30+00:00")
    assert ids[5] not in [h["store_id"] for h in out["results"]]
    assert out["time_to"] == "2023-11-14T22:17:30Z"


def test_naive_iso_time_is_rejected_with_a_fix(engine):
    seed(engine.runtime)
    out = call(engine, "trove_grep", query="port", time_from="2024-01-01T10:00:00")
    assert "timezone" in out["error"] and "2024-01-01T10:00:00Z" in out["error"]


def test_inverted_time_window_is_an_error(engine):
    out = call(engine, "trove_grep", query="port", time_from=200, time_to=100)
    assert "after time_to" in out["error"]


def test_limit_is_clamped_and_reported(engine):
    seed(engine.runtime)
    out = call(engine, "trove_grep", query="port", limit=5000)
    assert out["limit"] == 200 and out["limit_clamped_from"] == 5000


@pytest.mark.parametrize("bad", [{"limit": 0}, {"limit": "ten"}, {"limit": True}, {"sort": "best"},
                                 {"role": "robot"}, {"session_scope": "everything"}, {"query": 12.5, "offset": -1}])
def test_bad_arguments_get_a_clear_error(engine, bad):
    out = call(engine, "trove_grep", **{"query": "port", **bad})
    assert "error" in out and len(out["error"]) < 300


def test_missing_query_is_an_error(engine):
    assert call(engine, "trove_grep")["error"] == "query is required"


def test_default_scope_is_the_current_session_only(engine):
    seed(engine.runtime)
    seed(engine.runtime, session=SessionKey("other", platform="cli"),
         messages=[user("the port for the other project is 7777")])
    out = call(engine, "trove_grep", query="port 7777")
    assert all(h["session_id"] == "s1" for h in out["results"])


def test_all_scope_searches_other_sessions_raw_rows_only(engine):
    seed(engine.runtime)
    other = seed(engine.runtime, session=SessionKey("other", platform="cli"),
                 messages=[user("the port for the other project is 7777")])
    out = call(engine, "trove_grep", query="7777", session_scope="all")
    assert out["results"][0]["store_id"] == other[0]
    assert out["results"][0]["from_current_session"] is False
    assert out["summary_results_omitted"] is True


def test_session_scope_needs_a_session_id_and_searches_only_it(engine):
    seed(engine.runtime)
    other = seed(engine.runtime, session=SessionKey("other"), messages=[user("port 7777 elsewhere")])
    assert "needs session_id" in call(engine, "trove_grep", query="port", session_scope="session")["error"]
    out = call(engine, "trove_grep", query="port", session_scope="session", session_id="other")
    assert [h["store_id"] for h in out["results"]] == other
    assert "only with session_scope" in call(engine, "trove_grep", query="port", session_id="other")["error"]


def test_source_filters_raw_rows_and_summaries_by_descendant_lineage(engine):
    rt = engine.runtime
    cli = seed(rt, messages=[user("kubernetes rollout from the cli")])
    tg = seed(rt, session=SessionKey("s1", platform="telegram"), messages=[user("kubernetes rollout from telegram")])
    n_cli = rt.dag.add_leaf("s1", "kubernetes rollout (cli)", cli, token_count=3, source_token_count=9,
                            earliest_at=None, latest_at=None)
    n_tg = rt.dag.add_leaf("s1", "kubernetes rollout (tg)", tg, token_count=3, source_token_count=9,
                           earliest_at=None, latest_at=None)
    out = call(engine, "trove_grep", query="kubernetes rollout", source="telegram")
    assert {h.get("store_id") for h in out["results"] if h["type"] == "message"} == set(tg)
    assert {h.get("node_id") for h in out["results"] if h["type"] == "summary"} == {n_tg}
    assert n_cli not in [h.get("node_id") for h in out["results"]]


def test_unknown_source_matches_legacy_rows(engine):
    ids = seed(engine.runtime, session=SessionKey("s1"), messages=[user("legacy row about quasars")])
    out = call(engine, "trove_grep", query="quasars", source="unknown")
    assert [h["store_id"] for h in out["results"]] == ids


def test_recency_sort_puts_newest_matches_first(engine):
    ids = seed(engine.runtime, messages=[user("deploy alpha"), user("deploy beta"), user("deploy gamma")])
    out = call(engine, "trove_grep", query="deploy", sort="recency")
    assert [h["store_id"] for h in out["results"]] == ids[::-1]


def test_recent_relevance_sort_returns_the_same_hits_reordered(engine):
    seed(engine.runtime)
    rel = {h["store_id"] for h in call(engine, "trove_grep", query="deploy key")["results"]}
    out = call(engine, "trove_grep", query="deploy key", sort="recent_relevance")
    assert {h["store_id"] for h in out["results"]} == rel and "warnings" not in out


def test_offset_continues_where_the_previous_page_stopped(engine):
    msgs = [user(f"widget number {i}") for i in range(25)]
    seed(engine.runtime, messages=msgs)
    first = call(engine, "trove_grep", query="widget", limit=10)
    assert first["has_more"] is True and first["next_offset"] == 10
    second = call(engine, "trove_grep", query="widget", limit=10, offset=first["next_offset"])
    third = call(engine, "trove_grep", query="widget", limit=10, offset=second["next_offset"])
    seen = [h["store_id"] for page in (first, second, third) for h in page["results"]]
    assert len(seen) == 25 == len(set(seen))
    assert third["has_more"] is False and third["next_offset"] is None


def test_response_stays_under_its_character_cap_and_flags_truncation(engine):
    big = " ".join(f"needle{i} " + "x" * 30 for i in range(40))
    seed(engine.runtime, messages=[user("needle " + big + str(i)) for i in range(200)])
    text = dispatch(engine.tool_context(), "trove_grep", {"query": "needle", "limit": 200})
    out = json.loads(text)
    assert len(text) <= 32000
    if out["total_results"] < 200:
        assert out["truncated"] is True and out["next_offset"] == out["total_results"]


def test_grep_without_a_bound_session_points_to_archive_search(runtime):
    from hermes_trove.engine import TroveEngine

    out = call(TroveEngine(runtime), "trove_grep", query="anything")
    assert "session_scope='all'" in out["error"]


def test_query_with_no_words_returns_no_results_and_a_note(engine):
    seed(engine.runtime)
    out = call(engine, "trove_grep", query="🙂 ?!")
    assert out["results"] == [] and "no searchable words" in out["note"]


def test_fuzzed_queries_always_answer_json_without_fts_errors(engine):
    seed(engine.runtime)
    rng = random.Random(7)
    alphabet = string.printable + "éß日本🙂🚀\"\"**()::--^"
    queries = ["", "\"", "x" * 10000, "NEAR(a b", "a AND OR NOT b", "col:val", "🙂" * 50]
    queries += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 80))) for _ in range(150)]
    for q in queries:
        out = call(engine, "trove_grep", query=q)
        assert "error" not in out, (q, out)
        assert isinstance(out["results"], list)


def test_externalized_scope_reports_scan_or_a_clear_note(engine):
    seed(engine.runtime)
    out = call(engine, "trove_grep", query="deploy", content_scope="both")
    assert "error" not in out
    assert "externalized_scan" in out or "externalized_note" in out or "externalized_error" in out
    out = call(engine, "trove_grep", query="deploy", content_scope="externalized", session_scope="all")
    assert out["externalized_results_omitted"] is True


def test_externalized_refs_need_an_externalized_content_scope(engine):
    out = call(engine, "trove_grep", query="x", externalized_refs=["trove-a.json"])
    assert "content_scope" in out["error"]


def test_arguments_may_arrive_as_a_json_string(engine):
    ids = seed(engine.runtime)
    out = json.loads(dispatch(engine.tool_context(), "trove_grep", json.dumps({"query": "6543"})))
    assert out["results"][0]["store_id"] == ids[5]


def test_unknown_arguments_are_reported_not_fatal(engine):
    seed(engine.runtime)
    out = call(engine, "trove_grep", query="port", flavour="semantic")
    assert out["ignored_arguments"] == ["flavour"]


def test_handle_tool_call_ingests_live_messages_before_searching(engine):
    live = [user("the canary word is periwinkle"), assistant("noted")]
    out = json.loads(engine.handle_tool_call("trove_grep", {"query": "periwinkle"}, messages=live))
    assert out["results"] and out["results"][0]["role"] == "user"


def test_cjk_text_inside_a_longer_run_is_found_by_the_substring_fallback(engine):
    ids = seed(engine.runtime, messages=[user("部署失败:数据库连接错误"), assistant("正在检查")])
    out = call(engine, "trove_grep", query="数据库")
    assert [h["store_id"] for h in out["results"]] == [ids[0]]
    assert out["fallback"] == "substring" and ">>>数据库<<<" in out["results"][0]["snippet"]


def test_emoji_and_partial_identifiers_fall_back_to_substring_search(engine):
    ids = seed(engine.runtime, messages=[user("ship it 🚀 now"), user("ticket ING-77310 is open")])
    assert [h["store_id"] for h in call(engine, "trove_grep", query="🚀")["results"]] == [ids[0]]
    out = call(engine, "trove_grep", query="7731")
    assert [h["store_id"] for h in out["results"]] == [ids[1]] and out["fallback"] == "substring"


def test_substring_fallback_respects_scope_and_filters(engine):
    seed(engine.runtime, messages=[user("日本語のメモ")])
    other = seed(engine.runtime, session=SessionKey("other"), messages=[user("別の日本語のメモ")])
    assert all(h["session_id"] == "s1" for h in call(engine, "trove_grep", query="日本語")["results"])
    out = call(engine, "trove_grep", query="別の", session_scope="all")
    assert [h["store_id"] for h in out["results"]] == other
    assert call(engine, "trove_grep", query="日本語", role="assistant")["results"] == []


def test_archive_search_works_before_any_session_is_bound(runtime):
    from hermes_trove.engine import TroveEngine

    ids = seed(runtime, session=SessionKey("archived"), messages=[user("the archived canary is heliotrope")])
    out = call(TroveEngine(runtime), "trove_grep", query="heliotrope", session_scope="all")
    assert [h["store_id"] for h in out["results"]] == ids
    assert out["results"][0]["from_current_session"] is False


def test_filters_that_drop_most_ranked_rows_still_fill_the_page(engine):
    loud = [assistant("zircon zircon zircon zircon report") for _ in range(150)]
    quiet = [user(f"a zircon mention number {i} in a much longer user message about other things") for i in range(5)]
    ids = seed(engine.runtime, messages=loud + quiet)
    out = call(engine, "trove_grep", query="zircon", role="user", limit=5)
    assert sorted(h["store_id"] for h in out["results"]) == ids[150:]


def test_session_range_scan_ignores_interleaved_rows_of_other_sessions(engine):
    rt = engine.runtime
    mine = []
    for i in range(30):
        mine += seed(rt, messages=[user(f"mine basalt {i}")])
        seed(rt, session=SessionKey("noise"), messages=[user("basalt basalt basalt noise")])
    out = call(engine, "trove_grep", query="basalt", limit=50)
    assert sorted(h["store_id"] for h in out["results"]) == mine
