"""``/compress`` typed in the real CLI, default settings: what the host tells the user.

Twenty short turns run through ``cli.HermesCLI``; then ``/compress`` goes through
``HermesCLI.process_command``. With the default protected tail (32 messages) only the first
few messages are compacted, a source too small to be worth a model call, so trove shortens it
deterministically by design. The host reads ``_last_summary_fallback_used`` to decide whether
to tell the user that summary generation failed; nothing failed here, so it must not say so.
"""
from __future__ import annotations

from typing import Any

import pytest

from .harness import query, status_json

TURNS = [f"short turn {i}: the heliotrope garden note {i}" for i in range(20)]


@pytest.fixture(scope="module")
def manual_run(make_home) -> dict[str, Any]:
    home = make_home()
    steps = [{"chat": text} for text in TURNS] + [{"command": "/compress"}, {"chat": "one more turn"}]
    result = home.run_cli_steps(steps, "manual-compress")
    return {"home": home, "result": result, "compress": result["steps"][len(TURNS)]}


def test_the_compaction_was_trove_s_and_made_a_summary_node(manual_run):
    step = manual_run["compress"]
    assert step["engine_name"] == "trove"
    assert step["compression_count"] == 1, step["output"]
    nodes = query(manual_run["home"].db_path, "SELECT COUNT(*) FROM summary_nodes WHERE session_id = ?",
                  (step["session_id"],))
    assert nodes[0][0] >= 1


def test_a_compaction_without_a_model_failure_is_not_reported_as_a_failed_summary(manual_run):
    out = manual_run["compress"]["output"]
    assert "Compressed:" in out, out
    assert "fallback" not in out.lower() and "Summary generation failed" not in out, out


def test_every_turn_is_stored_once_and_the_conversation_goes_on(manual_run):
    result = manual_run["result"]
    session = result["final_session_id"]
    rows = query(manual_run["home"].db_path, "SELECT content, COUNT(*) FROM messages WHERE session_id = ? "
                                             "AND role = 'user' GROUP BY content", (session,))
    counts = dict(rows)
    assert all(counts.get(text) == 1 for text in TURNS + ["one more turn"]), counts
    assert result["steps"][-1]["reply"].startswith("ack #")
    assert manual_run["home"].netlog.read_text(encoding="utf-8") == ""


def test_status_in_a_new_process_shows_the_compaction_the_chat_ran(manual_run):
    # an operator at a shell: `hermes trove status --session <id> --json` after the chat process ended
    session = manual_run["compress"]["session_id"]
    done = manual_run["home"].hermes("trove", "status", "--session", session, "--json")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    shown = status_json(done)["last_compaction"]
    newest = query(manual_run["home"].db_path, "SELECT node_id, depth FROM summary_nodes WHERE session_id = ?"
                                               " ORDER BY node_id DESC LIMIT 1", (session,))[0]
    assert shown["source"] == "store" and shown["last_compression_status"] == "compacted"
    assert (shown["newest_nodes"][0]["node_id"], shown["newest_nodes"][0]["depth"]) == newest
    assert shown["newest_nodes"][0]["messages"] >= 1 and shown["written_at"] > 0
