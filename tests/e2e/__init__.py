"""End-to-end suite: the real Hermes host against a fake model server (see docs/testing.md)."""
