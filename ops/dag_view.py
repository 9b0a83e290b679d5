"""A picture of one session's summary DAG: a text tree for the terminal, Mermaid for docs.

``build_view`` reads the DAG (frontier, children, leaf sources) into plain dicts: per node its
depth, summary and source tokens, time span and the raw store-id range beneath it. Large
DAGs are folded to about ``max_nodes`` shown nodes (long child lists keep their ends) and the
view says what was folded. ``render_text`` and ``render_mermaid`` are pure. Read-only.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..toolkit import iso
from . import queries

if TYPE_CHECKING:
    from ..dag import NodeRow
    from ..runtime import Runtime

MAX_NODES = 40      # nodes drawn before the rest is folded
MAX_CHILDREN = 8    # a longer child list shows its first and last few and folds the middle
KEEP_HEAD, KEEP_TAIL = 4, 3


def default_session(runtime: Runtime) -> str:
    """The most recently active session with summary nodes, or "" when none has any."""
    prints = [f for f in queries.footprints(runtime.db.read()) if f.nodes]
    prints.sort(key=lambda f: (f.last_at or 0, f.session_id), reverse=True)
    return prints[0].session_id if prints else ""


def build_view(runtime: Runtime, session_id: str, max_nodes: int = MAX_NODES) -> dict[str, Any]:
    """The session's DAG as nested dicts, folded to about ``max_nodes`` drawn nodes."""
    dag = runtime.dag
    nodes: dict[int, NodeRow] = {n.node_id: n for n in dag.visible(session_id)}
    sources: dict[int, list[int]] = {}

    def node(node_id: int) -> NodeRow | None:
        if node_id not in nodes and (row := dag.get(node_id)) is not None:
            nodes[node_id] = row
        return nodes.get(node_id)

    def srcs(n: NodeRow) -> list[int]:
        if n.node_id not in sources:
            sources[n.node_id] = dag.source_ids(n)
        return sources[n.node_id]

    spans: dict[int, tuple[int, int, int]] = {}  # node -> (first store id, last store id, raw messages)

    def span(n: NodeRow) -> tuple[int, int, int]:
        if n.node_id in spans:
            return spans[n.node_id]
        if n.depth == 0:
            ids = srcs(n)
            out = (min(ids), max(ids), len(ids)) if ids else (0, 0, 0)
        else:
            parts = [span(c) for c in (node(i) for i in srcs(n)) if c is not None]
            parts = [p for p in parts if p[2]]
            out = (min(p[0] for p in parts), max(p[1] for p in parts), sum(p[2] for p in parts)) if parts \
                else (0, 0, 0)
        spans[n.node_id] = out
        return out

    shown = 0
    folded_total = 0

    def fold(rows: list[NodeRow]) -> dict[str, Any]:
        nonlocal folded_total
        count = sum(1 + _subtree_size(r, node, srcs) for r in rows)
        folded_total += count
        ranges = [span(r) for r in rows if span(r)[2]]
        return {"folded": count, "node_ids": [rows[0].node_id, rows[-1].node_id],
                "depths": sorted({r.depth for r in rows}),
                "messages": [min(p[0] for p in ranges), max(p[1] for p in ranges)] if ranges else None,
                "message_count": sum(p[2] for p in ranges)}

    def describe(n: NodeRow) -> dict[str, Any]:
        nonlocal shown
        shown += 1
        first, last, count = span(n)
        item: dict[str, Any] = {"node_id": n.node_id, "depth": n.depth, "tokens": n.token_count,
                                "source_tokens": n.source_token_count, "level": n.level,
                                "from": iso(n.earliest_at), "to": iso(n.latest_at),
                                "messages": [first, last] if count else None, "message_count": count,
                                "carried": n.session_id != session_id}
        if n.depth == 0:
            return item
        kids = [c for c in (node(i) for i in srcs(n)) if c is not None]
        children: list[dict[str, Any]] = []
        head, middle, tail = kids, [], []
        if len(kids) > MAX_CHILDREN:
            head, middle, tail = kids[:KEEP_HEAD], kids[KEEP_HEAD:-KEEP_TAIL], kids[-KEEP_TAIL:]
        for group in (head, middle, tail):
            if group is middle:
                if middle:
                    children.append(fold(middle))
                continue
            for i, c in enumerate(group):
                if shown >= max_nodes:
                    children.append(fold(group[i:]))
                    break
                children.append(describe(c))
        item["children"] = children
        return item

    roots = dag.frontier(session_id)
    trees: list[dict[str, Any]] = []
    for i, r in enumerate(roots):
        if shown >= max_nodes:
            trees.append(fold(roots[i:]))
            break
        trees.append(describe(r))
    all_nodes = list(nodes.values())
    times = [t for n in all_nodes for t in (n.earliest_at, n.latest_at) if t is not None]
    frontier_id = runtime.store.frontier_store_id(session_id)
    stats = runtime.store.stats(session_id)
    tail_count = runtime.store.count_after(session_id, frontier_id)
    return {"session_id": session_id, "depth": max((n.depth for n in all_nodes), default=-1) + 1,
            "nodes": len(all_nodes), "tokens": sum(n.token_count for n in all_nodes),
            "source_tokens": sum(r.source_token_count for r in roots),
            "from": iso(min(times)) if times else None, "to": iso(max(times)) if times else None,
            "raw_messages": stats["messages"], "unsummarised_tail": tail_count,
            "shown_nodes": shown, "folded_nodes": folded_total, "roots": trees}


def _subtree_size(n: NodeRow, node: Any, srcs: Any) -> int:
    """Nodes beneath ``n`` (not counting it)."""
    if n.depth == 0:
        return 0
    total = 0
    for i in srcs(n):
        c = node(i)
        if c is not None:
            total += 1 + _subtree_size(c, node, srcs)
    return total


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
    lines = [f"session {view['session_id']}: depth {view['depth']}, {view['nodes']} nodes,"
             f" {view['tokens']} summary tokens over {view['source_tokens']} source tokens",
             f"time span: {view['from'] or '-'} .. {view['to'] or '-'}; {view['raw_messages']} raw messages,"
             f" {view['unsummarised_tail']} after the frontier (not summarised yet)"]
    return lines


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
    counter = [0]

    def ident(item: Mapping[str, Any]) -> str:
        if "folded" in item:
            counter[0] += 1
            return f"f{counter[0]}"
        return f"n{item['node_id']}"

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
