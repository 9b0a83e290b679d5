"""Read and convert a lossless-claw source in a forked child process while this one writes.

Converting a row costs about as much Python as writing it, and threads share one interpreter lock,
so an apply forks one reader: it converts the conversations in order, prepares each message's store
columns (``MessageStore.prepare_rows``) and sends them in batches through a pipe, whose bounded buffer
keeps memory flat. An error in the child is raised again here; a child that vanishes is an ``ImportFailure``.
"""
from __future__ import annotations

import contextlib
import multiprocessing
import pickle
from collections.abc import Iterator, Sequence
from multiprocessing.connection import Connection

from ..store import MessageStore
from .report import ImportFailure
from .rows import SourceMessage, batches

_END = "end"      # (conversation_id, _END): that conversation is complete
_ERROR = "error"  # (exception, _ERROR): the child failed
# The pipe's kernel buffer. Linux's default, 64 KiB, is less than one batch, so each batch
# crossed in many small reads, each a wake-up of both processes; 1 MiB holds a few batches.
PIPE_BYTES = 1 << 20


def available() -> bool:
    """Forking is how the reader starts (it needs no importable package path)."""
    return "fork" in multiprocessing.get_all_start_methods()


class ForkedReader:
    """The messages of the given conversations, read, converted and prepared by a child process for
    the target session ``sessions`` pairs with each; ``store`` (never connected here) prepares the rows."""

    def __init__(self, path: str, sessions: Sequence[tuple[int, str]], store: MessageStore,
                 remaps: Sequence[tuple[str, str]] = (), busy_timeout_s: float = 2.0, batch_size: int = 500):
        ctx = multiprocessing.get_context("fork")
        self._recv, send = ctx.Pipe(duplex=False)
        _widen(send)
        self._proc = ctx.Process(target=_serve, name="trove-import-reader", daemon=True,
                                 args=(send, path, list(sessions), store, tuple(remaps), busy_timeout_s, batch_size))
        self._proc.start()
        send.close()  # only the child writes; EOF here means the child is gone

    def messages(self, conversation_id: int) -> Iterator[SourceMessage]:
        """The next conversation's messages; conversations must be asked for in order."""
        while True:
            try:
                conv, rows = self._recv.recv()
            except EOFError:
                raise ImportFailure("the source reader process stopped unexpectedly; nothing was written") from None
            if rows == _ERROR:
                raise conv
            if conv != conversation_id:
                raise ImportFailure(f"source reader out of order: expected conversation {conversation_id}, "
                                    f"got {conv}")
            if rows == _END:
                return
            yield from rows

    def close(self) -> None:
        if self._proc.is_alive():
            self._proc.terminate()
        self._proc.join(5)
        self._recv.close()


def prepared(store: MessageStore, session_id: str, batch: list[SourceMessage]) -> list[SourceMessage]:
    """The batch with store rows in place of the message dicts of rows to be written."""
    messages = [m.message for m in batch if m.message is not None and not m.skip]
    if not messages:
        return batch
    rows = iter(store.prepare_rows(session_id, messages))
    return [SourceMessage(m.key, m.source_id, None, m.skip, m.meta, m.note, next(rows))
            if m.message is not None and not m.skip else m for m in batch]


def _widen(conn: Connection) -> None:
    """Grow the pipe's buffer to ``PIPE_BYTES`` where the platform allows it (best effort)."""
    with contextlib.suppress(ImportError, OSError):
        import fcntl
        fcntl.fcntl(conn.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)


def _serve(out: Connection, path: str, sessions: list[tuple[int, str]], store: MessageStore,
           remaps: tuple[tuple[str, str], ...], busy_timeout_s: float, batch_size: int) -> None:
    """The child: convert and prepare each conversation's messages and send them in batches."""
    from .claw_db import ClawSource

    try:
        source = ClawSource(path, remaps, busy_timeout_s)
        by_id = {c.conversation_id: c for c in source.conversations()}
        for cid, session_id in sessions:
            conv = by_id.get(cid)
            if conv is None:
                raise ImportFailure(f"conversation {cid} disappeared from {path} while it was being read")
            for batch in batches(source.messages(conv, batch_size), batch_size):
                out.send((cid, prepared(store, session_id, batch)))
            out.send((cid, _END))
        source.close()
    except BaseException as exc:  # handed to the parent, raised there
        try:
            pickle.dumps(exc)
        except Exception:
            exc = ImportFailure(f"reading the source failed: {type(exc).__name__}: {exc}")
        with contextlib.suppress(BrokenPipeError, OSError):
            out.send((exc, _ERROR))
    finally:
        out.close()
