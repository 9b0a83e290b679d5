"""PostgreSQL full text, the pure part: the words the server indexes, and FTS5 MATCH text as a tsquery.

``normalise`` splits as FTS5's unicode61 does; ``document`` bounds a row's indexed words (a tsvector
stays under 1 MB); ``parse_match`` reads the MATCH grammar and never fails on broken input (it gives
no query). ``pgtext`` holds the SQL. Pure: no connection, no I/O.
"""
from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass

from .substring import is_mark

CONFIG = "trove"             # the text search configuration the schema creates (unaccent, Snowball English)
# A tsvector must stay under 1 MB. The first INDEX_MAX_CHARS characters of a row (content, then
# tool_calls) are indexed, and at most INDEX_MAX_BYTES bytes of their words: a tsvector costs at
# most ~3 bytes per byte of words (4-byte entry + 2-byte position per short distinct word).
INDEX_MAX_CHARS = 200_000
INDEX_MAX_BYTES = 300_000
MAX_WORD_CHARS = 500        # longer runs are dropped (PostgreSQL refuses words over 2047 bytes)
MAX_PHRASES = 64            # a MATCH expression's phrases past this are ignored


# -- text ---------------------------------------------------------------------------------

_RUN = re.compile(r"[^\W_]+")
_DIACRITICS = re.compile("[\u0300-\u036f]+")  # combining marks unicode61 drops (remove_diacritics 2)


def normalise(text: str) -> str:
    """``text`` as the words FTS5's unicode61 tokenizer finds, joined by single spaces.

    Runs of letters and digits are words; everything else (punctuation, ``_``, emoji) separates,
    so ``src/billing/invoice.py`` becomes ``src billing invoice py``. Case and accents stay for
    the ``trove`` configuration to fold. Pure.
    """
    if not text:
        return ""
    if not isinstance(text, str):
        text = str(text)
    if not text.isascii():
        text = _DIACRITICS.sub("", unicodedata.normalize("NFC", text))
    return " ".join(run for run in _RUN.findall(text) if len(run) <= MAX_WORD_CHARS)


@functools.cache
def marks() -> str:
    """A regular-expression bracket of every combining mark and the zero-width (non-)joiners, as
    ``\\uXXXX``/``\\UXXXXXXXX`` ranges: ``normalise`` splits words at these characters while the
    server's parser keeps them inside a word, so a headline's text blanks them first. Pure."""
    ranges: list[list[int]] = []
    for code in range(0x300, 0xE01F0):
        if is_mark(chr(code)):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1][1] = code
            else:
                ranges.append([code, code])

    def esc(code: int) -> str:
        return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
    return "[" + "".join(esc(a) if a == b else f"{esc(a)}-{esc(b)}" for a, b in ranges) + "]"


def _capped(words: str, max_bytes: int) -> str:
    """``words`` cut to at most ``max_bytes`` UTF-8 bytes, at a word boundary."""
    if len(words) * 4 <= max_bytes or len(words.encode("utf-8")) <= max_bytes:
        return words
    head = words.encode("utf-8")[:max(0, max_bytes) + 1].decode("utf-8", "ignore")
    return head.rsplit(" ", 1)[0] if " " in head else ""


def document(*texts: str | None) -> tuple[str, ...]:
    """The indexed words of a row's texts (content first): within INDEX_MAX_CHARS characters and
    INDEX_MAX_BYTES bytes of words together. Pure."""
    out: list[str] = []
    chars, room = INDEX_MAX_CHARS, INDEX_MAX_BYTES
    for text in texts:
        part = (text if isinstance(text, str) else str(text or ""))[:max(0, chars)]
        chars -= len(part)
        words = _capped(normalise(part), room)
        room -= len(words.encode("utf-8")) if not words.isascii() else len(words)
        out.append(words)
    return tuple(out)


def word_count(words: str) -> int:
    return words.count(" ") + 1 if words else 0


# -- the MATCH grammar --------------------------------------------------------------------

@dataclass(frozen=True)
class Phrase:
    words: tuple[str, ...]
    prefix: bool = False    # the last word is a prefix ("deplo"*)

    def tsquery(self) -> str:
        return "(" + " <-> ".join(self.words) + (":*" if self.prefix else "") + ")"


@dataclass(frozen=True)
class Query:
    text: str                       # to_tsquery('trove', text)
    phrases: tuple[Phrase, ...]     # the phrases BM25 weighs (not those under NOT)


_TOKEN = re.compile(r'\s+|"(?:[^"]|"")*"?|[()*]|[^\s"()*]+')
_OPS = ("OR", "AND", "NOT")


def parse_match(expression: str) -> Query | None:
    """The FTS5 MATCH text ``fulltext.build_match`` writes as a tsquery; None when nothing to search.

    Reads ``"phrases"``, barewords, a ``*`` prefix mark, ``OR``/``AND``/implicit AND/``NOT`` and
    parentheses; NEAR, column filters and broken syntax (an open quote or parenthesis, a dangling
    operator) give None, never an error. Pure.
    """
    if not isinstance(expression, str):
        expression = str(expression)
    tokens = [t for t in _TOKEN.findall(expression) if not t.isspace()]
    if any(t.startswith('"') and t.count('"') % 2 for t in tokens):  # an open quote
        return None
    parser = _Parser(tokens)
    try:
        text = parser.expr(0)
        if parser.pos != len(tokens):
            return None
    except _Broken:
        return None
    if not text or not parser.phrases:
        return None
    return Query(text, tuple(dict.fromkeys(parser.phrases)))


class _Broken(Exception):
    pass


class _Parser:
    """Recursive descent over FTS5's boolean grammar (NOT binds tighter than AND, AND than OR)."""

    def __init__(self, tokens: list[str]):
        self.tokens = tokens
        self.pos = 0
        self.phrases: list[Phrase] = []
        self.count = 0

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str:
        tok = self.peek()
        if tok is None:
            raise _Broken
        self.pos += 1
        return tok

    # Each level returns tsquery text, None for "matches nothing" (an empty phrase) or "" for
    # "ignored" (a phrase past MAX_PHRASES).
    def expr(self, depth: int, negated: bool = False) -> str | None:
        parts = [self.conj(depth, negated)]
        while self.peek() == "OR":
            self.take()
            parts.append(self.conj(depth, negated))
        kept = [p for p in parts if p]
        if not kept:
            return "" if "" in parts else None
        return kept[0] if len(kept) == 1 else "(" + " | ".join(kept) + ")"

    def conj(self, depth: int, negated: bool) -> str | None:
        parts = [self.neg(depth, negated)]
        while (tok := self.peek()) is not None and tok not in ("OR", ")"):
            if tok == "AND":
                self.take()
            parts.append(self.neg(depth, negated))
        if any(p is None for p in parts):  # an empty phrase matches nothing: so does the AND
            return None
        kept = [str(p) for p in parts if p]  # "": a phrase past MAX_PHRASES, ignored
        if not kept:
            return ""
        return kept[0] if len(kept) == 1 else "(" + " & ".join(kept) + ")"

    def neg(self, depth: int, negated: bool) -> str | None:
        left = self.primary(depth, negated)
        while self.peek() == "NOT":
            self.take()
            right = self.primary(depth, not negated)
            if left and right:
                left = f"({left} & !{right})"
        return left

    def primary(self, depth: int, negated: bool) -> str | None:
        tok = self.take()
        if tok == "(":
            if depth >= 32:
                raise _Broken
            inner = self.expr(depth + 1, negated)
            if self.take() != ")":
                raise _Broken
            return inner
        if tok in (")", "*") or tok in _OPS or tok == "NEAR" and self.peek() == "(":
            raise _Broken
        text = tok[1:-1].replace('""', '"') if tok.startswith('"') else tok
        prefix = self.peek() == "*"
        if prefix:
            self.take()
        words = tuple(normalise(text).split())[:64]
        if not words:
            return None
        if self.count >= MAX_PHRASES:
            return ""
        self.count += 1
        phrase = Phrase(words, prefix)
        if not negated:
            self.phrases.append(phrase)
        return phrase.tsquery()

