"""The store's bulk write path used by the importer, and the digests stored rows depend on."""
from __future__ import annotations

import hashlib
import json
import random
import sqlite3

import pytest

from hermes_trove.ingest import message_identity
from hermes_trove.store import SessionKey, normalize_message

PINNED = [
    ({"role": "user", "content": "hello"}, "265eda26df1885f81e7c8660"),
    ({"role": "assistant", "content": "naïve café — 東京 \"quoted\" \\ back\nline\t"}, "9b4e74918feac8197ac85e36"),
    ({"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "exec", "arguments": "{\"b\":1,\"a\":2}"}}]},
     "abe9a0fedb0ff3a0935c5297"),
    ({"role": "tool", "content": "ok", "tool_call_id": "c1", "name": "exec"}, "bd0927098b86372be614c633"),
    ({"role": "user", "content": [{"type": "text", "text": "look"},
                                  {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
     "2e4126cc1b875159a09f4919"),
    ({"role": "assistant", "content": None}, "6ac830d31f653e3739854b0c"),
    ({"role": "user", "content": "lone \ud800 surrogate"}, "8fef3f3854564d3538087b45"),
    ({"content": "no role", "tool_call_id": None, "tool_calls": []}, "af104e9257eadbf20e70955e"),
    ({"role": "user", "content": "emoji 🎉 and \x00 nul \u2028", "timestamp": 1772442000.5, "_db_persisted": True},
     "be51a17ebc757fc3ea12a789"),
    ({"role": "assistant", "content": 42, "tool_calls": [{"z": 1, "a": {"y": 2.5, "b": None}}]},
     "7402437bb4e569a12b14ca08"),
]


def reference_identity(message: dict) -> str:
    """The digest as first defined: existing databases hold digests made this way."""
    payload = [message.get("role") or "", message.get("content") if message.get("content") is not None else "",
               message.get("tool_calls") or None, message.get("tool_call_id") or ""]
    raw = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str, separators=(",", ":"))
    return hashlib.blake2b(raw.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def varied_messages(n: int, seed: int = 3) -> list[dict]:
    rng = random.Random(seed)
    texts = ["", "plain words", "naïve 東京 🎉", "quote \" back \\ nl \n tab \t", "\x00\x1f ctrl", "lone \udc80 half",
             "\u2028 separators \u2029", "[trove-ish] {json: 1}"]
    out: list[dict] = []
    for i in range(n):
        kind = rng.randrange(6)
        text = rng.choice(texts) + f" {i}"
        if kind == 0:
            msg: dict = {"role": "user", "content": text}
        elif kind == 1:
            msg = {"role": "assistant", "content": rng.choice([text, "", None]), "tool_calls": [
                {"id": f"c{i}", "type": "function",
                 "function": {"name": "exec", "arguments": json.dumps({"q": text})}}]}
        elif kind == 2:
            msg = {"role": "tool", "content": text, "tool_call_id": f"c{i}", "name": rng.choice(["exec", "né \ud800"])}
        elif kind == 3:
            msg = {"role": "user", "content": [{"type": "text", "text": text}, {"type": "image_url",
                                                                                "image_url": {"url": "http://x/y.png"}}]}
        elif kind == 4:
            msg = {"role": "assistant", "content": text, "reasoning": "thought " + text, "model": "m1",
                   "_private": 1, "finish_reason": "stop"}
        else:
            msg = {"role": rng.choice(["system", "", None]), "content": rng.choice([text, 7, 2.5, True])}
        if rng.random() < 0.5:
            msg["timestamp"] = rng.choice([1772442000, 1772442000.125, 1.5e9 + i / 7, True, "2026-01-01"])
        out.append(msg)
    return out


def test_message_identity_digests_stay_pinned():
    for message, digest in PINNED:
        assert message_identity(message) == digest, message


def test_message_identity_matches_its_first_definition_on_varied_messages():
    for message in varied_messages(600):
        assert message_identity(message) == reference_identity(message), message


def test_normalize_message_serialises_json_columns_as_json_dumps_does():
    for message in varied_messages(200, seed=5):
        cols = normalize_message(message)
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            assert cols["content"] == json.dumps(content, ensure_ascii=False, default=str)
        calls = message.get("tool_calls")
        assert cols["tool_calls"] == (json.dumps(calls, ensure_ascii=False, default=str) if calls else None)


COLUMNS = ("session_id, conversation_id, platform, source, role, content, content_is_json, tool_calls, tool_call_id,"
           " tool_name, extra, token_count, identity, pinned")


def stored(runtime, session_id: str) -> list[tuple]:
    conn = runtime.db.read()
    rows = conn.execute(f"SELECT {COLUMNS}, created_at FROM messages WHERE session_id=? ORDER BY store_id",
                        (session_id,)).fetchall()
    return [tuple(r) for r in rows]


def test_append_bulk_stores_exactly_the_rows_append_stores(runtime):
    messages = varied_messages(300)
    key = SessionKey("s", "conv", "openclaw", "src")  # one session: sidecar refs are per session
    one = runtime.store.append(key, messages)
    bulk = runtime.store.append_bulk(key, messages)
    assert bulk == list(range(one[-1] + 1, one[-1] + 1 + len(messages)))
    rows = stored(runtime, "s")
    a, b = rows[:len(messages)], rows[len(messages):]
    assert len(a) == len(b) == len(messages)
    for message, x, y in zip(messages, a, b, strict=True):
        assert x[1:-1] == y[1:-1]
        ts = message.get("timestamp")
        if isinstance(ts, (int, float)) and not isinstance(ts, bool):
            assert x[-1] == y[-1] == float(ts)
        else:  # no usable timestamp: each call's own clock
            assert abs(x[-1] - y[-1]) < 60
    assert any("_trove_escaped_surrogates" in (row[10] or "") for row in b)
    assert any("unencodable_text" in row[5] for row in b)


def test_append_bulk_keeps_message_timestamps_exactly(runtime):
    messages = [{"role": "user", "content": f"t{i}", "timestamp": 1772442000 + i / 7} for i in range(50)]
    runtime.store.append_bulk(SessionKey("t"), messages)
    assert [r[-1] for r in stored(runtime, "t")] == [float(m["timestamp"]) for m in messages]


def test_append_bulk_rows_are_found_by_full_text_search(runtime):
    ids = runtime.store.append_bulk(SessionKey("s"), [{"role": "user", "content": "quantize the invoice"},
                                                      {"role": "user", "content": "unrelated words"}])
    hits = runtime.store.search("invoice")
    assert [row.store_id for row, _, _ in hits] == [ids[0]]


def test_append_bulk_never_reuses_the_ids_of_deleted_rows(runtime):
    first = runtime.store.append(SessionKey("s"), [{"role": "user", "content": str(i)} for i in range(3)])
    with runtime.db.transaction() as conn:
        conn.execute("DELETE FROM messages WHERE store_id=?", (first[-1],))
    again = runtime.store.append_bulk(SessionKey("s"), [{"role": "user", "content": "next"}])
    assert again == [first[-1] + 1]
    later = runtime.store.append(SessionKey("s"), [{"role": "user", "content": "after"}])
    assert later == [first[-1] + 2]


def test_append_bulk_joins_the_callers_transaction_and_rolls_back_with_it(runtime):
    with pytest.raises(RuntimeError):
        with runtime.db.transaction() as conn:
            runtime.store.append_bulk(SessionKey("s"), [{"role": "user", "content": "x"}], conn=conn)
            raise RuntimeError("abort")
    assert runtime.store.count() == 0
    assert runtime.store.session("s") is None


def test_append_bulk_refuses_a_connection_outside_a_transaction(runtime):
    conn = runtime.db.connect()
    with pytest.raises(ValueError):
        runtime.store.append_bulk(SessionKey("s"), [{"role": "user", "content": "x"}], conn=conn)
    assert runtime.store.count() == 0


def test_append_bulk_with_nothing_to_write_only_records_the_session(runtime):
    assert runtime.store.append_bulk(SessionKey("s"), []) == []
    assert runtime.store.session("s") is not None
    assert isinstance(runtime.db.read(), sqlite3.Connection)


def test_normalize_message_counts_tokens_as_count_message_does():
    from hermes_trove import tokens

    for message in varied_messages(300, seed=11):
        assert normalize_message(message)["token_count"] == tokens.count_message(message), message


def test_the_storage_guard_fast_path_changes_nothing_the_full_guard_would_change(runtime, tmp_path):
    from hermes_trove.payloads import guard as payloads

    transform = runtime.store.transform
    blob = "QUJD" * 400 + "xY9/+" * 60
    samples = [normalize_message(m) for m in varied_messages(300, seed=13)]
    samples += [dict(normalize_message({"role": "tool", "content": text}))
                for text in (blob, "data:image/png;base64," + blob, "see base64 below", "x" * 5000, "lone \udc80")]
    for cols in samples:
        cols = {**cols, "session_id": "s"}
        full = dict(cols)
        payloads._apply(full, payloads.payload_writer(runtime.config), payloads.Redactor.from_config(runtime.config),
                        False, 10**9)
        assert transform(cols) == full, cols
