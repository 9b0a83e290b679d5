"""The payload report behind the doctor's ``payload_storage`` check (metadata only).

Combines the guard's scan for payloads still stored inline, the largest rows, and the census
of the sidecars (the directory, or a PostgreSQL store's table) with the refs that rows point at.
It reads; it changes nothing.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from .guard import BASE64_RUN_MIN, scan_inline
from .sidecar import PayloadRuntime, payload_census, refs_in


def doctor_report(runtime: PayloadRuntime, largest: int = 10, sample: int = 50) -> dict[str, Any]:
    """Inline payload rows (a sample), the largest rows, and payload directory stats; never content."""
    store = runtime.store
    inline = scan_inline(store.rows_maybe_holding_payloads(BASE64_RUN_MIN), sample)
    refs = set(inline.refs)
    for content in store.contents_with_payload_refs():
        refs.update(refs_in(content))
    return {"suspicious_inline_rows": inline.count, "suspicious_rows": list(inline.sample),
            "largest_rows": [dataclasses.asdict(r) for r in store.largest_rows(largest)],
            "payload_dir": payload_census(runtime, refs)}
