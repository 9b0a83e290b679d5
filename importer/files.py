"""Externalized payloads: find a lossless-claw ``large_files`` blob on this machine.

``storage_uri`` is an absolute path on the machine that wrote the database. A copied
state directory is found through ``--state-dir-remap OLD=NEW`` prefixes, then through
the conventional ``<state>/lcm-files/<conversation>/<file_id>.*`` layout beside the
database. Reads are capped; an unreadable blob leaves the reference text in place.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

MAX_FILE_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class FileRef:
    file_id: str
    conversation_id: int
    storage_uri: str
    file_name: str


def parse_remap(text: str) -> tuple[str, str]:
    """``OLD=NEW`` → a prefix pair; raises ValueError with the expected form."""
    old, sep, new = text.partition("=")
    if not sep or not old.strip() or not new.strip():
        raise ValueError(f"--state-dir-remap expects OLD=NEW, got {text!r}")
    return old.strip().rstrip("/"), str(Path(new.strip()).expanduser()).rstrip("/")


def candidate_paths(ref: FileRef, remaps: Sequence[tuple[str, str]], state_dirs: Sequence[Path]) -> list[Path]:
    """Where the blob may be, most specific first (pure)."""
    uri = ref.storage_uri[len("file://"):] if ref.storage_uri.startswith("file://") else ref.storage_uri
    out = [Path(new + uri[len(old):]) for old, new in remaps if uri == old or uri.startswith(old + "/")]
    out += [Path(uri)] if uri else []
    for root in [Path(new) for _, new in remaps] + list(state_dirs):
        folder = root / "lcm-files" / str(ref.conversation_id)
        if ref.file_name:
            out.append(folder / f"{ref.file_id}{Path(ref.file_name).suffix}")
        out.append(folder / ref.file_id)
    return out


@dataclass(frozen=True)
class LargeFiles:
    """The ``large_files`` rows of one source database, resolved lazily."""

    refs: dict[str, FileRef]
    remaps: Sequence[tuple[str, str]]
    state_dirs: Sequence[Path]

    def read(self, file_id: str) -> tuple[str | None, str]:
        """(text, "") when found, else (None, why) for a warning."""
        ref = self.refs.get(file_id)
        if ref is None:
            return None, f"{file_id} has no large_files row"
        tried = candidate_paths(ref, self.remaps, self.state_dirs)
        for path in tried:
            if not path.is_file():  # the blob under its id with another extension
                siblings = sorted(path.parent.glob(f"{ref.file_id}.*")) if path.parent.is_dir() else []
                if not siblings:
                    continue
                path = siblings[0]
            size = path.stat().st_size
            if size > MAX_FILE_BYTES:
                return None, f"{file_id} at {path} is {size} bytes, over the {MAX_FILE_BYTES}-byte import cap"
            return path.read_bytes().decode("utf-8", errors="replace"), ""
        return None, f"{file_id} not found at {ref.storage_uri} (use --state-dir-remap OLD=NEW for a copied state dir)"
