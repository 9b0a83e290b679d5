"""The substring scan for text the full-text tokenizer cannot split (CJK runs, emoji, partial ids)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .backend import on_server
from .packed import unpack


def snippet(text: str, literal: str) -> str:
    """``text`` around the first case-insensitive occurrence of ``literal``, marked ``>>>``/``<<<``. Pure."""
    pos = text.lower().find(literal.lower())
    if pos < 0:
        return text[:240]
    start = max(0, pos - 80)
    end = pos + len(literal)
    return ("…" if start else "") + text[start:pos] + ">>>" + text[pos:end] + "<<<" + text[end:end + 160]


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
