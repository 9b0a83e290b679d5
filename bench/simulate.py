"""A minimal stand-in for the Hermes turn loop, for the demo, benchmarks and tests.

It drives an engine in the host's order — preflight ``should_compress``/``compress``,
a pre-API check, the model reply, tool batches with a post-batch check, then the
per-turn ``post_llm_call`` ingest — and records the size of every prompt it would have
sent. It also builds a deterministic long agent conversation with tool calls and large
tool outputs (no model, no network).
"""
from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hermes_trove import tokens
from hermes_trove.store import SessionKey

if TYPE_CHECKING:
    from hermes_trove.engine import TroveEngine

SYSTEM_PROMPT_TOKENS = 1500  # what a host system prompt plus tool schemas roughly costs


@dataclass
class Turn:
    user: str
    steps: list[tuple[dict[str, Any], list[dict[str, Any]]]]  # (assistant message, tool results)
    final: str


@dataclass
class LoopStats:
    prompts: list[int] = field(default_factory=list)  # estimated tokens of every request
    compactions: int = 0
    engine_seconds: list[float] = field(default_factory=list)  # per turn, excluding the model
    # CPU seconds (this thread) inside the engine's own calls per turn, and whether the turn compacted:
    # steadier than wall time on a shared machine, and free of this loop's own bookkeeping.
    engine_cpu: list[float] = field(default_factory=list)
    compacted: list[bool] = field(default_factory=list)


class HostLoop:
    """Feeds turns to an engine the way the 0.19 host does."""

    def __init__(self, engine: TroveEngine, overhead_tokens: int = SYSTEM_PROMPT_TOKENS,
                 on_compress: Callable[[list[dict[str, Any]]], None] | None = None):
        self.engine = engine
        self.messages: list[dict[str, Any]] = []
        self.overhead = overhead_tokens
        self.stats = LoopStats()
        self._cpu, self._compacted = 0.0, False
        self.on_compress = on_compress
        self._sizes: dict[int, tuple[dict[str, Any], int]] = {}

    def estimate(self) -> int:
        return self.overhead + sum(self._size(m) for m in self.messages)

    def _size(self, m: dict[str, Any]) -> int:
        hit = self._sizes.get(id(m))
        if hit is None or hit[0] is not m:  # ids are reused after a dict is freed
            hit = (m, tokens.count_message(m))
            self._sizes[id(m)] = hit
        return hit[1]

    def _engine(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        t0 = time.thread_time()
        try:
            return call(*args, **kwargs)
        finally:
            self._cpu += time.thread_time() - t0

    def _maybe_compress(self, force: bool = False, focus: str | None = None) -> float:
        t0 = time.perf_counter()
        est = self.estimate()
        if force or self._engine(self.engine.should_compress, est):
            self._compacted = True
            out = self._engine(self.engine.compress, self.messages, current_tokens=est, focus_topic=focus, force=force)
            if out is not self.messages and out != self.messages:
                self.messages = out
                self.stats.compactions += 1
                if self.on_compress:
                    self.on_compress(out)
        return time.perf_counter() - t0

    def _request(self, prompt_tokens: int) -> float:
        self.stats.prompts.append(prompt_tokens)
        t0 = time.perf_counter()
        self._engine(self.engine.update_from_response, {"prompt_tokens": prompt_tokens, "completion_tokens": 50,
                                                        "total_tokens": prompt_tokens + 50})
        return time.perf_counter() - t0

    def run_turn(self, turn: Turn) -> None:
        spent = 0.0
        self._cpu, self._compacted = 0.0, False
        self.messages.append({"role": "user", "content": turn.user})
        spent += self._maybe_compress()  # preflight
        for assistant, results in turn.steps:
            spent += self._maybe_compress()  # before each API call
            spent += self._request(self.estimate())
            self.messages.append(assistant)
            t0 = time.perf_counter()
            for r in results:
                self.messages.append(r)
            spent += time.perf_counter() - t0
            spent += self._maybe_compress()  # after the tool batch
        spent += self._maybe_compress()
        spent += self._request(self.estimate())
        self.messages.append({"role": "assistant", "content": turn.final})
        t0 = time.perf_counter()
        key = self.engine.state.key or SessionKey("")
        self._engine(self.engine.runtime.store.ingest, key, self.messages, skip=self.engine.runtime.skip_message)
        spent += time.perf_counter() - t0
        self.stats.engine_seconds.append(spent)
        self.stats.engine_cpu.append(self._cpu)
        self.stats.compacted.append(self._compacted)


# -- a deterministic long agent conversation ----------------------------------------

_FILES = ["src/billing/invoice.py", "src/billing/tax.py", "src/api/routes.py", "tests/test_invoice.py",
          "docs/architecture.md", "deploy/helm/values.yaml", "scripts/migrate_2024.sql", "src/auth/tokens.py"]
_TOPICS = ["rounding of VAT on multi-currency invoices", "the flaky CI job on arm64 runners",
           "migrating the ledger table to bigint ids", "rate limiting of the public API",
           "the OAuth refresh-token rotation bug", "nightly export to the data warehouse",
           "p95 latency regression on /v2/orders", "replacing the cron scheduler"]
_WORDS = ("alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega vector matrix ledger invoice "
          "customer refund currency rounding latency request worker queue shard replica index cache").split()


def _lorem(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n_words))


def build_conversation(turns: int = 300, seed: int = 7, big_output_chars: int = 24000) -> Iterator[Turn]:
    """A coding-agent conversation: decisions, facts, paths, commands and big tool outputs.

    Turn 0 states the canary fact the demo later recovers exactly.
    """
    rng = random.Random(seed)
    call_no = 0
    for t in range(turns):
        topic = _TOPICS[t % len(_TOPICS)]
        path = _FILES[(t * 3) % len(_FILES)]
        if t == 0:
            user = ("Before we start: the staging database password rotation ticket is OPS-4417 and the "
                    "deploy freeze begins on 2026-12-18. Remember both. First task: look at " + path + ".")
        else:
            user = f"Turn {t}: next, about {topic}. Check {path} and tell me what you find. {_lorem(rng, 25)}"
        steps = []
        for _ in range(rng.choice([0, 1, 1, 2])):
            call_no += 1
            cid = f"call_{call_no}"
            if rng.random() < 0.5:
                name, args = "terminal", {"command": f"grep -n '{rng.choice(_WORDS)}' {path} | head -50"}
            else:
                name, args = "read_file", {"path": path}
            size = big_output_chars if rng.random() < 0.15 else rng.randint(400, 3000)
            body = f"$ {args.get('command', 'cat ' + path)}\n" + "\n".join(
                f"{i + 1:5d}: {_lorem(rng, 12)}" for i in range(max(1, size // 80)))
            assistant = {"role": "assistant", "content": f"Checking {path}.",
                         "tool_calls": [{"id": cid, "type": "function",
                                         "function": {"name": name, "arguments": json.dumps(args)}}]}
            result = {"role": "tool", "tool_call_id": cid, "name": name, "content": body[:size]}
            steps.append((assistant, [result]))
        final = (f"Done with turn {t}. Decision: keep {path} as the single owner of {topic}; "
                 f"next step is a test in tests/test_turn_{t}.py. {_lorem(rng, 40)}")
        yield Turn(user, steps, final)
