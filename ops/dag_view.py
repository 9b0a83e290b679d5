"""A picture of one session's summary DAG: a text tree for the terminal, Mermaid for docs.

``read_graph`` loads the DAG beneath the frontier; the pure ``plan_view`` turns it into plain
dicts, folded to about ``max_nodes`` drawn nodes (long child lists keep their ends) and saying
what was folded; ``render_text`` and ``render_mermaid`` are pure. Read-only.
"""
from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..toolkit import iso
from . import queries

if TYPE_CHECKING:
    from ..dag import NodeRow, SummaryDAG
    from ..runtime import Runtime

MAX_NODES = 40      # nodes drawn before the rest is folded
MAX_CHILDREN = 8    # a longer child list shows its first and last few and folds the middle
KEEP_HEAD, KEEP_TAIL = 4, 3


def default_session(runtime: Runtime) -> str:
    """The most recently active session with summary nodes, or "" when none has any."""
    newest = max((f for f in queries.footprints(queries.settled(runtime)) if f.nodes),
                 key=lambda f: (f.last_at or 0, f.session_id), default=None)
    return newest.session_id if newest else ""


@dataclass(frozen=True)
class Graph:
    """What ``read_graph`` loads: the frontier, the nodes beneath it, each node's source ids."""

    roots: list[NodeRow]
    nodes: dict[int, NodeRow]        # the session's visible nodes and every node reached from the roots
    sources: dict[int, list[int]]    # node -> child node ids (depth > 0) or raw store ids (depth 0)

    def children(self, n: NodeRow) -> list[NodeRow]:
        ids = self.sources.get(n.node_id, []) if n.depth else []
        return [self.nodes[i] for i in ids if i in self.nodes]


def read_graph(dag: SummaryDAG, session_id: str) -> Graph:
    """Every node reachable from the session's frontier, with its sources (read-only)."""
    nodes: dict[int, NodeRow] = {n.node_id: n for n in dag.visible(session_id)}
    roots = dag.frontier(session_id)
    sources: dict[int, list[int]] = {}
    stack = list(roots)
    while stack:
        n = stack.pop()
        if n.node_id in sources:
            continue
        sources[n.node_id] = dag.source_ids(n)
        for i in sources[n.node_id] if n.depth else ():
            if i not in nodes and (row := dag.get(i)) is not None:
                nodes[i] = row
            if i in nodes:
                stack.append(nodes[i])
    return Graph(roots, nodes, sources)


def build_view(runtime: Runtime, session_id: str, max_nodes: int = MAX_NODES) -> dict[str, Any]:
    """The session's DAG as nested dicts, folded to about ``max_nodes`` drawn nodes."""
    graph = read_graph(runtime.dag, session_id)
    store = runtime.store
    # An imported session's summaries come with no lifecycle frontier: what they cover is summarised all the same.
    covered = max(store.frontier_store_id(session_id), runtime.dag.highest_covered_store_id(session_id))
    tail = store.count_after(session_id, covered)
    return plan_view(graph, session_id, max_nodes, store.stats(session_id)["messages"], tail)


def plan_view(graph: Graph, session_id: str, max_nodes: int, raw_messages: int, tail: int) -> dict[str, Any]:
    """Pure: the view of ``graph`` with its totals, the raw message count and the unsummarised tail."""
    drawing = _Drawing(graph, session_id, max_nodes)
    trees = drawing.draw(graph.roots)
    all_nodes = list(graph.nodes.values())
    times = [t for n in all_nodes for t in (n.earliest_at, n.latest_at) if t is not None]
    return {"session_id": session_id, "depth": max((n.depth for n in all_nodes), default=-1) + 1,
            "nodes": len(all_nodes), "tokens": sum(n.token_count for n in all_nodes),
            "source_tokens": sum(r.source_token_count for r in graph.roots),
            "from": iso(min(times)) if times else None, "to": iso(max(times)) if times else None,
            "raw_messages": raw_messages, "unsummarised_tail": tail,
            "shown_nodes": drawing.shown, "folded_nodes": drawing.folded, "roots": trees}


def _merged(spans: list[tuple[int, int, int]]) -> tuple[int, int, int]:
    """One (first store id, last store id, count) over the non-empty ``spans``."""
    parts = [p for p in spans if p[2]]
    return (min(p[0] for p in parts), max(p[1] for p in parts), sum(p[2] for p in parts)) if parts else (0, 0, 0)


class _Drawing:
    """Draws nodes in order until ``max_nodes`` are shown, then folds the rest, counting both."""

    def __init__(self, graph: Graph, session_id: str, max_nodes: int):
        self.graph, self.session_id, self.max_nodes = graph, session_id, max_nodes
        self.shown = self.folded = 0
        self.spans: dict[int, tuple[int, int, int]] = {}

    def span(self, n: NodeRow) -> tuple[int, int, int]:
        """(first store id, last store id, raw messages) beneath ``n``."""
        if n.node_id not in self.spans:
            ids = self.graph.sources.get(n.node_id, [])
            if n.depth:
                self.spans[n.node_id] = _merged([self.span(c) for c in self.graph.children(n)])
            else:
                self.spans[n.node_id] = (min(ids), max(ids), len(ids)) if ids else (0, 0, 0)
        return self.spans[n.node_id]

    def size(self, n: NodeRow) -> int:
        """Nodes beneath ``n`` (not counting it)."""
        return sum(1 + self.size(c) for c in self.graph.children(n))

    def draw(self, rows: list[NodeRow]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for i, n in enumerate(rows):
            if self.shown >= self.max_nodes:
                out.append(self.fold(rows[i:]))
                break
            out.append(self.describe(n))
        return out

    def fold(self, rows: list[NodeRow]) -> dict[str, Any]:
        count = sum(1 + self.size(r) for r in rows)
        self.folded += count
        first, last, messages = _merged([self.span(r) for r in rows])
        return {"folded": count, "node_ids": [rows[0].node_id, rows[-1].node_id],
                "depths": sorted({r.depth for r in rows}),
                "messages": [first, last] if messages else None, "message_count": messages}

    def describe(self, n: NodeRow) -> dict[str, Any]:
        self.shown += 1
        first, last, count = self.span(n)
        item: dict[str, Any] = {"node_id": n.node_id, "depth": n.depth, "tokens": n.token_count,
                                "source_tokens": n.source_token_count, "level": n.level,
                                "from": iso(n.earliest_at), "to": iso(n.latest_at),
                                "messages": [first, last] if count else None, "message_count": count,
                                "carried": n.session_id != self.session_id}
        if n.depth == 0:
            return item
        kids = self.graph.children(n)
        if len(kids) <= MAX_CHILDREN:
            item["children"] = self.draw(kids)
        else:  # the first and last few stay; the middle folds
            middle = kids[KEEP_HEAD:-KEEP_TAIL]
            item["children"] = self.draw(kids[:KEEP_HEAD]) + [self.fold(middle)] + self.draw(kids[-KEEP_TAIL:])
        return item


def _msgs(item: Mapping[str, Any]) -> str:
    r = item.get("messages")
    return f"msgs {r[0]}-{r[1]} ({item.get('message_count', 0)})" if r else "no messages"


def _label(item: Mapping[str, Any]) -> str:
    if "folded" in item:
        a, b = item["node_ids"]
        return (f"... {item['folded']} node(s) folded (#{a}..#{b}, d{'/d'.join(map(str, item['depths']))},"
                f" {_msgs(item)})")
    span = (f"{item['from']}" if item.get("from") == item.get("to") else f"{item['from']} .. {item['to']}") \
        if item.get("from") else "no time"
    carried = " carried" if item.get("carried") else ""
    return (f"d{item['depth']} #{item['node_id']}{carried}  {item['tokens']} tok <- {item['source_tokens']} src"
            f"  {span}  {_msgs(item)}")


def header(view: Mapping[str, Any]) -> list[str]:
    return [f"session {view['session_id']}: depth {view['depth']}, {view['nodes']} nodes,"
            f" {view['tokens']} summary tokens over {view['source_tokens']} source tokens",
            f"time span: {view['from'] or '-'} .. {view['to'] or '-'}; {view['raw_messages']} raw messages,"
            f" {view['unsummarised_tail']} after the frontier (not summarised yet)"]


def render_text(view: Mapping[str, Any]) -> str:
    """The DAG as an indented tree, deepest summaries at the roots."""
    if not view["nodes"]:
        return "\n".join(header(view) + ["(no summary nodes yet: nothing has been compacted)"])
    lines = header(view)

    def walk(item: Mapping[str, Any], prefix: str, last: bool, root: bool) -> None:
        lines.append(("" if root else prefix + ("└── " if last else "├── ")) + _label(item))
        kids = item.get("children") or []
        child_prefix = "" if root else prefix + ("    " if last else "│   ")
        for i, c in enumerate(kids):
            walk(c, child_prefix, i == len(kids) - 1, False)

    for item in view["roots"]:
        walk(item, "", True, True)
    if view["folded_nodes"]:
        lines.append(f"note: {view['folded_nodes']} of {view['nodes']} nodes folded to keep this readable"
                     f" ({view['shown_nodes']} drawn; each fold names its node ids and message range)")
    return "\n".join(lines)


def render_mermaid(view: Mapping[str, Any]) -> str:
    """The DAG as a Mermaid ``graph TD`` (paste into a Markdown ``mermaid`` block)."""
    lines = ["graph TD", f"  %% {header(view)[0]}"]
    folds = itertools.count(1)

    def ident(item: Mapping[str, Any]) -> str:
        return f"f{next(folds)}" if "folded" in item else f"n{item['node_id']}"

    def text(item: Mapping[str, Any]) -> str:
        if "folded" in item:
            body = f"{item['folded']} nodes folded<br/>{_msgs(item)}"
        else:
            body = (f"d{item['depth']} #{item['node_id']}<br/>{item['tokens']} tok / {item['source_tokens']} src"
                    f"<br/>{_msgs(item)}")
        return body.replace('"', "'")

    def walk(item: Mapping[str, Any]) -> str:
        me = ident(item)
        lines.append(f'  {me}["{text(item)}"]')
        for c in item.get("children") or []:
            lines.append(f"  {me} --> {walk(c)}")
        return me

    for item in view["roots"]:
        walk(item)
    if view["unsummarised_tail"]:
        lines.append(f'  tail["{view["unsummarised_tail"]} raw messages not summarised yet"]')
    if view["folded_nodes"]:
        lines.append(f"  %% {view['folded_nodes']} of {view['nodes']} nodes folded")
    return "\n".join(lines)
