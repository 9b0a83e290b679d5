"""Full-text query building, table by table: what ``query.build_match`` makes of quoting, FTS5
operators, broken syntax, unicode and very long input; that every expression runs on a real
FTS5 index and finds the rows it should; ``rough_stem`` and ``rerank`` on small tables."""
from __future__ import annotations

import pytest

from hermes_trove.fulltext import STOPWORDS, build_match
from hermes_trove.retrieval.query import Candidate, rerank, rough_stem
from hermes_trove.store import SessionKey


@pytest.mark.parametrize("query, expression, terms, phrases", [
    # natural language: an OR of content words, stopwords dropped
    ("where do I live?", '"live"', ("live",), ()),
    ("hello world hello", '"hello" OR "world"', ("hello", "world"), ()),          # repeated words once
    ("HELLO hello", '"HELLO"', ("HELLO",), ()),                                   # case-insensitive dedup
    ("the of and", '"the" OR "of" OR "and"', ("the", "of", "and"), ()),            # only stopwords: kept
    ("a b", '"b"', ("b",), ()),
    # quoting and prefixes
    ('"blue drawer" key', '"blue drawer" OR "key"', ("key",), ("blue drawer",)),
    ("deploy*", '"deploy"*', ("deploy*",), ()),
    ('"unbalanced', '"unbalanced"', ("unbalanced",), ()),                          # a lone quote is dropped
    ('""', "", (), ()),
    ('"  "', "", (), ()),
    ("'quoted'", '"quoted"', ("quoted",), ()),
    # FTS5 operators are words, never syntax
    ("AND OR NOT", '"AND" OR "OR" OR "NOT"', ("AND", "OR", "NOT"), ()),
    ("NEAR(a b)", '"NEAR a" OR "NEAR" OR "b"', ("NEAR", "b"), ()),
    ("col:value", '"col value" OR "col" OR "value"', ("col", "value"), ()),
    ("-x", '"x"', ("x",), ()),
    ("(group)", '"group"', ("group",), ()),
    ("foo^bar", '"foo bar" OR "foo" OR "bar"', ("foo", "bar"), ()),
    # identifiers: a phrase of the parts plus the distinctive parts
    ("src/app.py", '"src app py" OR "src" OR "app" OR "py"', ("src", "app", "py"), ()),
    ("ING-7731", '"ING 7731" OR "ING" OR "7731"', ("ING", "7731"), ()),
    ("deploy-key*", '"deploy key"* OR "deploy" OR "key"*', ("deploy", "key*"), ()),
    ("user@example.com", '"user example com" OR "user" OR "example" OR "com"', ("user", "example", "com"), ()),
    ("v1.2.3", '"v1 2 3" OR "v1"', ("v1",), ()),                                   # one-character parts dropped
    ("10:30", '"10 30" OR "10" OR "30"', ("10", "30"), ()),
    ("$HOME/.hermes", '"HOME hermes" OR "HOME" OR "hermes"', ("HOME", "hermes"), ()),
    # contractions and possessives
    ("Anna's book", '"Anna" OR "book"', ("Anna", "book"), ()),
    ("don't stop", '"stop"', ("stop",), ()),
    # unicode
    ("Ålesund naïve café", '"Ålesund" OR "naïve" OR "café"', ("Ålesund", "naïve", "café"), ()),
    ("日本語", '"日本語"', ("日本語",), ()),
    ("über-cool", '"über cool" OR "über" OR "cool"', ("über", "cool"), ()),
    ("emoji 🙂", '"emoji"', ("emoji",), ()),                                      # symbols are not words
    ("C++ / C#", '"C"', ("C",), ()),
    ("50% off", '"50"', ("50",), ()),
    # nothing searchable
    ("", "", (), ()),
    ("   ", "", (), ()),
    ("?!", "", (), ()),
    ("🙂🚀", "", (), ()),
])
def test_build_match_table(query, expression, terms, phrases):
    m = build_match(query)
    assert (m.expression, m.terms, m.phrases) == (expression, terms, phrases)


@pytest.mark.parametrize("n, budget, expected_parts", [(5, 32, 5), (32, 32, 32), (33, 32, 32), (500, 32, 32),
                                                        (10, 3, 3), (10, 1, 1)])
def test_the_term_budget_bounds_the_or(n, budget, expected_parts):
    m = build_match(" ".join(f"word{i}" for i in range(n)), max_terms=budget)
    assert len(m.expression.split(" OR ")) == expected_parts == len(m.terms)
    assert m.terms[0] == "word0"  # the budget keeps the first words


@pytest.mark.parametrize("size", [1_000, 100_000])
def test_very_long_single_tokens_and_punctuation_runs_stay_one_term(size):
    assert build_match("x" * size).terms == ("x" * size,)
    assert build_match("!" * size).expression == ""
    assert build_match("word" + "." * size).expression == '"word"'


def test_non_string_input_is_searched_as_its_text():
    assert build_match(12345).expression == '"12345"'  # type: ignore[arg-type]


def test_quotes_inside_terms_cannot_break_out_of_the_phrase():
    expr = build_match('say "it" loud').expression
    assert expr == '"it" OR "loud"'  # "say" is a stopword; the quoted phrase stays a phrase
    assert build_match('a""b').expression.count('"') % 2 == 0


@pytest.mark.parametrize("word", ["what", "where", "the", "did", "does", "yeah", "really"])
def test_common_words_are_stopwords(word):
    assert word in STOPWORDS
    assert build_match(f"{word} zebra").terms == ("zebra",)


# -- on a real FTS5 index ---------------------------------------------------------------------

ROWS = [
    "the blue drawer holds the passport",
    "drawer of blue socks",
    "deployment finished at noon",
    "edit src/app.py line 42",
    "ticket ING-7731 is closed",
    "Kaffee im Café am Ålesund-Platz",
    "日本語のテキストです",
    "user@example.com wrote back",
]


@pytest.fixture
def indexed(runtime):
    ids = runtime.store.append(SessionKey("s1"), [{"role": "user", "content": t} for t in ROWS])
    return runtime, dict(zip(ROWS, ids, strict=True))


def found(runtime, query):
    expr = build_match(query).expression
    return [row.content for row, _, _ in runtime.store.search(expr, session_ids=["s1"], limit=20)] if expr else []


@pytest.mark.parametrize("query, first, absent", [
    ('"blue drawer"', "the blue drawer holds the passport", "drawer of blue socks"),   # phrase order matters
    ("finish*", "deployment finished at noon", None),                                   # prefix
    ("deployments", "deployment finished at noon", None),                               # porter stems
    ("src/app.py", "edit src/app.py line 42", None),
    ("ING-7731", "ticket ING-7731 is closed", None),
    ("user@example.com", "user@example.com wrote back", None),
    ("passport?", "the blue drawer holds the passport", "drawer of blue socks"),
    ("café", "Kaffee im Café am Ålesund-Platz", None),                                 # case folding
])
def test_expressions_find_the_rows_they_should(indexed, query, first, absent):
    runtime, _ = indexed
    rows = found(runtime, query)
    assert rows and rows[0] == first
    if absent:
        assert absent not in rows


@pytest.mark.parametrize("query", ["AND", "OR NOT", "NEAR(a b)", "col:value", "(", ")", '"', "*", "-x", "^x",
                                   "a:b:c", "x OR", "NOT x", "{x}", "[x]", "x\x00y", "\u200b", "'; DROP TABLE x; --"])
def test_operator_and_broken_syntax_runs_as_plain_words(indexed, query):
    runtime, _ = indexed
    found(runtime, query)  # raises sqlite3.OperationalError on an invalid MATCH


def test_an_or_query_ranks_the_row_with_more_terms_first(indexed):
    runtime, _ = indexed
    rows = found(runtime, "blue drawer passport")
    assert rows[:2] == ["the blue drawer holds the passport", "drawer of blue socks"]


# -- stems and re-ranking ---------------------------------------------------------------------

@pytest.mark.parametrize("term, stem", [
    ("joined", "join"), ("joins", "join"), ("joining", "join"), ("studies", "stud"), ("studied", "stud"),
    ("quickly", "quick"), ("cats", "cat"), ("is", "is"), ("bus", "bus"), ("ABC", "abc"),
    ("deploy*", "deplo"), ("address", "addre"), ("", ""),
])
def test_rough_stem_table(term, stem):
    assert rough_stem(term) == stem


@pytest.mark.parametrize("pair", [("joined", "joining"), ("studies", "studied"), ("volunteer", "volunteering"),
                                  ("deploy", "deploys")])
def test_inflections_share_a_stem_prefix(pair):
    a, b = (rough_stem(t) for t in pair)
    assert a.startswith(b) or b.startswith(a)


def cand(key, score, text, group="s"):
    return Candidate(key, group, score, text)


@pytest.mark.parametrize("candidates, terms, expected", [
    ([], ("x",), []),
    ([cand(1, 1.0, "alpha"), cand(5, 1.0, "alpha beta")], ("alpha", "beta"), [5, 1]),     # coverage
    ([cand(1, 2.0, "alpha"), cand(5, 1.0, "alpha beta")], ("alpha", "beta"), [1, 5]),     # BM25 still counts
    ([cand(1, 1.0, "x"), cand(2, 1.0, "x")], ("x",), [1, 2]),                            # ties: input order
    ([cand(1, 1.0, "x"), cand(2, 1.0, "x")], (), [1, 2]),                                # no terms
    ([cand(10, 1.0, "alpha"), cand(20, 1.0, "alpha"), cand(21, 3.0, "zeta")], ("alpha", "zeta"), [21, 20, 10]),
    ([cand(10, 1.0, "alpha"), cand(20, 1.0, "alpha"), cand(21, 3.0, "zeta", "other")], ("alpha", "zeta"),
     [21, 10, 20]),                                                                      # another session: no lift
])
def test_rerank_table(candidates, terms, expected):
    assert [k for k, _ in rerank(candidates, terms)] == expected


def test_rerank_weights_are_the_documented_defaults():
    out = dict(rerank([cand(1, 2.0, "alpha beta"), cand(2, 2.0, "alpha")], ("alpha", "beta")))
    assert out[1] == pytest.approx(2.0 * 1.5 + 0.25 * 2.0 * 1.25)   # full coverage + a quarter of its neighbour
    assert out[2] == pytest.approx(2.0 * 1.25 + 0.25 * 3.0)
    plain = dict(rerank([cand(1, 2.0, "alpha")], ("alpha",), coverage_weight=0.0, neighbor_weight=0.0))
    assert plain == {1: 2.0}


@pytest.mark.parametrize("pooled, expected", [(False, [10, 20, 30, 40]), (True, [20, 10, 30, 40])])
def test_rerank_pooled_weighs_a_term_most_candidates_hold_little(pooled, expected):
    """Every row holds the speaker's name: pooled, the one row that also says "speech" passes a
    shorter row that holds the name alone (BM25 1.6 against 1.0)."""
    rows = [cand(10, 1.6, "mel: thanks"), cand(20, 1.0, "mel: my speech at school"), cand(30, 0.5, "mel: hi"),
            cand(40, 0.5, "mel: ok")]
    out = rerank(rows, ("Mel", "speech"), coverage_weight=2.0, neighbor_weight=0.0, pooled=pooled)
    assert [k for k, _ in out] == expected


def test_rerank_a_neighbour_lifts_only_by_a_positive_score_of_its_own_session():
    rows = [cand(1, -4.0, "alpha"), cand(2, 1.0, "alpha"), cand(3, 2.0, "alpha", "other"), cand(4, 0.0, "beta")]
    out = dict(rerank(rows, ("alpha",)))
    assert out[2] == 1.0 * 1.5          # 1 scores below zero, 3 is another session's: no lift
    assert out[1] == -4.0 * 1.5 + 0.25 * 1.5
    assert out[4] == 0.0                # its neighbour 3 is another session's, 5 is absent
    assert out[3] == 2.0 * 1.5
