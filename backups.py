"""Backups of the live database: where they go, what they are named, and taking one.

Every copy goes through ``db.backup_file`` (one consistent snapshot, checked before it is renamed
into place); a half-made copy a killed process left is deleted later. A PostgreSQL store is not
copied: ``FileBackupUnavailable`` names the ``pg_dump`` to run, and ``backup_first`` lets an apply
go on only with the operator's ``--have-backup``. It takes a ``Runtime`` and names nothing above.
"""
from __future__ import annotations

import contextlib
import re
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote

from .backend import storage_error
from .config import database_path
from .db import backup_file
from .leases import process_gone

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


# ``db.backup_file`` makes its copy as ``.<name>.<pid>@<host>.<thread>.partial`` beside the destination.
PARTIAL = re.compile(r"\..+\.(\d+)@(.+)\.\d+\.partial")


def remove_dead_leftovers(directory: Path, pattern: re.Pattern[str]) -> int:
    """Delete the hidden files of ``directory`` that ``pattern`` matches and whose writer, the pid
    and host in its first two groups, is gone (a killed backup or import); returns how many went.
    A file of another host or container is left to it. Never raises."""
    removed = 0
    with contextlib.suppress(OSError):
        for path in directory.glob(".*"):
            found = pattern.fullmatch(path.name)
            if found is not None and process_gone(int(found.group(1)), found.group(2)):
                path.unlink(missing_ok=True)
                removed += 1
    return removed


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
    remove_dead_leftovers(dest.parent, PARTIAL)
    size = backup_file(runtime.db.read(), dest)
    return Backup(str(dest), size, round(time.perf_counter() - started, 3))  # milliseconds are plenty to read


def take_backup(runtime: Runtime) -> Backup:
    """A new timestamped backup in ``backup_dir``; on a PostgreSQL store ``FileBackupUnavailable``."""
    if runtime.db.kind != "sqlite":
        raise FileBackupUnavailable(runtime)
    return backup_to(runtime, timestamped_backup_path(runtime))


HAVE_BACKUP = "--have-backup"
OWN_BACKUP_NOTE = ("no file backup: a PostgreSQL store is not copied by trove; the operator confirmed their own"
                   f" backup ({HAVE_BACKUP})")


class FileBackupUnavailable(RuntimeError):
    """trove cannot copy a PostgreSQL store to a file; ``command`` is the ``pg_dump`` line that can (after a
    ``mkdir -p`` of the backups folder while it is missing)."""

    def __init__(self, runtime: Runtime):
        folder = backup_dir(runtime.config)  # pg_dump makes no folder: the line makes it when it is missing
        first = "" if folder.is_dir() else f"mkdir -p {shlex.quote(str(folder))} && "
        self.command = first + pg_dump_command(runtime)  # every answer that names it gives a line that runs
        super().__init__(f"a PostgreSQL store cannot be backed up to a file by trove: back it up with"
                         f" `{self.command}` (the password is left out: pg_dump reads it from PGPASSWORD or ~/.pgpass)")

    def refusal(self) -> dict[str, Any]:
        """The answer of an apply refused for want of a backup: what to run, then how to go on."""
        return {"status": "refused", "reason": str(self), "pg_dump": self.command,
                "fix": f"run that pg_dump (or take the server's own backup), then repeat the command with"
                       f" {HAVE_BACKUP}"}


def pg_dump_command(runtime: Runtime) -> str:
    """The ``pg_dump`` line that backs up the store's schema into ``backup_dir``, its URL without a password."""
    shown = without_password(runtime.db.path)  # PgDatabase.path: the URL with its password as ***
    stamp = time.strftime("%Y%m%d_%H%M%S", time.localtime())
    dest = backup_dir(runtime.config) / f"trove-{stamp}.dump"
    found = re.search(r"search_path\s*=\s*([^\s,&']+)", unquote(shown))
    name = found.group(1) if found else _current_schema(runtime)  # else set by a service file, PGOPTIONS, the role
    schema = f" --schema={shlex.quote(name)}" if name else ""
    return f"pg_dump --format=custom --file={shlex.quote(str(dest))}{schema} --dbname={shlex.quote(shown)}"


def without_password(shown: str) -> str:
    """A redacted URL or libpq string with its password left out: one shown as *** would be sent as the
    password itself, before PGPASSWORD or ~/.pgpass are even read."""
    if "://" not in shown:  # libpq keywords: ``password=***`` goes
        return re.sub(r"\s*\bpassword\s*=\s*\*\*\*", "", shown).strip()
    head, _, query = shown.partition("?")
    head = re.sub(r"(://[^:/@]*):\*\*\*@", r"\1@", head)
    kept = [part for part in query.split("&") if part and not part.lower().startswith("password=")]
    return head + ("?" + "&".join(kept) if kept else "")


def _current_schema(runtime: Runtime) -> str:
    """The schema the server puts trove's tables in; "" while it does not answer."""
    try:
        return str(runtime.db.read().execute("SELECT current_schema()").fetchone()[0] or "")
    except Exception as exc:
        if not storage_error(exc):
            raise
        return ""


def backup_first(runtime: Runtime, have_backup: bool = False) -> Backup | None:
    """The backup a mutating apply takes first: a file on SQLite; on PostgreSQL None when the operator
    confirmed their own backup (``have_backup``), else ``FileBackupUnavailable`` (the apply is refused)."""
    if runtime.db.kind == "sqlite":
        return take_backup(runtime)
    if have_backup:
        return None
    raise FileBackupUnavailable(runtime)


def backup_fields(backup: Backup | None) -> dict[str, Any]:
    """How an apply's answer names its backup: the file, or why there is none."""
    return {"backup": backup.path} if backup is not None else {"backup": None, "backup_note": OWN_BACKUP_NOTE}
