"""Frozen rows every source reader yields and the import loop consumes: a converted (or skipped)
message, a lossless-claw DAG node with its ordered lineage, and a ``Unit`` (one source conversation).
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

SKIP_EMPTY = "empty"
SKIP_SYNTHETIC = "synthetic"
SKIP_BRANCH = "branch"
SKIP_INVALID = "invalid"


class SourceMessage(NamedTuple):  # a tuple: cheap to build and to send between processes
    key: str                      # idempotency key inside one import id
    source_id: int | str          # lossless-claw message_id, or the JSONL entry id / line
    message: dict[str, Any] | None
    skip: str = ""                # "" or one of the SKIP_* reasons
    meta: str | None = None       # compact provenance JSON for the import ledger
    note: str = ""                # operator warning about this row
    row: tuple[Any, ...] | None = None  # the message's store columns, when prepared in advance


@dataclass(frozen=True)
class SourceSummary:
    key: str
    summary_id: str
    depth: int
    content: str
    earliest_at: float | None
    latest_at: float | None
    model: str
    message_ids: tuple[int, ...]  # leaf sources, in ordinal order
    child_ids: tuple[str, ...]    # condensed sources (lossless-claw's summary_parents), in order


@dataclass(frozen=True)
class Unit:
    label: str                    # for warnings: "conversation 3" or a file path
    session: str                  # source session identity before namespacing
    messages: Callable[[], Iterable[SourceMessage]]
    summaries: Callable[[], list[SourceSummary]] | None = None
    notes: tuple[str, ...] = ()
    imported_as: str = ""         # the target session another source already filled: counted, not written


def batches(rows: Iterable[SourceMessage], size: int) -> Iterator[list[SourceMessage]]:
    """``rows`` in lists of ``size`` (at least 1), the last one shorter."""
    it = iter(rows)
    while batch := list(itertools.islice(it, max(1, size))):
        yield batch
