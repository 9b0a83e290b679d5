"""Exact evidence: citable refs to stored spans, deterministic computation over them, evidence packs."""
