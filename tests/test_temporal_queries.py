"""Time-window reads (temporal/queries.py) on both backends: which leaf summaries and
raw messages a UTC window holds, over every session, one session's view (its own and carried
nodes) or one owner scope, with keyset pages and counts."""
from __future__ import annotations

import pytest
from conftest import make_config
from test_rollups import add_leaf, at

from hermes_trove.runtime import build_runtime
from hermes_trove.scope import Visibility
from hermes_trove.store import SessionKey
from hermes_trove.temporal import queries

BACKENDS = ("sqlite", "postgresql")


@pytest.fixture
def world(tmp_path):
    """Leaves on 3 May (s1, telegram chat A), 4 May (s1) and 4 May (s2, telegram chat B), 23:00 on
    5 May to 01:00 on 6 May (s2); one unsummarised message of s1 on 6 May."""
    runtime = build_runtime(make_config(tmp_path))
    ids = {
        "s1-3": add_leaf(runtime, 3, session="s1", platform="telegram", conversation_id="A"),
        "s1-4": add_leaf(runtime, 4, session="s1", platform="telegram", conversation_id="A"),
        "s2-4": add_leaf(runtime, 4, session="s2", platform="telegram", conversation_id="B", hours=(13, 14)),
    }
    key = SessionKey("s2", "B", "telegram")
    late = runtime.store.append(key, [{"role": "user", "content": "late", "timestamp": at(5, 23)},
                                      {"role": "user", "content": "later", "timestamp": at(6, 1)}])
    ids["s2-5"] = runtime.dag.add_leaf("s2", "late leaf", late, token_count=5, source_token_count=9,
                                       earliest_at=at(5, 23), latest_at=at(6, 1))
    runtime.store.append(SessionKey("s1", "A", "telegram"),
                         [{"role": "user", "content": "not summarised", "timestamp": at(6, 9)}])
    return runtime, ids


def names(ids: dict[str, int], found) -> list[str]:
    back = {v: k for k, v in ids.items()}
    return [back[item.node_id] for item in found]


CHAT_A = Visibility(mode="conversation", scope="telegram:A", session_id="s1")
OWN_S2 = Visibility(mode="session", session_id="s2")


@pytest.mark.parametrize(("window", "visible", "expected"), [
    ((at(3, 0), at(7, 0)), None, ["s1-3", "s1-4", "s2-4", "s2-5"]),
    ((at(4, 0), at(5, 0)), None, ["s1-4", "s2-4"]),
    ((at(6, 0), at(7, 0)), None, ["s2-5"]),  # a leaf overlapping the window's start belongs to it
    ((at(5, 0), at(6, 0)), None, ["s2-5"]),
    ((at(4, 11), at(4, 13)), None, ["s1-4"]),  # overlap counts to the leaf's last message, inclusive
    ((at(7, 0), at(9, 0)), None, []),
    ((at(3, 0), at(7, 0)), CHAT_A, ["s1-3", "s1-4"]),
    ((at(3, 0), at(7, 0)), OWN_S2, ["s2-4", "s2-5"]),
])
def test_leaves_overlapping_a_window_in_time_order(world, window, visible, expected):
    runtime, ids = world
    kwargs = {"visible": visible} if visible is not None else {}
    assert names(ids, queries.leaves(runtime.db, *window, **kwargs)) == expected
    assert queries.count_leaves(runtime.db, *window, **kwargs) == len(expected)
    spans = queries.leaf_spans(runtime.db, *window, **kwargs)
    assert sorted(names(ids, spans)) == sorted(expected)


def test_leaf_spans_carry_times_and_the_owner_scope(world):
    runtime, ids = world
    [span] = queries.leaf_spans(runtime.db, at(5, 0), at(6, 0))
    assert (span.node_id, span.session_id, span.earliest_at, span.latest_at, span.scope) == (
        ids["s2-5"], "s2", at(5, 23), at(6, 1), "telegram:B")


def test_leaves_page_by_time_and_id(world):
    runtime, ids = world
    window = (at(3, 0), at(7, 0))
    first = queries.leaves(runtime.db, *window, limit=2)
    assert names(ids, first) == ["s1-3", "s1-4"]
    last = first[-1]
    rest = queries.leaves(runtime.db, *window, after=(last.earliest_at, last.node_id))
    assert names(ids, rest) == ["s2-4", "s2-5"]


def test_one_sessions_view_includes_nodes_carried_into_it(world):
    runtime, ids = world
    runtime.dag.carry_over("s1", "s3", 0)
    found = names(ids, queries.leaves(runtime.db, at(3, 0), at(7, 0), session_id="s3"))
    assert found == ["s1-3", "s1-4"]
    assert names(ids, queries.leaves(runtime.db, at(3, 0), at(7, 0), session_id="s2")) == ["s2-4", "s2-5"]


def test_first_sources_name_each_leafs_first_message_and_size(world):
    runtime, ids = world
    found = queries.first_sources(runtime.db, [ids["s1-3"], ids["s2-5"]])
    assert {node: count for node, (_, count) in found.items()} == {ids["s1-3"]: 2, ids["s2-5"]: 2}
    assert queries.first_sources(runtime.db, []) == {}


@pytest.mark.parametrize(("window", "kwargs", "contents"), [
    ((at(6, 0), at(7, 0)), {}, ["later", "not summarised"]),
    ((at(5, 0), at(7, 0)), {"session_id": "s2"}, ["late", "later"]),
    ((at(6, 0), at(7, 0)), {"visible": CHAT_A}, ["not summarised"]),
    ((at(6, 0), at(7, 0)), {"visible": OWN_S2}, ["later"]),
    ((at(6, 1), at(6, 9)), {}, ["later"]),  # start inclusive, end exclusive
])
def test_messages_inside_a_window(world, window, kwargs, contents):
    runtime, _ = world
    found = queries.messages(runtime.db, *window, **kwargs)
    assert [m.content for m in found] == contents
    assert queries.count_messages(runtime.db, *window, **kwargs) == len(contents)


def test_messages_page_by_time_and_store_id(world):
    runtime, _ = world
    window = (at(3, 0), at(7, 0))
    first = queries.messages(runtime.db, *window, limit=3)
    rest = queries.messages(runtime.db, *window, after=(first[-1].created_at, first[-1].store_id))
    every = queries.messages(runtime.db, *window, limit=1000)
    assert [m.store_id for m in first + rest] == [m.store_id for m in every]


def test_count_unsummarized_counts_only_uncovered_messages_up_to_a_cap(world):
    runtime, _ = world
    assert queries.count_unsummarized(runtime.db, at(3, 0), at(7, 0)) == 1
    assert queries.count_unsummarized(runtime.db, at(3, 0), at(7, 0), session_id="s2") == 0
    runtime.store.append(SessionKey("s1", "A", "telegram"),
                         [{"role": "user", "content": f"more {n}", "timestamp": at(6, 10)} for n in range(5)])
    assert queries.count_unsummarized(runtime.db, at(3, 0), at(7, 0), cap=3) == 3
