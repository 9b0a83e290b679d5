"""Search highlights and snippets keep each letter whole.

Hindi, Tamil and Thai write vowel signs and viramas as combining marks after their letter, and a
Latin letter may carry a combining accent. The full-text tokenizers treat some of those marks as
separators, so a highlight or a cut could end between a letter and its marks ("नमस्त" without its
final vowel sign). A highlight or snippet boundary is moved past a letter's marks, never between.
The server's headline parser keeps the marks inside a word while its query splits there, so the
headline's text blanks them and the parts of a word join in one highlight again, on both stores.
"""
from __future__ import annotations

import unicodedata

import pytest
from conftest import assistant, user

from hermes_trove.fulltext import build_match
from hermes_trove.store import SessionKey
from hermes_trove.substring import snippet, whole_letters

BACKENDS = ("sqlite", "postgresql")

WORDS = {"hindi": "नमस्ते", "tamil": "வணக்கம்", "thai": "สวัสดีค่ะ", "accent": "cafe\u0301"}


def is_mark(ch: str) -> bool:
    return unicodedata.category(ch) in ("Mn", "Mc", "Me") or ch in "\u200c\u200d"


def orphaned(text: str) -> list[str]:
    """Places where a marker or a cut (``…``) sits right before a combining mark."""
    return [text[i:i + 4] for i in range(len(text) - 1)
            if (text.startswith((">>>", "<<<"), i) and i + 3 < len(text) and is_mark(text[i + 3]))
            or (text[i] == "…" and is_mark(text[i + 1]))]


@pytest.mark.parametrize("name", sorted(WORDS))
def test_a_search_highlights_the_whole_word_with_its_marks(runtime, backend, name):
    word = WORDS[name]
    runtime.store.ingest(SessionKey("s1"), [user(f"she said {word} to everyone"), assistant("ok")])
    hits = runtime.store.search(build_match(word).expression, limit=5)
    assert hits, name
    text = hits[0][2]
    assert not orphaned(text), text
    assert word in text.replace(">>>", "").replace("<<<", "")
    assert f">>>{word}<<<" in text, text


@pytest.mark.parametrize(("query", "text", "marked"), [
    ("deploy", "we deploy the billing service today", "we >>>deploy<<< the billing service today"),
    ("café", "met at the café near the station", "met at the >>>café<<< near the station"),
    ("Zürich", "flew to Zürich, then home", "flew to >>>Zürich<<<, then home"),
    ("नमस्ते दुनिया", "she said नमस्ते दुनिया, twice", "she said >>>नमस्ते<<< >>>दुनिया<<<, twice"),
])
def test_a_search_highlights_exactly_the_matched_words(runtime, backend, query, text, marked):
    runtime.store.ingest(SessionKey("s1"), [user(text), assistant("ok")])
    hits = runtime.store.search(build_match(query).expression, limit=5)
    assert [h[2] for h in hits] == [marked]


def test_a_long_message_snippet_is_cut_around_the_word_and_highlights_it(runtime, backend):
    filler = " ".join(f"filler{i}" for i in range(120))
    runtime.store.ingest(SessionKey("s1"), [user(f"{filler} she said नमस्ते to everyone {filler}"), assistant("ok")])
    hits = runtime.store.search(build_match("नमस्ते").expression, limit=5)
    assert len(hits) == 1
    text = hits[0][2]
    assert text.startswith("…") and text.endswith("…") and ">>>नमस्ते<<<" in text and not orphaned(text), text


def test_whole_letters_moves_a_marker_past_the_marks_that_follow_it():
    assert whole_letters(">>>नमस्त<<<े दुनिया") == ">>>नमस्ते<<< दुनिया"
    assert whole_letters(">>>வணக்கம<<<் இன்று") == ">>>வணக்கம்<<< இன்று"
    assert whole_letters("a >>>cafe<<<\u0301 b") == "a >>>cafe\u0301<<< b"
    assert whole_letters("क्>>>\u200dष<<<") == "क्\u200d>>>ष<<<"  # a highlight never opens on a joiner
    assert whole_letters("…\u0947 दुनिया >>>x<<<") == "… दुनिया >>>x<<<"  # a cut never opens on a mark
    assert whole_letters("\u0301 alone") == "\u0301 alone"  # text that itself opens on a mark is left
    assert whole_letters("plain >>>words<<< stay") == "plain >>>words<<< stay"


def test_a_substring_snippet_widens_its_cuts_to_whole_letters():
    assert snippet("she said नमस्ते ok", "नमस्त") == "she said >>>नमस्ते<<< ok"
    opens_on_a_mark = "क\u093f" + "z" * 78 + " needle"  # 80 characters before the hit start on the vowel sign
    assert snippet(opens_on_a_mark, "needle") == "कि" + "z" * 78 + " >>>needle<<<"
    ends_on_a_virama = "needle " + "a" * 158 + "क्z"  # the 160 characters after the hit end on क
    assert snippet(ends_on_a_virama, "needle").endswith("a" + "क्")


def test_a_summary_search_highlights_the_whole_word_with_its_marks(runtime, backend):
    from test_dag import leaf, messages
    leaf(runtime.dag, "s1", messages(runtime, "s1", 2), summary="the user greeted with नमस्ते and வணக்கம் today")
    for word in ("नमस्ते", "வணக்கம்"):
        expression = build_match(word).expression
        hits = [*runtime.dag.search(expression, "s1"), *runtime.dag.search_all(expression)]
        assert len(hits) == 2
        for _, _, text in hits:
            assert word in text.replace(">>>", "").replace("<<<", "") and not orphaned(text), text
            assert f">>>{word}<<<" in text, text


def test_a_run_of_marks_never_grows_a_substring_snippet_past_its_cap():
    """Stacked marks (pasted "zalgo" text) hold thousands of marks on one letter; a cut moves past a
    letter's marks only as far as a real letter carries them, so the snippet keeps its size."""
    stacked = "x" + "\u0301" * 5000
    text = stacked + " " + "q" * 100 + " needle " + "b" + "\u0301" * 5000
    found = snippet(text, "needle")
    assert ">>>needle<<<" in found and len(found) <= 1 + 80 + len(">>>needle<<<") + 160 + 3 * 30
    assert len(snippet(stacked, "absent")) <= 240 + 30
    assert len(snippet("y" * 79 + stacked + " needle", "needle")) <= 1 + 80 + len(">>>needle<<<") + 30
    assert snippet("ab" + "\u0301" * 40 + "needle", "needle").startswith("ab")  # under the cap: text unchanged


ORDINARY = [
    "plain >>>ascii<<< words, stay put",
    "thumbs >>>👍<<<🏽 and a family >>>👨\u200d👩\u200d👧<<< ok",  # a skin tone is a symbol, not a mark
    "حرف >>>كَتَبَ<<< الولد",
    "jamo >>>\u1112\u1161\u11ab<<< stays",  # conjoining jamo are letters
    "a user typed >>> and <<< and >>>>x<<<< themselves",
    "…cut >>>here<<< …",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_whole_letters_leaves_ordinary_snippets_alone(text):
    assert whole_letters(text) == text


def test_whole_letters_keeps_every_character_and_marker():
    text = ">>>न<<<\u094d\u200d>>>क<<<\u0947 >>>❤<<<\ufe0f >>>\u0301x<<<"
    fixed = whole_letters(text)
    assert fixed == ">>>न\u094d\u200d<<<>>>क\u0947<<< >>>❤\ufe0f<<< \u0301>>>x<<<"
    assert sorted(fixed) == sorted(text)  # moved, never lost or doubled
