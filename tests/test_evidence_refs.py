"""Exact refs: made from stored rows, parsed from claims, verified against the row."""
from __future__ import annotations

import pytest
from conftest import user

from hermes_trove.refs import RefError, content_sha256, make_ref, parse_claim, verify
from hermes_trove.store import SessionKey


@pytest.fixture
def row(runtime):
    ids = runtime.store.append(SessionKey("s1"), [user("We moved to Lisbon on 3 July 2023.")])
    return runtime.store.get(ids[0])


@pytest.mark.both_backends
def test_a_made_ref_verifies_and_every_span_carries_the_row_hash(row):
    ref = make_ref(row, 12, 18)
    assert ref.quote == "Lisbon" and ref.content_sha256 == content_sha256(row.content)
    assert make_ref(row, 0, 2).content_sha256 == ref.content_sha256
    assert verify(parse_claim(ref.to_dict()), row) == ref


@pytest.mark.both_backends
def test_the_shorthand_is_a_claim_without_quote(row):
    ref = verify(parse_claim(f"trove:{row.store_id}:12-18"), row)
    assert ref.quote == "Lisbon" and ref.to_dict()["ref"] == f"trove:{row.store_id}:12-18"


@pytest.mark.both_backends
@pytest.mark.parametrize("change,reason", [
    ({"quote": "Lisbom"}, "quote is not the stored text"),
    ({"span_start": 11}, "quote is not the stored text"),
    ({"content_sha256": "0" * 64}, "stale or edited"),
    ({"span_end": 10_000}, "past the end"),
])
def test_a_ref_that_does_not_match_the_row_is_rejected_with_the_reason(row, change, reason):
    claim = {**make_ref(row, 12, 18).to_dict(), **change}
    with pytest.raises(RefError, match=reason):
        verify(parse_claim(claim), row)


@pytest.mark.both_backends
def test_a_ref_to_a_missing_row_is_rejected(row):
    with pytest.raises(RefError, match="not stored"):
        verify(parse_claim(f"trove:{row.store_id + 99}:0-1"), None)


@pytest.mark.parametrize("bad", ["trove:x:1-2", "trove:1:5-2", f"trove:{2**63}:0-1", 7, [1],
                                 {"store_id": True, "span_start": 0, "span_end": 1}, "x" * 100_000])
def test_malformed_claims_are_refused_before_any_lookup(bad):
    with pytest.raises(RefError):
        parse_claim(bad)


@pytest.mark.both_backends
def test_expand_and_load_session_return_the_full_ref_object_that_verifies(runtime):
    import json

    from hermes_trove.toolkit import ToolContext
    from hermes_trove.tools import dispatch

    ids = runtime.store.append(SessionKey("s1"), [user("We moved to Lisbon on 3 July 2023."), user("x" * 30000)])
    ctx = ToolContext(runtime, SessionKey("s1"))
    out = json.loads(dispatch(ctx, "trove_expand", {"store_id": ids[0], "include_exact_ref": True}))
    full = out["exact_ref_full"]
    assert out["exact_ref"] == full["ref"] == f"trove:{ids[0]}:0-34"
    assert verify(parse_claim(full), runtime.store.get(ids[0])).quote == out["content"]
    page = json.loads(dispatch(ctx, "trove_load_session", {"session_id": "s1", "include_exact_ref": True,
                                                           "max_content_chars": 20000}))
    assert [m["exact_ref_full"]["content_sha256"] for m in page["messages"]] == [
        content_sha256(r.content) for r in runtime.store.get_many(ids)]
    from hermes_trove.toolkit import full_exact_ref

    too_long = full_exact_ref(runtime.store.get(ids[1]), 0, 25000)
    assert too_long["exact_ref_full"] is None and "not citable" in too_long["exact_ref_note"]
