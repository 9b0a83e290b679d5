"""Rows damaged the way disks and older builds leave them, in a real trove.db: the next turn
(ingest, compaction, assembly) and the tools that read them carry on, and nothing else is lost."""
from __future__ import annotations

import json
import sqlite3

import pytest
from conftest import assistant, make_config, make_engine, tool_call, tool_result, user

from hermes_trove import command, tokens
from hermes_trove.ops import doctor, queries
from hermes_trove.packed import register
from hermes_trove.rows import SessionKey
from hermes_trove.runtime import build_runtime

READERS = (("trove_grep", {"query": "deploy"}), ("trove_grep", {"query": "output", "session_scope": "all"}),
           ("trove_recall", {"query": "deploy answer"}), ("trove_describe", {}), ("trove_expand", {"node_id": 1}),
           ("trove_load_session", {"session_id": "s1"}), ("trove_recent", {"period": "today"}),
           ("trove_inspect", {}), ("trove_status", {}))


def exchanges(n: int, tag: str = "") -> list[dict]:
    out = []
    for i in range(n):
        out += [user(f"question {tag}{i} about deploy " + "pad " * 300),
                assistant("", [tool_call(f"c{tag}{i}", "terminal", json.dumps({"cmd": f"ls {i}"}))]),
                tool_result(f"c{tag}{i}", f"result {i} " + "line of output\n" * 200),
                assistant(f"answer {tag}{i} " + "word " * 200)]
    return out


def compacted(tmp_path):
    """An engine whose session has one compaction behind it, and the path of its trove.db."""
    runtime = build_runtime(make_config(tmp_path))
    engine = make_engine(runtime, context_length=20000)
    history = exchanges(12)
    engine.compress(history, current_tokens=10**6, force=True)
    assert runtime.dag.visible("s1")
    return engine, history, runtime.config.database_path


def damage(path: str, sql: str) -> None:
    conn = sqlite3.connect(path)
    register(conn)  # the schema's triggers read content through trove_text
    with conn:
        assert conn.execute(sql).rowcount > 0
    conn.close()


def next_turn_and_reads(engine, history) -> None:
    """A turn over the damaged rows compacts through trove itself, and every reader answers."""
    before = engine.runtime.store.count("s1")
    more = history + exchanges(6, "b")
    out = engine.compress(more, current_tokens=10**6, force=True)
    assert engine.state.last_status != "delegated", engine.state.last_reason
    assert out != more and all(isinstance(m, dict) for m in out)
    assert engine.runtime.store.count("s1") == before + len(more) - len(history)
    for name, args in READERS:
        reply = json.loads(engine.handle_tool_call(name, args))
        assert f"{name} failed" not in str(reply.get("error", "")), reply


@pytest.mark.parametrize("sql", [
    "UPDATE messages SET ingested_at = 'soon', created_at = 'then'",
    "UPDATE summary_nodes SET earliest_at = 'then', latest_at = 'now', created_at = 'when'",
    "UPDATE summary_nodes SET latest_at = 'now'",
])
def test_a_timestamp_stored_as_text_is_read_as_unknown_and_the_turn_compacts(tmp_path, sql):
    engine, history, path = compacted(tmp_path)
    damage(path, sql)
    next_turn_and_reads(engine, history)


def test_a_session_cursor_stored_as_text_realigns_on_the_stored_messages(tmp_path):
    engine, history, path = compacted(tmp_path)
    damage(path, "UPDATE sessions SET ingest_len = 'lots'")
    next_turn_and_reads(engine, history)  # every new message stored once, none again


def test_a_lineage_cell_that_holds_no_id_is_left_out_and_the_dag_still_draws(tmp_path):
    """A leaf's source row whose store id is text (a damaged file): the DAG view, the frontier read
    and trove_expand leave that one cell out instead of failing on it."""
    engine, history, path = compacted(tmp_path)
    damage(path, "UPDATE node_messages SET store_id = 'lost' WHERE ordinal = 1")
    drawing = command.make_handler(engine.runtime)("dag --session s1")
    assert "failed" not in drawing and "Error" not in drawing, drawing
    assert engine.runtime.dag.highest_covered_store_id("s1") > 0
    leaf = engine.runtime.dag.visible("s1")[0]
    ids = engine.runtime.dag.source_ids(leaf)
    assert ids and all(isinstance(i, int) for i in ids)
    next_turn_and_reads(engine, history)


@pytest.mark.parametrize(("sql", "kind", "status"), [
    ("UPDATE messages SET content = substr(content, 1, 20) WHERE typeof(content) = 'blob'",
     "messages whose stored text is damaged", "fail"),
    ("UPDATE messages SET tool_calls = '{not json' WHERE tool_calls IS NOT NULL",
     "messages with a column that is not JSON", "warn"),
    ("UPDATE messages SET created_at = 'then' WHERE role = 'user'",
     "messages with a time or count that is not a number", "warn"),
    ("UPDATE messages SET extra = '[1, 2]'", "messages with a column that is not JSON", "warn"),
    ("UPDATE messages SET extra = 'null'", "messages with a column that is not JSON", "warn"),
    ("UPDATE messages SET content = '5', content_is_json = 1 WHERE role = 'user'",
     "messages with a column that is not JSON", "warn"),
    ("UPDATE summary_nodes SET latest_at = 'now'", "summary nodes with a time or count that is not a number", "warn"),
    ("UPDATE summary_nodes SET depth = 'zero'", "summary nodes with a time or count that is not a number", "warn"),
    ("UPDATE messages SET token_count = 9000000000000000000 WHERE role = 'tool'",
     "messages with a time or count that is not a number", "warn"),
    ("UPDATE messages SET token_count = 'many' WHERE role = 'tool'",
     "messages with a time or count that is not a number", "warn"),
    ("UPDATE sessions SET ingest_len = 'lots'", "sessions with a time or count that is not a number", "warn"),
    ("UPDATE sessions SET frontier_store_id = 'x'", "sessions with a time or count that is not a number", "warn"),
    ("UPDATE sessions SET rotated_frontier = 'x'", "sessions with a time or count that is not a number", "warn"),
    ("UPDATE sessions SET updated_at = 'now', created_at = 'then', ended_at = 'later'",
     "sessions with a time or count that is not a number", "warn"),
])
def test_the_doctor_names_each_damaged_row_and_the_turn_carries_on(tmp_path, sql, kind, status):
    engine, history, path = compacted(tmp_path)
    assert by_check(engine)["damaged_rows"]["status"] == "pass"
    damage(path, sql)
    checks = by_check(engine)
    assert not [c for c in checks.values() if "crashed" in c["detail"]], checks
    assert checks["lifecycle"]["status"] == "pass", checks["lifecycle"]  # no frontier reads as past the messages
    check = checks["damaged_rows"]
    assert check["status"] == status and check["detail"].startswith(kind + ": "), check
    next_turn_and_reads(engine, history)


def by_check(engine) -> dict[str, dict]:
    report = doctor.run_doctor(engine.runtime, engine.snapshot())
    return {c["check"]: c for c in report["checks"]}


@pytest.mark.both_backends
def test_a_nan_time_on_either_store_is_named_by_the_doctor_and_read_as_unknown(tmp_path, runtime, backend):
    engine = make_engine(runtime, context_length=20000)
    history = exchanges(12)
    engine.compress(history, current_tokens=10**6, force=True)
    if backend == "postgresql":
        import psycopg
        with psycopg.connect(runtime.config.database_url, autocommit=True) as conn:
            conn.execute("UPDATE messages SET created_at = 'NaN' WHERE role = 'user'")
            conn.execute("UPDATE summary_nodes SET earliest_at = 'Infinity', latest_at = 'NaN'")
    else:  # SQLite keeps no NaN (it stores NULL): text is how a time goes bad in a file
        damage(runtime.config.database_path, "UPDATE messages SET created_at = 'NaN' WHERE role = 'user'")
        damage(runtime.config.database_path, "UPDATE summary_nodes SET earliest_at = 'Infinity', latest_at = 'x'")
    detail = by_check(engine)["damaged_rows"]["detail"]
    assert "messages with a time or count that is not a number" in detail
    assert "summary nodes with a time or count that is not a number" in detail
    next_turn_and_reads(engine, history)


@pytest.mark.parametrize("sql", [
    "UPDATE summary_nodes SET token_count = -1000000000",
    "UPDATE summary_nodes SET token_count = 'many', source_token_count = 'more'",
    "UPDATE messages SET token_count = 'many'",
])
def test_a_damaged_token_count_is_recounted_and_the_prompt_stays_under_the_threshold(tmp_path, sql):
    runtime = build_runtime(make_config(tmp_path, incremental_max_depth=0, leaf_chunk_tokens=500))
    engine = make_engine(runtime, context_length=20000)
    history = [m for i in range(60)
               for m in (user(f"q{i} " + "alpha beta " * 150), assistant(f"a{i} " + "gamma " * 150))]
    engine.compress(history, current_tokens=10**6, force=True)
    assert len(runtime.dag.frontier("s1")) > 20  # leaves only: the next prompt shows many of them
    damage(runtime.config.database_path, sql)
    out = engine.compress(history + [user("next"), assistant("ok")], current_tokens=10**6, force=True)
    assert engine.state.last_status != "delegated", engine.state.last_reason
    assert tokens.count_messages(out) <= engine.threshold_tokens
    assert "count that is not a number" in by_check(engine)["damaged_rows"]["detail"]


@pytest.mark.both_backends
def test_json_with_nan_or_infinity_that_trove_writes_and_reads_is_not_called_damaged(tmp_path, backend):
    engine = make_engine(build_runtime(make_config(tmp_path)))
    result = {**tool_result("c1", ""), "content": [{"type": "text", "text": "NaN rows", "score": float("nan")}]}
    engine.ingest([user("q"), assistant("", [tool_call("c1", "probe", "{}")]), result,
                   {**assistant("ok"), "usage_ratio": float("-inf")}])
    stored = [r.to_message() for r in engine.runtime.store.page("s1")]
    assert stored[2]["content"][0]["text"] == "NaN rows" and stored[3]["usage_ratio"] == float("-inf")
    assert by_check(engine)["damaged_rows"]["status"] == "pass", by_check(engine)["damaged_rows"]


def test_a_session_time_stored_as_text_reads_as_unknown_in_clean_up_and_the_chat_look_up(tmp_path):
    engine, history, path = compacted(tmp_path)
    store = engine.runtime.store
    for sid in ("old", "new"):
        store.ensure_session(SessionKey(sid, conversation_id="chat"))
    damage(path, "UPDATE sessions SET updated_at = 'now', created_at = 'then' WHERE session_id IN ('s1', 'old')")
    assert store.sessions(1, "chat")[0].session_id == "new"  # an unknown time is not the newest
    for words in (["doctor", "clean"], ["doctor", "retention"]):
        assert "error" not in command.run(engine.runtime, words, session_id="s1")[1]
    assert command.run(engine.runtime, ["status"], session_id="s1")[1]["lifecycle"]["created_at"] is None


@pytest.mark.parametrize("calls", ["5", '{"a": 1}', '[5, "x", {"function": 3}]'])
def test_tool_calls_that_are_json_but_no_list_of_calls_are_summarised_and_named(tmp_path, calls):
    runtime = build_runtime(make_config(tmp_path))
    engine = make_engine(runtime, context_length=20000)
    history = exchanges(12)
    engine.ingest(history)  # not yet compacted: the damaged rows are the next summary's sources
    damage(runtime.config.database_path, f"UPDATE messages SET tool_calls = '{calls}' WHERE tool_calls IS NOT NULL")
    assert by_check(engine)["damaged_rows"]["detail"].startswith("messages with a column that is not JSON: 12 ")
    next_turn_and_reads(engine, history)


@pytest.mark.both_backends
@pytest.mark.parametrize("sql", [
    "UPDATE messages SET tool_calls = '{not json' WHERE tool_calls IS NOT NULL",
    "UPDATE messages SET tool_calls = '[5, {\"a\": 1}]' WHERE tool_calls IS NOT NULL",
    "UPDATE messages SET extra = '[1, 2]' WHERE role = 'tool'",
    "UPDATE messages SET extra = 'null' WHERE role = 'tool'",
    "UPDATE messages SET content = '5', content_is_json = 1 WHERE role = 'tool'",
])
def test_a_json_column_that_is_not_trove_s_json_is_named_on_either_store(runtime, backend, sql):
    engine = make_engine(runtime, context_length=20000)
    history = exchanges(12)
    engine.compress(history, current_tokens=10**6, force=True)
    runtime.store.settle()
    assert by_check(engine)["damaged_rows"]["status"] == "pass", by_check(engine)["damaged_rows"]
    if backend == "postgresql":
        import psycopg
        with psycopg.connect(runtime.config.database_url, autocommit=True) as conn:
            conn.execute(sql)
    else:
        damage(runtime.config.database_path, sql)
    check = by_check(engine)["damaged_rows"]
    assert check["status"] == "warn", check
    assert check["detail"].startswith("messages with a column that is not JSON: 12 "), check
    next_turn_and_reads(engine, history)


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_a_server_that_refuses_the_json_function_still_gets_the_other_checks(tmp_path, runtime, backend, caplog):
    engine = make_engine(runtime, context_length=20000)
    engine.compress(exchanges(12), current_tokens=10**6, force=True)
    runtime.store.settle()
    import psycopg
    with psycopg.connect(runtime.config.database_url, autocommit=True) as conn:
        conn.execute("UPDATE messages SET token_count = -5 WHERE role = 'tool'")
    # a read-only session (a standby, say) may not create even a temporary function
    read_only = runtime.config.database_url.replace("options=", "options=-cdefault_transaction_read_only%3Don%20", 1)
    other = build_runtime(make_config(tmp_path / "other", database_url=read_only))
    found = queries.damaged_rows(other.db.read())
    assert list(found) == ["messages with a time or count that is not a number"]
    assert "JSON columns not checked" in caplog.text


@pytest.mark.both_backends
def test_a_session_updated_time_that_is_no_time_on_either_store_is_not_the_chat_s_newest(runtime, backend):
    engine = make_engine(runtime)
    for sid in ("old", "new"):
        runtime.store.ensure_session(SessionKey(sid, conversation_id="chat"))
    runtime.store.settle()
    if backend == "postgresql":
        import psycopg
        with psycopg.connect(runtime.config.database_url, autocommit=True) as conn:
            conn.execute("UPDATE sessions SET updated_at = 'NaN' WHERE session_id = 'old'")
    else:
        damage(runtime.config.database_path, "UPDATE sessions SET updated_at = 'x' WHERE session_id = 'old'")
    assert runtime.store.sessions(1, "chat")[0].session_id == "new"
    detail = by_check(engine)["damaged_rows"]["detail"]
    assert "sessions with a time or count that is not a number: 1 (ids old)" in detail


@pytest.mark.both_backends
def test_a_rotated_frontier_that_is_no_count_on_either_store_is_named_and_ignored(runtime, backend):
    engine = make_engine(runtime, context_length=20000)
    engine.compress(exchanges(12), current_tokens=10**6, force=True)
    runtime.store.settle()
    frontier = runtime.store.frontier_store_id("s1")
    bad = ("-3", "-1") if backend == "postgresql" else ("'x'", "'y'")

    def change(sql: str) -> None:
        if backend == "postgresql":
            import psycopg
            with psycopg.connect(runtime.config.database_url, autocommit=True) as conn:
                conn.execute(sql)
        else:
            damage(runtime.config.database_path, sql)

    change(f"UPDATE sessions SET rotated_frontier = {bad[0]}")
    detail = by_check(engine)["damaged_rows"]["detail"]
    assert "sessions with a time or count that is not a number: 1 (ids s1)" in detail
    change(f"UPDATE sessions SET frontier_store_id = {bad[1]}")
    assert runtime.store.frontier_store_id("s1") == frontier  # the leaves decide: the damaged record is no point


@pytest.mark.both_backends
def test_a_huge_token_count_on_either_store_is_named_and_left_out_of_the_sums(runtime, backend):
    engine = make_engine(runtime, context_length=20000)
    history = exchanges(12)
    engine.compress(history, current_tokens=10**6, force=True)
    sql = "UPDATE messages SET token_count = 9000000000000000000 WHERE role = 'tool'"
    if backend == "postgresql":
        import psycopg
        with psycopg.connect(runtime.config.database_url, autocommit=True) as conn:
            conn.execute(sql)
    else:
        damage(runtime.config.database_path, sql)
    detail = by_check(engine)["damaged_rows"]["detail"]
    assert detail.startswith("messages with a time or count that is not a number: 12 "), detail
    next_turn_and_reads(engine, history)


def test_a_frontier_stored_as_text_is_written_as_a_count_again_by_the_next_compaction(tmp_path):
    engine, history, path = compacted(tmp_path)
    damage(path, "UPDATE sessions SET frontier_store_id = 'x'")
    next_turn_and_reads(engine, history)
    assert by_check(engine)["damaged_rows"]["status"] == "pass"


@pytest.mark.parametrize("sql", [
    "UPDATE summary_nodes SET summary = CAST(X'FFFE' AS TEXT)",  # TEXT whose bytes are no UTF-8
    "UPDATE summary_nodes SET summary = X'FF00FE'",  # a summary stored as bytes
    "UPDATE messages SET tool_calls = CAST(X'5BFF5D' AS TEXT) WHERE tool_calls IS NOT NULL",
    "UPDATE messages SET role = CAST(X'FF' AS TEXT) WHERE role = 'assistant'",
    "UPDATE messages SET tool_name = CAST(X'C3' AS TEXT) WHERE tool_name IS NOT NULL",
])
def test_stored_text_that_is_no_utf8_reads_with_replacement_characters_and_the_turn_carries_on(tmp_path, sql):
    # Each used to fail every read of the row ("Could not decode to UTF-8 column", or bytes where
    # text was expected): grep, recall, describe, expand and load_session answered "failed".
    engine, history, path = compacted(tmp_path)
    damage(path, sql)
    described = json.loads(engine.handle_tool_call("trove_describe", {"node_id": 1}))
    assert isinstance(described["summary_preview"], str) and not described["summary_preview"].startswith("b'")
    asked = json.loads(engine.handle_tool_call("trove_expand_query", {"prompt": "what?", "node_ids": [1]}))
    assert "failed" not in str(asked.get("error", "")), asked
    next_turn_and_reads(engine, history)
    assert "failed" not in str(by_check(engine))


@pytest.mark.parametrize(("sql", "kind"), [
    ("UPDATE summary_nodes SET summary = CAST(X'FFFE' AS TEXT)", "summary nodes"),
    ("UPDATE messages SET tool_calls = CAST(X'5BFF5D' AS TEXT) WHERE tool_calls IS NOT NULL", "messages"),
    ("UPDATE messages SET role = CAST(X'FF' AS TEXT) WHERE role = 'assistant'", "messages"),
    ("UPDATE messages SET tool_name = CAST(X'C3' AS TEXT) WHERE tool_name IS NOT NULL", "messages"),
])
def test_the_doctor_names_stored_text_whose_bytes_are_no_utf8(tmp_path, sql, kind):
    # Reads show such text with U+FFFD and carry on; the doctor is where the damage is named.
    engine, _, path = compacted(tmp_path)
    assert "no UTF-8" not in by_check(engine)["damaged_rows"]["detail"]
    damage(path, sql)
    check = by_check(engine)["damaged_rows"]
    assert check["status"] == "warn" and f"{kind} holding text whose bytes are no UTF-8" in check["detail"], check


@pytest.mark.parametrize("cell", ["'lost'", "2.5", "-4"])
def test_expand_pages_past_a_lineage_cell_that_holds_no_id(tmp_path, cell):
    """Paging a leaf one source at a time over a damaged lineage cell: the cursor moves on every page
    (it never hands back the offset it was given), each good source is read once, and the source
    indexes count the same sources as total_sources."""
    engine, _history, path = compacted(tmp_path)
    leaf = engine.runtime.dag.visible("s1")[0]
    good = engine.runtime.dag.source_ids(leaf)
    assert len(good) >= 3
    damage(path, f"UPDATE node_messages SET store_id = {cell} WHERE node_id = {leaf.node_id} AND ordinal = 1")
    seen, offset, pages = [], 0, 0
    while offset is not None:
        pages += 1
        assert pages <= len(good) + 1, f"the cursor stays at {offset}"
        reply = json.loads(engine.handle_tool_call(
            "trove_expand", {"node_id": leaf.node_id, "source_offset": offset, "source_limit": 1}))
        assert "error" not in reply, reply
        page = reply["pagination"]
        assert page["next_source_offset"] is None or page["next_source_offset"] > offset, page
        for item in reply["expanded"]:
            assert item["source_index"] < page["total_sources"]
            seen.append(item["store_id"])
        offset = page["next_source_offset"]
    assert seen == [good[0], *good[2:]]
    described = json.loads(engine.handle_tool_call("trove_describe", {"node_id": leaf.node_id}))
    assert described["num_sources"] == len(good) - 1, described
    assert described["descendant_message_count"] == len(good) - 1, described


@pytest.mark.parametrize("cell", ["'lost'", "-4"])
def test_recent_summaries_list_a_leaf_whose_lineage_cells_hold_no_id(tmp_path, cell):
    """trove_recent's summaries name each leaf's first source and size from its lineage rows: a cell that holds
    no id is left out there as in trove_expand (the leaf is listed, covering no readable message)."""
    engine, _history, path = compacted(tmp_path)
    leaf = engine.runtime.dag.visible("s1")[0]
    damage(path, f"UPDATE node_messages SET store_id = {cell} WHERE node_id = {leaf.node_id}")
    reply = json.loads(engine.handle_tool_call("trove_recent", {"period": "today", "mode": "summaries"}))
    assert "error" not in reply, reply
    listed = [i for i in reply["items"] if i.get("node_id") == leaf.node_id]
    assert listed and listed[0]["messages"] == 0, reply
