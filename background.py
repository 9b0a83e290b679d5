"""Background passes: one thread per database file and kind of pass, never waited on.

An unforced start runs at most once per interval; a forced start (new work just landed) skips
the interval, and one arriving while a pass runs asks for one more pass right after it. A pass
that raises is logged (the next one retries); the caller's turn only ever gets a thread or None.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger("hermes_trove.background")


class PassScheduler:
    def __init__(self, thread_name: str):
        self.thread_name = thread_name
        self.threads: dict[str, threading.Thread] = {}  # database path -> its latest pass
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._rerun: set[str] = set()

    def start(self, path: str, prepare: Callable[[], Callable[[], None] | None], *, interval_s: float,
              force: bool = False) -> threading.Thread | None:
        """Start a pass for ``path`` unless one runs or ``interval_s`` has not passed since the last
        start. ``prepare`` is called only when a pass starts and returns its work (None: nothing)."""
        with self._lock:
            running = self.threads.get(path)
            if running is not None and running.is_alive():
                if force:
                    self._rerun.add(path)
                return None
            now = time.monotonic()
            if not force and path in self._last and now - self._last[path] < interval_s:
                return None
            self._last[path] = now
            work = prepare()
            if work is None:
                return None
            thread = threading.Thread(target=self._run, args=(path, work), name=self.thread_name, daemon=True)
            self.threads[path] = thread
            thread.start()
        return thread

    def _run(self, path: str, work: Callable[[], None]) -> None:
        while True:
            try:
                work()
            except Exception:
                log.exception("trove: a %s pass failed; the next one retries", self.thread_name)
            with self._lock:
                if path not in self._rerun:
                    return
                self._rerun.discard(path)
