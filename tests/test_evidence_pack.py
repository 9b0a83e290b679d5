"""trove_evidence_pack: hydration, quote repair, de-duplication, time separation, budgets and caps."""
from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from conftest import user

from hermes_trove.filters import SessionFilters
from hermes_trove.refs import make_ref
from hermes_trove.store import SessionKey
from hermes_trove.toolkit import ToolContext
from hermes_trove.tools import dispatch

BACKENDS = ("sqlite", "postgresql")

DAY = 86400
T0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC).timestamp()


@pytest.fixture
def setup(runtime):
    texts = ["I went to the support group yesterday.", "We moved to Lisbon on 3 July 2023.",
             "The cat sat. The cat sat. The dog ran.", "Nothing about time here."]
    ids = runtime.store.append(SessionKey("s1"), [dict(user(t), timestamp=T0 + i * DAY) for i, t in enumerate(texts)])
    rows = [runtime.store.get(i) for i in ids]
    ctx = ToolContext(runtime, SessionKey("s1"))

    def call(**args):
        return json.loads(dispatch(ctx, "trove_evidence_pack", {"question": "When?", **args}))

    return call, rows


def test_items_keep_observation_and_occurrence_time_apart_in_time_order(setup):
    call, rows = setup
    refs = [make_ref(rows[1], 0, len(rows[1].content)).to_dict(), f"trove:{rows[0].store_id}:0-38"]
    out = call(baseline_refs=refs)
    assert out["status"] == "ok" and out["returned"] == 2 and out["truncated"] is False
    first, second = out["items"]
    assert first["store_id"] == rows[0].store_id  # ordered by observed_at, not by argument order
    assert first["observed_at"] == "2023-05-08T13:56:00Z"
    assert first["occurrences"] == [{"expression": "yesterday", "start": "2023-05-07T00:00:00Z",
                                     "end": "2023-05-08T00:00:00Z", "granularity": "day"}]
    assert second["occurrences"][0]["start"] == "2023-07-03T00:00:00Z"
    assert {"ref", "content_sha256", "quote", "span_start", "span_end", "session_id"} <= set(first)


def test_a_drifted_quote_is_repaired_only_when_unique_in_the_window(setup):
    call, rows = setup
    row = rows[2]  # "The cat sat. The cat sat. The dog ran."
    dog = {"store_id": row.store_id, "span_start": 0, "span_end": 12, "quote": "The dog ran."}
    out = call(baseline_refs=[dog])
    assert out["returned"] == 1
    item = out["items"][0]
    assert (item["span_start"], item["span_end"], item["quote"]) == (26, 38, "The dog ran.")
    assert item["repaired"]["from"] == f"trove:{row.store_id}:0-12"
    cat = {"store_id": row.store_id, "span_start": 1, "span_end": 13, "quote": "The cat sat."}
    out = call(baseline_refs=[cat])
    assert out["returned"] == 0 and "occurs 2 times" in out["rejected"][0]["reason"]
    narrow = call(baseline_refs=[dog], budgets={"repair_window_chars": 5})
    assert narrow["returned"] == 0 and "does not occur inside the window [0, 17)" in narrow["rejected"][0]["reason"]
    stale = call(baseline_refs=[dict(dog, content_sha256="b" * 64)])
    assert stale["returned"] == 0 and "never repaired" in stale["rejected"][0]["reason"]


def test_duplicates_and_contained_spans_are_kept_once(setup):
    call, rows = setup
    row = rows[1]
    whole = f"trove:{row.store_id}:0-{len(row.content)}"
    out = call(baseline_refs=[f"trove:{row.store_id}:12-18", whole, whole])
    assert out["returned"] == 1 and out["items"][0]["ref"] == whole
    assert sorted(d["reason"] for d in out["duplicates"]) == ["inside another cited span of the same row", "same span"]


def test_refs_from_missing_rows_and_ignored_sessions_are_rejected(runtime, setup):
    call, rows = setup
    ids = runtime.store.append(SessionKey("scratch-9"), [dict(user("secret scratch"), timestamp=T0)])
    runtime.filters = SessionFilters.build(ignore=["scratch-*"])
    ctx = ToolContext(runtime, SessionKey("s1"))
    out = json.loads(dispatch(ctx, "trove_evidence_pack", {"question": "q", "baseline_refs": [
        f"trove:{ids[0]}:0-6", "trove:99999:0-1", f"trove:{rows[3].store_id}:0-7"]}))
    reasons = [r["reason"] for r in out["rejected"]]
    assert out["returned"] == 1 and any("ignored" in r for r in reasons) and any("not stored" in r for r in reasons)


def test_budgets_drop_by_session_and_date_and_clamp(runtime):
    key = SessionKey("s2")
    ids = runtime.store.append(key, [dict(user(f"note {i}"), timestamp=T0 + (i // 4) * DAY) for i in range(12)])
    ctx = ToolContext(runtime, key)
    refs = [f"trove:{i}:0-6" for i in ids]
    out = json.loads(dispatch(ctx, "trove_evidence_pack", {"question": "q", "baseline_refs": refs,
                                                           "budgets": {"max_per_date": 2, "max_refs": 99,
                                                                       "max_per_session": 50, "bogus": 1}}))
    assert out["returned"] == 6 and {d["reason"] for d in out["dropped"]} == {"max_per_date"}
    assert out["max_refs_clamped_from"] == 99 and out["ignored_budgets"] == ["bogus"]
    out = json.loads(dispatch(ctx, "trove_evidence_pack", {"question": "q", "baseline_refs": refs,
                                                           "budgets": {"max_per_session": 3}}))
    assert out["returned"] == 3 and all(d["reason"] == "max_per_session" for d in out["dropped"])


def test_fifty_refs_to_one_megabyte_rows_stay_under_the_cap(runtime):
    key = SessionKey("big")
    body = ("lorem ipsum dolor sit amet " * 40000)[:1_000_000]
    ids = runtime.store.append(key, [dict(user(f"{i} {body}"), timestamp=T0 + i * DAY) for i in range(50)])
    ctx = ToolContext(runtime, key)
    refs = [{"store_id": i, "span_start": 0, "span_end": 20000, "quote": "x" * 4000} for i in ids]  # all drifted
    raw = dispatch(ctx, "trove_evidence_pack", {"question": "q", "baseline_refs": refs})
    out = json.loads(raw)
    assert len(raw) <= 64000, raw[:300]
    assert out["returned"] == 0 and len(out["rejected"]) == 50, raw[:300]
    good = [f"trove:{i}:0-20000" for i in ids]
    raw = dispatch(ctx, "trove_evidence_pack", {"question": "q", "baseline_refs": good, "include_compute": True,
                                                "budgets": {"max_refs": 50, "max_per_session": 50,
                                                            "max_per_date": 8}})
    out = json.loads(raw)
    assert len(raw) <= 64000
    assert out["truncated"] is True and out["items_omitted_for_cap"] > 0 and out["returned"] >= 1
    assert all(item["quote_truncated"] and len(item["quote"]) == 2400 for item in out["items"])
    # how long the packs take: bench/bench_bounds.py (pack)


def test_an_attached_computation_uses_the_pack_refs(setup):
    call, rows = setup
    refs = [f"trove:{rows[0].store_id}:0-38", f"trove:{rows[1].store_id}:0-{len(rows[1].content)}"]
    out = call(baseline_refs=refs, include_compute=True, question="How many days between these?")
    assert out["computation"]["status"] == "computed" and out["computation"]["answer"]["value"] == 57


def test_malformed_baselines_are_refused(setup):
    call, _ = setup
    assert "1-50" in call(baseline_refs=[])["error"]
    assert "at most 50" in call(baseline_refs=["trove:1:0-1"] * 51)["error"]
    assert "integer" in call(baseline_refs=["trove:1:0-1"], budgets={"max_refs": "many"})["error"]
