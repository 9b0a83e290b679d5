#!/usr/bin/env python3
"""PostgreSQL mode beside SQLite: turn latency, round trips, outbox drain, archive search latency.

Four measurements, printed and never asserted:

1. Engine time per turn in the host's call order (``simulate.HostLoop``: the post_llm_call ingest
   and, once the threshold is crossed, compaction with an instant fake summarizer), as
   ``bench_turn.py`` drives it, on SQLite, on PostgreSQL at loopback and on PostgreSQL through
   ``pg_proxy.PgProxy`` with a delay each way (default 10 ms, so 20 ms a round trip). Quiet turns
   and compaction turns are reported apart.
2. Round trips to the server per quiet turn and per compaction turn, split by thread: the turn's
   own thread and the background shipper (thread ``trove-outbox``). Counted in this process by
   wrapping psycopg's ``Cursor.execute``/``executemany``/``copy`` (every ``PgConnection.execute``
   and the raw ``conn.raw.execute`` of ``outbox.ship_batch`` end there; an executemany is one
   pipelined round trip) and ``Connection.transaction`` (BEGIN and COMMIT: two). Connections
   opened are counted apart (each costs a handshake and the migration check).
3. Outbox drain: N turns are ingested while the server is down (proxy down), then it comes back
   and the outbox is shipped in the foreground until nothing is pending. ``Shipper.drain`` is
   what ``settle()`` runs once its fail-fast check passes (a failure younger than 60 s makes
   ``settle`` raise at once, which is the point of that check, not of this measurement).
4. ``trove_grep`` (session_scope='all') and ``trove_recall`` latency at a stored size, the archive
   pre-filled straight into the server with ``append_bulk`` in one transaction.

Every run works in new schemas ``bench_<hex>...`` on the server at ``--url`` (127.0.0.1 only),
dropped at the end.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import json
import logging
import os
import random
import shlex
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "scripts"))
sys.path.insert(0, str(HERE))
import _bootstrap  # noqa: E402,F401
from bench_turn import fake_complete, prefill  # noqa: E402
from pg_proxy import PgProxy  # noqa: E402
from simulate import HostLoop, build_conversation  # noqa: E402

from hermes_trove.config import load_config  # noqa: E402
from hermes_trove.engine import TroveEngine  # noqa: E402
from hermes_trove.runtime import build_runtime  # noqa: E402
from hermes_trove.store import SessionKey  # noqa: E402
from hermes_trove.tools import dispatch  # noqa: E402

DEFAULT_URL = "postgresql://postgres@127.0.0.1:55432/trove_test"
SHIPPER = "trove-outbox"


# -- round trips ---------------------------------------------------------------------------

class RoundTrips:
    """Statements and transactions sent to the server, per thread kind (turn / shipper / other)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: collections.Counter[str] = collections.Counter()
        self.connects: collections.Counter[str] = collections.Counter()
        self.main = threading.main_thread()

    def who(self) -> str:
        t = threading.current_thread()
        return "turn" if t is self.main else "shipper" if t.name == SHIPPER else f"other:{t.name}"

    def hit(self, n: int = 1) -> None:
        with self.lock:
            self.counts[self.who()] += n

    def connected(self) -> None:
        with self.lock:
            self.connects[self.who()] += 1

    def snapshot(self) -> collections.Counter[str]:
        """Round trips so far by thread kind, and connections opened as ``connect:<kind>``."""
        with self.lock:
            return collections.Counter(self.counts) + collections.Counter(
                {f"connect:{k}": v for k, v in self.connects.items()})

    def install(self) -> None:
        import psycopg

        trips = self
        cursor, conn_cls = psycopg.Cursor, psycopg.Connection
        for name in ("execute", "executemany", "copy"):
            original = getattr(cursor, name)

            def counted(self: Any, *a: Any, __original: Any = original, **kw: Any) -> Any:
                trips.hit()
                return __original(self, *a, **kw)

            setattr(cursor, name, counted)
        transaction = conn_cls.transaction

        @contextlib.contextmanager
        def counted_transaction(self: Any, *a: Any, **kw: Any) -> Any:
            trips.hit(2)  # BEGIN (or SAVEPOINT) and COMMIT (or RELEASE / ROLLBACK)
            with transaction(self, *a, **kw) as tx:
                yield tx

        conn_cls.transaction = counted_transaction  # type: ignore[method-assign]
        connect = psycopg.connect  # what pgdb calls (Connection.connect, bound at psycopg's import)

        def counted_connect(*a: Any, **kw: Any) -> Any:
            if "search_path" in str(a[:1]):  # the store's connections, not this bench's own set-up ones
                trips.connected()
            return connect(*a, **kw)

        psycopg.connect = counted_connect  # type: ignore[assignment]


TRIPS = RoundTrips()


# -- schemas -------------------------------------------------------------------------------

def with_search_path(url: str, *schemas: str) -> str:
    setting = quote("-csearch_path=" + ",".join(schemas), safe=",")
    return f"{url}{'&' if '?' in url else '?'}options={setting}"


def create_schema(url: str, name: str) -> str:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    return with_search_path(url, name, "public")


def drop_schemas(url: str, names: list[str]) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        conn.execute("SET lock_timeout = '5s'")
        for name in names:
            try:
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
            except psycopg.Error as exc:
                print(f"warning: schema {name} left behind: {exc}", file=sys.stderr)


def setup_server(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('hermes-trove test setup'))")
        with contextlib.suppress(psycopg.Error):
            with conn.transaction():
                conn.execute("CREATE EXTENSION IF NOT EXISTS unaccent SCHEMA public")


# -- helpers -------------------------------------------------------------------------------

def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def make_runtime(home: Path, url: str = "", **over: Any) -> Any:
    cfg = dataclasses.replace(load_config({}, hermes_home=str(home)), database_path=str(home / "trove.db"),
                              database_url=url, **over)
    return build_runtime(cfg)


def wait_shipped(runtime: Any, timeout_s: float = 60.0) -> None:
    """Until the outbox is empty (the background shipper or a foreground settle)."""
    deadline = time.monotonic() + timeout_s
    while runtime.store.outbox.pending() and time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            runtime.store.settle()
        time.sleep(0.05)
    time.sleep(0.2)  # let a background pass that just shipped finish its bookkeeping


def transcript(turn: Any) -> list[dict[str, Any]]:
    out = [{"role": "user", "content": turn.user}]
    for assistant, results in turn.steps:
        out += [assistant, *results]
    return out + [{"role": "assistant", "content": turn.final}]


# -- 1 and 2: turns --------------------------------------------------------------------------

def run_turns(label: str, url: str, history: int, turns: int, context: int, proxy: PgProxy | None,
              delay_s: float, gap_s: float = 0.0) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="trove-bench-pg-"))
    runtime = make_runtime(home, url)
    session = f"bench-{uuid.uuid4().hex[:8]}"
    engine = TroveEngine(runtime, complete=fake_complete)
    engine.update_model("bench", context)
    if proxy is not None:
        proxy.delay_s = 0.0  # pre-fill at loopback speed; the delay is for the turns
    engine.on_session_start(session, platform="cli")
    t0 = time.perf_counter()
    prefill(runtime, session, history)
    fill_s = time.perf_counter() - t0
    on_server = url != ""
    if on_server:
        wait_shipped(runtime)
    else:
        runtime.db.read().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    if proxy is not None:
        proxy.delay_s = delay_s
    statuses: collections.Counter[str] = collections.Counter()
    called = [0]
    compress = engine.compress

    def tracked_compress(*a: Any, **kw: Any) -> Any:
        called[0] += 1
        try:
            return compress(*a, **kw)
        finally:
            statuses[str(engine.state.last_status)] += 1

    engine.compress = tracked_compress  # type: ignore[method-assign]
    settled: list[float] = []
    if on_server:
        settle = runtime.store.settle

        def timed_settle(*a: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return settle(*a, **kw)
            finally:
                settled.append((time.perf_counter() - t) * 1000)

        runtime.store.settle = timed_settle  # type: ignore[method-assign]
    loop = HostLoop(engine)
    rows: list[dict[str, Any]] = []
    conversation = list(build_conversation(turns, seed=3))  # made up front: no gap between turns' counts
    before = TRIPS.snapshot()
    for turn in conversation:
        calls, waits = called[0], len(settled)
        loop.run_turn(turn)
        time.sleep(gap_s)  # the model's reply before the next turn: not turn time, the shipper's time
        after = TRIPS.snapshot()
        rows.append({"ms": loop.stats.engine_seconds[-1] * 1000, "compaction": called[0] > calls,
                     "turn": after["turn"] - before["turn"], "shipper": after["shipper"] - before["shipper"],
                     "other": sum(v - before[k] for k, v in after.items() if k.startswith("other:")),
                     "connects": sum(v - before[k] for k, v in after.items() if k.startswith("connect:")),
                     "ship_conn": after["connect:shipper"] - before["connect:shipper"],
                     "settle_ms": sum(settled[waits:])})
        before = after
    tail = TRIPS.snapshot()
    if on_server:
        wait_shipped(runtime)
    late = TRIPS.snapshot() - tail  # what the shipper still sent after the last turn
    out: dict[str, Any] = {"label": label, "history": history, "prefill_s": fill_s, "statuses": dict(statuses),
                           "late_shipper": late["shipper"], "on_server": on_server,
                           "ship_total": sum(r["shipper"] for r in rows) + late["shipper"],
                           "ship_connects": sum(r["ship_conn"] for r in rows) + late["connect:shipper"]}
    for kind, pick in (("quiet", False), ("compaction", True)):
        sel = [r for r in rows if r["compaction"] is pick]
        ms = [r["ms"] for r in sel]
        out[kind] = {"n": len(sel), "p50": statistics.median(ms) if ms else float("nan"), "p95": pct(ms, 0.95),
                     "max": max(ms, default=float("nan")),
                     "turn_rt": statistics.mean([r["turn"] for r in sel]) if sel else float("nan"),
                     "turn_rt_max": max((r["turn"] for r in sel), default=0),
                     "ship_rt": statistics.mean([r["shipper"] for r in sel]) if sel else float("nan"),
                     "other_rt": statistics.mean([r["other"] for r in sel]) if sel else float("nan"),
                     "waited": sum(1 for r in sel if r["turn"] > 0),
                     "connects": statistics.mean([r["connects"] for r in sel]) if sel else float("nan"),
                     "settle_p50": statistics.median([r["settle_ms"] for r in sel]) if sel else float("nan"),
                     "settle_max": max((r["settle_ms"] for r in sel), default=float("nan"))}
    if on_server:
        with contextlib.suppress(Exception):
            runtime.db.close()
    return out


# -- 3: drain ----------------------------------------------------------------------------------

def run_drain(label: str, upstream: str, delay_s: float, turns: int) -> dict[str, Any]:
    proxy = PgProxy(upstream, delay_s=delay_s).start()
    home = Path(tempfile.mkdtemp(prefix="trove-bench-pg-"))
    runtime = make_runtime(home, proxy.url)
    key = SessionKey(f"drain-{uuid.uuid4().hex[:8]}", platform="cli")
    logging.getLogger("hermes_trove.outbox").setLevel(logging.CRITICAL)  # the outage is on purpose
    proxy.down()
    messages: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for turn in build_conversation(turns, seed=5):
        messages += transcript(turn)
        runtime.store.ingest(key, messages)
    fill_s = time.perf_counter() - t0
    pending = runtime.store.outbox.pending()
    proxy.up()
    shipper = runtime.store.shipper
    failures, shipped = 0, 0
    before = TRIPS.snapshot()
    t0 = time.perf_counter()
    while runtime.store.outbox.pending():
        try:
            shipped += shipper.drain()
        except ConnectionError:  # a connection the outage broke, found broken on its first use
            failures += 1
            if failures > 20:
                break
    drain_s = time.perf_counter() - t0
    spent = TRIPS.snapshot() - before
    left = runtime.store.outbox.pending()
    proxy.down()
    logging.getLogger("hermes_trove.outbox").setLevel(logging.NOTSET)
    with contextlib.suppress(Exception):
        runtime.db.close()
    return {"label": label, "turns": turns, "rows": pending, "fill_s": fill_s, "drain_s": drain_s,
            "rows_per_s": (pending - left) / drain_s if drain_s else float("nan"), "left": left,
            "failures": failures, "turn_rt": spent["turn"], "ship_rt": spent["shipper"],
            "bytes": sum(len(str(m.get("content") or "")) for m in messages)}


# -- 4: archive search -----------------------------------------------------------------------

def vocabulary(rng: random.Random, n: int = 3000) -> tuple[list[str], list[float]]:
    syll = ["ka", "lo", "mi", "ren", "tas", "vo", "qui", "zel", "pra", "dun", "eth", "os", "ny", "bra", "cor"]
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < n:
        w = "".join(rng.choice(syll) for _ in range(rng.randint(2, 4)))
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words, [1.0 / (i + 1) for i in range(n)]


def fill_archive(runtime: Any, size: int, per_session: int = 500) -> float:
    rng = random.Random(7)
    words, weights = vocabulary(random.Random(7))
    t0 = time.perf_counter()
    with runtime.db.transaction() as conn:
        for s in range(0, size, per_session):
            key = SessionKey(f"arch-{s // per_session}", platform="cli")
            msgs = [{"role": "user" if i % 2 == 0 else "assistant",
                     "content": " ".join(rng.choices(words, weights, k=rng.randint(8, 40)))
                     + f" ticket ING-{rng.randint(1000, 9999)}"}
                    for i in range(s, min(size, s + per_session))]
            runtime.store.append_bulk(key, msgs, conn=conn)
    return time.perf_counter() - t0


def hits(reply: dict[str, Any]) -> int:
    for name in ("results", "hits", "matches", "messages", "items"):
        if isinstance(reply.get(name), list):
            return len(reply[name])
    return 0


def run_search(label: str, runtime: Any, repeat: int, seed: int = 11) -> dict[str, Any]:
    engine = TroveEngine(runtime)
    engine.on_session_start("arch-0", platform="cli")
    if getattr(runtime.db, "kind", "") == "postgresql":
        wait_shipped(runtime)
    rng = random.Random(seed)
    words, _ = vocabulary(random.Random(7))
    ask = {
        "trove_grep": lambda: {"query": " ".join(rng.choices(words[:40], k=2)), "limit": 10, "session_scope": "all"},
        "trove_grep rare": lambda: {"query": rng.choice(words[1000:]), "limit": 10, "session_scope": "all"},
        "trove_recall": lambda: {"query": f"what did we decide about {rng.choice(words[50:500])}"
                                          f" and {rng.choice(words[:40])}?", "limit": 10},
    }
    out: dict[str, Any] = {"label": label}
    for name, make in ask.items():
        tool = name.split()[0]
        dispatch(engine.tool_context(), tool, make())  # warm: the connection and the plan cache
        times, found, errors = [], [], 0
        before = TRIPS.snapshot()
        for _ in range(repeat):
            t0 = time.perf_counter()
            reply = json.loads(dispatch(engine.tool_context(), tool, make()))
            times.append((time.perf_counter() - t0) * 1000)
            errors += "error" in reply
            found.append(hits(reply))
        spent = TRIPS.snapshot() - before
        out[name] = {"p50": statistics.median(times), "p95": pct(times, 0.95), "hits": statistics.mean(found),
                     "errors": errors, "rt": spent["turn"] / repeat}
    return out


# -- main ------------------------------------------------------------------------------------

def pgtext_kind() -> str:
    mod = sys.modules.get("hermes_trove.pgtext")
    if mod is None:
        with contextlib.suppress(Exception):
            from hermes_trove import pgtext as mod  # type: ignore[no-redef]
    return "real (pgtext.py)" if getattr(mod, "__file__", None) else "STUB (no full text: grep finds nothing by text)"


def fmt(v: float, w: int = 7, d: int = 1) -> str:
    return f"{'-':>{w}}" if v != v else f"{v:>{w}.{d}f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default=os.environ.get("TROVE_TEST_DATABASE_URL") or DEFAULT_URL)
    ap.add_argument("--turns", type=int, default=120, help="turns per backend in the turn measurement")
    ap.add_argument("--history", type=int, default=10000, help="stored messages before the turns")
    ap.add_argument("--context-length", type=int, default=64000)
    ap.add_argument("--drain-turns", type=int, default=400, help="turns written while the server is down")
    ap.add_argument("--sizes", default="10000", help="stored messages for the search measurement (e.g. 10000,100000)")
    ap.add_argument("--repeat", type=int, default=30, help="calls per search tool and size")
    ap.add_argument("--gap-ms", type=float, default=200.0,
                    help="pause after each turn, where the model's reply would be (0: back to back)")
    ap.add_argument("--delay-ms", type=float, default=10.0, help="proxy delay each way")
    ap.add_argument("--quick", action="store_true",
                    help="small sizes: 40 turns over 1000 stored, 400 drain turns, 12 searches")
    ap.add_argument("--only", nargs="*", choices=("turns", "drain", "search"), default=("turns", "drain", "search"))
    args = ap.parse_args()
    if args.quick:
        args.turns, args.history, args.drain_turns, args.repeat = min(args.turns, 40), min(args.history, 1000), \
            min(args.drain_turns, 400), min(args.repeat, 12)
    host = urlsplit(args.url).hostname if "://" in args.url else None
    if host != "127.0.0.1":
        raise SystemExit(f"bench_pg: --url must be a postgresql:// URL on 127.0.0.1 (got host {host!r})")
    delay_s, gap_s = args.delay_ms / 1000, args.gap_ms / 1000
    sizes = [int(s) for s in args.sizes.split(",") if s]

    print("command:", shlex.join([Path(sys.executable).name, *sys.argv]))
    print(f"pgtext: {pgtext_kind()}; cores: {os.cpu_count()}; load: {os.getloadavg()[0]:.2f}; "
          f"delay: {args.delay_ms:g} ms each way")
    TRIPS.install()
    setup_server(args.url)
    tag = f"bench_{uuid.uuid4().hex[:12]}"
    schemas = [tag]
    try:
        url = create_schema(args.url, tag)
        if "turns" in args.only:
            proxy = PgProxy(url, delay_s=0.0).start()
            results = [run_turns("sqlite", "", args.history, args.turns, args.context_length, None, 0.0, gap_s),
                       run_turns("pg loopback", url, args.history, args.turns, args.context_length, None, 0.0,
                                 gap_s),
                       run_turns(f"pg +{args.delay_ms:g}ms/way", proxy.url, args.history, args.turns,
                                 args.context_length, proxy, delay_s, gap_s)]
            proxy.down()
            print(f"\n1-2. engine time per turn (ms) and round trips per turn; {args.turns} turns over "
                  f"{args.history} stored messages, fake summarizer, context {args.context_length}, "
                  f"{args.gap_ms:g} ms pause after each turn")
            print(f"{'backend':<17} {'turns':<10} {'n':>3} {'p50':>7} {'p95':>7} {'max':>7} {'rt turn':>8} "
                  f"{'(max)':>5} {'rt ship':>8} {'rt other':>8} {'conn':>5} {'settle p50':>10} {'max':>7}")
            for r in results:
                for kind in ("quiet", "compaction"):
                    k = r[kind]
                    srv = r["on_server"]
                    print(f"{r['label']:<17} {kind:<10} {k['n']:>3} {fmt(k['p50'], 7, 2)} {fmt(k['p95'], 7, 2)} "
                          f"{fmt(k['max'], 7, 2)} {fmt(k['turn_rt'] if srv else float('nan'), 8)} "
                          f"{k['turn_rt_max'] if srv else '-':>5} {fmt(k['ship_rt'] if srv else float('nan'), 8)} "
                          f"{fmt(k['other_rt'] if srv else float('nan'), 8)} "
                          f"{fmt(k['connects'] if srv else float('nan'), 5, 2)} "
                          f"{fmt(k['settle_p50'] if srv else float('nan'), 10, 1)} "
                          f"{fmt(k['settle_max'] if srv else float('nan'), 7, 1)}")
            for r in results:
                print(f"  {r['label']}: prefill {r['prefill_s']:.1f}s; compaction status {r['statuses']}"
                      + (f"; shipper: {r['ship_total']} round trips and {r['ship_connects']} connections it opened over"
                         f" {args.turns} turns ({r['late_shipper']} round trips after the last turn)"
                         if r["on_server"] else ""))
            print(f"  connections opened (handshake + migration check), by thread: {dict(TRIPS.connects)}")
            print("  rt turn / rt ship / rt other: mean round trips (statements, BEGIN+COMMIT) per turn sent by the"
                  " turn's thread / the background shipper / other background threads during the turn and the pause"
                  " after it (where the turn's shipper pass runs); conn: connections opened per turn, all threads;"
                  " settle: ms the compaction spent in store.settle() (shipping the outbox, or waiting for the"
                  " shipper's pass)")
        if "drain" in args.only:
            drains = [run_drain("pg loopback (relay)", url, 0.0, args.drain_turns),
                      run_drain(f"pg +{args.delay_ms:g}ms/way", url, delay_s, args.drain_turns)]
            print(f"\n3. outbox drain after an outage: {args.drain_turns} turns written while the server was down")
            print(f"{'backend':<20} {'rows':>6} {'MB':>6} {'fill s':>7} {'drain s':>8} {'rows/s':>8} "
                  f"{'round trips':>11} {'failed tries':>12} {'left':>5}")
            for d in drains:
                print(f"{d['label']:<20} {d['rows']:>6} {d['bytes'] / 1e6:>6.1f} {d['fill_s']:>7.2f} "
                      f"{d['drain_s']:>8.2f} {d['rows_per_s']:>8.0f} {d['turn_rt'] + d['ship_rt']:>11} "
                      f"{d['failures']:>12} {d['left']:>5}")
        if "search" in args.only:
            print(f"\n4. archive search latency (ms), {args.repeat} calls each, after one warm-up call")
            print(f"{'stored':>7} {'backend':<17} {'tool':<16} {'p50':>7} {'p95':>7} {'hits':>5} {'rt/call':>7} "
                  f"{'errors':>6} {'prefill s':>9}")
            for size in sizes:
                gtag = f"{tag}_g{size}"
                schemas.append(gtag)
                gurl = create_schema(args.url, gtag)
                rows = []
                home = Path(tempfile.mkdtemp(prefix="trove-bench-pg-"))
                lite = make_runtime(home, "", memory_scope="profile")
                fill_lite = fill_archive(lite, size)
                rows.append((run_search("sqlite", lite, args.repeat), fill_lite))
                pg = make_runtime(Path(tempfile.mkdtemp(prefix="trove-bench-pg-")), gurl, memory_scope="profile")
                fill_pg = fill_archive(pg, size)
                rows.append((run_search("pg loopback", pg, args.repeat), fill_pg))
                proxy = PgProxy(gurl, delay_s=delay_s).start()
                slow = make_runtime(Path(tempfile.mkdtemp(prefix="trove-bench-pg-")), proxy.url,
                                    memory_scope="profile")
                rows.append((run_search(f"pg +{args.delay_ms:g}ms/way", slow, args.repeat), float("nan")))
                for res, fill_s in rows:
                    for tool in ("trove_grep", "trove_grep rare", "trove_recall"):
                        t = res[tool]
                        print(f"{size:>7} {res['label']:<17} {tool:<16} {fmt(t['p50'], 7, 2)} {fmt(t['p95'], 7, 2)} "
                              f"{t['hits']:>5.1f} {fmt(t['rt'] if res['label'] != 'sqlite' else float('nan'), 7)} "
                              f"{t['errors']:>6} {fmt(fill_s, 9)}")
                with contextlib.suppress(Exception):
                    slow.db.close()
                    pg.db.close()
                proxy.down()
    finally:
        drop_schemas(args.url, schemas)
    return 0


if __name__ == "__main__":
    sys.exit(main())
