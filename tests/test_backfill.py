from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT, assistant, make_config, tool_call, tool_result, user
from test_command import shippers_finish  # noqa: F401  (autouse: background shipping ends with the test)

from hermes_trove.payloads import sidecar as payloads
from hermes_trove.runtime import build_runtime
from hermes_trove.store import SessionKey

BACKENDS = ("sqlite", "postgresql")

SCRIPT = ROOT / "scripts" / "backfill_externalized_tool_outputs.py"
_spec = importlib.util.spec_from_file_location("trove_backfill_script", SCRIPT)
assert _spec and _spec.loader
backfill = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = backfill
_spec.loader.exec_module(backfill)


def big(tag: str, n: int = 200) -> str:
    return "".join(f"{tag} line {i}: output secretword{i}\n" for i in range(n))


@pytest.fixture
def legacy(tmp_path, backend):
    """A database written with externalization off: large tool rows are inline."""
    if backend == "postgresql":
        pytest.skip("the backfill script reads a SQLite trove.db (--db) and writes sidecar files beside it;"
                    " it has no PostgreSQL mode (a server store writes its payloads table from the storage guard)")
    rt = build_runtime(make_config(tmp_path))
    rt.store.ingest(SessionKey("s1"), [user("go"), assistant("", [tool_call("c1", "terminal")]),
                                       tool_result("c1", big("a")), tool_result("c2", "small")])
    rt.store.ingest(SessionKey("s2"), [tool_result("c3", big("b")), user(big("user text"))])
    rt.db.read().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return rt


def db_digest(rt) -> str:
    rows = rt.db.read().execute("SELECT store_id, content, tool_calls FROM messages ORDER BY store_id").fetchall()
    return hashlib.sha256(repr([tuple(r) for r in rows]).encode()).hexdigest()


def run(rt, *args: str) -> int:
    return backfill.main(["--db", rt.db.path, "--threshold-chars", "1000", *args])


def sidecars(rt) -> list[str]:
    d = rt.payload_dir
    return sorted(p.name for p in d.iterdir() if payloads.REF_RE.fullmatch(p.name)) if d.exists() else []


def test_dry_run_reports_eligible_rows_and_writes_nothing(legacy, capsys):
    before = db_digest(legacy)
    assert run(legacy, "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["mode"] == "dry-run" and report["counts"]["eligible"] == 2
    assert report["counts"]["would_create"] == 2 and report["counts"]["created"] == 0
    assert sidecars(legacy) == [] and db_digest(legacy) == before
    assert not list(legacy.payload_dir.parent.glob("*.backfill-*.json"))


def test_apply_creates_recoverable_sidecars_without_touching_sqlite(legacy, tmp_path, capsys):
    before = db_digest(legacy)
    manifest = tmp_path / "m.json"
    assert run(legacy, "--apply", "--manifest", str(manifest)) == 0
    assert "created=2" in capsys.readouterr().out
    assert db_digest(legacy) == before and len(sidecars(legacy)) == 2
    for row in (legacy.store.page("s1")[2], legacy.store.page("s2")[0]):
        ref = payloads.ref_for(row.session_id, row.content)
        page = payloads.read_ref(legacy, ref, max_chars=100000, session_id=row.session_id)
        assert page["content"] == row.content and page["kind"] == "tool_result"


def test_manifest_holds_digests_and_counts_but_no_content(legacy, tmp_path):
    manifest = tmp_path / "m.json"
    run(legacy, "--apply", "--manifest", str(manifest))
    text = manifest.read_text()
    data = json.loads(text)
    assert data["counts"]["created"] == 2 and {e["action"] for e in data["entries"]} == {"created"}
    assert set(data["entries"][0]) == {"store_id", "ref", "sha256", "chars", "action"}
    assert "secretword" not in text and '"s1"' not in text


def test_repeated_apply_is_idempotent(legacy, tmp_path):
    run(legacy, "--apply", "--manifest", str(tmp_path / "1.json"))
    mtimes = {n: (legacy.payload_dir / n).stat().st_mtime_ns for n in sidecars(legacy)}
    run(legacy, "--apply", "--manifest", str(tmp_path / "2.json"))
    second = json.loads((tmp_path / "2.json").read_text())
    assert second["counts"]["created"] == 0 and second["counts"]["already_present"] == 2
    assert {n: (legacy.payload_dir / n).stat().st_mtime_ns for n in sidecars(legacy)} == mtimes


def test_apply_without_manifest_path_writes_one_beside_the_database(legacy, capsys):
    run(legacy, "--apply")
    out = capsys.readouterr().out
    written = list(legacy.payload_dir.parent.glob("trove.db.backfill-*.json"))
    assert len(written) == 1 and str(written[0]) in out


def test_rollback_removes_only_what_the_manifest_created(legacy, tmp_path):
    other = payloads.externalize_text(legacy, "s1", "made by live ingest")
    run(legacy, "--apply", "--manifest", str(tmp_path / "1.json"))
    run(legacy, "--apply", "--manifest", str(tmp_path / "2.json"))  # created nothing
    assert backfill.main(["--db", legacy.db.path, "--rollback", str(tmp_path / "2.json"), "--apply"]) == 0
    assert len(sidecars(legacy)) == 3
    assert backfill.main(["--db", legacy.db.path, "--rollback", str(tmp_path / "1.json")]) == 0  # dry run
    assert len(sidecars(legacy)) == 3
    assert backfill.main(["--db", legacy.db.path, "--rollback", str(tmp_path / "1.json"), "--apply"]) == 0
    assert sidecars(legacy) == [other]


def test_rollback_keeps_sidecars_a_row_now_depends_on(legacy, tmp_path, capsys):
    run(legacy, "--apply", "--manifest", str(tmp_path / "m.json"))
    gc_rt = build_runtime(make_config(legacy.payload_dir.parent, large_output_transcript_gc_enabled=True))
    row = legacy.store.page("s1")[2]
    assert payloads.transcript_gc(gc_rt, "s1", [row.store_id]) == 1
    capsys.readouterr()
    assert backfill.main(["--db", legacy.db.path, "--rollback", str(tmp_path / "m.json"), "--apply", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["counts"] == {"removed": 1, "would_remove": 0, "kept_referenced": 1, "kept_changed": 0,
                                "already_gone": 0, "skipped_invalid": 0}
    ref = payloads.refs_in(legacy.store.get(row.store_id).content)[0]
    assert payloads.read_ref(legacy, ref, max_chars=100000)["content"] == big("a")


def test_rollback_keeps_damaged_sidecars_and_ignores_forged_refs(legacy, tmp_path, capsys):
    manifest = tmp_path / "m.json"
    run(legacy, "--apply", "--manifest", str(manifest))
    data = json.loads(manifest.read_text())
    victim = data["entries"][0]["ref"]
    (legacy.payload_dir / victim).write_text("{}")
    data["entries"].append({"ref": "../trove.db", "action": "created", "sha256": "0"})
    manifest.write_text(json.dumps(data))
    capsys.readouterr()
    backfill.main(["--db", legacy.db.path, "--rollback", str(manifest), "--apply", "--json"])
    counts = json.loads(capsys.readouterr().out)["counts"]
    assert counts["kept_changed"] == 1 and counts["removed"] == 1 and counts["skipped_invalid"] == 1
    assert os.path.exists(legacy.db.path) and (legacy.payload_dir / victim).exists()


def test_refuses_a_missing_or_foreign_database(tmp_path, capsys):
    assert backfill.main(["--db", str(tmp_path / "nope.db")]) == 2
    (tmp_path / "junk.db").write_bytes(b"not sqlite at all" * 100)
    assert backfill.main(["--db", str(tmp_path / "junk.db")]) == 2
    err = capsys.readouterr().err
    assert "database not found" in err and "not a hermes-trove database" in err


def test_refuses_a_newer_schema_without_writing(legacy, capsys):
    with legacy.db.transaction() as conn:
        conn.execute("INSERT INTO schema_migrations(name, applied_at) VALUES ('9999_from_the_future', 0)")
    assert run(legacy, "--apply") == 2
    assert "newer" in capsys.readouterr().err and sidecars(legacy) == []


def test_refuses_while_another_backfill_holds_the_directory_lock(legacy, capsys):
    with backfill.directory_lock(legacy.payload_dir):
        assert run(legacy, "--apply") == 2
    assert "another backfill" in capsys.readouterr().err


def test_write_failures_are_counted_and_exit_nonzero(legacy, tmp_path, monkeypatch):
    monkeypatch.setattr(payloads, "_write_atomic", lambda *a: (_ for _ in ()).throw(OSError(28, "No space left")))
    assert run(legacy, "--apply", "--manifest", str(tmp_path / "m.json")) == 1
    monkeypatch.undo()
    data = json.loads((tmp_path / "m.json").read_text())
    assert data["counts"]["failed"] == 2 and data["entries"][0]["error"] == "No space left"


def test_runs_as_a_script_from_the_checkout(legacy):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TROVE_")}
    out = subprocess.run([sys.executable, str(SCRIPT), "--db", legacy.db.path, "--threshold-chars", "1000"],
                         capture_output=True, text=True, env=env, cwd="/", timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("dry-run: scanned=3, eligible=2")
