"""Disk bytes per raw character after close, and where the bytes go (tables, indexes, FTS).

Two corpora: ``agent`` runs a tool-heavy coding conversation through the stand-in host loop
(ingest, compaction with an instant fake summarizer, the end-of-session flush); ``chat``
stores the LoCoMo dev conversations, one Hermes session per LoCoMo session; ``files`` stores an
agent reading real text files (the Python standard library by default), one file a turn. Each store is
closed (its WAL checkpointed into the file) before it is measured. A raw character is one
character of a stored message's content or tool-call JSON as the host handed it over. The
split reads SQLite's ``dbstat`` table: the pages of every table and index, free pages aside.

    python bench/bench_disk.py [--turns 600] [--corpus agent chat files] [--data ../shared/data/locomo-dev.json]
    python bench/bench_disk.py --upgrade 100000   # opening an older build's file: the one-time index rebuild
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sqlite3
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _locomo import DEFAULT_DATA, load_dev_split, load_package, sessions  # noqa: E402

TEXT_SUFFIXES = {".py", ".txt", ".json", ".html", ".xml", ".cfg", ".md", ".rst", ".toml", ".csv"}


def fake_complete(messages: list[dict[str, Any]], model: str, timeout_s: float, max_tokens: int) -> str:
    """A cooperative summarizer: the tail of its input, within its token budget."""
    return str(messages[0]["content"])[-max(200, max_tokens):]


def runtime_in(home: Path) -> Any:
    from hermes_trove.config import load_config
    from hermes_trove.runtime import build_runtime

    home.mkdir(parents=True, exist_ok=True)
    return build_runtime(dataclasses.replace(load_config({}, hermes_home=str(home)),
                                             database_path=str(home / "trove.db")))


def agent_store(home: Path, turns: int) -> str:
    from simulate import HostLoop, build_conversation

    from hermes_trove.engine import TroveEngine

    runtime = runtime_in(home)
    engine = TroveEngine(runtime, complete=fake_complete)
    engine.update_model("bench", 64000)
    engine.on_session_start("disk", platform="cli")
    loop = HostLoop(engine)
    for turn in build_conversation(turns, seed=3):
        loop.run_turn(turn)
    engine.on_session_end("disk", loop.messages)
    runtime.db.close()
    return runtime.db.path


def chat_store(home: Path, data: list[dict[str, Any]]) -> str:
    from bench_recall import turn_text

    from hermes_trove.store import SessionKey

    runtime = runtime_in(home)
    for sample in data:  # every conversation in one store, as bench_recall.py stores one
        conv = sample["conversation"]
        for key, stamp, turns in sessions(conv):
            base = stamp.timestamp() if stamp else 0.0
            runtime.store.append(SessionKey(f"{sample['sample_id']}-{key}", platform="bench"),
                                 [{"role": "user" if t.get("speaker") == conv.get("speaker_a") else "assistant",
                                   "content": turn_text(t), "timestamp": base + 30 * i} for i, t in enumerate(turns)])
    runtime.db.close()
    return runtime.db.path


def files_store(home: Path, root: Path, turns: int) -> str:
    """An agent that reads real files: each turn asks for one, calls a read tool and gets the file's
    text (the first 16,000 characters, as agents cap a tool's output), then answers in a line."""
    from hermes_trove.store import SessionKey

    paths = sorted(p for p in root.rglob("*") if p.suffix in TEXT_SUFFIXES and p.is_file())
    random.Random(5).shuffle(paths)
    runtime = runtime_in(home)
    key = SessionKey("disk-files", platform="cli")
    for i, path in enumerate(paths[:turns]):
        try:
            text = path.read_text(encoding="utf-8")[:16000]
        except (OSError, UnicodeDecodeError):
            continue
        call = {"id": f"call-{i}", "type": "function",
                "function": {"name": "read_file", "arguments": json.dumps({"path": str(path)})}}
        runtime.store.append(key, [{"role": "user", "content": f"What does {path.name} do?"},
                                   {"role": "assistant", "content": "", "tool_calls": [call]},
                                   {"role": "tool", "tool_call_id": f"call-{i}", "content": text},
                                   {"role": "assistant", "content": f"{path.name} has {text.count(chr(10))} lines."}])
    runtime.db.close()
    return runtime.db.path


def upgrade_seconds(home: Path, size: int) -> float:
    """Seconds this build takes to open a file an older build wrote (``size`` messages, one in ten a
    3,000-character tool output): migration 0015 rebuilds the message index once."""
    from hermes_trove.db import Database, migrate

    home.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(home / "old.db", isolation_level=None)
    migrate(conn, stop_before="0015_packed_text")
    rng = random.Random(9)
    words = [f"w{i}" for i in range(5000)] + "the a deploy invoice rollout shard worker".split() * 300
    conn.execute("BEGIN")
    for i in range(size):
        text = " ".join(rng.choices(words, k=3000 // 6 if i % 10 == 9 else rng.randint(8, 40)))
        conn.execute("INSERT INTO messages(session_id, role, content, identity, created_at, ingested_at)"
                     " VALUES ('old', ?, ?, ?, ?, ?)", ("tool" if i % 10 == 9 else "user", text, f"id{i}", i, i))
    conn.execute("INSERT INTO messages_fts(rowid, content, tool_calls) SELECT store_id, content, tool_calls"
                 " FROM messages")
    conn.execute("COMMIT")
    conn.close()
    start = time.perf_counter()
    Database(home / "old.db").connect()
    return time.perf_counter() - start


def measure(path: str) -> dict[str, Any]:
    """Bytes per raw character of the closed file, and per table / index (``dbstat``)."""
    from hermes_trove.packed import register

    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    register(conn)  # long text is stored deflated: count the characters it holds
    try:
        raw, rows, packed_rows = conn.execute(
            "SELECT COALESCE(SUM(length(trove_text(content)) + COALESCE(length(tool_calls), 0)), 0), COUNT(*),"
            " SUM(typeof(content) = 'blob') FROM messages").fetchone()
        size = sum(p.stat().st_size for p in (Path(path), Path(f"{path}-wal")) if p.exists())
        parts = dict(conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall())
        free = int(conn.execute("PRAGMA freelist_count").fetchone()[0]) * int(conn.execute("PRAGMA page_size")
                                                                               .fetchone()[0])
    finally:
        conn.close()
    return {"messages": rows, "packed": packed_rows, "raw_chars": raw, "file_bytes": size,
            "bytes_per_char": size / max(1, raw),
            "free_bytes": free, "parts": dict(sorted(parts.items(), key=lambda kv: -kv[1]))}


GROUPS = (("messages table", lambda n: n == "messages"),
          ("messages indexes", lambda n: n.startswith("messages_") and not n.startswith("messages_fts")),
          ("messages FTS", lambda n: n.startswith("messages_fts")),
          ("summaries (+ FTS, lineage)", lambda n: n.startswith(("summary_nodes", "nodes_fts", "node_"))
           or "node_messages" in n or "node_children" in n),
          ("everything else", lambda n: True))


def report(label: str, m: dict[str, Any]) -> None:
    raw = max(1, m["raw_chars"])
    print(f"{label}: {m['messages']} messages ({m['packed'] or 0} stored deflated), {m['raw_chars']} raw chars,"
          f" {m['file_bytes']} bytes after close "
          f"= {m['bytes_per_char']:.3f} bytes per raw character")
    left = dict(m["parts"])
    for group, owns in GROUPS:
        names = [n for n in left if owns(n)]
        total = sum(left.pop(n) for n in names)
        print(f"  {group:<28} {total / raw:6.3f}")
        if group in ("messages indexes", "messages FTS"):
            for n in names:
                print(f"    {n:<26} {m['parts'][n] / raw:6.3f}")
    if m["free_bytes"]:
        print(f"  {'free pages':<28} {m['free_bytes'] / raw:6.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=600, help="turns of the agent conversation")
    parser.add_argument("--corpus", nargs="+", choices=("agent", "chat", "files"), default=["agent", "chat", "files"])
    parser.add_argument("--files", type=Path, default=Path(sysconfig.get_paths()["stdlib"]),
                        help="where the files corpus reads real text files (default: the Python standard library)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--upgrade", type=int, metavar="N",
                        help="instead: time opening an older build's file of N messages (its one-time index rebuild)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="trove-bench-disk-"))
    load_package()
    if args.upgrade:
        seconds = upgrade_seconds(tmp / "upgrade", args.upgrade)
        print(f"upgrade of {args.upgrade} messages: {seconds:.2f} s"
              f" = {seconds / args.upgrade * 1e6:.1f} µs per message")
        return 0
    if "agent" in args.corpus:
        report(f"agent ({args.turns} turns)", measure(agent_store(tmp / "agent", args.turns)))
    if "chat" in args.corpus:
        data = load_dev_split(args.data, "bench_disk")
        if data is not None:
            report(f"chat ({len(data)} LoCoMo conversations)", measure(chat_store(tmp / "chat", data)))
    if "files" in args.corpus:
        report(f"files ({args.turns} real files read by an agent, from {args.files})",
               measure(files_store(tmp / "files", args.files, args.turns)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
