"""A search's candidate bounds must be at least 1 on both stores: a window of no rows has no one meaning
(SQLite read the newest match's window, a server none), so the store refuses it before reading."""
from __future__ import annotations

import pytest
from conftest import user

from hermes_trove.fulltext import build_match
from hermes_trove.store import SessionKey

BACKENDS = ("sqlite", "postgresql")


@pytest.mark.parametrize("bound", [0, -1, -5000])
def test_a_candidate_bound_under_one_is_refused_alike_on_both_stores(runtime, bound):
    for text in ("coffee budget", "coffee plan", "coffee trip"):
        runtime.store.append(SessionKey("s1"), [user(text)])
    expression = build_match("coffee").expression
    calls = [dict(max_candidates=bound), dict(max_candidates=bound, session_ids=["s1"]),
             dict(max_candidates=10, common_candidates=bound), dict(max_candidates=bound, literal="coffee")]
    for kw in calls:
        with pytest.raises(ValueError, match="candidates must be at least 1"):
            runtime.store.search("" if "literal" in kw else expression, limit=5, **kw)
    # a bound of 1 is taken: the newest match (with, where the word's statistics call it rare, the older ones)
    assert "coffee trip" in {row.content for row, _, _ in runtime.store.search(expression, limit=5, max_candidates=1)}
