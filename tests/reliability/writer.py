"""A writer process for the reliability suite: one engine on a (possibly shared) session.

    python writer.py HOME SESSION START COUNT [--compress-every N] [--slow-model S] [--slow-fsync S]

Ingests the deterministic transcript ``message(0..START+COUNT)`` one exchange at a time,
printing each acknowledged index (flushed) after its ingest returned, and compacts with a
fake model every N exchanges. Used for shared-session concurrency and SIGKILL runs.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import conftest  # noqa: E402  (registers the checkout as hermes_trove)

from hermes_trove.runtime import build_runtime  # noqa: E402


def transcript(upto: int) -> list[dict]:
    out: list[dict] = []
    for i in range(upto):
        out.append({"role": "user", "content": f"question {i} about shard {i % 13}"})
        if i % 4 == 3:  # a big tool result: externalized to a sidecar file
            call = {"id": f"c{i}", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}
            out.append({"role": "assistant", "content": "", "tool_calls": [call]})
            out.append({"role": "tool", "tool_call_id": f"c{i}", "name": "terminal",
                        "content": f"output {i}\n" + f"log line {i}\n" * 300})
        out.append({"role": "assistant", "content": f"answer {i}: shard {i % 13} is fine"})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("home")
    ap.add_argument("session")
    ap.add_argument("start", type=int)
    ap.add_argument("count", type=int)
    ap.add_argument("--compress-every", type=int, default=5)
    ap.add_argument("--slow-model", type=float, default=0.0)
    ap.add_argument("--slow-fsync", type=float, default=0.0)
    a = ap.parse_args()
    if a.slow_fsync:  # widen the window inside sidecar writes, where a kill leaves a temp file
        from hermes_trove.payloads import sidecar
        real_fsync = sidecar.os.fsync

        class _Os:
            def __getattr__(self, name):
                return getattr(sidecar.__dict__["_real_os"], name)

            @staticmethod
            def fsync(fd):
                time.sleep(a.slow_fsync)
                real_fsync(fd)
        sidecar.__dict__["_real_os"] = sidecar.os
        sidecar.os = _Os()

    def model(messages, model_name, timeout_s, max_tokens):
        if a.slow_model:
            time.sleep(a.slow_model)
        return "Summary: " + str(messages[-1]["content"])[-400:]

    cfg = conftest.make_config(Path(a.home), large_output_externalization_enabled=True,
                               large_output_externalization_threshold_chars=2000, fresh_tail_count=4,
                               leaf_chunk_tokens=600, condensation_fanin=2)
    eng = conftest.make_engine(build_runtime(cfg), complete=model, session=a.session, context_length=8000)
    for i in range(a.start, a.start + a.count):
        msgs = transcript(i + 1)
        eng.ingest(msgs)
        print(i, flush=True)
        if a.compress_every and i % a.compress_every == a.compress_every - 1:
            eng.compress(msgs, current_tokens=10**6, force=True)
    print("done", flush=True)


if __name__ == "__main__":
    main()
