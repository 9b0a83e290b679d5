#!/usr/bin/env python3
"""Raw full-text search on PostgreSQL (pgtext: BM25 in SQL) beside SQLite (FTS5 bm25) on LoCoMo.

Each LoCoMo conversation is stored as one session (one message per turn, "Speaker: text") in a
temporary SQLite file and in a new PostgreSQL schema through ``MessageStore``; the server's
document frequencies are refreshed once (``pgtext.refresh_stats``, what the background job does).
Every question of categories 1-4 becomes ``build_match(question).expression`` and is searched with
``MessageStore.search`` (limit 10) in its own session and across the archive. Prints turn-level
R@10 for both backends, how often their top 1 / top 3 agree, the mean top-10 overlap, and search
latency p50/p95 (snippets on). ``--pad N`` adds N copies of turns from other conversations as
extra sessions, for latency at a larger size. Figures only, no assertions.

    python bench/bench_pg_search.py [--data ../shared/data/locomo-dev.json] [--url postgresql://...] [--pad 0]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _locomo import DEFAULT_DATA, evidence_ids, load_dev_split, turns  # noqa: E402

DEFAULT_URL = "postgresql://postgres@127.0.0.1:55432/trove_test"


def messages(rows: list[tuple[str, dict[str, Any], float | None]]) -> list[dict[str, Any]]:
    out = []
    for role, turn, ts in rows:
        msg: dict[str, Any] = {"role": role, "content": f"{turn['speaker']}: {turn['text']}"}
        if ts is not None:
            msg["timestamp"] = ts
        out.append(msg)
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))] if ordered else 0.0


def schema_url(url: str, schema: str) -> str:
    joiner = "&" if "?" in url else "?"
    return f"{url}{joiner}options={quote(f'-csearch_path={schema},public', safe=',')}"


def run(data: list[dict[str, Any]], url: str, pad: int, limit: int) -> int:
    try:
        import psycopg
    except ImportError:
        print("bench_pg_search: skipped, psycopg is not installed (pip install -e '.[postgres]')")
        return 0

    from hermes_trove import pgtext
    from hermes_trove.db import Database
    from hermes_trove.fulltext import build_match
    from hermes_trove.pgdb import PgDatabase
    from hermes_trove.store import MessageStore, SessionKey

    schema = f"bench_pgtext_{uuid.uuid4().hex[:12]}"
    try:
        admin = psycopg.connect(url, autocommit=True, connect_timeout=5)
    except psycopg.Error as exc:
        print(f"bench_pg_search: skipped, no PostgreSQL server at {url}: {str(exc).strip().splitlines()[0]}")
        return 0
    admin.execute("CREATE EXTENSION IF NOT EXISTS unaccent SCHEMA public")
    admin.execute(f'CREATE SCHEMA "{schema}"')
    tmp = tempfile.mkdtemp(prefix="trove-bench-pgsearch-")
    try:
        lite = MessageStore(Database(f"{tmp}/trove.db"))
        server_db = PgDatabase(schema_url(url, schema))
        server = MessageStore(server_db)
        gold_ids: dict[str, dict[int, str]] = {}
        load = {"sqlite": 0.0, "postgresql": 0.0}
        for sample in data:
            sid = f"locomo-{sample['sample_id']}"
            rows = turns(sample["conversation"])
            msgs = messages(rows)
            for name, store in (("sqlite", lite), ("postgresql", server)):
                start = time.perf_counter()
                ids = store.append(SessionKey(sid, platform="bench"), msgs)
                load[name] += time.perf_counter() - start
                gold_ids.setdefault(name, {}).update(
                    {store_id: f"{sid}/{turn['dia_id']}" for store_id, (_, turn, _) in zip(ids, rows, strict=True)})
        for k in range(pad):
            sample = data[k % len(data)]
            msgs = messages(turns(sample["conversation"]))
            for name, store in (("sqlite", lite), ("postgresql", server)):
                start = time.perf_counter()
                store.append(SessionKey(f"pad-{k}", platform="bench"), msgs)
                load[name] += time.perf_counter() - start
        start = time.perf_counter()
        refreshed = pgtext.refresh_stats(server_db.connect())
        refresh_s = time.perf_counter() - start
        stored = lite.count()
        print(f"stored {stored} messages per backend; load: SQLite {load['sqlite']:.1f} s,"
              f" PostgreSQL {load['postgresql']:.1f} s; refresh_stats {refresh_s * 1000:.0f} ms"
              f" ({', '.join(f'{r.corpus}: {r.docs} docs, {r.lexemes} lexemes' for r in refreshed)})")

        for scope in ("session", "archive"):
            found = {"sqlite": 0, "postgresql": 0}
            latency: dict[str, list[float]] = {"sqlite": [], "postgresql": []}
            same1 = same3 = asked = 0
            overlap: list[float] = []
            for sample in data:
                sid = f"locomo-{sample['sample_id']}"
                for qa in sample["qa"]:
                    gold = {f"{sid}/{d}" for d in evidence_ids(qa.get("evidence"))}
                    if qa.get("category") not in (1, 2, 3, 4) or not gold:
                        continue
                    expression = build_match(str(qa["question"])).expression
                    if not expression:
                        continue
                    asked += 1
                    ranked: dict[str, list[str]] = {}
                    for name, store in (("sqlite", lite), ("postgresql", server)):
                        start = time.perf_counter()
                        hits = store.search(expression, [sid] if scope == "session" else None, limit=limit,
                                            max_candidates=None if scope == "session" else 20000)
                        latency[name].append((time.perf_counter() - start) * 1000)
                        ranked[name] = [gold_ids[name].get(row.store_id, "pad") for row, _, _ in hits]
                        found[name] += bool(gold & set(ranked[name][:10]))
                    a, b = ranked["sqlite"], ranked["postgresql"]
                    same1 += a[:1] == b[:1]
                    same3 += a[:3] == b[:3]
                    overlap.append(len(set(a) & set(b)) / max(1, len(set(a) | set(b))))
            print(f"\nscope={scope}: {asked} questions (LoCoMo categories 1-4 with evidence), limit {limit}")
            for name in ("sqlite", "postgresql"):
                label = "SQLite FTS5 bm25   " if name == "sqlite" else "PostgreSQL SQL BM25"
                print(f"  {label} R@10 {found[name] / max(1, asked):.3f}   search p50"
                      f" {statistics.median(latency[name]):.2f} ms  p95 {percentile(latency[name], 0.95):.2f} ms")
            print(f"  agreement: same top-1 {same1 / max(1, asked):.3f}, same top-3 (in order)"
                  f" {same3 / max(1, asked):.3f}, mean top-{limit} Jaccard {statistics.mean(overlap or [0.0]):.3f}")
    finally:
        server_db.close()
        admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        admin.close()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--url", default=os.environ.get("TROVE_TEST_DATABASE_URL") or DEFAULT_URL,
                        help="a PostgreSQL server (a new schema is made and dropped); default TROVE_TEST_DATABASE_URL")
    parser.add_argument("--pad", type=int, default=0, help="extra copies of conversations stored as other sessions")
    parser.add_argument("--limit", type=int, default=10)
    args = parser.parse_args()
    data = load_dev_split(args.data, "bench_pg_search")
    if data is None:
        return 0
    return run(data, args.url, max(0, args.pad), max(1, args.limit))


if __name__ == "__main__":
    raise SystemExit(main())
