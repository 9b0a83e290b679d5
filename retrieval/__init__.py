"""Finding and reading stored history for the ``trove_*`` recall tools.

``query`` builds FTS5 expressions and re-ranks (pure); ``search`` gathers and fuses
candidates. The tool families ``grep``, ``sessions``, ``expand`` and ``answer`` each own
their handlers and import none of each other.
"""
