"""trove_recent's arguments, table-driven through the tool table: every bad argument is an
error that says which one and why, nothing is read; good ones echo back what was understood."""
from __future__ import annotations

import pytest
from conftest import make_engine
from test_recent_tool import call, runtime_with
from test_rollups import NOW, add_leaf

from hermes_trove.temporal import recent

BACKENDS = ("sqlite", "postgresql")


@pytest.fixture(autouse=True)
def _now(monkeypatch):
    monkeypatch.setattr(recent, "clock", lambda: NOW)  # relative periods count from Monday 10 June 2024
    monkeypatch.setattr("hermes_trove.temporal.rollups.schedule", lambda *a, **k: None)


@pytest.fixture
def engine(tmp_path):
    runtime = runtime_with(tmp_path)
    for day in (1, 2, 3):
        add_leaf(runtime, day)
    return make_engine(runtime, session="s1")


@pytest.mark.parametrize(("args", "error"), [
    ({}, "period is required"),
    ({"period": ""}, "period"),
    ({"period": "   "}, "period must not be empty"),
    ({"period": "someday"}, "is not understood (not a recognised form)"),
    ({"period": "tomorrow"}, "after today"),
    ({"period": "next week"}, "after today"),
    ({"period": "a few days ago"}, "vague quantity: give a number"),
    ({"period": "until march"}, "open-ended"),
    ({"period": "2024-13"}, "no such calendar date or week"),
    ({"period": "2024-05-03..2024-05-01"}, "the range ends before it starts"),
    ({"period": "last 5000 days"}, "more than 3660 days"),
    ({"period": 7}, "period '7' is not understood (not a recognised form)"),
    ({"period": "today", "scope": "everything"}, "scope must be one of"),
    ({"period": "today", "mode": "rollup"}, "mode must be one of"),
    ({"period": "today", "limit": 0}, "limit"),
    ({"period": "today", "limit": "ten"}, "limit"),
    ({"period": "today", "cursor": "nonsense"}, "cursor is not one this tool returned"),
    ({"period": "today", "cursor": "rollups:x:1"}, "cursor is not one this tool returned"),
    ({"period": "today", "cursor": "pages:1.0:1"}, "cursor is not one this tool returned"),
])
def test_a_bad_argument_is_refused_with_its_reason(engine, args, error):
    out = call(engine, **args)
    assert error in out.get("error", ""), out


@pytest.mark.parametrize(("period", "start", "end", "granularity"), [
    ("2024-05-02", "2024-05-02T00:00:00Z", "2024-05-03T00:00:00Z", "day"),
    ("2024-W18", "2024-04-29T00:00:00Z", "2024-05-06T00:00:00Z", "week"),
    ("2024-05", "2024-05-01T00:00:00Z", "2024-06-01T00:00:00Z", "month"),
    ("2024-05-01..2024-05-02", "2024-05-01T00:00:00Z", "2024-05-03T00:00:00Z", "day"),
    ("the week before 2024-05-06", "2024-04-29T00:00:00Z", "2024-05-06T00:00:00Z", "week"),
    ("last friday", "2024-06-07T00:00:00Z", "2024-06-08T00:00:00Z", "day"),
])
def test_the_period_understood_is_echoed_with_its_utc_window(engine, period, start, end, granularity):
    out = call(engine, period=period)
    assert out["period"]["input"] == period
    assert (out["period"]["start"], out["period"]["end"], out["period"]["granularity"]) == (start, end, granularity)


def test_a_limit_above_the_cap_is_clamped_and_says_so(engine):
    out = call(engine, period="2024-05", limit=500)
    assert out["limit"] == 200 and out["limit_clamped_from"] == 500
    assert out["total_items"] == 3 and out["mode"] == "summaries"
