"""The embedding indexer on real SQLite files: chunks with spans back to the message, O(new
rows) cursors, tool outputs only by policy, generation switch (no mixing, swap when
complete), two processes indexing one database (no duplicate vectors, no lost rows), the
background worker reaching full coverage and stopping, and backfill from the CLI."""
from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from embed_fakes import (  # noqa: F401
    FakeEmbeddings,
    fake_embeddings_server,
    fake_env,
    fake_runtime,
    fake_vector,
    fresh_embedding_caches,
    index_all,
)

from hermes_trove import backend as trove_backend
from hermes_trove.retrieval import embed_text, indexer, semantic
from hermes_trove.retrieval.embed_text import chunk_spans
from hermes_trove.retrieval.vector_store import VectorRow, VectorStore
from hermes_trove.store import SessionKey

BACKENDS = ("sqlite", "postgresql")

np = pytest.importorskip("numpy",
                         reason="the [embeddings] extra is not installed: pip install 'hermes-trove[embeddings]'")
pytestmark = pytest.mark.usefixtures("fresh_embedding_caches")
ROOT = Path(__file__).resolve().parents[1]


def seed(runtime, n=20, session="s1", start=0):
    msgs = []
    for i in range(start, start + n):
        msgs.append({"role": "user" if i % 2 == 0 else "assistant", "content": f"note {i} about topic{i % 5}"})
    return runtime.store.append(SessionKey(session), msgs)


def env_for(runtime, tmp_path, fake):
    """``fake_env`` plus the store the test runs on (a PostgreSQL schema on that backend)."""
    env = fake_env(tmp_path, fake)
    return {**env, "TROVE_DATABASE_URL": runtime.config.database_url} if runtime.config.database_url else env


def vectors(runtime):
    return runtime.db.read().execute(
        "SELECT generation_id, kind, item_id, span_start, span_end, length(vector) FROM embedding_vectors"
        " ORDER BY vector_id").fetchall()


def duplicate_vectors(store, generation_id):
    """Rows beyond the first for one (kind, item, span): 0 unless the unique key is missing."""
    return store.db.read().execute(
        "SELECT COUNT(*) - COUNT(DISTINCT kind || ':' || item_id || ':' || span_start) FROM embedding_vectors"
        " WHERE generation_id=?", (generation_id,)).fetchone()[0]


def test_chunk_spans_cover_long_text_on_word_boundaries():
    text = " ".join(f"word{i}" for i in range(800))
    spans = chunk_spans(text, size=1000, overlap=100)
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(e - s <= 1000 for s, e in spans)
    assert all(text[s - 1] == " " for s, _ in spans[1:])  # each chunk starts on a word
    assert all(spans[i + 1][0] < spans[i][1] for i in range(len(spans) - 1))  # overlapping, no gaps
    assert chunk_spans("   ") == [] and chunk_spans("short") == [(0, 5)]
    assert len(chunk_spans("x " * 100000)) == 16  # bounded per message


def test_a_pass_indexes_text_messages_and_summaries_with_spans_back_to_the_message(tmp_path, fake):
    runtime = fake_runtime(tmp_path, fake)
    ids = runtime.store.append(SessionKey("s1"), [
        {"role": "user", "content": "the deploy key lives in vault"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
                                                               "function": {"name": "t", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "secret tool output"},
        {"role": "assistant", "content": "long answer " * 200},
    ])
    node = runtime.dag.add_leaf("s1", "summary of the vault talk", ids[:2], token_count=5, source_token_count=10,
                                earliest_at=1.0, latest_at=2.0)
    report = indexer.run_pass(runtime, budget_s=30)
    assert report.status == "partial" and report.swapped  # searchable; the text recipe follows
    rows = vectors(runtime)
    by_item = {}
    for _gen, kind, item, start, end, size in rows:
        by_item.setdefault((kind, item), []).append((start, end))
        assert size == 32  # int8, one byte per dimension
    assert set(by_item) == {("message", ids[0]), ("message", ids[3]), ("summary", node)}  # no tool row, no blank
    long_row = runtime.store.get(ids[3])
    spans = by_item[("message", ids[3])]
    assert len(spans) >= 2 and spans[0][0] == 0 and spans[-1][1] == len(long_row.content)
    assert by_item[("summary", node)] == [(0, None)]
    gen = VectorStore(runtime.db).active()
    assert gen is not None and gen.message_cursor == ids[-1] and gen.node_cursor == node
    assert indexer.status(runtime)["coverage"] == 1.0


def test_tool_outputs_get_vectors_only_by_policy(tmp_path, fake):
    runtime = fake_runtime(tmp_path, fake, embedding_tool_output_policy="all")
    ids = runtime.store.append(SessionKey("s1"), [{"role": "tool", "tool_call_id": "c", "content": "ls output"}])
    indexer.run_pass(runtime, budget_s=30)
    assert [(r[1], r[2]) for r in vectors(runtime)] == [("message", ids[0])]


def test_memory_tool_results_are_not_sent_for_vectors_even_when_tool_output_is(tmp_path, fake):
    """trove_* and lossless-claw lcm_* results copy stored rows: with every tool output embedded
    they are still skipped (never sent), the other tool output is embedded, coverage reaches 1.0."""
    runtime = fake_runtime(tmp_path, fake, embedding_tool_output_policy="all", embedding_context_messages=0)
    call = [{"id": "c1", "type": "function", "function": {"name": "trove_grep", "arguments": "{}"}}]
    ids = runtime.store.append(SessionKey("s1"), [
        {"role": "user", "content": "the invoice total was 4120 euros"},
        {"role": "assistant", "content": "", "tool_calls": call},
        {"role": "tool", "tool_call_id": "c1", "name": "trove_grep", "content": "echo trove copy 4120"},
        {"role": "tool", "tool_call_id": "c2", "name": "lcm_grep", "content": "echo lcm copy 4120"},
        {"role": "tool", "tool_call_id": "c3", "name": "terminal", "content": "ls output"}])
    index_all(runtime)
    sent = [t for r in fake.requests for t in r["body"]["input"]]
    assert not [t for t in sent if "echo" in t] and sent, sent
    assert sorted(r[2] for r in vectors(runtime)) == [ids[0], ids[4]]
    assert indexer.status(runtime)["coverage"] == 1.0


def test_passes_are_bounded_and_only_read_new_rows(tmp_path, fake):
    runtime = fake_runtime(tmp_path, fake, embedding_batch_size=4)
    seed(runtime, 30)
    first = indexer.run_pass(runtime, budget_s=30, max_items=12)
    assert first.status == "partial" and first.rows == 12 and not first.swapped
    index_all(runtime)
    sent = fake.texts_sent()
    assert len(vectors(runtime)) == 30
    again = indexer.run_pass(runtime, budget_s=30)
    assert again.status == "done" and again.rows == 0 and fake.texts_sent() == sent  # nothing re-read
    new = seed(runtime, 3, start=100)
    later = indexer.run_pass(runtime, budget_s=30)
    assert later.rows == 3 and fake.texts_sent() == sent + 3
    assert {r[2] for r in vectors(runtime)} >= set(new)


def test_a_pass_with_nothing_to_do_takes_no_lease_and_writes_nothing(tmp_path, fake, monkeypatch):
    from hermes_trove import leases

    runtime = fake_runtime(tmp_path, fake)
    seed(runtime, 6)
    index_all(runtime)
    taken: list[str] = []
    real = leases.acquire
    monkeypatch.setattr(leases, "acquire", lambda db, name, *a, **k: taken.append(name) or real(db, name, *a, **k))
    idle = indexer.run_pass(runtime, budget_s=30)
    assert idle.status == "done" and idle.rows == 0 and idle.pending == 0 and taken == []
    seed(runtime, 1, start=50)  # a new message: the next pass works under the lease again
    busy = indexer.run_pass(runtime, budget_s=30)
    assert busy.rows == 1 and taken and taken[0].startswith("embeddings:")


def test_writes_ignore_duplicates_and_cursors_never_move_back(tmp_path, fake):
    runtime = fake_runtime(tmp_path, fake)
    store = VectorStore(runtime.db)
    gen = store.ensure("openai", "fake-4", 4)
    row = VectorRow("message", 7, 0, 5, "s1", 1.0, b"\x01\x02\x03\x04", 0.01)
    assert store.write(gen.generation_id, [row], message_cursor=10) == 1
    assert store.write(gen.generation_id, [row], message_cursor=3) == 0
    assert store.generation(gen.generation_id).message_cursor == 10
    assert store.vector_count(gen.generation_id) == 1


def test_charges_from_several_threads_at_once_all_count_and_the_cap_holds(tmp_path, fake):
    import threading

    runtime = fake_runtime(tmp_path, fake)
    store = VectorStore(runtime.db)
    granted: list[tuple[int, int] | None] = []

    def charge_many():
        for _ in range(20):
            granted.append(store.charge("2030-01-01", 1, 3, 70, 0))

    threads = [threading.Thread(target=charge_many) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sum(g is not None for g in granted) == 70 and store.spend("2030-01-01") == (70, 210)


def inputs(fake):
    return [text for r in fake.requests for text in r["body"]["input"] if text != "dimension probe"]


def test_with_text_context_each_message_is_embedded_with_the_two_turns_before_it_in_its_session(tmp_path, fake):
    # groups of two: context crosses groups
    runtime = fake_runtime(tmp_path, fake, embedding_batch_size=2, embedding_context="text")
    long_turn = "x" * 1000
    runtime.store.append(SessionKey("s1"), [
        {"role": "user", "content": "we adopted a puppy"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
                                                               "function": {"name": "t", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "tool output is never context"},
        {"role": "assistant", "content": long_turn},
        {"role": "user", "content": "her name is Biscuit"},
    ])
    runtime.store.append(SessionKey("s2"), [{"role": "user", "content": "another conversation"}])
    index_all(runtime)
    first, sent = inputs(fake)[:4], inputs(fake)[4:]  # a new space is built with vector context first
    assert first == ["we adopted a puppy", long_turn[:embed_text.CHUNK_CHARS], "her name is Biscuit",
                     "another conversation"]
    assert sent[0] == "we adopted a puppy"  # the first turn has no context
    assert sent[1].startswith(long_turn[:embed_text.CHUNK_CHARS]) and sent[1].endswith("\nwe adopted a puppy")
    # the chunk first, then the two earlier user/assistant turns, oldest first, each cut
    assert sent[2] == "her name is Biscuit\nwe adopted a puppy\n" + "x" * embed_text.CONTEXT_CHARS
    assert sent[3] == "another conversation"  # no context from another session
    assert not any("tool output" in t for t in sent)


def stored(runtime, store_id):
    """The dequantised vectors of one message, in span order."""
    rows = runtime.db.read().execute("SELECT vector, scale FROM embedding_vectors WHERE kind='message' AND item_id=?"
                                     " ORDER BY span_start", (store_id,)).fetchall()
    return [np.frombuffer(bytes(v), dtype=np.int8).astype(np.float32) * s for v, s in rows]


def unit(v):
    return v / np.linalg.norm(v)


@pytest.mark.parametrize("max_items", [64, 2])  # one pass, or a pass per two rows (the carry is read back)
def test_with_vector_context_each_vector_carries_the_previous_turns_vector_in_its_session(tmp_path, fake,
                                                                                       max_items):
    runtime = fake_runtime(tmp_path, fake, embedding_batch_size=2, embedding_context="vector")
    long_turn = " ".join(f"w{i}" for i in range(400))  # several chunks
    ids = runtime.store.append(SessionKey("s1"), [
        {"role": "user", "content": "we adopted a puppy"},
        {"role": "tool", "tool_call_id": "c1", "content": "tool output is never context"},
        {"role": "assistant", "content": long_turn},
        {"role": "user", "content": "her name is Biscuit"},
    ])
    other = runtime.store.append(SessionKey("s2"), [{"role": "user", "content": "another conversation"}])
    while indexer.run_pass(runtime, budget_s=30, max_items=max_items).status == "partial":
        pass
    sent = inputs(fake)
    assert "we adopted a puppy" in sent and "her name is Biscuit" in sent  # each chunk is embedded alone
    assert all("\n" not in t for t in sent) and not any("tool output" in t for t in sent)
    own = {t: np.asarray(fake_vector(t, 32), dtype=np.float32) for t in sent}
    w = embed_text.CONTEXT_WEIGHT
    first = unit(own["we adopted a puppy"])
    assert np.allclose(stored(runtime, ids[0])[0], first, atol=0.02)  # nothing before it
    spans = [long_turn[s:e] for s, e in chunk_spans(long_turn)]
    chunks = [unit(own[t] + w * first) for t in spans]  # every chunk carries the turn before
    assert len(stored(runtime, ids[2])) == len(spans) >= 2
    assert all(np.allclose(got, want, atol=0.02) for got, want in zip(stored(runtime, ids[2]), chunks, strict=True))
    carried = unit(sum(chunks))  # a message passes on its chunks' mean
    assert np.allclose(stored(runtime, ids[3])[0], unit(own["her name is Biscuit"] + w * carried), atol=0.02)
    assert np.allclose(stored(runtime, other[0])[0], unit(own["another conversation"]), atol=0.02)
    assert VectorStore(runtime.db).active().recipe == f"chunk+prev-vector:{w}"


def test_a_new_space_is_searchable_after_a_vector_context_build_then_embedded_again_with_text(tmp_path, fake):
    runtime = fake_runtime(tmp_path, fake)  # the default: context=text
    ids = seed(runtime, 12)
    store = VectorStore(runtime.db)
    first = indexer.run_pass(runtime, budget_s=30)
    gen = store.active()
    assert first.status == "partial" and first.swapped
    assert gen.recipe == f"chunk+prev-vector:{embed_text.CONTEXT_WEIGHT}"
    assert inputs(fake) == [f"note {i} about topic{i % 5}" for i in range(12)]  # each chunk alone
    assert "recipe_pending" in indexer.status(runtime)
    row_ids = sorted(r[0] for r in runtime.db.read().execute("SELECT vector_id FROM embedding_vectors"))
    fake.requests.clear()
    report = indexer.backfill(runtime)  # runs through the second stage
    assert report["status"] == "ok" and store.active().generation_id == gen.generation_id
    assert store.active().recipe == "chunk+2prev:300" and "recipe_pending" not in indexer.status(runtime)
    assert inputs(fake)[1] == "note 1 about topic1\nnote 0 about topic0"
    assert sorted(r[0] for r in runtime.db.read().execute("SELECT vector_id FROM embedding_vectors")) == row_ids
    assert store.vector_count(gen.generation_id) == len(ids) and duplicate_vectors(store, gen.generation_id) == 0
    assert indexer.run_pass(runtime, budget_s=30).status == "done"


def test_a_generation_of_an_older_recipe_is_embedded_again_in_place_and_stays_searchable(tmp_path, fake):
    runtime = fake_runtime(tmp_path, fake)
    ids = seed(runtime, 12)
    store = VectorStore(runtime.db)
    gen = store.ensure("openai", "fake-32", 32, "", "chunk")  # as an older build made it
    store.write(gen.generation_id, [VectorRow("message", i, 0, 10, "s1", 1.0, bytes(32), 0.01) for i in ids],
                message_cursor=ids[-1])
    store.activate(gen.generation_id)
    before = semantic.search(runtime, "note 3 about topic3")
    assert before.ran and len(before.hits) == 12
    row_ids = sorted(r[0] for r in runtime.db.read().execute("SELECT vector_id FROM embedding_vectors"))
    first = indexer.run_pass(runtime, budget_s=30, max_items=5)
    assert first.restarted and first.status == "partial" and first.generation == gen.generation_id
    again = store.generation(gen.generation_id)
    assert again.recipe == "chunk+2prev:300" and again.state == "active" and again.message_cursor == ids[4]
    # mid-way: old and new vectors together, one set per message, still the active space, and
    # the in-RAM mirror is not reloaded for every group (rows are overwritten in place)
    assert store.vector_count(gen.generation_id) == 12 and duplicate_vectors(store, gen.generation_id) == 0
    assert again.removed == gen.removed
    mid = semantic.search(runtime, "note 3 about topic3")
    assert mid.ran and mid.generation == gen.generation_id and len(mid.hits) == 12
    index_all(runtime)
    assert store.generation(gen.generation_id).removed == gen.removed + 1  # one reload, when done
    after = semantic.search(runtime, "note 3 about topic3")
    assert ids[3] in [h.item_id for h in after.hits[:3]] and after.hits[0].score > 0.5
    assert sorted(r[0] for r in runtime.db.read().execute("SELECT vector_id FROM embedding_vectors")) == row_ids
    assert store.vector_count(gen.generation_id) == 12 and duplicate_vectors(store, gen.generation_id) == 0
    assert all(r[5] == 32 for r in vectors(runtime))
    assert not indexer.run_pass(runtime, budget_s=30).restarted  # the recipe is current now
    zero = runtime.db.read().execute("SELECT COUNT(*) FROM embedding_vectors WHERE vector=?", (bytes(32),))
    assert zero.fetchone()[0] == 0  # every old vector was replaced


@pytest.mark.parametrize("context", [{"embedding_context": "none"},
                                     {"embedding_context": "text", "embedding_context_messages": 0}])
def test_without_context_each_chunk_is_embedded_alone_and_changing_it_re_embeds(tmp_path, fake, context):
    import dataclasses

    runtime = fake_runtime(tmp_path, fake, **context)
    ids = seed(runtime, 4)
    index_all(runtime)
    assert inputs(fake) == [f"note {i} about topic{i % 5}" for i in range(4)]
    store = VectorStore(runtime.db)
    assert store.active().recipe == "chunk"
    assert indexer.status(runtime)["recipe"] == "chunk" and "recipe_pending" not in indexer.status(runtime)
    one = dataclasses.replace(runtime, config=dataclasses.replace(runtime.config, embedding_context="text",
                                                                  embedding_context_messages=1))
    assert "recipe_pending" in indexer.status(one)
    fake.requests.clear()
    report = indexer.run_pass(one, budget_s=30)
    assert report.restarted and report.rows == 4 and store.active().recipe == "chunk+1prev:300"
    assert inputs(fake)[1:] == [f"note {i} about topic{i % 5}\nnote {i - 1} about topic{i - 1}" for i in range(1, 4)]
    assert store.vector_count(store.active().generation_id) == len(ids)


def test_rewriting_an_item_overwrites_its_rows_in_place_and_drops_spans_it_no_longer_has(tmp_path, fake):
    runtime = fake_runtime(tmp_path, fake)
    store = VectorStore(runtime.db)
    gen = store.ensure("openai", "fake-4", 4)
    old = [VectorRow("message", 7, s, s + 10, "s1", 1.0, b"\x01\x01\x01\x01", 0.01) for s in (0, 500)]
    store.write(gen.generation_id, old + [VectorRow("message", 8, 0, 5, "s1", 1.0, b"\x02\x02\x02\x02", 0.01)])
    ids = {(r[0], r[1]) for r in runtime.db.read().execute("SELECT item_id, span_start FROM embedding_vectors")}
    new = VectorRow("message", 7, 0, 400, "s1", 2.0, b"\x09\x09\x09\x09", 0.02)
    store.write(gen.generation_id, [new], replaces=[("message", 7)])
    rows = runtime.db.read().execute(
        "SELECT item_id, span_start, span_end, vector, at FROM embedding_vectors ORDER BY item_id").fetchall()
    assert [tuple(r) for r in rows] == [(7, 0, 400, b"\x09\x09\x09\x09", 2.0), (8, 0, 5, b"\x02\x02\x02\x02", 1.0)]
    assert ids >= {(7, 0), (8, 0)} and store.generation(gen.generation_id).removed == 1  # the dropped span
    store.invalidate(gen.generation_id)
    assert store.scan_head(gen.generation_id)[1] == 2


def test_switching_the_model_builds_a_new_generation_beside_the_old_and_swaps_when_complete(tmp_path, fake):
    import dataclasses

    old = fake_runtime(tmp_path, fake, model="fake-16", embedding_batch_size=4)
    ids = seed(old, 24)
    index_all(old)
    store = VectorStore(old.db)
    first = store.active()
    assert first is not None and first.dim == 16
    new = dataclasses.replace(old, config=dataclasses.replace(old.config, embedding_model="fake-8"))
    report = indexer.run_pass(new, budget_s=30, max_items=8)
    assert report.status == "partial" and not report.swapped
    building = store.generation(report.generation)
    assert building.state == "building" and building.dim == 8
    # queries keep using the complete old generation, embedded with the old model
    result = semantic.search(new, "note 3 about topic3")
    assert result.ran and result.generation == first.generation_id and result.provider == "openai:fake-16"
    assert ids[3] in [h.item_id for h in result.hits[:3]]  # the next two turns carry it as context
    index_all(new)
    assert store.active().generation_id == building.generation_id
    assert store.generation(first.generation_id).state == "retired"
    # the retired space is pruned; every remaining vector belongs to the 8-dimension space
    assert {(g, size) for g, _, _, _, _, size in vectors(new)} == {(building.generation_id, 8)}
    after = semantic.search(new, "note 3 about topic3")
    assert after.ran and after.generation == building.generation_id and after.provider == "openai:fake-8"
    # switching back restarts the old space empty instead of mixing stale rows into it
    back = dataclasses.replace(old)
    indexer.run_pass(back, budget_s=30, max_items=4)
    assert store.generation(first.generation_id).state == "building"
    assert store.vector_count(first.generation_id) == 4


_WORKER = """
import sys, time
sys.path.insert(0, {scripts!r})
import _bootstrap
from hermes_trove.runtime import build_runtime
from hermes_trove.retrieval import indexer
runtime = build_runtime()
deadline = time.time() + 60
idle = 0
while time.time() < deadline and idle < 3:
    report = indexer.run_pass(runtime, budget_s=0.3, max_items=16)
    idle = idle + 1 if report.status in ("done", "busy") else 0
    time.sleep(0.02)
print("ok")
"""


def test_two_processes_indexing_one_database_write_no_duplicates_and_lose_no_rows(tmp_path, fake):
    runtime = fake_runtime(tmp_path, fake, embedding_batch_size=4)
    seed(runtime, 60, session="a")
    env = {**os.environ, **env_for(runtime, tmp_path, fake), "TROVE_EMBEDDING_BATCH_SIZE": "4"}
    code = _WORKER.format(scripts=str(ROOT / "scripts"))
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    # rows keep arriving while both index
    for k in range(5):
        seed(runtime, 8, session="b", start=1000 + 8 * k)
        time.sleep(0.1)
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    index_all(runtime)
    store = VectorStore(runtime.db)
    gen = store.active()
    assert gen is not None
    ids = [r[0] for r in runtime.db.read().execute("SELECT store_id FROM messages ORDER BY store_id")]
    items = [r[2] for r in vectors(runtime)]
    assert sorted(items) == ids  # every message exactly once: nothing lost, nothing twice
    assert duplicate_vectors(store, gen.generation_id) == 0
    assert len(store.generations()) == 1


def test_a_pass_never_moves_its_cursor_past_a_message_still_being_written(tmp_path, fake, backend):
    if backend == "sqlite":
        pytest.skip("SQLite has one writer at a time: its ids commit in the order they are drawn")
    runtime = fake_runtime(tmp_path, fake)
    first = seed(runtime, 2)
    writer = runtime.db.open_connection()  # another client of the server, mid-transaction
    try:
        with writer.raw.transaction():
            slow = writer.execute("INSERT INTO messages(session_id, role, content, created_at, ingested_at)"
                                  " VALUES ('s1', 'user', 'a note written slowly', 1.0, 1.0)"
                                  " RETURNING store_id").fetchone()[0]
            later = seed(runtime, 1, start=10)  # committed with an id above the one still in flight
            assert later[0] > slow
            assert indexer.run_pass(runtime, budget_s=30).status == "busy"
            assert VectorStore(runtime.db).find("openai", "fake-32").message_cursor < slow
    finally:
        writer.close()
    index_all(runtime)
    assert sorted(r[2] for r in vectors(runtime)) == sorted([*first, slow, *later])


def seeded_server_store(tmp_path, fake, backend) -> tuple:
    """A runtime on a server store holding two messages, and its VectorStore (SQLite skips: one writer
    at a time, so its ids commit in the order they are drawn)."""
    if backend == "sqlite":
        pytest.skip("SQLite has one writer at a time: its ids commit in the order they are drawn")
    runtime = fake_runtime(tmp_path, fake)
    seed(runtime, 2)
    return runtime, VectorStore(runtime.db)


def test_a_pass_waits_past_the_servers_deadlock_timeout_for_a_writer_of_messages(tmp_path, fake, backend):
    # The server cancels an autovacuum that holds a table for a waiter only after deadlock_timeout: a
    # wait ending then stepped aside every time messages were vacuumed. The writer here commits once
    # the pass has waited longer than deadlock_timeout (read on the server's clock, never timed here).
    runtime, store = seeded_server_store(tmp_path, fake, backend)
    got: list = []
    writer, watcher = runtime.db.open_connection(), runtime.db.open_connection()
    try:
        with writer.raw.transaction():
            slow = writer.execute("INSERT INTO messages(session_id, role, content, created_at, ingested_at)"
                                  " VALUES ('s1', 'user', 'a note written slowly', 1.0, 1.0)"
                                  " RETURNING store_id").fetchone()[0]
            pid = writer.execute("SELECT pg_backend_pid()").fetchone()[0]
            reader = threading.Thread(target=lambda: got.append(store.settled_heads()), daemon=True)
            reader.start()
            deadline = time.monotonic() + 60  # a guard against a hang: the condition comes at about 1 s
            while reader.is_alive() and time.monotonic() < deadline and not watcher.execute(
                    "SELECT 1 FROM pg_stat_activity WHERE ? = ANY(pg_blocking_pids(pid)) AND clock_timestamp()"
                    " - query_start > current_setting('deadlock_timeout')::interval + interval '50 ms'",
                    (pid,)).fetchone():
                time.sleep(0.01)
    finally:
        writer.close()
    reader.join(60)
    watcher.close()
    assert got and got[0] is not None and got[0][0] >= slow, got


def worker_status(runtime, reached, budget_s: float = 30) -> dict:
    """The first status for which ``reached`` holds while the worker runs (the last one read if the
    budget runs out): the assertions read that same status, never a later one."""
    deadline = time.monotonic() + budget_s
    while True:
        now = indexer.status(runtime)
        if reached(now) or time.monotonic() > deadline:
            return now
        time.sleep(0.05)


def embedded_with_the_recipe_wanted(status: dict) -> bool:
    # Full coverage of a first build (vector context) is passed through: its messages are then embedded
    # again in place with text context, and coverage starts over from 0.
    return status.get("coverage") == 1.0 and "recipe_pending" not in status


def test_the_settle_wait_is_bounded_whatever_the_servers_deadlock_timeout():
    wait = trove_backend.settle_wait_ms
    assert wait(1000) == 1000 + trove_backend.SETTLE_WAIT_MS  # the server's default: a second past it
    assert wait(3_600_000) == trove_backend.SETTLE_WAIT_MAX_MS  # an hour: later writers would queue that long
    assert wait(None) == trove_backend.SETTLE_WAIT_MS  # unreadable: never 0, which waits forever


def test_a_pass_under_a_long_deadlock_timeout_steps_aside_within_the_bound(tmp_path, fake, backend):
    # A server whose deadlock_timeout is an hour (a temporary view stands in for pg_settings on the
    # pass's own connection: the test's role may not set it) must not have the pass wait an hour for
    # a writer, while every later writer of messages queues behind its lock request.
    runtime, store = seeded_server_store(tmp_path, fake, backend)
    assert store.settled_heads() is not None  # no writer: the heads, and the wait was the transaction's alone
    assert runtime.db.connect().execute("SHOW lock_timeout").fetchone()[0] == "0"
    got: list = []

    def pass_under_an_hour() -> None:
        runtime.db.connect().execute("CREATE TEMPORARY VIEW pg_settings AS"
                                     " SELECT 'deadlock_timeout'::text AS name, '3600000'::text AS setting")
        got.append(store.settled_heads())

    writer = runtime.db.open_connection()
    try:
        with writer.raw.transaction():
            writer.execute("INSERT INTO messages(session_id, role, content, created_at, ingested_at)"
                           " VALUES ('s1', 'user', 'a note never finished in time', 1.0, 1.0)")
            reader = threading.Thread(target=pass_under_an_hour, daemon=True)
            reader.start()
            reader.join(120)  # a guard against a hang: the bound ends the wait after a few seconds
            alive = reader.is_alive()
    finally:
        writer.close()
    reader.join(60)
    assert not alive and got == [None], got  # busy: the next pass reads on


def test_the_background_worker_reaches_full_coverage_between_turns_and_stops(tmp_path, fake):
    runtime = fake_runtime(tmp_path, fake, embedding_idle_seconds=0.05, embedding_pass_max_items=10)
    seed(runtime, 40)
    worker = indexer.start_background(runtime)
    assert worker is not None and worker.daemon and indexer.start_background(runtime) is worker
    now = worker_status(runtime, embedded_with_the_recipe_wanted)
    assert now["coverage"] == 1.0 and "recipe_pending" not in now and now["worker"] == "running", now
    seed(runtime, 5, start=500)  # a quiet agent: no turn drives it, the worker still catches up
    worker.nudge()
    # on a server the rows reach it through the outbox: a backlog of 0 counts once they are there
    now = worker_status(runtime, lambda s: s.get("eligible_rows") == 45 and s.get("backlog") == 0)
    assert now["backlog"] == 0 and now["coverage"] == 1.0, now
    assert len(vectors(runtime)) == 45
    indexer.stop_all()
    assert not worker.is_alive()


def test_a_failed_pass_is_retried_within_seconds_and_repeated_failures_back_off(tmp_path):
    with FakeEmbeddings(fail_first=2) as failing:  # the first two requests answer 500
        runtime = fake_runtime(tmp_path, failing, embedding_idle_seconds=0.05)
        seed(runtime, 5)
        worker = indexer.start_background(runtime)
        assert worker is not None
        # within the old fixed 30 s pause: two failures wait 1 + 2 s
        now = worker_status(runtime, embedded_with_the_recipe_wanted, budget_s=20)
        indexer.stop_all()
    assert now["coverage"] == 1.0 and "recipe_pending" not in now, now
    assert len(failing.requests) >= 3


@pytest.mark.parametrize(("status", "failures", "idle", "pause"), [
    ("partial", 0, 5.0, 0.05), ("done", 0, 5.0, 5.0), ("idle", 0, 0.05, 0.05), ("busy", 0, 5.0, 5.0),
    ("error", 1, 0.05, 1.0), ("unavailable", 2, 0.05, 2.0), ("error", 3, 0.05, 4.0), ("error", 5, 0.05, 16.0),
    ("error", 6, 0.05, 30.0), ("error", 10_000, 0.05, 30.0), ("error", 1, 5.0, 5.0), ("error", 1, 60.0, 60.0),
])
def test_the_pause_after_a_pass_doubles_per_failure_in_a_row_up_to_thirty_seconds(status, failures, idle, pause):
    assert indexer.pause_after(status, failures, idle) == pause


def test_the_worker_is_not_started_when_embeddings_are_off(runtime):
    assert indexer.start_background(runtime) is None
    assert indexer.status(runtime)["worker"] == "off"


def test_the_operator_cli_backfills_and_reports_status(tmp_path, fake, monkeypatch):
    from hermes_trove import command

    runtime = fake_runtime(tmp_path, fake)
    seed(runtime, 25)
    for key, value in env_for(runtime, tmp_path, fake).items():
        monkeypatch.setenv(key, value)
    out = io.StringIO()
    assert command.main(["embed", "backfill", "--db", str(tmp_path / "trove.db"), "--json"], out=out) == 0
    assert '"status": "ok"' in out.getvalue() and '"coverage": 1.0' in out.getvalue()
    out = io.StringIO()
    assert command.main(["embed", "status", "--db", str(tmp_path / "trove.db")], out=out) == 0
    text = out.getvalue()
    assert "coverage: 1.0" in text and "provider: openai:fake-32" in text
    name, result = command.run(runtime, ["embed", "warmup"])
    assert result["status"] == "ok" and result["dim"] == 32


def test_a_tty_gets_a_progress_bar():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    stream = Tty()
    show = indexer.tty_progress(stream)
    assert show is not None and indexer.tty_progress(io.StringIO()) is None
    show({"coverage": 0.5, "vectors": 10})
    assert "50.0%" in stream.getvalue() and "#" * 15 in stream.getvalue()
