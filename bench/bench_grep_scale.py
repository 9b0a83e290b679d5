"""trove_grep latency at scale: 100k and 1M stored messages (synthetic, Zipf-like vocabulary).

Builds a database in /tmp once per size (reused on later runs unless --rebuild), binds an
engine to one session of typical size, and times trove_grep through ``tools.dispatch``
for session-scoped and archive-wide (session_scope='all') queries. Prints the build time
separately, then median and p95 latency per query kind, wall clock and CPU time (on a shared
machine the CPU figures are the ones to compare).

    python bench/bench_grep_scale.py [--sizes 100000 1000000] [--repeat 5] [--rebuild]
        [--session-size N] [--kinds "3 common"] [--profile] [--thin 10000 50000]

``--thin N ...`` copies the store and gives every (size/N)-th row to a chat "thin-N" (rows spread
evenly over the whole id range, as a gateway serving many chats interleaves them), then measures
each thin chat as the current session.
"""
from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SESSION_SIZE = 2000  # messages per synthetic session
WORDS = 5000
BATCH = 5000


def load_package():
    """Register this checkout as ``hermes_trove`` (scripts/_bootstrap.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    import _bootstrap  # noqa: F401
    return sys.modules["hermes_trove"]


def vocabulary(rng: random.Random) -> tuple[list[str], list[float]]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = sorted({"".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(WORDS * 2)})[:WORDS]
    rng.shuffle(words)
    weights = [1.0 / (rank + 1) for rank in range(len(words))]  # Zipf: few common words, a long tail
    return words, weights


def build(path: Path, size: int, seed: int = 7, session_size: int = SESSION_SIZE) -> float:
    """Create ``size`` messages in sessions of SESSION_SIZE; returns seconds spent.

    Rows go straight into ``messages`` with executemany inside one transaction per batch
    (the full-text triggers still index every row), which is what an importer would do.
    """
    load_package()
    from hermes_trove.db import Database

    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(f"{path}{suffix}"):
            os.remove(f"{path}{suffix}")
    rng = random.Random(seed)
    words, weights = vocabulary(rng)
    db = Database(path)
    start = time.perf_counter()
    t0 = 1_600_000_000.0
    made = 0
    while made < size:
        n = min(BATCH, size - made)
        rows = []
        for i in range(made, made + n):
            # sessions interleave a little, as concurrent gateway chats do
            sess = i // session_size if rng.random() > 0.05 else max(0, i // session_size - 1)
            text = " ".join(rng.choices(words, weights, k=rng.randint(8, 40)))
            if rng.random() < 0.01:
                text += f" ticket ING-{rng.randint(1000, 9999)} in src/service_{rng.randint(1, 50)}.py"
            rows.append((f"bench-{sess}", "bench", "bench", ("user", "assistant", "tool")[i % 3], text,
                         len(text) // 4, f"id{i}", t0 + i, t0 + i))
        with db.transaction() as conn:
            conn.executemany(
                "INSERT INTO messages(session_id, platform, source, role, content, token_count, identity,"
                " created_at, ingested_at) VALUES (?,?,?,?,?,?,?,?,?)", rows)
            last = conn.execute("SELECT MAX(store_id) FROM messages").fetchone()[0]
            conn.execute("INSERT INTO messages_fts(rowid, content, tool_calls) SELECT store_id, content, tool_calls"
                         " FROM messages WHERE store_id > ?", (last - len(rows),))
            conn.executemany("INSERT OR IGNORE INTO sessions(session_id, platform, created_at, updated_at)"
                             " VALUES (?,?,?,?)", sorted({(r[0], "bench", t0, t0) for r in rows}))
        made += n
    return time.perf_counter() - start


def spread_thin(base: Path, path: Path, thin: list[int]) -> None:
    """Copy ``base`` to ``path`` and give every (size/N)-th row to a chat "thin-N", for each N in ``thin``
    (largest first, each at the first offset from ``2k + 1`` whose rows no thin chat holds yet, as
    steps sharing a factor would otherwise meet; a row one chat already holds stays with it)."""
    load_package()
    from hermes_trove.db import Database, backup_file

    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(f"{path}{suffix}"):
            os.remove(f"{path}{suffix}")
    backup_file(Database(base).read(), path)  # the base's rows may still sit in its write-ahead log
    db = Database(path)
    with db.transaction() as conn:
        low, high = conn.execute("SELECT MIN(store_id), MAX(store_id) FROM messages").fetchone()
        for k, n in enumerate(sorted(thin, reverse=True)):
            step = max(1, (high - low + 1) // n)
            taken = "SELECT 1 FROM messages WHERE (store_id - ?) % ? = ? AND session_id LIKE 'thin-%' LIMIT 1"
            offset = next((r for r in ((2 * k + 1 + j) % step for j in range(step))
                           if conn.execute(taken, (low, step, r)).fetchone() is None), (2 * k + 1) % step)
            conn.execute("UPDATE messages SET session_id = ? WHERE (store_id - ?) % ? = ?"
                         " AND session_id NOT LIKE 'thin-%'", (f"thin-{n}", low, step, offset))
            conn.execute("INSERT OR IGNORE INTO sessions(session_id, platform, created_at, updated_at)"
                         " VALUES (?, 'bench', 0, 0)", (f"thin-{n}",))


def measure(path: Path, repeat: int, seed: int = 11, session_size: int = SESSION_SIZE,
            kinds: str = "", profile: bool = False, session: str = "") -> dict[str, dict[str, float]]:
    """Median and p95 per query kind, wall clock and CPU time (the process's, which a busy
    machine's other work does not inflate); ``kinds`` keeps the labels containing it."""
    load_package()
    import dataclasses

    from hermes_trove.config import load_config
    from hermes_trove.engine import TroveEngine
    from hermes_trove.runtime import build_runtime
    from hermes_trove.tools import dispatch

    cfg = dataclasses.replace(load_config({}, hermes_home=str(path.parent)), database_path=str(path),
                              memory_scope="profile")  # one person's archive under a made-up platform
    runtime = build_runtime(cfg)
    total = runtime.store.count()
    session = session or f"bench-{(total // session_size) // 2}"
    engine = TroveEngine(runtime)
    engine.on_session_start(session, platform="bench")
    rng = random.Random(seed)
    words, weights = vocabulary(random.Random(7))
    queries = {
        "current: 3 common words": lambda: " ".join(rng.choices(words[:30], k=3)),
        "current: 2 rare words": lambda: " ".join(rng.choices(words[2000:], k=2)),
        "current: question": lambda: (f"what did we decide about {rng.choice(words[100:1000])}"
                                      f" and {rng.choice(words[:50])}?"),
        "current: identifier": lambda: f"ING-{rng.randint(1000, 9999)}",
        "current: 1 very common word": lambda: rng.choice(words[:3]),
        "current: 2 mid-frequency words": lambda: " ".join(rng.choices(words[100:400], k=2)),
        "all: 2 rare words": lambda: " ".join(rng.choices(words[2000:], k=2)),
        "all: 3 common words": lambda: " ".join(rng.choices(words[:30], k=3)),
    }
    out: dict[str, dict[str, float]] = {}
    profiler = cProfile.Profile() if profile else None
    for label, make in queries.items():
        if kinds not in label:
            continue
        scope = "all" if label.startswith("all") else "current"
        times, cpu = [], []
        for _ in range(repeat):
            q = make()
            start, start_cpu = time.perf_counter(), time.process_time()
            if profiler is not None:
                profiler.enable()
            res = json.loads(dispatch(engine.tool_context(), "trove_grep",
                                      {"query": q, "limit": 10, "session_scope": scope}))
            if profiler is not None:
                profiler.disable()
            cpu.append((time.process_time() - start_cpu) * 1000)
            times.append((time.perf_counter() - start) * 1000)
            assert "error" not in res, res
        times.sort()
        cpu.sort()
        out[label] = {"median_ms": statistics.median(times), "p95_ms": times[max(0, int(0.95 * len(times)) - 1)],
                      "cpu_median_ms": statistics.median(cpu), "cpu_p95_ms": cpu[max(0, int(0.95 * len(cpu)) - 1)]}
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/trove-bench-scale"))
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--session-size", type=int, default=SESSION_SIZE,
                        help="messages per synthetic session (the measured session is one of them)")
    parser.add_argument("--kinds", default="", help="measure only the query kinds whose label contains this")
    parser.add_argument("--profile", action="store_true", help="print cProfile's top functions over the queries")
    parser.add_argument("--thin", type=int, nargs="*", default=[],
                        help="also measure chats of these many rows spread evenly over the whole store")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    for size in args.sizes:
        path = args.dir / (f"grep-{size}.db" if args.session_size == SESSION_SIZE
                           else f"grep-{size}-s{args.session_size}.db")
        if args.rebuild or not path.exists():
            seconds = build(path, size, session_size=args.session_size)
            print(f"{size:>9,} messages: built in {seconds:.1f} s ({path})")
        else:
            print(f"{size:>9,} messages: reusing {path}")
        runs = [(path, "")]
        if args.thin:
            thin_path = path.with_name(path.stem + "-thin" + "-".join(map(str, args.thin)) + ".db")
            if args.rebuild or not thin_path.exists():
                spread_thin(path, thin_path, args.thin)
            runs = [(thin_path, f"thin-{n}") for n in args.thin]
        for where, session in runs:
            if session:
                print(f"  session {session}")
            for label, stat in measure(where, args.repeat, session_size=args.session_size, kinds=args.kinds,
                                       profile=args.profile, session=session).items():
                print(f"    {label:30s} median {stat['median_ms']:8.2f} ms   p95 {stat['p95_ms']:8.2f} ms"
                      f"   CPU median {stat['cpu_median_ms']:8.2f} ms   p95 {stat['cpu_p95_ms']:8.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
