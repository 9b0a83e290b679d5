from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from hermes_trove.retrieval import recall_search, rescore
from hermes_trove.retrieval.query import build_match
from hermes_trove.retrieval.recall_search import RecallRequest
from hermes_trove.store import SessionKey


def q(text):
    m = build_match(text)
    return rescore.question(text, m.terms, m.phrases)


def item(key, text, score=1.0, at=0.0):
    return rescore.Item(key, text, at, score)


def test_question_parts():
    got = q('What did Melanie paint in May 2023 for "the garden club"?')
    assert "melanie" in got.names and "the garden club" in got.names
    assert got.months == frozenset({5}) and got.years == frozenset({2023})
    assert "paint" in got.stems and "may" not in got.names


@pytest.mark.parametrize(("texts", "names"), [
    (["Hey Jon! How was Naxos?", "Jon said Naxos was sunny"], ("jon", "naxos")),  # written capitalised: names
    (["the red bicycle", "A bicycle lane"], ()),                          # lower case mid-sentence: a word
    (["Jon went out"], ()),                                               # once is not enough
    (["Naxos, then naxos, naxos and Naxos"], ()),                         # mostly lower case: a word
    (["Jon and Jon", "Naxoſ, Naxoſ"], ("jon",)),                          # "ſ" matches "s" but lowers to itself
    ([], ()),
])
def test_a_lower_case_word_the_pool_writes_capitalised_is_a_name(texts, names):
    found = rescore.written_as_names(("jon", "naxos", "bicycle"), texts)
    assert found == tuple(n for n in ("jon", "naxos") if n in names)


def test_a_question_typed_in_lower_case_finds_its_names():
    items = [item("a", "someone asked where the red bicycle came from", 1.0),
             item("b", "Jon: I bought my red bicycle from Jon's uncle. Jon loves it", 0.9)]
    lower, asked = q("where did jon buy his red bicycle"), q("Where did Jon buy his red bicycle?")
    assert lower.names == () and lower.plain[:1] == ("jon",) and "jon" in asked.names
    assert rescore.signals(lower, items, {})[1]["names"] == rescore.signals(asked, items, {})[1]["names"] == 1.0
    on = rescore.rescore(lower, items, {}, rescore.Weights(rescore=1.0))
    assert [i.key for i in on] == [i.key for i in rescore.rescore(asked, items, {}, rescore.Weights(rescore=1.0))]


def test_a_long_candidate_is_read_around_the_questions_words():
    question = q("Where did Jon buy his red bicycle?")
    deep = "filler text " * 20000 + "Jon: I bought my red bicycle at the market" + " more filler" * 20000
    part = rescore.excerpt(deep, question.stems)
    assert len(part) <= rescore.TEXT_CAP + 16 and "red bicycle at the market" in part
    assert rescore.excerpt("short", question.stems) == "short"
    assert rescore.excerpt("z" * 9000, question.stems) == "z" * rescore.TEXT_CAP  # no stem: the head
    short = item("s", "Jon: I bought my red bicycle at the market")
    long_sig, short_sig = rescore.signals(question, [item("l", deep), short], {"l": deep})[:2]
    assert long_sig["coverage"] == short_sig["coverage"] and long_sig["names"] == short_sig["names"] == 1.0
    assert long_sig["proximity"] == short_sig["proximity"] > 0


def test_proximity_tight_window_beats_spread():
    stems = ("ferry", "naxos")
    tight = rescore._matched("we took the ferry naxos".split(), stems)
    spread = rescore._matched("ferry a b c d e f g naxos".split(), stems)
    assert rescore.proximity(tight, 2) == 1.0
    assert 0 < rescore.proximity(spread, 2) < 0.2
    assert rescore.proximity(rescore._matched(["ferry"], stems), 2) == 0.0


def test_signals_are_bounded_and_named():
    question = q("When did Caroline join the pottery class in March?")
    at = datetime(2023, 3, 9, tzinfo=UTC).timestamp()
    items = [item(1, "Caroline: I joined a pottery class last week!", at=at),
             item(2, "Nice weather today", at=at)]
    sig = rescore.signals(question, items, {1: "", 2: "Caroline joined pottery"})
    assert set(sig[0]) == {"coverage", "proximity", "names", "date", "neighbours"}
    assert all(0.0 <= v <= 1.0 for s in sig for v in s.values())
    assert sig[0]["names"] == 1.0 and sig[1]["names"] == 0.0
    assert sig[0]["date"] == 1.0
    assert sig[0]["coverage"] > sig[1]["coverage"] and sig[1]["neighbours"] > 0


def test_rescore_lifts_the_hit_that_reads_the_question():
    question = q("Where did Jon buy his red bicycle?")
    items = [item("a", "the weather was red hot and bicycle lanes were closed", 1.0),
             item("b", "Jon: I bought my red bicycle at the market downtown", 0.9),
             item("c", "unrelated", 0.1)]
    off = rescore.rescore(question, items, {}, rescore.Weights(rescore=0.0))
    assert [i.key for i in off] == ["a", "b", "c"]
    on = rescore.rescore(question, items, {}, rescore.Weights(rescore=0.5))
    assert [i.key for i in on][:2] == ["b", "a"]


def test_rescore_leaves_the_tail_below_the_pool():
    question = q("red bicycle")
    items = [item(i, "red bicycle" if i == 2 else "x", 1.0 - i / 10) for i in range(5)]
    out = rescore.rescore(question, items, {}, rescore.Weights(rescore=1.0, pool=3))
    assert [i.key for i in out][3:] == [3, 4]
    assert out[0].key == 2 and max(i.score for i in out[3:]) <= min(i.score for i in out[:3])


def test_question_without_content_words_keeps_the_order():
    items = [item(1, "a", 1.0), item(2, "b", 0.5)]
    assert rescore.rescore(q("what is it"), items, {}, rescore.Weights(rescore=1.0)) == items


def test_recall_uses_the_neighbouring_turn(runtime, monkeypatch):
    runtime.store.append(SessionKey("old", platform="cli"), [
        {"role": "user", "content": "Did you ever adopt that dog from the shelter?", "timestamp": 1.0},
        {"role": "assistant", "content": "Yes! Her name is Biscuit.", "timestamp": 2.0},
        {"role": "user", "content": "My name is on the list for a cat", "timestamp": 3.0}])
    monkeypatch.setattr(rescore, "DEFAULT", rescore.Weights(rescore=0.0))
    req = RecallRequest("what is the name of the dog from the shelter", limit=3)
    plain = recall_search.recall(runtime, req)
    monkeypatch.setattr(rescore, "DEFAULT", rescore.Weights(rescore=1.0, neighbours=3.0))
    lifted = recall_search.recall(runtime, req)
    assert {h.item_id for h in plain.hits} == {h.item_id for h in lifted.hits}
    scores = {h.item_id: h.score for h in lifted.hits}
    assert scores[2] > scores[3]  # the answer gains from its neighbour holding the question's words
    assert [h.score for h in lifted.hits] == sorted((h.score for h in lifted.hits), reverse=True)


def test_the_weight_is_lower_when_the_vector_arm_ran(runtime, monkeypatch):
    from types import SimpleNamespace

    ids = runtime.store.append(SessionKey("old", platform="cli"), [
        {"role": "user", "content": "the ferry to Naxos leaves at seven", "timestamp": 1.0}])
    used = []
    real = recall_search.rescored
    monkeypatch.setattr(recall_search, "rescored",
                        lambda rt, req, m, hits, w: used.append(w) or real(rt, req, m, hits, w))
    recall_search.recall(runtime, RecallRequest("ferry"))
    runtime.config = dataclasses.replace(runtime.config, embeddings_enabled=True)
    hit = SimpleNamespace(kind="message", item_id=ids[0], score=0.9)
    monkeypatch.setattr(recall_search, "semantic_module", lambda: SimpleNamespace(
        start=lambda *a, **k: lambda: SimpleNamespace(hits=[hit], ran=True, degraded_reason=None)))
    recall_search.recall(runtime, RecallRequest("ferry"))
    assert used == [rescore.DEFAULT, rescore.WITH_VECTORS]
    assert 0 < rescore.WITH_VECTORS.rescore < rescore.DEFAULT.rescore


@pytest.mark.parametrize(("text", "name", "only_addressed"), [
    ("Caroline: Wow, Melanie! That sounds great", "melanie", True),      # after a greeting and a comma
    ("Hey Melanie, how was the lake?", "melanie", True),                 # a greeting, then the name
    ("That is so brave of you, Melanie.", "melanie", True),              # a comma before, a stop after
    ("Melanie", "melanie", True),                                        # the name alone
    ("Melanie: I went swimming with the kids", "melanie", False),        # a label names who speaks
    ("I told Melanie about the lake", "melanie", False),                 # spoken of
    ("Thanks, Melanie! Melanie's kids loved it", "melanie", False),      # addressed, then spoken of
    ("Yo jon   snow!", "jon snow", True),                                # a name of two words
    ("Jones, hi!", "jon", False),                                        # not the name itself
    ("nothing here", "melanie", False),
    # a comma that does not set off an address: the text speaks of the name
    ("Jon, Mary and I went to the lake last weekend.", "jon", False),    # a list at a sentence's start
    ("This morning Jon, Mary and I went hiking", "jon", False),
    ("Jon, Mary, and Sue came over for dinner.", "mary", False),         # a list's middle
    ("Jon, who lives next door, adopted a dog.", "jon", False),          # a relative clause
    ("Jon, my brother, is a pilot.", "jon", False),                      # a description after
    ("I went hiking with my brother, Jon.", "jon", False),               # a description before
    ("I saw Dr. Smith, she said my teeth are fine.", "smith", False),    # a title's stop is no sentence end
    ("Thanks, Jon, I appreciate it", "jon", True),
    ("I appreciate our friendship too, Caroline. You've always been there", "caroline", True),  # no relation
    ("Keep trying new things, Sam, and you might find it", "sam", True),  # "and" goes on with no name
    ("I met Jon, Mary, and Sue there", "sue", False),
    ("Ünal, what’s up?", "ünal", True),
])
def test_a_name_set_off_as_an_address(text, name, only_addressed):
    assert rescore.addressed(text, name) is only_addressed


def test_an_addressed_name_counts_the_configured_credit():
    question = q("What does Melanie do to relax?")
    items = [item(1, "Caroline: Wow, Melanie! How do you relax?"), item(2, "Melanie: I relax with pottery"),
             item(3, "I relax by the sea")]
    plain = [s["names"] for s in rescore.signals(question, items, {})]
    assert plain == [1.0, 1.0, 0.0]
    assert [s["names"] for s in rescore.signals(question, items, {}, address_credit=-1.0)] == [-1.0, 1.0, 0.0]


# Small real stores: (rows of one old session, question, the order recall gave when an addressed
# name counted as any other, the order it must give now).
ADDRESSED_TABLE = [
    (["Caroline: Wow, Melanie! Do you relax on weekends? I relax with a book.",
      "Melanie: Pottery. I relax at the wheel every Sunday.",
      "Caroline: The weather is nice."],
     "What does Melanie do to relax?", [0, 1, 2], [1, 0, 2]),
    (["Sorry to hear that, Gina. What did you do after you lost the job?",
      "Jon told me Gina opened a clothing store after she lost her job at the bank.",
      "Jon: The weather is nice."],
     "What did Gina do after she lost her job?", [0, 1, 2], [1, 0, 2]),
]


@pytest.mark.parametrize(("texts", "question", "before", "after"), ADDRESSED_TABLE)
def test_recall_puts_the_hit_that_speaks_of_the_name_first(runtime, monkeypatch, texts, question, before, after):
    ids = runtime.store.append(SessionKey("old", platform="cli"), [
        {"role": "user" if i % 2 == 0 else "assistant", "content": t, "timestamp": 1000.0 + i}
        for i, t in enumerate(texts)])
    req = RecallRequest(question, limit=len(texts))
    monkeypatch.setattr(rescore, "DEFAULT", dataclasses.replace(rescore.DEFAULT, addressed=1.0))
    assert [h.item_id for h in recall_search.recall(runtime, req).hits] == [ids[i] for i in before]
    monkeypatch.undo()
    assert rescore.DEFAULT.addressed < 1.0
    assert [h.item_id for h in recall_search.recall(runtime, req).hits] == [ids[i] for i in after]
