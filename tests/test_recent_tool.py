"""trove_recent: the mode each window gets (rollups, leaf summaries, raw messages) and why,
paging, scopes, the 20,000-character cap with huge rows, bad periods; and the time-aware
pieces around it (occurrences_for, dated summarizer records)."""
from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from conftest import make_config, make_engine
from test_rollups import NOW, Model, add_leaf, at

from hermes_trove.compaction.summarize import build_prompt, serialize_messages
from hermes_trove.dates.occurrence import occurrences_for
from hermes_trove.runtime import build_runtime
from hermes_trove.store import SessionKey
from hermes_trove.temporal import recent, rollups
from hermes_trove.tools import dispatch

BACKENDS = ("sqlite", "postgresql")


@pytest.fixture(autouse=True)
def _now(monkeypatch):
    monkeypatch.setattr(recent, "clock", lambda: NOW)  # relative periods count from 10 June 2024
    monkeypatch.setattr("hermes_trove.temporal.rollups.schedule", lambda *a, **k: None)  # no background passes


def call(engine, **args) -> dict:
    text = dispatch(engine.tool_context(), "trove_recent", args)
    assert len(text) <= 20000
    return json.loads(text)


def runtime_with(tmp_path, **cfg):
    return build_runtime(make_config(tmp_path, **cfg))


def test_an_unknown_period_is_refused_with_the_accepted_forms(tmp_path):
    engine = make_engine(runtime_with(tmp_path))
    for bad in ("next tuesday", "2024-13-01", ""):
        out = call(engine, period=bad)
        assert "error" in out
    out = call(engine, period="sometime")
    assert "yesterday" in out["error"] and "YYYY-Www" in out["error"] and "START..END" in out["error"]
    assert "period is required" in call(engine)["error"]
    assert "scope must be one of" in call(engine, period="today", scope="everything")["error"]


def test_with_rollups_off_leaf_summaries_serve_and_say_so(tmp_path):
    runtime = runtime_with(tmp_path)
    nodes = [add_leaf(runtime, d) for d in (1, 2, 3)]
    out = call(make_engine(runtime, session="s1"), period="2024-05-02")
    assert out["mode"] == "summaries" and "rollups are off" in out["reason"]
    assert [i["node_id"] for i in out["items"]] == [nodes[1]]
    item = out["items"][0]
    assert item["expand"] == f"trove_expand(node_id={nodes[1]})" and item["messages"] == 2
    assert out["period"]["start"] == "2024-05-02T00:00:00Z" and out["period"]["end"] == "2024-05-03T00:00:00Z"
    week = call(make_engine(runtime, session="s1"), period="2024-W18")
    assert [i["node_id"] for i in week["items"]] == nodes and week["total_items"] == 3


def test_ready_rollups_covering_the_window_serve_it(tmp_path):
    runtime = runtime_with(tmp_path, temporal_rollups_enabled=True)
    nodes = [add_leaf(runtime, d) for d in (1, 2, 3)]
    rollups.run_pass(runtime, Model(), now=NOW, max_builds=10, budget_s=60)
    engine = make_engine(runtime)
    day = call(engine, period="2024-05-02")
    assert day["mode"] == "rollups" and day["reason"].startswith("ready rollups cover all 1 day")
    assert [(i["period_kind"], i["period"]) for i in day["items"]] == [("day", "2024-05-02")]
    assert day["items"][0]["node_ids"] == [nodes[1]]
    assert day["items"][0]["expand"] == "trove_recent(period='2024-05-02', mode='summaries')"
    week = call(engine, period="2024-W18")
    assert [i["period"] for i in week["items"]] == ["2024-W18"]  # the largest ready unit wins
    month = call(engine, period="2024-05")
    assert [i["period"] for i in month["items"]] == ["2024-05"] and sorted(month["items"][0]["node_ids"]) == nodes
    drill = call(engine, period="2024-05-02", mode="summaries")
    assert drill["mode"] == "summaries" and drill["reason"] == "mode='summaries' was requested"


def test_a_rollup_lists_its_first_node_ids_and_says_when_it_holds_more(tmp_path):
    runtime = runtime_with(tmp_path, temporal_rollups_enabled=True)
    many = [add_leaf(runtime, 2) for _ in range(recent.NODE_IDS_LISTED + 5)]
    few = [add_leaf(runtime, 3) for _ in range(2)]
    rollups.run_pass(runtime, Model(), now=NOW, max_builds=10, budget_s=60)
    out = call(make_engine(runtime), period="2024-05-02..2024-05-03")
    assert out["mode"] == "rollups" and [i["period"] for i in out["items"]] == ["2024-05-02", "2024-05-03"]
    crowded, small = out["items"]
    assert crowded["node_ids"] == many[:recent.NODE_IDS_LISTED] and crowded["node_ids_truncated"] is True
    assert small["node_ids"] == few and small["node_ids_truncated"] is False
    assert list(crowded)[0] == "kind" and crowded["kind"] == "rollup" and crowded["source_count"] == len(many)


def test_partly_ready_rollups_fall_back_to_summaries_and_name_the_gap(tmp_path):
    runtime = runtime_with(tmp_path, temporal_rollups_enabled=True)
    for d in (1, 2, 3):
        add_leaf(runtime, d)
    rollups.run_pass(runtime, Model(), now=NOW, max_builds=2, budget_s=60)  # days 3 and 2 only
    out = call(make_engine(runtime), period="2024-05-01..2024-05-03")
    assert out["mode"] == "summaries"
    assert out["reason"].startswith("rollups cover 2 of 3 day(s) with summaries (2024-05-01: pending)")
    assert out["rollups"]["missing"] == [{"day": "2024-05-01", "status": "pending"}]
    assert call(make_engine(runtime), period="2024-05-02..2024-05-03")["mode"] == "rollups"


def test_windows_rollups_cannot_serve_say_why(tmp_path):
    runtime = runtime_with(tmp_path, temporal_rollups_enabled=True)
    add_leaf(runtime, 9, month=6, hours=(8, 9))
    rollups.run_pass(runtime, Model(), now=NOW, max_builds=10, budget_s=60)
    engine = make_engine(runtime, session="s1")
    hours = call(engine, period="last 48h")
    assert hours["mode"] == "summaries" and "not made of whole UTC days" in hours["reason"]
    current = call(engine, period="yesterday", scope="current")
    assert current["mode"] == "summaries" and "scope='current'" in current["reason"]
    assert call(engine, period="yesterday")["mode"] == "rollups"


def test_a_window_without_summaries_pages_its_raw_messages(tmp_path):
    runtime = runtime_with(tmp_path)
    ids = runtime.store.append(SessionKey("old"), [{"role": "user", "content": f"raw {i}",
                                                    "timestamp": at(9, 10, 6) + i} for i in range(25)])
    runtime.store.append(SessionKey("old"), [{"role": "user", "content": "the day before", "timestamp": at(8, 10, 6)}])
    engine = make_engine(runtime, session="live")
    seen, cursor, reasons = [], None, []
    while True:
        out = call(engine, period="yesterday", limit=10, **({"cursor": cursor} if cursor else {}))
        assert out["mode"] == "messages" and out["total_items"] == 25
        reasons.append(out["reason"])
        seen += [i["store_id"] for i in out["items"]]
        if not out["has_more"]:
            break
        cursor = out["next_cursor"]
    assert seen == ids and "no summary covers this window" in reasons[0]
    first = call(engine, period="yesterday", limit=1)["items"][0]  # a page of messages names no content offset
    assert list(first)[0] == "kind" and first["kind"] == "message" and "content_offset" not in first
    assert reasons[1:] == ["the cursor continues the 'messages' pages"] * 2
    assert call(engine, period="yesterday", scope="current")["total_items"] == 0  # the live session has none
    empty = call(engine, period="2030-01")
    assert empty["mode"] == "messages" and empty["items"] == [] and empty["has_more"] is False


def test_summaries_of_other_sessions_point_at_their_transcript(tmp_path):
    runtime = runtime_with(tmp_path)
    node = add_leaf(runtime, 2, session="other")
    out = call(make_engine(runtime, session="s1"), period="2024-05-02")
    first = runtime.store.page("other", 0, 1)[0].store_id
    assert out["items"][0]["node_id"] == node and out["items"][0]["from_current_session"] is False
    assert out["items"][0]["expand"] == f"trove_load_session(session_id='other', after_store_id={first - 1})"
    assert call(make_engine(runtime, session="s1"), period="2024-05-02", scope="current")["total_items"] == 0


def test_summaries_mode_counts_window_messages_no_summary_covers_yet(tmp_path):
    runtime = runtime_with(tmp_path)
    add_leaf(runtime, 2)
    runtime.store.append(SessionKey("s1"), [{"role": "user", "content": "late", "timestamp": at(2, 20)}])
    out = call(make_engine(runtime), period="2024-05-02")
    assert out["mode"] == "summaries" and out["unsummarized_messages"] == 1
    raw = call(make_engine(runtime), period="2024-05-02", mode="messages")
    assert [i["content"] for i in raw["items"]] == ["message 2/5 9", "message 2/5 11", "late"]


def test_huge_rows_stay_under_the_cap_with_honest_flags(tmp_path):
    runtime = runtime_with(tmp_path)
    huge = "\"q\"\n" * 30000  # JSON-escaping doubles it
    runtime.store.append(SessionKey("big"), [{"role": "tool", "content": huge, "timestamp": at(9, 1, 6) + i}
                                             for i in range(30)])
    engine = make_engine(runtime)
    out = call(engine, period="yesterday", limit=200)
    assert out["items"] and out["truncated"] is True and out["has_more"] is True
    assert all(i["content_truncated"] for i in out["items"])
    assert out["returned_items"] + out["items_dropped_for_size"] == 30 and out["next_cursor"]
    for d in (1, 2):
        add_leaf(runtime, d, text="S" * 80000)
    leaves = call(engine, period="2024-05", limit=200)
    assert leaves["mode"] == "summaries" and leaves["items"][0]["content_chars"] == 80000
    assert leaves["items"][0]["content_truncated"] is True and leaves["truncated"] is True
    one = call(engine, period="2024-05", limit=1)
    assert len(one["items"][0]["content"]) > 10000  # a single item gets most of the budget


def test_a_cursor_keeps_its_mode_and_foreign_cursors_are_refused(tmp_path):
    runtime = runtime_with(tmp_path)
    for d in (1, 2, 3):
        add_leaf(runtime, d)
    engine = make_engine(runtime)
    first = call(engine, period="2024-05", limit=2)
    rest = call(engine, period="2024-05", cursor=first["next_cursor"])
    assert [i["node_id"] for i in first["items"] + rest["items"]] == [1, 2, 3] and rest["has_more"] is False
    assert "cursor belongs to mode 'summaries'" in call(engine, period="2024-05", mode="messages",
                                                        cursor=first["next_cursor"])["error"]
    assert "not one this tool returned" in call(engine, period="2024-05", cursor="bogus")["error"]


@pytest.mark.parametrize("cursor", ["summaries:1714550400.0:99999999999999999999999", "messages:1714550400.0:-3",
                                   "summaries:nan:2", "messages:inf:2", "summaries:1e999:2"],
                         ids=["id-past-sqlite-integer", "negative-id", "nan-time", "infinite-time", "overflowing-time"])
@pytest.mark.parametrize("mode", ["auto", "summaries", "messages"])
def test_a_forged_cursor_is_refused_like_any_foreign_one(tmp_path, cursor, mode):
    runtime = runtime_with(tmp_path)
    add_leaf(runtime, 1)
    out = call(make_engine(runtime), period="2024-05", mode=mode, cursor=cursor)
    assert "not one this tool returned" in out["error"] or "cursor belongs to mode" in out["error"], out


# ---- occurrence time and dated summaries ------------------------------------------------

def test_occurrences_for_resolves_a_message_against_its_own_time(tmp_path):
    runtime = runtime_with(tmp_path)
    sid = runtime.store.append(SessionKey("s"), [{"role": "user", "content": "I went to the pottery class yesterday.",
                                                  "timestamp": at(8, 15)}])[0]
    found = occurrences_for(runtime.store.get(sid))
    assert found == [{"expression": "yesterday", "start": "2024-05-07T00:00:00Z", "end": "2024-05-08T00:00:00Z",
                      "granularity": "day"}]
    assert occurrences_for({"summary": "Planned for next Friday.", "latest_at": at(8)})[0]["start"] == \
        "2024-05-10T00:00:00Z"
    assert occurrences_for({"content": "no time here", "created_at": at(8)}) == []
    assert occurrences_for({"content": "yesterday"}) == []  # no observation time, nothing guessed


def test_the_summarizer_record_dates_each_message_and_asks_for_absolute_dates(tmp_path):
    runtime = runtime_with(tmp_path)
    ids = runtime.store.append(SessionKey("s"), [
        {"role": "user", "content": "I started yesterday", "timestamp": at(7, 9)},
        {"role": "assistant", "content": "noted", "timestamp": at(7, 9) + 60},
        {"role": "user", "content": "next day", "timestamp": at(8, 10)}])
    record = serialize_messages(runtime.store.get_many(ids))
    assert record.splitlines()[:3] == ["=== Tuesday 7 May 2024 (UTC) ===", "[USER 09:00]: I started yesterday", ""]
    assert "\n\n[ASSISTANT 09:01]: noted\n\n" in record  # the same day: no new date line
    assert "=== Wednesday 8 May 2024 (UTC) ===\n[USER 10:00]: next day" in record
    assert serialize_messages([{"role": "user", "content": "undated"}]) == "[USER]: undated"
    prompt = build_prompt(record, 0, 300)
    assert "absolute calendar date" in prompt and "'on 7 May 2023'" in prompt
    assert datetime.fromtimestamp(at(7, 9), tz=UTC).hour == 9


@pytest.mark.parametrize(("period", "start", "end"), [
    ("last tuesday", "2024-06-04T00:00:00Z", "2024-06-05T00:00:00Z"),
    ("two weeks ago", "2024-05-27T00:00:00Z", "2024-06-03T00:00:00Z"),
    ("this morning", "2024-06-10T00:00:00Z", "2024-06-11T00:00:00Z"),
    ("last weekend", "2024-06-08T00:00:00Z", "2024-06-10T00:00:00Z"),  # NOW is a Monday
    ("in may", "2024-05-01T00:00:00Z", "2024-06-01T00:00:00Z"),
    ("past 3 days", "2024-06-08T00:00:00Z", "2024-06-11T00:00:00Z"),
])
def test_natural_periods_are_read_against_the_tools_clock(tmp_path, period, start, end):
    out = call(make_engine(runtime_with(tmp_path)), period=period)
    assert (out["period"]["start"], out["period"]["end"]) == (start, end), out["period"]
    assert out["period"]["input"] == period


def test_a_future_or_vague_period_says_why(tmp_path):
    engine = make_engine(runtime_with(tmp_path))
    assert "after today" in call(engine, period="next week")["error"]
    vague = call(engine, period="the last few days")["error"]
    assert "give a number" in vague and "last tuesday" in vague


# ---- owner scopes: a rollup never shows one scope's text to another --------------------------
def scoped_world(tmp_path, mode: str):
    from test_rollups import EchoModel, two_scopes

    runtime = runtime_with(tmp_path, temporal_rollups_enabled=True, memory_scope=mode)
    two_scopes(runtime)
    add_leaf(runtime, 3, "CLI local note. " + " ".join(f"w{i}" for i in range(400)), session="c1")
    rollups.run_pass(runtime, EchoModel(), now=NOW, max_builds=50, budget_s=60)
    return runtime


def test_a_scoped_caller_reads_only_its_own_scopes_rollups(tmp_path):
    runtime = scoped_world(tmp_path, "conversation")
    b = make_engine(runtime, session="b1", platform="telegram")
    for period in ("2024-05-03", "2024-W18", "2024-05"):
        out = call(b, period=period)
        assert out["mode"] == "rollups", (period, out["reason"])
        text = json.dumps(out)
        assert "BRAVO" in text and "ALPHA" not in text and "7731" not in text and "CLI local" not in text
        assert {i["scope"] for i in out["items"]} == {"telegram:agent:main:telegram:dm:222"}
    a = make_engine(runtime, session="a1", platform="telegram")
    a_text = json.dumps(call(a, period="2024-05"))
    assert "ALPHA" in a_text and "BRAVO" not in a_text


def test_profile_mode_reads_every_scopes_rollups_one_per_scope(tmp_path):
    runtime = scoped_world(tmp_path, "profile")
    out = call(make_engine(runtime, session="c1"), period="2024-05-03")
    assert out["mode"] == "rollups" and out["total_items"] == 3
    assert {i["scope"] for i in out["items"]} == {"local", "telegram:agent:main:telegram:dm:111",
                                                  "telegram:agent:main:telegram:dm:222"}
    text = json.dumps(out)
    assert "ALPHA" in text and "BRAVO" in text


def test_session_mode_reads_the_sessions_own_leaf_summaries_not_rollups(tmp_path):
    runtime = scoped_world(tmp_path, "session")
    out = call(make_engine(runtime, session="b1", platform="telegram"), period="2024-05-03")
    assert out["mode"] == "summaries" and "not one session" in out["reason"]
    text = json.dumps(out)
    assert "BRAVO" in text and "ALPHA" not in text and "[BRAVO]" not in text  # a leaf, not the rollup
