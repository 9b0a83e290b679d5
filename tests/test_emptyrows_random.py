"""The empty-row tidy-up's two statements (SQLite's, the server's) delete the same rows on random session graphs.

Each graph mixes chains, resume loops, self-loops, rows naming a session that is gone, stored rows (a
message, a summary of their own, a carried one), rows too young by creation or by update, spared rows
and the one-row form (``only``). Both stores hold the same rows; what each leaves must match, and must
match the rule read forwards: a row that stays keeps every empty row it reaches through the rows it
follows, as long as those are candidates."""
from __future__ import annotations

import random

from conftest import make_config

from hermes_trove.runtime import build_runtime

BACKENDS = ("sqlite", "postgresql")  # on "sqlite" the SQLite statement alone against the rule
OLD, CUT, YOUNG = 1000.0, 2000.0, 3000.0


def random_graph(rng: random.Random, n: int, graph: int) -> list[dict[str, object]]:
    ids = [f"g{graph}-{i:02d}" for i in range(n)]  # the graph's own ids: stored rows of earlier graphs stay put
    rows = []
    for sid in ids:
        link = rng.random()
        previous = (None if link < 0.3 else sid if link < 0.4 else "gone" if link < 0.45 else rng.choice(ids))
        kind = rng.choices(["empty", "message", "summary", "carried"], [7, 1, 1, 1])[0]
        age = rng.random()
        created, updated = (OLD, OLD) if age < 0.75 else (YOUNG, YOUNG) if age < 0.85 else (OLD, YOUNG)
        rows.append({"id": sid, "previous": previous, "kind": kind, "created": created, "updated": updated})
    return rows


def load(runtime, rows: list[dict[str, object]]) -> None:
    with runtime.db.transaction() as c:
        c.execute("DELETE FROM sessions")
        c.executemany("INSERT INTO sessions(session_id, previous_session_id, created_at, updated_at) VALUES (?,?,?,?)",
                      [(r["id"], r["previous"], r["created"], r["updated"]) for r in rows])
        for r in rows:
            if r["kind"] == "message":
                c.execute("INSERT INTO messages(session_id, role, content, created_at, ingested_at)"
                          " VALUES (?, 'user', 'hello', ?, ?)", (r["id"], OLD, OLD))
            elif r["kind"] in ("summary", "carried"):
                owner = r["id"] if r["kind"] == "summary" else "elsewhere"
                c.execute("INSERT INTO summary_nodes(session_id, depth, summary, created_at) VALUES (?, 0, 's', ?)",
                          (owner, OLD))
                if r["kind"] == "carried":
                    node = c.execute("SELECT MAX(node_id) FROM summary_nodes").fetchone()[0]
                    c.execute("INSERT INTO carried_nodes(session_id, node_id, from_session_id, carried_at)"
                              " VALUES (?, ?, 'elsewhere', ?)", (r["id"], node, OLD))


def expected_left(rows: list[dict[str, object]], keep: set[str], only: str) -> set[str]:
    """The rule read forwards: from every row that is no candidate, follow previous rows while they are candidates."""
    by_id = {r["id"]: r for r in rows}
    candidates = {r["id"] for r in rows if r["kind"] == "empty" and r["created"] <= CUT and r["updated"] <= CUT
                  and r["id"] not in keep and (not only or r["id"] == only)}
    needed: set[object] = set()
    for r in rows:
        if r["id"] in candidates:
            continue
        step = r["previous"]
        while step in candidates and step not in needed:
            needed.add(step)
            step = by_id[step]["previous"]
    return {str(r["id"]) for r in rows} - (candidates - needed)


def left(runtime) -> set[str]:
    return {str(r[0]) for r in runtime.db.read().execute("SELECT session_id FROM sessions")}


def test_both_statements_delete_the_same_rows_as_the_rule_on_random_session_graphs(tmp_path, backend):
    lite = build_runtime(make_config(tmp_path / "lite", database_url=""))
    stores = [lite] + ([build_runtime(make_config(tmp_path / "server"))] if backend == "postgresql" else [])
    assert [r.db.kind == "sqlite" for r in stores] == [True, False][:len(stores)]
    rng = random.Random(20261205)
    deleted_somewhere = kept_by_a_follower = 0
    for graph in range(60):
        rows = random_graph(rng, rng.randint(2, 24), graph)
        ids = [str(r["id"]) for r in rows]
        keep = set(rng.sample(ids, rng.randint(0, 2)))
        only = rng.choice(ids) if graph % 4 == 3 else ""
        want = expected_left(rows, keep, only)
        for runtime in stores:
            load(runtime, rows)
            count = runtime.store.delete_empty_sessions(CUT, keep=sorted(keep), only=only)
            assert (left(runtime), count) == (want, len(rows) - len(want)), (runtime.db.kind, graph, rows, keep, only)
        deleted_somewhere += len(rows) > len(want)
        kept_by_a_follower += any(r["kind"] == "empty" and r["created"] <= CUT and r["updated"] <= CUT
                                  and r["id"] not in keep and r["id"] in want and not only for r in rows)
    assert deleted_somewhere > 20 and kept_by_a_follower > 10  # the graphs exercise both outcomes
