"""The deletion of empty session rows: SQL text for ``MessageStore.delete_empty_sessions``.

A candidate has nothing hanging off it, was untouched since the cut-off and is not spared; it goes
only when every row continuing it (``previous_session_id``, transitively) goes too, so a chain
through an empty row stays whole while a loop of empty rows goes together. Each "who continues
this row" is a seek on ``sessions_previous``.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .rows import has_surrogate


def empty(alias: str) -> str:
    """SQL: the session row ``alias`` has nothing hanging off it (messages, own or carried summaries)."""
    return (f"NOT EXISTS (SELECT 1 FROM messages m WHERE m.session_id = {alias}.session_id)"
            f" AND NOT EXISTS (SELECT 1 FROM summary_nodes n WHERE n.session_id = {alias}.session_id)"
            f" AND NOT EXISTS (SELECT 1 FROM carried_nodes c WHERE c.session_id = {alias}.session_id)")


EMPTY_SESSION = empty("s")


def holdable(session_ids: Sequence[str]) -> list[str]:
    """The ids a store can hold a row of: an id with a lone surrogate has no UTF-8 form, so no row holds it
    (its session could not be recorded), and a server's driver refuses to send it at all."""
    return [session_id for session_id in session_ids if not has_surrogate(session_id)]


def candidate(alias: str, keep: Sequence[str], only: str, server: bool) -> str:
    """SQL: ``alias`` is a candidate (its arguments: ``candidate_arguments``). SQLite gets the spared ids as one
    JSON list (of their UTF-8 bytes in hex: any id, a NUL too): a gateway may spare thousands
    (``runtime.MAX_BOUND``), named up to three times in the deletion, past the oldest SQLite's cap of 999
    parameters a statement."""
    spared = (f"{alias}.session_id NOT IN ({','.join('?' * len(keep))})" if server
              else f"hex({alias}.session_id) NOT IN (SELECT value FROM json_each(?))")
    spare = f" AND {spared}" if keep else ""
    spare += f" AND {alias}.session_id = ?" if only else ""
    return f"({empty(alias)} AND {alias}.created_at <= ? AND {alias}.updated_at <= ?{spare})"


def candidate_arguments(untouched_since: float, keep: Sequence[str], only: str, server: bool) -> list[object]:
    spared = keep if server or not keep else [json.dumps([k.encode("utf-8").hex().upper() for k in keep])]
    return [untouched_since, untouched_since, *spared, *([only] if only else [])]  # (hex: JSON text stops at a NUL)


def candidates(keep: Sequence[str], only: str, server: bool) -> str:
    """``SELECT s.session_id FROM sessions s WHERE <candidate>`` (arguments: ``candidate_arguments``)."""
    return f"SELECT s.session_id FROM sessions s WHERE {candidate('s', keep, only, server)}"


def deletion(keep: Sequence[str], only: str, server: bool) -> str:
    """One DELETE (arguments: ``deletion_arguments``): the candidates except those a staying row still follows.

    ``needed`` starts at each candidate that a row which is no candidate names as its previous one, and
    walks back through the candidates those name in turn (UNION ends a loop). The candidates are read
    once (MATERIALIZED); each of them costs one seek on ``sessions_previous``. "Is this row a candidate"
    is asked again of the rows met on the way: SQLite answers by seeks (cheaper than the automatic
    indexes a look-up in ``dropped`` builds), a server by a look-up in ``dropped`` (judging emptiness again
    hashes the whole table at each step: at 200,000 sessions, 490 ms of server execution against 220).
    What stays is set apart with NOT EXISTS, an anti-join on both backends: a server cannot make ``NOT IN``
    one (it must allow for a NULL id) and, once ``needed`` outgrows work_mem, reads the whole list for
    every candidate."""
    follower = ("NOT EXISTS (SELECT 1 FROM dropped x WHERE x.id = p.session_id)" if server
                else f"NOT {candidate('p', keep, only, server)}")
    walk = ("JOIN dropped q ON q.id = s.previous_session_id" if server
            else f"JOIN sessions q ON q.session_id = s.previous_session_id WHERE {candidate('q', keep, only, server)}")
    return ("DELETE FROM sessions WHERE session_id IN (WITH RECURSIVE"
            f" dropped(id) AS MATERIALIZED ({candidates(keep, only, server)}),"
            " needed(id) AS (SELECT d.id FROM dropped d JOIN sessions p ON p.previous_session_id = d.id"
            f" WHERE {follower}"
            f" UNION SELECT {'q.id' if server else 'q.session_id'} FROM needed w JOIN sessions s ON s.session_id = w.id"
            f" {walk})"
            " SELECT d.id FROM dropped d WHERE NOT EXISTS (SELECT 1 FROM needed w WHERE w.id = d.id))")


def deletion_arguments(untouched_since: float, keep: Sequence[str], only: str, server: bool) -> list[object]:
    return candidate_arguments(untouched_since, keep, only, server) * (1 if server else 3)


def lock_on_server(conn: Any, untouched_since: float, keep: Sequence[str], only: str) -> None:
    """PostgreSQL, inside the deletion's transaction. A statement sees the rows committed when it began: the
    candidates are locked first (a shipment holds its sessions' rows until its messages commit), so the
    DELETE that follows looks again. The DELETE is planned without JIT for this transaction only: the server
    guesses a recursive list many times its size, prices the statement past jit_above_cost, and compiling
    took longer than running it (server execution, 200,000 sessions: 667 ms with JIT, 220 ms without)."""
    conn.execute("SET LOCAL jit = off")
    conn.execute(f"{candidates(keep, only, True)} ORDER BY s.session_id FOR UPDATE OF s",
                 candidate_arguments(untouched_since, keep, only, True))
