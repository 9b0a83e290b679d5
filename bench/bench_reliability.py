#!/usr/bin/env python3
"""The reliability suite at larger sizes, printing its figures (tests/reliability runs CI sizes).

    python bench/bench_reliability.py                       # every section, default sizes
    python bench/bench_reliability.py --only hostile fuzz   # some sections
    python bench/bench_reliability.py --writers 8 --exchanges 60 --kills 30 --fuzz-calls 20000

Sections: hostile (1 MiB of each hostile shape: parse and tool-reply times), fuzz (seeded
calls over every tool: escapes, over-cap replies, slowest reply), writers (processes sharing
one session while compacting: lost, duplicated, multi-parent, overlap, integrity), kills
(SIGKILL at random points, then restart: lost, duplicated, doctor, temp files) and secrets
(the corpus on every disk surface and provider-visible text, and the clean corpus).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import conftest  # noqa: E402  (registers the checkout as hermes_trove)
from reliability import checks, corpus, fuzz  # noqa: E402
from reliability.conftest import SHAPES, MiB  # noqa: E402

from hermes_trove.retrieval.query import build_match  # noqa: E402
from hermes_trove.runtime import build_runtime  # noqa: E402
from hermes_trove.tools import TOOLS, dispatch  # noqa: E402

WRITER = ROOT / "tests" / "reliability" / "writer.py"


def hostile(_: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as home:
        eng = conftest.make_engine(build_runtime(conftest.make_config(Path(home))))
        print(f"{'shape':<20} {'parse 1 MiB':>12} {'grep reply':>11} {'reply chars':>11}")
        for name, make in sorted(SHAPES.items()):
            text = make(MiB)
            t0 = time.perf_counter()
            build_match(text)
            parse = time.perf_counter() - t0
            t0 = time.perf_counter()
            out = dispatch(eng.tool_context(), "trove_grep", {"query": text})
            reply = time.perf_counter() - t0
            print(f"{name:<20} {parse * 1000:>10.1f}ms {reply * 1000:>9.1f}ms {len(out):>11}")
        t0 = time.perf_counter()
        build_match("(" * 32000 + "x")
        print(f"'(' * 32000 + 'x' parse: {(time.perf_counter() - t0) * 1000:.1f} ms (was ~10 s before the fix)")


def fuzz_section(a: argparse.Namespace) -> None:
    from reliability.test_fuzz_tools import other_refs, seeded_engine
    with tempfile.TemporaryDirectory() as home:
        rt = build_runtime(conftest.make_config(Path(home), large_output_externalization_enabled=True,
                                                large_output_externalization_threshold_chars=2000))
        eng = seeded_engine(rt)
        t0 = time.perf_counter()
        r = fuzz.fuzz(eng.tool_context(), a.fuzz_calls, a.seed, other_refs(rt))
        print(f"fuzz: {r.calls} calls over {len(TOOLS)} tools (seed {a.seed}) in {time.perf_counter() - t0:.1f} s:"
              f" {len(r.escapes)} escapes, {len(r.over_cap)} over cap, {len(r.bad_json)} bad JSON,"
              f" {len(r.leaks)} other-session leaks, {len(r.slow)} over 1 s, slowest {r.max_seconds * 1000:.0f} ms")
        for line in (r.escapes + r.over_cap + r.bad_json + r.leaks)[:10]:
            print("  ", line[:300])


def writers(a: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as home:
        build_runtime(conftest.make_config(Path(home))).db.connect()
        t0 = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, str(WRITER), home, "shared", "0", str(a.exchanges),
                                   "--compress-every", str(2 + i % 3), "--slow-model", "0.005"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for i in range(a.writers)]
        failed = sum(p.wait(timeout=1800) != 0 for p in procs)
        for p in procs:
            p.communicate()
        rt = build_runtime(conftest.make_config(Path(home)))
        r = checks.store_report(rt, "shared", a.exchanges)
        print(f"writers: {a.writers} processes x {a.exchanges} exchanges on one session in"
              f" {time.perf_counter() - t0:.1f} s ({failed} failed): {json.dumps(r)};"
              f" doctor {checks.doctor_report(rt)}")


def kills(a: argparse.Namespace) -> None:
    from reliability.test_sigkill import run_with_kills

    from hermes_trove.ops import maintenance
    with tempfile.TemporaryDirectory() as home:
        build_runtime(conftest.make_config(Path(home))).db.connect()
        t0 = time.perf_counter()
        total = run_with_kills(Path(home), a.kills, a.seed)
        rt = build_runtime(conftest.make_config(Path(home), large_output_externalization_enabled=True))
        before = checks.temp_files(rt.payload_dir)
        maintenance.startup(rt, background=False)
        r = checks.store_report(rt, "s", total)
        print(f"kills: {a.kills} SIGKILLs, {total} exchanges in {time.perf_counter() - t0:.1f} s: {json.dumps(r)};"
              f" temp files {len(before)} before restart, {len(checks.temp_files(rt.payload_dir))} after;"
              f" doctor {checks.doctor_report(rt)}")


def secrets(_: argparse.Namespace) -> None:
    from hermes_trove.payloads.redact import Redactor
    red = Redactor(True, ("private_key", "api_key", "bearer_token", "password_assignment"))
    leaked = [t[:30] for t, values in corpus.SECRETS if any(v in red.redact(t) for v in values)]
    changed = [t[:30] for t in corpus.CLEAN if red.redact(t) != t]
    print(f"secrets: {len(corpus.SECRETS)} secret forms, {len(leaked)} leaked {leaked};"
          f" {len(corpus.CLEAN)} clean texts, {len(changed)} changed {changed}")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(ROOT / "tests" / "reliability" / "test_secret_corpus.py")],
                          cwd=str(ROOT), capture_output=True, text=True)
    print(f"secrets on disk and provider-visible text: {'0 leaks' if done.returncode == 0 else 'LEAKS'}"
          f" (tests/reliability/test_secret_corpus.py rc={done.returncode})")


SECTIONS = {"hostile": hostile, "fuzz": fuzz_section, "writers": writers, "kills": kills, "secrets": secrets}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=sorted(SECTIONS), default=list(SECTIONS))
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--exchanges", type=int, default=60)
    ap.add_argument("--kills", type=int, default=30)
    ap.add_argument("--fuzz-calls", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=17)
    a = ap.parse_args()
    for name in a.only:
        SECTIONS[name](a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
