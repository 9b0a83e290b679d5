"""The wall-clock figures the tests no longer assert: each case printed as the median (and the
slowest) of --repeat runs, beside the bound a test used to put on it.

Tests check what a call returns; how long it takes depends on the machine and its load, so it
is measured here and read, never asserted (a benchmark prints, it does not fail).

* hostile: ``build_match`` on --bytes of each hostile shape and on ``"(" * 32000 + "x"``; a
  --bytes query refused by trove_grep and trove_expand_query (as a dict and as JSON text);
  --bytes of ``(`` in every string argument of every tool (tests/reliability/test_hostile_input.py).
* fuzz: the slowest of --fuzz-calls seeded calls over every tool, one seed per repeat
  (tests/reliability/test_fuzz_tools.py).
* deadlines: how soon the caller gets its answer back when the model or the embedding server
  is stuck: trove_expand_query past its 1 s timeout (tests/test_tools_expand.py),
  ``semantic.search`` past a 0.2 s deadline and the OpenAI-compatible provider past a 0.2 s
  request timeout (tests/test_semantic.py, tests/test_embed_providers.py; these two need numpy).
* pack: trove_evidence_pack over --pack-rows refs to rows of --pack-row-chars characters,
  drifted quotes then whole-row refs with a computation (tests/test_evidence_pack.py).

    python bench/bench_bounds.py [--only hostile fuzz deadlines pack] [--repeat 5]
        [--bytes 1048576] [--fuzz-calls 1200] [--pack-rows 50] [--pack-row-chars 1000000]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = ("hostile", "fuzz", "deadlines", "pack")
DAY = 86400.0


def _bootstrap() -> None:
    """The tests' helpers (tests/conftest.py registers this checkout as ``hermes_trove``)."""
    sys.path.insert(0, str(ROOT / "tests"))
    import conftest  # noqa: F401


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def show(label: str, seconds: list[float], bound: str | None) -> None:
    """One figure: median and slowest of ``seconds``, in ms, and the bound a test used to assert."""
    note = f"test bound was {bound}" if bound else "no test bound"
    print(f"{label:<52} median {statistics.median(seconds) * 1000:>9.1f} ms   max {max(seconds) * 1000:>9.1f} ms"
          f"   n={len(seconds):<4} ({note})")


def engine(home: Path, **overrides: Any) -> Any:
    from conftest import make_config, make_engine

    from hermes_trove.runtime import build_runtime

    return make_engine(build_runtime(make_config(home, **overrides)))


def hostile(a: argparse.Namespace, home: Path) -> None:
    from reliability.conftest import SHAPES, string_parameters

    from hermes_trove.retrieval.query import build_match
    from hermes_trove.tools import TOOLS, dispatch

    eng = engine(home)
    from conftest import user

    eng.ingest([user("the deploy key lives in /etc/keys; port 6543 for the pooler")] * 3)
    ctx = eng.tool_context()
    print(f"hostile arguments are {a.bytes} characters long")
    for name, make in sorted(SHAPES.items()):
        text = make(a.bytes)
        show(f"hostile parse {name}", [timed(lambda text=text: build_match(text)) for _ in range(a.repeat)], "5 s")
    show("hostile parse '(' * 32000 + 'x'", [timed(lambda: build_match("(" * 32000 + "x")) for _ in range(a.repeat)],
         "0.5 s")
    for tool in ("trove_grep", "trove_expand_query"):
        runs = []
        for _ in range(a.repeat):
            for make in SHAPES.values():
                text = make(a.bytes)
                for args in ({"query": text, "prompt": text}, json.dumps({"query": text, "prompt": text})):
                    runs.append(timed(lambda: dispatch(ctx, tool, args)))  # noqa: B023  (called at once)
        show(f"hostile refuse {tool} (every shape, dict+JSON)", runs, "5 s per call")
    big = "(" * a.bytes
    slowest: tuple[float, str] = (0.0, "")
    runs = []
    for _ in range(a.repeat):
        for tool in TOOLS:
            for param in string_parameters(tool) or ["query"]:
                took = timed(lambda: dispatch(ctx, tool.name, {param: big}))  # noqa: B023
                runs.append(took)
                slowest = max(slowest, (took, f"{tool.name}.{param}"))
    show(f"hostile every string argument ({len(runs) // a.repeat} per run)", runs, "5 s per call")
    print(f"  slowest argument: {slowest[1]} {slowest[0] * 1000:.1f} ms")


def fuzz_section(a: argparse.Namespace, home: Path) -> None:
    from conftest import make_config
    from reliability import fuzz
    from reliability.test_fuzz_tools import other_refs, seeded_engine

    from hermes_trove.runtime import build_runtime

    worst = []
    over = 0
    for seed in range(1, a.repeat + 1):
        rt = build_runtime(make_config(home / f"fuzz{seed}", large_output_externalization_enabled=True,
                                       large_output_externalization_threshold_chars=2000))
        report = fuzz.fuzz(seeded_engine(rt).tool_context(), a.fuzz_calls, seed, other_refs(rt))
        worst.append(report.max_seconds)
        over += len(report.slow)
    show(f"fuzz slowest of {a.fuzz_calls} calls (one seed per run)", worst, "1 s per call")
    print(f"  calls over 1 s: {over} of {a.fuzz_calls * a.repeat}")


def deadlines(a: argparse.Namespace, home: Path) -> None:
    from conftest import user

    from hermes_trove.tools import dispatch

    eng = engine(home, expansion_timeout_ms=1000)
    eng.runtime.store.append(_key("s1", platform="cli"), [user(f"message number {i} about topic {i}")
                                                          for i in range(6)])
    runs = []
    for _ in range(a.repeat):
        release = threading.Event()
        eng.complete = lambda *args, release=release: release.wait(30) and "too late"
        runs.append(timed(lambda: dispatch(eng.tool_context(), "trove_expand_query", {"prompt": "topic 1?"})))
        release.set()
    show("deadline trove_expand_query, 1 s timeout", runs, "2.9 s; it waits 1 s + 1 s grace")
    if importlib.util.find_spec("numpy") is None:
        print("deadline semantic / openai timeout: skipped (numpy is not installed: "
              "pip install 'hermes-trove[embeddings-hosted]')")
        return
    from embed_fakes import FakeEmbeddings, fake_runtime, index_all

    from hermes_trove.retrieval import embed_providers, indexer, semantic, vector_index
    from hermes_trove.retrieval.embed_providers import OpenAIProvider, ProviderSpec

    try:
        with FakeEmbeddings() as fake:
            rt = fake_runtime(home / "semantic", fake)
            rt.store.append(_key("alpha"), [user("I adopted a golden retriever puppy"), user("the puppy photos")])
            index_all(rt)
            fake.delay_s = 2.0
            runs = [timed(lambda: semantic.search(rt, "puppy", deadline_s=0.2)) for _ in range(a.repeat)]
            show("deadline semantic.search, 0.2 s deadline", runs, "1.0 s")
        with FakeEmbeddings(delay_s=1.5) as slow:
            provider = OpenAIProvider(ProviderSpec("openai", "fake-8", base_url=slow.base_url, timeout_s=0.2))

            def request() -> None:
                try:
                    provider.embed(["slow"])
                except RuntimeError:
                    pass

            show("deadline openai provider, 0.2 s timeout", [timed(request) for _ in range(a.repeat)], "1.2 s")
    finally:
        indexer.stop_all()
        embed_providers.forget_providers()
        vector_index.forget_indexes()


def _key(session: str, **kw: Any) -> Any:
    from hermes_trove.store import SessionKey

    return SessionKey(session, **kw)


def pack(a: argparse.Namespace, home: Path) -> None:
    from conftest import user

    from hermes_trove.toolkit import ToolContext
    from hermes_trove.tools import dispatch

    rt = engine(home).runtime
    key = _key("big")
    body = ("lorem ipsum dolor sit amet " * (a.pack_row_chars // 27 + 1))[:a.pack_row_chars]
    t0 = 1_700_000_000.0
    ids = rt.store.append(key, [dict(user(f"{i} {body}"), timestamp=t0 + i * DAY) for i in range(a.pack_rows)])
    ctx = ToolContext(rt, key)
    span = min(20000, a.pack_row_chars)
    drifted = [{"store_id": i, "span_start": 0, "span_end": span, "quote": "x" * 4000} for i in ids]
    good = [f"trove:{i}:0-{span}" for i in ids]
    budgets = {"max_refs": a.pack_rows, "max_per_session": a.pack_rows, "max_per_date": 8}
    runs = [timed(lambda: dispatch(ctx, "trove_evidence_pack", {"question": "q", "baseline_refs": drifted}))
            for _ in range(a.repeat)]
    show(f"pack {a.pack_rows} drifted refs to {a.pack_row_chars}-char rows", runs, "10 s")
    runs = [timed(lambda: dispatch(ctx, "trove_evidence_pack", {"question": "q", "baseline_refs": good,
                                                                "include_compute": True, "budgets": budgets}))
            for _ in range(a.repeat)]
    show(f"pack {a.pack_rows} whole-row refs + compute", runs, None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--bytes", type=int, default=1 << 20, help="hostile argument size (1 MiB)")
    parser.add_argument("--fuzz-calls", type=int, default=1200)
    parser.add_argument("--pack-rows", type=int, default=50)
    parser.add_argument("--pack-row-chars", type=int, default=1_000_000)
    a = parser.parse_args(argv)
    a.repeat = max(1, a.repeat)
    _bootstrap()
    run = {"hostile": hostile, "fuzz": fuzz_section, "deadlines": deadlines, "pack": pack}
    print(f"{a.repeat} runs of each case")
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.only:
            home = Path(tmp) / name
            home.mkdir()
            started = time.perf_counter()
            run[name](a, home)
            print(f"[{name}: {time.perf_counter() - started:.1f} s]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
