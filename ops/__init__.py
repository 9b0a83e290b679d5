"""Operators' reports and repairs: status, doctor, maintenance, hygiene, backups and rotation."""

# The public face: the modules the host edge and bench/ use.
__all__ = ["dag_view", "doctor", "handlers", "hygiene", "install", "maintenance", "rotate", "status"]
