"""Recall quality at scale: LoCoMo questions asked with N messages of OTHER conversations stored.

For each LoCoMo dev conversation two archives are built, each every LoCoMo session its own
Hermes session (as ``bench_recall.py`` builds them): one holding that conversation alone, and
one that also holds N messages of other, real conversations: the other dev conversations and
the fixture histories in ../shared/fixtures (an OpenClaw JSONL export and a lossless-claw
database, read with the product's importer). Each padding session is a copy of one of those
sessions, rotated (it starts at a different turn each time round) and re-dated to a random day
around the conversation's own dates, until N messages are stored; by default half the padding is
stored before the conversation and half after (``--place``). The conversation's own words are
never reused. Every question of categories 1-4 is asked through ``trove_recall`` in both
archives; the report gives R@5 / R@10 both ways, their difference, and the latency at size.
Every session is visible to the question (``TROVE_MEMORY_SCOPE=profile``). By default it is
asked from a new session that shares no chat with the conversation (the CLI, where every
session is local); ``--asker chat`` asks it in the gateway chat the conversation was held in,
each padding session being a chat of its own.

    python bench/bench_recall_scale.py [--size 100000] [--data ../shared/data/locomo-dev.json]
    python bench/bench_recall_scale.py --vectors     # hybrid recall, every row embedded (slow)
    python bench/bench_recall_scale.py --asker chat  # the question asked in the conversation's own chat
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _locomo import DEFAULT_DATA, load_dev_split, sessions  # noqa: E402
from bench_recall import Memory, Score, ask, build_memory, index_vectors, turn_text  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures"
DAY = 86400.0


def locomo_sessions(sample: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """The conversation's sessions as message lists (roles as ``bench_recall`` assigns them)."""
    conv = sample["conversation"]
    return [[{"role": "user" if t.get("speaker") == conv.get("speaker_a") else "assistant", "content": turn_text(t)}
             for t in turns] for _, _, turns in sessions(conv) if turns]


def fixture_sessions(tmp: Path) -> list[list[dict[str, Any]]]:
    """The fixture histories, imported with the product's importer into a scratch store, per session."""
    from hermes_trove.config import load_config
    from hermes_trove.importer import ImportOptions, run_import
    from hermes_trove.runtime import build_runtime

    target = tmp / "fixtures" / "trove.db"
    target.parent.mkdir(parents=True, exist_ok=True)
    jsonl = FIXTURES / "openclaw-jsonl"
    if jsonl.is_dir():
        run_import(ImportOptions(target_db=str(target), source_jsonl_dirs=(str(jsonl),), apply=True))
    claw = FIXTURES / "lossless-claw" / "v0.3.0" / "lcm.db"
    if claw.is_file():  # sources are read only, but SQLite wants to write beside a WAL file: read a copy
        copy = tmp / "fixtures" / "claw.db"
        shutil.copy(claw, copy)
        run_import(ImportOptions(target_db=str(target), source_db=str(copy), apply=True, reader_process=False))
    if not target.exists():
        return []
    runtime = build_runtime(dataclasses.replace(load_config({}, hermes_home=str(tmp / "fixtures")),
                                                database_path=str(target)))
    out = []
    for srow in runtime.store.sessions():
        rows = runtime.store.page(srow.session_id, 0, 100000)
        msgs = [{"role": r.role, "content": r.content} for r in rows if r.role in ("user", "assistant") and r.content]
        if msgs:
            out.append(msgs)
    return out


class Padding:
    """Rotated, re-dated copies of other conversations' sessions, each stored as a new session."""

    def __init__(self, templates: list[list[dict[str, Any]]], span: tuple[float, float], seed: int):
        self.templates, self.span, self.rng = templates, span, random.Random(seed)
        self.copies = 0
        self.distinct: set[str] = set()
        self.seconds = 0.0

    def fill(self, store: Any, need: int) -> None:
        """Store ``need`` more padding messages in ``store``."""
        from hermes_trove.store import SessionKey

        start = time.perf_counter()
        while need > 0:
            template = self.templates[self.rng.randrange(len(self.templates))]
            turn = (self.copies * 7) % len(template)  # each copy starts at another turn
            msgs = (template[turn:] + template[:turn])[:need]
            self.distinct.update(m["content"] for m in msgs)
            at = self.rng.uniform(*self.span)
            store.append_bulk(SessionKey(f"pad-{self.copies}", f"pad-{self.copies}", platform="bench"),
                              [{**m, "timestamp": at + 30 * i} for i, m in enumerate(msgs)])
            self.copies += 1
            need -= len(msgs)
        self.seconds += time.perf_counter() - start


def score(memory: Memory) -> tuple[Score, float]:
    """The questions' scores, and the share of top-10 message hits that are not the conversation's."""
    out = Score()
    foreign = shown = 0
    for question, gold, category in memory.questions:
        ranked, ms = ask(memory, "trove_recall", {"query": question, "limit": 10})
        out.add(ranked, gold, category, ms)
        foreign += sum(d is None for d in ranked[:10])
        shown += len(ranked[:10])
    return out, foreign / max(1, shown)


def dates(sample: dict[str, Any]) -> tuple[float, float]:
    """Two years before the conversation's first session to one year after its last."""
    stamps = [s.timestamp() for _, s, _ in sessions(sample["conversation"]) if s is not None] or [1.6e9]
    return min(stamps) - 730 * DAY, max(stamps) + 365 * DAY


def run(data: list[dict[str, Any]], size: int, vectors: bool, place: str, tmp: Path,
        asker: str = "new") -> dict[str, Any]:
    from hermes_trove.config import load_config
    from hermes_trove.runtime import build_runtime

    overrides: dict[str, Any] = {"embeddings_enabled": True} if vectors else {}
    fixtures = fixture_sessions(tmp)
    report: dict[str, Any] = {"size": size, "vectors": vectors, "place": place, "asker": asker,
                              "fixture_sessions": len(fixtures), "conversations": {}}
    pooled = {"alone": Score(), "padded": Score()}
    for n, sample in enumerate(data):
        others = [s for other in data if other is not sample for s in locomo_sessions(other)] + fixtures
        if not others:
            raise SystemExit("bench_recall_scale: no other conversation to pad with (give the dev split)")
        chat = f"chat-{sample['sample_id']}" if asker == "chat" else ""
        alone = build_memory(sample, tmp / "alone", overrides, chat)
        padding = Padding(others, dates(sample), seed=n)
        # Archive search ranks the newest matching rows first: where the conversation sits in the
        # store's history matters, so padding goes before it, after it, or half each side.
        before = {"first": 0, "middle": 0.5, "last": 1}[place] * max(0, size - alone.runtime.store.count())
        home = tmp / "padded" / str(sample["sample_id"])
        padding.fill(build_runtime(dataclasses.replace(load_config({}, hermes_home=str(home)),
                                                       database_path=str(home / "trove.db"))).store, int(before))
        padded = build_memory(sample, tmp / "padded", overrides, chat)
        padding.fill(padded.runtime.store, size - padded.runtime.store.count())
        row: dict[str, Any] = {"questions": len(alone.questions), "stored": padded.runtime.store.count(),
                               "pad_seconds": round(padding.seconds, 1),
                               "padding_distinct_texts": len(padding.distinct)}
        if vectors:
            started = time.perf_counter()
            index_vectors([alone, padded])
            row["embed_seconds"] = round(time.perf_counter() - started, 1)
        for label, memory in (("alone", alone), ("padded", padded)):
            got, foreign = score(memory)
            pooled[label].merge(got)
            row[label] = {**got.summary(), "foreign_top10": round(foreign, 3)}
        row["R@10_drop"] = round(row["alone"]["R@10"] - row["padded"]["R@10"], 4)
        report["conversations"][alone.name] = row
    report["pooled"] = {label: s.summary() for label, s in pooled.items()}
    report["pooled"]["R@10_drop"] = round(report["pooled"]["alone"]["R@10"] - report["pooled"]["padded"]["R@10"], 4)
    return report


def print_report(report: dict[str, Any]) -> None:
    arm = "hybrid (vectors)" if report["vectors"] else "full-text"
    print(f"trove_recall {arm}: each conversation alone vs with {report['size']} stored messages of other "
          f"conversations ({report['fixture_sessions']} fixture sessions among the padding; the conversation "
          f"placed {report['place']} in the store's history; asked from "
          + ("its own chat)" if report["asker"] == "chat" else "a new session outside any chat)"))
    print(f"{'conversation':<14} {'n':>4} {'R@5 alone':>9} {'R@5 padded':>10} {'R@10 alone':>10} "
          f"{'R@10 padded':>11} {'R@10 drop':>9} {'p95 alone':>9} {'p95 padded':>10}")
    rows = {**report["conversations"], "pooled": report["pooled"]}
    for name, r in rows.items():
        a, p = r["alone"], r["padded"]
        print(f"{name:<14} {a['n']:>4} {a['R@5']:>9.3f} {p['R@5']:>10.3f} {a['R@10']:>10.3f} {p['R@10']:>11.3f} "
              f"{r['R@10_drop']:>9.3f} {a['p95_ms']:>7.1f}ms {p['p95_ms']:>8.1f}ms")
    took = [f"{n}: pad {r['pad_seconds']} s ({r['padding_distinct_texts']} distinct padding texts, "
            f"{r['padded']['foreign_top10']:.0%} of top-10 hits padding)"
            + (f", embed {r['embed_seconds']} s" if "embed_seconds" in r else "")
            for n, r in report["conversations"].items()]
    print("build: " + "; ".join(took))
    print(f"R@10 drop at {report['size']} stored (goal <= 0.05): {report['pooled']['R@10_drop']:.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--size", type=int, default=100000, help="stored messages in the padded archive")
    parser.add_argument("--vectors", action="store_true",
                        help="hybrid recall with the offline embeddings (needs the embeddings extra; slow)")
    parser.add_argument("--place", choices=("first", "middle", "last"), default="middle",
                        help="where the conversation sits among the padding, oldest to newest (default middle)")
    parser.add_argument("--asker", choices=("new", "chat"), default="new",
                        help="ask from a new session outside any chat (default), or in the conversation's own chat")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    data = load_dev_split(args.data, "bench_recall_scale")
    if data is None:
        return 0
    if len(data) < 2:
        print("bench_recall_scale: needs at least two conversations (the others are the padding)")
        return 1
    report = run(data, args.size, args.vectors, args.place, Path(tempfile.mkdtemp(prefix="trove-bench-recall-scale-")),
                 args.asker)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
