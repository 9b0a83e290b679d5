"""Pure full-text query building: any input string becomes a valid FTS5 MATCH expression.

Natural-language questions become an OR of their content terms (BM25 ranks the rows
that match most, rarest terms weigh most); ``"quoted phrases"`` stay phrases and
``term*`` stays a prefix query. Nothing here touches SQLite.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

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
_WORD = re.compile(r"[^\W_]+(?:[_'][^\W_]+)*\*?", re.UNICODE)


@dataclass(frozen=True)
class Match:
    expression: str  # FTS5 MATCH text; empty when the query has no searchable term
    terms: tuple[str, ...]
    phrases: tuple[str, ...]


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _term(token: str) -> str:
    prefix = token.endswith("*")
    core = token.rstrip("*").replace("'", " ").replace("_", " ")
    return _quote(core) + ("*" if prefix and core else "")


def build_match(query: str, max_terms: int = 32) -> Match:
    """Turn free text into an OR query over its terms and phrases."""
    text = query if isinstance(query, str) else str(query)
    phrases = tuple(p.strip() for p in _PHRASE.findall(text) if p.strip())
    rest = _PHRASE.sub(" ", text)
    words = [w for w in _WORD.findall(rest)]
    terms: list[str] = []
    seen: set[str] = set()
    for w in words:
        low = w.lower()
        if low.rstrip("*") in STOPWORDS and len(words) > 1:
            continue
        if low in seen:
            continue
        seen.add(low)
        terms.append(w)
    if not terms and not phrases:  # a query of stopwords only still searches its words
        terms = list(dict.fromkeys(w for w in words))
    parts = [_quote(" ".join(_WORD.findall(p)) or p) for p in phrases] + [_term(t) for t in terms[:max_terms]]
    parts = [p for p in parts if p not in ('""', '""*')]
    return Match(" OR ".join(parts), tuple(terms[:max_terms]), phrases)


def highlight_window(text: str, terms: tuple[str, ...], width: int = 240) -> str:
    """A short window of ``text`` around the first term found (fallback snippet)."""
    low = text.lower()
    pos = -1
    for t in terms:
        pos = low.find(t.rstrip("*").lower())
        if pos >= 0:
            break
    start = max(0, pos - width // 3) if pos >= 0 else 0
    out = text[start:start + width]
    return ("…" if start else "") + out + ("…" if start + width < len(text) else "")
