"""The reconciliation report of one import run, and the error that stops a run.

Counters follow one identity per source: ``scanned = eligible + skipped_empty +
skipped_synthetic + skipped_branch + invalid_rows`` and ``eligible = would_import +
skipped_existing``. The report renders as JSON (``--json``) or as aligned text.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

MAX_WARNINGS = 200


class ImportFailure(RuntimeError):
    """Nothing could be imported: a clear, operator-facing reason."""


@dataclass
class ImportReport:
    mode: str = "dry-run"
    source_kind: str = ""
    source_db: str | None = None
    source_jsonl: list[str] = field(default_factory=list)
    target_db: str = ""
    import_id: str = ""
    namespace: str = ""
    agent: str = ""
    session_identity: str = "session_id"
    conversations: int = 0
    sessions: int = 0
    scanned: int = 0
    eligible: int = 0
    would_import: int = 0
    imported: int = 0
    skipped_existing: int = 0
    skipped_empty: int = 0
    skipped_synthetic: int = 0
    skipped_branch: int = 0
    invalid_rows: int = 0
    skipped_duplicate_sessions: int = 0
    files_resolved: int = 0
    files_unresolved: int = 0
    summaries_scanned: int = 0
    summaries_would_import: int = 0
    summaries_imported: int = 0
    summaries_skipped_existing: int = 0
    summaries_skipped_unresolved: int = 0
    backup_path: str | None = None
    warnings: list[str] = field(default_factory=list)
    warnings_dropped: int = 0

    def warn(self, text: str) -> None:
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(text)
        else:
            self.warnings_dropped += 1

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=False)

    def to_text(self) -> str:
        d = dataclasses.asdict(self)
        warnings = d.pop("warnings")
        width = max(len(k) for k in d)
        lines = [f"{k.ljust(width)}  {v}" for k, v in d.items()
                 if v not in (None, [], "") and not (k == "warnings_dropped" and v == 0)]
        if self.mode == "dry-run" and self.would_import + self.summaries_would_import:
            lines.append("dry run: nothing was written; pass --apply to import")
        lines += [f"warning: {w}" for w in warnings]
        return "\n".join(lines)
