"""Finding and reading stored history: full-text query building and the recall tools' search, expand and answer logic."""
