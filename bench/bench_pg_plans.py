#!/usr/bin/env python3
"""The server's generic plan beside its custom plans for the BM25 message statement (``pgtext.search_messages``).

psycopg prepares a statement from its sixth call, and the server may then keep one generic plan,
blind to the words. This fills an archive (``bench_pg.fill_archive``), refreshes the search
statistics, then for common, rare and mixed two-word queries runs the statement ``trove_recall``
issues (newest 5,000 candidates and the rare words' older matches, 40 rows, no snippets) as
``EXPLAIN (ANALYZE) EXECUTE`` of a named prepared statement under ``plan_cache_mode``
``force_custom_plan`` and ``force_generic_plan`` in turn. Prints, per query kind and mode, the
server's median planning plus execution time, its planning time, and whether the generic plan's
nodes are the custom plan's. Figures only; the server's pg_prepared_statements counts of generic
and custom plans after ordinary calls are printed too.

    python bench/bench_pg_plans.py [--size 30000] [--repeat 20] [--url postgresql://...]
"""
from __future__ import annotations

import argparse
import difflib
import os
import random
import statistics
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_pg import (  # noqa: E402
    DEFAULT_URL,
    create_schema,
    drop_schemas,
    fill_archive,
    make_runtime,
    setup_server,
    vocabulary,
)


def nodes(plan: dict[str, Any]) -> list[str]:
    """The plan's node types (and index names), depth first."""
    out = [plan["Node Type"] + (f" {plan['Index Name']}" if "Index Name" in plan else "")]
    for child in plan.get("Plans", []):
        out += nodes(child)
    return out


def with_dollars(sql: str) -> str:
    """A psycopg statement (``%s``, ``%%``) as PREPARE takes it (``$1`` ...)."""
    parts = sql.split("%s")
    return "".join(p + (f"${k + 1}" if k + 1 < len(parts) else "") for k, p in enumerate(parts)).replace("%%", "%")


def literal_arrays(params: list[Any]) -> list[Any]:
    """Boolean lists as array text: the client-side binding of EXECUTE would send them as integers."""
    return ["{" + ",".join("t" if x else "f" for x in p) + "}"
            if isinstance(p, list) and p and all(isinstance(x, bool) for x in p) else p for p in params]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("TROVE_TEST_DATABASE_URL") or DEFAULT_URL)
    parser.add_argument("--size", type=int, default=30000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()

    import psycopg

    from hermes_trove import pgdb, pgtext
    from hermes_trove.fulltext import build_match

    setup_server(args.url)
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    url = create_schema(args.url, schema)
    try:
        runtime = make_runtime(Path(tempfile.mkdtemp()), url)
        fill_archive(runtime, args.size)
        conn = runtime.db.read()
        pgtext.refresh_stats(conn)
        words, _ = vocabulary(random.Random(7))
        pick = random.Random(5)
        make = {"common": lambda: pick.choice(words[:20]), "rare": lambda: pick.choice(words[1500:]),
                "common+rare": lambda: f"{pick.choice(words[:20])} {pick.choice(words[1500:])}"}
        for i in range(12):  # ordinary calls: prepared by the driver from the sixth
            runtime.store.search(build_match(make["rare" if i % 2 else "common"]()).expression, limit=40,
                                 snippets=False, max_candidates=5000)
        for row in conn.execute("SELECT generic_plans, custom_plans FROM pg_prepared_statements"
                                " WHERE statement LIKE 'WITH ph AS MATERIALIZED%'").fetchall():
            print(f"after 12 ordinary calls: {row[0]} generic plans, {row[1]} custom plans")
        total: dict[tuple[str, str], list[float]] = {}
        planning: dict[tuple[str, str], list[float]] = {}
        shapes: dict[tuple[str, str], list[str]] = {}
        client = psycopg.ClientCursor(conn.raw)
        for i in range(args.repeat):
            for kind, word in make.items():
                statement = pgtext.message_statement(build_match(word()).expression, [], [], 40, 5000)
                assert statement is not None
                sql, params = statement
                for mode in ("custom", "generic") if i % 2 else ("generic", "custom"):
                    conn.raw.execute(f"SET plan_cache_mode = force_{mode}_plan", prepare=False)
                    if conn.raw.execute("SELECT 1 FROM pg_prepared_statements WHERE name = 'trove_bench'",
                                        prepare=False).fetchone():
                        conn.raw.execute("DEALLOCATE trove_bench", prepare=False)
                    conn.raw.execute(f"PREPARE trove_bench AS {with_dollars(pgdb.translated(sql))}", prepare=False)
                    types = conn.raw.execute("SELECT parameter_types::text[] FROM pg_prepared_statements"
                                             " WHERE name = 'trove_bench'", prepare=False).fetchone()[0]
                    marks = ", ".join(f"%s::{t}" for t in types)
                    plan = client.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE trove_bench({marks})",
                                          literal_arrays(list(params))).fetchone()[0][0]
                    total.setdefault((kind, mode), []).append(plan["Planning Time"] + plan["Execution Time"])
                    planning.setdefault((kind, mode), []).append(plan["Planning Time"])
                    shapes[(kind, mode)] = nodes(plan["Plan"])
        conn.raw.execute("SET plan_cache_mode = auto", prepare=False)
        print(f"\n{args.size:,} stored messages, {args.repeat} queries a kind (server time, ms)")
        print(f"{'query':<12} {'plan':<8} {'median':>8} {'p90':>8} {'planning':>9}")
        for (kind, mode), values in total.items():
            values = sorted(values)
            print(f"{kind:<12} {mode:<8} {statistics.median(values):>8.2f} {values[int(0.9 * len(values))]:>8.2f}"
                  f" {statistics.median(planning[(kind, mode)]):>9.2f}")
        for kind in make:
            diff = [d for d in difflib.ndiff(shapes[(kind, "custom")], shapes[(kind, "generic")]) if d[0] in "+-"]
            print(f"{kind}: generic plan's nodes {'the same' if not diff else 'differ: ' + ', '.join(diff)}")
    finally:
        pgdb.close_connections()
        drop_schemas(args.url, [schema])
    return 0


if __name__ == "__main__":
    sys.exit(main())
