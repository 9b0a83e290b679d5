"""The payload report behind the doctor's ``payload_storage`` check (metadata only).

Combines the guard's scan for payloads still stored inline, the largest rows, and the census
of the sidecars (the directory, or a PostgreSQL store's table) with the refs that rows point at,
and counts the unreferenced sidecars: named by no row, owned by no session the store holds (a
session deleted since, or another store's; a live session's file no row names may back a stub
the prompt showed, so it is never counted). It reads; it changes nothing.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Collection
from pathlib import Path
from typing import Any

from ..rows import MAX_COUNT
from .guard import BASE64_RUN_MIN, scan_inline
from .sidecar import REF_RE, PayloadRuntime, payload_census, refs_in, session_tag


def unreferenced_files(directory: Path, refs: Collection[str], owners: Collection[str]) -> int:
    """Sidecar files in ``directory`` that no ref in ``refs`` names and whose session tag is none of ``owners``."""
    try:
        entries = [e for e in os.scandir(directory) if e.is_file(follow_symlinks=False)]
    except OSError:
        return 0
    return sum(1 for e in entries if (m := REF_RE.fullmatch(e.name)) and e.name not in refs
               and m.group(2) not in owners)


def doctor_report(runtime: PayloadRuntime, largest: int = 10, sample: int = 50) -> dict[str, Any]:
    """Inline payload rows (a sample), the largest rows, and payload directory stats; never content."""
    store = runtime.store
    inline = scan_inline(store.rows_maybe_holding_payloads(BASE64_RUN_MIN), sample)
    refs = set(inline.refs).union(*map(refs_in, store.contents_with_payload_refs()))
    census = payload_census(runtime, refs)
    if not census.get("table"):
        owners = {session_tag(row.session_id) for row in store.sessions(limit=MAX_COUNT)}
        census["unreferenced_files"] = unreferenced_files(runtime.payload_dir, refs, owners)
    return {"suspicious_inline_rows": inline.count, "suspicious_rows": list(inline.sample),
            "largest_rows": [dataclasses.asdict(r) for r in store.largest_rows(largest)],
            "payload_dir": census}
