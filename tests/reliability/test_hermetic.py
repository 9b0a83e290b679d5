"""Every test runs with a temporary HERMES_HOME and cannot reach anything but 127.0.0.1."""
from __future__ import annotations

import os
import socket
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from conftest import OutgoingConnectionRefused, make_engine, user

pytestmark = pytest.mark.reliability


def test_hermes_home_is_a_temporary_directory_never_the_developers():
    home = Path(os.environ["HERMES_HOME"])
    assert home.is_dir() and home != Path.home() / ".hermes"
    assert "hermes-home" in home.name


@pytest.mark.parametrize("address", [("203.0.113.7", 443), ("api.openai.com", 443), ("2001:db8::1", 443)])
def test_outgoing_connections_beyond_loopback_are_refused(address):
    with pytest.raises(OutgoingConnectionRefused):
        socket.create_connection(address, timeout=1)
    family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s, pytest.raises(OutgoingConnectionRefused):
        s.connect(address)
    host = f"[{address[0]}]" if ":" in address[0] else address[0]
    with pytest.raises(urllib.error.URLError) as err:
        urllib.request.urlopen(f"https://{host}/v1/models", timeout=1)
    assert isinstance(err.value.reason, OutgoingConnectionRefused)


def test_loopback_still_works():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    accepted = threading.Thread(target=lambda: server.accept()[0].close(), daemon=True)
    accepted.start()
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        accepted.join(2)
    server.close()


def test_provider_credentials_are_not_visible_to_tests():
    assert not os.environ.get("OPENAI_API_KEY") and not os.environ.get("OPENROUTER_API_KEY")


def test_the_default_model_route_never_reaches_a_provider_or_the_real_home(runtime):
    # complete=None routes to the host's auxiliary client: with a temp home and the guard it
    # finds no provider (or is refused locally) and summaries fall back to truncation.
    real_home = Path.home() / ".hermes"
    existed = real_home.exists()
    eng = make_engine(runtime, complete=None, context_length=4000)
    msgs = [user(f"message {i} " + "words " * 300) for i in range(12)]
    eng.ingest(msgs)
    eng.compress(msgs, current_tokens=100000, force=True)
    assert eng.state.last_status in ("compacted", "noop", "sanitized", "error")
    assert real_home.exists() == existed
