"""The query path reads the vector head on the caller's connection and reloads the in-memory
index only when the store shows new or removed vectors: rows indexed after a query are found
by the next one, and an unchanged store is not re-read by the query thread."""
from __future__ import annotations

import pytest
from embed_fakes import FakeEmbeddings, fake_runtime, fresh_embedding_caches, index_all  # noqa: F401  (fixture)

from hermes_trove.retrieval import semantic, vector_index
from hermes_trove.store import SessionKey

BACKENDS = ("sqlite", "postgresql")

pytest.importorskip("numpy", reason="the [embeddings] extra is not installed: pip install "
                                    "'hermes-trove[embeddings]'")
pytestmark = pytest.mark.usefixtures("fresh_embedding_caches")


def test_index_refreshes_only_when_the_store_changed(tmp_path, monkeypatch):
    with FakeEmbeddings() as fake:
        runtime = fake_runtime(tmp_path, fake)
        first = runtime.store.append(SessionKey("alpha"), [
            {"role": "user", "content": "my sister adopted a golden retriever puppy", "timestamp": 1000.0}])
        index_all(runtime)
        refreshes: list[int] = []
        real = vector_index.VectorIndex.refresh

        def counted(self, store):
            refreshes.append(1)
            return real(self, store)

        monkeypatch.setattr(vector_index.VectorIndex, "refresh", counted)
        res = semantic.search(runtime, "golden retriever puppy")
        assert res.ran and [h.item_id for h in res.hits] == first
        assert len(refreshes) == 1  # the first query loads the index
        again = semantic.search(runtime, "golden retriever puppy")
        assert again.ran and [h.item_id for h in again.hits] == first
        assert len(refreshes) == 1  # nothing new: no reload, no query-thread connection

        second = runtime.store.append(SessionKey("beta"), [
            {"role": "user", "content": "golden retriever puppy photos please", "timestamp": 2000.0}])
        index_all(runtime)
        grown = semantic.search(runtime, "golden retriever puppy")
        assert grown.ran and {h.item_id for h in grown.hits} == set(first + second)
        assert len(refreshes) == 2

        with runtime.db.transaction() as conn:  # a removal must reload the index
            conn.execute("DELETE FROM messages WHERE store_id=?", (first[0],))
        shrunk = semantic.search(runtime, "golden retriever puppy")
        assert shrunk.ran and [h.item_id for h in shrunk.hits] == second
        assert len(refreshes) == 3


def test_current_compares_the_head():
    idx = vector_index.VectorIndex(1, 8)
    assert not idx.current((0, 0))  # never loaded
    idx.removed, idx.top = 0, 5
    assert idx.current((5, 0)) and idx.current((3, 0))
    assert not idx.current((6, 0)) and not idx.current((5, 1))
