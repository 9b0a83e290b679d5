"""Disk bytes per raw character after close, and where the bytes go (tables, indexes, FTS).

Two corpora: ``agent`` runs a tool-heavy coding conversation through the stand-in host loop
(ingest, compaction with an instant fake summarizer, the end-of-session flush); ``chat``
stores the LoCoMo dev conversations, one Hermes session per LoCoMo session. Each store is
closed (its WAL checkpointed into the file) before it is measured. A raw character is one
character of a stored message's content or tool-call JSON as the host handed it over. The
split reads SQLite's ``dbstat`` table: the pages of every table and index, free pages aside.

    python bench/bench_disk.py [--turns 600] [--corpus agent chat] [--data ../shared/data/locomo-dev.json]
"""
from __future__ import annotations

import argparse
import dataclasses
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _locomo import DEFAULT_DATA, load_dev_split, load_package, sessions  # noqa: E402


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


def measure(path: str) -> dict[str, Any]:
    """Bytes per raw character of the closed file, and per table / index (``dbstat``)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        raw, rows = conn.execute("SELECT COALESCE(SUM(length(content) + COALESCE(length(tool_calls), 0)), 0),"
                                 " COUNT(*) FROM messages").fetchone()
        size = sum(p.stat().st_size for p in (Path(path), Path(f"{path}-wal")) if p.exists())
        parts = dict(conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall())
        free = int(conn.execute("PRAGMA freelist_count").fetchone()[0]) * int(conn.execute("PRAGMA page_size")
                                                                               .fetchone()[0])
    finally:
        conn.close()
    return {"messages": rows, "raw_chars": raw, "file_bytes": size, "bytes_per_char": size / max(1, raw),
            "free_bytes": free, "parts": dict(sorted(parts.items(), key=lambda kv: -kv[1]))}


GROUPS = (("messages table", lambda n: n == "messages"),
          ("messages indexes", lambda n: n.startswith("messages_") and not n.startswith("messages_fts")),
          ("messages FTS", lambda n: n.startswith("messages_fts")),
          ("summaries (+ FTS, lineage)", lambda n: n.startswith(("summary_nodes", "nodes_fts", "node_"))
           or "node_messages" in n or "node_children" in n),
          ("everything else", lambda n: True))


def report(label: str, m: dict[str, Any]) -> None:
    raw = max(1, m["raw_chars"])
    print(f"{label}: {m['messages']} messages, {m['raw_chars']} raw chars, {m['file_bytes']} bytes after close "
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
    parser.add_argument("--corpus", nargs="+", choices=("agent", "chat"), default=["agent", "chat"])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="trove-bench-disk-"))
    load_package()
    if "agent" in args.corpus:
        report(f"agent ({args.turns} turns)", measure(agent_store(tmp / "agent", args.turns)))
    if "chat" in args.corpus:
        data = load_dev_split(args.data, "bench_disk")
        if data is not None:
            report(f"chat ({len(data)} LoCoMo conversations)", measure(chat_store(tmp / "chat", data)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
