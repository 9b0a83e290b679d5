"""What crosses the storage boundary: sidecar payload files, the storage guard, secret redaction and replay stubbing."""
