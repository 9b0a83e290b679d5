#!/usr/bin/env python3
"""Benchmark the lossless-claw importer: throughput (median of runs) and peak memory by size.

Generates lossless-claw-shaped source databases (current-schema DDL from
../shared/fixtures/lossless-claw/schemas when present, else a minimal equivalent) with
user / assistant+toolCall / toolResult / assistant turns and their message_parts, then
imports each into a fresh target in a child process, reporting messages/second, the peak
RSS of the importing process and of its forked source reader, and traced Python memory per
size, so flat memory shows as the size grows.

    python bench/bench_import.py                    # 25k, 50k, 100k messages, 3 runs each
    python bench/bench_import.py --sizes 10000 --runs 1
    python bench/bench_import.py --breakdown 20000   # µs per message, stage by stage, and the writer's split
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import re
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT.parent / "shared" / "fixtures" / "lossless-claw" / "schemas" / "HEAD-4214b480.sql"
MINIMAL_DDL = """
CREATE TABLE conversations (conversation_id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL,
  session_key TEXT, active INTEGER NOT NULL DEFAULT 1, created_at TEXT NOT NULL DEFAULT (datetime('now')));
CREATE TABLE messages (message_id INTEGER PRIMARY KEY AUTOINCREMENT, conversation_id INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  role TEXT NOT NULL, content TEXT NOT NULL, token_count INTEGER NOT NULL, identity_hash TEXT,
  openclaw_sender_metadata TEXT, transcript_entry_id TEXT, created_at TEXT NOT NULL DEFAULT (datetime('now')),
  large_content TEXT, stable_event_key TEXT, UNIQUE (conversation_id, seq));
CREATE TABLE message_parts (part_id TEXT PRIMARY KEY, message_id INTEGER NOT NULL, session_id TEXT NOT NULL,
  part_type TEXT NOT NULL, ordinal INTEGER NOT NULL, text_content TEXT, is_ignored INTEGER, is_synthetic INTEGER,
  tool_call_id TEXT, tool_name TEXT, tool_input TEXT, tool_output TEXT, tool_error TEXT, metadata TEXT,
  UNIQUE (message_id, ordinal));
CREATE INDEX message_parts_message_idx ON message_parts (message_id);
"""
SHADOW = re.compile(r"_fts\w*_(data|idx|content|docsize|config)'?\s*$")
WORDS = ("invoice rounding decimal refund deploy staging cluster kubeconfig worker batch latency ingestion "
         "pytest changelog module function quantize assertion failure window credentials rollout history").split()


def _vocabulary(size: int = 20000) -> tuple[list[str], list[float]]:
    """Real words plus synthetic ones with Zipf-like weights: a realistic FTS workload.

    A tiny vocabulary would make every term's posting list grow with the table and turn
    FTS merging into the benchmark.
    """
    rng = random.Random(7)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = WORDS + ["".join(rng.choice(letters) for _ in range(rng.randint(3, 10))) for _ in range(size)]
    weights = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(words))))
    return words, weights


VOCAB, CUM_WEIGHTS = _vocabulary()

# The writer's statements by kind: the first label whose text the SQL contains.
STATEMENT_KINDS = (("full-text index (tokenizing, segment merges)", "INSERT INTO messages_fts"),
                   ("message rows and their four indexes", "INSERT INTO messages("),
                   ("ledger rows", "INSERT INTO imported_messages"),
                   ("ledger look-ups", "FROM imported_messages"),
                   ("commit (the index's last flush)", "COMMIT"))


class TimedConnection(sqlite3.Connection):
    """A connection that adds the thread CPU time spent in each statement to ``spent``, by kind."""

    spent: dict[str, float] = {}

    def execute(self, sql, *args):  # type: ignore[override]
        return self._timed(super().execute, sql, args)

    def executemany(self, sql, *args):  # type: ignore[override]
        return self._timed(super().executemany, sql, args)

    def _timed(self, run, sql: str, args: tuple):
        start = time.thread_time()
        try:
            return run(sql, *args)
        finally:
            kind = next((label for label, text in STATEMENT_KINDS if text in sql), "other statements")
            self.spent[kind] = self.spent.get(kind, 0.0) + time.thread_time() - start


def _text(i: int, n: int) -> str:
    rng = random.Random(i)
    return " ".join(rng.choices(VOCAB, cum_weights=CUM_WEIGHTS, k=n)) + f" #{i}"


def _statements(ddl: str) -> list[str]:
    """DDL statements minus what SQLite creates itself (sqlite_sequence, FTS5 shadow tables)."""
    out, buf = [], ""
    for line in ddl.splitlines(keepends=True):
        if not buf and line.startswith("--"):
            continue
        buf += line
        if sqlite3.complete_statement(buf):
            head = buf.strip().split("(")[0]
            if not (head.startswith("CREATE TABLE sqlite_") or SHADOW.search(head)):
                out.append(buf.strip())
            buf = ""
    return out


def generate(path: Path, messages: int, per_conversation: int = 400) -> None:
    """Write a lossless-claw-shaped database with ``messages`` rows and their parts."""
    conn = sqlite3.connect(path)
    for statement in _statements(SCHEMA.read_text() if SCHEMA.is_file() else MINIMAL_DDL):
        conn.execute(statement)
    conn.execute("BEGIN")
    mid = 0
    conv = 0
    while mid < messages:
        conv += 1
        session = f"{conv:08x}-0000-4000-8000-000000000000"
        conn.execute("INSERT INTO conversations(conversation_id, session_id, session_key) VALUES (?,?,?)",
                     (conv, session, f"agent:main:bench:{conv}"))
        rows, parts = [], []
        for seq in range(1, min(per_conversation, messages - mid) + 1):
            mid += 1
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(1772442000 + mid * 15))
            kind = seq % 4
            call = f"toolu_{mid - 1 if kind == 2 else mid:08d}"
            if kind == 1:
                role, content = "user", _text(mid, 30)
                parts.append((f"p{mid}", mid, session, "text", 0, content, None, None, None,
                              json.dumps({"originalRole": "user", "rawType": "text",
                                          "raw": {"type": "text", "text": content}})))
            elif kind == 2:
                role, content = "assistant", ""
                args = {"command": f"pytest tests/test_{mid % 97}.py -q"}
                parts.append((f"p{mid}", mid, session, "tool", 0, None, call, "exec", json.dumps(args),
                              json.dumps({"originalRole": "assistant", "rawType": "toolCall",
                                          "raw": {"type": "toolCall", "id": call, "name": "exec", "arguments": args}})))
            elif kind == 3:
                role, content = "tool", _text(mid, 60)
                parts.append((f"p{mid}", mid, session, "text", 0, content, call, "exec", None,
                              json.dumps({"originalRole": "toolResult", "toolCallId": call, "toolName": "exec",
                                          "isError": False, "rawType": "text",
                                          "raw": {"type": "text", "text": content}})))
            else:
                role, content = "assistant", _text(mid, 40)
                parts.append((f"p{mid}", mid, session, "text", 0, content, None, None, None,
                              json.dumps({"originalRole": "assistant", "rawType": "text",
                                          "raw": {"type": "text", "text": content}})))
            rows.append((mid, conv, seq, role, content, len(content) // 4, f"{mid:08x}", stamp))
        conn.executemany("INSERT INTO messages(message_id, conversation_id, seq, role, content, token_count,"
                         " transcript_entry_id, created_at) VALUES (?,?,?,?,?,?,?,?)", rows)
        conn.executemany("INSERT INTO message_parts(part_id, message_id, session_id, part_type, ordinal, text_content,"
                         " tool_call_id, tool_name, tool_input, metadata) VALUES (?,?,?,?,?,?,?,?,?,?)", parts)
    conn.commit()
    conn.close()


def child(source: str, target: str, trace: bool, inline: bool = False) -> None:
    """One import in this process; prints a JSON line of figures."""
    child_setup()
    from hermes_trove.importer import ImportOptions, run_import

    if trace:
        tracemalloc.start()
    t0 = time.perf_counter()
    report = run_import(ImportOptions(target_db=target, source_db=source, apply=True, reader_process=not inline),
                        env={})
    seconds = time.perf_counter() - t0
    traced = tracemalloc.get_traced_memory()[1] if trace else 0
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    print(json.dumps({"seconds": seconds, "imported": report.imported,
                      "cpu_s": me.ru_utime + me.ru_stime, "reader_cpu_s": kids.ru_utime + kids.ru_stime,
                      "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                      "reader_maxrss_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
                      "traced_peak": traced}))


def breakdown(size: int) -> None:
    """Where one imported message's time goes (µs per message, median of 3), in one process."""
    child_setup()
    import dataclasses

    from hermes_trove import tokens
    from hermes_trove.config import load_config
    from hermes_trove.importer import ImportOptions, pipe, run_import
    from hermes_trove.importer.claw_db import ClawSource
    from hermes_trove.importer.run import session_of, target_session
    from hermes_trove.importer.target import Writer, discard, staging_file, unjournaled
    from hermes_trove.ingest import message_identity
    from hermes_trove.runtime import build_runtime
    from hermes_trove.store import SessionKey, normalize_message

    with tempfile.TemporaryDirectory(prefix="trove-bench-import-") as tmp:
        source = Path(tmp) / "lcm.db"
        generate(source, size)
        src = ClawSource(str(source))
        by_conv = [(c, list(src.messages(c))) for c in src.conversations()]
        src.close()
        msgs = [m.message for _, rows in by_conv for m in rows]

        def timed(fn) -> float:
            runs = []
            for _ in range(3):
                t0 = time.perf_counter()
                fn()
                runs.append(time.perf_counter() - t0)
            return statistics.median(runs) / len(msgs) * 1e6

        def store_append(bulk: bool) -> None:
            target = Path(tmp) / f"t{time.perf_counter_ns()}.db"
            cfg = dataclasses.replace(load_config({}), database_path=str(target))
            rt = build_runtime(cfg)
            append = rt.store.append_bulk if bulk else rt.store.append
            with rt.db.transaction() as conn:
                for i in range(0, len(msgs), 500):
                    append(SessionKey("bench", source="bench"), msgs[i:i + 500], conn=conn)
            rt.db.close()

        def read_convert() -> None:
            src = ClawSource(str(source))
            for conv in src.conversations():
                for _ in src.messages(conv):
                    pass
            src.close()

        preparer = build_runtime(dataclasses.replace(load_config({}), database_path=str(Path(tmp) / "p.db"))).store
        prepared = preparer.prepare_rows("bench", msgs)

        def store_insert_prepared() -> None:
            target = Path(tmp) / f"t{time.perf_counter_ns()}.db"
            rt = build_runtime(dataclasses.replace(load_config({}), database_path=str(target)))
            with rt.db.transaction() as conn:
                for i in range(0, len(prepared), 500):
                    rt.store.insert_rows(conn, SessionKey("bench", source="bench"), prepared[i:i + 500])
            rt.db.close()

        # The import's own write path with everything else taken away: rows prepared in advance
        # for their real (import-shaped) session ids, inserted with their ledger rows into a
        # staged, unjournaled target. No reading, converting or counting: the writer's floor.
        sessions = [(target_session("openclaw-trove", "main", session_of(c, "session_id")), rows)
                    for c, rows in by_conv]
        batches = [(sid, pipe.prepared(preparer, sid, rows[i:i + 500]))
                   for sid, rows in sessions for i in range(0, len(rows), 500)]

        def writer_floor() -> None:
            target = staging_file(Path(tmp) / "floor.db")
            rt = build_runtime(dataclasses.replace(load_config({}), database_path=str(target)))
            unjournaled(rt.db.connect())
            with rt.db.transaction() as conn:
                writer = Writer(rt, conn, "bench")
                for sid, rows in batches:
                    writer.messages("bench", [r.key for r in rows])
                    writer.append(SessionKey(sid, platform="openclaw", source=sid), rows)
            rt.db.close()
            discard(target)

        def writer_split() -> dict[str, float]:
            """One writer_floor run on timed connections: µs of thread CPU per message, by statement kind."""
            connect = sqlite3.connect
            sqlite3.connect = lambda *a, **k: connect(*a, **k, factory=TimedConnection)  # type: ignore[assignment]
            TimedConnection.spent.clear()
            try:
                start = time.thread_time()
                writer_floor()
                total = time.thread_time() - start
            finally:
                sqlite3.connect = connect  # type: ignore[assignment]
            kinds = [label for label, _ in STATEMENT_KINDS] + ["other statements"]
            split = {kind: TimedConnection.spent.get(kind, 0.0) / len(msgs) * 1e6 for kind in kinds}
            split["Python and the rest (outside any statement)"] = total / len(msgs) * 1e6 - sum(split.values())
            return split

        config = dataclasses.replace(load_config({}), database_path=str(Path(tmp) / "x.db"))
        transform = build_runtime(config).store.transform
        rows = {
            "source read + convert (ClawSource alone)": timed(read_convert),
            "dry run (read + convert + counting, no target)": timed(
                lambda: run_import(ImportOptions(target_db=str(Path(tmp) / "none.db"), source_db=str(source)), env={})),
            "store: normalize_message (incl. tokens)": timed(lambda: [normalize_message(m) for m in msgs]),
            "store: tokens.count_message alone": timed(lambda: [tokens.count_message(m) for m in msgs]),
            "store: message_identity": timed(lambda: [message_identity(m) for m in msgs]),
            "store: storage transform": timed(lambda: [transform({**normalize_message(m), "session_id": "b"})
                                                      for m in msgs]) if transform else 0.0,
            "store.prepare_rows (the reader's share)": timed(lambda: preparer.prepare_rows("bench", msgs)),
            "store.insert_rows of prepared rows (WAL)": timed(store_insert_prepared),
            "import writer alone: prepared rows + ledger, new target": timed(writer_floor),
            "store.append, row by row (one transaction)": timed(lambda: store_append(False)),
            "store.append_bulk (one transaction)": timed(lambda: store_append(True)),
            "full import into a new target, in-process reader": timed(
                lambda: run_child(source, Path(tmp) / "trove.db", inline=True)),
            "full import into a new target, forked reader (default)": timed(
                lambda: run_child(source, Path(tmp) / "trove.db")),
        }
        print(f"per-message cost over {len(msgs)} messages (µs, median of 3; tokens backend {tokens.backend()}):")
        for name, us in rows.items():
            print(f"  {name:<56} {us:>8.1f}")
        runs = [writer_split() for _ in range(3)]
        print("the import writer alone, by statement (µs of writer thread CPU per message, median of 3):")
        for kind in runs[0]:
            print(f"  {kind:<56} {statistics.median(r[kind] for r in runs):>8.1f}")


def child_setup() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    import _bootstrap  # noqa: F401  (this checkout is the hermes_trove package)


def run_child(source: Path, target: Path, trace: bool = False, inline: bool = False) -> dict:
    for suffix in ("", "-wal", "-shm"):
        Path(str(target) + suffix).unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TROVE_")}
    flags = (["--trace"] if trace else []) + (["--inline"] if inline else [])
    out = subprocess.run([sys.executable, __file__, "--child", str(source), str(target)] + flags,
                         capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[25000, 50000, 100000])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--breakdown", type=int, metavar="N",
                    help="time each stage of the per-message path over N messages")
    ap.add_argument("--child", nargs=2, metavar=("SOURCE", "TARGET"), help=argparse.SUPPRESS)
    ap.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--inline", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.trace, args.inline)
        return
    if args.breakdown:
        breakdown(args.breakdown)
        return
    print(f"schema: {'fixture HEAD DDL' if SCHEMA.is_file() else 'minimal built-in DDL'}; runs per size: {args.runs}")
    print(f"{'messages':>9} {'median s':>9} {'msgs/s':>9} {'peak RSS MiB':>13} {'reader RSS MiB':>15}"
          f" {'traced peak MiB':>16}")
    with tempfile.TemporaryDirectory(prefix="trove-bench-import-") as tmp:
        for size in args.sizes:
            source = Path(tmp) / f"lcm-{size}.db"
            generate(source, size)
            runs = [run_child(source, Path(tmp) / "trove.db") for _ in range(args.runs)]
            traced = run_child(source, Path(tmp) / "trove.db", trace=True)
            assert all(r["imported"] == size for r in runs), runs
            secs = statistics.median(r["seconds"] for r in runs)
            rss = statistics.median(r["maxrss_kb"] for r in runs) / 1024
            reader = statistics.median(r["reader_maxrss_kb"] for r in runs) / 1024
            print(f"{size:>9} {secs:>9.2f} {size / secs:>9.0f} {rss:>13.1f} {reader:>15.1f}"
                  f" {traced['traced_peak'] / 2**20:>16.1f}", flush=True)


if __name__ == "__main__":
    main()
