"""Time-shaped reading: tool periods (periods.py, ISO forms over the kernel's dates grammar),
day/week/month rollups and ``trove_recent``."""

# The public face: the modules the host edge and bench/ use.
__all__ = ["periods", "recent", "rollups"]
