"""The DAG drawing (ops/dag_view.py) on a really compacted session: lineage, folding, Mermaid, CLI."""
from __future__ import annotations

import io
import json

import pytest
from conftest import make_config, make_engine
from simulate import HostLoop, build_conversation
from test_command import shippers_finish  # noqa: F401  (autouse: background shipping ends with the test)
from test_compaction import fake_model

from hermes_trove import command
from hermes_trove.dag import NodeRow
from hermes_trove.ops import dag_view
from hermes_trove.runtime import build_runtime
from hermes_trove.store import SessionKey

BACKENDS = ("sqlite", "postgresql")


@pytest.fixture(scope="module")
def compacted(tmp_path_factory):
    """160 turns through the real engine: leaves condensed up to depth 3."""
    home = tmp_path_factory.mktemp("dag")
    rt = build_runtime(make_config(home, leaf_chunk_tokens=4000))
    eng = make_engine(rt, fake_model(), context_length=64000)
    loop = HostLoop(eng)
    for turn in build_conversation(160, seed=3):
        loop.run_turn(turn)
    assert max(rt.dag.depth_stats("s1")) >= 2
    return rt


def walk(items):
    for item in items:
        yield item
        yield from walk(item.get("children") or [])


def test_every_drawn_node_names_the_raw_range_its_lineage_reaches(compacted):
    view = dag_view.build_view(compacted, "s1", max_nodes=10 ** 6)
    drawn = [i for i in walk(view["roots"]) if "folded" not in i]
    assert view["folded_nodes"] == 0 and len(drawn) == view["shown_nodes"]
    for item in drawn:
        ids = compacted.dag.descendant_store_ids(item["node_id"])
        assert item["messages"] == [ids[0], ids[-1]] and item["message_count"] == len(ids)
    stats = compacted.dag.depth_stats("s1")
    assert view["depth"] == max(stats) + 1 and view["nodes"] == sum(s["count"] for s in stats.values())
    assert view["from"] and view["to"] and view["from"] <= view["to"]


def test_a_large_dag_is_folded_to_a_readable_size_with_a_note(compacted):
    view = dag_view.build_view(compacted, "s1", max_nodes=12)
    assert view["shown_nodes"] <= 13 and view["folded_nodes"] == view["nodes"] - view["shown_nodes"]
    text = dag_view.render_text(view)
    assert len(text.splitlines()) < 30
    assert "node(s) folded" in text and f"note: {view['folded_nodes']} of {view['nodes']} nodes folded" in text
    depth = max(compacted.dag.depth_stats("s1"))
    assert text.splitlines()[2].startswith(f"d{depth} #")  # the deepest summary is the first root


def test_mermaid_has_one_box_per_drawn_node_and_an_edge_per_child(compacted):
    view = dag_view.build_view(compacted, "s1")
    text = dag_view.render_mermaid(view)
    lines = text.splitlines()
    assert lines[0] == "graph TD"
    boxes = [ln for ln in lines if '["' in ln]
    edges = [ln for ln in lines if "-->" in ln]
    drawn = list(walk(view["roots"]))
    assert len([b for b in boxes if not b.strip().startswith("tail")]) == len(drawn)
    assert len(edges) == len(drawn) - len(view["roots"])


def test_hermes_trove_dag_and_slash_trove_dag(compacted):
    out = io.StringIO()
    args = command.argparse.Namespace(trove_words=["dag"], trove_db=None, trove_json=False, trove_session="s1",
                                      trove_format="mermaid")
    assert command.execute(args, compacted, out=out) == 0
    assert out.getvalue().startswith("graph TD")
    out = io.StringIO()
    args.trove_format, args.trove_json = "text", True
    assert command.execute(args, compacted, out=out) == 0
    assert json.loads(out.getvalue())["session_id"] == "s1"
    text = command.make_handler(compacted)("dag")  # no bound session: the most recent one with nodes
    assert text.startswith("session s1: depth ")
    assert command.make_handler(compacted)("dag mermaid").startswith("graph TD")


def test_a_session_without_summaries_draws_an_honest_empty_picture(tmp_path):
    rt = build_runtime(make_config(tmp_path))
    view = dag_view.build_view(rt, "nobody")
    assert view["nodes"] == 0 and "nothing has been compacted" in dag_view.render_text(view)
    assert command.make_handler(rt)("dag") == "no session has summary nodes yet"


def test_summaries_without_a_lifecycle_frontier_are_not_counted_as_unsummarised(tmp_path):
    """An imported session (lossless-claw with --include-summaries) has leaves but frontier 0."""
    rt = build_runtime(make_config(tmp_path))
    key = SessionKey("openclaw-trove:agent:a:s", platform="openclaw")
    ids = rt.store.append(key, [{"role": "user" if i % 2 == 0 else "assistant", "content": f"imported {i}"}
                                for i in range(6)])
    rt.dag.add_leaf(key.session_id, "an imported summary", ids[:4], token_count=3, source_token_count=12,
                    earliest_at=None, latest_at=None)
    assert rt.store.frontier_store_id(key.session_id) == 0
    view = dag_view.build_view(rt, key.session_id)
    assert view["raw_messages"] == 6 and view["unsummarised_tail"] == 2, view
    assert "6 raw messages, 2 after the frontier" in dag_view.render_text(view)


def node(node_id, depth, session="s1", at=100.0):
    return NodeRow(node_id, session, depth, f"summary {node_id}", 10, 100, at, at + 1, "normal", "", "", at)


def test_plan_view_keeps_the_ends_of_a_long_child_list_and_folds_its_middle():
    leaves = [node(i, 0) for i in range(1, 13)]
    root = node(100, 1)
    graph = dag_view.Graph([root], {n.node_id: n for n in [root, *leaves]},
                           {100: [n.node_id for n in leaves], **{n.node_id: [n.node_id * 10] for n in leaves}})
    view = dag_view.plan_view(graph, "s1", max_nodes=40, raw_messages=12, tail=3)
    kids = view["roots"][0]["children"]
    assert [k.get("node_id") for k in kids] == [1, 2, 3, 4, None, 10, 11, 12]
    assert kids[4] == {"folded": 5, "node_ids": [5, 9], "depths": [0], "messages": [50, 90], "message_count": 5}
    assert view["roots"][0]["messages"] == [10, 120] and view["roots"][0]["message_count"] == 12
    assert (view["shown_nodes"], view["folded_nodes"], view["nodes"], view["depth"]) == (8, 5, 13, 2)
    assert view["unsummarised_tail"] == 3 and view["raw_messages"] == 12


def test_plan_view_folds_whatever_is_left_once_max_nodes_are_drawn():
    roots = [node(i, 0, session="other" if i == 2 else "s1") for i in (1, 2, 3)]
    graph = dag_view.Graph(roots, {n.node_id: n for n in roots}, {1: [], 2: [7], 3: [8, 9]})
    view = dag_view.plan_view(graph, "s1", max_nodes=2, raw_messages=3, tail=0)
    assert [r.get("node_id") for r in view["roots"]] == [1, 2, None]
    assert view["roots"][0]["messages"] is None and view["roots"][1]["carried"] is True
    assert view["roots"][2] == {"folded": 1, "node_ids": [3, 3], "depths": [0], "messages": [8, 9],
                                "message_count": 2}


def test_mermaid_numbers_each_folded_box_in_drawing_order():
    fold = {"folded": 3, "node_ids": [5, 7], "depths": [0], "messages": [1, 9], "message_count": 9}
    root = {"node_id": 9, "depth": 1, "tokens": 50, "source_tokens": 200, "messages": [1, 18], "message_count": 18,
            "children": [dict(fold), dict(fold)]}
    view = {"session_id": "s", "depth": 2, "nodes": 7, "tokens": 50, "source_tokens": 200, "from": None, "to": None,
            "raw_messages": 18, "unsummarised_tail": 0, "shown_nodes": 1, "folded_nodes": 6, "roots": [root]}
    lines = dag_view.render_mermaid(view).splitlines()
    assert lines[3:7] == ['  f1["3 nodes folded<br/>msgs 1-9 (9)"]', "  n9 --> f1",
                          '  f2["3 nodes folded<br/>msgs 1-9 (9)"]', "  n9 --> f2"]
