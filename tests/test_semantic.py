"""The semantic query API and trove_grep modes: filters, one hit per item with its span, the
deadline and provider-failure fallbacks, deleted rows leaving the in-memory index, the
prescreen path agreeing with the exact scan, and grep semantic/hybrid degrading to full text."""
from __future__ import annotations

import dataclasses
import json

import pytest
from conftest import make_engine
from embed_fakes import fake_embeddings_server, fake_runtime, fresh_embedding_caches, index_all  # noqa: F401  (fixtures)

from hermes_trove.retrieval import embed_providers, semantic, vector_index
from hermes_trove.store import SessionKey
from hermes_trove.tools import dispatch

BACKENDS = ("sqlite", "postgresql")

np = pytest.importorskip("numpy", reason="the [embeddings] extra is not installed: pip install "
                                         "'hermes-trove[embeddings]'")
pytestmark = pytest.mark.usefixtures("fresh_embedding_caches")


def build(tmp_path, fake, **overrides):
    runtime = fake_runtime(tmp_path, fake, **overrides)
    a = runtime.store.append(SessionKey("alpha"), [
        {"role": "user", "content": "my sister adopted a golden retriever puppy", "timestamp": 1000.0},
        {"role": "assistant", "content": "congratulations on the new family dog", "timestamp": 1001.0}])
    b = runtime.store.append(SessionKey("beta"), [
        {"role": "user", "content": "the quarterly budget spreadsheet is late", "timestamp": 5000.0},
        {"role": "user", "content": "golden retriever puppy photos please", "timestamp": 6000.0}])
    node = runtime.dag.add_leaf("alpha", "talked about a golden retriever puppy", a, token_count=5,
                                source_token_count=9, earliest_at=1000.0, latest_at=1001.0)
    index_all(runtime)
    return runtime, a, b, node


def test_search_returns_one_hit_per_item_with_filters(tmp_path, fake):
    runtime, a, b, node = build(tmp_path, fake)
    res = semantic.search(runtime, "golden retriever puppy")
    assert res.ran and res.degraded_reason is None and res.coverage == 1.0
    assert res.provider == "openai:fake-32" and res.generation is not None
    keys = [(h.kind, h.item_id) for h in res.hits]
    assert len(keys) == len(set(keys)) == 5
    assert {("message", b[1]), ("summary", node), ("message", a[0])} <= set(keys[:3])
    msg = next(h for h in res.hits if h.item_id == b[1] and h.kind == "message")
    assert msg.span == (0, len("golden retriever puppy photos please")) and msg.session_id == "beta"
    assert next(h for h in res.hits if h.kind == "summary").span is None
    only_beta = semantic.search(runtime, "golden retriever puppy", session_ids=["beta"], kinds=("message",))
    assert {h.item_id for h in only_beta.hits} == set(b)
    window = semantic.search(runtime, "golden retriever puppy", since=1000.0, before=5000.0, kinds=("message",))
    assert {h.item_id for h in window.hits} == set(a)
    top = semantic.search(runtime, "golden retriever", limit=1).hits[0]
    assert (top.kind, top.item_id) in {("message", b[1]), ("summary", node), ("message", a[0])} and top.score > 0.3


def test_stored_vectors_are_the_quantized_bytes_and_scores_are_the_numpy_product_exactly(tmp_path, fake):
    texts = ["my sister adopted a golden retriever puppy", "the quarterly budget spreadsheet is late",
             "golden retriever puppy photos please", "a cat sleeps on the warm laptop"]
    runtime = fake_runtime(tmp_path, fake, embedding_context="none")  # the embedded text is the content
    ids = runtime.store.append(SessionKey("s1"), [{"role": "user", "content": t} for t in texts])
    index_all(runtime)
    gen = semantic.searched_generation(semantic.vector_store(runtime))
    provider = embed_providers.get_provider(semantic.spec_for(runtime, gen))
    q, scale = vector_index.quantize(provider.embed(texts, None))
    rows = runtime.db.read().execute("SELECT item_id, vector, scale FROM embedding_vectors ORDER BY item_id")
    assert [(r[0], bytes(r[1]), r[2]) for r in rows] == [(ids[i], q[i].tobytes(), float(scale[i]))
                                                         for i in range(len(texts))]
    query = provider.embed(["golden retriever puppy"], None)[0]
    expected = (q.astype(np.float32) @ np.asarray(query, dtype=np.float32)) * scale
    hits = semantic.search(runtime, "golden retriever puppy", limit=10).hits
    assert {h.item_id: h.score for h in hits} == {ids[i]: float(expected[i]) for i in range(len(texts))}


def test_embeddings_off_or_without_vectors_degrade_with_a_reason(tmp_path, fake, runtime):
    off = semantic.search(runtime, "anything")
    assert not off.ran and "TROVE_EMBEDDINGS_ENABLED" in (off.degraded_reason or "")
    empty = fake_runtime(tmp_path / "empty", fake)
    res = semantic.search(empty, "anything")
    assert not res.ran and "no vectors yet" in (res.degraded_reason or "")


def test_a_slow_provider_hits_the_deadline_and_the_caller_falls_back(tmp_path, fake):
    runtime, *_ = build(tmp_path, fake)
    fake.delay_s = 2.0
    # "passed its deadline" is said only while the provider is still working: the caller did not
    # wait for it. How soon search returns: bench/bench_bounds.py (deadlines).
    res = semantic.search(runtime, "puppy", deadline_s=0.2)
    assert not res.ran and "deadline of 200 ms" in (res.degraded_reason or "")
    fake.delay_s, fake.fail = 0.0, True
    failed = semantic.search(runtime, "puppy")
    assert not failed.ran and "HTTP 500" in (failed.degraded_reason or "")


def test_deleted_messages_leave_the_index(tmp_path, fake):
    runtime, a, b, _ = build(tmp_path, fake)
    assert any(h.item_id == b[1] for h in semantic.search(runtime, "puppy photos").hits)
    with runtime.db.transaction() as conn:  # what a session clean-up does
        conn.execute("DELETE FROM messages WHERE store_id=?", (b[1],))
    hits = semantic.search(runtime, "puppy photos").hits
    assert all(not (h.kind == "message" and h.item_id == b[1]) for h in hits)


def test_the_prescreen_path_finds_what_the_exact_scan_finds(monkeypatch):
    rng = np.random.default_rng(7)
    vecs = rng.standard_normal((3000, 64)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    q, scale = vector_index.quantize(vecs)
    index = vector_index.VectorIndex(1, 64)
    from hermes_trove.retrieval.vector_store import StoredVector

    index.append([StoredVector("message", i, 0, 10, f"s{i % 3}", float(i), q[i].tobytes(), float(scale[i]),
                               vector_id=i + 1) for i in range(len(vecs))])
    query = vecs[42] + 0.05 * rng.standard_normal(64).astype(np.float32)
    query /= np.linalg.norm(query)
    exact = [h.item_id for h in index.search(query, limit=10)]
    monkeypatch.setattr(vector_index, "EXACT_LIMIT", 100)
    monkeypatch.setattr(vector_index, "PRESCREEN_MIN", 300)
    screened = [h.item_id for h in index.search(query, limit=10)]
    assert exact[0] == 42 and screened[0] == 42
    assert len(set(exact) & set(screened)) >= 8
    filtered = index.search(query, session_ids=["s0"], limit=10)
    assert all(h.session_id == "s0" for h in filtered) and filtered[0].item_id == 42


def test_each_appended_row_keeps_its_metadata_across_pages_and_growth():
    from hermes_trove.retrieval.vector_store import StoredVector

    dim, n = 16, 2600  # more rows than a buffer's first capacity, appended in uneven pages
    one = np.zeros(dim, dtype=np.int8)
    one[0] = 127
    rows = [StoredVector("summary" if i % 4 == 0 else "message", 10_000 + i, i % 7, None if i % 5 == 0 else i % 7 + 3,
                         f"s{i % 11}", None if i % 6 == 0 else float(i), one.tobytes(), 1.0 / (i + 1), vector_id=i + 1)
            for i in range(n)]
    index = vector_index.VectorIndex(1, dim)
    for start, end in ((0, 1), (1, 4), (4, 1500), (1500, n)):
        index.append(rows[start:end])
    query = np.zeros(dim, dtype=np.float32)
    query[0] = 1.0
    assert len(index) == n and index.top == n
    hits = index.search(query, limit=n)
    assert [h.item_id for h in hits] == [r.item_id for r in rows]  # the score falls with the scale: row order
    for hit, row in zip(hits, rows, strict=True):
        span = None if row.kind == "summary" or row.span_end is None else (row.span_start, row.span_end)
        assert (hit.kind, hit.session_id, hit.at, hit.span) == (row.kind, row.session_id, row.at, span)
        assert isinstance(hit.item_id, int) and (span is None or all(isinstance(x, int) for x in span))
    dated = index.search(query, kinds=("message",), session_ids=["s3", "s4"], since=100.0, before=2000.0, limit=n)
    want = [r.item_id for r in rows if r.kind == "message" and r.session_id in ("s3", "s4")
            and r.at is not None and 100.0 <= r.at < 2000.0]
    assert [h.item_id for h in dated] == want and want


def test_a_stored_vector_of_an_unknown_kind_is_never_a_hit():
    from hermes_trove.retrieval.vector_store import StoredVector

    dim = 16
    one = np.zeros(dim, dtype=np.int8)
    one[0] = 127
    kinds = ("message", "chunk", "summary")  # the middle one: a row no version writes (a damaged store)
    index = vector_index.VectorIndex(1, dim)
    index.append([StoredVector(kind, i, 0, None, "s1", None, one.tobytes(), 1.0, vector_id=i + 1)
                  for i, kind in enumerate(kinds)])
    query = np.zeros(dim, dtype=np.float32)
    query[0] = 1.0
    assert [(h.kind, h.item_id) for h in index.search(query, limit=10)] == [("message", 0), ("summary", 2)]
    assert [h.item_id for h in index.search(query, kinds=("summary",), limit=10)] == [2]


def test_stored_vectors_of_an_unknown_kind_take_no_place_from_the_real_ones_above_the_exact_limit(monkeypatch):
    from hermes_trove.retrieval.vector_store import StoredVector

    monkeypatch.setattr(vector_index, "EXACT_LIMIT", 10)  # the Hamming prescreen runs on a small index
    monkeypatch.setattr(vector_index, "PRESCREEN_MIN", 2)
    dim = 16
    near, far, close = (np.full(dim, v, dtype=np.int8) for v in (127, -127, 127))
    close[12:] = -127  # mostly like the query: the best real row
    rows = [("chunk", near)] * 3 + [("message", far)] * 10 + [("message", close)]  # three damaged rows
    index = vector_index.VectorIndex(1, dim)
    index.append([StoredVector(kind, i, 0, None, "s1", None, v.tobytes(), 1.0, vector_id=i + 1)
                  for i, (kind, v) in enumerate(rows)])
    hits = index.search(np.ones(dim, dtype=np.float32), limit=3)
    assert [(h.kind, h.item_id) for h in hits][:1] == [("message", 13)], hits
    assert index.search(np.ones(dim, dtype=np.float32), kinds=("summary",), limit=3) == []


def _grep(engine, **args):
    return json.loads(dispatch(engine.tool_context(), "trove_grep", json.dumps(args)))


def test_grep_semantic_and_hybrid_use_vectors(tmp_path, fake):
    runtime, a, b, node = build(tmp_path, fake)
    engine = make_engine(runtime, session="alpha")
    sem = _grep(engine, query="golden retriever", mode="semantic", session_scope="all")
    assert sem["mode"] == "semantic" and sem["semantic"]["ran"] and "degraded_to_fts" not in sem
    assert {r["store_id"] for r in sem["results"][:2]} == {a[0], b[1]}
    hyb = _grep(engine, query="golden retriever puppy", mode="hybrid")
    assert hyb["mode"] == "hybrid"
    assert any(r.get("node_id") == node for r in hyb["results"]) and hyb["results"][0].get("store_id") == a[0]
    # role filters apply to vector hits too
    assistant = _grep(engine, query="family dog", mode="semantic", role="assistant")
    assert [r["store_id"] for r in assistant["results"]] == [a[1]]


def test_grep_semantic_degrades_to_full_text_when_embeddings_are_off(tmp_path, fake):
    runtime, a, *_ = build(tmp_path, fake)
    off = dataclasses.replace(runtime, config=dataclasses.replace(runtime.config, embeddings_enabled=False))
    engine = make_engine(off, session="alpha")
    out = _grep(engine, query="retriever", mode="semantic")
    assert out["mode"] == "full_text" and out["requested_mode"] == "semantic" and out["degraded_to_fts"] is True
    assert "TROVE_EMBEDDINGS_ENABLED" in out["degraded_reason"]
    assert out["results"] and out["results"][0]["store_id"] == a[0]
    assert "ignored_arguments" not in out


def test_status_reports_an_embeddings_section(tmp_path, fake):
    from hermes_trove.ops import doctor, status

    runtime, *_ = build(tmp_path, fake)
    section = status.build_status(runtime)["embeddings"]
    assert section["enabled"] and section["coverage"] == 1.0 and section["backlog"] == 0
    assert section["vectors"] == 5 and section["eligible_rows"] == 5 and section["generation_state"] == "active"
    check = next(c for c in doctor.run_doctor(runtime)["checks"] if c["check"] == "embeddings")
    assert check["status"] == "pass" and "coverage 1.0" in check["detail"]


def test_vector_hits_of_another_scope_never_reach_grep_or_recall(tmp_path, fake):
    runtime = fake_runtime(tmp_path, fake)
    theirs = runtime.store.append(SessionKey("a1", "agent:main:telegram:dm:1", "telegram"), [
        {"role": "user", "content": "my golden retriever puppy is called Biscuit", "timestamp": 1000.0}])
    mine = runtime.store.append(SessionKey("b0", "agent:main:telegram:dm:2", "telegram"), [
        {"role": "user", "content": "golden retriever puppy photos please", "timestamp": 2000.0}])
    index_all(runtime)
    engine = make_engine(runtime, session="b1", platform="telegram")
    engine.on_session_start("b1", platform="telegram", conversation_id="agent:main:telegram:dm:2")
    sem = _grep(engine, query="golden retriever puppy", mode="semantic", session_scope="all")
    assert sem["semantic"]["ran"] and [r["store_id"] for r in sem["results"]] == mine
    recall = json.loads(dispatch(engine.tool_context(), "trove_recall", json.dumps({"query": "golden retriever"})))
    assert "semantic" in recall["provenance"]["arms_run"], recall["provenance"]
    assert "Biscuit" not in json.dumps(recall) and str(theirs[0]) not in [str(h.get("store_id")) for h in
                                                                           recall["hits"]]
