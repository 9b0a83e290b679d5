"""Remembered state (opt-in): assertions extracted from raw messages, ``trove_query_state``,
the ``trove_retrieve`` controller and the pre-answer evidence block.

``contract`` (pure: the extraction prompt, parsing and verifying the model's JSON, relations),
``assertion_store`` (all SQL), ``extract`` (leased bounded passes, status, rebuild, drop),
``query`` (``trove_query_state``), ``retrieve`` (``trove_retrieve``), ``preanswer`` (the hook's block).
"""

# The public face: the modules the host edge and bench/ use.
__all__ = ["assertion_store", "contract", "extract", "preanswer", "query", "retrieve"]
