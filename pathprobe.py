"""Why a path cannot hold a trove database, read off the file system without opening it.

Read-only and creates nothing, so a process that never opened the file (``hermes trove
status``) can still name the problem; ``db`` uses the same ancestor check for its errors.
"""
from __future__ import annotations

import os
from pathlib import Path


def non_directory_ancestor(path: Path) -> Path | None:
    """The nearest existing ancestor of ``path`` when it is not a directory (a file where one should be)."""
    for parent in path.parents:
        if parent.exists():
            return None if parent.is_dir() else parent
    return None


SQLITE_HEADER = b"SQLite format 3\x00"
# the files SQLite keeps beside a database: a write-ahead log, its shared-memory index, a rollback journal
SIDECARS = ("-wal", "-shm", "-journal")


def sidecar_of(path: str | os.PathLike[str]) -> tuple[Path, str] | None:
    """The database whose SQLite sidecar ``path`` names, and the suffix, when that database file exists.

    SQLite deletes or truncates such a file when it checkpoints or closes the database beside it, so
    nothing written there survives. Compared on resolved paths, symlinks included.
    """
    real = Path(os.path.realpath(os.path.expanduser(path)))
    for suffix in SIDECARS:
        if real.name.endswith(suffix) and len(real.name) > len(suffix):
            base = real.with_name(real.name[: -len(suffix)])
            if base.is_file():
                return base, suffix
    return None


def probe_path(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` cannot hold a writable trove database, or None when nothing says so.

    Read-only and creates nothing: file types, permissions, the file header and free space,
    so a process that never opened the file (``hermes trove status``) can name the problem.
    """
    p = Path(path).expanduser()
    if p.is_dir():
        return f"{p} is a directory"
    blocker = non_directory_ancestor(p)
    if blocker is not None:
        return f"its parent {blocker} is not a directory"
    home = next((a for a in p.parents if a.exists()), None)
    if home is not None and not os.access(home, os.W_OK | os.X_OK):
        return f"the directory {home} is not writable"
    if p.exists():
        if not os.access(p, os.R_OK | os.W_OK):
            return f"{p} is not writable"
        try:
            with open(p, "rb") as fh:
                head = fh.read(len(SQLITE_HEADER))
        except OSError as exc:
            return f"{p} cannot be read ({exc.strerror or exc})"
        if head and head != SQLITE_HEADER:
            return f"{p} is not a SQLite database"
    if home is not None and _free_bytes(home) == 0:
        return f"the file system holding {home} is full"
    return None


def _free_bytes(directory: Path) -> int | None:
    try:
        st = os.statvfs(directory)
    except (OSError, AttributeError):  # no statvfs (Windows) or an unreadable mount
        return None
    return int(st.f_bavail) * int(st.f_frsize)
