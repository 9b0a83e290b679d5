from __future__ import annotations

import base64
import json
import os
import random

import psycopg
import pytest
from conftest import assistant, make_config, make_engine, tool_call, tool_result, user
from test_command import shippers_finish  # noqa: F401  (autouse: background shipping ends with the test)

from hermes_trove.hooks import make_hooks
from hermes_trove.outbox import ServerUnreachableError
from hermes_trove.payloads import guard
from hermes_trove.payloads import sidecar as payloads
from hermes_trove.payloads.sidecar import PayloadError
from hermes_trove.runtime import build_runtime
from hermes_trove.store import SessionKey

BACKENDS = ("sqlite", "postgresql")

KEY = SessionKey("s1", platform="cli")


def png_uri(n_bytes: int = 3000, seed: int = 1) -> str:
    data = random.Random(seed).randbytes(n_bytes)
    return "data:image/png;base64," + base64.b64encode(data).decode()


def b64_run(n_bytes: int = 2000, seed: int = 2) -> str:
    return base64.b64encode(random.Random(seed).randbytes(n_bytes)).decode()


def file_bytes(db) -> bytes:
    db.read().execute("PRAGMA wal_checkpoint(FULL)")
    out = b""
    for suffix in ("", "-wal"):
        path = db.path + suffix
        if os.path.exists(path):
            with open(path, "rb") as fh:
                out += fh.read()
    return out


def db_bytes(runtime) -> bytes:
    """Every stored byte of the rows (sidecars aside): the SQLite file, or on PostgreSQL, once the
    outbox has shipped, its local file plus the server's message columns and search docs."""
    if runtime.db.kind == "sqlite":
        return file_bytes(runtime.db)
    runtime.store.settle()  # spooled payloads ship (and leave the outbox) first
    conn = runtime.db.read()
    rows = conn.execute("SELECT content, COALESCE(tool_calls, ''), COALESCE(extra, '') FROM messages").fetchall()
    docs = conn.execute("SELECT doc::text FROM message_search").fetchall()
    text = "\n".join(str(v) for r in [*rows, *docs] for v in r)
    return file_bytes(runtime.store.outbox.db) + text.encode("utf-8", "surrogatepass")


def stored_refs(runtime) -> list[str]:
    """The refs the store holds sidecars for: files in the payload directory, or the server's rows."""
    server = payloads.server_payloads(runtime.config)
    if server is not None:
        return sorted(r[0] for r in server.db.read().execute("SELECT ref FROM payloads"))
    d = runtime.payload_dir
    return sorted(p.name for p in d.iterdir() if payloads.REF_RE.fullmatch(p.name)) if d.exists() else []


def stored_record(runtime, ref: str) -> dict:
    """The sidecar record as stored, unverified (a file's JSON, or the server's row)."""
    server = payloads.server_payloads(runtime.config)
    if server is None:
        return json.loads((runtime.payload_dir / ref).read_text())
    record = server.load(ref)
    assert record is not None
    return record


def overwrite_stored(runtime, ref: str, payload: str | bytes) -> None:
    """Damage a stored sidecar behind the store's back: its payload replaced, its digest kept."""
    server = payloads.server_payloads(runtime.config)
    if server is not None:
        runtime.store.settle()  # the server's row is then the only copy (the local file shipped)
    if server is None:
        path = runtime.payload_dir / ref
        if isinstance(payload, bytes):
            path.write_bytes(payload)
            return
        record = json.loads(path.read_text())
        record["payload"] = payload
        path.write_text(json.dumps(record))
        return
    data = payload if isinstance(payload, bytes) else payload.encode("utf-8", "surrogatepass")
    with server.db.transaction() as c:
        if c.execute("UPDATE payloads SET data=? WHERE ref=?", (data, ref)).rowcount == 0:
            c.execute("INSERT INTO payloads(ref, session_id, kind, mime, original_chars, original_bytes, sha256,"
                      " data, created_at) VALUES (?, 's1', 'raw', 'text/plain', 1, 1, 'x', ?, 0)", (ref, data))


def remove_stored(runtime, ref: str) -> None:
    """Lose a sidecar behind the store's back."""
    server = payloads.server_payloads(runtime.config)
    if server is not None:
        runtime.store.settle()  # the server's row is then the only copy (the local file shipped)
    if server is None:
        os.unlink(runtime.payload_dir / ref)
        return
    with server.db.transaction() as c:
        assert c.execute("DELETE FROM payloads WHERE ref=?", (ref,)).rowcount == 1


def file_store_only(backend: str, why: str) -> None:
    if backend == "postgresql":
        pytest.skip(f"about sidecar files ({why}); a PostgreSQL store keeps payloads in its table")


def only_ref(text: str) -> str:
    refs = payloads.refs_in(text)
    assert len(refs) == 1, text[:300]
    return refs[0]


def read_all(runtime, ref, page=997, session_id=None) -> str:
    out, offset = [], 0
    while True:
        page_ = payloads.read_ref(runtime, ref, content_offset=offset, max_chars=page, session_id=session_id)
        out.append(page_["content"])
        if not page_["has_more"]:
            return "".join(out)
        assert page_["next_content_offset"] > offset
        offset = page_["next_content_offset"]


# -- the always-on storage guard ---------------------------------------------------------

def test_ingested_data_uri_leaves_no_base64_in_the_sqlite_file_and_recovers_exactly(runtime):
    uri = png_uri()
    body = uri.split(",", 1)[1]
    runtime.store.ingest(KEY, [user(f"look at this {uri} please"), assistant("nice")])
    row = runtime.store.page("s1")[0]
    assert body not in row.content and row.content.startswith("look at this [trove:payload ref=")
    assert row.content.endswith(" please")
    assert body[:200].encode() not in db_bytes(runtime)
    assert read_all(runtime, only_ref(row.content)) == uri


def test_multimodal_image_block_keeps_its_shape_with_a_placeholder_url(runtime):
    uri = png_uri(seed=5)
    msg = {"role": "user", "content": [{"type": "text", "text": "what is this?"},
                                        {"type": "image_url", "image_url": {"url": uri}}]}
    runtime.store.ingest(KEY, [msg])
    row = runtime.store.page("s1")[0]
    blocks = row.content_value()
    assert blocks[0] == {"type": "text", "text": "what is this?"}
    assert blocks[1]["type"] == "image_url" and blocks[1]["image_url"]["url"].startswith("[trove:payload ref=")
    assert read_all(runtime, only_ref(row.content)) == uri
    assert uri.split(",", 1)[1][:100].encode() not in db_bytes(runtime)


def test_base64_inside_tool_call_arguments_is_externalized(runtime):
    run = b64_run()
    call = tool_call("c1", "write_file", json.dumps({"path": "a.bin", "data": run}))
    runtime.store.ingest(KEY, [user("save it"), assistant("", [call])])
    row = runtime.store.page("s1")[1]
    assert run not in (row.tool_calls or "")
    args = json.loads(json.loads(row.tool_calls)[0]["function"]["arguments"])
    assert args["path"] == "a.bin" and args["data"].startswith("[trove:payload ref=")
    assert read_all(runtime, only_ref(row.tool_calls)) == run


def test_long_base64_run_in_a_tool_result_is_externalized_but_ordinary_text_is_not(runtime):
    run = b64_run(4000)
    text = "header line\n" + run + "\nfooter"
    prose = "word " * 5000
    runtime.store.ingest(KEY, [tool_result("c1", text), tool_result("c2", prose)])
    first, second = runtime.store.page("s1")
    assert first.content.startswith("header line\n[trove:payload ref=") and first.content.endswith("\nfooter")
    assert read_all(runtime, only_ref(first.content)) == run
    assert second.content == prose


def test_line_wrapped_base64_block_is_externalized_whole(runtime):
    run = b64_run(3000)
    wrapped = "\n".join(run[i:i + 76] for i in range(0, len(run), 76))
    runtime.store.ingest(KEY, [tool_result("c1", "cert:\n" + wrapped + "\nend")])
    row = runtime.store.page("s1")[0]
    assert row.content.startswith("cert:\n[trove:payload ref=") and run[:76] not in row.content
    assert read_all(runtime, only_ref(row.content)) == wrapped
    assert row.content.endswith("]\nend")


def test_short_tokens_hashes_and_hex_are_left_alone(runtime):
    texts = ["sha256 " + "ab12" * 16, "id " + "A1b2C3d4" * 20, "hex " + "deadbeef" * 200,
             "data:text/plain;base64,aGk=", "AAAA" * 600]
    runtime.store.ingest(KEY, [user(t) for t in texts])
    assert [r.content for r in runtime.store.page("s1")] == texts
    assert stored_refs(runtime) == []
    assert not runtime.payload_dir.exists() or not list(runtime.payload_dir.iterdir())


def test_same_payload_twice_writes_one_sidecar(runtime):
    uri = png_uri()
    runtime.store.ingest(KEY, [user(uri), assistant("ok"), user(uri)])
    rows = runtime.store.page("s1")
    assert only_ref(rows[0].content) == only_ref(rows[2].content)
    assert stored_refs(runtime) == [only_ref(rows[0].content)]


def test_sidecar_records_owner_kind_mime_sizes_and_digest(runtime, backend):
    uri = png_uri()
    runtime.store.ingest(KEY, [tool_result("call-9", uri, name="screenshot")])
    ref = only_ref(runtime.store.page("s1")[0].content)
    record = stored_record(runtime, ref)
    assert record["session_id"] == "s1" and record["kind"] == "data_uri" and record["mime"] == "image/png"
    assert record["original_chars"] == len(uri) and record["original_bytes"] == len(uri.encode())
    assert record["sha256"] == payloads.digest(uri) and record["payload"] == uri
    assert record["tool_call_id"] == "call-9" and record["tool_name"] == "screenshot"
    if backend == "sqlite":
        assert oct((runtime.payload_dir / ref).stat().st_mode & 0o777) == "0o600"
    else:  # the file waited for the shipper, which uploaded it and removed it
        runtime.store.settle()
        assert not (runtime.payload_dir / ref).exists()


def test_unwritable_payload_dir_keeps_the_payload_inline_and_warns(tmp_path, caplog, backend):
    file_store_only(backend, "an unwritable payload directory")
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the payload directory should be")
    rt = build_runtime(make_config(tmp_path, large_output_externalization_path=str(blocker / "sub")))
    uri = png_uri()
    rt.store.ingest(KEY, [user(uri)])
    assert rt.store.page("s1")[0].content == uri
    assert any("keeping it inline" in r.getMessage() for r in caplog.records)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_payload_dir_keeps_the_payload_inline(tmp_path, backend):
    file_store_only(backend, "directory permissions")
    pdir = tmp_path / "payloads"
    pdir.mkdir()
    pdir.chmod(0o500)
    try:
        rt = build_runtime(make_config(tmp_path, large_output_externalization_path=str(pdir)))
        uri = png_uri()
        rt.store.ingest(KEY, [user(uri)])
        assert rt.store.page("s1")[0].content == uri
    finally:
        pdir.chmod(0o700)


def test_disk_full_during_sidecar_write_keeps_the_payload_inline_and_leaves_no_temp_file(runtime, monkeypatch,
                                                                                         backend):
    file_store_only(backend, "a full disk under the payload directory")
    def full(fd, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(payloads.os, "write", full)
    uri = png_uri()
    runtime.store.ingest(KEY, [user(uri), assistant("ok")])
    monkeypatch.undo()
    assert runtime.store.page("s1")[0].content == uri
    assert not [p for p in runtime.payload_dir.iterdir()] if runtime.payload_dir.exists() else True


def test_failed_fsync_is_treated_as_not_durable(runtime, monkeypatch, backend):
    file_store_only(backend, "fsync of a sidecar file")
    def broken(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(payloads.os, "fsync", broken)
    uri = png_uri()
    runtime.store.ingest(KEY, [user(uri)])
    monkeypatch.undo()
    assert runtime.store.page("s1")[0].content == uri


def test_an_unexpected_error_in_the_transform_never_reaches_ingest(runtime, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("bug")

    monkeypatch.setattr(guard, "_guard_text", boom)
    runtime.store.ingest(KEY, [user("base64 mention")])
    assert runtime.store.page("s1")[0].content == "base64 mention"


def test_damaged_sidecar_is_rewritten_when_the_same_payload_arrives_again(runtime):
    uri = png_uri()
    runtime.store.ingest(KEY, [user(uri)])
    ref = only_ref(runtime.store.page("s1")[0].content)
    overwrite_stored(runtime, ref, b"{broken")
    runtime.store.append(KEY, [user(uri)])
    assert read_all(runtime, ref) == uri


# -- opt-in large-output externalization -----------------------------------------------

@pytest.fixture
def ext_runtime(tmp_path):
    return build_runtime(make_config(tmp_path, large_output_externalization_enabled=True,
                                     large_output_externalization_threshold_chars=1000))


def test_large_tool_result_becomes_placeholder_with_preview_and_recovers(ext_runtime):
    big = "".join(f"line {i}: result value {i * 7}\n" for i in range(400))
    ext_runtime.store.ingest(KEY, [user("run"), assistant("", [tool_call("c1", "terminal")]),
                                   tool_result("c1", big)])
    row = ext_runtime.store.page("s1")[2]
    assert row.content.startswith("[trove:externalized ref=") and "kind=tool_result" in row.content
    assert "Preview:\nline 0: result value 0" in row.content and len(row.content) < 1000
    assert row.tool_call_id == "c1"
    ref = only_ref(row.content)
    assert read_all(ext_runtime, ref, page=333) == big
    desc = payloads.describe_ref(ext_runtime, ref, session_id="s1")
    assert desc["kind"] == "tool_result" and desc["original_chars"] == len(big)
    assert desc["content_preview"] == big[:500] and "payload" not in desc


def test_large_generic_user_text_is_externalized_as_raw(ext_runtime):
    big = "paragraph " * 300
    ext_runtime.store.ingest(KEY, [user(big)])
    row = ext_runtime.store.page("s1")[0]
    assert "kind=raw" in row.content and read_all(ext_runtime, only_ref(row.content)) == big


def test_large_multimodal_content_is_externalized_as_media_json(ext_runtime):
    blocks = [{"type": "text", "text": "x" * 1500}, {"type": "image_url", "image_url": {"url": "https://e/x.png"}}]
    ext_runtime.store.ingest(KEY, [{"role": "user", "content": blocks}])
    row = ext_runtime.store.page("s1")[0]
    assert "kind=media" in row.content and not row.content_is_json
    assert json.loads(read_all(ext_runtime, only_ref(row.content))) == blocks


def test_small_messages_are_untouched_when_externalization_is_on(ext_runtime):
    ext_runtime.store.ingest(KEY, [user("hi"), tool_result("c1", "short output")])
    assert [r.content for r in ext_runtime.store.page("s1")] == ["hi", "short output"]


def test_large_output_is_kept_inline_when_the_sidecar_cannot_be_written(tmp_path, monkeypatch, backend):
    file_store_only(backend, "a failed rename in the payload directory")
    rt = build_runtime(make_config(tmp_path, large_output_externalization_enabled=True,
                                   large_output_externalization_threshold_chars=1000))
    monkeypatch.setattr(payloads.os, "replace", lambda *a: (_ for _ in ()).throw(OSError(28, "disk full")))
    big = "z" * 5000
    rt.store.ingest(KEY, [tool_result("c1", big)])
    monkeypatch.undo()
    assert rt.store.page("s1")[0].content == big
    assert not [p for p in rt.payload_dir.iterdir() if p.name.endswith(".tmp")]


def test_redaction_happens_before_sidecars_and_sqlite_see_the_secret(tmp_path):
    rt = build_runtime(make_config(tmp_path, large_output_externalization_enabled=True,
                                   large_output_externalization_threshold_chars=1000,
                                   large_output_active_replay_stubbing_enabled=True,
                                   large_output_active_replay_stub_threshold_tokens=100,
                                   sensitive_patterns_enabled=True))
    secret = "sk-live-0123456789abcdef"
    big = f"config dump\nOPENAI_API_KEY={secret}\n" + "filler line\n" * 200
    make_engine(rt)  # binds s1, so the current-turn hook acts for it
    stub = make_hooks(rt)["transform_tool_result"](tool_name="terminal", result=big, session_id="s1")
    assert stub.startswith("[trove:externalized") and "Preview:" in stub  # what the provider sees this turn
    assert secret not in stub and "OPENAI_API_KEY=[REDACTED:api_key:sha256=" in stub
    assert secret not in read_all(rt, only_ref(stub))
    rt.store.ingest(KEY, [tool_result("c1", big), user('password = "hunter two"')])
    rows = rt.store.page("s1")
    recovered = read_all(rt, only_ref(rows[0].content))
    assert secret not in recovered and "OPENAI_API_KEY=[REDACTED:api_key:sha256=" in recovered
    assert rows[1].content == 'password = "[REDACTED:password]"'
    assert secret.encode() not in db_bytes(rt) and b"hunter two" not in db_bytes(rt)
    assert stored_refs(rt) == sorted({only_ref(stub), only_ref(rows[0].content)})
    for ref in stored_refs(rt):
        assert secret not in json.dumps(stored_record(rt, ref))


def test_redaction_covers_tool_call_arguments_and_multimodal_text(tmp_path):
    rt = build_runtime(make_config(tmp_path, sensitive_patterns_enabled=True))
    call = tool_call("c1", "http", json.dumps({"headers": {"Authorization": "Bearer abc.def-123456"}}))
    blocks = [{"type": "text", "text": "my api_key: AKIA1234567890"}]
    rt.store.ingest(KEY, [assistant("", [call]), {"role": "user", "content": blocks}])
    first, second = rt.store.page("s1")
    assert "abc.def-123456" not in first.tool_calls and "[REDACTED:bearer_token:sha256=" in first.tool_calls
    assert json.loads(json.loads(first.tool_calls)[0]["function"]["arguments"])  # still valid JSON
    assert second.content_value()[0]["text"].startswith("my api_key: [REDACTED:api_key:sha256=")


def test_a_json_row_without_content_passes_the_guard_whole(tmp_path, caplog):
    config = make_config(tmp_path, large_output_externalization_enabled=True, sensitive_patterns_enabled=True,
                         large_output_externalization_threshold_chars=1000)
    cols = {"session_id": "s1", "role": "assistant", "content": None, "content_is_json": 1,
            "tool_calls": json.dumps([{"id": "c1", "function": {"name": "t", "arguments": "\ud800"}}],
                                     ensure_ascii=False)}
    out = guard.storage_transform(config)(cols)
    assert out["content"] is None and "\\ud800" in out["tool_calls"]  # made encodable, not left half done
    assert "storage transform failed" not in caplog.text


# -- refs: validation, ownership, tampering -------------------------------------------

@pytest.mark.parametrize("bad", [
    "", "../trove.db", "/etc/passwd", "trove-" + "a" * 32 + "-" + "b" * 8 + ".json/..", "sub/x.json",
    "..\\x.json", "trove-" + "a" * 32 + "-" + "b" * 8 + ".json\x00", "%2e%2e%2ftrove.db",
    "trove-" + "A" * 32 + "-" + "b" * 8 + ".json", "trove-" + "a" * 31 + "-" + "b" * 8 + ".json",
    "trove-" + "a" * 32 + "-" + "b" * 8 + ".json\n", ".trove-" + "a" * 32 + "-" + "b" * 8 + ".json",
    "C:trove.json", "trove-ａ" + "a" * 31 + "-" + "b" * 8 + ".json", "~/x.json", None, 42,
])
def test_validate_ref_refuses_anything_that_is_not_a_bare_payload_name(bad):
    with pytest.raises(PayloadError):
        payloads.validate_ref(bad)


def test_validate_ref_accepts_the_names_the_store_writes():
    ref = payloads.ref_for("s1", "payload")
    assert payloads.validate_ref(ref) == ref


def test_traversal_ref_is_refused_before_touching_the_filesystem(runtime):
    with pytest.raises(PayloadError, match="separators"):
        payloads.read_ref(runtime, "../trove.db")


def test_symlinked_sidecar_is_refused(runtime, tmp_path, backend):
    file_store_only(backend, "a symlink in the payload directory")
    target = tmp_path / "secret.txt"
    target.write_text("not a payload")
    runtime.payload_dir.mkdir(parents=True, exist_ok=True)
    ref = payloads.ref_for("s1", "x")
    (runtime.payload_dir / ref).symlink_to(target)
    with pytest.raises(PayloadError, match="symlink"):
        payloads.read_ref(runtime, ref)


def test_tampered_sidecar_fails_the_integrity_check(runtime):
    uri = png_uri()
    runtime.store.ingest(KEY, [user(uri)])
    ref = only_ref(runtime.store.page("s1")[0].content)
    overwrite_stored(runtime, ref, uri[:-4] + "AAAA")
    with pytest.raises(PayloadError, match="integrity"):
        payloads.read_ref(runtime, ref)


def test_corrupt_sidecar_is_reported_clearly(runtime):
    runtime.payload_dir.mkdir(parents=True, exist_ok=True)
    ref = payloads.ref_for("s1", "x")
    overwrite_stored(runtime, ref, b"\x00\xff not json")
    with pytest.raises(PayloadError, match="corrupt"):
        payloads.describe_ref(runtime, ref)


def test_missing_ref_is_reported_clearly(runtime):
    with pytest.raises(PayloadError, match="not found"):
        payloads.read_ref(runtime, payloads.ref_for("s1", "never written"))


def test_refs_of_another_session_are_refused_when_a_session_is_given(runtime):
    uri = png_uri()
    runtime.store.ingest(SessionKey("other"), [user(uri)])
    ref = only_ref(runtime.store.page("other")[0].content)
    with pytest.raises(PayloadError, match="another session"):
        payloads.read_ref(runtime, ref, session_id="s1")
    with pytest.raises(PayloadError, match="another session"):
        payloads.describe_ref(runtime, ref, session_id="s1")
    assert payloads.read_ref(runtime, ref, session_id="other")["content"].startswith("data:image/png")


def test_read_ref_pages_report_cursor_fields_and_always_progress(runtime):
    ref = payloads.payload_writer(runtime.config)("s1", "abcdefghij", kind="tool_result")
    page = payloads.read_ref(runtime, ref, content_offset=0, max_chars=4)
    assert page == {"ref": ref, "kind": "tool_result", "mime": "text/plain", "original_chars": 10,
                    "content": "abcd", "content_offset": 0, "content_returned_chars": 4,
                    "next_content_offset": 4, "has_more": True, "content_truncated": True}
    zero = payloads.read_ref(runtime, ref, content_offset=8, max_chars=0)
    assert zero["content"] == "i" and zero["next_content_offset"] == 9
    last = payloads.read_ref(runtime, ref, content_offset=9)
    assert last["content"] == "j" and last["has_more"] is False and last["next_content_offset"] is None
    past = payloads.read_ref(runtime, ref, content_offset=50)
    assert past["content"] == "" and past["has_more"] is False
    with pytest.raises(PayloadError, match="content_offset"):
        payloads.read_ref(runtime, ref, content_offset=-1)


def test_externalize_text_returns_a_verified_ref_or_none(runtime, monkeypatch, backend):
    ref = payloads.externalize_text(runtime, "s1", "big tool output")
    assert ref and payloads.read_ref(runtime, ref, session_id="s1")["content"] == "big tool output"
    monkeypatch.setattr(payloads, "_write_atomic", lambda *a: (_ for _ in ()).throw(OSError(30, "read-only")))
    assert payloads.externalize_text(runtime, "s1", "another output") is None
    assert payloads.externalize_text(runtime, "", "no session") is None


def test_text_sqlite_cannot_encode_moves_to_a_sidecar_instead_of_failing_ingest(runtime):
    odd = "half an emoji \ud83d here"
    call = tool_call("c1", "echo", json.dumps({"text": "x\ud83dy"}, ensure_ascii=False))
    runtime.store.ingest(KEY, [user(odd), assistant("", [call])])
    first, second = runtime.store.page("s1")
    assert first.content.startswith("[trove:externalized ref=") and "kind=unencodable_text" in first.content
    assert read_all(runtime, only_ref(first.content)) == odd
    args = json.loads(second.to_message()["tool_calls"][0]["function"]["arguments"])
    assert args == {"text": "x\ud83dy"}


def test_a_message_never_reaches_the_server_before_the_payload_it_names(runtime, backend):
    if backend == "sqlite":
        pytest.skip("about the server's payloads table (the file store's failures are tested above)")
    with runtime.db.transaction() as c:
        c.execute("ALTER TABLE payloads ADD CONSTRAINT refused CHECK (false) NOT VALID")  # every upload fails
    try:
        runtime.store.ingest(KEY, [user(png_uri(seed=7))])
        with pytest.raises(ServerUnreachableError):
            runtime.store.shipper.drain()
        with psycopg.connect(runtime.config.database_url, autocommit=True) as conn:
            assert conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0  # it waits for its payload
    finally:
        with runtime.db.transaction() as c:
            c.execute("ALTER TABLE payloads DROP CONSTRAINT refused")
    runtime.store.shipper.state.last_error_at = 0.0  # past the grace period
    runtime.store.settle()
    (row,) = runtime.store.page("s1")
    ref = only_ref(row.content)
    assert stored_record(runtime, ref)["payload"] == png_uri(seed=7) and not (runtime.payload_dir / ref).exists()



def test_check_ref_accepts_an_intact_payload_and_names_a_tampered_or_lost_one(runtime):
    for text in ("first payload", "second payload"):
        payloads.externalize_text(runtime, "s1", text)
    runtime.store.settle()  # PostgreSQL: the payloads ship, so the check reads the server's rows
    intact, tampered = (payloads.ref_for("s1", text) for text in ("first payload", "second payload"))
    payloads.check_ref(runtime, intact)
    overwrite_stored(runtime, tampered, "something else")
    with pytest.raises(PayloadError, match="failed its integrity check"):
        payloads.check_ref(runtime, tampered)
    remove_stored(runtime, intact)
    with pytest.raises(PayloadError, match="not found"):
        payloads.check_ref(runtime, intact)
