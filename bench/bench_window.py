"""Small windows with a large fixed overhead: how often compaction runs and what the prompt shows.

The host loop stand-in (``simulate.HostLoop``) adds ``--overhead`` tokens to every request, as
the host's system prompt and tool schemas do, and drives ``--turns`` turns of the built-in
agent conversation through a fresh engine per window (instant fake summarizer). Printed per
window: the trigger the engine ended with, the overhead it measured, the turns that compacted
and the summary calls, the summary nodes visible in the prompt after the first compaction
(minimum and median), the turns whose summary message shows no node at all, and the largest
request against the window.

    python bench/bench_window.py [--windows 64000,128000] [--overhead 17500] [--turns 60]
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NODE_LABEL = re.compile(r"\[d\d+ node \d+ \|")


def _bootstrap() -> None:
    """The tests' helpers (tests/conftest.py registers this checkout as ``hermes_trove``)."""
    sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "bench")]
    import conftest  # noqa: F401


def run(window: int, overhead: int, turns: int) -> dict[str, object]:
    from conftest import make_config, make_engine
    from simulate import HostLoop, build_conversation

    from hermes_trove.runtime import build_runtime

    calls = [0]

    def complete(messages, model, timeout_s, max_tokens):  # type: ignore[no-untyped-def]
        calls[0] += 1
        return "Summary of the segment: the turns discussed numbered topics and files."

    with tempfile.TemporaryDirectory() as tmp:
        eng = make_engine(build_runtime(make_config(Path(tmp))), complete, context_length=window)
        loop = HostLoop(eng, overhead_tokens=overhead)
        compacting, visible, blind = 0, [], 0
        for turn in build_conversation(turns, seed=5, big_output_chars=4000):
            before = loop.stats.compactions
            loop.run_turn(turn)
            compacting += loop.stats.compactions > before
            summary = next((m for m in loop.messages if m.get("_trove_summary")), None)
            if summary is not None:
                shown = len(NODE_LABEL.findall(summary["content"]))
                visible.append(shown)
                blind += shown == 0
        peak = max(loop.stats.prompts)
        return {"window": window, "trigger": eng.threshold_tokens,
                "measured_overhead": getattr(eng, "overhead_tokens", None),
                "turns": turns, "compacting_turns": compacting, "summary_calls": calls[0],
                "visible_min": min(visible, default=0),
                "visible_median": statistics.median(visible) if visible else 0,
                "turns_with_no_visible_node": blind, "max_prompt": peak,
                "max_prompt_share": round(peak / window, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--windows", default="64000,128000")
    ap.add_argument("--overhead", type=int, default=17500)
    ap.add_argument("--turns", type=int, default=60)
    args = ap.parse_args()
    _bootstrap()
    for window in (int(w) for w in args.windows.split(",")):
        print(run(window, args.overhead, args.turns))


if __name__ == "__main__":
    main()
