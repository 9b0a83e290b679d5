from __future__ import annotations

import random
import string

import pytest

from hermes_trove.retrieval.query import Candidate, adjacent_ids, adjacent_scores, build_match, rerank, rough_stem
from hermes_trove.store import SessionKey

BACKENDS = ("sqlite", "postgresql")  # every test here runs on the file and on a server

NASTY = [
    "", " ", "?", "\"", "\"\"", "\"unbalanced", "*", "**", "a*b*", "AND", "OR NOT", "NEAR(a b)", "(", ")",
    "col:value", "-x", "^start", "a-b x:y p/q", "what's up?", "don't stop", "C++ / C#", "50% off!!!",
    "日本語のテキスト", "数据库 错误", "emoji 🙂 test 🚀", "🙂", "naïve café", "ÅNGSTRÖM", "tab\there\nnew",
    "\x00\x01 control", "{\"json\": [1, 2]}", "SELECT * FROM messages; --", "'; DROP TABLE messages; --",
    "x" * 10000, "word " * 3000, "\"a\" \"b\" \"c", "src/app.py:42", "ING-7731", "user@example.com",
    "https://example.com/a?b=c&d=e", "\\path\\to\\file", "$HOME/.hermes", "~!@#$%^&*()_+`-=[]{}|;':,./<>?",
]


def test_natural_question_becomes_an_or_of_its_content_words():
    m = build_match("When did Caroline go to the LGBTQ support group?")
    assert m.expression == '"Caroline" OR "LGBTQ" OR "support" OR "group"'
    assert m.terms == ("Caroline", "LGBTQ", "support", "group")


def test_quoted_phrase_and_prefix_syntax_are_kept():
    m = build_match('"exact phrase" deploy*')
    assert m.expression == '"exact phrase" OR "deploy"*'
    assert m.phrases == ("exact phrase",)


def test_possessive_is_dropped_so_names_match_plain_mentions():
    assert build_match("What is John's main focus?").expression == '"John" OR "main" OR "focus"'


def test_path_like_token_becomes_a_phrase_plus_its_distinctive_parts():
    m = build_match("src/app.py")
    assert m.expression.startswith('"src app py" OR ')
    assert '"src"' in m.expression and '"app"' in m.expression


def test_prefix_on_a_compound_applies_to_its_last_part():
    assert build_match("config/sett*").expression == '"config sett"* OR "config" OR "sett"*'


def test_contraction_stays_one_phrase():
    assert build_match("won't").expression == '"won t"'


def test_stopword_only_query_still_searches_its_words():
    assert build_match("the").expression == '"the"'


def test_query_without_words_yields_an_empty_expression():
    for q in ("", "   ", "🙂", "?!", "***"):
        assert build_match(q).expression == ""


def test_term_budget_bounds_very_long_queries():
    words = " ".join(f"word{i}" for i in range(500))
    assert build_match(words).expression.count(" OR ") == 31


@pytest.mark.parametrize("query", NASTY)
def test_every_listed_nasty_string_is_a_valid_fts5_query(runtime, query):
    runtime.store.append(SessionKey("s1"), [{"role": "user", "content": "some stored text about app.py"}])
    expr = build_match(query).expression
    runtime.store.search(expr, session_ids=["s1"], limit=5)  # raises sqlite3.OperationalError if invalid
    runtime.dag.search(expr, "s1", limit=5)


def test_random_strings_never_produce_an_invalid_fts5_query(runtime):
    runtime.store.append(SessionKey("s1"), [{"role": "user", "content": "alpha beta gamma"}])
    rng = random.Random(20240501)
    alphabet = string.printable + "éßøЖ日本🙂🚀\u200b\u00a0\"\"**()::--"
    for _ in range(400):
        q = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        runtime.store.search(build_match(q).expression, session_ids=["s1"], limit=3)


def term_present(term: str, lowered_text: str) -> bool:
    """Stem-aware containment, as ``rerank`` counts a term's coverage of a row."""
    stem = rough_stem(term)
    return bool(stem) and stem in lowered_text


def test_term_present_accepts_simple_inflections():
    assert term_present("joined", "i join the team")
    assert term_present("volunteering", "she will volunteer")
    assert not term_present("gym", "the library")


def test_rerank_prefers_rows_covering_more_query_terms_at_equal_bm25():
    cands = [Candidate(1, "s", 5.0, "camping only"), Candidate(10, "s", 5.0, "camping trip with max")]
    order = [k for k, _ in rerank(cands, ("camping", "trip", "max"))]
    assert order == [10, 1]


def test_rerank_lifts_a_turn_adjacent_to_a_strong_hit_in_the_same_session():
    cands = [Candidate(1, "s", 3.0, "x"), Candidate(50, "s", 3.0, "x"), Candidate(51, "s", 9.0, "x")]
    order = [k for k, _ in rerank(cands, ("zzz",))]
    assert order.index(50) < order.index(1)


def test_rerank_ignores_neighbours_from_another_session():
    cands = [Candidate(1, "s", 3.0, "x"), Candidate(50, "a", 3.0, "x"), Candidate(51, "b", 9.0, "x")]
    order = [k for k, _ in rerank(cands, ("zzz",))]
    assert order == [51, 1, 50]


def test_adjacent_ids_are_the_rows_beside_the_best_hits_that_the_pool_lacks():
    scores = {10: 9.0, 11: 1.0, 20: 5.0, 30: 0.5}
    assert adjacent_ids(scores, 2) == [9, 19, 21] and adjacent_ids(scores, 0) == []
    assert adjacent_ids(scores, 4) == [9, 12, 19, 21, 29, 31]


def test_an_adjacent_row_takes_a_share_of_its_best_neighbour_in_its_own_session():
    scores, groups = {10: 8.0, 12: 4.0, 20: 6.0}, {10: "s", 12: "s", 20: "a"}
    found = {11: "s", 21: "b", 9: "s", 10: "s"}  # 21 is another session's row; 10 is already scored
    assert adjacent_scores(scores, groups, found, 0.5) == {11: 4.0, 9: 4.0}


def test_rerank_keeps_input_order_on_ties():
    cands = [Candidate(i * 10, "s", 1.0, "x") for i in range(5)]
    assert [k for k, _ in rerank(cands, ())] == [0, 10, 20, 30, 40]
