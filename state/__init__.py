"""Remembered state (opt-in): assertions extracted from raw messages, ``trove_query_state``,
the ``trove_retrieve`` controller and the pre-answer evidence block (each module says its part)."""

# The public face: the modules the host edge and bench/ use.
__all__ = ["assertion_store", "contract", "extract", "preanswer", "query", "retrieve"]
