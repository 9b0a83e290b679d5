"""The words the grammar reads (dates/lexicon.py) and the cursor's name rules (dates/cursor.py):
tokens and sentences, tense cues, numbers, days and years, month and weekday names."""
from __future__ import annotations

from datetime import date

import pytest

from hermes_trove.dates import lexicon as lx
from hermes_trove.dates.cursor import TokenCursor
from hermes_trove.dates.tense import sentence_tense

TODAY = date(2024, 5, 15)


@pytest.mark.parametrize(("text", "pieces"), [
    ("I went there yesterday.", ["I", "went", "there", "yesterday", "."]),
    ("on 2024-02-29, ok", ["on", "2024-02-29", ",", "ok"]),
    ("in 2023-06 we", ["in", "2023-06", "we"]),
    ("on 13/4/2023!", ["on", "13/4/2023", "!"]),
    ("the 3rd of July", ["the", "3rd", "of", "July"]),
    ("Sam's car; don\u2019t", ["Sam's", "car", ";", "don\u2019t"]),
    ("mid-June", ["mid", "-", "June"]),
    ("", []),
])
def test_tokenize_splits_words_numbers_dates_and_punctuation(text, pieces):
    assert [token.text for token in lx.tokenize(text)] == pieces


def test_tokens_know_their_sentence_offsets_and_possessive_base():
    text = "Last year's trip. Then\nnext week?"
    tokens = lx.tokenize(text)
    assert [(t.text, t.sentence) for t in tokens] == [
        ("Last", 0), ("year's", 0), ("trip", 0), (".", 0), ("Then", 1), ("next", 2), ("week", 2), ("?", 2)]
    assert all(text[t.start:t.end] == t.text for t in tokens)
    assert tokens[1].base == "year" and tokens[0].capitalised and not tokens[2].capitalised


def tense_of(text: str, word: str) -> str:
    tokens = lx.tokenize(text)
    index = next(i for i, t in enumerate(tokens) if t.low == word)
    first = next(i for i, t in enumerate(tokens) if t.sentence == tokens[index].sentence)
    last = max(i for i, t in enumerate(tokens) if t.sentence == tokens[index].sentence) + 1
    return sentence_tense(tokens, first, last, index, index + 1)


@pytest.mark.parametrize(("text", "tense"), [
    ("I went there on Friday", "past"),
    ("We walked on Friday", "past"),
    ("It was Friday", "past"),
    ("I'll go on Friday", "future"),
    ("I will go on Friday", "future"),
    ("We are going to meet Friday", "future"),
    ("We plan to meet Friday", "future"),
    ("I am so excited for Friday", "unclear"),  # an -ed adjective is no tense cue
    ("Friday is a day", "unclear"),
    ("I went there. Friday is a day", "unclear"),  # a cue in another sentence does not count
    ("I went there. See you Friday", "future"),  # a leave-taking points ahead
    ("I went and I will go Friday", "future"),  # the nearest cue decides
    ("I will go Friday and I went", "future"),
    ("I walked Friday I'll", "unclear"),  # a tie at the same distance
])
def test_the_nearest_tense_cue_in_the_sentence_decides(text, tense):
    assert tense_of(text, "friday") == tense


@pytest.mark.parametrize(("word", "article", "value"), [
    ("3", True, 3), ("12", True, 12), ("three", True, 3), ("twenty", True, 20), ("a", True, 1), ("an", True, 1),
    ("a", False, None), ("several", True, None), ("12345", True, None), ("3rd", True, None),
])
def test_number_value_reads_digits_number_words_and_articles(word, article, value):
    assert lx.number_value(lx.tokenize(word)[0], allow_article=article) == value


@pytest.mark.parametrize(("word", "day"), [
    ("3", 3), ("3rd", 3), ("21st", 21), ("22nd", 22), ("31", 31), ("31st", 31), ("0", None), ("32", None),
    ("123", None), ("third", None),
])
def test_day_number_is_a_day_of_the_month(word, day):
    assert lx.day_number(lx.tokenize(word)[0]) == day


@pytest.mark.parametrize(("word", "year"), [("2024", 2024), ("1000", 1000), ("2999", 2999), ("0999", None),
                                            ("3000", None), ("202", None), ("20245", None)])
def test_year_number_is_a_four_digit_year(word, year):
    assert lx.year_number(lx.tokenize(word)[0]) == year


def test_number_helpers_take_a_missing_token():
    assert lx.number_value(None) is None and lx.day_number(None) is None and lx.year_number(None) is None


@pytest.mark.parametrize(("word", "standalone", "month"), [
    ("June", False, 6), ("june", False, 6), ("May", False, 5), ("may", False, None), ("March", False, 3),
    ("march", False, None), ("march", True, 3), ("Sep", False, 9), ("sep", False, None), ("sept", True, 9),
    ("Jan", False, 1), ("Junes", False, None),
])
def test_month_names_that_are_words_need_a_capital_unless_standalone(word, standalone, month):
    cursor = TokenCursor(lx.tokenize(word), TODAY, standalone=standalone)
    assert cursor.month_at(0) == month


@pytest.mark.parametrize(("word", "abbreviations", "standalone", "weekday"), [
    ("Friday", False, False, 4), ("friday", False, False, 4), ("Fri", True, False, 4), ("fri", True, False, None),
    ("fri", True, True, 4), ("Fri", False, False, None), ("Thurs", True, False, 3), ("Sun", True, False, 6),
    ("sun", True, False, None),
])
def test_weekday_abbreviations_need_a_capital_unless_standalone(word, abbreviations, standalone, weekday):
    cursor = TokenCursor(lx.tokenize(word), TODAY, standalone=standalone)
    assert cursor.weekday_at(0, abbreviations=abbreviations) == weekday


def test_a_standalone_phrase_without_a_tense_cue_reads_as_past():
    tokens = lx.tokenize("friday")
    assert TokenCursor(tokens, TODAY).tense(0) == "unclear"
    assert TokenCursor(tokens, TODAY, standalone=True).tense(0) == "past"


def test_the_cursor_tolerates_running_off_either_end():
    cursor = TokenCursor(lx.tokenize("last week"), TODAY)
    assert (cursor.tok(-1), cursor.tok(2), cursor.low(5), cursor.base(-3)) == (None, None, "", "")
    assert cursor.month_at(9) is None and cursor.weekday_at(9, abbreviations=True) is None
