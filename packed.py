"""Long message text stored deflated in a SQLite file: ``pack`` on the way in, ``unpack`` on the way out.

A ``content`` of at least PACK_MIN_CHARS characters is stored as zlib-deflated UTF-8 in a BLOB when
that saves a quarter of the bytes (the BLOB type is the marker). SQL reads it through
``trove_text(content)`` (``register``), as the full-text view does. A server keeps plain text.
"""
from __future__ import annotations

import contextlib
import sqlite3
import zlib
from collections.abc import Iterator
from typing import Any

PACK_MIN_CHARS = 1024   # shorter text gains little and is read far more often
LEVEL = 1               # half level 6's time on a turn's tool output, for about 3% more bytes
MAX_BYTES = 64 << 20    # larger text stays plain; a packed value that would unpack past it is refused
SQL_TEXT = "trove_text"  # the SQL function: a stored content value -> its text
DEFLATE_MAX_RATIO = 1032  # deflate never expands a byte into more than this many
SQL_NOT_UTF8 = "trove_not_utf8"  # the SQL function: CAST(column AS BLOB) -> 1 when its bytes are no UTF-8
DAMAGED = "[trove: this message's stored text is damaged"  # how a packed value that does not unpack reads


def pack(text: str) -> str | bytes:
    """What the ``content`` column stores for ``text``: deflated bytes when long and worth it, else ``text``."""
    if not PACK_MIN_CHARS <= len(text) <= MAX_BYTES:
        return text
    raw = text.encode("utf-8")  # a lone surrogate raises UnicodeEncodeError, as the plain insert would
    if len(raw) > MAX_BYTES:
        return text
    deflated = zlib.compress(raw, LEVEL)
    return deflated if 4 * len(deflated) <= 3 * len(raw) else text


def unpack(value: Any) -> Any:
    """The text a stored ``content`` value holds; any other value is returned as it is.

    A damaged packed value, or one that would unpack past MAX_BYTES (no write makes one), reads
    as a marker naming the problem instead of failing the whole read or filling the memory (its
    ref hash then no longer matches, so nothing cites it as the original).
    """
    if type(value) is not bytes:
        return value
    try:
        if len(value) * DEFLATE_MAX_RATIO <= MAX_BYTES:  # cannot pass the bound: the plain, faster call
            return zlib.decompress(value).decode("utf-8")
        reader = zlib.decompressobj()
        raw = reader.decompress(value, MAX_BYTES)
        if reader.unconsumed_tail:
            return f"[trove: this message's stored text would unpack past {MAX_BYTES >> 20} MiB and is not read]"
        if not reader.eof:
            raise zlib.error("the packed value ends early")
        return raw.decode("utf-8")
    except (zlib.error, UnicodeDecodeError) as exc:
        return f"{DAMAGED} and cannot be read ({type(exc).__name__})]"


def register(conn: sqlite3.Connection) -> None:
    """Define ``trove_text`` on ``conn`` (the schema's view and triggers call it), and read a TEXT
    value whose bytes are no UTF-8 (a damaged row) with U+FFFD instead of failing the whole query."""
    conn.create_function(SQL_TEXT, 1, unpack, deterministic=True)
    conn.create_function(SQL_NOT_UTF8, 1, _not_utf8, deterministic=True)
    conn.text_factory = lambda raw: raw.decode("utf-8", "replace")


def _not_utf8(raw: Any) -> int:
    """1 when ``raw`` (a column cast to a BLOB) holds bytes that are no UTF-8 (the doctor's test)."""
    if type(raw) is not bytes:
        return 0
    try:
        raw.decode("utf-8")
        return 0
    except UnicodeDecodeError:
        return 1


@contextlib.contextmanager
def exact_text(conn: Any) -> Iterator[None]:
    """Inside: a TEXT value on ``conn`` whose bytes are no UTF-8 fails the read (``sqlite3.OperationalError``)
    instead of reading with U+FFFD, for a copy that must hold what the source holds. Other connections
    (a PostgreSQL one) are left as they are."""
    if not isinstance(conn, sqlite3.Connection):
        yield
        return
    before, conn.text_factory = conn.text_factory, str
    try:
        yield
    finally:
        conn.text_factory = before
