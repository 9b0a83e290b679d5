"""The payload directory of a PostgreSQL store as the outbox's shipper reads it.

On a server store the guard still writes each payload as a local file (no network in a turn);
``SpoolDir`` hands the shipper the waiting files as rows for the server's ``payloads`` table
(``outbox.PayloadSpool``) and removes each once the server holds it.
"""
from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..outbox import PAYLOAD_COLUMNS
from .sidecar import REF_RE, PayloadError, encode_text, load_record, log


class SpoolDir:
    """The payload directory of a PostgreSQL store, as the outbox's shipper reads it: each file a
    payload waiting to ship (``outbox.PayloadSpool``); a shipped one is removed."""

    def __init__(self, directory: Path):
        self.directory = directory

    def pending(self, max_bytes: int) -> list[tuple[Any, ...]]:
        try:
            entries = sorted((e for e in os.scandir(self.directory) if REF_RE.fullmatch(e.name)),
                             key=lambda e: e.stat().st_mtime)
        except OSError:
            return []
        out: list[tuple[Any, ...]] = []
        total = 0
        for entry in entries:
            try:
                record = load_record(self.directory, entry.name)
            except PayloadError:
                log.warning("trove: payload %s in %s is damaged; it stays there, unshipped", entry.name,
                            self.directory)
                continue
            data = encode_text(record["payload"])
            if out and total + len(data) > max_bytes:
                break
            meta = {k: v for k, v in record.items() if k not in (*PAYLOAD_COLUMNS.split(", "), "format", "payload")}
            out.append((record["ref"], record["session_id"], record["kind"], record["mime"],
                        record["original_chars"], record["original_bytes"], record["sha256"],
                        json.dumps(meta, ensure_ascii=False, default=str), data, float(record["created_at"])))
            total += len(data)
        return out

    def shipped(self, refs: Sequence[str]) -> None:
        for ref in refs:
            (self.directory / ref).unlink(missing_ok=True)
