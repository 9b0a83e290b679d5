"""``trove_load_session``: one stored session's raw transcript, a page at a time.

Reads in store order through ``store.page`` with an exclusive ``after_store_id`` cursor, no
query involved; the page is cut at a message boundary to fit the tool's response cap.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..toolkit import (
    ROLES,
    ToolContext,
    ToolError,
    bool_arg,
    current_session,
    echo_filters,
    fit_items,
    int_arg,
    message_item,
    str_arg,
    str_list_arg,
    time_window,
)

if TYPE_CHECKING:
    from ..store import MessageRow


def trove_load_session(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    session_id = (str_arg(args, "session_id", required=True, allow_empty=False) or "").strip()
    extra: dict[str, Any] = {}
    after = int_arg(args, "after_store_id", 0, minimum=0) or 0
    limit = int_arg(args, "limit", 100, minimum=1, cap=200, clamped=extra) or 100
    max_chars = int_arg(args, "max_content_chars", 4000, minimum=1, cap=20000, clamped=extra) or 4000
    roles = str_list_arg(args, "roles", max_items=len(ROLES))
    for r in roles or []:
        if r not in ROLES:
            raise ToolError(f"roles may contain only {', '.join(ROLES)}; got {r[:40]!r}")
    time_from, time_to = time_window(args)
    exact = bool_arg(args, "include_exact_ref")

    total, rows, more = _read_page(ctx, session_id, after, limit, roles or None, time_from, time_to)
    current = current_session(ctx)
    items = [message_item(r, current, max_chars=max_chars, include_exact_ref=exact) for r in rows]

    def build(n: int) -> dict[str, Any]:
        has_more = more or n < len(items)
        out: dict[str, Any] = {"session_id": session_id, "limit": limit, "max_content_chars": max_chars,
                               "after_store_id": after, "total_messages": total, "returned_messages": n,
                               "messages": items[:n], "has_more": has_more,
                               "next_cursor": (int(items[n - 1]["store_id"]) if n else after) if has_more else None}
        if n < len(items):
            out["truncated"] = True
        out.update(echo_filters(roles=roles, time_from=time_from, time_to=time_to))
        out.update(extra)
        return out

    payload, kept = fit_items(build, len(items), ctx.response_cap)
    if kept == 0 and items:  # one enormous row: return it anyway, shrunk by the generic bound
        payload = build(1)
    return payload


def _read_page(ctx: ToolContext, session_id: str, after: int, limit: int, roles: list[str] | None,
               time_from: float | None, time_to: float | None) -> tuple[int, list[MessageRow], bool]:
    """(messages in the session, up to ``limit`` rows after the cursor, whether more follow).

    A session outside the caller's scope answers exactly like one never stored.
    """
    store = ctx.runtime.store
    if not store.visible_session(session_id, ctx.visible):  # unknown, or another scope's: the same refusal
        raise ToolError(f"no stored session {session_id[:120]!r}; trove_grep with session_scope='all' "
                        "shows the session_id of each hit")
    total = store.count(session_id)
    rows = store.page(session_id, after, limit + 1, roles=roles, time_from=time_from, time_to=time_to)
    return total, rows[:limit], len(rows) > limit
