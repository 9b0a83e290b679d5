"""End to end: with redaction on, no secret of the corpus reaches any disk surface
(trove.db, its WAL, payload files, the FTS vocabulary) or any text trove hands the provider
(summaries, replay stubs, the prompts of its own model calls); the clean corpus is unchanged."""
from __future__ import annotations

import json
import sqlite3

import pytest
from conftest import assistant, make_config, make_engine, tool_call, tool_result, user

from hermes_trove.runtime import build_runtime

from .corpus import CLEAN, SECRETS

pytestmark = pytest.mark.reliability

SECRET_VALUES = sorted({s for _, secrets in SECRETS for s in secrets})


def transcript():
    msgs = []
    for i, (text, _) in enumerate(SECRETS):
        msgs.append(user(f"turn {i}: {text}"))
        msgs.append(assistant(f"noted turn {i}", [tool_call(f"c{i}", "terminal", json.dumps({"cmd": text}))]))
        # a big tool result: externalized to a sidecar and stubbed in the replayed prompt
        msgs.append(tool_result(f"c{i}", f"log line with {text}\n" + "filler output line\n" * 400))
    for text in CLEAN:
        msgs.append(user(text))
        msgs.append(assistant("ok"))
    return msgs


class RecordingModel:
    """A fake model that records every prompt it is sent and echoes part of it back."""

    def __init__(self):
        self.prompts: list[str] = []

    def __call__(self, messages, model, timeout_s, max_tokens):
        text = "\n".join(str(m.get("content")) for m in messages)
        self.prompts.append(text)
        return "Summary: " + text[-2000:]


def surfaces(tmp_path, runtime) -> dict[str, bytes]:
    out = {}
    for path in sorted(tmp_path.rglob("*")):
        if path.is_file():
            out[str(path.relative_to(tmp_path))] = path.read_bytes()
    conn = sqlite3.connect(runtime.db.path)
    try:
        vocab = []
        for fts in ("messages_fts", "nodes_fts"):
            conn.execute(f"CREATE VIRTUAL TABLE temp.v_{fts} USING fts5vocab(main, '{fts}', 'row')")
            vocab += [r[0] for r in conn.execute(f"SELECT term FROM temp.v_{fts}")]
        out["fts vocabulary"] = "\n".join(vocab).encode()
    finally:
        conn.close()
    return out


def leaks(blobs: dict[str, bytes]) -> list[tuple[str, str]]:
    found = []
    for where, blob in blobs.items():
        low = blob.lower()
        for secret in SECRET_VALUES:
            token = secret.encode()
            # FTS lowercases and splits on punctuation: look for the longest run as well
            longest = max(secret.replace("-", " ").replace("_", " ").replace(".", " ").replace("/", " ").split(),
                          key=len).lower().encode()
            if token in blob or (len(longest) >= 16 and longest in low):
                found.append((where, secret[:12]))
    return found


def test_no_secret_reaches_any_disk_surface_or_provider_visible_text(tmp_path):
    cfg = make_config(tmp_path, sensitive_patterns_enabled=True, large_output_externalization_enabled=True,
                      large_output_externalization_threshold_chars=2000,
                      large_output_active_replay_stubbing_enabled=True,
                      large_output_active_replay_stub_threshold_tokens=200, fresh_tail_count=4,
                      leaf_chunk_tokens=2000)
    runtime = build_runtime(cfg)
    model = RecordingModel()
    eng = make_engine(runtime, complete=model, context_length=16000)
    msgs = transcript()
    eng.ingest(msgs)
    out = eng.compress(msgs, current_tokens=200000, force=True)
    assert eng.state.last_status == "compacted", eng.state.last_result
    assert eng.state.last_result["stubbed_tool_results"] > 0
    assert len(model.prompts) >= 1
    created = [m for m in out if m not in msgs]  # messages trove wrote: summaries and stubs
    assert created
    provider_text = {"prompts": "\n".join(model.prompts).encode(),
                     "created messages": json.dumps(created, ensure_ascii=False).encode()}
    blobs = surfaces(tmp_path, runtime)
    assert any(k.startswith("trove-payloads") for k in blobs), sorted(blobs)
    assert leaks(provider_text) == []
    assert leaks(blobs) == []


def test_the_clean_corpus_is_stored_unchanged(tmp_path):
    runtime = build_runtime(make_config(tmp_path, sensitive_patterns_enabled=True))
    eng = make_engine(runtime)
    eng.ingest([user(t) for t in CLEAN])
    stored = [r.content for r in runtime.store.page(eng.state.key.session_id)]
    assert stored == CLEAN
