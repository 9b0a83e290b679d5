"""Ignored sessions hand compaction to the host's own ContextCompressor (real class when installed)."""
from __future__ import annotations

import pytest
from conftest import make_config, user

from hermes_trove import tokens
from hermes_trove.engine import TroveEngine
from hermes_trove.runtime import build_runtime


def test_ignored_session_uses_the_native_compressor_and_stores_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "home"))
    compressor = pytest.importorskip("agent.context_compressor")
    aux = pytest.importorskip("agent.auxiliary_client")

    from types import SimpleNamespace

    calls = []

    def fake_model(*a, **kw):  # the host summarizer's model call, answered locally
        calls.append(kw)
        return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content="NATIVE SUMMARY"))],
                               usage=None)

    monkeypatch.setattr(aux, "call_llm", fake_model)
    monkeypatch.setattr(compressor, "call_llm", fake_model)
    rt = build_runtime(make_config(tmp_path, ignore_session_patterns=("cron:*",)))
    eng = TroveEngine(rt)
    eng.update_model("fake-model", 64000, base_url="http://127.0.0.1:9/v1", api_key="k", provider="custom")
    eng.on_session_start("job-1", platform="cron")
    assert isinstance(eng._native_compressor(), compressor.ContextCompressor)
    msgs = [user(f"line {i} " + "x" * 3000) for i in range(60)]
    out = eng.compress(msgs, current_tokens=tokens.count_messages(msgs))
    assert rt.store.count() == 0 and rt.dag.visible("job-1") == []
    assert len(out) < len(msgs) and calls
    assert any("NATIVE SUMMARY" in str(m.get("content")) for m in out)
    assert eng.compression_count == 1


def test_without_the_host_an_ignored_session_is_trimmed_deterministically(tmp_path, monkeypatch):
    rt = build_runtime(make_config(tmp_path, ignore_session_patterns=("cron:*",)))
    eng = TroveEngine(rt)
    eng.update_model("m", 64000)
    eng.on_session_start("job-2", platform="cron")
    eng._native = False  # as if agent.context_compressor were not importable
    msgs = [user(f"line {i} " + "x" * 3000) for i in range(60)]
    out = eng.compress(msgs, current_tokens=tokens.count_messages(msgs))
    assert tokens.count_messages(out) < eng.threshold_tokens
    assert out[-1] == msgs[-1] and rt.store.count() == 0


def test_a_failing_host_compressor_leaves_the_transcript_unchanged(tmp_path):
    class BrokenCompressor:  # a host compressor that fails mid-compaction
        def compress(self, messages, **kw):
            raise RuntimeError("host compressor broke")

    rt = build_runtime(make_config(tmp_path, ignore_session_patterns=("cron:*",)))
    eng = TroveEngine(rt)
    eng.update_model("m", 64000)
    eng.on_session_start("job-3", platform="cron")
    eng._native = BrokenCompressor()
    msgs = [user(f"line {i}") for i in range(5)]
    assert eng.compress(msgs, current_tokens=10 ** 6) is msgs
    assert eng._last_compression_made_progress is False
    assert eng.snapshot()["last_compression_status"] == "error"
    assert "host compressor broke" in eng._last_summary_error
