"""PostgreSQL full text, the server store's FTS5: search docs, BM25 in SQL, snippets.

Text is split as unicode61 splits it (``pgwords.normalise``), stemmed by the ``trove`` configuration
into side tables, and ranked by FTS5's BM25 (k1 1.2, b 0.75, tool_calls weighing 0.6, negated) from
the document frequencies ``refresh_stats`` keeps. Only a row's first INDEX_MAX_CHARS characters are
indexed (the substring scan still reads the rest), nor a phrase past its 16,383rd word.
"""
from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from . import ftsbound
from .pgwords import CONFIG, INDEX_MAX_CHARS, document, marks, parse_match, word_count
from .substring import is_mark, whole_letters

K1 = 1.2
B = 0.75
TOOL_WEIGHT = 0.6           # bm25(messages_fts, 1.0, 0.6): content weighs 1.0
PREFIX_EXPANSIONS = 64      # a prefix term's tf counts its 64 most frequent known lexemes
MAX_IDS = 500               # store_ids restricts to at most this many rows (as store.search)
MAX_LIMIT = 100_000
SNIPPET_WORDS = 40          # snippet(..., 40) on SQLite
_BIGINT = 2**63 - 1


class Executes(Protocol):
    """A connection taking SQLite-style placeholders (``PgConnection``; callers may type it as SQLite's)."""

    def execute(self, sql: str, params: Any = ..., /) -> Any: ...


class Transacts(Executes, Protocol):
    """A ``pgdb.PgConnection``: it also opens server transactions (``raw``, the psycopg connection)."""

    raw: Any

    @property
    def in_transaction(self) -> bool: ...


SEARCH_DDL: tuple[str, ...] = (
    """DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_ts_dict WHERE dictname = 'unaccent' AND pg_ts_dict_is_visible(oid)) THEN
        RAISE EXCEPTION 'hermes-trove full text needs the unaccent extension on the search_path'
            USING HINT = 'As a database owner run: CREATE EXTENSION IF NOT EXISTS unaccent SCHEMA public;'
                         ' and keep public on the store''s search_path (options=-csearch_path=<schema>,public).';
    END IF;
END $$""",
    "CREATE TEXT SEARCH DICTIONARY trove_stem (TEMPLATE = snowball, Language = english)",
    "CREATE TEXT SEARCH CONFIGURATION trove (PARSER = default)",
    # After normalise only asciiword, word, numword and the number types occur; the others map
    # too so that headlines over raw text still stem their words.
    "ALTER TEXT SEARCH CONFIGURATION trove ADD MAPPING FOR asciiword, word, numword, asciihword, hword,"
    " numhword, hword_asciipart, hword_part, hword_numpart, email, url, host, url_path, file, sfloat,"
    " float, int, uint, version WITH unaccent, trove_stem",
    """CREATE TABLE message_search (
    store_id BIGINT PRIMARY KEY REFERENCES messages(store_id) ON DELETE CASCADE,
    doc      tsvector NOT NULL,
    doc_len  INTEGER NOT NULL,
    tool_len INTEGER NOT NULL DEFAULT 0
)""",
    "CREATE INDEX message_search_doc ON message_search USING gin (doc)",
    """CREATE TABLE node_search (
    node_id BIGINT PRIMARY KEY REFERENCES summary_nodes(node_id) ON DELETE CASCADE,
    doc     tsvector NOT NULL,
    doc_len INTEGER NOT NULL
)""",
    "CREATE INDEX node_search_doc ON node_search USING gin (doc)",
    # Document frequency per lexeme and corpus ('messages', 'nodes'); a lexeme missing here counts
    # as in one document (new since the last refresh, or a full refresh's hapax).
    """CREATE TABLE search_terms (
    corpus TEXT NOT NULL,
    lexeme TEXT COLLATE "C" NOT NULL,
    docs   INTEGER NOT NULL,
    PRIMARY KEY (corpus, lexeme)
)""",
    """CREATE TABLE search_stats (
    corpus       TEXT PRIMARY KEY,
    docs         BIGINT NOT NULL,
    avg_len      DOUBLE PRECISION NOT NULL,
    last_id      BIGINT NOT NULL,
    full_docs    BIGINT NOT NULL,
    refreshed_at DOUBLE PRECISION NOT NULL
)""",
)


# -- writing ------------------------------------------------------------------------------

# A message's search doc from its indexed words (``message_doc``): content weighs A, tool_calls B.
MESSAGE_DOC_SQL = f"setweight(to_tsvector('{CONFIG}', {{c}}), 'A') || setweight(to_tsvector('{CONFIG}', {{t}}), 'B')"


def message_doc(content: str | None, tool_calls: str | None) -> tuple[str, str, int, int]:
    """``(content words, tool_calls words, doc_len, tool_len)`` of one message: what ``MESSAGE_DOC_SQL``
    and the ``message_search`` columns take. Pure."""
    c, t = document(content, tool_calls)
    tool_len = word_count(t)
    return c, t, word_count(c) + tool_len, tool_len


def index_messages(conn: Executes, rows: Sequence[tuple[int, str | None, str | None]]) -> int:
    """Write (or rewrite) the search docs of ``(store_id, content, tool_calls)`` rows in one statement.

    Content positions weigh A, tool_calls B; an existing doc is replaced (content rewrites).
    """
    latest = {int(r[0]): r for r in rows}  # one write per id
    ids = list(latest)
    if not ids:
        return 0
    docs = [message_doc(r[1], r[2]) for r in latest.values()]
    conn.execute(
        "INSERT INTO message_search(store_id, doc, doc_len, tool_len)"
        f" SELECT r.id, {MESSAGE_DOC_SQL.format(c='r.c', t='r.t')},"
        " r.n, r.k FROM unnest(?::bigint[], ?::text[], ?::text[], ?::int[], ?::int[]) AS r(id, c, t, n, k)"
        " ON CONFLICT (store_id) DO UPDATE SET doc = excluded.doc, doc_len = excluded.doc_len,"
        " tool_len = excluded.tool_len", [ids, *(list(col) for col in zip(*docs, strict=True))])
    return len(ids)


def index_nodes(conn: Executes, rows: Sequence[tuple[int, str | None]]) -> int:
    """Write (or rewrite) the search docs of ``(node_id, summary)`` rows in one statement."""
    latest = {int(r[0]): document(r[1])[0] for r in rows}  # one write per id
    if not latest:
        return 0
    conn.execute(
        f"INSERT INTO node_search(node_id, doc, doc_len) SELECT r.id, setweight(to_tsvector('{CONFIG}', r.t), 'A'), r.n"
        " FROM unnest(?::bigint[], ?::text[], ?::int[]) AS r(id, t, n)"
        " ON CONFLICT (node_id) DO UPDATE SET doc = excluded.doc, doc_len = excluded.doc_len",
        [list(latest), list(latest.values()), [word_count(w) for w in latest.values()]])
    return len(latest)


def reindex_messages(conn: Executes, store_ids: Sequence[int]) -> int:
    """Rebuild the search docs of stored rows from their current text (after ``replace_contents``)."""
    ids = [int(i) for i in store_ids]
    if not ids:
        return 0
    rows = conn.execute("SELECT store_id, content, tool_calls FROM messages WHERE store_id = ANY(?::bigint[])",
                        [ids]).fetchall()
    return index_messages(conn, [(r[0], r[1], r[2]) for r in rows])


# -- document frequencies -----------------------------------------------------------------

@dataclass(frozen=True)
class _Corpus:
    name: str       # key in search_stats / search_terms
    side: str       # the side table
    key: str        # its id column (the base table's too)
    base: str       # the base table
    alias: str      # the base table's alias in callers' predicates
    source: str     # SQL of the text a snippet is cut from, over ``alias``
    tools: bool     # whether docs carry tool_calls (weight B)


MESSAGES = _Corpus("messages", "message_search", "store_id", "messages", "m",
                   "m.content || COALESCE(E'\\n' || m.tool_calls, '')", True)
NODES = _Corpus("nodes", "node_search", "node_id", "summary_nodes", "n", "n.summary", False)


@dataclass(frozen=True)
class StatsRefresh:
    corpus: str
    full: bool       # rebuilt from every doc, or only docs added since the last refresh
    docs: int        # documents counted now
    added: int       # documents read by this refresh
    lexemes: int     # search_terms rows written


def refresh_stats(conn: Transacts, *, full: bool | None = None, now: float | None = None) -> list[StatsRefresh]:
    """Bring ``search_terms``/``search_stats`` up to date for both corpora, in one transaction.

    Incremental by default: only docs added since the last refresh are read (ts_stat over their
    id range), so its cost follows new rows. A full rebuild (reads every doc, ts_stat holds every
    lexeme in memory) runs on the first refresh, when ``full`` is True, or automatically once the
    docs added since the last full one outnumber it (amortised O(new docs)); it also forgets
    deleted and rewritten docs, which incremental refreshes still count. Meant for a background
    job under a lease; searches never wait for it (lexemes it has not seen count as rare).
    """
    stamp = time.time() if now is None else float(now)
    nested = conn.in_transaction
    with conn.raw.transaction():
        if not nested:  # one snapshot: the counts, the id range and ts_stat read the same rows
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        return [_refresh(conn, corpus, full, stamp) for corpus in (MESSAGES, NODES)]


def _refresh(conn: Transacts, corpus: _Corpus, full: bool | None, stamp: float) -> StatsRefresh:
    prev = conn.execute("SELECT docs, avg_len, last_id, full_docs FROM search_stats WHERE corpus = ? FOR UPDATE",
                        [corpus.name]).fetchone()
    last = int(prev[2]) if prev else 0
    added, added_len, top = conn.execute(
        f"SELECT count(*), COALESCE(sum(doc_len), 0), COALESCE(max({corpus.key}), ?) FROM {corpus.side}"
        f" WHERE {corpus.key} > ?", [last, last]).fetchone()
    added, top = int(added), int(top)
    if prev is None:
        full = True
    elif full is None:
        full = added >= max(1, int(prev[3]))
    if full:
        conn.execute("DELETE FROM search_terms WHERE corpus = ?", [corpus.name])
        # Hapaxes are left out: a missing lexeme counts as in one document anyway.
        written = conn.execute(
            "INSERT INTO search_terms(corpus, lexeme, docs) SELECT ?, word, ndoc"
            f" FROM ts_stat('SELECT doc FROM {corpus.side}') WHERE ndoc > 1", [corpus.name]).rowcount
        docs, avg_len, top = conn.execute(
            f"SELECT count(*), COALESCE(avg(doc_len), 0), COALESCE(max({corpus.key}), 0) FROM {corpus.side}"
        ).fetchone()
        docs, avg_len, full_docs = int(docs), float(avg_len), int(docs)
        added = docs
    else:
        written = conn.execute(
            "INSERT INTO search_terms(corpus, lexeme, docs) SELECT ?, word, ndoc"
            f" FROM ts_stat('SELECT doc FROM {corpus.side} WHERE {corpus.key} > {last:d}"
            f" AND {corpus.key} <= {top:d}')"
            " ON CONFLICT (corpus, lexeme) DO UPDATE SET docs = search_terms.docs + excluded.docs",
            [corpus.name]).rowcount if added else 0
        assert prev is not None  # a first refresh is always full
        old_docs, old_avg = int(prev[0]), float(prev[1])
        docs = old_docs + added
        avg_len = (old_avg * old_docs + float(added_len)) / docs if docs else 0.0
        full_docs = int(prev[3])
    conn.execute(
        "INSERT INTO search_stats(corpus, docs, avg_len, last_id, full_docs, refreshed_at) VALUES (?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (corpus) DO UPDATE SET docs = excluded.docs, avg_len = excluded.avg_len,"
        " last_id = excluded.last_id, full_docs = excluded.full_docs, refreshed_at = excluded.refreshed_at",
        [corpus.name, docs, avg_len, top, full_docs, stamp])
    return StatsRefresh(corpus.name, bool(full), docs, added, max(0, written))


# -- searching ----------------------------------------------------------------------------

# Headlines run over the text with ASCII (and common typographic) punctuation and combining marks
# (``marks``) blanked, so the parser splits it as normalise does; blanking keeps every offset, so the
# original is restored, and a word's parts highlighted across its blanked marks join again.
_PUNCT = ("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
          "\u2018\u2019\u201a\u201c\u201d\u201e\u2013\u2014\u2026\u00ab\u00bb\u00b7\u2022")
# One fragment (MaxFragments=1) centres the best cover in its words, as FTS5's snippet() does.
_HEADLINE = (f'StartSel=">>>", StopSel="<<<", MaxWords={SNIPPET_WORDS}, MinWords={SNIPPET_WORDS // 2},'
             " ShortWord=0, MaxFragments=1")
# Fragment mode drops a number (a non-word token) that ends the text: a word appended after the
# text keeps it, and is cut from the headline again.
_TAIL = "trovetextendsentinel"


def literal(text: str) -> str:
    """``text`` as an SQL string literal (quotes doubled), read the same whatever the session's
    standard_conforming_strings: text holding a backslash is written as an escape string with
    its backslashes doubled (with the setting off, a plain literal reads a backslash as an escape,
    and one before a quote would end the string early). Text holding NUL is refused: no literal
    holds it. Pure."""
    if "\x00" in text:
        raise ValueError("an SQL string literal cannot hold the NUL character")
    if "\\" in text:
        return "E'" + text.replace("\\", "\\\\").replace("'", "''") + "'"
    return "'" + text.replace("'", "''") + "'"


def search_messages(conn: Executes, match_expression: str, *, where: Sequence[str] = (),
                    args: Sequence[Any] = (), limit: int = 10, max_candidates: int | None = None,
                    store_ids: Sequence[int] | None = None, snippets: bool = True,
                    session_bounds: tuple[int, int] | None = None,
                    rows: bool = False) -> list[tuple[Any, float, str]]:
    """Raw messages matching ``match_expression`` (FTS5 MATCH text), best BM25 first: ``(store_id, score, snippet)``.

    ``score`` is FTS5's ``bm25(messages_fts, 1.0, 0.6)``: negative, lower is better. ``where``/``args``
    are SQLite-style predicates on ``m`` (messages), as ``store._row_filters`` and
    ``Visibility.clause("m.session_id")`` write them. ``max_candidates`` ranks only the newest N
    matching rows that pass them; ``session_bounds`` (lowest, highest store id) and ``store_ids``
    narrow the candidates. Snippets (``>>>hit<<<``, ``…`` at cut ends) are built for the returned
    page only. ``rows`` returns each message's columns (a dict) in place of its id. One statement.
    """
    return _search(conn, MESSAGES, match_expression, where, args, limit, max_candidates, store_ids,
                   snippets, session_bounds, rows)


def search_nodes(conn: Executes, match_expression: str, *, where: Sequence[str] = (), args: Sequence[Any] = (),
                 limit: int = 10, max_candidates: int | None = None, node_ids: Sequence[int] | None = None,
                 snippets: bool = True, rows: bool = False) -> list[tuple[Any, float, str]]:
    """Summary nodes matching ``match_expression``, best ``bm25(nodes_fts)`` first: ``(node_id, score, snippet)``.
    ``where``/``args`` are predicates on ``n`` (summary_nodes), as ``SummaryDAG`` filters; ``rows`` returns
    each node's columns (a dict) in place of its id. One statement."""
    return _search(conn, NODES, match_expression, where, args, limit, max_candidates, node_ids,
                   snippets, None, rows)


def _count(value: Any, default: int, top: int) -> int:
    """``value`` as an int in ``[0, top]``; NaN, None and junk read as ``default``. Pure."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    if math.isnan(number):
        return default
    return min(top, int(max(0.0, min(float(top), number))))


def message_statement(expression: str, where: Sequence[str], args: Sequence[Any], limit: int,
                      max_candidates: int | None) -> tuple[str, list[Any]] | None:
    """``search_messages``' statement and its parameters, ``rows=True`` and no snippets (``_id``, ``_score``,
    then the message's columns, best first), for a caller that embeds it; None when it finds nothing. Pure."""
    return _statement(MESSAGES, expression, where, args, limit, max_candidates, None, False, None, True)


def _search(conn: Executes, corpus: _Corpus, expression: str, where: Sequence[str], args: Sequence[Any],
            limit: int, max_candidates: int | None, ids: Sequence[int] | None, snippets: bool,
            bounds: tuple[int, int] | None, rows: bool) -> list[tuple[Any, float, str]]:
    statement = _statement(corpus, expression, where, args, limit, max_candidates, ids, snippets, bounds, rows)
    if statement is None:
        return []
    # Prepared (unlike ``pgbound.newest``): a generic plan scans as the values' own plans do (the words sit in
    # materialized CTEs over arrays), within a tenth of their time at 30,000 and 100,000 messages, and a kept
    # plan saves about 1.2 ms of planning a call (bench/bench_pg_plans.py).
    return [({k: r[k] for k in r.keys() if not k.startswith("_")} if rows else int(r[0]), float(r[1]),
             _snippet(r[2], r[3], r[4], r[5]) if snippets else "") for r in conn.execute(*statement).fetchall()]


def _statement(corpus: _Corpus, expression: str, where: Sequence[str], args: Sequence[Any], limit: int,
               max_candidates: int | None, ids: Sequence[int] | None, snippets: bool,
               bounds: tuple[int, int] | None, rows: bool) -> tuple[str, list[Any]] | None:
    query = parse_match(expression)
    limit = _count(limit, 10, MAX_LIMIT)
    if query is None or limit == 0:
        return None
    cand_where = [f"s.doc @@ to_tsquery('{CONFIG}', ?)"]
    cand_args: list[Any] = [query.text]
    if bounds is not None:
        cand_where.append(f"s.{corpus.key} BETWEEN ? AND ?")
        cand_args += [_count(bounds[0], 0, _BIGINT), _count(bounds[1], _BIGINT, _BIGINT)]
    if ids is not None:
        wanted = [n for n in (_count(i, -1, _BIGINT) for i in list(ids)[:MAX_IDS]) if n >= 0]
        if not wanted:
            return None
        cand_where.append(f"s.{corpus.key} = ANY(?::bigint[])")
        cand_args.append(wanted)
    cand_where += [f"({w})" for w in where]
    cand_args += list(args)
    window: list[Any] = []
    if max_candidates is not None:  # the newest N matches, then the older ones of the rare phrases
        window = [ftsbound.RARE_BUDGET, *cand_args, _count(max_candidates, MAX_LIMIT, _BIGINT)]
    terms = [(i, j, word, phrase.prefix and j == len(phrase.words))  # phrase, part, word, prefix: one a word
             for i, phrase in enumerate(query.phrases, start=1) for j, word in enumerate(phrase.words, start=1)]
    # A phrase of several words must match as a phrase (@@: adjacency); one word matches by its lexeme.
    # A prefix term's lexemes come from search_terms: a doc matching it through one the last refresh
    # had not seen counts tf 1.
    multi = [i for i, p in enumerate(query.phrases, start=1) if len(p.words) > 1]
    check = [i for i, p in enumerate(query.phrases, start=1) if len(p.words) > 1 or p.prefix]
    columns = (", sn._hl, sn._at, sn._orig, sn._more" if snippets else "") + (", b.*" if rows else "")
    sql = _ranking_sql(corpus, " AND ".join(cand_where), bool(window), bool(where), multi, check, columns)
    params: list[Any] = [[p.tsquery() for p in query.phrases], *(list(col) for col in zip(*terms, strict=True)),
                         *window, *cand_args, limit]
    if snippets:
        sql += _snippet_sql(corpus)
        params += [query.text, marks()]
    if rows:
        sql += f" JOIN {corpus.base} b ON b.{corpus.key} = r.id"
    return sql + " ORDER BY r.score, r.id", params


def _ranking_sql(corpus: _Corpus, cand_where: str, windowed: bool, join_base: bool, multi: list[int],
                 check: list[int], columns: str) -> str:
    """The ranked page: phrases and their idf, candidates, per-candidate term frequencies, BM25."""
    name, side = literal(corpus.name), literal(corpus.side)
    join = f" JOIN {corpus.base} {corpus.alias} ON {corpus.alias}.{corpus.key} = s.{corpus.key}" if join_base else ""
    picked = f"s.{corpus.key} AS id, s.doc, s.doc_len{', s.tool_len' if corpus.tools else ''}"
    cand = f"SELECT {picked} FROM {corpus.side} s{join} WHERE {cand_where}"
    if windowed:
        # A windowed search ranks the newest N matches and every older match of the rarest phrases
        # whose matches add up to at most ? rows (from the last stats refresh; none before one).
        cand = f"""rq AS MATERIALIZED (
    SELECT to_tsquery('{CONFIG}', string_agg(r.qtext, ' | ')) AS q FROM (
        SELECT pdf.qtext, sum(pdf.df) OVER (ORDER BY pdf.df, pdf.i) AS running FROM pdf
        WHERE EXISTS (SELECT 1 FROM search_stats WHERE corpus = {name})) r
    WHERE r.running <= ?),
newest AS MATERIALIZED ({cand} ORDER BY s.{corpus.key} DESC LIMIT ?),
cand AS MATERIALIZED (
    SELECT * FROM newest UNION ALL
    {cand} AND s.{corpus.key} < (SELECT min(id) FROM newest) AND s.doc @@ (SELECT q FROM rq))"""
    else:
        cand = f"cand AS MATERIALIZED ({cand})"
    # A lexeme's tf: its positions; on a row with tool_calls, those past the content's (the
    # tool_calls words follow the content's) count TOOL_WEIGHT.
    tf = "cardinality(x.positions)::float8"
    if corpus.tools:
        tf += (f" - CASE WHEN c.tool_len > 0 THEN {1.0 - TOOL_WEIGHT!r} * (SELECT count(*) FROM unnest(x.positions) p"
               " WHERE p > c.doc_len - c.tool_len) ELSE 0 END")
    # FTS5's idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avglen)), written with tf once (it is an expression)
    norm = f"{K1} * ({1 - B} + {B} * p.doc_len / nd.avgdl)"
    bm25 = f"{K1 + 1} * (1.0 - {norm} / (p.tf + {norm}))"
    if not check:  # every phrase is one word: one row per candidate and query lexeme, summed
        scoring = f"""lw AS MATERIALIZED (SELECT pl.lexeme, idf.w FROM pl JOIN idf ON idf.i = pl.i),
scored AS (
    SELECT p.id, -sum(lw.w * {bm25}) AS score
    FROM hit p JOIN lw ON lw.lexeme = p.lexeme CROSS JOIN nd GROUP BY p.id)"""
    else:
        keep = (f" WHERE p.i NOT IN ({','.join(map(str, multi))}) OR (p.id, p.i) IN (SELECT id, i FROM mm)"
                if multi else "")
        scoring = f"""mm AS MATERIALIZED (
    SELECT c.id, c.doc_len, idf.i FROM cand c JOIN idf ON idf.i IN ({','.join(map(str, check))}) AND c.doc @@ idf.q),
ptf AS MATERIALIZED (
    SELECT z.id, z.doc_len, z.i, min(z.f) AS tf FROM (
        SELECT h.id, h.doc_len, pl.i, pl.part, sum(h.tf) AS f FROM hit h JOIN pl ON pl.lexeme = h.lexeme
        GROUP BY h.id, h.doc_len, pl.i, pl.part) z
    GROUP BY z.id, z.doc_len, z.i),
scored AS (
    SELECT p.id, -sum(idf.w * {bm25}) AS score
    FROM (SELECT * FROM ptf p{keep}
          UNION ALL SELECT mm.id, mm.doc_len, mm.i, 1.0 FROM mm WHERE (mm.id, mm.i) NOT IN (SELECT id, i FROM ptf)) p
    JOIN idf ON idf.i = p.i CROSS JOIN nd
    GROUP BY p.id)"""
    # df of a phrase: its rarest word's (FTS5 counts the phrase's rows: at most that); of a prefix
    # word: the sum over its known lexemes. Before a first refresh N is the planner's row estimate
    # (or the candidates) and avgdl the candidates' mean length: no search reads the whole table.
    return f"""WITH ph AS MATERIALIZED (
    SELECT x.i, x.qtext, to_tsquery('{CONFIG}', x.qtext) AS q FROM unnest(?::text[]) WITH ORDINALITY AS x(qtext, i)),
pw AS (
    SELECT w.i, w.part, w.prefix, l.lexeme
    FROM unnest(?::int[], ?::int[], ?::text[], ?::boolean[]) AS w(i, part, word, prefix)
    CROSS JOIN LATERAL unnest(tsvector_to_array(to_tsvector('{CONFIG}', w.word))) AS l(lexeme)),
pl AS MATERIALIZED (
    SELECT pw.i, pw.part, pw.lexeme, COALESCE(t.docs, 1) AS docs, pw.prefix
    FROM pw LEFT JOIN search_terms t ON t.corpus = {name} AND t.lexeme = pw.lexeme
    UNION
    SELECT pw.i, pw.part, e.lexeme, e.docs, true FROM pw CROSS JOIN LATERAL (
        SELECT t.lexeme, t.docs FROM search_terms t WHERE t.corpus = {name} AND t.lexeme >= pw.lexeme
        AND t.lexeme < pw.lexeme || chr(1114111) ORDER BY t.docs DESC LIMIT {PREFIX_EXPANSIONS}) e
    WHERE pw.prefix),
pdf AS MATERIALIZED (
    SELECT ph.i, ph.qtext, ph.q, d.df FROM ph CROSS JOIN LATERAL (
        SELECT min(p.df) AS df FROM (
            SELECT CASE WHEN bool_or(pl.prefix) THEN sum(pl.docs) ELSE min(pl.docs) END AS df
            FROM pl WHERE pl.i = ph.i GROUP BY pl.part) p) d
    WHERE numnode(ph.q) > 0),
{cand},
st AS (SELECT max(docs) AS docs, max(avg_len) AS avg_len FROM search_stats WHERE corpus = {name}),
nd AS MATERIALIZED (
    SELECT GREATEST(COALESCE(st.docs, (SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass({side})),
                             0), (SELECT count(*) FROM cand), 3) AS docs,
           GREATEST(COALESCE(st.avg_len, (SELECT avg(doc_len) FROM cand)), 1) AS avgdl FROM st),
idf AS MATERIALIZED (
    SELECT pdf.i, pdf.q, CASE WHEN v.x > 0 THEN v.x ELSE 1e-6 END AS w
    FROM pdf CROSS JOIN nd
    CROSS JOIN LATERAL (SELECT LEAST(COALESCE(pdf.df, 1), nd.docs) AS df) d
    CROSS JOIN LATERAL (SELECT ln((nd.docs - d.df + 0.5) / (d.df + 0.5)) AS x) v),
qa AS (SELECT array_agg(DISTINCT lexeme) AS lex FROM pl),
hit AS (
    SELECT c.id, c.doc_len, x.lexeme, {tf} AS tf
    FROM cand c CROSS JOIN qa CROSS JOIN LATERAL unnest(ts_filter(setweight(c.doc, 'D', qa.lex), '{{d}}')) x),
{scoring}
SELECT r.id AS _id, r.score AS _score{columns} FROM (SELECT id, score FROM scored ORDER BY score, id LIMIT ?) r"""


def _snippet_sql(corpus: _Corpus) -> str:
    """A LATERAL join adding the page's headlines (``_hl``) and where they sit in the original text.

    Each level is fenced (OFFSET 0): flattened, the planner would evaluate ts_headline once per use.
    """
    source = corpus.source
    blanks = literal(" " * len(_PUNCT))
    return f""" LEFT JOIN LATERAL (
    SELECT g.hl AS _hl, g.at AS _at, substr(g.src, g.at, g.n) AS _orig, g.at + g.n <= length(g.src) OR g.cut AS _more
    FROM (SELECT f.hl, f.src, f.cut, length(f.bare) AS n, strpos(f.tx, f.bare) AS at FROM (
        SELECT e.hl, e.src, e.cut, e.tx, replace(replace(e.hl, '>>>', ''), '<<<', '') AS bare FROM (
            SELECT regexp_replace(ts_headline('{CONFIG}', b.tx || ' {_TAIL}', to_tsquery('{CONFIG}', ?),
                                              {literal(_HEADLINE)}), ' ?{_TAIL}$', '') AS hl,
                   b.src, b.cut, b.tx
            FROM (SELECT a.src, a.cut, regexp_replace(translate(a.src, {literal(_PUNCT)}, {blanks}), ?, ' ', 'g') AS tx
                  FROM (SELECT left({source}, {INDEX_MAX_CHARS}) AS src, length({source}) > {INDEX_MAX_CHARS} AS cut
                        FROM {corpus.base} {corpus.alias} WHERE {corpus.alias}.{corpus.key} = r.id OFFSET 0) a
                  OFFSET 0) b OFFSET 0) e OFFSET 0) f OFFSET 0) g
) sn ON true"""


def _snippet(headline: str | None, at: int | None, original: str | None, more: bool | None) -> str:
    """The headline's words with the original punctuation back, ``…`` where the text was cut. Pure."""
    if not headline:
        return ""
    bare = headline.replace(">>>", "").replace("<<<", "")
    if not at or original is None or len(original) != len(bare):
        return headline
    out: list[str] = []
    i = k = 0
    while i < len(headline):
        if headline.startswith("<<<", i):  # a word's parts split at its marks: one highlight
            j = i + 3
            while j < len(headline) and headline[j] == " " and is_mark(original[k + j - i - 3]):
                j += 1
            if j > i + 3 and headline.startswith(">>>", j):
                out.append(original[k:k + j - i - 3])
                k += j - i - 3
                i = j + 3
                continue
        if headline.startswith((">>>", "<<<"), i):
            out.append(headline[i:i + 3])
            i += 3
            continue
        out.append(original[k])
        k += 1
        i += 1
    return whole_letters(("…" if at > 1 else "") + "".join(out) + ("…" if more else ""))
