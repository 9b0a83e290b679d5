from __future__ import annotations

import json

import pytest
from conftest import assistant, tool_call, tool_result, user

from hermes_trove.engine import TroveEngine
from hermes_trove.store import SessionKey
from hermes_trove.tools import dispatch

BACKENDS = ("sqlite", "postgresql")  # every test here runs on the file and on a server

KEY = SessionKey("s1", platform="cli")


def call(engine, name, **args):
    text = dispatch(engine.tool_context(), name, args)
    return json.loads(text)


def seed(rt, n=10, session=KEY, t0=1_700_000_000.0):
    msgs = []
    for i in range(n):
        m = user(f"turn {i}") if i % 2 == 0 else assistant(f"reply {i}")
        m["timestamp"] = t0 + i
        msgs.append(m)
    return rt.store.append(session, msgs)


# -- trove_load_session ----------------------------------------------------------------
def test_load_session_pages_a_transcript_with_a_cursor_until_done(engine):
    ids = seed(engine.runtime, 25, session=SessionKey("arch", platform="cli"))
    seen, cursor = [], 0
    for _ in range(10):
        out = call(engine, "trove_load_session", session_id="arch", limit=10, after_store_id=cursor)
        seen += [m["store_id"] for m in out["messages"]]
        assert out["total_messages"] == 25
        if not out["has_more"]:
            assert out["next_cursor"] is None
            break
        cursor = out["next_cursor"]
    assert seen == ids


def test_load_session_clamps_limit_and_content_size_and_reports_it(engine):
    seed(engine.runtime, 3)
    out = call(engine, "trove_load_session", session_id="s1", limit=999, max_content_chars=10 ** 6)
    assert out["limit"] == 200 and out["limit_clamped_from"] == 999
    assert out["max_content_chars"] == 20000 and out["max_content_chars_clamped_from"] == 10 ** 6


def test_load_session_truncates_long_content_with_a_continuation_offset(engine):
    ids = engine.runtime.store.append(KEY, [tool_result("c1", "q" * 9000)])
    out = call(engine, "trove_load_session", session_id="s1", max_content_chars=4000, include_exact_ref=True)
    msg = out["messages"][0]
    assert msg["content_returned_chars"] == 4000 and msg["content_truncated"] is True
    assert msg["next_content_offset"] == 4000 and msg["exact_ref"] == f"trove:{ids[0]}:0-4000"
    rest = call(engine, "trove_expand", store_id=ids[0], content_offset=4000)
    assert rest["content"] == "q" * 5000


def test_load_session_filters_roles_and_time(engine):
    ids = seed(engine.runtime, 10)
    out = call(engine, "trove_load_session", session_id="s1", roles=["assistant"], time_from=1_700_000_004,
               time_to="2023-11-14T22:13:28Z")
    assert [m["store_id"] for m in out["messages"]] == [ids[5], ids[7]]
    assert "roles may contain only" in call(engine, "trove_load_session", session_id="s1", roles=["bot"])["error"]


def test_load_session_requires_a_known_session_id(engine):
    assert call(engine, "trove_load_session")["error"] == "session_id is required"
    assert "no stored session" in call(engine, "trove_load_session", session_id="nope")["error"]


def test_load_session_keeps_tool_fields_and_previews_long_arguments(engine):
    calls = [tool_call("c1", "write_file", json.dumps({"content": "w" * 5000}))]
    engine.runtime.store.append(KEY, [assistant("", calls), tool_result("c1", "ok", name="write_file")])
    out = call(engine, "trove_load_session", session_id="s1")
    first, second = out["messages"]
    assert first["tool_calls_truncated"] is True and len(first["tool_calls_preview"]) == 2000
    assert second["tool_call_id"] == "c1" and second["tool_name"] == "write_file"


def test_load_session_response_stays_under_its_cap_and_moves_the_cursor(engine):
    ids = engine.runtime.store.append(KEY, [user("p" * 19000) for _ in range(8)])
    text = dispatch(engine.tool_context(), "trove_load_session", {"session_id": "s1", "max_content_chars": 20000})
    out = json.loads(text)
    assert 32000 < len(text) <= 64000  # the page fills its own row's cap, not the default bound
    assert out["truncated"] is True and out["has_more"] is True
    assert out["next_cursor"] == ids[out["returned_messages"] - 1]


def test_load_session_works_without_a_bound_session(runtime):
    seed(runtime, 2, session=SessionKey("x"))
    out = call(TroveEngine(runtime), "trove_load_session", session_id="x")
    assert out["returned_messages"] == 2 and out["messages"][0]["from_current_session"] is False


# -- trove_inspect ---------------------------------------------------------------------------
def test_inspect_reports_lineage_frontier_tail_and_dag_without_content(engine):
    rt = engine.runtime
    ids = seed(rt, 40)
    node = rt.dag.add_leaf("s1", "summary of early turns", ids[:10], token_count=5, source_token_count=50,
                           earliest_at=None, latest_at=None)
    rt.store.advance_frontier("s1", ids[9])
    out = call(engine, "trove_inspect")
    assert out["read_only"] is True and out["session_id"] == "s1"
    msgs = out["messages"]
    assert msgs["total"] == 40 and msgs["frontier_store_id"] == ids[9]
    assert msgs["uncompacted_count"] == 30 and msgs["fresh_tail"]["messages"] == 30
    assert msgs["fresh_tail_count"] == 32
    assert out["dag"]["frontier_node_ids"] == [node]
    assert out["compaction"]["frontier"]["highest_summarized_store_id"] == ids[9]
    assert out["compaction"]["last_status"] == "idle"
    assert "turn 3" not in json.dumps(out) and "summary of early" not in json.dumps(out)
    engine.update_from_response({"prompt_tokens": 30000})
    assert call(engine, "trove_inspect")["compaction"]["prompt_measured"] is True
    engine.last_prompt_tokens = -1  # as the host leaves it after a compaction, until the next answer
    assert call(engine, "trove_inspect")["compaction"]["prompt_measured"] is False


def test_inspect_limit_bounds_lists_and_is_clamped(engine):
    seed(engine.runtime, 60)
    out = call(engine, "trove_inspect", limit=5)
    assert len(out["messages"]["fresh_tail"]["items"]) == 5
    assert out["messages"]["fresh_tail"]["items_truncated"] is True
    assert call(engine, "trove_inspect", limit=900)["limit_clamped_from"] == 900


def test_inspect_shows_carried_lineage_and_filter_state(runtime):
    ids = seed(runtime, 4, session=SessionKey("old"))
    runtime.dag.add_leaf("old", "old summary", ids, token_count=3, source_token_count=10,
                         earliest_at=None, latest_at=None)
    eng = TroveEngine(runtime)
    eng.on_session_start("new", platform="cli")
    runtime.dag.carry_over("old", "new", 0)
    out = call(eng, "trove_inspect")
    lineage = out["lineage"]
    assert lineage["carried_nodes"] == 1 and lineage["carried_from"] == [{"session_id": "old", "nodes": 1}]
    assert out["filters"]["session_mode"] == "active" and out["filters"]["matched_pattern"] is None


def test_inspect_reports_the_matched_ignore_pattern(tmp_path):
    from conftest import make_config

    from hermes_trove.runtime import build_runtime

    rt = build_runtime(make_config(tmp_path, ignore_session_patterns=("cron-*",)))
    eng = TroveEngine(rt)
    eng.on_session_start("cron-nightly", platform="cli")
    out = call(eng, "trove_inspect")
    assert out["filters"]["matched_pattern"] == "cron-*" and out["filters"]["session_mode"] == "ignored"


def test_handle_tool_call_does_not_ingest_for_inspect(engine):
    out = json.loads(engine.handle_tool_call("trove_inspect", {}, messages=[user("not stored by inspect")]))
    assert out["messages"]["total"] == 0


# -- trove_status / trove_doctor ----------------------------------------------------------------
@pytest.mark.parametrize("tool", ["trove_status", "trove_doctor"])
def test_status_and_doctor_answer_with_bounded_json(engine, tool):
    seed(engine.runtime, 5)
    text = dispatch(engine.tool_context(), tool, {})
    out = json.loads(text)
    assert "error" not in out and len(text) <= 32000


def test_status_falls_back_when_the_report_itself_fails(engine, monkeypatch):
    import hermes_trove.ops.status as status

    def broken(**kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(status, "build_status", broken)
    out = call(engine, "trove_status")
    assert out["fallback"] is True and "boom" in out["status_error"]


def test_unknown_tool_and_non_object_arguments_are_errors(engine):
    assert "unknown tool" in call(engine, "trove_nope")["error"]
    assert "JSON object" in json.loads(dispatch(engine.tool_context(), "trove_grep", "[1, 2]"))["error"]
    assert "JSON object" in json.loads(dispatch(engine.tool_context(), "trove_grep", "{not json"))["error"]
