"""AssertionStore: every SQL statement of the opt-in state tables (migration set ``state``).

Assertions and their relations, the extraction cursor and batch log, and the retrieval
controller's episodes and events. A batch lands in one transaction together with the cursor
move, and only if the cursor is still where the batch started (``commit_batch``), so two
processes never store one message's assertions twice. It decides nothing: relation planning
is ``contract.relation``.
"""
from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from ..backend import UNBOUNDED, on_server, settled_heads
from ..db import Database, optional_schema, schema_objects
from ..rows import MessageRow, message_row
from ..scope import EVERYTHING, Visibility
from .contract import Candidate, Known, relation, terms

FEATURE = "state"
CURSOR = "extraction"
EXTRACT_ROLES = ("user", "assistant")
RELATION_SCAN = 50  # live assertions of one subject+predicate+scope a new one is compared with
NO_LIMIT = UNBOUNDED  # a LIMIT that bounds nothing (both backends; SQLite's -1 is not PostgreSQL's)
_KNOWN = "assertion_id, kind, value_norm, polarity, speaker_role, observed_at, valid_from"
_COLUMNS = tuple(f.name for f in fields(Candidate))  # an assertions row: the candidate, then who and when
_INSERT = (f"INSERT INTO assertions({', '.join(_COLUMNS)}, extractor, created_at)"
           f" VALUES ({', '.join('?' * (len(_COLUMNS) + 2))}) ON CONFLICT(assertion_id) DO NOTHING")


@dataclass(frozen=True)
class AssertionRow(Candidate):
    """A stored assertion: the verified candidate plus who extracted it, when, and whether it is live."""

    extractor: str
    created_at: float
    active: bool = True


@dataclass(frozen=True)
class BatchLog:
    first_store_id: int
    last_store_id: int
    messages: int
    model_calls: int
    input_chars: int
    proposed: int
    stored: int
    unverified: int
    invalid: int
    outcome: str
    error: str | None = None


def _row(r: sqlite3.Row) -> AssertionRow:
    values: dict[str, Any] = {k: r[k] for k in r.keys() if k in AssertionRow.__dataclass_fields__}
    values["active"] = bool(values["active"])
    return AssertionRow(**values)


def _known(r: sqlite3.Row) -> Known:
    return Known(str(r[0]), str(r[1]), str(r[2]), str(r[3]), str(r[4]), float(r[5]),
                 None if r[6] is None else float(r[6]))


class AssertionStore:
    def __init__(self, db: Database):
        self.db = db

    # -- the tables --------------------------------------------------------------------
    def present(self) -> bool:
        return self.db.has_optional(FEATURE)

    def ensure(self) -> list[str]:
        return self.db.ensure_optional(FEATURE)

    def drop(self) -> list[str]:
        return self.db.drop_optional(FEATURE)

    def missing(self) -> list[str]:
        """The set's tables, indexes and triggers the store lacks (the doctor's check). Both
        backends name them alike, so the SQLite set built in memory says what to expect."""
        want = optional_schema(FEATURE)
        conn = self.db.read()
        if not on_server(conn):
            have = schema_objects(conn)
            return sorted({*want.tables} - {*have.tables} | {*want.indexes} - {*have.indexes}
                          | {*want.triggers} - {*have.triggers})
        found: dict[str, set[str]] = {"table": set(), "index": set(), "trigger": set()}
        for kind, name in conn.execute(
                "SELECT 'table', table_name FROM information_schema.tables WHERE table_schema = current_schema()"
                " UNION ALL SELECT 'index', indexname FROM pg_indexes WHERE schemaname = current_schema()"
                " UNION ALL SELECT 'trigger', t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = current_schema() AND NOT t.tgisinternal"):
            found[str(kind)].add(str(name))
        return sorted({*want.tables} - found["table"] | {*want.indexes} - found["index"]
                      | {*want.triggers} - found["trigger"])

    # -- extraction cursor and input ---------------------------------------------------
    def cursor(self) -> int:
        r = self.db.read().execute("SELECT cursor FROM assertion_extraction WHERE name=?", (CURSOR,)).fetchone()
        return int(r[0]) if r else 0

    def pending(self, after: int, limit: int, upto: int = NO_LIMIT) -> list[MessageRow]:
        """The next messages extraction reads: user and assistant text past ``after``, up to ``upto``."""
        rows = self.db.read().execute(
            "SELECT * FROM messages WHERE store_id > ? AND store_id <= ? AND role IN (?, ?) AND content_is_json = 0"
            " AND length(content) > 0 ORDER BY store_id LIMIT ?", (int(after), int(upto), *EXTRACT_ROLES, int(limit)))
        return [message_row(r) for r in rows]

    def settled_head(self) -> int | None:
        """The store_id extraction reads up to, so its cursor never passes a message that commits
        later (``backend.settled_heads``); None when a writer did not finish within the wait."""
        heads = settled_heads(self.db, ("messages", "store_id"))
        return None if heads is None else heads[0]

    def backlog(self, after: int | None = None, cap: int | None = None) -> int:
        """Messages extraction has not read yet (counted up to ``cap + 1`` when ``cap`` is given)."""
        after = self.cursor() if after is None else after
        limit = NO_LIMIT if cap is None else int(cap) + 1
        return int(self.db.read().execute(
            "SELECT COUNT(*) FROM (SELECT 1 FROM messages WHERE store_id > ? AND role IN (?, ?)"
            " AND content_is_json = 0 AND length(content) > 0 LIMIT ?) AS pending",
            (int(after), *EXTRACT_ROLES, limit)).fetchone()[0])

    def commit_batch(self, expected: int, new_cursor: int, candidates: Sequence[Candidate], log: BatchLog,
                     extractor: str, now: float | None = None) -> int | None:
        """Store ``candidates`` and their relations, move the cursor and log the batch, in one
        transaction; None (nothing written) when another process moved the cursor first.

        The cursor moves first, by a compare-and-set (one conditional statement: a cursor row
        that is not at ``expected`` is left alone), so a racing process that loses writes nothing;
        no cursor row is the cursor at 0."""
        now = time.time() if now is None else now
        with self.db.transaction() as conn:
            if int(expected) == 0:
                moved = conn.execute(
                    "INSERT INTO assertion_extraction(name, cursor, updated_at) VALUES (?,?,?)"
                    " ON CONFLICT(name) DO UPDATE SET cursor=excluded.cursor, updated_at=excluded.updated_at"
                    " WHERE assertion_extraction.cursor = 0", (CURSOR, int(new_cursor), now))
            else:
                moved = conn.execute("UPDATE assertion_extraction SET cursor=?, updated_at=? WHERE name=? AND cursor=?",
                                     (int(new_cursor), now, CURSOR, int(expected)))
            if moved.rowcount != 1:
                return None
            stored = self._insert(conn, candidates, extractor, now)
            self._log(conn, log, stored, now)
        return stored

    def log_failure(self, log: BatchLog, now: float | None = None) -> None:
        with self.db.transaction() as conn:
            self._log(conn, log, 0, time.time() if now is None else now)

    def add(self, candidates: Sequence[Candidate], extractor: str = "test", now: float | None = None) -> int:
        """Store candidates outside a batch (tests, benchmarks); returns rows stored."""
        with self.db.transaction() as conn:
            return self._insert(conn, candidates, extractor, time.time() if now is None else now)

    def _insert(self, conn: sqlite3.Connection, candidates: Sequence[Candidate], extractor: str, now: float) -> int:
        stored = 0
        for c in candidates:
            cur = conn.execute(_INSERT, (*(getattr(c, name) for name in _COLUMNS), extractor, now))
            if cur.rowcount != 1:
                continue  # already stored (re-extraction is idempotent)
            stored += 1
            conn.executemany("INSERT INTO assertion_terms(term, observed_at, assertion_id) VALUES (?,?,?)"
                             " ON CONFLICT(term, observed_at, assertion_id) DO NOTHING",
                             [(t, c.observed_at, c.assertion_id)
                              for t in terms(c.subject_key, c.predicate_key, c.value_norm)])
            new = Known(c.assertion_id, c.kind, c.value_norm, c.polarity, c.speaker_role, c.observed_at, c.valid_from)
            restated = False
            # Only assertions nothing superseded yet, newest first and bounded: the cost of an
            # insert follows the live values of one predicate, not its history.
            for r in conn.execute(f"SELECT {_KNOWN} FROM assertions a WHERE subject_key=? AND predicate_key=?"
                                  " AND scope_key=? AND assertion_id <> ? AND NOT EXISTS (SELECT 1 FROM"
                                  " assertion_relations x WHERE x.to_id = a.assertion_id AND x.relation = 'supersedes')"
                                  " ORDER BY observed_at DESC LIMIT ?",
                                  (c.subject_key, c.predicate_key, c.scope_key, c.assertion_id,
                                   RELATION_SCAN)).fetchall():
                rel = relation(new, _known(r))
                if rel is None or (rel[2] == "restates" and restated):
                    continue
                restated = restated or rel[2] == "restates"
                conn.execute("INSERT INTO assertion_relations(from_id, to_id, relation, at) VALUES (?,?,?,?)"
                             " ON CONFLICT(from_id, to_id, relation) DO NOTHING", rel)
        return stored

    @staticmethod
    def _log(conn: sqlite3.Connection, log: BatchLog, stored: int, now: float) -> None:
        conn.execute("INSERT INTO assertion_batches(first_store_id, last_store_id, messages, model_calls, input_chars,"
                     " proposed, stored, unverified, invalid, outcome, error, created_at)"
                     " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                     (log.first_store_id, log.last_store_id, log.messages, log.model_calls, log.input_chars,
                      log.proposed, stored, log.unverified, log.invalid, log.outcome, log.error, now))

    def reset(self) -> int:
        """Forget every assertion and the cursor (a rebuild starts from the first message)."""
        with self.db.transaction() as conn:
            n = int(conn.execute("SELECT COUNT(*) FROM assertions").fetchone()[0])
            for table in ("assertion_relations", "assertion_terms", "assertions", "assertion_extraction"):
                conn.execute(f"DELETE FROM {table}")
        return n

    # -- queries -----------------------------------------------------------------------
    def query(self, subject: str, as_of: float, *, predicate: str | None = None, kinds: Sequence[str] = (),
              scope: str | None = None, role: str | None = None, limit: int = 25,
              visible: Visibility = EVERYTHING) -> tuple[list[AssertionRow], bool]:
        """Assertions known at ``as_of`` from sessions ``visible`` reads: active first, newest first;
        and whether more matched."""
        where = ["a.subject_key = :subject", "a.observed_at <= :t"]
        params: dict[str, Any] = {"subject": subject, "t": as_of, "limit": int(limit) + 1}
        owned, owned_args = visible.named_clause("a.session_id")
        if owned:
            where.append(owned)
            params.update(owned_args)
        for column, name, value in (("predicate_key", "predicate", predicate or None), ("scope_key", "scope", scope),
                                    ("speaker_role", "role", role or None)):  # an empty scope is a scope
            if value is not None:
                where.append(f"a.{column} = :{name}")
                params[name] = value
        if kinds:
            where.append(f"a.kind IN ({', '.join(f':k{i}' for i in range(len(kinds)))})")
            params.update({f"k{i}": k for i, k in enumerate(kinds)})
        sql = (f"SELECT a.*, ((a.valid_from IS NULL OR a.valid_from <= :t) AND (a.valid_to IS NULL OR a.valid_to > :t)"
               " AND NOT EXISTS (SELECT 1 FROM assertion_relations r WHERE r.to_id = a.assertion_id"
               " AND r.relation = 'supersedes' AND r.at <= :t)) AS active"
               f" FROM assertions a WHERE {' AND '.join(where)} ORDER BY active DESC, a.observed_at DESC,"
               " a.assertion_id LIMIT :limit")
        rows = [_row(r) for r in self.db.read().execute(sql, params)]
        return rows[:limit], len(rows) > limit

    def relations(self, ids: Sequence[str], as_of: float, limit: int = 200) -> list[dict[str, Any]]:
        """Relations touching ``ids`` that were in force at ``as_of``."""
        if not ids:
            return []
        marks = ", ".join("?" for _ in ids)
        sql = (f"SELECT from_id, to_id, relation, at FROM assertion_relations WHERE at <= ? AND"
               f" (from_id IN ({marks}) OR to_id IN ({marks})) ORDER BY at, from_id, to_id LIMIT ?")
        return [{"from": r[0], "to": r[1], "relation": r[2], "at": float(r[3])}
                for r in self.db.read().execute(sql, (as_of, *ids, *ids, int(limit)))]

    def get(self, assertion_id: str) -> AssertionRow | None:
        r = self.db.read().execute("SELECT *, 1 AS active FROM assertions WHERE assertion_id=?",
                                   (assertion_id,)).fetchone()
        return None if r is None else _row(r)

    def search_terms(self, words: Sequence[str], limit: int, examine: int,
                     visible: Visibility = EVERYTHING) -> tuple[list[AssertionRow], int]:
        """Up to ``limit`` active assertions indexed under one of ``words``: those holding the most
        words first, then the newest; and the rows examined, never more than ``examine`` plus
        ``examine // 4`` whatever the table holds (the newest postings of each word, then the
        best candidates' rows)."""
        if not words or limit <= 0:
            return [], 0
        conn = self.db.read()
        per_word = max(1, examine // len(words))
        found: dict[str, list[float]] = {}  # assertion_id -> [words held, observed_at]
        examined = 0
        owned, owned_args = visible.clause("a.session_id")  # other scopes never take the caller's postings
        postings = ("SELECT assertion_id, observed_at FROM assertion_terms WHERE term = ?"
                    " ORDER BY observed_at DESC LIMIT ?") if not owned else (
            "SELECT t.assertion_id, t.observed_at FROM assertion_terms t JOIN assertions a"
            f" ON a.assertion_id = t.assertion_id WHERE t.term = ? AND {owned} ORDER BY t.observed_at DESC LIMIT ?")
        # every word's postings in one statement (one round trip on a server), each word's capped alone
        union = " UNION ALL ".join(f"SELECT * FROM ({postings}) AS w{i}" for i in range(len(words)))
        for aid, at in conn.execute(union, [v for word in words for v in (word, *owned_args, per_word)]):
            examined += 1
            hit = found.setdefault(str(aid), [0.0, float(at)])
            hit[0] += 1
        out: list[AssertionRow] = []
        for aid in sorted(found, key=lambda a: (-found[a][0], -found[a][1], a))[:max(limit, examine // 4)]:
            examined += 1
            r = conn.execute("SELECT a.*, NOT EXISTS (SELECT 1 FROM assertion_relations x WHERE x.to_id ="
                             " a.assertion_id AND x.relation = 'supersedes') AS active FROM assertions a"
                             " WHERE a.assertion_id = ?", (aid,)).fetchone()
            if r is not None and r["active"]:
                out.append(_row(r))
                if len(out) >= limit:
                    break
        return out, examined

    # -- status ------------------------------------------------------------------------
    def sizes(self) -> dict[str, int]:
        conn = self.db.read()
        return {t: int(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0])
                for t in ("assertions", "assertion_relations", "assertion_terms", "assertion_batches",
                          "retrieval_episodes", "retrieval_events")}

    def spend(self) -> dict[str, int]:
        r = self.db.read().execute(
            "SELECT COUNT(*), COALESCE(SUM(messages),0), COALESCE(SUM(model_calls),0), COALESCE(SUM(input_chars),0),"
            " COALESCE(SUM(proposed),0), COALESCE(SUM(stored),0), COALESCE(SUM(unverified),0),"
            " COALESCE(SUM(invalid),0) FROM assertion_batches").fetchone()
        return dict(zip(("batches", "messages", "model_calls", "input_chars", "proposed", "stored", "unverified",
                         "invalid"), (int(v) for v in r), strict=True))

    def errors(self, limit: int = 5) -> list[dict[str, Any]]:
        rows = self.db.read().execute(
            "SELECT first_store_id, last_store_id, outcome, error, created_at FROM assertion_batches"
            " WHERE outcome <> 'ok' ORDER BY batch_id DESC LIMIT ?", (int(limit),))
        return [{"store_ids": f"{r[0]}-{r[1]}", "outcome": r[2], "error": r[3], "at": float(r[4])} for r in rows]

    def relation_counts(self) -> dict[str, int]:
        return {str(r[0]): int(r[1]) for r in self.db.read().execute(
            "SELECT relation, COUNT(*) FROM assertion_relations GROUP BY relation")}

    # -- retrieval episodes -------------------------------------------------------------
    def open_episode(self, retrieval_id: str, session_id: str, question: str, identity: dict[str, Any],
                     requirements: list[dict[str, Any]], now: float) -> None:
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO retrieval_episodes(retrieval_id, session_id, state, question, identity,"
                         " requirements, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?)",
                         (retrieval_id, session_id, "open", question, json.dumps(identity),
                          json.dumps(requirements), now, now))
            conn.execute("INSERT INTO retrieval_events(retrieval_id, seq, action, trace, at) VALUES (?,?,?,?,?)",
                         (retrieval_id, 0, "start", json.dumps({"question_chars": len(question)}), now))

    def episode(self, retrieval_id: str, visible: Visibility = EVERYTHING) -> dict[str, Any] | None:
        """One episode; None when unknown or opened by a session outside ``visible`` (they look the same)."""
        owned, owned_args = visible.clause("session_id")  # the caller's own episodes (even unbound, '') always
        r = self.db.read().execute("SELECT * FROM retrieval_episodes WHERE retrieval_id=?"
                                   + (f" AND (session_id = ? OR {owned})" if owned else ""),
                                   (retrieval_id, *([visible.session_id, *owned_args] if owned else []))).fetchone()
        if r is None:
            return None
        out = {k: r[k] for k in r.keys()}
        for name in ("identity", "requirements", "observed"):
            out[name] = json.loads(out[name])
        out["view"] = json.loads(out["view"]) if out["view"] else None
        return out

    def events(self, retrieval_id: str) -> list[dict[str, Any]]:
        return [{"seq": int(r[0]), "action": r[1], "trace": json.loads(r[2]), "at": float(r[3])}
                for r in self.db.read().execute("SELECT seq, action, trace, at FROM retrieval_events"
                                                " WHERE retrieval_id=? ORDER BY seq", (retrieval_id,))]

    def step_episode(self, retrieval_id: str, expected_state: str, *, state: str, rounds: int,
                     observed: list[dict[str, Any]], view: dict[str, Any] | None, action: str,
                     trace: dict[str, Any], now: float) -> bool:
        """Move an episode on, only from ``expected_state`` (a racing step loses); logs the event."""
        with self.db.transaction() as conn:
            cur = conn.execute("UPDATE retrieval_episodes SET state=?, rounds=?, observed=?, view=?, updated_at=?"
                               " WHERE retrieval_id=? AND state=?",
                               (state, rounds, json.dumps(observed), json.dumps(view) if view is not None else None,
                                now, retrieval_id, expected_state))
            if cur.rowcount != 1:
                return False
            seq = int(conn.execute("SELECT COALESCE(MAX(seq), -1) + 1 FROM retrieval_events WHERE retrieval_id=?",
                                   (retrieval_id,)).fetchone()[0])
            conn.execute("INSERT INTO retrieval_events(retrieval_id, seq, action, trace, at) VALUES (?,?,?,?,?)",
                         (retrieval_id, seq, action, json.dumps(trace), now))
        return True

    def live_episodes(self, session_id: str) -> int:
        return int(self.db.read().execute("SELECT COUNT(*) FROM retrieval_episodes WHERE state='open'"
                                          " AND session_id=?", (session_id,)).fetchone()[0])
