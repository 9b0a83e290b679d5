"""Raw-message search on a PostgreSQL store: BM25 in SQL (``pgtext``), or SQLite's rule for common words.

A query whose every phrase has more than ``ftsbound.RARE_BUDGET`` matches in the searched range
takes, without BM25 (it tells common words apart little and reads every candidate's document), the
newest rows holding every phrase, then the newest others: the rows ``ftsbound.window`` and
``ftsbound.newest`` give on SQLite. A time-filtered search keeps BM25.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import ftsbound, pgtext
from .backend import UNBOUNDED
from .pgwords import CONFIG, parse_match
from .rows import MessageRow, message_row_from

Hit = tuple[MessageRow, float, str]
TSQUERY = f"to_tsquery('{CONFIG}', ?)"  # a ``parse_match`` text, bound at each call


def search(conn: Any, match: str, where: Sequence[str], args: Sequence[Any], store_ids: Sequence[int] | None,
           limit: int, max_candidates: int | None, snippets: bool, common: int | None = None,
           sessions: Sequence[str] | None = None) -> list[Hit]:
    """``store.search`` on a PostgreSQL store: ``(row, rank, snippet)``, best first.

    ``common`` (with ``max_candidates``) asks for the common-word window (``newest``); else, or when
    a phrase is not common there, BM25 ranks the newest ``max_candidates`` matches and the rare
    phrases' older ones (``pgtext.search_messages``). One statement: without snippets the BM25
    statement rides in the common-word one and runs only when the rule does not apply; with them a
    common-word page asks for its snippets in a second."""
    if common is not None and max_candidates is not None and store_ids is None:
        folded = None if snippets else pgtext.message_statement(match, where, args, limit, max_candidates)
        page = newest(conn, match, where, args, limit, min(int(common), int(max_candidates)), sessions, folded)
        if page is not None:
            found = {int(h[0]): h[2] for h in pgtext.search_messages(
                conn, match, store_ids=[int(row["store_id"]) for row, _ in page], limit=len(page))} \
                if snippets and page else {}
            return [(message_row_from(row), rank, str(found.get(int(row["store_id"])) or "")) for row, rank in page]
    hits = pgtext.search_messages(conn, match, where=where, args=args, limit=limit, max_candidates=max_candidates,
                                  snippets=snippets, rows=True,
                                  store_ids=None if store_ids is None else [int(i) for i in store_ids][:500])
    return [(message_row_from(dict(h[0])), float(h[1]), str(h[2] or "")) for h in hits]


def newest(conn: Any, expression: str, where: Sequence[str], args: Sequence[Any], limit: int, window: int,
           sessions: Sequence[str] | None = None,
           otherwise: tuple[str, list[Any]] | None = None) -> list[tuple[dict[str, Any], float]] | None:
    """The common-word page: ``(columns, rank)`` of the newest ``limit`` rows holding every phrase,
    then the newest others, among the newest ``window`` matches passing ``where`` (on ``m``); None
    when the rule does not apply (an expression that is no OR of phrases, a phrase with 1 to
    ``ftsbound.RARE_BUDGET`` matches in the range, fewer than ``window`` matches): BM25 ranks then.
    ``otherwise`` (``pgtext.message_statement``) is that BM25 statement: it then runs in the same
    statement, only when the rule does not apply, and its rows come back in place of None.

    One statement: the range, the phrase counts (each stopping one past the budget, rarest first), the
    window's low end (read only when every phrase is common), then the page's two reads. Never prepared
    (``prepare=False``): each call is planned with its tsqueries' values, so each read follows its words'
    statistics (a walk down the newest rows for a frequent word, the index for a rare one)."""
    parts = ftsbound.phrases(expression)
    query = parse_match(expression)
    counted = [q for q in (parse_match(p) for p in parts) if q is not None]  # an empty phrase matches nothing
    if not parts or query is None or not counted or limit <= 0 or window <= 0:
        return None
    budget = int(ftsbound.RARE_BUDGET)  # read per call: tests lower it
    within = "" if sessions is None else " AND s.store_id BETWEEN rng.lo AND rng.hi"  # the whole store: no bound
    words = [" ".join(w for ph in q.phrases for w in ph.words) for q in counted]
    counts = " ".join(f"WHEN {i} THEN (SELECT count(*) FROM (SELECT FROM message_search s WHERE s.doc @@"
                      f" {TSQUERY}{within} LIMIT {budget + 1}) z)" for i in range(1, len(counted) + 1))
    every = parse_match(" AND ".join(f"({p})" for p in parts)) if len(parts) > 1 else None
    filters = "".join(f" AND ({w})" for w in where)
    join = " JOIN messages m ON m.store_id = s.store_id" if where else ""
    if sessions is None:
        rng, rng_args = f"SELECT 0::bigint AS lo, {UNBOUNDED}::bigint AS hi", []
    else:  # a seek at each end of each session (messages_session), never a read of its rows
        rng = ("SELECT min(x.lo) AS lo, max(x.hi) AS hi FROM unnest(?::text[]) AS u(sid) CROSS JOIN LATERAL ("
               "SELECT (SELECT min(store_id) FROM messages WHERE session_id = u.sid) AS lo,"
               " (SELECT max(store_id) FROM messages WHERE session_id = u.sid) AS hi) x")
        rng_args = [[str(s) for s in sessions]]

    def read(low: str) -> str:  # the newest matches of a tsquery (a parameter) from ``low`` up that the caller may read
        # no id bound over the whole store: the planner would read every id of the index to AND it with the matches
        bound = f" AND s.store_id BETWEEN {low} AND rng.hi" if sessions is not None else \
            f" AND s.store_id >= {low}" if low != "rng.lo" else ""
        return (f"SELECT s.store_id AS id FROM message_search s{join} WHERE s.doc @@ {TSQUERY}{bound}{filters}"
                " ORDER BY s.store_id DESC")

    reads = [(rank, text) for rank, text in ((ftsbound.ALL_RANK, every.text if every else ""),
                                             (ftsbound.ANY_RANK, query.text)) if text]
    picks = [f"SELECT p.id, {rank!r}::float8 AS score FROM gate, rng, LATERAL ({read('gate.low')} LIMIT ?) p"
             for rank, _ in reads]
    # the rows holding every phrase rank first; a row in both reads is taken once, with the better rank
    sql = f"""WITH rng AS MATERIALIZED ({rng}),
win AS MATERIALIZED (SELECT w.id FROM rng, LATERAL ({read('rng.lo')} LIMIT 1 OFFSET ?) w),
gate AS MATERIALIZED (
    SELECT g.low FROM (SELECT CASE WHEN EXISTS (
        SELECT 1 FROM (SELECT v.i FROM unnest(?::text[]) WITH ORDINALITY AS v(words, i) ORDER BY (
            SELECT min(COALESCE((SELECT t.docs FROM search_terms t WHERE t.corpus = 'messages' AND t.lexeme = l.x), 0))
            FROM unnest(tsvector_to_array(to_tsvector('{CONFIG}', v.words))) AS l(x))) p
        CROSS JOIN rng CROSS JOIN LATERAL (SELECT CASE p.i {counts} END AS n OFFSET 0) c
        WHERE c.n BETWEEN 1 AND ?) THEN NULL ELSE (SELECT win.id FROM win) END AS low OFFSET 0) g
    WHERE g.low IS NOT NULL),
picked AS MATERIALIZED ({' UNION ALL '.join(picks)}),
page AS (SELECT id, min(score) AS score FROM picked GROUP BY id ORDER BY min(score), id DESC LIMIT ?)"""
    params = [*rng_args, query.text, *args, int(window) - 1, words, *[q.text for q in counted], budget,
              *[v for _, text in reads for v in (text, *args, int(limit))], int(limit)]
    mine = "SELECT page.id AS _id, page.score AS _score, b.*, -page.id AS _tie FROM page JOIN messages b ON" \
           " b.store_id = page.id"
    if otherwise is None:
        rows = conn.execute(f"{sql}\n{mine} ORDER BY _score, _tie", params, prepare=False).fetchall()
        if not rows:
            return None  # the window is not full, or a phrase is rare in the range
    else:  # the server evaluates the branch whose one-time filter holds, and only it
        rows = conn.execute(
            f"{sql},\nbm AS MATERIALIZED ({otherwise[0]})\n{mine} WHERE EXISTS (SELECT 1 FROM gate)"
            "\nUNION ALL SELECT bm.*, bm._id AS _tie FROM bm WHERE NOT EXISTS (SELECT 1 FROM gate)"
            "\nORDER BY _score, _tie", [*params, *otherwise[1]], prepare=False).fetchall()
    return [({k: r[k] for k in r.keys() if not k.startswith("_")}, float(r[1])) for r in rows]
