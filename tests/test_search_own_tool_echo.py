"""trove's own retrieval traffic is not memory: once the model has searched for a fact, the
search request (an assistant turn that only calls ``trove_*`` tools) and its result (a
``trove_*`` tool row quoting the stored message) stay out of later trove_grep, trove_recall
and trove_expand_query answers, so the message that said it comes first instead of echoes."""
from __future__ import annotations

import json

from conftest import assistant, make_engine, stamped, tool_call, tool_result, user

from hermes_trove.fulltext import own_tool_echo
from hermes_trove.rows import MessageRow

BACKENDS = ("sqlite", "postgresql")

T0 = 1_700_000_000.0
FACT = "I moved to Lisbon on 2026-03-02, into a flat near the river."


def searched_twice(names=("trove_grep", "trove_recall")):
    """The fact, then two finished turns in which the model looked it up with memory tools."""
    echo = json.dumps({"results": [{"type": "message", "store_id": 1, "snippet": FACT}]})
    msgs = [user(FACT), assistant("Noted."), user("Other things: the weather is grey today."), assistant("Ok.")]
    for n, name in enumerate(names):
        msgs += [user(f"look it up please ({n})"),
                 assistant("", [tool_call(f"c{n}", name, json.dumps({"query": "moved to Lisbon"}))]),
                 tool_result(f"c{n}", echo, name=name),
                 assistant(f"You said you moved to Lisbon on 2026-03-02 ({n}).")]
    return stamped(msgs)


def call(engine, name, live, **args):
    out = json.loads(engine.handle_tool_call(name, args, messages=live))
    assert "error" not in out, out
    return out


def rows_of(engine, ids):
    return engine.runtime.store.get_many(ids)


def test_grep_skips_earlier_trove_results_and_requests(engine):
    live = searched_twice() + stamped([user("when did I move to Lisbon?")], t0=T0 + 7200)
    for scope in ("current", "all"):
        out = call(engine, "trove_grep", live, query="moved to Lisbon", session_scope=scope)
        rows = rows_of(engine, [h["store_id"] for h in out["results"] if h["type"] == "message"])
        assert FACT in [r.content for r in rows]
        assert not [r for r in rows if r.role == "tool" or (r.role == "assistant" and not r.content)], scope


def test_recall_from_a_new_session_finds_the_statement_and_counts_the_skipped_echoes(engine):
    engine.ingest(searched_twice())
    later = make_engine(engine.runtime, session="s2")
    live = stamped([user("when did I move to Lisbon?")], t0=T0 + 86400)
    out = call(later, "trove_recall", live, query="when did I move to Lisbon")
    hits = [h for h in out["hits"] if h.get("store_id")]
    rows = rows_of(engine, [h["store_id"] for h in hits])
    assert FACT in [r.content for r in rows]
    assert not [r for r in rows if r.role == "tool" or (r.role == "assistant" and not r.content)]
    assert out["excluded"]["own_tool_output"] >= 2


def test_expand_query_gathers_the_statement_not_the_echoes_or_the_question(engine):
    engine.complete = lambda messages, model, timeout_s, max_tokens: "2026-03-02 [store 1]"
    live = searched_twice() + stamped([user("when did I move to Lisbon?")], t0=T0 + 7200)
    out = call(engine, "trove_expand_query", live, prompt="When did I move to Lisbon?", query="moved Lisbon",
               max_results=3)
    rows = rows_of(engine, [m["store_id"] for m in out["raw_matches"]])
    assert FACT in [r.content for r in rows]
    assert "when did I move to Lisbon?" not in [r.content for r in rows]  # the turn being answered
    assert not [r for r in rows if r.role == "tool" or (r.role == "assistant" and not r.content)]


def row(role, content="", tool_calls=None, tool_name=None):
    return MessageRow(1, "s", "", "cli", "cli", role, content, False, tool_calls, None, tool_name, None,
                      1, "", False, T0, T0)


def test_only_trove_traffic_counts_as_an_echo():
    trove_call = json.dumps([tool_call("a", "trove_grep")])
    mixed = json.dumps([tool_call("a", "trove_grep"), tool_call("b", "terminal")])
    assert own_tool_echo(row("tool", "{}", tool_name="trove_recall"))
    assert own_tool_echo(row("assistant", "  ", tool_calls=trove_call))
    assert not own_tool_echo(row("tool", "ls output", tool_name="terminal"))
    assert not own_tool_echo(row("tool", "no name"))
    assert not own_tool_echo(row("assistant", "I will search now.", tool_calls=trove_call))  # its own words
    assert not own_tool_echo(row("assistant", "", tool_calls=mixed))
    assert not own_tool_echo(row("assistant", "", tool_calls="not json"))
    assert not own_tool_echo(row("user", "trove_grep please"))
    for name in ("lcm_grep", "lcm_describe", "lcm_expand", "lcm_expand_query"):  # lossless-claw's, imported
        assert own_tool_echo(row("tool", "{}", tool_name=name))
        assert own_tool_echo(row("assistant", "", tool_calls=json.dumps([tool_call("a", name)])))
    assert own_tool_echo(row("assistant", "", tool_calls=json.dumps([tool_call("a", "lcm_grep"),
                                                                      tool_call("b", "trove_grep")])))
    assert not own_tool_echo(row("tool", "{}", tool_name="grep"))


def test_compile_evidence_coverage_is_the_same_search_and_skips_the_echoes(engine):
    engine.ingest(searched_twice())
    later = make_engine(engine.runtime, session="s2")
    fact_id = next(r.store_id for r in engine.runtime.store.tail("s1", 50) if r.content == FACT)
    ref = {"store_id": fact_id, "span_start": 0, "span_end": len(FACT), "quote": FACT}
    out = call(later, "trove_compile_evidence", stamped([user("where did I move?")], t0=T0 + 86400),
               question="Where did I move to?",
               proposal={"requested_facets": ["move"], "selections": [
                   {"claim_id": "c1", "facet": "move", "exact_ref": ref, "quote": FACT}]},
               coverage={"query": "flat near the river", "session_scope": "all"})
    assert out["coverage"]["proven"] is True, out["coverage"]  # the two trove results quoting it do not count
    assert out["coverage"]["uncovered_store_ids"] == []


def crowded(real=30, searches=260):
    """Long messages that each name the flat once, then many finished turns in which the model
    searched for it: the short search requests and results hold the words more densely than the
    messages do, so a ranked page of the search's size holds only them."""
    msgs = []
    for i in range(real):
        msgs += [user(f"Note {i}: " + "we talked about many other things that day and " * 6 +
                      f"the flat in Lisbon had item {i}."), assistant("Noted.")]
    for n in range(searches):
        echo = json.dumps({"results": [{"snippet": f"Lisbon flat river Lisbon {k}"} for k in range(3)]})
        msgs += [user(f"look it up ({n})"),
                 assistant("", [tool_call(f"c{n}", "trove_grep", json.dumps({"query": "Lisbon flat river"}))]),
                 tool_result(f"c{n}", echo, name="trove_grep"), assistant(f"done {n}")]
    return stamped(msgs)


def test_many_earlier_searches_do_not_empty_a_grep_page_or_its_paging(engine):
    engine.ingest(crowded())
    real = {r.store_id for r in engine.runtime.store.tail("s1", 5000) if r.content.startswith("Note ")}
    later = make_engine(engine.runtime, session="s2")
    live = stamped([user("where was the flat?")], t0=T0 + 86400 * 30)
    seen: list[int] = []
    for offset in (0, 12, 24):
        out = call(later, "trove_grep", live, query="Lisbon flat river", session_scope="all", limit=12,
                   offset=offset)
        seen += [h["store_id"] for h in out["results"]]
        assert out["has_more"] is (offset == 0 or offset == 12), (offset, out["has_more"])
    assert len(seen) == 30 and set(seen) == real  # every message once, no echo, none repeated


def test_many_earlier_searches_do_not_crowd_the_messages_out_of_recall(engine):
    engine.ingest(crowded())
    real = {r.store_id for r in engine.runtime.store.tail("s1", 5000) if r.content.startswith("Note ")}
    later = make_engine(engine.runtime, session="s2")
    live = stamped([user("where was the flat?")], t0=T0 + 86400 * 30)
    out = call(later, "trove_recall", live, query="Lisbon flat river", limit=10)
    ids = [h["store_id"] for h in out["hits"] if h.get("store_id")]
    assert len(ids) == 10 and set(ids) <= real, out["provenance"]["coverage"]["fts"]
    assert out["excluded"]["own_tool_output"] >= 2


# Histories imported from lossless-claw hold its own memory tools' traffic: lcm_grep / lcm_expand_query
# results as tool rows named after the tool, and text-less assistant turns calling them (the
# importer's shape, docs/import.md). They are copies of stored messages too.
LCM = ("lcm_grep", "lcm_expand_query")


def test_grep_and_recall_skip_imported_lossless_claw_tool_traffic(engine):
    engine.ingest(searched_twice(LCM))
    later = make_engine(engine.runtime, session="s2")
    live = stamped([user("when did I move to Lisbon?")], t0=T0 + 86400)
    out = call(later, "trove_grep", live, query="moved to Lisbon", session_scope="all")
    rows = rows_of(engine, [h["store_id"] for h in out["results"] if h["type"] == "message"])
    assert FACT in [r.content for r in rows]
    assert not [r for r in rows if r.role == "tool" or (r.role == "assistant" and not r.content)]
    out = call(later, "trove_recall", live, query="when did I move to Lisbon")
    rows = rows_of(engine, [h["store_id"] for h in out["hits"] if h.get("store_id")])
    assert FACT in [r.content for r in rows]
    assert not [r for r in rows if r.role == "tool" or (r.role == "assistant" and not r.content)]
    assert out["excluded"]["own_tool_output"] >= 2
