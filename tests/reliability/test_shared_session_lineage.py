"""Two processes on one session never condense the same nodes twice; the doctor
reports multi-parent nodes and overlapping frontier coverage; ``doctor repair`` fixes them."""
from __future__ import annotations

import pytest
from conftest import make_config, user

from hermes_trove.compaction.compactor import CompactionLimits, Compactor
from hermes_trove.compaction.summarize import SummaryResult
from hermes_trove.ops import doctor, maintenance
from hermes_trove.runtime import build_runtime
from hermes_trove.store import SessionKey

BACKENDS = ("sqlite", "postgresql")  # every test here runs on the file and on a server

pytestmark = pytest.mark.reliability

KEY = SessionKey("shared", platform="cli")


def seed_leaves(runtime, count=4):
    ids = runtime.store.append(KEY, [user(f"message {i} about the pooler port") for i in range(count * 2)])
    for i in range(count):
        pair = ids[2 * i: 2 * i + 2]
        with runtime.db.transaction() as conn:
            runtime.dag.add_leaf(KEY.session_id, f"leaf {i}", pair, token_count=10, source_token_count=20,
                                 earliest_at=1.0 + i, latest_at=1.5 + i, conn=conn)
            runtime.store.advance_frontier(KEY.session_id, pair[-1])
    return ids


class RacingSummarizer:
    """Summarizes; on its first call another process (a second runtime) condenses first."""

    def __init__(self, rival=None):
        self.rival = rival

    def window(self, chat_window):
        return chat_window  # summaries fit the chat model's window

    def summarize(self, text, depth, budget, focus="", extra="", *, allow_model=True):
        if self.rival is not None:
            rival, self.rival = self.rival, None
            condense(rival)
        return SummaryResult(f"condensed d{depth}", "normal", "fake", 5, 1, 10)


def compactor(runtime, summarizer):
    return Compactor(runtime, KEY, CompactionLimits(100000, 128000), summarizer)


def condense(c):
    """The condensation pass alone, on the frontier as a compaction reads it at its start."""
    c._read_nodes()
    return c._condense(KEY.session_id, prefix_budget=0, eager=True)


def lineage(runtime):
    return by_check(doctor.run_doctor(runtime))["orphaned_lineage"]


def by_check(report):
    return {c["check"]: c for c in report["checks"]}


def test_a_rival_condensation_between_plan_and_commit_is_not_repeated(tmp_path):
    a = build_runtime(make_config(tmp_path))
    b = build_runtime(make_config(tmp_path))  # a second process: its own connections, same file
    seed_leaves(a)
    rival = compactor(b, RacingSummarizer())
    done = condense(compactor(a, RacingSummarizer(rival)))
    conn = a.db.read()
    assert a.dag.multi_parent_nodes(conn) == []
    assert a.dag.overlapping_frontier(conn) == {}
    assert done == 0 and [n.depth for n in a.dag.frontier(KEY.session_id)] == [1]
    assert lineage(a)["status"] == "pass"


def make_duplicates(runtime):
    """The state two racing processes left before the fix: the same children condensed twice."""
    seed_leaves(runtime)
    children = [n.node_id for n in runtime.dag.frontier(KEY.session_id)]
    for text in ("first parent", "second parent"):
        with runtime.db.transaction() as conn:
            runtime.dag.add_condensed(KEY.session_id, 1, text, children, token_count=5, source_token_count=40,
                                      earliest_at=1.0, latest_at=4.5, conn=conn)
    return children


def test_the_doctor_fails_on_multi_parent_nodes_and_overlapping_coverage(runtime):
    make_duplicates(runtime)
    check = lineage(runtime)
    assert check["status"] == "fail"
    assert "4 nodes with more than one parent" in check["detail"]
    assert "session shared: 8 messages covered by more than one frontier node" in check["detail"]


def test_doctor_repair_removes_the_later_duplicate_and_keeps_every_message(runtime):
    children = make_duplicates(runtime)
    diag = maintenance.diagnose_fts(runtime.db.read())
    assert diag["needs_repair"] and diag["lineage"]["multi_parent_nodes"] == 4
    out = maintenance.repair_fts(runtime, have_backup=True)  # a server's backup is the operator's pg_dump
    assert out["status"] == "repaired" and any("removed 1 duplicate" in a for a in out["actions"])
    frontier = runtime.dag.frontier(KEY.session_id)
    assert [n.summary for n in frontier] == ["first parent"]
    assert runtime.dag.source_ids(frontier[0]) == children
    assert len(runtime.dag.descendant_store_ids(frontier[0].node_id)) == 8
    assert lineage(runtime)["status"] == "pass"
    assert doctor.run_doctor(runtime)["overall"] in ("healthy", "warnings")


def test_repair_of_a_duplicate_with_a_grandparent_returns_the_other_children_to_the_frontier(runtime):
    children = make_duplicates(runtime)
    second = max(n.node_id for n in runtime.dag.frontier(KEY.session_id))
    ids = runtime.store.append(KEY, [user("later one"), user("later two")])
    with runtime.db.transaction() as conn:
        leaf = runtime.dag.add_leaf(KEY.session_id, "later leaf", ids, token_count=5, source_token_count=10,
                                    earliest_at=9.0, latest_at=9.5, conn=conn)
        runtime.dag.add_condensed(KEY.session_id, 2, "grandparent", [second, leaf], token_count=5,
                                  source_token_count=50, earliest_at=1.0, latest_at=9.5, conn=conn)
    maintenance.repair_fts(runtime, have_backup=True)
    frontier = runtime.dag.frontier(KEY.session_id)
    assert sorted(n.summary for n in frontier) == ["first parent", "later leaf"]
    covered = sorted(s for n in frontier for s in runtime.dag.descendant_store_ids(n.node_id))
    assert len(covered) == len(set(covered)) == 10
    assert runtime.dag.multi_parent_nodes(runtime.db.read()) == [] and children
