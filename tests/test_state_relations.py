"""State relations: restates / supersedes / conflicts, current versus superseded at any ``as_of``,
every ``trove_query_state`` filter, the keys and lookup terms, pre-answer evidence selection and
each route of the retrieval controller, over real temporary stores with no model."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest
from conftest import make_config

from hermes_trove.filters import SessionFilters
from hermes_trove.ingest import EVIDENCE_CLOSE, EVIDENCE_OPEN
from hermes_trove.runtime import build_runtime
from hermes_trove.state import contract, preanswer
from hermes_trove.state.assertion_store import AssertionStore
from hermes_trove.state.contract import Known, relation
from hermes_trove.store import SessionKey
from hermes_trove.toolkit import ToolContext
from hermes_trove.tools import dispatch

BACKENDS = ("sqlite", "postgresql")

DAY = 86400.0
T0 = 1_714_550_400.0  # 2024-05-01 08:00 UTC


def known(aid: str, value: str = "berlin", kind: str = "fact", role: str = "user", at: float = T0,
          polarity: str = "positive", valid_from: float | None = None) -> Known:
    return Known(aid, kind, value, polarity, role, at, valid_from)


RELATIONS = [
    # (new, old, expected relation as (from, to, relation, at) or None)
    (known("n"), known("n"), None),
    (known("n", at=T0 + 5), known("o"), ("n", "o", "restates", T0 + 5)),
    (known("n", kind="event", value="x", at=T0 + 5), known("o", kind="event"), None),  # events accumulate
    (known("n", kind="event", value="x", at=T0 + 5), known("o"), None),
    (known("n", value="madrid", at=T0 + 5), known("o"), ("n", "o", "supersedes", T0 + 5)),
    (known("n", value="madrid"), known("o", at=T0 + 5), ("o", "n", "supersedes", T0 + 5)),  # the older arrives late
    (known("n", value="madrid", at=T0 + 5, valid_from=T0 + 50), known("o"), ("n", "o", "supersedes", T0 + 50)),
    (known("n", value="madrid", at=T0 + 5, valid_from=T0 - 50), known("o"), ("n", "o", "supersedes", T0 + 5)),
    (known("n", value="madrid", at=T0 + 5, role="assistant"), known("o", role="assistant"),
     ("n", "o", "supersedes", T0 + 5)),
    (known("n", value="madrid", at=T0 + 5), known("o", role="assistant"), ("n", "o", "supersedes", T0 + 5)),
    (known("n", value="madrid", at=T0 + 5, role="assistant"), known("o"), ("n", "o", "conflicts", T0 + 5)),
    (known("n", value="madrid"), known("o"), ("n", "o", "conflicts", T0)),  # the same moment
    (known("n", at=T0 + 5, polarity="negative"), known("o"), ("n", "o", "supersedes", T0 + 5)),
    (known("n", kind="status", value="done", at=T0 + 5), known("o", kind="status", value="open"),
     ("n", "o", "supersedes", T0 + 5)),
    (known("n", kind="preference", value="vim", at=T0 + 5), known("o", kind="fact", value="emacs"),
     ("n", "o", "supersedes", T0 + 5)),
]


@pytest.mark.parametrize("new,old,expected", RELATIONS, ids=[str(i) for i in range(len(RELATIONS))])
def test_relation_table(new, old, expected):
    assert relation(new, old) == expected


@pytest.mark.parametrize("raw,key,pred", [
    ("User:Self", "user:self", "user:self"), ("  Person: Alex  ", "person: alex", "person:_alex"),
    ("Lives In", "lives in", "lives_in"), ("prefers-editor", "prefers-editor", "prefers_editor"),
    ("<b>x</b>", "b x /b", "b_x_/b"), ("", None, None), ("!!!", None, None), (7, None, None),
])
def test_keys_and_predicates(raw, key, pred):
    assert contract.key(raw) == key and contract.predicate(raw) == pred


@pytest.mark.parametrize("subject,pred,value,expected", [
    ("user:self", "lives_in", "berlin", ("lives", "berlin")),  # "self" names no one
    ("person:alex", "prefers_editor", "neovim 0.9", ("alex", "prefers", "editor", "neovim")),
    ("user:self", "has", "a cat", ()),
])
def test_lookup_terms_are_the_subjects_name_predicate_and_value_words(subject, pred, value, expected):
    terms = contract.terms(subject, pred, value)
    assert set(expected) <= set(terms) and len(set(terms)) == len(terms)
    assert all(len(t) >= contract.TERM_MIN for t in terms)


# -- stored assertions -------------------------------------------------------------------------
def rt(tmp_path, **overrides):
    return build_runtime(make_config(tmp_path, assertions_enabled=True, **overrides))


def state(runtime, text: str, at: float, pred: str, value: str, *, quote: str | None = None, kind: str = "fact",
          role: str = "user", session: str = "s1", scope: str | None = None, subject: str = "user:self") -> str:
    """Store ``text`` said by ``role`` at ``at`` and one assertion on it; its id."""
    [store_id] = runtime.store.append(SessionKey(session), [{"role": role, "content": text, "timestamp": at}])
    item = {"store_id": store_id, "quote": quote or text, "subject": subject, "predicate": pred, "value": value,
            "kind": kind, "confidence": 0.9, **({"scope": scope} if scope else {})}
    parsed = contract.parse_answer(json.dumps({"assertions": [item]}), {store_id: runtime.store.get(store_id)})
    [candidate] = parsed.candidates
    store = AssertionStore(runtime.db)
    store.ensure()
    assert store.add([candidate], now=at) == 1
    return candidate.assertion_id


def query(runtime, session: str | None = None, **args) -> dict:
    ctx = ToolContext(runtime, SessionKey(session) if session else None)
    return json.loads(dispatch(ctx, "trove_query_state", args))


@pytest.fixture
def history(tmp_path):
    """A user who moved twice, prefers an editor, works on a project, and an assistant's contradiction."""
    runtime = rt(tmp_path)
    ids = {
        "berlin": state(runtime, "I live in Berlin.", T0, "lives_in", "Berlin"),
        "madrid": state(runtime, "I live in Madrid now.", T0 + 30 * DAY, "lives_in", "Madrid",
                        quote="I live in Madrid"),
        "lisbon": state(runtime, "These days I live in Lisbon.", T0 + 60 * DAY, "lives_in", "Lisbon",
                        quote="I live in Lisbon"),
        "vim": state(runtime, "My editor is vim.", T0 + DAY, "prefers_editor", "vim", kind="preference"),
        "trip": state(runtime, "I flew to Oslo.", T0 + 2 * DAY, "travelled_to", "Oslo", kind="event"),
        "trip2": state(runtime, "I flew to Rome.", T0 + 3 * DAY, "travelled_to", "Rome", kind="event"),
        "work": state(runtime, "At work I use emacs.", T0 + 4 * DAY, "prefers_editor", "emacs", kind="preference",
                      scope="work"),
        "claim": state(runtime, "You live in Paris.", T0 + 61 * DAY, "lives_in", "Paris", role="assistant",
                       quote="You live in Paris"),
    }
    return runtime, ids


def active_ids(out: dict) -> set[str]:
    return set(out["active_assertion_ids"])


AS_OF = [
    # (as_of, the lives_in assertions returned, the active ones)
    (T0 - DAY, set(), set()),
    (T0 + DAY, {"berlin"}, {"berlin"}),
    (T0 + 31 * DAY, {"berlin", "madrid"}, {"madrid"}),
    (T0 + 60 * DAY + 1, {"berlin", "madrid", "lisbon"}, {"lisbon"}),
    (T0 + 62 * DAY, {"berlin", "madrid", "lisbon", "claim"}, {"lisbon", "claim"}),  # a conflict keeps both
]


@pytest.mark.parametrize("as_of,returned,active", AS_OF, ids=[str(i) for i in range(len(AS_OF))])
def test_current_and_superseded_at_any_as_of(history, as_of, returned, active):
    runtime, ids = history
    out = query(runtime, subject_key="user:self", predicate_key="lives_in", as_of=as_of)
    names = {v: k for k, v in ids.items()}
    assert {names[a["assertion_id"]] for a in out["assertions"]} == returned
    assert {names[a] for a in active_ids(out)} == active
    assert [a["active"] for a in out["assertions"]] == sorted((a["active"] for a in out["assertions"]),
                                                              reverse=True)  # active first


def test_supersession_chains_are_listed_and_the_contradiction_is_an_open_conflict(history):
    runtime, ids = history
    out = query(runtime, subject_key="user:self", predicate_key="lives_in")
    rels = {(r["from"], r["to"], r["relation"]) for r in out["relations"]}
    assert (ids["madrid"], ids["berlin"], "supersedes") in rels and (ids["lisbon"], ids["madrid"], "supersedes") in rels
    assert (ids["claim"], ids["lisbon"], "conflicts") in rels
    flagged = {a["assertion_id"] for a in out["assertions"] if a["unresolved_conflict"]}
    assert flagged == {ids["lisbon"], ids["claim"]} and set(out["conflict_assertion_ids"]) == flagged


FILTERS = [
    # (query arguments beyond the subject, the assertions returned)
    ({}, {"berlin", "madrid", "lisbon", "vim", "trip", "trip2", "work", "claim"}),
    ({"predicate_key": "Prefers Editor"}, {"vim", "work"}),
    ({"predicate_key": "prefers_editor", "scope_key": "work"}, {"work"}),
    ({"predicate_key": "prefers_editor", "scope_key": ""}, {"vim", "work"}),  # an empty scope filters nothing
    ({"kinds": ["event"]}, {"trip", "trip2"}),
    ({"kinds": ["event", "preference"]}, {"trip", "trip2", "vim", "work"}),
    ({"speaker_role": "assistant"}, {"claim"}),
    ({"predicate_key": "lives_in", "speaker_role": "user"}, {"berlin", "madrid", "lisbon"}),
    ({"predicate_key": "owns"}, set()),
]


@pytest.mark.parametrize("args,returned", FILTERS, ids=[str(i) for i in range(len(FILTERS))])
def test_query_state_filters(history, args, returned):
    runtime, ids = history
    out = query(runtime, subject_key="user:self", **args)
    names = {v: k for k, v in ids.items()}
    assert out["status"] == "ok" and {names[a["assertion_id"]] for a in out["assertions"]} == returned
    if not returned:
        assert "no assertion about this subject" in out["note"]


def test_events_accumulate_and_a_scope_keeps_its_own_current_value(history):
    runtime, ids = history
    out = query(runtime, subject_key="user:self", kinds=["event", "preference"])
    assert {ids["trip"], ids["trip2"], ids["vim"], ids["work"]} == active_ids(out)
    assert not [r for r in out["relations"] if r["relation"] == "supersedes"]


def test_a_limit_pages_active_first_and_says_more_exist(history):
    runtime, ids = history
    out = query(runtime, subject_key="user:self", limit=2)
    assert len(out["assertions"]) == 2 and out["has_more"] is True and out["limit"] == 2
    assert all(a["active"] for a in out["assertions"])
    assert [a["observed_at"] for a in out["assertions"]] == sorted((a["observed_at"] for a in out["assertions"]),
                                                                   reverse=True)


def test_every_assertion_carries_its_exact_ref(history):
    runtime, ids = history
    [a] = query(runtime, subject_key="user:self", predicate_key="lives_in", speaker_role="assistant")["assertions"]
    ref = a["source_ref"]
    row = runtime.store.get(ref["store_id"])
    assert row.content[ref["span_start"]:ref["span_end"]] == ref["quote"] == "You live in Paris"
    assert ref["ref"] == f"trove:{ref['store_id']}:{ref['span_start']}-{ref['span_end']}"
    assert a["speaker_role"] == "assistant" and a["value_text"] == "Paris"


@pytest.mark.parametrize("args,error", [
    ({}, "subject_key"), ({"subject_key": "!!!"}, "must name a subject"),
    ({"subject_key": "user:self", "kinds": ["rumour"]}, "kinds must be a list"),
    ({"subject_key": "user:self", "kinds": "fact"}, "kinds must be a list"),
    ({"subject_key": "user:self", "speaker_role": "system"}, "speaker_role must be user or assistant"),
    ({"subject_key": "user:self", "as_of": "last tuesday-ish"}, "as_of"),
])
def test_query_state_refuses_bad_arguments(history, args, error):
    runtime, _ = history
    assert error in query(runtime, **args)["error"]


def test_query_state_is_disabled_without_assertions(tmp_path):
    out = query(build_runtime(make_config(tmp_path)), subject_key="user:self")
    assert out["status"] == "disabled" and "TROVE_ASSERTIONS_ENABLED" in out["reason"]


def test_a_session_scope_hides_other_sessions_assertions(tmp_path):
    runtime = rt(tmp_path, memory_scope="session")
    mine = state(runtime, "I live in Porto.", T0, "lives_in", "Porto", session="a")
    state(runtime, "I live in Kyiv.", T0, "lives_in", "Kyiv", session="b")
    out = query(runtime, session="a", subject_key="user:self")
    assert [x["assertion_id"] for x in out["assertions"]] == [mine]


def test_the_store_keeps_one_row_per_assertion_and_counts_its_relations(history):
    runtime, ids = history
    store = AssertionStore(runtime.db)
    assert store.add([contract.parse_answer(json.dumps({"assertions": []}), {}).candidates][0]) == 0
    assert store.sizes()["assertions"] == len(ids)
    assert store.relation_counts() == {"supersedes": 2, "conflicts": 1}
    assert store.get(ids["berlin"]).value_text == "Berlin" and store.get("0" * 64) is None


# -- pre-answer evidence ------------------------------------------------------------------------
@pytest.fixture
def archive(tmp_path):
    runtime = rt(tmp_path)
    runtime.store.append(SessionKey("s1"), [
        {"role": "user", "content": "The kiln firing schedule moved to Thursday.", "timestamp": T0},
        {"role": "assistant", "content": "Noted: kiln firing on Thursday.", "timestamp": T0 + 60},
        {"role": "tool", "content": "kiln firing log: 1200 degrees", "timestamp": T0 + 120, "tool_call_id": "c1"},
        {"role": "user", "content": "Unrelated chatter about gardening.", "timestamp": T0 + 180},
    ])
    runtime.store.append(SessionKey("scratch-1"), [{"role": "user", "content": "kiln firing scratch notes",
                                                    "timestamp": T0}])
    return runtime


def block_refs(block: str) -> list[str]:
    return [line.split(" ", 2)[1] for line in block.splitlines() if line.startswith("- trove:")]


def test_the_block_quotes_matching_user_and_assistant_rows_only(archive):
    block = preanswer.evidence_block(archive, "When is the kiln firing?", "s1")
    assert block.startswith(EVIDENCE_OPEN) and block.endswith(EVIDENCE_CLOSE)
    quotes = [line for line in block.splitlines() if line.startswith("- trove:")]
    assert len(quotes) == 3 and not any("1200 degrees" in q for q in quotes)  # tool output is no evidence
    assert "(user, " in block and "(assistant, " in block


@pytest.mark.parametrize("message,quotes", [
    ("When is the kiln firing?", 3),
    ("The kiln firing schedule moved to Thursday.", 2),  # the message itself is never its own evidence
    ("What about it?", 0), ("", 0), ("ok", 0),
    ("Tell me about gardening", 1),
    ("submarines", 0),
])
def test_block_selection_table(archive, message, quotes):
    block = preanswer.evidence_block(archive, message, "s1")
    assert len(block_refs(block)) == quotes and (block == "") is (quotes == 0)
    assert message == "" or f"{message!r}" not in block


def test_ignored_sessions_and_other_scopes_stay_out_of_the_block(archive):
    archive.filters = SessionFilters.build(ignore=["scratch-*"])
    assert "scratch notes" not in preanswer.evidence_block(archive, "kiln firing", "s1")
    archive.filters = SessionFilters.build()
    assert "scratch notes" in preanswer.evidence_block(archive, "kiln firing", "s1")
    archive.config = replace(archive.config, memory_scope="session")
    assert "scratch notes" not in preanswer.evidence_block(archive, "kiln firing", "s1")


def test_active_assertions_lead_the_block_and_superseded_ones_never_appear(tmp_path):
    runtime = rt(tmp_path)
    state(runtime, "I live in Berlin.", T0, "lives_in", "Berlin")
    current = state(runtime, "I live in Madrid.", T0 + DAY, "lives_in", "Madrid")
    block = preanswer.evidence_block(runtime, "Where does the user live: Berlin or Madrid?", "s1")
    lines = [line for line in block.splitlines() if line.startswith("- trove:")]
    assert "user:self lives_in = 'Madrid'" in lines[0] and not any("= 'Berlin'" in line for line in lines)
    row = AssertionStore(runtime.db).get(current)
    assert lines[0].startswith(f"- trove:{row.store_id}:{row.span_start}-{row.span_end} (user, ")


def test_assertion_lines_are_capped_and_count_what_they_examined(tmp_path):
    runtime = rt(tmp_path)
    for i in range(6):
        state(runtime, f"Project kestrel{i} ships in spring.", T0 + i, f"ships_{i}", "spring", kind="event",
              subject="project:kestrel")
    stats: dict[str, int] = {}
    lines = preanswer.assertion_lines(runtime, ["kestrel", "spring"], stats)
    assert len(lines) == preanswer.MAX_ASSERTIONS and 0 < stats["examined"] <= preanswer.MAX_EXAMINED * 5 // 4
    assert preanswer.assertion_lines(runtime, [], stats) == []


def test_the_block_stays_under_its_bound(tmp_path):
    runtime = rt(tmp_path)
    runtime.store.append(SessionKey("s1"), [{"role": "user", "content": "kiln " * 400 + str(i), "timestamp": T0 + i}
                                            for i in range(10)])
    block = preanswer.evidence_block(runtime, "kiln", "s1")
    assert len(block) <= preanswer.MAX_BLOCK and len(block_refs(block)) <= preanswer.MAX_ITEMS


# -- the retrieval controller's routes ------------------------------------------------------------
START = {"action": "start", "question": "Where does the user live now?",
         "identity": {"intent_type": "current_state", "subject_key": "user:self"},
         "requirements": [{"slot_id": "city", "description": "the city", "minimum_refs": 1}]}


@pytest.fixture
def controller(tmp_path):
    runtime = rt(tmp_path, adaptive_retrieval_enabled=True)
    state(runtime, "I live in Berlin.", T0, "lives_in", "Berlin")
    state(runtime, "I live in Madrid.", T0 + DAY, "lives_in", "Madrid")

    def call(**args):
        # a caller in another conversation of the same local scope: the rows are archive, not live context
        return json.loads(dispatch(ToolContext(runtime, SessionKey("s9")), "trove_retrieve", args))

    return runtime, call


ROUTES = [
    # (tool, its arguments, a quote the step must observe)
    ("trove_grep", {"query": "Madrid", "session_scope": "all"}, "I live in Madrid."),
    ("trove_recall", {"query": "Where do I live? Madrid"}, "I live in Madrid."),
    ("trove_recent", {"period": "2024", "mode": "messages"}, "I live in Madrid."),
    ("trove_query_state", {"subject_key": "user:self", "predicate_key": "lives_in"}, "I live in Madrid."),
]


@pytest.mark.parametrize("tool,args,quote", ROUTES, ids=[r[0] for r in ROUTES])
def test_each_search_route_observes_verified_refs(controller, tool, args, quote):
    runtime, call = controller
    rid = call(**START)["retrieval_id"]
    out = call(action="search", retrieval_id=rid, missing_slot="city", tool=tool, tool_args=args)
    assert out["status"] == "open" and out["round"] == 1 and out["tool"] == tool, out
    quotes = {o["quote"] for o in out["observed"]}
    assert quote in quotes or any(quote.startswith(q) for q in quotes), out["observed"]
    for o in out["observed"]:
        row = runtime.store.get(o["store_id"])
        assert row.content[o["span_start"]:o["span_end"]] == o["quote"] and o["slot"] == "city"


@pytest.mark.parametrize("tool,args,error", [
    ("trove_grep", {"query": "x", "colour": "red"}, "does not take colour"),
    ("trove_query_state", {}, "subject_key"),
    ("trove_expand", {"node_id": 1}, "tool must be one of"),
    ("trove_retrieve", {"action": "status"}, "tool must be one of"),
])
def test_a_refused_route_uses_no_round(controller, tool, args, error):
    _, call = controller
    rid = call(**START)["retrieval_id"]
    out = call(action="search", retrieval_id=rid, missing_slot="city", tool=tool, tool_args=args)
    assert error in out["error"], out
    assert call(action="status", retrieval_id=rid)["limits"]["rounds_used"] == 0


def test_a_finish_over_query_state_refs_computes_the_latest_state(controller):
    _, call = controller
    rid = call(**START)["retrieval_id"]
    seen = call(action="search", retrieval_id=rid, missing_slot="city", tool="trove_query_state",
                tool_args={"subject_key": "user:self"})["observed"]
    refs = [o["ref"] for o in seen]
    operands = [{"ref": o["ref"], "key": "live", "label": o["quote"]} for o in seen]
    done = call(action="finish", retrieval_id=rid, selected_refs=refs, resolved_slots=["city"],
                computation={"operands": operands, "operation": "latest_state"})
    assert done["status"] == "finished", done
    [latest] = done["evidence_view"]["computation"]["answer"]["states"]
    assert "Madrid" in latest["state"] and done["evidence_view"]["slot_coverage"] == {"city": len(refs)}


def test_resolved_slots_short_of_their_minimum_are_named(controller):
    _, call = controller
    start = dict(START, requirements=[{"slot_id": "city", "description": "d", "minimum_refs": 3},
                                      {"slot_id": "when", "description": "d"}])
    rid = call(**start)["retrieval_id"]
    [first, *_] = call(action="search", retrieval_id=rid, missing_slot="city", tool="trove_grep",
                       tool_args={"query": "live", "session_scope": "all"})["observed"]
    done = call(action="finish", retrieval_id=rid, selected_refs=[first["ref"]], resolved_slots=["city"])
    view = done["evidence_view"]
    assert view["slots_short_of_minimum"] == ["city"] and view["unresolved_slots"] == ["when"]
