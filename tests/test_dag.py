"""``SummaryDAG``: node writes keep the frontier current, carry-over, reachability, lineage, summary search."""
from __future__ import annotations

import contextlib
from collections.abc import Sequence
from types import SimpleNamespace

import pytest
from conftest import assistant, user

from hermes_trove import dag as dag_module
from hermes_trove.dag import NodeRow, SummaryDAG
from hermes_trove.runtime import Runtime
from hermes_trove.store import SessionKey

BACKENDS = ("sqlite", "postgresql")  # every test here runs on the file and on a server


def messages(runtime: Runtime, session: str, n: int, source: str = "") -> list[int]:
    key = SessionKey(session, platform="cli", source=source)
    return runtime.store.append(key, [user(f"q{i}") if i % 2 == 0 else assistant(f"a{i}") for i in range(n)])


def leaf(dag: SummaryDAG, session: str, store_ids: Sequence[int], summary: str = "leaf",
         at: float | None = None) -> int:
    return dag.add_leaf(session, summary, store_ids, token_count=5, source_token_count=10 * len(store_ids),
                        earliest_at=at, latest_at=at)


def condense(dag: SummaryDAG, session: str, depth: int, children: Sequence[int], summary: str = "condensed",
             at: float | None = None) -> int:
    return dag.add_condensed(session, depth, summary, children, token_count=7, source_token_count=20,
                             earliest_at=at, latest_at=at)


def ids(nodes: Sequence[NodeRow]) -> list[int]:
    return [n.node_id for n in nodes]


class TestFrontier:
    def test_each_new_leaf_joins_the_frontier(self, runtime):
        dag, s = runtime.dag, messages(runtime, "s1", 4)
        a = leaf(dag, "s1", s[:2], at=1.0)
        b = leaf(dag, "s1", s[2:], at=2.0)
        assert ids(dag.frontier("s1")) == [a, b]

    def test_a_condensed_node_replaces_exactly_the_children_it_covers(self, runtime):
        dag, s = runtime.dag, messages(runtime, "s1", 6)
        a, b, c = (leaf(dag, "s1", s[i:i + 2], at=float(i)) for i in (0, 2, 4))
        parent = condense(dag, "s1", 1, [a, b], at=0.0)
        assert ids(dag.frontier("s1")) == [parent, c]
        grand = condense(dag, "s1", 2, [parent], at=0.0)
        assert ids(dag.frontier("s1")) == [grand, c]

    def test_the_frontier_orders_by_depth_then_age(self, runtime):
        dag, s = runtime.dag, messages(runtime, "s1", 6)
        a, b = leaf(dag, "s1", s[:2], at=10.0), leaf(dag, "s1", s[2:4], at=20.0)
        newest_leaf = leaf(dag, "s1", s[4:], at=30.0)
        older_leaf = leaf(dag, "s1", s[4:], at=5.0)
        parent = condense(dag, "s1", 1, [a, b], at=10.0)
        assert ids(dag.frontier("s1")) == [parent, older_leaf, newest_leaf]

    def test_a_node_written_inside_an_outer_transaction_lands_with_it(self, runtime):
        dag, s = runtime.dag, messages(runtime, "s1", 2)
        with pytest.raises(RuntimeError):
            with runtime.db.transaction() as conn:
                dag.add_leaf("s1", "doomed", s, token_count=1, source_token_count=1, earliest_at=None,
                             latest_at=None, conn=conn)
                raise RuntimeError("roll back")
        assert dag.frontier("s1") == [] and dag.visible("s1") == []
        with runtime.db.transaction() as conn:
            kept = dag.add_leaf("s1", "kept", s, token_count=1, source_token_count=1, earliest_at=None,
                                latest_at=None, conn=conn)
        assert ids(dag.frontier("s1")) == [kept]

    def test_a_node_is_dated_when_it_is_written_not_when_it_was_asked_for(self, runtime, monkeypatch, backend):
        # the write lock may be granted well after the call: a node's created_at is the time of its write
        dag, s = runtime.dag, messages(runtime, "s1", 8)
        clock, granted = [100.0], dag.db.transaction
        monkeypatch.setattr(dag_module, "time", SimpleNamespace(time=lambda: clock[0]))

        @contextlib.contextmanager
        def later(*args, **kwargs):
            clock[0] += 100.0  # the lock is held from here on
            with granted(*args, **kwargs) as conn:
                yield conn

        monkeypatch.setattr(dag.db, "transaction", later)
        first = dag.get(leaf(dag, "s1", s[:2]))
        parent = dag.get(condense(dag, "s1", 1, [first.node_id]))
        assert (first.created_at, parent.created_at) == (200.0, 300.0)
        if backend == "sqlite":  # a server writes these in one statement, dated at the call as before
            below = dag.add_leaf_below_frontier("s1", "next", s[2:4], token_count=1, source_token_count=1,
                                                earliest_at=None, latest_at=None)
            top = dag.condense_on_frontier("s1", 2, "top", [parent.node_id, below.node_id], token_count=1,
                                           source_token_count=1, earliest_at=None, latest_at=None)
            assert (below.created_at, top.created_at) == (400.0, 500.0)

    def test_a_node_needs_a_source_and_a_condensed_node_a_depth(self, runtime):
        with pytest.raises(ValueError):
            leaf(runtime.dag, "s1", [])
        with pytest.raises(ValueError):
            condense(runtime.dag, "s1", 0, [1])
        assert runtime.dag.visible("s1") == []

    def test_frontiers_of_two_sessions_do_not_mix(self, runtime):
        dag = runtime.dag
        a = leaf(dag, "s1", messages(runtime, "s1", 2))
        b = leaf(dag, "s2", messages(runtime, "s2", 2))
        assert ids(dag.frontier("s1")) == [a] and ids(dag.frontier("s2")) == [b]


class TestLineage:
    def test_sources_are_listed_in_order_and_paged(self, runtime):
        dag, s = runtime.dag, messages(runtime, "s1", 5)
        node = dag.get(leaf(dag, "s1", s))
        assert node is not None and node.depth == 0 and node.source_token_count == 50
        assert dag.source_count(node) == 5 and dag.source_ids(node) == s
        assert dag.source_ids(node, offset=1, limit=2) == s[1:3]

    def test_a_condensed_node_lists_its_children_and_each_child_names_its_parent(self, runtime):
        dag, s = runtime.dag, messages(runtime, "s1", 4)
        a, b = leaf(dag, "s1", s[:2]), leaf(dag, "s1", s[2:])
        parent = dag.get(condense(dag, "s1", 1, [b, a]))
        assert parent is not None and dag.source_ids(parent) == [b, a]
        assert dag.parent_of(a, "s1") == parent.node_id and dag.parent_of(parent.node_id, "s1") is None
        assert dag.parent_of(a, "other") is None

    def test_descendant_store_ids_reach_every_raw_message_once_in_store_order(self, runtime):
        dag, s = runtime.dag, messages(runtime, "s1", 6)
        a, b, c = leaf(dag, "s1", s[4:]), leaf(dag, "s1", s[:2]), leaf(dag, "s1", s[1:4])
        top = condense(dag, "s1", 2, [condense(dag, "s1", 1, [a, b]), c])
        assert dag.descendant_store_ids(top) == s
        assert dag.descendant_store_ids(a) == s[4:]

    def test_descendant_sources_are_found_through_the_lineage(self, runtime):
        dag = runtime.dag
        tg = leaf(dag, "s1", messages(runtime, "s1", 2, source="telegram"))
        cli = leaf(dag, "s1", messages(runtime, "s1", 2, source=""))
        top = condense(dag, "s1", 1, [tg, cli])
        assert dag.has_descendant_source(top, "telegram") and not dag.has_descendant_source(tg, "discord")
        assert dag.has_descendant_source(cli, "cli")

    def test_depth_stats_and_the_highest_covered_message(self, runtime):
        dag, s = runtime.dag, messages(runtime, "s1", 4)
        a, b = leaf(dag, "s1", s[:2]), leaf(dag, "s1", s[1:3])
        condense(dag, "s1", 1, [a, b])
        assert dag.depth_stats("s1") == {0: {"count": 2, "tokens": 10, "source_tokens": 40},
                                         1: {"count": 1, "tokens": 7, "source_tokens": 20}}
        assert dag.highest_covered_store_id("s1") == s[2] and dag.highest_covered_store_id("none") == 0


class TestCarryOver:
    def test_frontier_nodes_at_or_above_the_depth_are_carried(self, runtime):
        dag, s = runtime.dag, messages(runtime, "old", 6)
        a, b, c = (leaf(dag, "old", s[i:i + 2], at=float(i)) for i in (0, 2, 4))
        parent = condense(dag, "old", 1, [a, b], at=0.0)
        assert dag.carry_over("old", "new", min_depth=1) == [parent]
        assert ids(dag.frontier("new")) == [parent] and ids(dag.visible("new")) == [parent]
        assert ids(dag.frontier("old")) == [parent, c]

    def test_depth_zero_carries_the_whole_frontier(self, runtime):
        dag, s = runtime.dag, messages(runtime, "old", 4)
        a, b = leaf(dag, "old", s[:2], at=1.0), leaf(dag, "old", s[2:], at=2.0)
        assert dag.carry_over("old", "new", min_depth=0) == [a, b]

    def test_a_negative_depth_or_the_same_session_carries_nothing(self, runtime):
        dag = runtime.dag
        leaf(dag, "old", messages(runtime, "old", 2))
        assert dag.carry_over("old", "new", min_depth=-1) == []
        assert dag.carry_over("old", "old", min_depth=0) == []
        assert dag.frontier("new") == [] and len(dag.frontier("old")) == 1

    def test_carrying_twice_adds_nothing_new(self, runtime):
        dag = runtime.dag
        a = leaf(dag, "old", messages(runtime, "old", 2))
        dag.carry_over("old", "new", min_depth=0)
        dag.carry_over("old", "new", min_depth=0)
        assert ids(dag.frontier("new")) == [a] and ids(dag.visible("new")) == [a]

    def test_condensing_a_carried_node_in_the_new_session_leaves_the_old_frontier_alone(self, runtime):
        dag = runtime.dag
        carried = leaf(dag, "old", messages(runtime, "old", 2), at=1.0)
        dag.carry_over("old", "new", min_depth=0)
        fresh = leaf(dag, "new", messages(runtime, "new", 2), at=2.0)
        parent = condense(dag, "new", 1, [carried, fresh], at=1.0)
        assert ids(dag.frontier("new")) == [parent]
        assert ids(dag.frontier("old")) == [carried]


class TestReachability:
    def test_a_carried_node_is_visible_and_its_lineage_only_reachable(self, runtime):
        dag, s = runtime.dag, messages(runtime, "old", 4)
        a, b = leaf(dag, "old", s[:2]), leaf(dag, "old", s[2:])
        parent = condense(dag, "old", 1, [a, b])
        dag.carry_over("old", "new", min_depth=1)
        assert dag.is_visible("new", parent) and dag.is_reachable("new", parent)
        assert not dag.is_visible("new", a) and dag.is_reachable("new", a)

    def test_nodes_of_another_session_are_neither_visible_nor_reachable(self, runtime):
        dag = runtime.dag
        mine = leaf(dag, "s1", messages(runtime, "s1", 2))
        theirs = leaf(dag, "s2", messages(runtime, "s2", 2))
        assert dag.is_reachable("s1", mine) and dag.is_visible("s1", mine)
        assert not dag.is_visible("s1", theirs) and not dag.is_reachable("s1", theirs)
        assert not dag.is_reachable("s1", 10_000)

    def test_an_uncarried_node_beneath_the_frontier_stays_with_its_owner(self, runtime):
        dag, s = runtime.dag, messages(runtime, "old", 4)
        a, b = leaf(dag, "old", s[:2], at=1.0), leaf(dag, "old", s[2:], at=2.0)
        dag.carry_over("old", "new", min_depth=0)
        condense(dag, "old", 1, [a, b])
        assert dag.is_reachable("new", a) and dag.is_reachable("old", a)
        assert dag.get(10_000) is None


class TestSummarySearch:
    def test_search_finds_the_sessions_own_nodes_with_a_marked_snippet(self, runtime):
        dag = runtime.dag
        hit = leaf(dag, "s1", messages(runtime, "s1", 2), summary="we chose postgres for the ledger")
        leaf(dag, "s1", messages(runtime, "s1", 2), summary="lunch plans")
        found = dag.search("postgres", "s1")
        assert [n.node_id for n, _, _ in found] == [hit]
        node, rank, snippet = found[0]
        assert isinstance(rank, float) and ">>>postgres<<<" in snippet and node.summary.startswith("we chose")

    def test_search_reaches_carried_nodes_and_the_nodes_beneath_them(self, runtime):
        dag, s = runtime.dag, messages(runtime, "old", 4)
        child = leaf(dag, "old", s[:2], summary="the zebra migration detail")
        other = leaf(dag, "old", s[2:], summary="unrelated")
        parent = condense(dag, "old", 1, [child, other], summary="zebra work condensed")
        dag.carry_over("old", "new", min_depth=1)
        assert sorted(n.node_id for n, _, _ in dag.search("zebra", "new")) == sorted([child, parent])

    def test_search_never_crosses_into_an_unrelated_session(self, runtime):
        dag = runtime.dag
        leaf(dag, "s2", messages(runtime, "s2", 2), summary="secret kangaroo")
        assert dag.search("kangaroo", "s1") == [] and len(dag.search("kangaroo", "s2")) == 1

    def test_an_empty_query_returns_nothing_and_the_limit_caps_hits(self, runtime):
        dag = runtime.dag
        for i in range(4):
            leaf(dag, "s1", messages(runtime, "s1", 2), summary=f"walrus note {i}")
        assert dag.search("", "s1") == []
        assert len(dag.search("walrus", "s1", limit=3)) == 3
