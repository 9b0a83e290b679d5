"""Reading the LoCoMo dev split for the benchmarks (bench_retrieval, bench_recall, bench_temporal,
bench_evidence, bench_embed): where it lives, its sessions in order with their dates, and
the evidence dialog ids of a question. Plain data, no hermes_trove import; ``load_package``
registers this checkout as ``hermes_trove`` when a bench is ready to use it.
"""
from __future__ import annotations

import json
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo-dev.json"
_DIA = re.compile(r"D\d+:\d+")
_SESSION = re.compile(r"session_(\d+)")


def load_package() -> Any:
    """Register this checkout as ``hermes_trove`` (scripts/_bootstrap.py) and return it."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    import _bootstrap  # noqa: F401

    return sys.modules["hermes_trove"]


def load_dev_split(path: Path, script: str) -> list[dict[str, Any]] | None:
    """The LoCoMo conversations at ``path`` with the package registered; None (said) when absent."""
    if not path.exists():
        print(f"{script}: skipped, {path} not found (the LoCoMo dev split lives in ../shared/data)")
        return None
    load_package()
    data: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    return data


def session_time(text: str) -> datetime | None:
    """LoCoMo session stamps look like '1:56 pm on 8 May, 2023' (read as UTC)."""
    try:
        return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    except (ValueError, AttributeError):
        return None


def sessions(conversation: dict[str, Any]) -> list[tuple[str, datetime | None, list[dict[str, Any]]]]:
    """(key such as 'session_3', its date or None, its turns) in session order."""
    keys = sorted((k for k, v in conversation.items() if _SESSION.fullmatch(k) and isinstance(v, list)),
                  key=lambda k: int(k.split("_")[1]))
    return [(k, session_time(str(conversation.get(f"{k}_date_time", ""))), conversation[k]) for k in keys]


def evidence_ids(raw: list[Any] | None) -> list[str]:
    """A question's evidence dialog ids in order; malformed entries like 'D8:6; D9:17' are split."""
    return [d for item in raw or [] for d in _DIA.findall(str(item))]


def turns(conversation: dict[str, Any]) -> list[tuple[str, dict[str, Any], float | None]]:
    """(speaker role, turn, timestamp) in conversation order: speaker_a is the user, turns 30 s apart."""
    speaker_a = conversation.get("speaker_a")
    out = []
    for _, stamp, session_turns in sessions(conversation):
        base = None if stamp is None else stamp.timestamp()
        for i, turn in enumerate(session_turns):
            role = "user" if turn.get("speaker") == speaker_a else "assistant"
            out.append((role, turn, None if base is None else base + i * 30))
    return out
