"""In-memory vector search over one generation: int8 rows, sign-bit prescreen, numpy scoring.

A ``VectorIndex`` mirrors a generation's rows, reading only those past the highest vector_id it
holds (a removal reloads it). Up to ``EXACT_LIMIT`` candidates are scored exactly; above that a
Hamming prescreen over sign bits keeps ~1% (at least ``PRESCREEN_MIN``) to score. No SQL here.
"""
from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .vector_store import StoredVector, VectorStore

EXACT_LIMIT = 20000
PRESCREEN_MIN = 4000
PRESCREEN_FRACTION = 0.01
SCORE_BLOCK = 32768
KINDS = ("message", "summary")
# Each row's metadata: KINDS index, store_id or node_id, span (end -1: the whole item), time (nan: unknown)
# and session code (an index into ``session_names``).
META = [("kind", "u1"), ("item", "i8"), ("start", "i8"), ("end", "i8"), ("at", "f8"), ("session", "i4")]


def _np() -> Any:
    import numpy

    return numpy


def quantize(vectors: Any) -> tuple[Any, Any]:
    """Symmetric per-row int8: ``q = rint(v / (max|v| / 127))``; returns (q int8, scale float32)."""
    np = _np()
    v = np.asarray(vectors, dtype=np.float32)
    scale = np.maximum(np.abs(v).max(axis=1), 1e-12) / 127.0
    q = np.clip(np.rint(v / scale[:, None]), -127, 127).astype(np.int8)
    return q, scale.astype(np.float32)


def sign_words(rows: Any) -> Any:
    """Sign bits of each row packed into uint64 words: shape (rows, words)."""
    np = _np()
    bits = np.asarray(rows) > 0
    pad = (-bits.shape[1]) % 64
    if pad:
        bits = np.pad(bits, ((0, 0), (0, pad)))
    return np.packbits(bits, axis=1).view(np.uint64)


def _popcount(x: Any) -> Any:
    np = _np()
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(x)
    table = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)
    return table[x.view(np.uint8)].reshape(*x.shape, 8).sum(axis=-1)


@dataclass(frozen=True)
class SemanticHit:
    kind: str                     # "message" | "summary"
    item_id: int                  # store_id or node_id
    score: float                  # cosine similarity, -1..1
    span: tuple[int, int] | None  # the best chunk's [start, end) in the message content; None for summaries
    session_id: str = ""
    at: float | None = None       # message time, or the summary's latest covered time


class _Grow:
    """A growable numpy buffer (capacity doubles), so appends cost O(new rows) amortized."""

    def __init__(self, dtype: Any, width: int = 0):
        np = _np()
        self.data = np.zeros((1024, width) if width else (1024,), dtype=dtype)
        self.n = 0

    def extend(self, rows: Any) -> None:
        np = _np()
        need = self.n + len(rows)
        if need > len(self.data):
            cap = max(need, 2 * len(self.data))
            grown = np.zeros((cap, *self.data.shape[1:]), dtype=self.data.dtype)
            grown[:self.n] = self.data[:self.n]
            self.data = grown
        self.data[self.n:need] = rows
        self.n = need

    @property
    def view(self) -> Any:
        return self.data[:self.n]


class VectorIndex:
    """One generation's vectors in RAM: int8 rows + scales, sign bits, row metadata."""

    def __init__(self, generation_id: int, dim: int):
        np = _np()
        self.generation_id = generation_id
        self.dim = dim
        self.words = (dim + 63) // 64
        self.top = 0
        self.removed = -1
        self.unknown = 0  # rows of a kind no version writes (a damaged store): never candidates
        self._q = _Grow(np.int8, dim)
        self._scale = _Grow(np.float32)
        self._bits = _Grow(np.uint64, self.words)  # row-major while growing; transposed per search epoch
        self._bits_cm: Any = None  # column-major copy (words, n) for the Hamming pass
        self._meta = _Grow(np.dtype(META))
        self.session_names: list[str] = []
        self._session_codes: dict[str, int] = {}
        self.lock = threading.Lock()

    def __len__(self) -> int:
        return self._q.n

    @property
    def nbytes(self) -> int:
        return int(sum(v.data.nbytes for v in vars(self).values() if isinstance(v, _Grow)))  # every buffer

    def current(self, head: tuple[int, int]) -> bool:
        """Whether ``store.scan_head`` output ``head`` shows nothing this index lacks."""
        return self.removed >= 0 and head[1] == self.removed and head[0] <= self.top

    def refresh(self, store: VectorStore) -> int:
        """Catch up with the database; returns rows added (a removal reloads everything)."""
        top, removed = store.scan_head(self.generation_id)
        if removed != self.removed and self.removed >= 0:
            self.__init__(self.generation_id, self.dim)  # type: ignore[misc]
        self.removed = removed
        if top <= self.top:
            return 0
        added = 0
        for page in store.iter_vectors(self.generation_id, self.top):
            self.append(page)
            added += len(page)
        return added

    def append(self, rows: Sequence[StoredVector]) -> None:
        np = _np()
        if not rows:
            return
        q = np.frombuffer(b"".join(r.vector for r in rows), dtype=np.int8).reshape(len(rows), self.dim)
        self._q.extend(q)
        self._scale.extend(np.array([r.scale for r in rows], dtype=np.float32))
        self._bits.extend(sign_words(q))
        meta = np.empty(len(rows), dtype=META)  # filled a field at a time: faster than from row tuples
        codes = [KINDS.index(r.kind) if r.kind in KINDS else 255 for r in rows]
        meta["kind"] = codes
        self.unknown += codes.count(255)
        meta["item"] = [r.item_id for r in rows]
        meta["start"] = [r.span_start for r in rows]
        meta["end"] = [-1 if r.span_end is None else r.span_end for r in rows]
        meta["at"] = [np.nan if r.at is None else r.at for r in rows]
        meta["session"] = [self._code(r.session_id) for r in rows]
        self._meta.extend(meta)
        self.top = max(self.top, rows[-1].vector_id)
        self._bits_cm = None

    def _code(self, session_id: str) -> int:
        code = self._session_codes.get(session_id)
        if code is None:
            code = self._session_codes[session_id] = len(self.session_names)
            self.session_names.append(session_id)
        return code

    def _mask(self, kinds: Sequence[str], session_ids: Sequence[str] | None, since: float | None,
              before: float | None) -> Any:
        np = _np()
        masks = []
        wanted = [KINDS.index(k) for k in kinds if k in KINDS]
        if len(wanted) < len(KINDS) or self.unknown:
            masks.append(np.isin(self._meta.view["kind"], np.array(wanted, dtype=np.uint8)))
        if session_ids is not None:
            codes = [self._session_codes[s] for s in session_ids if s in self._session_codes]
            masks.append(np.isin(self._meta.view["session"], np.array(codes, dtype=np.int32)))
        if since is not None:
            masks.append(self._meta.view["at"] >= since)  # nan compares False: an undated row is outside any time bound
        if before is not None:
            masks.append(self._meta.view["at"] < before)
        return functools.reduce(np.logical_and, masks) if masks else None

    def search(self, query: Any, *, kinds: Sequence[str] = KINDS, session_ids: Sequence[str] | None = None,
               since: float | None = None, before: float | None = None, limit: int = 50) -> list[SemanticHit]:
        """The best ``limit`` items (one hit per message or summary, its best chunk) by cosine."""
        np = _np()
        n = len(self)
        if n == 0 or limit <= 0:
            return []
        qv = np.asarray(query, dtype=np.float32).reshape(-1)
        mask = self._mask(kinds, session_ids, since, before)
        cand = np.flatnonzero(mask) if mask is not None else None
        count = n if cand is None else len(cand)
        if count == 0:
            return []
        if count > EXACT_LIMIT:
            cand = self._prescreen(qv, cand, count)
        scores = self._score(qv, cand)
        rows = np.arange(n) if cand is None else cand
        order = np.argsort(-scores, kind="stable")
        out: list[SemanticHit] = []
        seen: set[tuple[int, int]] = set()
        meta = self._meta.view
        for pos in order:
            kind, item, start, end, at, session = meta[int(rows[pos])].item()
            if (kind, item) in seen or kind >= len(KINDS):  # a kind no version writes: never a hit
                continue
            seen.add((kind, item))
            span = None if KINDS[kind] != "message" or end < 0 else (start, end)
            out.append(SemanticHit(KINDS[kind], item, float(scores[pos]), span, self.session_names[session],
                                   None if np.isnan(at) else at))
            if len(out) >= limit:
                break
        return out

    def _prescreen(self, qv: Any, cand: Any, count: int) -> Any:
        np = _np()
        if self._bits_cm is None or self._bits_cm.shape[1] != len(self):
            self._bits_cm = np.ascontiguousarray(self._bits.view.T)
        qbits = sign_words(qv[None, :])[0]
        bits = self._bits_cm if cand is None else self._bits_cm[:, cand]
        dist = _popcount(bits[0] ^ qbits[0]).astype(np.uint16)
        for w in range(1, self.words):
            dist += _popcount(bits[w] ^ qbits[w])
        pool = min(count, max(PRESCREEN_MIN, int(count * PRESCREEN_FRACTION)))
        keep = np.argpartition(dist, pool - 1)[:pool]
        return keep if cand is None else cand[keep]

    def _score(self, qv: Any, cand: Any) -> Any:
        np = _np()
        q, scale = self._q.view, self._scale.view
        if cand is None:
            out = np.empty(len(q), dtype=np.float32)
            for b in range(0, len(q), SCORE_BLOCK):
                out[b:b + SCORE_BLOCK] = (q[b:b + SCORE_BLOCK].astype(np.float32) @ qv) * scale[b:b + SCORE_BLOCK]
            return out
        return (q[cand].astype(np.float32) @ qv) * scale[cand]


_INDEXES: dict[tuple[str, int], VectorIndex] = {}
_INDEXES_LOCK = threading.Lock()


def index_for(db_path: str, generation_id: int, dim: int) -> VectorIndex:
    """The process-wide index of one generation of one database file."""
    with _INDEXES_LOCK:
        found = _INDEXES.get((db_path, generation_id))
        if found is None or found.dim != dim:
            found = _INDEXES[(db_path, generation_id)] = VectorIndex(generation_id, dim)
        return found


def forget_indexes() -> None:
    with _INDEXES_LOCK:
        _INDEXES.clear()
