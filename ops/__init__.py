"""Operators' reports and repairs: status, doctor, maintenance, hygiene, backups and rotation."""
