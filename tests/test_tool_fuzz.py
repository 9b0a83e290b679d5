"""Seeded, schema-driven fuzzing of every tool and of ``/trove``, through the paths the host takes.

Unlike ``reliability/fuzz.py`` (random shapes at random parameters) and ``reliability/test_schema_cases.py``
(one hostile value per parameter, a table), the arguments here are drawn from each tool's JSON schema:
whole valid calls with several parameters at once, then the same calls with one parameter made wrong
(the wrong type, an enum miss, a number under its minimum, NaN, a string past the bound, a lone
surrogate), junk deep inside a list or object, a required parameter left out, extra keys, or no object
at all; each kind is drawn for every tool. Half the calls go as the host sends them (the model's JSON
text parsed as the host parses it, then ``handle_tool_call`` with the live transcript), half as JSON
text straight through ``dispatch``.

Every call must answer a JSON object string under its tool's cap; a refusal of a call whose one wrong
parameter is known must name that parameter; a read-only tool must leave every table's rows (their
count and a hash of their content) as they were; the one tool that writes (``trove_retrieve``) must
leave nothing when it refuses. The number of examples is fixed and the seed too; no time is asserted.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import sqlite3
import threading
from typing import Any

import pytest
from conftest import (
    assistant,
    background_passes_finish,
    drop_schema,
    make_config,
    make_engine,
    tool_call,
    tool_result,
    user,
    with_search_path,
)
from test_import_cli import make_source

from hermes_trove import command
from hermes_trove.importer import cli as import_cli
from hermes_trove.refs import make_ref
from hermes_trove.runtime import build_runtime
from hermes_trove.store import SessionKey
from hermes_trove.tools import TOOLS, TOOLS_BY_NAME, dispatch

EXAMPLES = int(os.environ.get("TROVE_TOOL_FUZZ_EXAMPLES", "200"))  # per tool
SEED = int(os.environ.get("TROVE_TOOL_FUZZ_SEED", "20260"))
# The tools that write, and the tables they may write: trove_retrieve keeps its episodes; trove_query_state's
# small catch-up extraction stores assertions of the last few messages first (docs/retrieval-tools.md). Every
# other tool only reads, and a refused call writes nothing at all.
WRITERS = {"trove_retrieve": ("retrieval_",), "trove_query_state": ("assertion",)}
T0 = 1_780_000_000.0

FTS_JUNK = ['"', "*", "NEAR(", "AND OR", "NOT", "a OR", '"unclosed', "col:x", "^x", "(((", "x AND (y OR", "-",
            "{a b}", "NEAR(a b, -1)", "a*b*", "\\", "%_", "[a-z]+", ".*", "(?i)x", "$^", "'; DROP TABLE messages; --"]
WORDS = ["deploy key", "pooler port", "Berlin", "shoes", "hat", "the", "caf\u00e9 \u2603", "\U0001F600", "e\u0301",
         "\u202eabc", "x\x00y", "", " ", "\n\t"]
TIMES = ["2025-03-01T09:00:00Z", "2025-03-01", "yesterday", "last week", "0001-01-01T00:00:00Z",
         "9999-12-31T23:59:59Z", "-9999-01-01", "99999-01-01T00:00:00Z", "1e308", "2025-13-45", "2025-02-30T25:61:00Z",
         "10000000000000000000000-01-01", "now", "tomorrow", "1970-01-01T00:00:00+14:00", "3000 years ago"]
HUGE_INTS = [0, -1, 1, 2, 7, 50, 10**6, 2**31, 2**53 - 1, -(2**53 - 1), 2**53, 2**63, 10**30, -(10**30)]
BAD_FLOATS = [float("nan"), float("inf"), float("-inf"), 1e308, -1e308, -0.0, 0.5, 1e-300]
BIG = "q" * (1 << 20)  # a mebibyte


def nested(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = {"a": [value]}
    return value


# -- the world ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def world(request, tmp_path_factory):
    """A store with an imported session, an other session, and s1: messages with tool calls, a
    compaction's summaries, an assertion and a retrieval episode; on a file, then on a server."""
    tmp = tmp_path_factory.mktemp("fuzz")
    threads = set(threading.enumerate())
    url = schema = ""
    if request.param == "postgresql":
        import uuid

        import psycopg
        base = request.getfixturevalue("pg_url")
        schema = f"t_{uuid.uuid4().hex}"
        with psycopg.connect(base, autocommit=True) as c:
            c.execute(f'CREATE SCHEMA "{schema}"')
        url = with_search_path(base, schema, "public")
    else:  # the importer writes a SQLite file: that store starts with an imported session
        assert import_cli.main(["--source-db", str(make_source(tmp / "lcm.db", n=6)), "--target-db",
                                str(tmp / "trove.db"), "--apply"]) == 0
    cfg = make_config(tmp, database_url=url, assertions_enabled=True, adaptive_retrieval_enabled=True,
                      temporal_rollups_enabled=True,
                      large_output_externalization_enabled=True, large_output_externalization_threshold_chars=2000)
    runtime = build_runtime(cfg)
    if url:
        runtime.store.append(SessionKey("openclaw-trove:agent:unknown:sess-1"),
                             [user(f"message number {i}") for i in range(6)])
    runtime.store.ingest(SessionKey("other"), [user("the other session's secret"), assistant("noted")])
    engine = make_engine(runtime, complete=lambda *a, **k: "The shoes cost $20.")
    live = []
    for i in range(4):
        live += [user(f"I live in Berlin and the shoes cost ${20 + i}."),
                 assistant("", [tool_call(f"c{i}", "terminal")]),
                 tool_result(f"c{i}", f"deploy key in /etc/keys ({i})\n" + "log line\n" * 3000),
                 assistant(f"port {6543 + i} for the pooler")]
    for i, m in enumerate(live):
        m["timestamp"] = T0 + 60 * i
    engine.ingest(live)
    live = engine.compress(live, current_tokens=10**6, force=True)  # what the host holds from here on
    live = [*live, user("and the hat?"), assistant("The hat cost $15.")]
    engine.ingest(live)
    runtime.store.settle(timeout_s=5.0)
    rows = runtime.store.page("s1", 0, 1000)
    conn: Any = psycopg.connect(url, autocommit=True) if url else sqlite3.connect(cfg.database_path)
    node = conn.execute("SELECT MIN(node_id) FROM summary_nodes").fetchone()[0]
    if node is None:  # the compaction kept everything: a leaf over the first messages stands for its summary
        node = runtime.dag.add_leaf("s1", "leaf: Berlin, shoes and the pooler", [r.store_id for r in rows[:4]],
                                    token_count=10, source_token_count=40, earliest_at=T0, latest_at=T0 + 180)
    sessions = [r[0] for r in conn.execute("SELECT DISTINCT session_id FROM messages")]
    started = json.loads(engine.handle_tool_call("trove_retrieve", {
        "action": "start", "question": "where do I live?", "identity": {"intent_type": "lookup"},
        "requirements": [{"slot_id": "city", "description": "the city", "minimum_refs": 1}]}))
    background_passes_finish(threads)
    assert node is not None and len(sessions) >= 3, sessions
    other_id = conn.execute("SELECT MAX(store_id) FROM messages WHERE session_id = 'other'").fetchone()[0]
    w = {"engine": engine, "runtime": runtime, "cfg": cfg, "conn": conn, "live": live, "threads": threads,
         "node_id": node, "store_id": rows[0].store_id, "other_store_id": other_id, "sessions": sessions,
         "ref": make_ref(rows[0], 0, min(20, len(rows[0].content))).to_dict(),
         "retrieval_id": started.get("retrieval_id", ""), "db": url or str(cfg.database_path)}
    assert w["retrieval_id"], started
    yield w
    conn.close()
    if schema:
        from hermes_trove.pgdb import close_connections
        background_passes_finish(threads)
        close_connections()
        drop_schema(request.getfixturevalue("pg_url"), schema)


def fingerprint(conn: Any) -> dict[str, tuple[int, str]]:
    """Every table's row count and a hash of its rows (leases are bookkeeping, not data)."""
    if not isinstance(conn, sqlite3.Connection):  # a server: the same, hashed there
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                                             " AND tablename <> 'work_leases' ORDER BY 1")]
        rows = conn.execute(" UNION ALL ".join(
            f"(SELECT '{t}', COUNT(*), md5(coalesce(string_agg(x::text, '|' ORDER BY x::text), '')) FROM \"{t}\" x)"
            for t in tables)).fetchall()
        return {t: (n, h) for t, n, h in rows}
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name <> 'work_leases'"
                                        " AND name NOT LIKE 'sqlite_%' AND sql NOT LIKE 'CREATE VIRTUAL%' ORDER BY 1")]
    out = {}
    for name in names:
        h = hashlib.sha256()
        n = 0
        for row in conn.execute(f'SELECT * FROM "{name}" ORDER BY 1'):
            h.update(repr(row).encode("utf-8", "surrogatepass"))
            n += 1
        out[name] = (n, h.hexdigest())
    conn.commit()  # no read left open
    return out


# -- generation ---------------------------------------------------------------------------------------
def valid_value(rng: random.Random, w: dict[str, Any], tool: str, name: str, prop: dict[str, Any]) -> Any:
    """A value the schema accepts (not always one the store holds)."""
    if "enum" in prop:
        return rng.choice(prop["enum"])
    kind = prop.get("type")
    kind = next((k for k in kind if k != "null"), "string") if isinstance(kind, list) else kind
    if kind == "integer":
        lo = prop.get("minimum", 0)
        ids = [w["node_id"], w["store_id"], w["other_store_id"], 10**9] if name.endswith("_id") else []
        return rng.choice([lo, lo + 1, lo + 5, lo + 100, 2**53 - 1, *ids])
    if kind == "number":
        lo, hi = prop.get("minimum", -5.0), prop.get("maximum", 5.0)
        return rng.choice([lo, hi, (lo + hi) / 2, -0.0 if lo <= 0 else lo])
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "array":
        return [array_item(rng, w, name, prop.get("items", {})) for _ in range(rng.choice([0, 1, 2, 5]))]
    if kind == "object":
        return rng.choice([{}, {"a": 1}, {"selections": [{"claim_id": "a", "exact_ref": dict(w["ref"])}]},
                           {"max_items": 3}, {"intent_type": "lookup"}])
    if name in ("session_id",):
        return rng.choice([*w["sessions"], "nope", "s1"])
    if name in ("time_from", "time_to", "since", "before", "as_of", "question_date", "period"):
        return rng.choice(TIMES)
    if name in ("externalized_ref", "cursor", "retrieval_id"):
        return rng.choice(["trove:1:0-5", "sha256:" + "0" * 64, w["retrieval_id"], "", "x" * 200, "\u2603"])
    return rng.choice([*WORDS, *FTS_JUNK, "How much did the shoes cost?", "user:self"])


def array_item(rng: random.Random, w: dict[str, Any], name: str, items: dict[str, Any]) -> Any:
    if "enum" in items:
        return rng.choice(items["enum"])
    if items.get("type") == "integer":
        return rng.choice([w["node_id"], w["store_id"], w["other_store_id"], 0, 10**12])
    if items.get("type") == "string":
        return rng.choice([*WORDS[:6], "trove:1:0-5", "user"])
    return rng.choice([dict(w["ref"]), {**w["ref"], "store_id": w["other_store_id"]}, {"store_id": 10**9},
                       {"slot_id": "city", "description": "the city"}, {"value": 3, "unit": "usd"}, {}])


def wrong_value(rng: random.Random, prop: dict[str, Any]) -> tuple[Any, bool]:
    """A value the schema does not accept, and whether any handler must refuse it (a string past the
    bound, a lone surrogate, a non-finite or past-safe number are refused by the argument check; a
    wrong type may be read leniently, e.g. "7" for 7)."""
    kind = prop.get("type")
    pool: list[tuple[Any, bool]] = [
        ("\ud800x", True), (BIG, True), ("x" * 40000, True), (float("nan"), True), (float("inf"), True),
        (2**64, True), (-(2**63), True), (1e308, True), (nested(20), True), (["\udfff"], True),
        ({"deep": nested(3)}, False), (None, False), ([], False), ({}, False), (True, False), ("\x00", False),
    ]
    if kind in ("integer", "number"):
        lo = prop.get("minimum")
        pool += [("seven", True), ([1], True), ({"n": 1}, True)]
        if prop.get("maximum") is not None:  # a number past its range is clamped and the clamp reported
            pool += [(prop["maximum"] + 1, False), (prop["minimum"] - 1, False)]
        elif lo is not None:  # an integer under its minimum is refused
            pool += [(lo - 1, True), (-(10**12), True)]
    if kind == "string":
        pool += [(7, False), (["a"], False), ({"a": "b"}, True)]
    if kind == "boolean":
        pool += [("maybe", True), (2, False)]
    if "enum" in prop:
        pool += [("bogus", True), (prop["enum"][0].upper() + "\u0301", True)]
    return rng.choice(pool)


LEAF_JUNK: list[Any] = [float("nan"), 1e308, -1e308, -0.0, 2**53 - 1, -(2**53 - 1), 2**64, 0, -1, "", "\ud800",
                        "x\x00y", None, True, [], {}, "9" * 400, 253402300800, -62135596801, 10**18, "-0", "1e400",
                        "\"", "NEAR(", "*", "AND OR", "0001-01-01", "9999-12-31T23:59:59.999999+14:00", "x" * 33000]
REF_KEYS = ["store_id", "span_start", "span_end", "quote", "content_sha256", "session_id", "node_id", "claim_id",
            "exact_ref", "value", "unit", "slot_id", "minimum_refs", "selections", "max_items", "operation"]


def deep_junk(rng: random.Random, w: dict[str, Any], value: Any, depth: int = 0) -> Any:
    """``value`` with one leaf somewhere inside made wrong (or a key added), keeping its outer shape."""
    if isinstance(value, list) and value and depth < 6:
        i = rng.randrange(len(value))
        return [*value[:i], deep_junk(rng, w, value[i], depth + 1), *value[i + 1:]]
    if isinstance(value, dict) and depth < 6:
        out = dict(value)
        if out and rng.random() < 0.7:
            k = rng.choice(sorted(out))
            out[k] = deep_junk(rng, w, out[k], depth + 1)
        else:
            out[rng.choice(REF_KEYS)] = rng.choice([*LEAF_JUNK, dict(w["ref"]), [dict(w["ref"])] * 3])
        return out
    if isinstance(value, list):
        return [rng.choice([*LEAF_JUNK, dict(w["ref"])])]
    return rng.choice(LEAF_JUNK)


def base_args(rng: random.Random, w: dict[str, Any], tool: Any) -> dict[str, Any]:
    """Required parameters filled, and some optional ones."""
    props = tool.schema["parameters"]["properties"]
    required = set(tool.schema["parameters"].get("required") or [])
    args = {n: valid_value(rng, w, tool.name, n, props[n]) for n in sorted(required)}
    if tool.name == "trove_retrieve" and rng.random() < 0.7:
        args.update(action=rng.choice(["status", "search", "finish", "abandon", "start"]),
                    retrieval_id=w["retrieval_id"])
    for name in sorted(props):
        if name not in required and rng.random() < 0.35:
            args[name] = valid_value(rng, w, tool.name, name, props[name])
    if tool.name == "trove_expand" and rng.random() < 0.8:  # mostly one selector, so a call reaches its mode
        chosen = rng.choice(["node_id", "store_id", "externalized_ref"])
        for name in ("node_id", "store_id", "externalized_ref"):
            args.pop(name, None)
        args[chosen] = {"node_id": w["node_id"], "store_id": w["store_id"]}.get(chosen, "trove:1:0-5")
    return args


def example(rng: random.Random, w: dict[str, Any], tool: Any) -> tuple[Any, str | None, str]:
    """One call's arguments (a dict, or raw text), the parameter its refusal must name, if any, and
    which kind of call it is (``KINDS``)."""
    props = tool.schema["parameters"]["properties"]
    required = sorted(tool.schema["parameters"].get("required") or [])
    args = base_args(rng, w, tool)
    roll = rng.random()
    if roll < 0.35 or not props:
        if not props and roll < 0.3:
            args["bogus"] = rng.choice([1, "x", nested(5)])
            return args, None, "extra"
        return args, None, "valid"
    if roll < 0.6:
        name = rng.choice(sorted(props))
        value, must = wrong_value(rng, props[name])
        args[name] = value
        return args, name if must else None, "wrong"
    if roll < 0.75:
        name = rng.choice(sorted(props))
        args[name] = deep_junk(rng, w, args.get(name, valid_value(rng, w, tool.name, name, props[name])))
        return args, None, "deep"
    if roll < 0.85 and required:
        name = rng.choice(required)
        if tool.name == "trove_retrieve":
            args.pop("retrieval_id", None)
        args.pop(name)
        return args, name, "missing"
    if roll < 0.93:
        args[rng.choice(["bogus", "Query", "limit ", "\u202equery", "x" * 200])] = rng.choice([1, None, nested(4), "y"])
        return args, None, "extra"
    return rng.choice(['[1, 2]', '"text"', "null", "7", "{", '{"a": NaN', "", "   ", "[" * 5000, "{}" * 3]), None, "raw"


KINDS = ("valid", "wrong", "deep", "missing", "extra", "raw")


# -- the host's path ----------------------------------------------------------------------------------
def host_parse(raw: str) -> dict[str, Any] | None:
    """What the host does with the model's argument text: a JSON object or nothing (it answers itself)."""
    try:
        parsed = json.loads(raw)
    except (ValueError, TypeError, RecursionError):  # the host's own parse fails first: the plugin is not called
        return None
    return parsed if isinstance(parsed, dict) else None


def call(w: dict[str, Any], name: str, args: Any, via_host: bool) -> str | None:
    raw = args if isinstance(args, str) else json.dumps(args, allow_nan=True)  # lone surrogates go escaped
    if not via_host:
        return dispatch(w["engine"].tool_context(), name, raw)
    parsed = host_parse(raw)
    if parsed is None:
        return None  # the host refuses it without calling the plugin
    return w["engine"].handle_tool_call(name, parsed, messages=list(w["live"]))


def check_reply(tool: Any, out: Any, must_name: str | None, sent: list[str], label: str) -> dict[str, Any]:
    assert isinstance(out, str), label
    out.encode("utf-8")  # strict: no lone surrogate reaches the host
    body = json.loads(out)
    assert isinstance(body, dict), label
    assert len(out) <= tool.response_cap, f"{label}: {len(out)} > {tool.response_cap}"
    error = body.get("error")
    if error is not None:
        assert isinstance(error, str) and error.strip(), label
        # a caught internal failure: dispatch's "<tool> failed: ..." or the engine's "trove: <tool> failed; see ..."
        assert f"{tool.name} failed" not in error, f"{label}: {error[:400]}"
    if must_name is not None:
        assert isinstance(error, str), f"{label}: accepted: {out[:300]}"
        # the wrong parameter, or another the call sent and got wrong too (the base is drawn, not always valid;
        # an error naming only parameters the call never sent names none of its own),
        # or the arguments as a whole (raw text past its bound is refused before it is parsed)
        named = [n for n in (must_name, *sent) if n in error] or \
            [w for w in WHOLE_REFUSALS if w in error]
        assert named, f"{label}: the error names no argument: {error[:300]}"
    if error is None and isinstance(sent, list):
        extra = sorted(n for n in sent if n not in tool.parameters)
        assert body.get("ignored_arguments") == extra or not extra, f"{label}: ignored {body.get('ignored_arguments')}"
    return body


WHOLE_REFUSALS = ("arguments are too large", "arguments must be a JSON object", "arguments are nested")


@pytest.mark.parametrize("tool", [t.name for t in TOOLS])
def test_schema_drawn_calls_answer_within_cap_name_the_bad_argument_and_write_nothing(world, tool):
    rng = random.Random(f"{SEED}:{tool}")
    spec = TOOLS_BY_NAME[tool]
    problems: list[str] = []
    ran = 0
    drawn: set[str] = set()
    for i in range(EXAMPLES):
        args, must_name, kind = example(rng, world, spec)
        drawn.add(kind)
        via_host = i % 2 == 0
        background_passes_finish(world["threads"])
        before = fingerprint(world["conn"])
        calling = set(threading.enumerate())
        label = f"#{i} {tool} {'host' if via_host else 'dispatch'} {shown(args)}"
        out = call(world, tool, args, via_host)
        background_passes_finish(calling)
        after = fingerprint(world["conn"])
        if out is None:
            continue
        ran += 1
        try:
            body = check_reply(spec, out, must_name, list(args) if isinstance(args, dict) else [], label)
        except AssertionError as exc:
            problems.append(str(exc)[:600])
            continue
        changed = sorted(t for t in after if after[t] != before.get(t))
        allowed = () if "error" in body else WRITERS.get(tool, ())
        if [t for t in changed if not t.startswith(allowed or ("\0",))]:
            problems.append(f"{label}: {'refused' if 'error' in body else 'read-only'} call changed {changed}")
    print(f"{tool}: {ran} of {EXAMPLES} examples reached the plugin; kinds drawn: {sorted(drawn)}")
    assert ran >= EXAMPLES * 0.85
    if EXAMPLES >= 100 and spec.schema["parameters"]["properties"]:  # every kind of call is drawn, none dead
        expected = set(KINDS) - (set() if spec.schema["parameters"].get("required") else {"missing"})
        assert drawn >= expected, f"{tool}: never drew {sorted(expected - drawn)}"
    assert not problems, "\n".join(problems[:12])


def shown(args: Any) -> str:
    text = args if isinstance(args, str) else json.dumps(args, allow_nan=True, default=str)
    return text[:200] + (f"...(+{len(text) - 200})" if len(text) > 200 else "")


# -- /trove ---------------------------------------------------------------------------------------------
CMD_WORDS = ["status", "doctor", "clean", "repair", "source", "retention", "backup", "dag", "mermaid", "rotate",
             "migrate", "help", "apply", "--have-backup", "--json", "--limit", "-1", "NaN", "1e308", "--to",
             "scope=\ud800", "scope=a\x00b", "'", '"', '"unclosed', "*", "NEAR(", "\u202e", "\x00", "\ud800",
             "STATUS", "Doctor", "rollups", "assertions", "embed", "rebuild", "day", "2025-01-01", "import", "x" * 5000,
             "week", "month", "all", "9999-99-99", "scope=local", "--reset", "--limit 3", "drop", "warmup", "backfill",
             "rollups rebuild day", "rollups rebuild all 2026-05-28", "assertions rebuild", "assertions drop",
             "doctor repair", "doctor clean", "embed status"]
READ_ONLY_FIRST = {"status", "doctor", "dag", "rotate", "help", "migrate", "retention", "source", "clean", "repair"}


def test_trove_command_strings_answer_text_and_refused_forms_write_nothing(world):
    """Random ``/trove`` words: the handler answers text (UTF-8, bounded) and never raises; a line with
    no ``apply`` writes nothing; an unknown first word gets the help with the error."""
    rng = random.Random(f"{SEED}:/trove")
    handle = command.make_handler(world["runtime"])
    problems = []
    for i in range(150):
        words = [rng.choice(CMD_WORDS) for _ in range(rng.choice([0, 1, 2, 3, 5]))]
        if rng.random() < 0.05:
            words.append("(" * (1 << 20))
        line = rng.choice([" ", "  ", "\t"]).join(words)
        background_passes_finish(world["threads"])
        before = fingerprint(world["conn"])
        out = handle(line)
        background_passes_finish(world["threads"])
        after = fingerprint(world["conn"])
        label = f"#{i} /trove {line[:120]!r}"
        if not isinstance(out, str) or not out:
            problems.append(f"{label}: answered {type(out).__name__}")
            continue
        try:
            out.encode("utf-8")
        except UnicodeEncodeError:
            problems.append(f"{label}: not UTF-8")
        if len(out) > 200_000 or "Traceback" in out:
            problems.append(f"{label}: {len(out)} chars, {out[-300:]!r}")
        lowered = [x.lower() for x in line.split()]  # the words as the handler splits them
        if not {"apply", "--apply", "backfill"} & set(lowered) and after != before:  # previews and reports only read
            problems.append(f"{label}: wrote {sorted(t for t in after if after[t] != before.get(t))}")
        known = command.lookup(tuple(x for x in lowered if x != "--have-backup") or ("status",))
        if known is None and lowered != ["help"] and "unknown subcommand" not in out:
            problems.append(f"{label}: an unknown form answered without saying so: {out[:200]!r}")
    assert not problems, "\n".join(problems[:12])


JUNK_MESSAGES: list[Any] = [
    None, 7, "text", [], {}, {"role": None}, {"role": "user", "content": None},
    {"role": "user", "content": float("nan")}, {"role": "user", "content": [{"type": "text", "text": "\ud800"}]},
    {"role": "user", "content": "x\x00y"}, {"role": "assistant", "content": "", "tool_calls": "not a list"},
    {"role": "assistant", "tool_calls": [{"function": None}]},
    {"role": "tool", "content": {"a": 1}}, {"role": "user", "content": "q", "timestamp": float("inf")},
    {"role": "user", "content": "q", "timestamp": "yesterday"}, {"role": "user", "content": "q", "timestamp": 10**30},
    {"role": 5, "content": 5}, {"role": "user", "content": "z" * (1 << 20)},
    {"role": "system", "content": [None, 1, "a"]}]


def test_a_live_transcript_with_junk_still_gets_its_answer_and_loses_no_stored_row(world):
    """The host hands ``handle_tool_call`` its live transcript; junk entries in it (wrong types, NaN and
    far-future timestamps, lone surrogates, NUL bytes, a mebibyte) never cost the model its answer, and
    every row stored before is still there, unchanged (new rows may be added: that is the ingest)."""
    rng = random.Random(f"{SEED}:live")
    query = "SELECT store_id, role, content FROM messages"
    before = set(world["conn"].execute(query).fetchall())
    problems = []
    for i in range(40):
        live = [*world["live"], *(rng.choice(JUNK_MESSAGES) for _ in range(rng.choice([1, 2, 4])))]
        name = rng.choice(["trove_grep", "trove_status", "trove_recall", "trove_load_session"])
        out = world["engine"].handle_tool_call(name, {"query": "shoes", "session_id": "s1"}, messages=live)
        try:
            check_reply(TOOLS_BY_NAME[name], out, None, ["query", "session_id"], f"#{i} {name}")
        except AssertionError as exc:
            problems.append(str(exc)[:400])
    background_passes_finish(world["threads"])
    after = set(world["conn"].execute(query).fetchall())
    if isinstance(world["conn"], sqlite3.Connection):
        world["conn"].commit()
    assert not problems, "\n".join(problems[:12])
    assert before <= after, f"{len(before - after)} stored rows changed or went"


def test_the_fuzz_fingerprint_sees_a_write(world):
    before = fingerprint(world["conn"])
    world["runtime"].store.ingest(SessionKey("fp"), [user("one more")])
    world["runtime"].store.settle(timeout_s=5.0)
    assert fingerprint(world["conn"]) != before


CLI_FLAGS = ["--json", "--session", "--format", "--limit", "--to", "--have-backup", "--apply", "--db", "--bogus", "-x"]


def run_cli(argv: list[str]) -> tuple[int, str]:
    import contextlib
    import io
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = command.main(argv, out=out)
        except SystemExit as exc:  # argparse's own usage errors
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue() + err.getvalue()


def test_trove_command_lines_exit_as_the_operator_guide_says_and_write_nothing(world, tmp_path):
    """Random ``python -m hermes_trove`` command lines on the world's file: exit 0, 1 or 2, never a
    traceback; unknown words are usage (2) and say so; a line without apply writes nothing; a --db that
    does not exist is usage (2) and no file appears there."""
    rng = random.Random(f"{SEED}:cli")
    db = world["db"]
    problems = []
    codes: dict[int, int] = {}
    for i in range(60):
        words = [rng.choice(CMD_WORDS[:40]) for _ in range(rng.choice([0, 1, 2, 3]))]
        for _ in range(rng.choice([0, 0, 1, 2])):
            flag = rng.choice(CLI_FLAGS)
            words += [flag] if flag in ("--json", "--have-backup", "--apply", "--bogus", "-x") else \
                [flag, rng.choice(["mermaid", "text", "-1", "NaN", "s1", "nope", "\ud800", "", "9" * 30])]
        if "--db" in words or "--to" in words:
            continue  # the store under test is given below; migrate's target is its own test
        missing = tmp_path / f"absent{i}" / "trove.db"
        target = db if i % 6 else str(missing)
        background_passes_finish(world["threads"])
        before = fingerprint(world["conn"])
        code, text = run_cli(["--db", target, *words])
        codes[code] = codes.get(code, 0) + 1
        background_passes_finish(world["threads"])
        after = fingerprint(world["conn"])
        label = f"#{i} {['--db', target, *words]!r}"[:200]
        lowered = [x.lower() for x in words if not x.startswith("-")]
        if code not in (0, 1, 2) or "Traceback" in text:
            problems.append(f"{label}: exit {code}: {text[-300:]!r}")
        text.encode("utf-8", "surrogateescape")
        if not {"apply", "backfill"} & set(lowered) and "--apply" not in words and after != before:
            problems.append(f"{label}: wrote {sorted(t for t in after if after[t] != before.get(t))}")
        if target != db and missing.exists():
            problems.append(f"{label}: created {missing}")
        if target != db and code == 0 and lowered != ["help"]:
            problems.append(f"{label}: exit 0 on a database that does not exist: {text[:200]!r}")
        found = command.lookup(tuple(lowered) or ("status",))
        if found is None and not any(x.startswith("-") for x in words) and lowered != ["help"]:
            if code != 2 or "unknown subcommand" not in text:
                problems.append(f"{label}: unknown words answered exit {code}: {text[:200]!r}")
    print(f"command lines by exit code: {dict(sorted(codes.items()))}")
    assert set(codes) >= {0, 2}, codes  # the lines reach the subcommands, not only the usage check
    assert not problems, "\n".join(problems[:12])
