"""Exact evidence: citable refs to stored spans, deterministic computation over them, evidence packs."""

# The public face: the modules the host edge and bench/ use.
__all__ = ["handlers"]
