"""Bad input through every entry point, on a SQLite file and on a PostgreSQL server.

``test_schema_cases.py`` puts every value of its tables into every parameter and asks for a clear
answer. This sweep asks more of the values that can only be refused: the error names the
argument in plain words, whether the call came as a dict or as JSON text, and the store is
exactly as it was (``trove_retrieve`` included: a refused call keeps no episode). It also runs
``/trove`` and every operator subcommand with hostile words and session ids, gives the same
plain answer on either store to reversed ranges and refs that do not exist, reads a store whose
rows were damaged underneath it (a summary over deleted messages, a large output whose copy is
gone), and imports ids and file names that are no UTF-8.
"""
from __future__ import annotations

import contextlib
import io
import json
import sys
from typing import Any

import pytest
from conftest import assistant, make_config, make_engine, tool_call, tool_result, user

from hermes_trove import command
from hermes_trove.ops import doctor
from hermes_trove.payloads.sidecar import refs_in
from hermes_trove.runtime import build_runtime
from hermes_trove.tools import TOOLS, TOOLS_BY_NAME

from .conftest import MiB
from .test_schema_cases import bases, build_world, nested, settled_fingerprint

STORES = ("sqlite", "postgresql")

pytestmark = pytest.mark.reliability


@pytest.fixture(scope="module")
def worlds(request, tmp_path_factory):
    """Each backend's world of ``test_schema_cases`` (two messages, a leaf, an assertion, an
    episode), built on first use and kept for the module."""
    built: dict[str, dict[str, Any]] = {}
    open_worlds: list[Any] = []

    def get(backend: str) -> dict[str, Any]:
        if backend not in built:
            open_worlds.append(build_world(backend, request, tmp_path_factory))
            built[backend] = next(open_worlds[-1])
        return built[backend]

    yield get
    for world in open_worlds:
        next(world, None)


# Values no parameter may take, whatever its type.
ALWAYS: dict[str, Any] = {
    "nan": float("nan"), "infinity": float("-inf"), "past_64_bits": 2**64 + 1, "1e308": 1e308, "deep": nested(20),
    "lone_surrogate": "x\ud800y", "mebibyte": "(" * MiB,
}


def refused(prop: dict[str, Any]) -> dict[str, Any]:
    """The values ``prop`` must refuse: the common ones, a list or an object where its type is
    neither, a word where it wants a number."""
    kind = prop.get("type")
    out = dict(ALWAYS)
    if kind not in ("array", "object"):
        out.update(nested_object={"a": {"b": [1, None]}}, list=["x", 1])
    if kind in ("integer", "number"):
        out.update(word="seven", blank="  ")
    if "enum" in prop:
        out.update(unknown_choice="bogus", near_choice=f"{prop['enum'][0]}x")
    if "enum" in prop.get("items", {}):
        out.update(unknown_item=["bogus"])
    return out


def sweep_cases() -> list[Any]:
    return [(backend, tool.name, param) for backend in STORES for tool in TOOLS
            for param in tool.schema["parameters"]["properties"]]


@pytest.mark.parametrize(("backend_name", "tool", "param"), sweep_cases())
def test_a_value_no_argument_can_take_is_refused_by_name_and_writes_nothing(worlds, backend_name, tool, param):
    world = worlds(backend_name)
    base = bases(world)[tool]
    prop = TOOLS_BY_NAME[tool].schema["parameters"]["properties"][param]
    before = settled_fingerprint(world)
    for name, value in refused(prop).items():
        args = {**base, param: value}
        forms: list[Any] = [args] if name == "mebibyte" else [args, json.dumps(args)]  # the text form too
        for form in forms:
            out = world["engine"].handle_tool_call(tool, form)
            out.encode("utf-8")
            body = json.loads(out)
            assert isinstance(body, dict) and len(out) <= TOOLS_BY_NAME[tool].response_cap
            error = body.get("error")
            assert isinstance(error, str), f"{tool} {param}={name} was accepted: {out[:300]}"
            assert param in error and "failed:" not in error, f"{tool} {param}={name}: {error}"
            assert "\ud800" not in error and len(error) < 1000
    assert settled_fingerprint(world) == before, f"{tool} {param}: a refused call changed the store"


FROM, TO = "2026-06-01T00:00:00Z", "2026-05-01T00:00:00Z"
RANGES_AND_REFS = {  # tool, arguments, what the answer must say (an error, or the rejected ref's reason)
    "grep_reversed": ("trove_grep", {"query": "shoes", "time_from": FROM, "time_to": TO}, "time_from is after time_to"),
    "session_reversed": ("trove_load_session", {"session_id": "s1", "time_from": FROM, "time_to": TO},
                         "time_from is after time_to"),
    "recall_reversed": ("trove_recall", {"query": "shoes", "since": FROM, "before": TO}, "since must be earlier"),
    "recall_unparsable": ("trove_recall", {"query": "shoes", "since": "the day after never"}, "since="),
    "recent_reversed": ("trove_recent", {"period": "2026-06-01..2026-05-01"}, "ends before it starts"),
    "as_of_far": ("trove_query_state", {"subject_key": "user:self", "as_of": "9999-12-31T23:59:59Z"},
                  "as_of='9999-12-31T23:59:59Z' is out of range"),
    "ref_path": ("trove_expand", {"externalized_ref": "../../etc/passwd"}, "externalized_ref must be a bare file"),
    "ref_unknown": ("trove_expand", {"externalized_ref": f"trove-{'0' * 32}-deadbeef.json"}, "was not found"),
    "store_id_unknown": ("trove_expand", {"store_id": 999_999_999}, "no stored message with store_id 999999999"),
    "node_unknown": ("trove_describe", {"node_id": 999_999_999}, "summary node 999999999 is not visible"),
    "session_unknown": ("trove_load_session", {"session_id": "no-such"}, "no stored session 'no-such'"),
    "episode_unknown": ("trove_retrieve", {"action": "status", "retrieval_id": "nope"}, "no retrieval episode 'nope'"),
    "cursor_forged": ("trove_recent", {"period": "today", "cursor": "eyJhIjoxfQ=="}, "cursor is not one"),
    "operand_unknown": ("trove_compute", {"question": "What is the total?", "operands": ["trove:999999999:0-5"]},
                        "store_id 999999999 is not stored"),
    "operand_malformed": ("trove_compute", {"question": "What is the total?", "operands": ["trove:abc"]},
                          "not a ref: 'trove:abc'"),
    "baseline_reversed": ("trove_evidence_pack", {"question": "shoes?", "baseline_refs": ["trove:1:5-2"]},
                          "span must satisfy 0 <= span_start <= span_end"),
}


@pytest.mark.parametrize("backend_name", STORES)
@pytest.mark.parametrize("case", sorted(RANGES_AND_REFS))
def test_reversed_ranges_and_refs_that_do_not_exist_get_the_same_plain_answer_on_either_store(
        worlds, backend_name, case):
    world = worlds(backend_name)
    tool, args, says = RANGES_AND_REFS[case]
    before = settled_fingerprint(world)
    out = world["engine"].handle_tool_call(tool, args)
    assert says in out and "failed:" not in out, out[:600]
    assert "externalized_ref: externalized_ref" not in out  # the argument named once
    assert settled_fingerprint(world) == before


# -- /trove and the operator command line --------------------------------------------------------------

HOSTILE_WORDS = {
    "nul": "a\x00b", "lone_surrogate": "\udcff", "rtl": "\u202eevil\u200f", "combining": "e\u0301" * 40,
    "long": "x" * 100_000, "scope_surrogate": "scope=\ud800", "fts": 'NEAR( "a *', "number": "-1e308",
    "json": '{"a": [1]}',
}
SUBCOMMANDS = [list(words) for words in command.handlers()] + [[]]


def cli(argv: list[str]) -> tuple[Any, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code: Any = command.main(argv, out=out)
        except SystemExit as exc:  # argparse's own usage error
            code = exc.code
    return code, out.getvalue() + err.getvalue()


def db_arg(world: dict[str, Any]) -> str:
    return world["cfg"].database_url or str(world["cfg"].database_path)


@pytest.mark.parametrize("backend_name", STORES)
@pytest.mark.parametrize("words", SUBCOMMANDS, ids=lambda w: "-".join(w) or "default")
def test_every_subcommand_answers_hostile_words_in_utf8_and_writes_nothing(worlds, backend_name, words, caplog):
    world = worlds(backend_name)
    before = settled_fingerprint(world)
    handle = command.make_handler(world["runtime"])
    for name, word in HOSTILE_WORDS.items():
        # an unknown trailing word, and the same word as the session the subcommand reads
        for argv in (["--db", db_arg(world), *words, word], ["--db", db_arg(world), "--session", word, *words]):
            if argv[-1] in ("migrate", "apply"):
                continue  # apply forms write by design; migrate without --to is covered below
            code, text = cli(argv)
            assert code in (0, 1, 2), (words, name, code)
            text.encode("utf-8")  # printing it cannot fail on a strict UTF-8 terminal
            assert "Traceback" not in text and len(text) < 200_000, (words, name, text[-2000:])
        said = handle(" ".join([*words, word]))
        assert isinstance(said, str) and len(said) < 200_000
        said.encode("utf-8")  # the host sends it on to a chat as UTF-8
    assert settled_fingerprint(world) == before, f"{words} with hostile words changed the store"
    failures = [r.getMessage() for r in caplog.records if r.exc_info]  # a subcommand that raised: a defect
    assert not failures, failures


SUBSYSTEM_WORDS = ["rollups rebuild day 2025-01-01 scope=\ud800", "rollups rebuild day 2025-01-01 scope=a\x00b",
                   "rollups rebuild week 9999-99-99", "rollups rebuild day 2025-01-01 scope=" + "x" * 100_000,
                   "rollups rebuild all \u202e", "assertions rebuild --limit NaN", "assertions \ud800",
                   "assertions rebuild --limit 99999999999999999999999", "assertions status \x00"]


@pytest.mark.both_backends
def test_words_that_reach_a_subsystems_handler_are_answered_not_raised(tmp_path, backend, caplog):
    runtime = build_runtime(make_config(tmp_path, temporal_rollups_enabled=True, assertions_enabled=True))
    engine = make_engine(runtime)
    engine.ingest([user("I live in Berlin"), assistant("noted")] * 2)
    runtime.store.settle()
    stored = runtime.store.count("s1")
    handle = command.make_handler(runtime)
    target = runtime.config.database_url or str(runtime.config.database_path)
    for words in SUBSYSTEM_WORDS:
        said = handle(words)
        said.encode("utf-8")
        code, text = cli(["--db", target, *words.split(" ")])
        text.encode("utf-8")
        assert code in (0, 1, 2) and "Traceback" not in text, (words, code, text[-1000:])
    assert runtime.store.count("s1") == stored
    failures = [r.getMessage() for r in caplog.records if r.exc_info]
    assert not failures, failures


@pytest.mark.parametrize("raw", [None, 5, ["status"], {"a": 1}, "\x00", "status \ud800", "(" * MiB])
def test_the_slash_handler_takes_any_value_the_host_passes(worlds, raw):
    said = command.make_handler(worlds("sqlite")["runtime"])(raw)
    said.encode("utf-8")
    assert said and len(said) < 200_000


def test_the_printed_answer_survives_a_strict_utf8_terminal(worlds, monkeypatch):
    # argv bytes that are no UTF-8 arrive as lone surrogates; a strict stdout used to raise on the echo
    strict = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    monkeypatch.setattr(sys, "stderr", strict)
    assert command.main(["--db", db_arg(worlds("sqlite")), "\udcff"], out=strict) == 2
    assert command.main(["--db", "/nonexistent/\udcff.db", "status"], out=strict) == 2
    strict.flush()
    assert "unknown subcommand: \ufffd" in strict.buffer.getvalue().decode("utf-8")


@pytest.mark.parametrize(("argv", "code", "says"), [
    (["--db", "a\x00b", "status"], 2, "no trove database"),
    (["--to", "\x00", "migrate"], 2, "NUL byte"),
    (["--to", "", "migrate"], 2, "needs --to"),
    (["--session", "x" * 100_000, "dag"], 1, "x"),
    (["--session", "\ud800", "status"], 1, "'\\ud800' is not usable text"),
    (["--session", "a\x00b", "dag"], 1, "is not usable text"),
    (["--limit", "-5", "assertions", "rebuild"], 2, "--limit"),  # usage, as --limit x
    (["--limit", "x", "status"], 2, "--limit"),
    (["--format", "bogus", "dag"], 2, "--format"),
])
def test_bad_options_are_usage_errors_or_clear_answers(worlds, argv, code, says):
    world = worlds("sqlite")
    before = settled_fingerprint(world)
    full = argv if argv[:1] == ["--db"] else ["--db", db_arg(world), *argv]
    got, text = cli(full)
    text.encode("utf-8")
    assert got == code and says in text and "Traceback" not in text, (got, text[:400])
    assert settled_fingerprint(world) == before


# -- rows damaged underneath --------------------------------------------------------------------------------

def exchanges(n: int, tag: str = "") -> list[dict]:
    out = []
    for i in range(n):
        out += [user(f"question {tag}{i} about deploy " + "pad " * 200),
                assistant("", [tool_call(f"c{tag}{i}", "terminal")]),
                tool_result(f"c{tag}{i}", f"result {i} " + "line of output\n" * 300),
                assistant(f"answer {tag}{i} " + "word " * 100)]
    return out


def execute(runtime: Any, sql: str) -> None:
    if runtime.config.database_url:
        import psycopg
        with psycopg.connect(runtime.config.database_url, autocommit=True) as conn:
            conn.execute(sql)
        return
    import sqlite3

    from hermes_trove.packed import register
    conn = sqlite3.connect(runtime.config.database_path)
    register(conn)
    with conn:
        conn.execute(sql)
    conn.close()


@pytest.mark.both_backends
def test_a_summary_over_deleted_messages_and_a_lost_large_output_degrade_with_clear_words(tmp_path, backend):
    runtime = build_runtime(make_config(tmp_path, large_output_externalization_enabled=True,
                                        large_output_externalization_threshold_chars=2000))
    engine = make_engine(runtime, context_length=20000, complete=lambda *a, **k: "a summary of the deploy talk")
    history = exchanges(10)
    engine.compress(history, current_tokens=10**6, force=True)
    runtime.store.settle()
    leaf = next(n for n in runtime.dag.visible("s1") if n.depth == 0)
    gone = runtime.dag.source_ids(leaf, 0, 1000)
    refs = [r for row in runtime.store.page("s1", 0, 1000) for r in refs_in(row.content)]
    assert gone and refs
    execute(runtime, f"DELETE FROM messages WHERE store_id IN ({', '.join(map(str, gone))})")
    if backend == "postgresql":
        execute(runtime, "DELETE FROM payloads")
    else:
        for path in runtime.payload_dir.rglob("*"):
            if path.is_file():
                path.unlink()
    kept = runtime.store.count("s1")

    def answer(name: str, args: dict[str, Any]) -> dict[str, Any]:
        body = json.loads(engine.handle_tool_call(name, args))
        assert "failed:" not in str(body.get("error", "")), (name, body)
        return body

    assert "not found" in answer("trove_expand", {"externalized_ref": refs[-1]})["error"]
    assert "no stored message" in answer("trove_expand", {"store_id": gone[0]})["error"]
    expanded = answer("trove_expand", {"node_id": leaf.node_id})
    assert expanded["expanded"] and all(item.get("missing") for item in expanded["expanded"])
    assert answer("trove_describe", {"node_id": leaf.node_id})["node_id"] == leaf.node_id
    for name, args in (("trove_grep", {"query": "deploy"}), ("trove_recall", {"query": "deploy"}),
                       ("trove_expand_query", {"prompt": "what about the deploy?"}),
                       ("trove_load_session", {"session_id": "s1"}), ("trove_status", {}), ("trove_inspect", {}),
                       ("trove_recent", {"period": "today"}),
                       ("trove_compute", {"question": "how much?", "operands": [f"trove:{gone[0]}:0-5"]})):
        assert "error" not in answer(name, args), name
    checks = {c["check"]: c for c in doctor.run_doctor(runtime, engine.snapshot())["checks"]}
    assert "missing messages" in checks["orphaned_lineage"]["detail"], checks["orphaned_lineage"]
    assert not [c for c in checks.values() if "crashed" in c["detail"]], checks
    assert runtime.store.count("s1") == kept  # every read left the rest alone
    more = history + exchanges(4, "b")
    engine.compress(more, current_tokens=10**6, force=True)
    assert engine.state.last_status == "compacted", engine.state.last_reason
    assert runtime.store.count("s1") == kept + 16


# -- the importer: ids and names that are no UTF-8 ----------------------------------------------------------

def strict_streams(monkeypatch: Any) -> tuple[io.TextIOWrapper, io.TextIOWrapper]:
    """stdout and stderr as a terminal that is strict UTF-8 would take them."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    return out, err


def test_the_importer_keys_ids_and_file_names_that_are_no_utf8_and_rerunning_adds_nothing(tmp_path, monkeypatch):
    import os
    import sqlite3

    from hermes_trove.__main__ import main
    source = tmp_path / os.fsdecode(b"chat-\xff.jsonl")  # a name that is no UTF-8, as the file system gives it
    lines = [{"type": "session", "id": "s-\ud800"},
             {"type": "message", "id": "m\udc80", "message": {"role": "user", "content": "the pooler port is 6543"}},
             {"type": "message", "message": {"role": "assistant", "content": "noted \udcff"}}, "not json"]
    source.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    db = build_runtime(make_config(tmp_path)).config.database_path
    argv = ["import", "--target-db", str(db), "--source-jsonl", str(source), "--apply", "--no-progress"]
    out, err = strict_streams(monkeypatch)
    assert main(argv) == 0
    assert main([*argv, "--json"]) == 0  # the same files again: every row already imported
    out.flush()
    err.flush()
    said = out.buffer.getvalue().decode("utf-8") + err.buffer.getvalue().decode("utf-8")
    assert "chat-\\udcff.jsonl:4: not JSON" in said, said[-2000:]
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT session_id, content FROM messages ORDER BY store_id").fetchall()
    conn.close()
    assert len(rows) == 2 and rows[0][0].endswith("s-\\ud800") and rows[0][1] == "the pooler port is 6543", rows
    assert '"skipped_existing": 2' in said


@pytest.mark.parametrize("option", ["--import-id", "--agent", "--namespace"])
def test_an_importer_option_that_is_no_utf8_is_a_usage_error_naming_it(tmp_path, monkeypatch, option):
    from hermes_trove.__main__ import main
    source = tmp_path / "chat.jsonl"
    source.write_text(json.dumps({"type": "message", "message": {"role": "user", "content": "hi"}}) + "\n")
    db = tmp_path / "trove.db"
    out, err = strict_streams(monkeypatch)
    with pytest.raises(SystemExit) as exited:
        main(["import", "--target-db", str(db), "--source-jsonl", str(source), option, "x\udcff", "--apply"])
    err.flush()
    assert exited.value.code == 2 and f"{option} is not valid UTF-8" in err.buffer.getvalue().decode("utf-8")
    assert not db.exists()  # refused before anything was opened
