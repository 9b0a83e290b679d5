"""A TCP relay on 127.0.0.1 in front of the PostgreSQL test server: it can go down (close every
connection, refuse new ones), come back, delay each direction (a slow network, for benches), and
stall (accept connections and hold every byte, closing nothing: a hung server)."""
from __future__ import annotations

import contextlib
import socket
import threading
import time
from urllib.parse import urlsplit, urlunsplit


class PgProxy:
    def __init__(self, upstream_url: str, delay_s: float = 0.0):
        parts = urlsplit(upstream_url)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self.delay_s = delay_s
        self.stalled = False
        self._parts = parts
        self._listener: socket.socket | None = None
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self.port = 0

    @property
    def url(self) -> str:
        netloc = self._parts.netloc.rsplit("@", 1)
        host = f"127.0.0.1:{self.port}"
        return urlunsplit(self._parts._replace(netloc=f"{netloc[0]}@{host}" if len(netloc) == 2 else host))

    def start(self) -> PgProxy:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def down(self) -> None:
        """Close the listener and every relayed connection: the server is unreachable."""
        with self._lock:
            listener, self._listener = self._listener, None
            conns, self._conns = self._conns, []
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread; close alone would not
            listener.close()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    def up(self) -> None:
        self.start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)  # an idle session stays open, as it would without the relay
            with self._lock:
                self._conns += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if self.delay_s:
                    time.sleep(self.delay_s)
                while self.stalled and self._listener is not None:
                    time.sleep(0.05)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
