"""Backups of the live database: where they go, what they are named, and taking one.

Every copy goes through ``db.backup_file`` (SQLite's online backup API), so it is one
consistent snapshot while other processes write, checked before it is renamed into place.
Hygiene, rotate, FTS repair and ``/trove backup`` all take their backups here, and state's
drop of its assertion tables. It sits in the kernel beside ``db``: it takes anything
holding the config and the database (a ``Runtime``), so it names nothing above it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from .config import database_path
from .db import backup_file

if TYPE_CHECKING:
    from .config import TroveConfig
    from .db import Database


class Runtime(Protocol):
    """What a backup needs from the runtime: its config and its database."""

    @property
    def config(self) -> TroveConfig: ...

    @property
    def db(self) -> Database: ...


@dataclass(frozen=True)
class Backup:
    path: str
    bytes: int
    seconds: float


def backup_dir(config: TroveConfig) -> Path:
    """``backups/trove`` beside the database (``$HERMES_HOME/backups/trove`` for the default path).

    Every backup and the rolling rotate slot go there, so ``--db X`` never writes under a home
    that is not X's.
    """
    return database_path(config).parent / "backups" / "trove"


def timestamped_backup_path(runtime: Runtime, now: float | None = None) -> Path:
    """``<backup_dir>/<dbstem>-YYYYmmdd_HHMMSS.sqlite3``, with ``-2``, ``-3``... when taken."""
    stem = Path(runtime.db.path).stem
    stamp = time.strftime("%Y%m%d_%H%M%S", time.localtime(time.time() if now is None else now))
    base = backup_dir(runtime.config)
    path = base / f"{stem}-{stamp}.sqlite3"
    n = 2
    while path.exists():  # two backups in one second keep both
        path = base / f"{stem}-{stamp}-{n}.sqlite3"
        n += 1
    return path


def backup_to(runtime: Runtime, dest: Path) -> Backup:
    """Copy the live database to ``dest``; ``dest`` never holds a partial copy."""
    started = time.perf_counter()
    size = backup_file(runtime.db.read(), dest)
    return Backup(str(dest), size, time.perf_counter() - started)


def take_backup(runtime: Runtime) -> Backup:
    """A new timestamped backup in ``backup_dir``."""
    return backup_to(runtime, timestamped_backup_path(runtime))
