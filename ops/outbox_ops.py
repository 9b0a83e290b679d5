"""``doctor outbox``: the rows a PostgreSQL store's outbox set aside (kept whole), exported, and retried."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..backend import storage_error
from ..toolkit import iso

if TYPE_CHECKING:
    from ..runtime import Runtime

NO_OUTBOX = "the store is a SQLite file: no outbox ships to a server here"


def fix_text(outbox: str) -> str:
    """What an operator does about set-aside rows (doctor's advice, status's ``fix``)."""
    return (f"they are kept whole in {outbox}: `hermes trove doctor outbox --json` exports them; repair what the"
            " reason names (the row's values in that file, or the server's column or constraint), then run"
            " `hermes trove doctor outbox retry`")


def described(summary: dict[str, Any]) -> str:
    """One line: how many rows, since when, the commonest reason and the sessions."""
    reasons = "; ".join(f"{n} x {r}" for r, n in summary["reasons"].items())
    more = f" and {summary['more_sessions']} more" if summary["more_sessions"] else ""
    return (f"{summary['rows']} outbox row(s) the server refused for their own values are set aside (the rows"
            f" after them shipped), the oldest since {iso(summary['oldest_at'])}; sessions"
            f" {', '.join(summary['sessions'])}{more}; reasons: {reasons}")


def report(runtime: Runtime) -> dict[str, Any]:
    """Read-only: the set-aside rows, each whole (``--json`` prints all of them: an export)."""
    shipper = getattr(runtime.store, "shipper", None)
    if shipper is None:
        return {"status": "ok", "set_aside": 0, "detail": NO_OUTBOX, "read_only": True}
    outbox = shipper.outbox
    summary = outbox.aside_summary()
    if not summary["rows"]:
        return {"status": "ok", "set_aside": 0, "outbox": outbox.path, "read_only": True,
                "detail": "no outbox row is set aside: every row written here ships or waits in order"}
    return {"status": "ok", "set_aside": summary["rows"], "outbox": outbox.path, "read_only": True,
            "detail": described(summary), "fix": fix_text(outbox.path), "summary": summary,
            "rows": outbox.export_aside()}


def retry(runtime: Runtime) -> dict[str, Any]:
    """Ship the set-aside rows again; exit 1 while any still cannot ship or the server is away."""
    shipper = getattr(runtime.store, "shipper", None)
    if shipper is None:
        return {"status": "refused", "reason": NO_OUTBOX}
    try:
        done = shipper.retry_aside()
    except Exception as exc:
        if not storage_error(exc) and not isinstance(exc, ConnectionError):
            raise
        return {"status": "refused", "reason": f"the server did not take them ({exc}); they stay set aside in"
                                               f" {shipper.outbox.path}"}
    if done["still_aside"]:
        summary = shipper.outbox.aside_summary()
        return {"status": "error", **done, "error": described(summary), "fix": fix_text(shipper.outbox.path)}
    return {"status": "ok", **done}
