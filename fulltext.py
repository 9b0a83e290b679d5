"""The full-text vocabulary retrieval and evidence share: the FTS5 MATCH grammar and one uncapped match.

Questions become an OR of their content terms (BM25 weighs the rarest most); ``"phrases"`` stay
phrases, ``term*`` a prefix, paths and ids phrases. ``matching_ids`` gathers raw messages as
``trove_grep`` does (the SQL lives in the store), for a check that needs every hit, not a page.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from .scope import Visibility

if TYPE_CHECKING:
    from .rows import MessageRow
    from .store import MessageStore

Hit = TypeVar("Hit", bound=tuple[Any, ...])  # a store hit: (row, rank, snippet), the row first

LITERAL_MAX_CHARS = 200
# An archive search (and trove_grep in any scope) ranks the newest N matching rows and every
# match of the query's rare terms (ftsbound.RARE_BUDGET); a substring scan (text the tokenizer
# cannot split) reads the newest LITERAL_CANDIDATES rows. trove_grep searches the newest
# COMMON_CANDIDATES matches only, without bm25() (ftsbound.newest), when every term of its
# query is common (ftsbound.window).
ARCHIVE_CANDIDATES = 5000
COMMON_CANDIDATES = 1000
LITERAL_CANDIDATES = 20000

# Short, frequent English words that only add noise to an OR query.
STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just me more most
my myself no nor not now of off on once only or other our ours ourselves out over own same she
should so some such than that the their theirs them themselves then there these they this those
through to too under until up very was we were what when where which while who whom why will with
would you your yours yourself yourselves also did does doesn't don't get got go going gone know like
make made many much one really said say says tell told thing things think way well went yes yeah
""".split())

_PHRASE = re.compile(r'"([^"]+)"')
_RUN = re.compile(r"[^\W_]+", re.UNICODE)
_POSSESSIVE = re.compile(r"(?<=[^\W_])['’][sS]$")
_CONTRACTION = re.compile(r"^[^\W_]+(?:['’][^\W_]+)+$", re.UNICODE)
_WORD_CHAR = re.compile(r"[\w*]", re.UNICODE)


@dataclass(frozen=True)
class Match:
    expression: str  # FTS5 MATCH text; empty when the query has no searchable term
    terms: tuple[str, ...]
    phrases: tuple[str, ...]


def _quote(term: str) -> str:
    # FTS5 reads a NUL as the end of the query text ("unterminated string"); it separates no
    # less than a space does, so it is written as one.
    return '"' + term.replace('"', '""').replace("\x00", " ") + '"'


def _phrase(runs: list[str], prefix: bool = False) -> str:
    return _quote(" ".join(runs)) + ("*" if prefix else "")


def _strip_trailing(chunk: str) -> str:
    """``chunk`` without its trailing punctuation (keeps ``*``), in linear time.

    A ``[^\\w*]+$`` search restarts at every position of a punctuation run: quadratic.
    """
    end = len(chunk)
    while end and _WORD_CHAR.match(chunk, end - 1) is None:
        end -= 1
    return chunk[:end]


def _chunks(text: str) -> list[tuple[list[str], bool, bool]]:
    """Whitespace chunks as (word runs, is_prefix, is_compound); possessive 's dropped."""
    out = []
    for chunk in text.split():
        chunk = _strip_trailing(chunk)
        prefix = chunk.endswith("*")
        chunk = _POSSESSIVE.sub("", chunk.rstrip("*"))
        runs = _RUN.findall(chunk)
        if runs:
            # "don't" stays one phrase; "src/app.py" or "deploy-key" is a compound identifier
            compound = len(runs) > 1 and not _CONTRACTION.match(chunk)
            out.append((runs, prefix, compound))
    return out


def build_match(query: str, max_terms: int = 32) -> Match:
    """Turn free text into an OR query over its terms and phrases.

    Compound tokens such as paths, ids and hyphenated words (``src/app.py``, ``ING-7731``)
    become a phrase of their parts (matching exactly how the tokenizer split the stored
    text) plus their distinctive parts as plain terms, so exact identifiers rank first.
    """
    text = query if isinstance(query, str) else str(query)
    phrases = tuple(p.strip() for p in _PHRASE.findall(text) if p.strip())
    rest = _PHRASE.sub(" ", text)
    parts: list[str] = []
    terms: list[str] = []
    seen: set[str] = set()

    def add(expr: str, term: str | None = None) -> None:
        key = expr.lower()
        if key in seen or expr in ('""', '""*'):
            return
        seen.add(key)
        parts.append(expr)
        if term is not None:
            terms.append(term)

    for p in phrases:
        add(_phrase(_RUN.findall(p)) if _RUN.findall(p) else _quote(p))
    chunks = _chunks(rest)
    single = [c for c in chunks if len(c[0]) == 1 or not c[2]]
    for runs, prefix, compound in chunks:
        if compound:
            add(_phrase(runs, prefix))
            for i, run in enumerate(runs):
                last_prefix = prefix and i == len(runs) - 1
                if len(run) > 1 and run.lower() not in STOPWORDS:
                    add(_quote(run) + ("*" if last_prefix else ""), run + ("*" if last_prefix else ""))
            continue
        word = "'".join(runs)
        if word.lower() in STOPWORDS and len(chunks) > 1:
            continue
        add(_phrase(runs, prefix), word + ("*" if prefix else ""))
    if not parts and single:  # a query of stopwords only still searches its words
        for runs, prefix, _ in single:
            add(_phrase(runs, prefix), "'".join(runs))
    return Match(" OR ".join(parts[:max_terms]), tuple(terms[:max_terms]), phrases)


# Memory tools: tools whose results are copies of stored messages (or answers built from them),
# not conversation. trove's own (every tool the plugin registers is named trove_*) and those of
# lossless-claw (lcm_grep, lcm_describe, lcm_expand, lcm_expand_query), whose traffic histories
# imported from it hold.
MEMORY_TOOL_PREFIXES = ("trove_", "lcm_")


def memory_tool(name: object) -> bool:
    """True for the name of a memory tool (``MEMORY_TOOL_PREFIXES``)."""
    return isinstance(name, str) and name.startswith(MEMORY_TOOL_PREFIXES)


def own_tool_echo(row: MessageRow) -> bool:
    """True for a stored row that is a memory tool's own traffic, not conversation: the result of
    a memory tool (``memory_tool``: a copy of stored rows, or an answer built from them) or an
    assistant turn with no text whose only content is calls to memory tools (a search request).
    Searches skip them, so earlier searches do not crowd out the messages they found."""
    if row.role == "tool":
        return memory_tool(row.tool_name)
    if row.role != "assistant" or not row.tool_calls or row.content.strip():
        return False
    try:
        calls = json.loads(row.tool_calls)
    except ValueError:
        return False
    return isinstance(calls, list) and bool(calls) and all(
        isinstance(c, dict) and isinstance(c.get("function"), dict) and memory_tool(c["function"].get("name"))
        for c in calls)


def skipping(find: Callable[[int], list[Hit]], limit: int, drop: Callable[[MessageRow], bool] = own_tool_echo,
             most: int = ARCHIVE_CANDIDATES) -> tuple[list[Hit], list[Hit], bool]:
    """``find(n)`` gives the best ``n`` store hits; the hits whose row ``drop`` refuses (trove's own
    retrieval traffic, the turn in flight) must not take the places of others. Reads further,
    doubling ``n`` up to ``most``, until ``limit`` hits are kept or the store has no more.
    Returns the last read's hits, those of them kept (``limit`` or more when there are), and
    whether that read held every match."""
    fetch = max(1, limit)
    while True:
        found = find(fetch)
        kept = [hit for hit in found if not drop(hit[0])]
        if len(found) < fetch or len(kept) >= limit or fetch >= most:
            return found, kept, len(found) < fetch
        fetch = min(most, fetch * 2)


def matching_ids(store: MessageStore, query: str, limit: int, session_ids: Sequence[str] | None,
                 visible: Visibility, turn: tuple[str, int] | None = None) -> list[int]:
    """Store ids of up to ``limit`` raw messages matching ``query``, best BM25 rank first.

    ``session_ids`` None searches every visible session (the newest ARCHIVE_CANDIDATES
    matches and every match of its rare terms); text the tokenizer cannot split falls back to
    a substring scan, newest first.
    ``turn`` (session id, turn start) drops that session's rows past the start, the turn in
    flight; trove's own retrieval traffic (``own_tool_echo``) is dropped as trove_grep drops it;
    it reads further (``skipping``) so the result still holds ``limit`` other matches when there are.
    """
    def drop(row: MessageRow) -> bool:
        return own_tool_echo(row) or (turn is not None and row.session_id == turn[0] and row.store_id > turn[1])

    _, kept, _ = skipping(lambda n: [(row,) for row in _matching_rows(store, query, n, session_ids, visible)],
                          limit, drop, most=max(limit, LITERAL_CANDIDATES))
    return [row.store_id for row, in kept[:limit]]


def _matching_rows(store: MessageStore, query: str, limit: int, session_ids: Sequence[str] | None,
                   visible: Visibility) -> list[MessageRow]:
    bound = ARCHIVE_CANDIDATES if session_ids is None else None
    expression = build_match(query).expression
    hits = store.search(expression, session_ids, limit=limit, snippets=False, max_candidates=bound,
                        visible=visible) if expression else []
    literal = query.strip()
    if not hits and 0 < len(literal) <= LITERAL_MAX_CHARS:
        hits = store.search("", session_ids, limit=limit, literal=literal, visible=visible,
                            max_candidates=None if bound is None else LITERAL_CANDIDATES)
    return [row for row, _, _ in hits]
