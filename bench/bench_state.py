#!/usr/bin/env python3
"""Remembered state: extraction cost per 1,000 messages and ``trove_query_state`` latency.

Extraction runs over synthetic user/assistant messages (60-400 characters) with a fake model
that counts its calls and prompt characters and answers one verified assertion per message.
The query part fills a database with --assertions assertions (subjects x predicates x
versions, each value superseding the previous one) and times the tool through ``dispatch``
(parsing, SQL, shaping, JSON): one predicate (current), one predicate ``as_of`` a past
time, and a whole subject (limit 25). Prints p50/p95/max; a shared machine is noisy.

    python bench/bench_state.py                          # 1,000 messages, 100,000 assertions
    python bench/bench_state.py --messages 2000 --assertions 20000 --queries 200
    python bench/bench_state.py --preanswer              # per-turn evidence block at 100,000 assertions
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import _bootstrap  # noqa: E402,F401

from hermes_trove.config import load_config  # noqa: E402
from hermes_trove.runtime import build_runtime  # noqa: E402
from hermes_trove.state import contract, extract  # noqa: E402
from hermes_trove.state.assertion_store import AssertionStore  # noqa: E402
from hermes_trove.store import SessionKey  # noqa: E402
from hermes_trove.toolkit import ToolContext  # noqa: E402
from hermes_trove.tools import dispatch  # noqa: E402

WORDS = "the deploy kiln batch editor server meeting budget invoice plan review draft notes city".split()
T0 = 1_700_000_000.0


class CountingModel:
    def __init__(self) -> None:
        self.calls = self.chars = 0

    def __call__(self, messages, model, timeout_s, max_tokens):
        text = messages[0]["content"]
        self.calls += 1
        self.chars += len(text)
        out = []
        for part in text.split("--- message store_id=")[1:]:
            sid = int(part.split(" ", 1)[0])
            body = part.split("---\n", 1)[1]
            quote = body.split("\n", 1)[0][:60]
            out.append({"store_id": sid, "quote": quote, "subject": "user:self", "predicate": "note",
                        "value": quote[-20:], "kind": "fact", "confidence": 0.8})
        return json.dumps({"assertions": out})


def runtime_at(path: str):
    cfg = dataclasses.replace(load_config({}), database_path=path, assertions_enabled=True)
    return build_runtime(cfg)


def bench_extraction(n: int, tmp: str) -> dict:
    rt = runtime_at(f"{tmp}/extract.db")
    rng = random.Random(7)
    msgs = [{"role": "user" if i % 2 == 0 else "assistant",
             "content": " ".join(rng.choice(WORDS) for _ in range(rng.randint(10, 65))), "timestamp": T0 + i}
            for i in range(n)]
    rt.store.append(SessionKey("bench"), msgs)
    model = CountingModel()
    started = time.perf_counter()
    report = extract.run_pass(rt, model, max_batches=1_000_000, budget_s=3600)
    took = time.perf_counter() - started
    per = 1000.0 / max(1, report["messages"])
    return {"messages": report["messages"], "model_calls_per_1000": round(report["model_calls"] * per, 1),
            "prompt_chars_per_1000": round(model.chars * per), "message_chars_per_1000":
            round(report["input_chars"] * per), "stored": report["stored"], "seconds_excluding_model": round(took, 2)}


def fill(rt, total: int, versions: int = 10, predicates: int = 20, suffix: str = "") -> tuple[int, int]:
    subjects = max(1, total // (versions * predicates))
    store = AssertionStore(rt.db)
    store.ensure()
    batch = []
    for s in range(subjects):
        for v in range(versions):
            for p in range(predicates):
                batch.append({"role": "user", "content": f"for subject{s} the p{p}{suffix} is value{v}x{p}",
                              "timestamp": T0 + v * 86400 + s})
    ids = rt.store.append_bulk(SessionKey("bench"), batch)
    rows = {r.store_id: r for r in rt.store.get_many(ids)}
    cands = []
    for sid in ids:
        row = rows[sid]
        words = row.content.split()
        subj, pred, value = words[1], words[3], words[5]
        vnorm = contract.norm_value(value)
        cands.append(contract.Candidate(
            contract.assertion_id(sid, 0, len(row.content), f"person:{subj}", pred, vnorm, "fact", "positive", ""),
            sid, 0, len(row.content), row.content, contract.assertion_id(0, 0, 0, "", "", "", "", "", ""),
            row.session_id, f"person:{subj}", pred, value, vnorm, "fact", "positive", "", "user", row.created_at,
            None, None, None, row.created_at, None, 0.9))
    for i in range(0, len(cands), 5000):
        store.add(cands[i:i + 5000])
    return subjects, predicates


def timed(rt, args_list: list[dict]) -> dict:
    ctx = ToolContext(runtime=rt)
    times = []
    for args in args_list:
        t = time.perf_counter()
        out = json.loads(dispatch(ctx, "trove_query_state", args))
        times.append((time.perf_counter() - t) * 1000)
        assert out.get("status") == "ok", out
    times.sort()
    return {"p50_ms": round(statistics.median(times), 2), "p95_ms": round(times[int(len(times) * 0.95) - 1], 2),
            "max_ms": round(times[-1], 2)}


def bench_query(total: int, queries: int, tmp: str) -> dict:
    rt = runtime_at(f"{tmp}/query.db")
    started = time.perf_counter()
    subjects, predicates = fill(rt, total)
    filled = time.perf_counter() - started
    n = int(rt.db.read().execute("SELECT COUNT(*) FROM assertions").fetchone()[0])
    rng = random.Random(3)
    pick = [(rng.randrange(subjects), rng.randrange(predicates)) for _ in range(queries)]
    past = "2023-11-18T00:00:00Z"  # a few versions in
    return {"assertions": n, "fill_seconds": round(filled, 1),
            "current_one_predicate": timed(rt, [{"subject_key": f"person:subject{s}", "predicate_key": f"p{p}"}
                                                for s, p in pick]),
            "as_of_one_predicate": timed(rt, [{"subject_key": f"person:subject{s}", "predicate_key": f"p{p}",
                                               "as_of": past} for s, p in pick]),
            "whole_subject_limit_25": timed(rt, [{"subject_key": f"person:subject{s}"} for s, _ in pick])}


def bench_preanswer(total: int, turns: int, tmp: str) -> dict:
    """Per-turn cost of the pre-answer evidence block with assertions on: the whole block (which
    also searches raw messages), and the assertion lookup alone (``state.preanswer.assertion_lines``,
    when this build has it). Every assertion's predicate holds "editor": the worst case of a word
    shared by the whole table."""
    from hermes_trove.state import preanswer

    rt = runtime_at(f"{tmp}/preanswer.db")
    rt = build_runtime(dataclasses.replace(rt.config, preanswer_evidence_enabled=True))
    started = time.perf_counter()
    subjects, predicates = fill(rt, total, suffix="_editor")  # every assertion holds the word "editor"
    filled = time.perf_counter() - started
    n = int(rt.db.read().execute("SELECT COUNT(*) FROM assertions").fetchone()[0])
    rng = random.Random(5)
    asks = []
    for i in range(turns):
        s = rng.randrange(subjects)
        asks.append([f"which editor does subject{s} use now?",  # one subject, plus a word every assertion holds
                     "remind me which editor we settled on",  # only the word every assertion holds
                     "anything about the orchard invoice?"][i % 3])  # nothing stored matches

    def run(fn) -> dict:
        times = []
        for text in asks:
            t = time.perf_counter()
            fn(text)
            times.append((time.perf_counter() - t) * 1000)
        times.sort()
        return {"p50_ms": round(statistics.median(times), 2), "p95_ms": round(times[int(len(times) * 0.95) - 1], 2),
                "max_ms": round(times[-1], 2)}

    out = {"assertions": n, "fill_seconds": round(filled, 1), "turns": turns,
           "whole_block": run(lambda text: preanswer.evidence_block(rt, text, "bench-now"))}
    lookup = getattr(preanswer, "assertion_lines", None)
    if lookup is not None:
        out["assertion_lookup"] = run(lambda text: lookup(rt, preanswer.query_words(text)))
        examined = []
        for text in asks[:30]:
            stats: dict = {}
            lookup(rt, preanswer.query_words(text), stats)
            examined.append(stats.get("examined", 0))
        out["rows_examined_max"] = max(examined)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1000)
    ap.add_argument("--assertions", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--preanswer", action="store_true",
                    help="time the pre-answer evidence block per turn at --assertions assertions instead")
    ap.add_argument("--turns", type=int, default=150)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.preanswer:
            print(json.dumps({"preanswer": bench_preanswer(args.assertions, args.turns, tmp)}, indent=2))
            return
        print(json.dumps({"extraction": bench_extraction(args.messages, tmp),
                          "query_state": bench_query(args.assertions, args.queries, tmp)}, indent=2))


if __name__ == "__main__":
    main()
