"""Searching one session's sidecars and transcript GC of externalized tool rows."""
from __future__ import annotations

import pytest
from conftest import make_config, tool_result, user
from test_command import shippers_finish  # noqa: F401  (autouse: background shipping ends with the test)
from test_payloads import overwrite_stored, remove_stored

from hermes_trove.payloads import sidecar as payloads
from hermes_trove.payloads.sidecar import PayloadError
from hermes_trove.runtime import build_runtime
from hermes_trove.store import SessionKey

BACKENDS = ("sqlite", "postgresql")


@pytest.fixture
def rt(tmp_path):
    return build_runtime(make_config(tmp_path, large_output_externalization_enabled=True,
                                     large_output_externalization_threshold_chars=1000,
                                     large_output_transcript_gc_enabled=True))


def log_output(marker: str, lines: int = 300) -> str:
    return "".join(f"{i:04d} ok step\n" if i != 150 else f"{i:04d} FAILED {marker} ✗\n" for i in range(lines))


# -- search --------------------------------------------------------------------------------

def test_search_finds_a_literal_case_insensitively_with_line_and_byte_position(rt):
    rt.store.ingest(SessionKey("s1"), [tool_result("c1", log_output("Error-XYZ"))])
    out = payloads.search_payloads(rt, "s1", "error-xyz")
    assert len(out["results"]) == 1
    hit = out["results"][0]
    assert hit["type"] == "externalized" and hit["line"] == 151 and hit["tool_call_id"] == "c1"
    text = log_output("Error-XYZ")
    assert hit["byte_position"] == len(text[:text.index("Error-XYZ")].encode())
    assert "0150 FAILED Error-XYZ" in hit["snippet"] and len(hit["snippet"]) <= 120 + 9 + 180
    assert out["scan"] == {"candidate_files": 1, "scanned_files": 1, "matched_files": 1, "rejected_files": 0,
                           "file_limit": 256, "bytes_per_file_limit": 512000, "truncated": False}


def test_search_only_sees_the_given_sessions_sidecars(rt):
    rt.store.ingest(SessionKey("s1"), [tool_result("c1", log_output("needle"))])
    rt.store.ingest(SessionKey("s2"), [tool_result("c2", log_output("needle") + "other")])
    assert len(payloads.search_payloads(rt, "s1", "NEEDLE")["results"]) == 1
    assert payloads.search_payloads(rt, "s3", "needle")["results"] == []


def test_search_with_explicit_refs_rejects_invalid_and_foreign_ones(rt):
    rt.store.ingest(SessionKey("s1"), [tool_result("c1", log_output("needle"))])
    rt.store.ingest(SessionKey("s2"), [tool_result("c2", log_output("needle") + "x")])
    own = payloads.refs_in(rt.store.page("s1")[0].content)[0]
    other = payloads.refs_in(rt.store.page("s2")[0].content)[0]
    out = payloads.search_payloads(rt, "s1", "needle", refs=[own, other, "../trove.db"])
    assert [h["ref"] for h in out["results"]] == [own]
    assert out["scan"]["rejected_files"] == 2 and out["scan"]["candidate_files"] == 2


def test_search_respects_limit_and_reports_truncation(rt):
    for i in range(5):
        rt.store.ingest(SessionKey("s1"), [user(f"q{i}"), tool_result(f"c{i}", log_output("needle") + str(i))])
    out = payloads.search_payloads(rt, "s1", "needle", limit=3)
    assert len(out["results"]) == 3 and out["scan"]["truncated"] is True


def test_search_caps_bytes_scanned_per_file(rt):
    text = "a" * (payloads.SEARCH_BYTES_PER_FILE + 10) + "late needle"
    ref = payloads.externalize_text(rt, "s1", text)
    out = payloads.search_payloads(rt, "s1", "needle", refs=[ref])
    assert out["results"] == [] and out["scan"]["truncated"] is True


def test_search_caps_the_number_of_files(rt, monkeypatch):
    monkeypatch.setattr(payloads, "SEARCH_FILE_LIMIT", 3)
    for i in range(5):
        payloads.externalize_text(rt, "s1", f"payload {i} with needle")
    out = payloads.search_payloads(rt, "s1", "needle", limit=50)
    assert out["scan"]["candidate_files"] == 5 and out["scan"]["scanned_files"] == 3
    assert out["scan"]["truncated"] is True and len(out["results"]) == 3


def test_search_refuses_an_empty_query(rt):
    with pytest.raises(PayloadError, match="query"):
        payloads.search_payloads(rt, "s1", "   ")


def test_search_treats_regex_characters_literally(rt):
    payloads.externalize_text(rt, "s1", "cost was $5.00 (approx) [sic]")
    assert len(payloads.search_payloads(rt, "s1", "$5.00 (approx) [sic]")["results"]) == 1
    assert payloads.search_payloads(rt, "s1", "$5x00")["results"] == []


def test_search_skips_tampered_files(rt):
    ref = payloads.externalize_text(rt, "s1", "needle in a file")
    overwrite_stored(rt, ref, "needle, changed")
    out = payloads.search_payloads(rt, "s1", "needle")
    assert out["results"] == [] and out["scan"]["rejected_files"] == 1


# -- transcript GC --------------------------------------------------------------------------

def test_gc_rewrites_externalized_tool_rows_to_the_compact_placeholder(rt):
    text = log_output("x")
    rt.store.ingest(SessionKey("s1"), [user("run"), tool_result("c1", text)])
    rows = rt.store.page("s1")
    assert "Preview:" in rows[1].content
    assert payloads.transcript_gc(rt, "s1", [r.store_id for r in rows]) == 1
    after = rt.store.get(rows[1].store_id)
    assert after.content.startswith("[trove:externalized ref=") and "Preview:" not in after.content
    assert after.store_id == rows[1].store_id and after.tool_call_id == "c1"
    assert rt.store.get(rows[0].store_id).content == "run"
    ref = payloads.refs_in(after.content)[0]
    assert payloads.read_ref(rt, ref, max_chars=100000)["content"] == text
    assert payloads.transcript_gc(rt, "s1", [rows[1].store_id]) == 0  # idempotent


def test_gc_keeps_fts_in_step_with_the_rewrite(rt):
    rt.store.ingest(SessionKey("s1"), [tool_result("c1", "uniquepreviewword " + log_output("x"))])
    row = rt.store.page("s1")[0]
    assert rt.store.search('"uniquepreviewword"', session_ids=["s1"])
    assert payloads.transcript_gc(rt, "s1", [row.store_id]) == 1
    assert rt.store.search('"uniquepreviewword"', session_ids=["s1"]) == []


def test_gc_skips_pinned_rows_other_sessions_and_rows_without_a_sidecar(rt):
    rt.store.ingest(SessionKey("s1"), [tool_result("c1", log_output("a")), tool_result("c2", log_output("b")),
                                       tool_result("c3", "small result")])
    rt.store.ingest(SessionKey("s2"), [tool_result("c4", log_output("c"))])
    a, b, small = rt.store.page("s1")
    other = rt.store.page("s2")[0]
    with rt.db.transaction() as conn:
        conn.execute("UPDATE messages SET pinned=1 WHERE store_id=?", (a.store_id,))
    remove_stored(rt, payloads.refs_in(b.content)[0])
    ids = [a.store_id, b.store_id, small.store_id, other.store_id]
    assert payloads.transcript_gc(rt, "s1", ids) == 0
    assert [rt.store.get(i).content for i in ids] == [a.content, b.content, small.content, other.content]


def test_gc_is_off_unless_enabled(tmp_path):
    rt = build_runtime(make_config(tmp_path, large_output_externalization_enabled=True,
                                   large_output_externalization_threshold_chars=1000))
    rt.store.ingest(SessionKey("s1"), [tool_result("c1", log_output("x"))])
    row = rt.store.page("s1")[0]
    assert payloads.transcript_gc(rt, "s1", [row.store_id]) == 0
    assert rt.store.get(row.store_id).content == row.content


def test_gc_uses_sidecars_made_for_inline_rows_by_backfill(tmp_path):
    plain = build_runtime(make_config(tmp_path))  # externalization off: the row stays inline
    text = log_output("x")
    plain.store.ingest(SessionKey("s1"), [tool_result("c1", text)])
    row = plain.store.page("s1")[0]
    assert row.content == text
    rt = build_runtime(make_config(tmp_path, large_output_transcript_gc_enabled=True))
    assert payloads.transcript_gc(rt, "s1", [row.store_id]) == 0  # no sidecar yet
    payloads.payload_writer(rt.config)("s1", text, kind="tool_result")  # as the backfill script does
    assert payloads.transcript_gc(rt, "s1", [row.store_id]) == 1
    ref = payloads.refs_in(rt.store.get(row.store_id).content)[0]
    assert payloads.read_ref(rt, ref, max_chars=100000, session_id="s1")["content"] == text
