"""The suite's own machinery, checked without the host: the fake server's streaming and
auxiliary answers, and the loopback guard (exercised without sending any packet out)."""
from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from .fake_llm import SUMMARY_REPLY, FakeLLM, decide
from .harness import NETGUARD

TOOLS = [{"type": "function", "function": {"name": "trove_grep", "parameters": {"type": "object"}}}]


@pytest.fixture
def server(tmp_path):
    srv = FakeLLM(tmp_path / "requests.jsonl").start()
    yield srv
    srv.stop()


def post(srv: FakeLLM, body: dict) -> bytes:
    req = urllib.request.Request(srv.url + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.read()


def sse_chunks(raw: bytes) -> list[dict]:
    events = [line[len("data: "):] for line in raw.decode().splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


def test_a_streamed_tool_call_arrives_as_deltas_followed_by_a_usage_chunk(server):
    body = {"model": "m", "stream": True, "tools": TOOLS,
            "messages": [{"role": "user", "content": 'find it <<tool:trove_grep {"query": "kiwi"}>>'}]}
    chunks = sse_chunks(post(server, body))
    args = "".join(tc["function"].get("arguments", "") for c in chunks for ch in c["choices"]
                   for tc in ch["delta"].get("tool_calls", []))
    assert json.loads(args) == {"query": "kiwi"}
    names = [tc["function"]["name"] for c in chunks for ch in c["choices"]
             for tc in ch["delta"].get("tool_calls", []) if tc["function"].get("name")]
    assert names == ["trove_grep"]
    assert [ch["finish_reason"] for c in chunks for ch in c["choices"] if ch["finish_reason"]] == ["tool_calls"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens"] > 0
    assert server.requests()[-1]["body"] == body


def test_a_request_without_tools_gets_a_summary_and_no_stream(server):
    answer = json.loads(post(server, {"model": "m", "messages": [{"role": "user", "content": "summarise"}]}))
    assert answer["choices"][0]["message"]["content"] == SUMMARY_REPLY.format(n=1)
    assert answer["usage"]["total_tokens"] > answer["usage"]["prompt_tokens"]


def test_the_script_ignores_a_marker_for_a_tool_the_request_does_not_offer():
    body = {"tools": TOOLS, "messages": [{"role": "user", "content": "<<tool:todo {}>>"}]}
    assert decide(body, 3) == {"text": "ack #3"}
    tool_turn = {"tools": TOOLS, "messages": [{"role": "tool", "content": '{"hits": 1}'}]}
    assert decide(tool_turn, 4)["text"].startswith("TOOL-RESULT-SEEN #4")


def _guard_module(log: Path):
    spec = importlib.util.spec_from_file_location("trove_netguard_under_test", NETGUARD / "sitecustomize.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # TROVE_E2E_NETLOG is unset here, so nothing is patched
    module._LOG = str(log)
    return module


def test_the_guard_refuses_and_logs_a_non_loopback_address_before_any_packet(tmp_path):
    log = tmp_path / "net.txt"
    guard = _guard_module(log)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        with pytest.raises(ConnectionRefusedError):
            guard._check(sock, ("192.0.2.1", 443), "connect")
        guard._check(sock, ("127.0.0.1", 80), "connect")  # loopback passes
    assert "192.0.2.1" in log.read_text(encoding="utf-8")
    assert guard._is_local_host("localhost") and guard._is_local_host("::1")
    assert not guard._is_local_host("example.invalid")


def test_the_guard_installs_itself_in_a_child_process_that_has_it_on_pythonpath(tmp_path, server):
    log = tmp_path / "net.txt"
    env = dict(os.environ, PYTHONPATH=str(NETGUARD), TROVE_E2E_NETLOG=str(log))
    code = ("import socket, urllib.request, sys\n"
            "assert socket.socket.connect.__qualname__.startswith('_install')\n"
            "try:\n    socket.getaddrinfo('example.invalid', 443)\nexcept socket.gaierror:\n    pass\n"
            "else:\n    sys.exit('lookup was not refused')\n"
            "urllib.request.urlopen(sys.argv[1] + '/models', timeout=10).read()\n")
    done = subprocess.run([sys.executable, "-c", code, server.url], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "lookup 'example.invalid'" in log.read_text(encoding="utf-8")
    assert Path(str(log) + ".active").read_text(encoding="utf-8").strip()
