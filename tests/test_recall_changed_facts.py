"""Changed facts: a question about the present gets the current statement first, in trove_recall
and in the pre-answer block; a question about the past keeps the fused order. Without
assertions the rule is the content-word overlap of two statements (``changed.same_subject``);
with them, the recorded supersession."""
from __future__ import annotations

import json

import pytest
from conftest import make_config

from hermes_trove import changed
from hermes_trove.retrieval import recall_search
from hermes_trove.runtime import build_runtime
from hermes_trove.state import contract, preanswer
from hermes_trove.state.assertion_store import AssertionStore
from hermes_trove.store import SessionKey
from hermes_trove.tools import dispatch

BACKENDS = ("sqlite", "postgresql")

DAY = 86400.0
T0 = 1_672_531_200.0  # 2023-01-01
LISBON = "I live in Lisbon"
PORTO = "I now live in Porto"


@pytest.mark.parametrize("question, present", [
    ("where do I live?", True),
    ("what is my current job?", True),
    ("which editor do I use", True),
    ("who is my manager now", True),
    ("where did I live in 2023?", False),
    ("where was I living?", False),
    ("what were my plans", False),
    ("what job had I before the move", False),
    ("where did I work two years ago", False),
    ("my previous address", False),
    ("what did I say last week", False),
    ("my address in 1999", False),
    ("", True),
])
def test_asks_present_is_false_for_a_past_tense_word_or_year(question, present):
    assert changed.asks_present(question) is present


W = changed.content_words


@pytest.mark.parametrize("a, b, question, same", [
    (LISBON, PORTO, "where do I live", True),                                   # one changed value
    ("My manager is Dana", "My manager is Priya these days", "who is my manager", True),
    ("my editor is vim", "my editor is helix", "editor", True),
    (LISBON, PORTO, "what is my favourite food", False),                        # not the question's subject
    (LISBON, LISBON + " indeed", "where do I live", False),                     # no changed value on one side
    ("I live in Lisbon near the river with two cats and a garden",
     "We moved the live concert to Porto because of the rain", "live", False),  # one shared word of many
    ("live", "live porto", "live", False),                                      # too short to have a subject
    ("", PORTO, "live", False),
    ("I live in Lisbon with my two cats", "I live in Porto with my sister and her dog", "live", False),  # 3 new words
    ("we adopted a cat named Milo", "we adopted a dog named Rex", "adopted", True),           # 2 each side
    ("we adopted a cat named Milo last spring", "we adopted a dog named Rex", "adopted", False),
])
def test_same_subject_needs_a_shared_question_word_and_a_small_changed_value(a, b, question, same):
    assert changed.same_subject(W(a), W(b), W(question)) is same
    assert changed.same_subject(W(b), W(a), W(question)) is same


def items(*rows):
    """(store id, text, time, speaker) from (text, time) or (text, time, speaker) rows."""
    return [(i + 1, row[0], row[1], row[2] if len(row) > 2 else "user") for i, row in enumerate(rows)]


@pytest.mark.parametrize("question, rows, expected", [
    # the later statement moves just ahead of the one it replaced
    ("where do I live?", [(LISBON, 1.0), ("the weather is fine", 2.0), (PORTO, 3.0)], [3, 1, 2]),
    # already in order: unchanged
    ("where do I live?", [(PORTO, 3.0), (LISBON, 1.0)], [1, 2]),
    # a chain of three: newest first, then the one before it
    ("where do I live?", [("I live in Lisbon", 1.0), ("I live in Madrid", 2.0), ("I live in Porto", 3.0)],
     [3, 2, 1]),
    ("where do I live?", [("I live in Porto", 3.0), ("I live in Lisbon", 1.0), ("I live in Madrid", 2.0)],
     [1, 3, 2]),
    # the past keeps the order
    ("where did I live in 2023?", [(LISBON, 1.0), (PORTO, 3.0)], [1, 2]),
    # different subjects keep the order
    ("where do I live and what do I eat?", [(LISBON, 1.0), ("I eat rice", 3.0)], [1, 2]),
    ("anything", [], []),
    # another speaker's statement is about another person
    ("where do I live?", [(LISBON, 1.0, "user"), (PORTO, 3.0, "assistant")], [1, 2]),
    # a row past STATEMENT_MAX_CHARS (a tool output, a pasted file) states no one fact: never moved for one
    ("where do I live?", [(LISBON, 1.0), (PORTO + " x" * changed.STATEMENT_MAX_CHARS, 3.0)], [1, 2]),
])
def test_current_first_moves_the_later_statement_ahead(question, rows, expected):
    assert changed.current_first(question, items(*rows)) == expected


def test_supersession_reorders_what_words_cannot_and_drops_an_orphan_to_the_end():
    rows = items(("home: the riverside flat", 1.0), ("weather talk", 2.0), ("big news, we moved north", 3.0))
    assert changed._reorder([1, 2, 3], "where is home?", rows, {1: 3}) == [3, 1, 2]
    assert changed._reorder([1, 2, 3], "where is home?", rows, {1: 99}) == [2, 3, 1]
    assert changed._reorder([1, 2, 3], "where is home?", rows, {}) == [1, 2, 3]


def test_without_the_assertion_tables_no_supersession_is_read(runtime):
    assert changed.superseded_turns(runtime.db, [1, 2, 3]) == {}
    assert changed.superseded_turns(runtime.db, []) == {}


# -- trove_recall and the pre-answer block -------------------------------------------------------

def store_moves(runtime, first=LISBON, later=PORTO):
    """Two sessions a year apart, each with small talk around the statement."""
    a = runtime.store.append(SessionKey("y2023", platform="cli"), [
        {"role": "user", "content": first, "timestamp": T0},
        {"role": "assistant", "content": "Nice city.", "timestamp": T0 + 60}])
    b = runtime.store.append(SessionKey("y2024", platform="cli"), [
        {"role": "user", "content": "Some news today.", "timestamp": T0 + 400 * DAY},
        {"role": "user", "content": later, "timestamp": T0 + 400 * DAY + 60}])
    return a[0], b[1]


def recall_ids(runtime, query, session="asking"):
    from conftest import make_engine

    engine = make_engine(runtime, session=session)
    out = json.loads(dispatch(engine.tool_context(), "trove_recall", {"query": query, "include": "verbatim"}))
    return [h["store_id"] for h in out["hits"]], [h["score"] for h in out["hits"]]


def test_recall_ranks_the_current_statement_first_for_a_present_question(runtime, monkeypatch):
    old, new = store_moves(runtime)
    monkeypatch.setattr(recall_search, "CHANGED_WINDOW", 0)
    fused, _ = recall_ids(runtime, "where do I live?")
    assert fused.index(old) < fused.index(new)  # the fused order alone puts the old statement first
    monkeypatch.undo()
    ids, scores = recall_ids(runtime, "where do I live?")
    assert ids.index(new) < ids.index(old)
    assert scores == sorted(scores, reverse=True)  # a moved hit takes the score of its new place


def test_recall_keeps_the_fused_order_for_a_past_question(runtime, monkeypatch):
    old, new = store_moves(runtime)
    ids, _ = recall_ids(runtime, "where did I live in 2023?")
    monkeypatch.setattr(recall_search, "CHANGED_WINDOW", 0)
    assert recall_ids(runtime, "where did I live in 2023?")[0] == ids
    assert ids.index(old) < ids.index(new)


def block_lines(runtime, question):
    block = preanswer.evidence_block(runtime, question, "asking")
    return [line for line in block.splitlines() if line.startswith("- ")]


def test_the_preanswer_block_quotes_the_current_statement_first(runtime):
    store_moves(runtime)
    lines = block_lines(runtime, "where do I live?")
    assert "Porto" in lines[0] and any("Lisbon" in line for line in lines[1:])
    past = block_lines(runtime, "where did I live in 2023?")
    assert "Lisbon" in past[0]


# -- with assertions: the recorded supersession ------------------------------------------------

FIRST = "Home sweet home: our home is the flat in Lisbon"
LATER = "Big change this spring: we moved and my home is Porto for good"


def with_assertions(tmp_path, enabled=True):
    runtime = build_runtime(make_config(tmp_path, assertions_enabled=enabled, preanswer_evidence_enabled=True))
    old, new = store_moves(runtime, FIRST, LATER)
    store = AssertionStore(runtime.db)
    store.ensure()
    rows = {r.store_id: r for r in runtime.store.get_many([old, new])}
    for sid, quote, value in ((old, "home is the flat in Lisbon", "Lisbon"), (new, "my home is Porto", "Porto")):
        answer = {"assertions": [{"store_id": sid, "quote": quote, "subject": "user:self", "predicate": "lives_in",
                                  "value": value, "kind": "fact", "confidence": 0.9}]}
        parsed = contract.parse_answer(json.dumps(answer), rows)
        assert parsed.candidates, parsed
        store.add(parsed.candidates)
    return runtime, old, new


def test_the_assertion_tables_name_the_superseded_turn_and_its_successor(tmp_path):
    runtime, old, new = with_assertions(tmp_path)
    assert not changed.same_subject(W(FIRST), W(LATER), W("where is my home?"))  # words alone would not
    assert changed.superseded_turns(runtime.db, [old, new]) == {old: new}
    assert changed.superseded_turns(runtime.db, [new]) == {}


def test_with_assertions_recall_demotes_the_superseded_turn(tmp_path, monkeypatch):
    runtime, old, new = with_assertions(tmp_path)
    monkeypatch.setattr(recall_search, "CHANGED_WINDOW", 0)
    fused, _ = recall_ids(runtime, "where is my home?")
    monkeypatch.undo()
    ids, _ = recall_ids(runtime, "where is my home?")
    assert fused.index(old) < fused.index(new) and ids.index(new) < ids.index(old)
    past, _ = recall_ids(runtime, "where was my home in 2023?")
    monkeypatch.setattr(recall_search, "CHANGED_WINDOW", 0)
    assert recall_ids(runtime, "where was my home in 2023?")[0] == past


def test_with_assertions_off_the_tables_are_not_read(tmp_path, monkeypatch):
    runtime, old, new = with_assertions(tmp_path, enabled=False)
    monkeypatch.setattr(changed, "superseded_turns", lambda *a: pytest.fail("read the assertion tables"))
    ids, _ = recall_ids(runtime, "where is my home?")
    assert ids.index(old) < ids.index(new)  # words alone do not tie these two statements
    assert "Lisbon" in block_lines(runtime, "where is my home?")[0]


def test_with_assertions_the_preanswer_block_quotes_the_current_statement_first(tmp_path):
    runtime, old, new = with_assertions(tmp_path)
    raw = [line for line in block_lines(runtime, "where is my home?") if "quote" not in line]
    assert "Porto" in raw[0]
