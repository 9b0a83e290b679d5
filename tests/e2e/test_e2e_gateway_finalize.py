"""The gateway's ``on_session_finalize`` hook runs on its event loop: a chat's ``/new`` while another
process holds the write lock of trove's SQLite file.

After ``/compress`` the chat has no agent, so the hook is the only call that ends the session it leaves
(tests/e2e/gateway_driver.py). The hook must not stall the loop for SQLite's busy timeout, and the end
must still be recorded once the other process commits.
"""
from __future__ import annotations

from typing import Any

import pytest

from .harness import GATEWAY_DRIVER, query

CHATS = {"B": {"platform": "telegram", "user": "7373", "key": "agent:main:telegram:dm:7373"}}
FILLER = " ".join(["notes about the tide tables and the harbour lights"] * 40)


@pytest.fixture(scope="module")
def busy_new(make_home) -> dict[str, Any]:
    home = make_home(context_length=64000, TROVE_FRESH_TAIL_COUNT="4")
    steps = [
        *[{"chat": "B", "text": f"turn {i}: buoy {i} rings a bell. {FILLER}"} for i in range(4)],
        {"chat": "B", "command": "/compress"},  # evicts the chat's agent: /new finds none to clean up
        {"lock_store": str(home.db_path)},
        {"chat": "B", "command": "/new"},
        {"unlock_store": 120},
    ]
    result = home.run_driver({"chats": CHATS, "state": str(home.root / "gateway-sessions.json"), "steps": steps},
                             "gw-busy-new", timeout=600, script=GATEWAY_DRIVER)
    return {"home": home, "steps": result["steps"]}


def test_new_while_another_process_writes_still_ends_the_session_it_leaves(busy_new):
    steps = busy_new["steps"]
    compress, new = steps[4], steps[6]
    assert "error" not in compress and compress["engine_name"] == "trove", compress
    assert "error" not in new and new["old_session_id"] == compress["session_id"] != new["session_id"], new
    print(f"finalize hook on the loop: {new['finalize_s']} s")  # a figure, not asserted
    rows = query(busy_new["home"].db_path, "SELECT ended_at IS NOT NULL FROM sessions WHERE session_id = ?",
                 (new["old_session_id"],))
    assert rows == [(1,)], rows
