"""The operand vocabulary ``trove_compute`` shares with the assertion store: ``OperandSpec`` (an
``assertion_id`` operand is resolved into one citing its exact ref) and ``norm_key``. Pure.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .refs import RefClaim

ASSERTIONS_DISABLED = ("assertions are disabled (TROVE_ASSERTIONS_ENABLED=false): an assertion_id operand needs "
                       "the assertion store; set TROVE_ASSERTIONS_ENABLED=true to enable it, or cite an exact ref")


@dataclass(frozen=True)
class OperandSpec:
    """What a caller says about one operand, before anything is checked."""

    index: int
    claim: RefClaim | None
    claim_error: str | None = None
    assertion_id: str | None = None
    value: Any = None
    unit: str | None = None
    key: str | None = None
    label: str | None = None
    date: str | None = None
    tracked_key: str | None = None  # an assertion's subject and predicate: the key of a latest_state


def norm_key(text: str) -> str:
    """A key compared case- and space-insensitively, punctuation at the edges ignored."""
    return " ".join(re.sub(r"[^\w$€£¥₹%.:/+-]+", " ", text.casefold()).split()).strip(" .:")
