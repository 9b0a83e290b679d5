"""A seeded fuzzer over every tool: 0 escapes, every reply under its cap, no other session's
payload served. The slowest reply is printed by bench/bench_bounds.py (fuzz) and
bench/bench_reliability.py; tests assert no wall-clock time."""
from __future__ import annotations

import os

import pytest
from conftest import assistant, make_engine, tool_call, tool_result, user

from hermes_trove.store import SessionKey
from hermes_trove.tools import TOOLS

from .fuzz import OTHER_MARK, fuzz

BACKENDS = ("sqlite", "postgresql")  # every test here runs on the file and on a server

pytestmark = pytest.mark.reliability

CALLS = int(os.environ.get("TROVE_FUZZ_CALLS", "1200"))


def seeded_engine(runtime):
    other = runtime.store.ingest(SessionKey("other"), [
        user("private"), assistant("", [tool_call("o1", "terminal")]),
        tool_result("o1", "secret log head\n" + "filler\n" * 4000 + OTHER_MARK)])
    assert other.store_ids
    eng = make_engine(runtime, complete=lambda *a: "an answer from the fake model")
    eng.ingest([user("the deploy key lives in /etc/keys"), assistant("port 6543 for the pooler"),
                assistant("", [tool_call("c1", "terminal")]), tool_result("c1", "ok\n" * 5000)] * 3)
    eng.compress([user("x")], current_tokens=10**6, force=True)
    return eng


def other_refs(runtime):
    from hermes_trove.payloads.sidecar import refs_in
    rows = runtime.store.page("other", 0, 100)
    return [r for row in rows for r in refs_in(row.content)]


@pytest.mark.parametrize("seed", [1, 2])
def test_fuzzed_calls_never_escape_or_exceed_their_cap(tmp_path, seed):
    from conftest import make_config

    from hermes_trove.runtime import build_runtime
    runtime = build_runtime(make_config(tmp_path, large_output_externalization_enabled=True,
                                        large_output_externalization_threshold_chars=2000))
    eng = seeded_engine(runtime)
    refs = other_refs(runtime)
    assert refs, "the other session's payload should be externalized"
    report = fuzz(eng.tool_context(), CALLS, seed, refs)
    assert set(report.by_tool) == {t.name for t in TOOLS}
    assert report.escapes == []
    assert report.bad_json == []
    assert report.over_cap == []
    assert report.leaks == []
