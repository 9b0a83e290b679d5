"""Loopback-only network guard for host subprocesses in the end-to-end suite.

Put this directory on PYTHONPATH with ``TROVE_E2E_NETLOG`` set: every connect, sendto or
name lookup that would leave the machine is written to that file and refused, so a test
can assert the file stays empty; each guarded process also appends its pid to
``$TROVE_E2E_NETLOG.active``. Loopback and Unix sockets pass untouched.
"""
from __future__ import annotations

import ipaddress
import os
import socket
import sys
import traceback

_LOG = os.environ.get("TROVE_E2E_NETLOG", "")
_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", ""}


def _is_local_host(host: object) -> bool:
    if host is None:
        return True
    text = host.decode() if isinstance(host, bytes) else str(host)
    text = text.strip("[]").split("%", 1)[0].lower()
    if text in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        return False


def _note(kind: str, where: object) -> None:
    try:
        with open(_LOG, "a", encoding="utf-8") as fh:
            frames = traceback.extract_stack()[:-3][-8:]  # who asked, for diagnosing the leak
            where_from = " < ".join(f"{f.filename.rsplit('/', 2)[-1]}:{f.lineno}" for f in reversed(frames))
            fh.write(f"{kind} {where!r} pid={os.getpid()} argv={sys.argv[:6]!r} from {where_from}\n")
    except OSError:
        pass


def _check(sock: socket.socket, address: object, kind: str) -> None:
    if sock.family not in (socket.AF_INET, socket.AF_INET6) or not isinstance(address, tuple):
        return
    if not _is_local_host(address[0]):
        _note(kind, address)
        raise ConnectionRefusedError(f"trove e2e: non-loopback {kind} to {address!r} refused")


def _install() -> None:
    base = socket.socket
    real_connect, real_connect_ex, real_sendto = base.connect, base.connect_ex, base.sendto
    real_getaddrinfo = socket.getaddrinfo

    def connect(self, address):  # type: ignore[no-untyped-def]
        _check(self, address, "connect")
        return real_connect(self, address)

    def connect_ex(self, address):  # type: ignore[no-untyped-def]
        _check(self, address, "connect")
        return real_connect_ex(self, address)

    def sendto(self, data, *args):  # type: ignore[no-untyped-def]
        _check(self, args[-1] if args else None, "sendto")
        return real_sendto(self, data, *args)

    def getaddrinfo(host, *args, **kwargs):  # type: ignore[no-untyped-def]
        if not _is_local_host(host):
            _note("lookup", host)
            raise socket.gaierror(socket.EAI_NONAME, f"trove e2e: lookup of {host!r} refused")
        return real_getaddrinfo(host, *args, **kwargs)

    base.connect, base.connect_ex, base.sendto = connect, connect_ex, sendto
    socket.getaddrinfo = getaddrinfo
    try:  # proof for the tests that the guard ran in this process
        with open(_LOG + ".active", "a", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()} {sys.argv[0] if sys.argv else ''}\n")
    except OSError:
        pass


if _LOG:
    _install()
