"""The store's PostgreSQL connections carry TCP keepalives unless the operator configured their own."""
from __future__ import annotations

import socket

import pytest

from hermes_trove.pgdb import KEEPALIVES, PgDatabase, close_connections, keepalive_params


def _params(url: str) -> dict[str, str]:
    db = PgDatabase(url)
    try:
        return dict(db.connect().raw.info.get_parameters())
    finally:
        db.close()
        close_connections()


def test_the_store_connection_sets_keepalives_when_the_url_sets_none(pg_database_url):
    db = PgDatabase(pg_database_url)
    raw = db.connect().raw
    try:
        params = raw.info.get_parameters()
        for key, value in KEEPALIVES.items():
            assert params.get(key, "1" if key == "keepalives" else None) == value
        if hasattr(socket, "TCP_KEEPIDLE"):  # what the socket itself does, where the platform says
            with socket.socket(fileno=raw.pgconn.socket) as sock:
                tcp = socket.IPPROTO_TCP
                try:
                    assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
                    assert sock.getsockopt(tcp, socket.TCP_KEEPIDLE) == int(KEEPALIVES["keepalives_idle"])
                    assert sock.getsockopt(tcp, socket.TCP_KEEPCNT) == int(KEEPALIVES["keepalives_count"])
                finally:
                    sock.detach()  # the descriptor stays libpq's
    finally:
        db.close()
        close_connections()


def test_an_operator_keepalive_setting_in_the_url_is_kept(pg_database_url):
    url = pg_database_url + "&keepalives_idle=42"
    params = _params(url)
    assert params["keepalives_idle"] == "42"
    assert params["keepalives_count"] == KEEPALIVES["keepalives_count"]  # the ones left unset are still added


def test_keepalives_turned_off_by_the_operator_stay_off(pg_database_url):
    params = _params(pg_database_url + "&keepalives=0")
    assert params["keepalives"] == "0"
    assert "keepalives_idle" not in params


def test_a_service_file_setting_is_kept(pg_database_url, tmp_path, monkeypatch):
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    parts = conninfo_to_dict(pg_database_url)
    service = tmp_path / "pg_service.conf"
    service.write_text(f"[trove]\nhost={parts['host']}\nport={parts['port']}\nkeepalives_count=7\n", encoding="utf-8")
    monkeypatch.setenv("PGSERVICEFILE", str(service))
    url = make_conninfo(**{k: v for k, v in parts.items() if k not in ("host", "port")}, service="trove")
    assert "keepalives_count" not in keepalive_params(url)
    params = _params(url)
    assert params["keepalives_count"] == "7"
    assert params["keepalives_idle"] == KEEPALIVES["keepalives_idle"]


def test_a_service_this_process_cannot_read_adds_nothing(monkeypatch, tmp_path):
    pytest.importorskip("psycopg")
    monkeypatch.setenv("PGSERVICEFILE", str(tmp_path / "absent.conf"))
    monkeypatch.delenv("PGSYSCONFDIR", raising=False)
    assert keepalive_params("service=elsewhere") == {}
    assert keepalive_params("host=127.0.0.1 keepalives_interval=9").get("keepalives_interval") is None
