"""Importing OpenClaw JSONL session exports: fixtures, branches, malformed lines."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import make_config

from hermes_trove.importer import ImportFailure, ImportOptions, run_import
from hermes_trove.runtime import build_runtime

JSONL = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "openclaw-jsonl"
CLAW = JSONL.parent / "lossless-claw" / "head"
needs_fixtures = pytest.mark.skipif(not JSONL.is_dir(), reason=f"JSONL fixtures not found at {JSONL}")
J1 = "openclaw-jsonl:agent:main:3f1c9a52-0b7e-4c1d-9a11-5e2f7d8c0a01"


def run(tmp_path: Path, files=(), dirs=(), **kw):
    kw.setdefault("agent", "main")
    opts = ImportOptions(target_db=str(tmp_path / "trove.db"), source_jsonl=tuple(str(f) for f in files),
                         source_jsonl_dirs=tuple(str(d) for d in dirs), **kw)
    return run_import(opts, env={})


def store(tmp_path: Path):
    return build_runtime(make_config(tmp_path)).store


def write_jsonl(path: Path, lines: list) -> Path:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


def entry(eid: str, parent: str | None, role: str, content, **extra) -> dict:
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": "2026-03-02T09:00:00.000Z",
            "message": {"role": role, "content": content, "timestamp": 1772442000000, **extra}}


@needs_fixtures
def test_fixture_directory_counts_match_the_fixture_readme(tmp_path):
    report = run(tmp_path, dirs=[JSONL], apply=True)
    assert (report.conversations, report.sessions, report.scanned) == (4, 4, 47)
    assert (report.eligible, report.imported, report.skipped_empty, report.invalid_rows) == (44, 44, 3, 0)
    s = store(tmp_path)
    counts = {sid: s.count(sid) for sid in {r.session_id for r in s.sessions()}}
    assert sorted(counts.values()) == [4, 6, 6, 28] and counts[J1] == 28
    assert report.warnings == []


@needs_fixtures
def test_jsonl_and_sqlite_imports_of_the_same_history_store_the_same_messages(tmp_path):
    run(tmp_path, dirs=[JSONL], apply=True)
    head = tmp_path / "head"
    shutil.copytree(CLAW, head, ignore=shutil.ignore_patterns("*.sql", "generator*"))
    run_import(ImportOptions(target_db=str(tmp_path / "trove.db"), source_db=str(head / "lcm.db"), agent="main",
                             apply=True, remaps=(("/home/agent/.openclaw", str(head)),),
                             allow_duplicate_sources=True), env={})  # both copies, to compare them
    s = store(tmp_path)
    for session in ("3f1c9a52-0b7e-4c1d-9a11-5e2f7d8c0a01", "8d2e4b10-6a3f-4f0e-b7c2-1c9d0e5f4a02",
                    "d00dfeed-2222-4333-8444-555566667777"):
        from_jsonl = [(r.to_message(), r.created_at) for r in s.page(f"openclaw-jsonl:agent:main:{session}", 0, 100)]
        from_db = [(r.to_message(), r.created_at) for r in s.page(f"openclaw-trove:agent:main:{session}", 0, 100)]
        assert from_jsonl == from_db


@needs_fixtures
def test_rerunning_a_jsonl_import_is_idempotent(tmp_path):
    run(tmp_path, dirs=[JSONL], apply=True)
    again = run(tmp_path, dirs=[JSONL], apply=True)
    assert (again.imported, again.skipped_existing, again.backup_path) == (0, 44, None)
    assert store(tmp_path).count() == 44


@needs_fixtures
def test_sender_envelope_and_error_flag_are_kept_as_provenance(tmp_path):
    run(tmp_path, files=[JSONL / "d00dfeed-2222-4333-8444-555566667777.jsonl"], apply=True)
    conn = build_runtime(make_config(tmp_path)).db.read()
    metas = [json.loads(r[0]) for r in conn.execute("SELECT meta FROM imported_messages ORDER BY store_id")]
    assert metas[0]["sender"]["senderName"] == "Ada Lovelace"
    assert [m.get("is_error") for m in metas].count(True) == 1


def test_only_the_active_branch_is_imported(tmp_path):
    path = write_jsonl(tmp_path / "s.jsonl", [
        {"type": "session", "version": 3, "id": "sess-b", "timestamp": "2026-03-02T09:00:00Z"},
        entry("a1", None, "user", "first question"),
        entry("b2", "a1", "assistant", [{"type": "text", "text": "abandoned answer"}]),
        entry("c3", "a1", "assistant", [{"type": "text", "text": "edited answer"}]),
        entry("d4", "c3", "user", "follow up"),
    ])
    report = run(tmp_path, files=[path], apply=True)
    assert (report.scanned, report.skipped_branch, report.imported) == (4, 1, 3)
    rows = store(tmp_path).page("openclaw-jsonl:agent:main:sess-b", 0, 10)
    assert [r.content for r in rows] == ["first question", "edited answer", "follow up"]


def test_lines_without_ids_are_imported_in_file_order_under_the_file_stem(tmp_path):
    path = write_jsonl(tmp_path / "export-7.jsonl", [
        {"role": "user", "content": "plain line one"},
        {"message": {"role": "assistant", "content": [{"type": "text", "text": "plain line two"}]}},
    ])
    report = run(tmp_path, files=[path], apply=True)
    assert report.imported == 2
    rows = store(tmp_path).page("openclaw-jsonl:agent:main:export-7", 0, 10)
    assert [r.content for r in rows] == ["plain line one", "plain line two"]


def test_malformed_lines_are_counted_and_the_rest_is_imported(tmp_path):
    path = write_jsonl(tmp_path / "bad.jsonl", [
        {"type": "session", "id": "sess-bad"},
        entry("a1", None, "user", "good one"),
        "{not json",
        "[1, 2, 3]",
        {"type": 7, "id": "x"},
        {"type": "message", "id": "m5", "parentId": "a1", "message": {"content": "no role"}},
    ])
    report = run(tmp_path, files=[path], apply=True)
    assert (report.invalid_rows, report.imported) == (4, 1)
    assert any(w.startswith(f"{path}:3: not JSON") for w in report.warnings)
    assert any(w.startswith(f"{path}:6: message without a role") for w in report.warnings)
    assert store(tmp_path).count("openclaw-jsonl:agent:main:sess-bad") == 1


def test_tool_calls_results_thinking_and_images_convert_to_host_messages(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [
        {"type": "session", "id": "sess-t"},
        entry("a1", None, "user", [{"type": "text", "text": "look"},
                                   {"type": "image", "data": "QUJD", "mimeType": "image/png"}]),
        entry("a2", "a1", "assistant", [{"type": "thinking", "thinking": "hmm", "thinkingSignature": "s"},
                                        {"type": "toolCall", "id": "c1", "name": "exec", "arguments": {"cmd": "ls"}}]),
        entry("a3", "a2", "toolResult", [{"type": "text", "text": "a.txt"}], toolCallId="c1", toolName="exec",
              isError=False),
    ])
    run(tmp_path, files=[path], apply=True)
    msgs = [r.to_message() for r in store(tmp_path).page("openclaw-jsonl:agent:main:sess-t", 0, 10)]
    assert msgs[0]["content"] == [{"type": "text", "text": "look"},
                                  {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}}]
    assert msgs[1]["tool_calls"] == [{"id": "c1", "type": "function",
                                      "function": {"name": "exec", "arguments": '{"cmd":"ls"}'}}]
    assert msgs[1]["reasoning"] == "hmm" and msgs[1]["content"] == ""
    tool = msgs[2]
    assert (tool["role"], tool["tool_call_id"], tool["name"], tool["content"]) == ("tool", "c1", "exec", "a.txt")


def test_duplicate_entry_ids_in_one_file_are_invalid_rows(tmp_path):
    path = write_jsonl(tmp_path / "dup.jsonl", [
        {"role": "user", "content": "one", "id": "same"},
        {"role": "user", "content": "two", "id": "same", "parentId": None},
        {"role": "user", "content": "three, no id"},
    ])
    report = run(tmp_path, files=[path])
    assert report.invalid_rows == 1 and any("duplicate entry id same" in w for w in report.warnings)


def test_missing_jsonl_sources_fail_clearly_when_nothing_is_readable(tmp_path):
    with pytest.raises(ImportFailure, match="no readable JSONL source"):
        run(tmp_path, files=[tmp_path / "nope.jsonl"])
    assert not (tmp_path / "trove.db").exists()


def test_summaries_and_session_key_identity_are_rejected_for_jsonl(tmp_path):
    path = write_jsonl(tmp_path / "x.jsonl", [{"role": "user", "content": "hi"}])
    with pytest.raises(ImportFailure, match="--include-summaries"):
        run(tmp_path, files=[path], include_summaries=True)
    with pytest.raises(ImportFailure, match="--session-identity"):
        run(tmp_path, files=[path], session_identity="session_key")


def test_imported_lossless_claw_tool_traffic_stays_out_of_trove_searches(tmp_path):
    """lcm_grep / lcm_describe calls and results in an imported history are copies of stored
    messages: trove_grep and trove_recall return the message, not them."""
    from conftest import make_engine, user

    fact = "The boiler service is booked for the ninth of March with Vasco."
    quote = json.dumps({"matches": [{"messageId": 1, "snippet": fact}]})
    lines: list = [{"type": "session", "id": "sess-lcm"}, entry("m1", None, "user", [{"type": "text", "text": fact}])]
    parent = "m1"
    for n, name in enumerate(("lcm_grep", "lcm_describe")):
        lines += [entry(f"q{n}", parent, "user", [{"type": "text", "text": f"what about it? ({n})"}]),
                  entry(f"c{n}", f"q{n}", "assistant", [{"type": "toolCall", "id": f"k{n}", "name": name,
                                                         "arguments": {"pattern": "boiler service Vasco"}}]),
                  entry(f"r{n}", f"c{n}", "toolResult", [{"type": "text", "text": quote}], toolCallId=f"k{n}",
                        toolName=name, isError=False),
                  entry(f"a{n}", f"r{n}", "assistant", [{"type": "text", "text": f"Booked with Vasco ({n})."}])]
        parent = f"a{n}"
    run(tmp_path, files=[write_jsonl(tmp_path / "lcm.jsonl", lines)], apply=True)
    eng = make_engine(build_runtime(make_config(tmp_path)), session="s2")
    live = [user("when is the boiler service?")]
    for name, args in (("trove_grep", {"query": "boiler service Vasco", "session_scope": "all"}),
                       ("trove_recall", {"query": "boiler service Vasco"})):
        out = json.loads(eng.handle_tool_call(name, args, messages=live))
        ids = [h["store_id"] for h in out.get("results", out.get("hits", [])) if h.get("store_id")]
        rows = eng.runtime.store.get_many(ids)
        assert fact in [r.content for r in rows], (name, out)
        assert not [r for r in rows if r.role == "tool" or (r.role == "assistant" and not r.content)], name
