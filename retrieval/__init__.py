"""Finding and reading stored history for the ``trove_*`` recall tools.

``query`` builds FTS5 expressions and re-ranks (pure); ``search`` gathers and fuses
candidates. The tool families ``grep``, ``expand`` (describe, expand, load_session) and
``answer`` each own their handlers and import none of each other.
"""

# The public face: the modules the host edge and bench/ use.
__all__ = ["answer", "embed_providers", "embed_text", "expand", "fusion", "grep", "indexer", "query", "recall",
           "recall_search", "rescore", "semantic", "vector_index", "vector_store"]
