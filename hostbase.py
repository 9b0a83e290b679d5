"""Fallback ``ContextEngine`` base for running without Hermes (demo, scripts, unit tests).

Inside Hermes the real ``agent.context_engine.ContextEngine`` is used; this mirrors only
the attributes and defaults the engine relies on, so the engine behaves the same.
"""
from __future__ import annotations

from typing import Any

try:  # the real host base class when Hermes is installed
    from agent.context_engine import ContextEngine
except ImportError:  # pragma: no cover - exercised when Hermes is absent
    class ContextEngine:  # type: ignore[no-redef]
        last_prompt_tokens: int = 0
        last_completion_tokens: int = 0
        last_total_tokens: int = 0
        threshold_tokens: int = 0
        context_length: int = 0
        compression_count: int = 0
        threshold_percent: float = 0.75
        protect_first_n: int = 3
        protect_last_n: int = 6

        def on_session_reset(self) -> None:
            self.last_prompt_tokens = 0
            self.last_completion_tokens = 0
            self.last_total_tokens = 0
            self.compression_count = 0

        def get_status(self) -> dict[str, Any]:
            return {"threshold_tokens": self.threshold_tokens, "context_length": self.context_length}
