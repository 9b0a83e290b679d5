"""Probes shared by the bounded-search tests."""
from __future__ import annotations

from hermes_trove import ftsbound


def walks(monkeypatch) -> list[int]:
    """The window sizes the row-by-row walk (``_Newest.at``) is asked for, in order; the walk still runs."""
    seen: list[int] = []
    real = ftsbound._Newest.at

    def counted(self, n):
        seen.append(n)
        return real(self, n)

    monkeypatch.setattr(ftsbound._Newest, "at", counted)
    return seen
