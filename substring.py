"""The substring scan for text the full-text tokenizer cannot split (CJK runs, emoji, partial ids), and
the rule every search snippet follows: a cut or a highlight never separates a letter from its marks."""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Any

from .backend import on_server
from .packed import unpack

_MARKER = re.compile(">>>|<<<")
# A letter carries at most this many marks (Unicode's stream-safe limit, UAX #15); a cut moves past
# no more, so stacked marks (pasted "zalgo" text) cannot grow a snippet past its cap.
MAX_MARKS = 30


def is_mark(ch: str) -> bool:
    """A character that belongs to the letter before it: a combining mark (a vowel sign, a virama,
    an accent) or a zero-width (non-)joiner."""
    return ch in "\u200c\u200d" or unicodedata.category(ch) in ("Mn", "Mc", "Me")


def _past_marks(text: str, at: int, most: int | None = None) -> int:
    stop = len(text) if most is None else min(len(text), at + most)
    while at < stop and is_mark(text[at]):
        at += 1
    return at


def whole_letters(marked: str) -> str:
    """A ``>>>``/``<<<`` marked snippet with no boundary between a letter and its marks: a marker
    followed by marks moves past them (a highlight ends after its last letter's vowel signs, and never
    opens on a mark), and a snippet cut (``…``) opening on marks drops them. Pure."""
    if "…" in marked[:1]:
        marked = "…" + marked[_past_marks(marked, 1):]
    out: list[str] = []
    done = 0  # ``marked[:done]`` is in ``out``
    for found in _MARKER.finditer(marked):  # only a marker's next character is looked at
        at, after = found.start(), found.end()
        if after == len(marked) or not is_mark(marked[after]):
            continue
        end = _past_marks(marked, after)
        out += [marked[done:at], marked[after:end], found.group()]
        done = end
    return "".join(out) + marked[done:] if out else marked


def snippet(text: str, literal: str) -> str:
    """``text`` around the first case-insensitive occurrence of ``literal``, marked ``>>>``/``<<<``,
    every cut on a letter's boundary (before it, or after its marks). Pure."""
    pos = text.lower().find(literal.lower())
    if pos < 0:
        return text[:_past_marks(text, 240, MAX_MARKS)]
    start = max(0, pos - 80)
    floor = max(0, start - MAX_MARKS)
    while start > floor and is_mark(text[start]):
        start -= 1
    end = _past_marks(text, pos + len(literal), MAX_MARKS)
    tail = _past_marks(text, end + 160, MAX_MARKS)
    return whole_letters(("…" if start else "") + text[start:pos] + ">>>" + text[pos:end] + "<<<" + text[end:tail])


def scan(conn: Any, literal: str, where: Sequence[str], args: Sequence[Any], limit: int,
         max_candidates: int | None) -> list[tuple[Any, str]]:
    """Messages holding ``literal`` (case-insensitive), newest first, with a snippet each.

    ``where``/``args`` filter on ``m`` as ``Store.search`` writes them; ``max_candidates``
    bounds the scan to the newest N store ids. Returns ``(row, snippet)`` pairs.
    """
    if "\x00" in literal and on_server(conn):  # a server's text holds no NUL, so nothing can hold this
        return []
    where = ["instr(lower(trove_text(m.content) || ' ' || COALESCE(m.tool_calls, '')), lower(?)) > 0", *where]
    params: list[Any] = [literal, *args]
    if max_candidates is not None:
        top = conn.execute("SELECT MAX(store_id) FROM messages").fetchone()[0] or 0
        where.append("m.store_id > ?")
        params.append(int(top) - int(max_candidates))
    sql = f"SELECT m.* FROM messages m WHERE {' AND '.join(where)} ORDER BY m.store_id DESC LIMIT ?"
    return [(r, snippet(str(unpack(r["content"]) or ""), literal)) for r in conn.execute(sql, [*params, int(limit)])]
