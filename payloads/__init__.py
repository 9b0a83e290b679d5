"""What crosses the storage boundary: sidecar payloads (files beside a SQLite store; on a
PostgreSQL one a table, and the files waiting to ship to it), the storage guard, secret redaction,
active-replay stubbing and the payload health report for the doctor."""

# The public face: the modules the host edge and bench/ use.
__all__ = ["guard", "redact", "replay", "sidecar", "spool"]
