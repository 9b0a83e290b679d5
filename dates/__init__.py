"""Natural time in English, the kernel's one time grammar: no model, no storage, no tools.

Public face: ``resolve_occurrences`` / ``occurrences_for`` (the time expressions of a message,
resolved against when it was said, as ``Occurrence`` rows), ``find_expressions`` (the same
grammar on a bare phrase, for tool periods), ``speaks_of_now`` (which expressions are words for
the moment of speaking, such as "currently") and ``intervals`` (UTC day, ISO week, month and
year arithmetic). ``lexicon``, ``tense``, ``cursor`` and ``expressions`` hold the grammar itself.
"""
from . import intervals
from .expressions import Occurrence, find_expressions
from .occurrence import occurrences_for, resolve_occurrences
from .present import speaks_of_now

__all__ = ["Occurrence", "find_expressions", "intervals", "occurrences_for", "resolve_occurrences", "speaks_of_now"]
