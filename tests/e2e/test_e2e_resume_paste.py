"""A pasted message per run, each run a ``hermes chat -q`` that resumes the session (``--resume
ID`` and ``--continue`` in turn), in a 64K window with the CLI's own tool schemas.

Each paste is about 7,000 tokens: with the host's fixed overhead (about 17,000 tokens) two of them
pass the trigger, so every resumed run compacts before its main request. The newest paste alone
fills the compaction target; the summary of the earlier turns must still be shown to the model
(there is room for it under the trigger), every message is stored once, and no request comes near
the window.
"""
from __future__ import annotations

import re
from typing import Any

import pytest

from .harness import FALLBACK_WARNING, aux_requests, chat_requests, query, request_tokens

CONTEXT_LENGTH = 64000
RUNS = 5
PASTE_CHARS = 28000  # about 7,000 tokens
WORDS = ("amber", "basalt", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper")
NODE_LABEL = re.compile(r"\[d\d+ node \d+ \|")


def paste(i: int) -> str:
    body = " ".join(f"{WORDS[(i + k) % len(WORDS)]}{k % 89}" for k in range(PASTE_CHARS // 7))
    return (f"pasted log {i:02d}: " + body)[:PASTE_CHARS]


@pytest.fixture(scope="module")
def resumed(make_home, fake_llm) -> dict[str, Any]:
    home = make_home(context_length=CONTEXT_LENGTH)
    start = len(fake_llm.requests())
    first = home.run_cli(["chat", "-Q", "-q", paste(1)])
    found = re.search(r"session_id:\s*(\S+)", first.stdout + first.stderr)
    assert found, first.stdout[-2000:] + first.stderr[-2000:]
    session_id, outputs = found.group(1), [first.stdout + first.stderr]
    for i in range(2, RUNS + 1):
        flags = ["--resume", session_id] if i % 2 == 0 else ["--continue"]
        done = home.run_cli(["chat", "-Q", "-q", paste(i), *flags])
        outputs.append(done.stdout + done.stderr)
    return {"home": home, "session_id": session_id, "outputs": outputs, "requests": fake_llm.requests()[start:]}


def test_every_run_resumed_the_session_on_trove(resumed):
    for out in resumed["outputs"]:
        assert f"session_id: {resumed['session_id']}" in out
        assert FALLBACK_WARNING not in out
    assert FALLBACK_WARNING not in resumed["home"].host_logs()
    assert aux_requests(resumed["requests"]), "no run compacted"


def test_each_paste_is_stored_once(resumed):
    rows = query(resumed["home"].db_path, "SELECT session_id, content, COUNT(*) FROM messages WHERE role = 'user' "
                                          "GROUP BY session_id, content")
    counts = {content: n for sid, content, n in rows if sid == resumed["session_id"]}
    assert [counts.get(paste(i)) for i in range(1, RUNS + 1)] == [1] * RUNS, counts.values()
    assert sum(n for sid, _, n in rows if sid != resumed["session_id"]) == 0


def test_the_summary_stays_visible_next_to_a_long_paste(resumed):
    bodies = chat_requests(resumed["requests"])

    later = [b for b in bodies if "[trove summary]" in str(b["messages"])]
    assert len(later) >= RUNS - 1, len(later)
    for body in later:
        text = str(body["messages"])
        assert NODE_LABEL.search(text), text[:1500]
        assert "not shown to save space" not in text, text[:1500]


def test_no_request_comes_near_the_window(resumed):
    sizes = [request_tokens(b) for b in chat_requests(resumed["requests"])]
    assert sizes and max(sizes) < int(CONTEXT_LENGTH * 0.6), sizes
