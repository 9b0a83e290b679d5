"""Natural time without a model: tool periods (periods.py) and occurrence time in message text (occurrence.py)."""

# The public face: the modules the host edge and bench/ use.
__all__ = ["occurrence", "recent", "rollups"]
