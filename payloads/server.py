"""Payload sidecars on a PostgreSQL store: the ``payloads`` table every machine of a fleet reads.

With ``TROVE_DATABASE_URL`` set, a payload the storage guard moves out of a row is one row here
(ref, owner, metadata, the exact UTF-8 bytes). It waits as a local file first (a turn never waits
on the network) until the outbox's shipper uploads it (``spool.SpoolDir``), before any message that
names it. ``sidecar`` chooses the home and verifies what comes back; this module moves and counts rows.
"""
from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable
from typing import Any

from ..outbox import PAYLOAD_COLUMNS
from ..pgdb import PgDatabase

log = logging.getLogger("hermes_trove.payloads")

_RECORD_KEYS = ("ref", "session_id", "kind", "mime", "original_chars", "original_bytes", "sha256")


class ServerPayloads:
    """The ``payloads`` table of one PostgreSQL store (the URL's schema)."""

    def __init__(self, db: PgDatabase):
        self.db = db

    @property
    def where(self) -> str:
        return f"the payloads table of {self.db.path}"

    # -- reading --------------------------------------------------------------------------
    def load(self, ref: str) -> dict[str, Any] | None:
        """The row of ``ref`` as a file's record (metadata, ``payload`` text), or None; unverified."""
        row = self.db.read().execute(f"SELECT {PAYLOAD_COLUMNS} FROM payloads WHERE ref = ?", (ref,)).fetchone()
        if row is None:
            return None
        try:
            meta = json.loads(row["meta"] or "{}")
        except ValueError:
            meta = {}
        record = {**(meta if isinstance(meta, dict) else {}), **{k: row[k] for k in _RECORD_KEYS},
                  "created_at": row["created_at"]}
        record["payload"] = bytes(row["data"]).decode("utf-8", "surrogatepass")
        return record

    def facts(self, ref: str) -> tuple[str, str, str] | None:
        """(recorded digest, owner, digest of the stored bytes) of ``ref`` without its payload, or None."""
        row = self.db.read().execute("SELECT sha256, session_id, encode(sha256(data), 'hex') FROM payloads"
                                     " WHERE ref = ?", (ref,)).fetchone()
        return None if row is None else (str(row[0]), str(row[1]), str(row[2]))

    def session_refs(self, session_id: str, limit: int) -> list[str]:
        """One session's refs, newest first."""
        return [str(r[0]) for r in self.db.read().execute(
            "SELECT ref FROM payloads WHERE session_id = ? ORDER BY created_at DESC, ref LIMIT ?",
            (session_id, int(limit)))]

    def census(self, refs: Iterable[str]) -> dict[str, Any]:
        """Rows and bytes of the table, which of ``refs`` have no row or fail their digest, and how many
        rows are unreferenced (the doctor's counterpart of the payload directory's census)."""
        conn = self.db.read()
        rows, total = conn.execute("SELECT COUNT(*), COALESCE(SUM(length(data)), 0) FROM payloads").fetchone()
        referenced = sorted(set(refs))
        present = damaged = 0
        if referenced:
            present, damaged = conn.execute(
                "SELECT COUNT(*), COUNT(*) FILTER (WHERE encode(sha256(data), 'hex') <> sha256) FROM payloads"
                " WHERE ref = ANY(?::text[])", (referenced,)).fetchone()
        unowned = conn.execute(  # rows no message names, of sessions the store no longer holds
            "SELECT COUNT(*) FROM payloads p WHERE NOT (ref = ANY(?::text[])) AND NOT EXISTS"
            " (SELECT 1 FROM sessions s WHERE s.session_id = p.session_id)", (referenced,)).fetchone()[0]
        return {"path": self.where, "table": "payloads", "exists": True, "files": int(rows), "bytes": int(total),
                "temp_files": 0, "stale_temp_files": 0, "unreferenced_files": int(unowned),
                "referenced_refs": len(referenced),
                "missing_refs": len(referenced) - int(present), "unreadable_refs": int(damaged)}


_stores: dict[str, ServerPayloads] = {}
_stores_lock = threading.Lock()


def payloads_for(url: str) -> ServerPayloads:
    """The payload table of the store ``url`` selects (one object per URL in this process)."""
    with _stores_lock:
        store = _stores.get(url)
        if store is None:
            store = _stores[url] = ServerPayloads(PgDatabase(url))
        return store
