"""Importing the real lossless-claw fixture databases (head, v0.3.0, v0.3.0 upgraded)."""
from __future__ import annotations

import dataclasses
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from conftest import make_config, make_engine

from hermes_trove.importer import ImportOptions, run_import
from hermes_trove.retrieval.query import build_match
from hermes_trove.runtime import build_runtime
from hermes_trove.tools import dispatch

FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "lossless-claw"
pytestmark = pytest.mark.skipif(not (FIXTURES / "head" / "lcm.db").is_file(),
                                reason=f"lossless-claw fixtures not found at {FIXTURES}"
                                       " (../shared beside the checkout)")
STATE = "/home/agent/.openclaw"
S1 = "openclaw-trove:agent:main:3f1c9a52-0b7e-4c1d-9a11-5e2f7d8c0a01"
S2 = "openclaw-trove:agent:main:8d2e4b10-6a3f-4f0e-b7c2-1c9d0e5f4a02"
S5 = "openclaw-trove:agent:main:d00dfeed-2222-4333-8444-555566667777"


def copy_fixture(tmp_path: Path, name: str) -> Path:
    dest = tmp_path / name
    if name == "head":
        shutil.copytree(FIXTURES / "head", dest, ignore=shutil.ignore_patterns("*.sql", "generator*"))
    else:
        dest.mkdir()
        shutil.copy2(FIXTURES / name / "lcm.db", dest / "lcm.db")
    return dest / "lcm.db"


def run(tmp_path: Path, source: Path, **kw):
    kw.setdefault("agent", "main")
    opts = ImportOptions(target_db=str(tmp_path / "trove.db"), source_db=str(source), **kw)
    return run_import(opts, env={})


def target(tmp_path: Path):
    return build_runtime(make_config(tmp_path))


def remap(source: Path) -> tuple[tuple[str, str], ...]:
    return ((STATE, str(source.parent)),)


@pytest.fixture
def head(tmp_path):
    return copy_fixture(tmp_path, "head")


def test_head_dry_run_counts_match_the_fixture_readme(tmp_path, head):
    report = run(tmp_path, head, include_summaries=True, remaps=remap(head))
    assert (report.conversations, report.scanned, report.eligible, report.would_import) == (5, 44, 44, 44)
    assert (report.imported, report.skipped_existing, report.skipped_empty, report.invalid_rows) == (0, 0, 0, 0)
    assert (report.summaries_scanned, report.summaries_would_import, report.summaries_imported) == (11, 11, 0)
    assert report.files_resolved == 1 and report.warnings == []


def test_head_apply_imports_every_message_into_per_session_provenance(tmp_path, head):
    report = run(tmp_path, head, apply=True, include_summaries=True, remaps=remap(head))
    assert (report.imported, report.summaries_imported, report.backup_path) == (44, 11, None)
    rt = target(tmp_path)
    assert rt.store.count() == 44
    assert rt.store.count(S1) == 28 and rt.store.count(S2) == 6 and rt.store.count(S5) == 6
    cron = "openclaw-trove:agent:main:c0ffee00-1111-4222-8333-444455556666"
    assert rt.store.count(cron) == 4  # archived row + its empty /reset replacement share one session id
    rows = rt.store.page(S1, 0, 100)
    assert {r.source for r in rows} == {S1}
    assert [r.role for r in rows[:4]] == ["user", "assistant", "tool", "assistant"]
    assert all(r.token_count > 0 for r in rows)


def test_tool_calls_and_results_are_rebuilt_from_message_parts(tmp_path, head):
    run(tmp_path, head, apply=True, remaps=remap(head))
    rows = target(tmp_path).store.page(S1, 0, 100)
    first = rows[1].to_message()
    assert first["content"] == "I'll look at the invoice module first."
    assert first["tool_calls"] == [{"id": "toolu_01A", "type": "function",
                                    "function": {"name": "read", "arguments": '{"path":"src/billing/invoice.py"}'}}]
    result = rows[2].to_message()
    assert (result["role"], result["tool_call_id"], result["name"]) == ("tool", "toolu_01A", "read")
    assert result["content"].startswith("def round_total(amount):")
    call_only = rows[3].to_message()
    assert call_only["content"] == "" and call_only["tool_calls"][0]["id"] == "toolu_01B"
    thinking = rows[5].to_message()
    assert thinking["reasoning"].startswith("Float 10.045 is stored")
    assert "banker's rounding" in thinking["content"]
    calls = [c["id"] for r in rows for c in (r.to_message().get("tool_calls") or [])]
    results = [r.tool_call_id for r in rows if r.role == "tool"]
    assert calls == results == ["toolu_01A", "toolu_01B", "toolu_01C", "toolu_01D", "toolu_01E", "toolu_01F",
                                "toolu_01G", "toolu_01H"]


def test_timestamps_become_utc_epoch_seconds(tmp_path, head):
    run(tmp_path, head, apply=True, remaps=remap(head))
    rows = target(tmp_path).store.page(S1, 0, 100)
    assert rows[0].created_at == 1772442000.0  # 2026-03-02 09:00:00 UTC
    assert [r.created_at - rows[0].created_at for r in rows[:3]] == [0.0, 45.0, 90.0]


def test_externalized_tool_output_is_read_back_through_the_remapped_state_dir(tmp_path, head):
    run(tmp_path, head, apply=True, remaps=remap(head))
    tool = [r for r in target(tmp_path).store.page(S2, 0, 100) if r.role == "tool"][0]
    assert len(tool.content) == 17311 and not tool.content.startswith("[LCM Tool Output")
    assert tool.content.startswith("2026-03-02T10:00:00Z worker-0 INFO processed batch 1000")
    assert tool.tool_call_id == "call_b1"


def test_an_unresolvable_external_file_keeps_the_reference_and_warns(tmp_path, head):
    shutil.rmtree(head.parent / "lcm-files")
    report = run(tmp_path, head, apply=True)
    assert report.files_unresolved == 1 and report.imported == 44
    assert any("file_3cfd4ddf04284f7f" in w and "--state-dir-remap" in w for w in report.warnings)
    tool = [r for r in target(tmp_path).store.page(S2, 0, 100) if r.role == "tool"][0]
    assert tool.content.startswith("[LCM Tool Output: file_3cfd4ddf04284f7f")


def test_summary_dag_keeps_lineage_with_summary_parents_read_the_right_way(tmp_path, head):
    run(tmp_path, head, apply=True, include_summaries=True, remaps=remap(head))
    rt = target(tmp_path)
    stats = rt.dag.depth_stats(S1)
    assert {d: s["count"] for d, s in stats.items()} == {0: 6, 1: 3, 2: 1}
    frontier = rt.dag.frontier(S1)
    root = frontier[0]
    assert root.depth == 2
    children = [rt.dag.get(c) for c in rt.dag.source_ids(root)]
    assert [c.depth for c in children] == [1, 1]
    # The d2 root condenses the first two d1 nodes: leaves 1-4, i.e. source messages 1..17.
    covered = rt.store.get_many(rt.dag.descendant_store_ids(root.node_id))
    assert [r.content for r in covered][0].startswith("The nightly build")
    assert len(covered) == 17
    first_leaf = rt.dag.get(rt.dag.source_ids(children[0])[0])
    assert first_leaf.depth == 0 and len(rt.dag.source_ids(first_leaf)) == 4
    assert first_leaf.earliest_at == 1772442000.0 and first_leaf.model == "claude-sonnet-4-5"
    assert first_leaf.expand_hint  # "Expand for details about: ..." carried over
    assert {n.depth for n in frontier} == {2, 1}  # d2 root + the third d1 node are the visible top


def test_rerun_with_the_same_import_id_imports_nothing_and_makes_no_backup(tmp_path, head):
    first = run(tmp_path, head, apply=True, include_summaries=True, remaps=remap(head))
    before = (tmp_path / "trove.db").stat().st_mtime_ns
    again = run(tmp_path, head, apply=True, include_summaries=True, remaps=remap(head))
    assert first.import_id == again.import_id
    assert (again.imported, again.skipped_existing, again.would_import) == (0, 44, 0)
    assert (again.summaries_imported, again.summaries_skipped_existing) == (0, 11)
    assert again.backup_path is None and not list(tmp_path.glob("trove.db.backup-*"))
    assert (tmp_path / "trove.db").stat().st_mtime_ns == before
    assert target(tmp_path).store.count() == 44


def test_summaries_added_on_a_later_run_attach_to_messages_imported_earlier(tmp_path, head):
    run(tmp_path, head, apply=True, remaps=remap(head), import_id="fixed")
    report = run(tmp_path, head, apply=True, include_summaries=True, remaps=remap(head), import_id="fixed")
    assert (report.imported, report.skipped_existing, report.summaries_imported) == (0, 44, 11)
    assert report.backup_path and Path(report.backup_path).is_file()
    rt = target(tmp_path)
    assert rt.store.count() == 44 and len(rt.dag.descendant_store_ids(rt.dag.frontier(S1)[0].node_id)) == 17


def test_a_new_import_id_imports_again_and_backs_up_the_existing_target(tmp_path, head):
    run(tmp_path, head, apply=True, remaps=remap(head))
    report = run(tmp_path, head, apply=True, remaps=remap(head), import_id="second", namespace="copy",
                 allow_duplicate_sources=True)
    assert report.imported == 44 and Path(report.backup_path).name.startswith("trove.db.backup-")
    rt = target(tmp_path)
    assert rt.store.count() == 88
    assert rt.store.count("copy:agent:main:3f1c9a52-0b7e-4c1d-9a11-5e2f7d8c0a01") == 28


def test_sessions_a_jsonl_import_brought_in_are_not_written_again_by_the_forked_reader(tmp_path, head):
    jsonl = ImportOptions(target_db=str(tmp_path / "trove.db"), agent="main", apply=True,
                          source_jsonl_dirs=(str(FIXTURES.parent / "openclaw-jsonl"),))
    assert run_import(jsonl, env={}).imported == 44
    with sqlite3.connect(head) as conn:  # one conversation the export does not have: the apply writes
        conn.execute("INSERT INTO conversations(conversation_id, session_id) VALUES (9, 'only-in-the-db')")
        conn.execute("INSERT INTO messages(conversation_id, seq, role, content, token_count)"
                     " VALUES (9, 1, 'user', 'a question only the database holds', 5)")
    conn.close()
    report = run(tmp_path, head, apply=True, remaps=remap(head), reader_process=True)
    assert (report.imported, report.skipped_duplicate_sessions, report.skipped_existing) == (1, 4, 44)
    rt = target(tmp_path)
    assert rt.store.count() == 45 and rt.store.count(S1) == 0
    assert rt.store.count("openclaw-trove:agent:main:only-in-the-db") == 1


def test_changing_the_mapping_under_the_same_import_id_is_the_same_import(tmp_path, head):
    run(tmp_path, head, apply=True, remaps=remap(head), import_id="one")
    report = run(tmp_path, head, apply=True, remaps=remap(head), import_id="one", agent="other",
                 session_identity="session_key")
    assert (report.imported, report.skipped_existing) == (0, 44)


def test_session_key_identity_groups_conversations_by_key(tmp_path, head):
    report = run(tmp_path, head, apply=True, session_identity="session_key", remaps=remap(head))
    assert report.sessions == 4
    rt = target(tmp_path)
    assert rt.store.count("openclaw-trove:agent:main:agent:main:main") == 28
    assert rt.store.count("openclaw-trove:agent:main:agent:main:cron:daily-digest") == 4


def test_imported_sessions_are_searchable_across_sessions(tmp_path, head):
    run(tmp_path, head, apply=True, remaps=remap(head))
    rt = target(tmp_path)
    hits = rt.store.search(build_match("ING-7731 ingestion key").expression, limit=5)
    assert hits and hits[0][0].session_id == S2
    hits = rt.store.search(build_match("kubeconfig Grace deploy").expression, session_ids=[S5], role="user")
    assert hits[0][0].content == "I'll refresh the kubeconfig. It was probably the 14:05 deploy by Grace."
    assert {h[0].session_id for h in hits} == {S5}
    assert rt.store.search(build_match("ROUND_HALF_UP").expression, source=S1)


def test_provenance_metadata_lands_in_the_import_ledger(tmp_path, head):
    run(tmp_path, head, apply=True, remaps=remap(head))
    conn = target(tmp_path).db.read()
    meta = {r[0]: json.loads(r[1]) for r in conn.execute("SELECT source_key, meta FROM imported_messages")}
    assert meta["sqlite:message:39"]["sender"]["senderName"] == "Ada Lovelace"
    assert meta["sqlite:message:41"]["is_error"] is True
    assert meta["sqlite:message:1"]["transcript_entry_id"] == "c8c76cf8"
    assert meta["sqlite:message:31"]["externalized_file"] == "file_3cfd4ddf04284f7f"


@pytest.mark.parametrize("name", ["v0.3.0", "v0.3.0-upgraded-to-head"])
def test_old_schema_skips_synthetic_compaction_rows_and_keeps_the_dag(tmp_path, name):
    source = copy_fixture(tmp_path, name)
    report = run(tmp_path, source, apply=True, include_summaries=True)
    assert (report.scanned, report.skipped_synthetic, report.eligible, report.imported) == (38, 10, 28, 28)
    assert (report.summaries_scanned, report.summaries_imported, report.summaries_skipped_unresolved) == (10, 10, 0)
    assert any("no message_parts" in w for w in report.warnings)
    rt = target(tmp_path)
    assert rt.store.count(S1) == 28
    assert not [r for r in rt.store.page(S1, 0, 100) if r.role == "system"]
    stats = rt.dag.depth_stats(S1)
    assert {d: s["count"] for d, s in stats.items()} == {0: 6, 1: 3, 2: 1}
    root = rt.dag.frontier(S1)[0]
    assert root.depth == 2 and len(rt.dag.source_ids(root)) == 3
    assert len(rt.dag.descendant_store_ids(root.node_id)) == 24
    levels = {n.level for n in rt.dag.visible(S1)}
    assert levels == {"normal", "deterministic"}  # "[Truncated from N tokens]" fallback leaf


def test_the_upgraded_fixture_imports_the_same_rows_as_the_original(tmp_path):
    a = copy_fixture(tmp_path, "v0.3.0")
    b = copy_fixture(tmp_path, "v0.3.0-upgraded-to-head")
    ra = run_import(ImportOptions(target_db=str(tmp_path / "a.db"), source_db=str(a), agent="main", apply=True), env={})
    rb = run_import(ImportOptions(target_db=str(tmp_path / "b.db"), source_db=str(b), agent="main", apply=True), env={})
    assert ra.imported == rb.imported == 28
    rta = build_runtime(dataclasses.replace(make_config(tmp_path), database_path=str(tmp_path / "a.db")))
    rtb = build_runtime(dataclasses.replace(make_config(tmp_path), database_path=str(tmp_path / "b.db")))
    assert [m.to_message() for m in rta.store.page(S1, 0, 100)] == [m.to_message() for m in rtb.store.page(S1, 0, 100)]


def test_a_local_session_recalls_imported_history_under_the_default_scope(tmp_path, head):
    run(tmp_path, head, apply=True, remaps=remap(head))
    eng = make_engine(target(tmp_path), session="hermes-cli")
    out = json.loads(dispatch(eng.tool_context(), "trove_recall", {"query": "ING-7731 ingestion key"}))
    top = out["hits"][0]
    assert top["session_id"] == S2
    expanded = json.loads(dispatch(eng.tool_context(), top["expand"]["tool"], top["expand"]["args"]))
    assert "ING-7731" in json.dumps(expanded)


def test_source_text_whose_bytes_are_no_utf8_is_imported_with_a_warning_that_counts_it(tmp_path, head):
    # Such text reads with U+FFFD (the bytes cannot be stored as text the host reads); the report
    # says so instead of altering it in silence, and the import carries on.
    with sqlite3.connect(head) as conn:
        assert conn.execute("UPDATE message_parts SET text_content = CAST(X'6869FF' AS TEXT)"
                            " WHERE rowid = (SELECT MIN(rowid) FROM message_parts)").rowcount == 1
    for apply in (False, True):
        report = run(tmp_path, head, apply=apply, remaps=remap(head))
        assert any("1 source value(s)" in w and "no UTF-8" in w for w in report.warnings), report.warnings
    assert report.imported == report.eligible > 0
