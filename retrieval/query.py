"""Pure full-text query building: any input string becomes a valid FTS5 MATCH expression.

Natural-language questions become an OR of their content terms (BM25 ranks the rows
that match most, rarest terms weigh most); ``"quoted phrases"`` stay phrases, ``term*``
stays a prefix query and paths or ids become phrases. ``rerank`` refines a BM25 candidate
pool by term coverage and adjacent-turn context. Nothing here touches SQLite.
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
    return '"' + term.replace('"', '""') + '"'


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


_SUFFIXES = ("ingly", "edly", "ing", "ies", "ied", "ed", "es", "ly", "s")


def rough_stem(term: str) -> str:
    """A crude prefix stem for containment checks: 'joined', 'joins' and 'joining' share 'join'."""
    core = term.rstrip("*").lower()
    for suffix in _SUFFIXES:
        if core.endswith(suffix) and len(core) - len(suffix) >= 3:
            core = core[: -len(suffix)]
            break
    return core[: len(core) - 1] if len(core) > 5 else core


@dataclass(frozen=True)
class Candidate:
    """One full-text hit to re-rank: ``score`` is higher-is-better (negated BM25)."""

    key: int
    group: str
    score: float
    text: str


# Re-ranking weights: fixed, documented defaults (not fitted to any benchmark's questions).
COVERAGE_WEIGHT = 0.5  # boost rows that contain more of the distinct query terms
NEIGHBOR_WEIGHT = 0.25  # share of the best adjacent hit's score (same session, next/previous row)


def rerank(candidates: list[Candidate], terms: tuple[str, ...], coverage_weight: float = COVERAGE_WEIGHT,
           neighbor_weight: float = NEIGHBOR_WEIGHT) -> list[tuple[int, float]]:
    """Order BM25 candidates by term coverage and conversational context.

    BM25 over an OR query rewards one rare term repeated; a row that mentions more of the
    question's terms is usually the better answer. Turns adjacent to a strong hit share
    its topic (question and answer, tool call and result), so each row gains a fraction of
    its best neighbour's score. Returns ``(key, score)`` best first; ties keep input order.
    """
    stems = [s for s in dict.fromkeys(rough_stem(t) for t in terms) if s]
    scored: dict[int, float] = {}
    groups: dict[int, str] = {}
    for c in candidates:
        coverage = (sum(1 for s in stems if s in c.text) / len(stems)) if stems else 0.0
        scored[c.key] = c.score * (1.0 + coverage_weight * coverage)
        groups[c.key] = c.group
    out = []
    for c in candidates:
        best = max((scored[k] for k in (c.key - 1, c.key + 1) if k in scored and groups[k] == c.group),
                   default=0.0)
        out.append((c.key, scored[c.key] + neighbor_weight * max(0.0, best)))
    order = {c.key: i for i, c in enumerate(candidates)}
    return sorted(out, key=lambda kv: (-kv[1], order[kv[0]]))
