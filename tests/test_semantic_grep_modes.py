"""trove_grep's vector modes over a fake embedding server, by table: every mode with every sort,
filters on vector hits, and the turn in flight left out of hybrid results as it is of full text."""
from __future__ import annotations

import json

import pytest
from conftest import assistant, make_engine, tool_call, user
from embed_fakes import fake_embeddings_server, fake_runtime, fresh_embedding_caches, index_all  # noqa: F401  (fixtures)

from hermes_trove.retrieval import search
from hermes_trove.store import SessionKey
from hermes_trove.tools import dispatch

BACKENDS = ("sqlite", "postgresql")

pytest.importorskip("numpy", reason="the [embeddings] extra is not installed: pip install 'hermes-trove[embeddings]'")
pytestmark = pytest.mark.usefixtures("fresh_embedding_caches")

T0 = 1_700_000_000.0


@pytest.fixture
def world(tmp_path, fake):
    runtime = fake_runtime(tmp_path, fake)
    texts = [("user", "my sister adopted a golden retriever puppy"), ("assistant", "congratulations on the dog"),
             ("user", "the quarterly budget spreadsheet is late"), ("user", "golden retriever puppy photos please")]
    ids = runtime.store.append(SessionKey("s1", platform="cli"), [
        {"role": role, "content": text, "timestamp": T0 + 3600 * i} for i, (role, text) in enumerate(texts)])
    index_all(runtime)
    return runtime, ids, make_engine(runtime, session="s1")


def grep(engine, **args):
    out = json.loads(dispatch(engine.tool_context(), "trove_grep", args))
    assert "error" not in out, out
    return out


def ids(out):
    return [h["store_id"] for h in out["results"] if h["type"] == "message"]


@pytest.mark.parametrize("mode", search.MODES)
@pytest.mark.parametrize("sort", search.SORTS)
def test_every_mode_with_every_sort_finds_the_puppy_turns(world, mode, sort):
    runtime, turns, engine = world
    out = grep(engine, query="golden retriever puppy", mode=mode, sort=sort)
    assert out["mode"] == mode and out["sort"] == sort
    assert {turns[0], turns[3]} <= set(ids(out))
    if sort == "recency":
        times = [h["timestamp"] for h in out["results"]]
        assert times == sorted(times, reverse=True)


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_vector_modes_report_what_ran(world, mode):
    out = grep(world[2], query="golden retriever", mode=mode)
    assert out["semantic"]["ran"] is True and "degraded_to_fts" not in out


@pytest.mark.parametrize("args, allowed", [
    ({"role": "assistant"}, {1}),
    ({"role": "user"}, {0, 2, 3}),
    ({"time_from": T0 + 3600}, {1, 2, 3}),
    ({"time_to": T0 + 3600}, {0, 1}),
    ({"source": "telegram"}, set()),
])
def test_filters_apply_to_vector_hits(world, args, allowed):
    runtime, turns, engine = world
    out = grep(engine, query="golden retriever puppy dog", mode="semantic", **args)
    assert set(ids(out)) <= {turns[i] for i in allowed}


def test_semantic_finds_by_meaning_what_full_text_cannot(world):
    runtime, turns, engine = world
    assert grep(engine, query="congratulations", mode="full_text")["results"]
    out = grep(engine, query="congratulations dog", mode="semantic")
    assert turns[1] in ids(out)


def test_hybrid_never_ranks_the_turn_in_flight(world):
    runtime, turns, engine = world
    live = [{"role": m.role, "content": m.content, "timestamp": m.created_at} for m in runtime.store.get_many(turns)]
    live += [{"role": "assistant", "content": "Nice.", "timestamp": T0 + 5 * 3600},
             dict(user("what did I say about the golden retriever puppy?"), timestamp=T0 + 6 * 3600),
             dict(assistant("", [tool_call("c1", "trove_grep", json.dumps({"query": "golden retriever puppy"}))]),
                  timestamp=T0 + 6 * 3600 + 1)]
    engine.ingest(live)
    index_all(runtime)  # the turn's own rows have vectors too
    out = json.loads(engine.handle_tool_call("trove_grep", {"query": "golden retriever puppy", "mode": "hybrid"},
                                             messages=live))
    assert out["mode"] == "hybrid" and out["semantic"]["ran"] is True
    found = [row.content for row in runtime.store.get_many(ids(out))]
    assert "my sister adopted a golden retriever puppy" in found
    assert not any("what did I say" in text for text in found)
    assert all(row.tool_calls is None for row in runtime.store.get_many(ids(out)))
