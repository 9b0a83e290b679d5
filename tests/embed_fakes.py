"""Test doubles for the embeddings tests: a fake OpenAI-compatible /v1/embeddings server on
127.0.0.1 with deterministic bag-of-words vectors, a config/runtime builder for it, the
``fake`` (``fake_embeddings_server``) and ``fresh_embedding_caches`` fixtures (import them into
a test module) and ``index_all``."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from conftest import make_config

from hermes_trove.retrieval import embed_providers, indexer, vector_index
from hermes_trove.runtime import build_runtime

_WORD = re.compile(r"[a-z0-9]+")


def fake_vector(text: str, dim: int) -> list[float]:
    """Words hashed into ``dim`` buckets, L2-normalised: texts sharing words are close."""
    vec = [0.0] * dim
    for word in _WORD.findall(text.lower()):
        h = int(hashlib.md5(word.encode()).hexdigest(), 16)
        vec[h % dim] += 1.0 if (h >> 64) % 2 else -1.0
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return [v / norm for v in vec] if any(vec) else [1.0 / math.sqrt(dim)] * dim


class FakeEmbeddings:
    """A threaded HTTP server; model names "fake-<dim>" set the dimension. Records every request."""

    def __init__(self, delay_s: float = 0.0, fail: bool = False, fail_first: int = 0):
        self.requests: list[dict[str, Any]] = []
        self.delay_s = delay_s
        self.fail = fail
        self.fail_first = fail_first  # the first this many requests answer 500
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                outer.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
                if outer.delay_s:
                    time.sleep(outer.delay_s)
                if outer.fail or len(outer.requests) <= outer.fail_first or self.path != "/v1/embeddings":
                    self.send_response(500)
                    self.end_headers()
                    self.wfile.write(b'{"error": "boom"}')
                    return
                dim = int(str(body["model"]).rsplit("-", 1)[-1])
                data = [{"object": "embedding", "index": i, "embedding": fake_vector(t, dim)}
                        for i, t in enumerate(body["input"])]
                out = json.dumps({"object": "list", "data": data, "model": body["model"],
                                  "usage": {"prompt_tokens": len(data) * 3, "total_tokens": len(data) * 3}}).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        # polled every 50 ms, so shutting it down at the end of a test takes that, not the default 0.5 s
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeEmbeddings:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    def texts_sent(self) -> int:
        return sum(len(r["body"]["input"]) for r in self.requests)


def fake_runtime(tmp_path: Any, fake: FakeEmbeddings, model: str = "fake-32", **overrides: Any) -> Any:
    cfg = make_config(tmp_path)
    cfg = dataclasses.replace(cfg, embeddings_enabled=True, embedding_provider="openai", embedding_model=model,
                              embedding_base_url=fake.base_url, embedding_api_key_env="TROVE_TEST_EMBED_KEY",
                              **overrides)
    return build_runtime(cfg)


def fake_env(tmp_path: Any, fake: FakeEmbeddings, model: str = "fake-32") -> dict[str, str]:
    """The same configuration as environment variables, for subprocesses."""
    return {"HERMES_HOME": str(tmp_path), "TROVE_DATABASE_PATH": str(tmp_path / "trove.db"),
            "TROVE_EMBEDDINGS_ENABLED": "true", "TROVE_EMBEDDING_PROVIDER": "openai",
            "TROVE_EMBEDDING_MODEL": model, "TROVE_EMBEDDING_BASE_URL": fake.base_url}


@pytest.fixture(name="fake")
def fake_embeddings_server() -> Iterator[FakeEmbeddings]:
    """A running ``FakeEmbeddings`` as the ``fake`` fixture."""
    with FakeEmbeddings() as server:
        yield server


@pytest.fixture
def fresh_embedding_caches() -> Iterator[None]:
    """Providers and vector indexes are cached per process: each test starts and ends without
    any, and with no indexer thread left running."""
    embed_providers.forget_providers()
    vector_index.forget_indexes()
    yield
    indexer.stop_all()
    embed_providers.forget_providers()
    vector_index.forget_indexes()


def settled_pass(runtime: Any, budget_s: float = 30, tries: int = 40) -> indexer.PassReport:
    """One indexing pass, run again (briefly apart, ``tries`` at most) while it reports "busy": on a
    server store a pass steps aside while a writer of messages or summaries has not committed
    (``backend.settled_heads`` waits a second past the server's deadlock_timeout), which leaves the rows
    to the next pass."""
    report = indexer.run_pass(runtime, budget_s=budget_s)
    for _ in range(tries - 1):
        if report.status != "busy":
            break
        time.sleep(0.25)
        report = indexer.run_pass(runtime, budget_s=budget_s)
    return report


def index_all(runtime: Any) -> None:
    """Run indexer passes until everything eligible has its vectors."""
    while settled_pass(runtime).status == "partial":
        pass
