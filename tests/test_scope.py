"""Owner scopes: two Telegram users and the CLI on one database read only their own memory."""
from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from conftest import assistant, make_config, no_model, user

from hermes_trove.engine import TroveEngine
from hermes_trove.refs import make_ref
from hermes_trove.runtime import build_runtime
from hermes_trove.scope import Visibility, scope_for
from hermes_trove.tools import dispatch

BACKENDS = ("sqlite", "postgresql")  # every test here runs on the file and on a server

A_KEY = "agent:main:telegram:dm:111"
B_KEY = "agent:main:telegram:dm:222"
SECRET = "my gym locker code is 4471"


def start(runtime, session, platform="cli", conversation_id=None):
    eng = TroveEngine(runtime, complete=no_model)
    eng.update_model("fake-model", 128000)
    eng.on_session_start(session, platform=platform, conversation_id=conversation_id)
    return eng


def call(eng, name, **args):
    return json.loads(dispatch(eng.tool_context(), name, args))


def texts(out) -> str:
    return json.dumps(out, ensure_ascii=False)


@pytest.fixture
def world(tmp_path):
    """A's chat wrote the secret; the CLI wrote its own fact; B opens a new session."""
    def build(mode="conversation"):
        runtime = build_runtime(replace(make_config(tmp_path), memory_scope=mode))
        a = start(runtime, "a1", "telegram", A_KEY)
        a.ingest([user(f"remember: {SECRET}"), assistant("Noted, your gym locker code is stored.")])
        cli = start(runtime, "c1")
        cli.ingest([user("the cli deploy port is 9091"), assistant("Noted the deploy port.")])
        b = start(runtime, "b1", "telegram", B_KEY)
        b.ingest([user("hello, what can you do?")])
        return runtime, a, cli, b
    return build


def test_scope_for_is_local_for_the_cli_and_the_session_key_for_a_gateway_chat():
    assert scope_for("cli", None) == scope_for(None, None) == scope_for("", "x") == "local"
    assert scope_for("telegram", A_KEY) == f"telegram:{A_KEY}"
    assert scope_for("telegram", "", "42") == "telegram:sender:42"
    assert scope_for("telegram", "") == ""


def test_each_session_records_its_owner_scope_at_first_write(world):
    runtime, *_ = world()
    scopes = {s.session_id: s.scope for s in runtime.store.sessions()}
    assert scopes == {"a1": f"telegram:{A_KEY}", "c1": "local", "b1": f"telegram:{B_KEY}"}


def test_another_gateway_user_reads_none_of_the_fact_through_any_checked_path(world):
    runtime, a, _, b = world()
    secret_id = runtime.store.page("a1")[0].store_id
    recall = call(b, "trove_recall", query="gym locker code")
    grep = call(b, "trove_grep", query="gym locker code", session_scope="all")
    grep_session = call(b, "trove_grep", query="gym locker code", session_scope="session", session_id="a1")
    recent = call(b, "trove_recent", period="today")
    recent_messages = call(b, "trove_recent", period="today", mode="messages")
    for out in (recall, grep, recent, recent_messages):
        assert "4471" not in texts(out) and '"a1"' not in texts(out), out
    assert grep_session["results"] == [] and "4471" not in texts(grep_session)
    assert call(b, "trove_load_session", session_id="a1") == {
        "error": call(b, "trove_load_session", session_id="nope")["error"].replace("'nope'", "'a1'")}
    unknown = 10_000
    expand = call(b, "trove_expand", store_id=secret_id)
    assert expand["error"] == f"no stored message with store_id {secret_id}"
    assert call(b, "trove_expand", store_id=unknown)["error"] == f"no stored message with store_id {unknown}"
    ref = f"trove:{secret_id}:0-10"
    pack = call(b, "trove_evidence_pack", question="what is the gym locker code?", baseline_refs=[ref])
    missing = call(b, "trove_evidence_pack", question="what is the gym locker code?",
                   baseline_refs=[f"trove:{unknown}:0-10"])
    assert "4471" not in texts(pack)
    def masked(out):
        return re.sub(r"(trove:|store_id )\d+", r"\1ID", texts(out))
    assert masked(pack) == masked(missing)


def test_the_owner_in_a_new_session_and_a_second_cli_session_still_recall_their_own(world):
    runtime, a, _, _ = world()
    a2 = start(runtime, "a2", "telegram", A_KEY)  # /new in the same chat: the same session key
    assert "4471" in texts(call(a2, "trove_recall", query="gym locker code"))
    assert "4471" in texts(call(a2, "trove_grep", query="gym locker code", session_scope="all"))
    assert "4471" in texts(call(a2, "trove_load_session", session_id="a1"))
    c2 = start(runtime, "c2")
    assert "9091" in texts(call(c2, "trove_recall", query="deploy port"))
    assert "9091" in texts(call(c2, "trove_recent", period="today", mode="messages"))
    assert "4471" not in texts(call(c2, "trove_recall", query="gym locker code"))
    assert "4471" not in texts(call(c2, "trove_grep", query="gym locker code", session_scope="all"))


def test_the_gateway_user_does_not_read_the_cli_owner_either(world):
    _, _, _, b = world()
    assert "9091" not in texts(call(b, "trove_recall", query="deploy port"))
    assert "9091" not in texts(call(b, "trove_grep", query="deploy port", session_scope="all"))


def test_profile_mode_reads_every_session_as_before(world):
    _, _, _, b = world("profile")
    assert "4471" in texts(call(b, "trove_recall", query="gym locker code"))
    assert "4471" in texts(call(b, "trove_grep", query="gym locker code", session_scope="all"))


def test_session_mode_keeps_even_the_owners_earlier_sessions_out(world):
    runtime, *_ = world("session")
    a2 = start(runtime, "a2", "telegram", A_KEY)
    assert "4471" not in texts(call(a2, "trove_recall", query="gym locker code"))
    assert "error" in call(a2, "trove_load_session", session_id="a1")


def test_a_large_foreign_scope_does_not_push_the_callers_own_hit_out_of_the_top_k(world):
    runtime, a, cli, b = world()
    a.ingest([user(f"gym locker note {i}: the locker code rotates") for i in range(400)])
    start(runtime, "b0", "telegram", B_KEY).ingest([user("my gym locker code is 8812")])  # B, earlier
    recall = call(b, "trove_recall", query="gym locker code", limit=3)
    assert "8812" in texts(recall)
    grep = call(b, "trove_grep", query="gym locker code", session_scope="all", limit=3)
    assert [h["session_id"] for h in grep["results"]] == ["b0"]


def test_summary_nodes_of_another_scope_answer_like_unknown_nodes(world):
    runtime, a, _, b = world()
    node = runtime.dag.add_leaf("a1", "summary: gym locker code 4471", [runtime.store.page("a1")[0].store_id],
                                token_count=10, source_token_count=20, earliest_at=None, latest_at=None)
    node_id = getattr(node, "node_id", node)
    foreign = call(b, "trove_expand", node_id=node_id)
    unknown = call(b, "trove_expand", node_id=99999)
    assert foreign["error"].replace(str(node_id), "N") == unknown["error"].replace("99999", "N")
    assert "4471" not in texts(call(b, "trove_describe", node_id=node_id))
    assert "4471" not in texts(call(b, "trove_recall", query="gym locker code", include="summaries"))


def test_visibility_clause_is_one_predicate_per_mode():
    assert Visibility().clause("s") == ("", [])
    assert Visibility("session", "local", "x").clause("s") == ("s = ?", ["x"])
    assert Visibility("conversation", "", "x").clause("s") == ("s = ?", ["x"])
    sql, args = Visibility("conversation", "local", "x").clause("s")
    assert "scope = ?" in sql and args == ["local"]


def test_a_session_bound_before_the_host_names_its_platform_takes_the_gateway_scope(tmp_path):
    runtime = build_runtime(make_config(tmp_path))
    eng = TroveEngine(runtime, complete=no_model)
    eng.update_model("fake-model", 128000)
    eng.bind_session_state(None, "g1")  # the host's init order: bind first, then on_session_start
    eng.on_session_start("g1", platform="telegram", conversation_id=A_KEY)
    assert runtime.store.session("g1").scope == f"telegram:{A_KEY}"
    eng.on_session_start("g1", platform="discord", conversation_id="other")  # never re-scoped once named
    assert runtime.store.session("g1").scope == f"telegram:{A_KEY}"




def test_query_state_assertions_and_the_pre_answer_block_stay_in_scope(tmp_path, monkeypatch):
    from test_state_assertions import FactModel

    from hermes_trove.state import extract, preanswer

    monkeypatch.setattr(extract, "schedule", lambda *a, **k: None)  # extract here, not on a thread

    runtime = build_runtime(replace(make_config(tmp_path), assertions_enabled=True, preanswer_evidence_enabled=True))
    a = start(runtime, "a1", "telegram", A_KEY)
    a.ingest([user("I live in Reykjavik and my editor is helix."), assistant("Noted.")])
    b = start(runtime, "b1", "telegram", B_KEY)
    b.ingest([user("I live in Porto."), assistant("Noted.")])
    runtime.store.settle()  # a server store: the turns ship before the pass reads them
    report = extract.run_pass(runtime, FactModel())
    assert report.get("stored", 0) >= 2, report
    seen_by_b = call(b, "trove_query_state", subject_key="user:self", predicate_key="lives_in")
    assert [x["value_text"] for x in seen_by_b["assertions"]] == ["Porto"]
    a2 = start(runtime, "a2", "telegram", A_KEY)
    assert [x["value_text"] for x in call(a2, "trove_query_state", subject_key="user:self",
                                          predicate_key="lives_in")["assertions"]] == ["Reykjavik"]
    block_b = preanswer.evidence_block(runtime, "where does reykjavik helix live editor?", "b1")
    assert "Reykjavik" not in block_b and "helix" not in block_b
    block_a = preanswer.evidence_block(runtime, "where does reykjavik helix live editor?", "a2")
    assert "Reykjavik" in block_a


def test_a_retrieval_episode_of_another_scope_answers_like_an_unknown_one(tmp_path):
    runtime = build_runtime(replace(make_config(tmp_path), adaptive_retrieval_enabled=True))
    a = start(runtime, "a1", "telegram", A_KEY)
    a.ingest([user("I live in Reykjavik")])
    b = start(runtime, "b1", "telegram", B_KEY)
    opened = call(a, "trove_retrieve", action="start", question="Which city does the user live in now?",
                  identity={"intent_type": "current_state", "subject_key": "user:self"},
                  requirements=[{"slot_id": "city", "description": "the city", "minimum_refs": 1}])
    rid = opened["retrieval_id"]
    assert "error" not in call(a, "trove_retrieve", action="status", retrieval_id=rid)
    foreign = call(b, "trove_retrieve", action="status", retrieval_id=rid)
    unknown = call(b, "trove_retrieve", action="status", retrieval_id="r-unknown")
    assert foreign["error"].replace(rid, "X") == unknown["error"].replace("r-unknown", "X")


@pytest.mark.parametrize(("mode", "carried"), [("conversation", True), ("profile", True), ("session", False)])
def test_new_carries_summaries_only_within_the_callers_scope(tmp_path, mode, carried):
    runtime = build_runtime(replace(make_config(tmp_path), memory_scope=mode, new_session_retain_depth=-1))
    a = start(runtime, "a1", "telegram", A_KEY)
    a.ingest([user(f"remember: {SECRET}"), assistant("Noted.")])
    ids = [r.store_id for r in runtime.store.page("a1")]
    runtime.dag.add_leaf("a1", "summary: the gym locker code", ids, token_count=10, source_token_count=20,
                         earliest_at=None, latest_at=None)
    a.on_session_end("a1", [])  # /new in the chat: end, reset, bind the new id
    a.on_session_reset()
    a.bind_session_state(None, "a2")
    assert runtime.store.session("a2").scope == f"telegram:{A_KEY}"
    assert bool(runtime.dag.frontier("a2")) is carried


def test_a_gateway_session_without_a_session_key_takes_its_senders_scope_from_the_turn_hook(tmp_path):
    from hermes_trove.hooks import make_hooks

    runtime = build_runtime(make_config(tmp_path))
    start(runtime, "g1", "telegram", None)
    assert runtime.store.session("g1").scope == ""  # unscoped until a write names the owner
    make_hooks(runtime)["post_llm_call"](session_id="g1", platform="telegram", sender_id="777",
                                         conversation_history=[user("hello"), assistant("hi")])
    assert runtime.store.session("g1").scope == "telegram:sender:777"


def test_operator_views_from_another_scope_name_sessions_but_show_no_stored_text(world):
    """trove_status / trove_inspect / trove_doctor of a scoped caller, `/trove status|dag` and the
    CLI's `status --session` / `dag --session` about another scope's session: metadata only."""
    from hermes_trove import command

    runtime, a, _, b = world()
    ids = [r.store_id for r in runtime.store.page("a1")]
    node = runtime.dag.add_leaf("a1", "summary: gym locker code 4471", ids, token_count=10, source_token_count=20,
                                earliest_at=None, latest_at=None)
    node_id = getattr(node, "node_id", node)
    for tool in ("trove_status", "trove_inspect", "trove_doctor"):
        out = texts(call(b, tool))
        assert "4471" not in out and "locker" not in out, tool
    inspect = call(b, "trove_inspect")
    assert inspect["session_id"] == "b1" and node_id not in inspect["dag"]["frontier_node_ids"]
    slash = command.make_handler(runtime)
    for words in ("status", "dag", "doctor", "rollups"):
        assert "4471" not in slash(words) and "locker" not in slash(words), words
    for words in (["status"], ["dag"], ["dag", "mermaid"]):  # an operator naming A's session sees its shape
        name, result = command.run(runtime, words, session_id="a1")
        shown = command.render(name, result, prefix="hermes trove")
        assert "a1" in shown and "4471" not in shown and "locker" not in shown, words


def test_a_coverage_rerun_counts_only_rows_the_caller_may_read(world):
    runtime, a, _, b = world()
    own = [r for r in runtime.store.get_many(range(1, 50)) if r.session_id == "b1"][0]
    ref = make_ref(own, 0, 5).to_dict()
    proposal = {"version": "evidence-selector-v1", "operation": "count_distinct",
                "selections": [{"claim_id": "a", "facet": "hello", "exact_ref": ref}]}
    out = call(b, "trove_compile_evidence", question="locker code?", proposal=proposal,
               coverage={"query": "locker", "session_scope": "all"})
    assert out["coverage"]["candidates"] == 0, out  # A's rows are neither B's candidates nor named to B
    assert out["coverage"]["uncovered_store_ids"] == [] and SECRET not in texts(out)
    mine = call(a, "trove_compile_evidence", question="locker code?", proposal=proposal,
                coverage={"query": "locker", "session_scope": "all"})
    assert mine["coverage"]["candidates"] >= 1, mine


class HostSessions:
    """The host's SessionDB as the engine reads it: the gateway records each chat session's key."""

    def __init__(self, rows):
        self.rows = rows

    def get_session(self, session_id):
        return self.rows.get(session_id)


def test_a_bind_that_names_no_chat_takes_the_chat_the_host_recorded_for_the_session(tmp_path):
    runtime = build_runtime(make_config(tmp_path))
    host = HostSessions({"g1": {"source": "telegram", "session_key": A_KEY},
                         "c1": {"source": "cli", "session_key": None}})
    for sid in ("g1", "c1"):  # the gateway's hygiene agent: no platform, no key, the chat's session id
        eng = TroveEngine(runtime, complete=no_model)
        eng.update_model("fake-model", 128000)
        eng.bind_session_state(session_db=host, session_id=sid)
        eng.on_session_start(sid, platform="cli", conversation_id=None)
        eng.ingest([user(f"hello from {sid}")])
    scopes = {s.session_id: s.scope for s in runtime.store.sessions()}
    assert scopes == {"g1": f"telegram:{A_KEY}", "c1": "local"}


def test_the_tui_desktop_and_editor_sessions_share_the_owners_local_memory(tmp_path):
    # Hermes 0.19 tags `hermes --tui` sessions "tui", the desktop chat panel "desktop", editor (ACP) ones "acp"
    runtime = build_runtime(make_config(tmp_path))
    cli = start(runtime, "c1")
    cli.ingest([user("the cli deploy port is 9091"), assistant("Noted the deploy port.")])
    for platform in ("tui", "desktop", "acp"):
        eng = start(runtime, f"{platform}1", platform)
        eng.ingest([user(f"hello from the {platform}")])
        assert runtime.store.session(f"{platform}1").scope == "local"
        assert "9091" in texts(call(eng, "trove_recall", query="deploy port")), platform
    with runtime.db.transaction() as conn:  # a TUI session an earlier build recorded unscoped...
        conn.execute("UPDATE sessions SET scope='' WHERE session_id='tui1'")
    start(runtime, "tui1", "tui")  # ...takes the local scope when it is resumed
    assert runtime.store.session("tui1").scope == "local"
