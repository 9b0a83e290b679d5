"""Hermes profiles under the real host: one gateway process serving three profiles (multiplexed).

The gateway discovers plugins once, in its own (default) profile, and then runs each chat's turn
inside the host's per-turn scope of the chat's profile (the default one's too). Each profile's messages
must land in that profile's own ``trove.db`` (as ``hermes -p NAME`` puts them), ``hermes -p work
trove status`` must report work's store, and the ``personal`` profile, which reads every session
of its own (``TROVE_MEMORY_SCOPE=profile``, in the gateway's environment and its own ``.env``), must
not reach work's memory through any tool, guessed ids included. A ``broken`` profile whose ``.env``
names no usable store gets the built-in compressor and one error that says which profile and why.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .harness import GATEWAY_DRIVER, query, status_json

WORK_FACT = "please remember: the work vpn token is KESTREL-2291."
HOME_FACT = "please remember: the default garage code is PLOVER-3303."
CHATS = {"W": {"platform": "telegram", "user": "1111", "key": "agent:work:telegram:dm:1111", "profile": "work"},
         "P": {"platform": "telegram", "user": "1111", "key": "agent:personal:telegram:dm:1111",
               "profile": "personal"},
         "M": {"platform": "telegram", "user": "1111", "key": "agent:main:telegram:dm:1111", "profile": "default"},
         "B": {"platform": "telegram", "user": "1111", "key": "agent:broken:telegram:dm:1111", "profile": "broken"}}
BROKEN_URL = "mysql://trove:hunter2@db.invalid/trove"


def tool(name: str, **args: Any) -> str:
    return f"run it <<tool:{name} {json.dumps(args)}>>"


def profile_home(home: Any, name: str) -> Path:
    return home.home / "profiles" / name


@pytest.fixture(scope="module")
def served(make_home) -> dict[str, Any]:
    home = make_home(TROVE_MEMORY_SCOPE="profile")  # the gateway owner reads all of their own memory
    for name in ("work", "personal", "broken"):
        profile_home(home, name).mkdir(parents=True)
        (profile_home(home, name) / "config.yaml").write_text(home.config_yaml(), encoding="utf-8")
        (profile_home(home, name) / "plugins").mkdir()  # for `hermes -p NAME`; the gateway loads its own
        (profile_home(home, name) / "plugins" / "hermes-trove").symlink_to(home.plugin_dir.resolve())
    (profile_home(home, "personal") / ".env").write_text("TROVE_MEMORY_SCOPE=profile\n", encoding="utf-8")
    (profile_home(home, "broken") / ".env").write_text(f"TROVE_DATABASE_URL={BROKEN_URL}\n", encoding="utf-8")
    state = str(home.root / "gateway-sessions.json")
    first = home.run_driver({"chats": CHATS, "state": state, "steps": [
        {"chat": "W", "text": WORK_FACT}, {"chat": "M", "text": HOME_FACT}, {"chat": "B", "text": "hello"},
        {"chat": "B", "text": "hello again"}]}, "profiles-1", script=GATEWAY_DRIVER)
    work_db = profile_home(home, "work") / "trove.db"
    guessed = query(work_db, "SELECT store_id FROM messages WHERE content = ?", (WORK_FACT,)) \
        if work_db.exists() else query(home.db_path, "SELECT store_id FROM messages WHERE content = ?", (WORK_FACT,))
    asks = [tool("trove_recall", query="work vpn token"),
            tool("trove_grep", query="vpn token", session_scope="all"),
            tool("trove_recent", period="today", mode="messages"),
            tool("trove_load_session", session_id=first["sessions"]["W"]),
            tool("trove_expand", store_id=guessed[0][0])]
    second = home.run_driver({"chats": CHATS, "state": state, "max_iterations": 4,
                              "steps": [{"chat": "P", "text": a} for a in asks]}, "profiles-2", script=GATEWAY_DRIVER)
    status = home.hermes("-p", "work", "trove", "status", "--json")
    return {"home": home, "first": first, "second": second, "status": status}


def stored(db: Path, text: str) -> int:
    return query(db, "SELECT count(*) FROM messages WHERE content = ?", (text,))[0][0] if db.exists() else 0


def test_each_profile_stores_its_turns_in_its_own_trove_db(served):
    home = served["home"]
    assert [s.get("error") for s in served["first"]["steps"]] == [None] * 4
    work, personal = profile_home(home, "work") / "trove.db", profile_home(home, "personal") / "trove.db"
    assert stored(work, WORK_FACT) == 1
    assert stored(home.db_path, WORK_FACT) == 0 and stored(personal, WORK_FACT) == 0
    assert stored(home.db_path, HOME_FACT) == 1 and stored(work, HOME_FACT) == 0


def test_the_personal_profile_reaches_no_work_memory_through_any_tool(served):
    steps = served["second"]["steps"]
    assert [s.get("error") for s in steps] == [None] * len(steps)
    assert all(s["engine_name"] == "trove" for s in steps)
    seen = json.dumps([s["tool_results"] for s in steps])
    assert "trove_recall" in seen and "trove_expand" in seen
    assert "KESTREL" not in seen


def test_hermes_dash_p_work_trove_status_reports_the_work_store(served):
    done = served["status"]
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    runtime = status_json(done)["runtime"]
    assert Path(runtime["database_path"]) == profile_home(served["home"], "work") / "trove.db"


def test_a_profile_whose_env_names_no_usable_store_says_so_once_and_keeps_answering(served):
    """Its agents get the built-in compressor (no store is guessed for it: a server URL that is wrong
    must not send the turns to another store), the log says which profile, which variable and why, once,
    and trove's hooks stay quiet on its turns."""
    first, home = served["first"], served["home"]
    broken = [s for s in first["steps"] if s["step"]["chat"] == "B"]
    assert [s["engine_name"] for s in broken] == ["compressor"] * 2 and all(s["final"] for s in broken), broken
    ours = [w for w in first["warnings"] if w.startswith("ERROR hermes_trove") and "profile 'broken'" in w]
    assert len(ours) == 1, first["warnings"]
    assert "TROVE_DATABASE_URL" in ours[0] and "not a PostgreSQL URL" in ours[0], ours
    assert str(profile_home(home, "broken") / ".env") in ours[0] and "built-in compressor" in ours[0], ours
    assert not [w for w in first["warnings"] if "hook failed" in w], first["warnings"]
    assert "hunter2" not in json.dumps(first) + home.host_logs()
    assert not (profile_home(home, "broken") / "trove.db").exists()
