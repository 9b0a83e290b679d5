"""Edges of the memory half that other suites leave unpinned: calendar months in a date
difference (end-of-month clamping, leap years), an assertion query's empty scope, and the
proposals an extraction answer reads past its cap."""
from __future__ import annotations

import dataclasses
import importlib.util
import json
from datetime import date, timedelta

import pytest
from conftest import make_config

from hermes_trove.evidence.compute import date_span
from hermes_trove.evidence.grounding import When, parse_date
from hermes_trove.retrieval import search
from hermes_trove.retrieval.embed_providers import LOCAL_MODEL, ProviderSpec, check_available
from hermes_trove.runtime import build_runtime
from hermes_trove.state import contract
from hermes_trove.state.assertion_store import AssertionStore
from hermes_trove.store import SessionKey


def day(text: str) -> When:
    d = date.fromisoformat(text)
    return When(d, d + timedelta(days=1), "day", "quote", text)


@pytest.mark.parametrize(("a", "b", "anchor", "rest", "length"), [
    ("2024-01-31", "2024-03-01", "2024-02-29", 1, 29),   # leap year: clamped to 29 February
    ("2023-01-31", "2023-03-01", "2023-02-28", 1, 28),   # common year: clamped to 28 February
    ("2023-01-31", "2023-02-28", "2023-02-28", 0, 28),   # 31 January + 1 month is 28 February itself
    ("2023-01-31", "2023-02-27", "2023-01-31", 27, 28),  # ... so 27 February is not a whole month on
    ("2024-02-29", "2025-02-28", "2025-02-28", 0, 28),   # a leap day a year on is 28 February
    ("2023-11-30", "2024-01-15", "2023-12-30", 16, 31),  # across the year boundary
])
def test_a_month_difference_counts_whole_calendar_months_clamped_to_the_month_end(a, b, anchor, rest, length):
    value, unit, steps = date_span(day(a), day(b), "month")
    months = (date.fromisoformat(anchor).year - date.fromisoformat(a).year) * 12 + \
        date.fromisoformat(anchor).month - date.fromisoformat(a).month
    assert unit == "month" and value == pytest.approx(months + rest / length)
    assert steps[0] == f"{a} + {months} months = {anchor}"
    assert steps[1] == f"{anchor} .. {b} = {rest} days of a {length}-day month"


@pytest.mark.parametrize(("text", "span"), [
    ("2024-02", ("2024-02-01", "2024-03-01", "month")),
    ("2023-12", ("2023-12-01", "2024-01-01", "month")),
    ("2024", ("2024-01-01", "2025-01-01", "year")),
    ("2024-13", None), ("2024-00", None), ("0000", None), ("2023-02-29", None),
])
def test_an_iso_month_or_year_parses_to_its_calendar_span_and_a_bad_one_to_none(text, span):
    got = parse_date(text, 0.0)
    assert (None if got is None else (got[0].isoformat(), got[1].isoformat(), got[2])) == span


def test_an_empty_scope_still_filters_an_assertion_query(tmp_path):
    rt = build_runtime(make_config(tmp_path, assertions_enabled=True))
    store = AssertionStore(rt.db)
    store.ensure()
    texts = ["note: my editor at work is helix", "note: my editor is vim"]
    ids = rt.store.append(SessionKey("s"), [{"role": "user", "content": t, "timestamp": 100.0 + i}
                                           for i, t in enumerate(texts)])
    rows = {r.store_id: r for r in rt.store.get_many(ids)}
    proposals = [{"store_id": ids[0], "quote": texts[0], "subject": "user:self", "predicate": "editor",
                  "value": "helix", "kind": "preference", "scope": "work"},
                 {"store_id": ids[1], "quote": texts[1], "subject": "user:self", "predicate": "editor",
                  "value": "vim", "kind": "preference"}]
    parsed = contract.parse_answer(json.dumps({"assertions": proposals}), rows)
    assert len(parsed.candidates) == 2, parsed
    store.add(parsed.candidates)

    def values(**kw):
        return sorted(a.value_text for a in store.query("user:self", 1e12, **kw)[0])

    assert values() == ["helix", "vim"]
    assert values(scope="") == ["vim"] and values(scope="work") == ["helix"]
    assert values(predicate="") == ["helix", "vim"] and values(role="") == ["helix", "vim"]  # empty: no filter


def test_an_answer_past_the_cap_counts_the_rest_invalid_after_the_ones_read(tmp_path):
    rt = build_runtime(make_config(tmp_path, assertions_enabled=True))
    [sid] = rt.store.append(SessionKey("s"), [{"role": "user", "content": "note: my editor is helix",
                                                "timestamp": 100.0}])
    rows = {r.store_id: r for r in rt.store.get_many([sid])}
    good = {"store_id": sid, "quote": "my editor is helix", "subject": "user:self", "predicate": "editor",
            "value": "helix", "kind": "preference"}
    items = [good, dict(good), {"store_id": sid, "subject": "user:self"}] + [good] * (contract.MAX_ITEMS - 3) + \
        [{"nonsense": True}] * 5
    parsed = contract.parse_answer(json.dumps({"assertions": items}), rows)
    assert len(parsed.candidates) == 1 and parsed.proposed == contract.MAX_ITEMS + 5
    assert parsed.invalid == 1 + 5 and parsed.unverified == 0
    assert parsed.reasons[0].startswith("invalid: ")
    assert parsed.reasons[-1] == f"5 proposals past the first {contract.MAX_ITEMS} ignored"


def test_summary_hits_under_a_source_stop_checking_lineage_once_the_pool_is_full(runtime):
    dag = runtime.dag
    key = SessionKey("s1", platform="cli", source="telegram")
    for i in range(search.RERANK_POOL + 30):
        [sid] = runtime.store.append(key, [{"role": "user", "content": f"orchard visit {i}"}])
        dag.add_leaf("s1", f"kiwi orchard visit {i}", [sid], token_count=5, source_token_count=10,
                     earliest_at=None, latest_at=None)
    calls: list[int] = []
    checked = dag.has_descendant_source

    def counted(node_id: int, source: str) -> bool:
        calls.append(node_id)
        return checked(node_id, source)

    runtime.dag.has_descendant_source = counted  # the real check, counted
    req = search.GrepRequest("kiwi orchard", 10, 0, "relevance", "current", "history", "s1", source="telegram")
    page = search.grep(runtime, req)
    summaries = [r for r in page.results if r["type"] == "summary"]
    assert summaries and len(calls) == search.RERANK_POOL  # every node matches: exactly a pool's worth checked
    calls.clear()
    search.grep(runtime, dataclasses.replace(req, source=None))
    assert calls == []  # no source: no lineage read at all


@pytest.mark.skipif(importlib.util.find_spec("numpy") is None, reason="numpy is not installed")
def test_an_embedding_setting_this_install_cannot_run_is_refused_in_one_sentence():
    assert check_available(ProviderSpec("openai", "m", base_url="ftp://127.0.0.1/v1")) == (
        "embeddings unavailable: TROVE_EMBEDDING_BASE_URL 'ftp://127.0.0.1/v1' is not an http(s) URL")
    assert check_available(ProviderSpec("local", "bge-large")) == (
        f"embeddings unavailable: the local provider ships only {LOCAL_MODEL} (TROVE_EMBEDDING_MODEL='bge-large')")
    assert check_available(ProviderSpec("nope", "m")) == (
        "embeddings unavailable: unknown TROVE_EMBEDDING_PROVIDER 'nope' (local or openai)")
