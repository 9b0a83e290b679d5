"""Recall tools over externalized payloads written by the real storage-boundary guard."""
from __future__ import annotations

import json

import pytest
from conftest import make_config, tool_result, user
from test_command import shippers_finish  # noqa: F401  (autouse: background shipping ends with the test)

from hermes_trove.engine import TroveEngine
from hermes_trove.runtime import build_runtime
from hermes_trove.tools import dispatch

BACKENDS = ("sqlite", "postgresql")


def call(engine, name, **args):
    return json.loads(dispatch(engine.tool_context(), name, args))


def expand_whole(engine, ref: str) -> str:
    """A payload's whole text, read page by page through trove_expand."""
    text, offset = "", 0
    while True:
        page = call(engine, "trove_expand", externalized_ref=ref, content_offset=offset, max_tokens=4000)
        text += page["content"]
        if not page["has_more"]:
            return text
        offset = page["next_content_offset"]


@pytest.fixture
def ext_engine(tmp_path):
    rt = build_runtime(make_config(tmp_path, large_output_externalization_enabled=True,
                                   large_output_externalization_threshold_chars=256))
    eng = TroveEngine(rt)
    eng.update_model("m", 64000)
    eng.on_session_start("s1", platform="cli")
    big = "".join(f"row {i}: status ok\n" for i in range(2000)) + "FATAL: disk quota exceeded on /var/data\n"
    eng.ingest([user("run the report"), tool_result("c1", big)])
    return eng, big


def test_externalized_search_finds_text_inside_a_payload_file(ext_engine):
    eng, _ = ext_engine
    out = call(eng, "trove_grep", query="disk quota exceeded", content_scope="externalized")
    hits = [h for h in out["results"] if h["type"] == "externalized"]
    assert hits and "disk quota" in hits[0]["snippet"]
    assert out["externalized_scan"]["scanned_files"] >= 1


def test_describe_and_expand_read_a_payload_ref_exactly(ext_engine):
    eng, big = ext_engine
    ref = call(eng, "trove_grep", query="disk quota", content_scope="externalized")["results"][0]["ref"]
    meta = call(eng, "trove_describe", externalized_ref=ref)
    assert meta["content_preview"] == big[:500]
    assert expand_whole(eng, ref) == big


def test_stored_placeholder_row_lists_its_ref_when_expanded_by_store_id(ext_engine):
    eng, _ = ext_engine
    row = [r for r in eng.runtime.store.page("s1") if r.role == "tool"][0]
    out = call(eng, "trove_expand", store_id=row.store_id)
    assert out["externalized_refs"] and out["externalized_refs"][0].startswith("trove-")


def test_payload_ref_of_another_session_is_refused(ext_engine, tmp_path):
    eng, _ = ext_engine
    ref = call(eng, "trove_grep", query="disk quota", content_scope="externalized")["results"][0]["ref"]
    other = TroveEngine(eng.runtime)
    other.on_session_start("s2", platform="cli")
    assert call(other, "trove_expand", externalized_ref=ref)["error"].startswith("externalized_ref")


@pytest.mark.parametrize("tool", ["trove_describe", "trove_expand"])
def test_a_long_ref_that_is_no_payload_name_is_refused_with_a_short_echo(ext_engine, tool):
    eng, _ = ext_engine
    err = call(eng, tool, externalized_ref="x" * 32 * 1024)["error"]  # the longest string an argument may be
    assert "is not a trove payload name" in err and "more chars" in err and len(err) < 300, err[:300]


def test_another_machine_expands_a_ref_this_one_wrote(tmp_path, backend, monkeypatch):
    if backend == "sqlite":
        pytest.skip("a SQLite store's sidecars are files on the machine that wrote them; only a server is shared")
    options = {"large_output_externalization_enabled": True, "large_output_externalization_threshold_chars": 256}
    laptop = build_runtime(make_config(tmp_path / "laptop", **options))
    desk = build_runtime(make_config(tmp_path / "desk", **options))
    monkeypatch.setattr(laptop.store.shipper, "wake", lambda: None)  # nothing ships until settle below
    writer = TroveEngine(laptop)
    writer.on_session_start("s1", platform="cli")
    big = "".join(f"line {i}: build step ok\n" for i in range(500)) + "ERROR: linker ran out of memory\n"
    writer.ingest([user("build it"), tool_result("c1", big)])
    # Nothing crossed the network in the turn: the payload waits as a local file, the row in the outbox.
    server = laptop.db.read()
    assert server.execute("SELECT COUNT(*) FROM payloads").fetchone()[0] == 0
    assert server.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0
    assert len(list(laptop.payload_dir.glob("trove-*.json"))) == 1
    laptop.store.settle()  # the payload ships first, then the message that names it
    assert server.execute("SELECT COUNT(*) FROM payloads").fetchone()[0] == 1
    assert not list(laptop.payload_dir.glob("trove-*.json"))
    reader = TroveEngine(desk)
    reader.update_model("m", 64000)
    reader.on_session_start("s1", platform="cli")
    row = [r for r in desk.store.page("s1") if r.role == "tool"][0]
    ref = call(reader, "trove_expand", store_id=row.store_id)["externalized_refs"][0]
    assert expand_whole(reader, ref) == big
    assert not list((tmp_path / "laptop" / "trove-payloads").glob("trove-*.json"))  # shipped: the server holds it
    hits = call(reader, "trove_grep", query="linker ran out", content_scope="externalized")["results"]
    assert [h["ref"] for h in hits if h["type"] == "externalized"] == [ref]
