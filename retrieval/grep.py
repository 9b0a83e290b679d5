"""``trove_grep``: argument rules, one call into ``retrieval.search``, the bounded response.

The handler only parses (scope rules included), asks ``search.grep`` for one page of
fused results and shapes it, dropping trailing results until the response fits its cap.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..toolkit import (
    ROLES,
    ToolContext,
    ToolError,
    current_session,
    echo_filters,
    enum_arg,
    fit_items,
    int_arg,
    str_arg,
    str_list_arg,
    time_window,
    turn_start,
)
from .search import CONTENT_SCOPES, MODES, SCOPES, SORT_ALIASES, SORTS, GrepPage, GrepRequest, grep


def trove_grep(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    clamped: dict[str, Any] = {}
    req = _request(ctx, args, clamped)
    page = grep(ctx.runtime, req)
    return _response(req, page, dict(clamped, **page.notes), ctx.response_cap)


def _request(ctx: ToolContext, args: Mapping[str, Any], clamped: dict[str, Any]) -> GrepRequest:
    """The validated search; clamped limits are recorded in ``clamped``."""
    query = str_arg(args, "query", required=True) or ""
    limit = int_arg(args, "limit", 10, minimum=1, cap=200, clamped=clamped) or 10
    offset = int_arg(args, "offset", 0, minimum=0, cap=10000) or 0
    sort = enum_arg(args, "sort", SORTS + tuple(SORT_ALIASES), "relevance") or "relevance"
    if sort in SORT_ALIASES:
        clamped["warnings"] = [f"sort={sort!r} is deprecated; it ran as sort={SORT_ALIASES[sort]!r}"]
        sort = SORT_ALIASES[sort]
    mode = enum_arg(args, "mode", MODES, "full_text") or "full_text"
    role = enum_arg(args, "role", ROLES, None)
    source = (str_arg(args, "source") or "").strip() or None
    time_from, time_to = time_window(args)
    scope = enum_arg(args, "session_scope", SCOPES, "current") or "current"
    scope_session = (str_arg(args, "session_id") or "").strip() or None
    content_scope = enum_arg(args, "content_scope", CONTENT_SCOPES, "history") or "history"
    refs = str_list_arg(args, "externalized_refs", max_items=256)
    current = current_session(ctx)
    if scope == "session" and not scope_session:
        raise ToolError("session_scope='session' needs session_id")
    if scope != "session" and scope_session:
        raise ToolError("session_id is used only with session_scope='session'")
    if scope == "current" and not current:
        raise ToolError("no session is bound yet; search stored sessions with session_scope='all'")
    if refs and content_scope == "history":
        raise ToolError("externalized_refs needs content_scope='externalized' or 'both'")
    return GrepRequest(query=query, limit=limit, offset=offset, sort=sort, scope=scope,
                       content_scope=content_scope, current=current, session_id=scope_session, role=role,
                       source=source, time_from=time_from, time_to=time_to,
                       refs=tuple(refs) if refs is not None else None, mode=mode, visible=ctx.visible,
                       turn_start=turn_start(ctx))


def _response(req: GrepRequest, page: GrepPage, extra: dict[str, Any], cap: int) -> dict[str, Any]:

    def build(n: int) -> dict[str, Any]:
        truncated = n < len(page.results)
        more = page.more or truncated
        out: dict[str, Any] = {
            "query": req.query if len(req.query) <= 500 else req.query[:500] + "…",
            "fts_query": page.match.expression[:1000],
            "sort": req.sort, "mode": req.mode, "session_scope": req.scope, "content_scope": req.content_scope,
            "limit": req.limit, "offset": req.offset, "total_results": n, "results": page.results[:n],
            "has_more": more, "next_offset": req.offset + n if more else None, "truncated": truncated,
        }
        if req.session_id:
            out["session_id"] = req.session_id
        out.update(echo_filters(role=req.role, source=req.source, time_from=req.time_from, time_to=req.time_to))
        out.update(extra)
        return out

    return fit_items(build, len(page.results), cap)[0]
