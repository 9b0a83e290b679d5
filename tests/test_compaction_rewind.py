"""A transcript the host rewound (``/undo``, ``/retry``): what the user took back stays stored and
reachable, but no summary the model reads is written from it."""
from __future__ import annotations

import pytest
from conftest import assistant, user
from test_compaction import assert_lossless, engine_on

from hermes_trove import tokens

TAKEN_BACK = "please remember: my door code is KESTREL-1234."


def turns(start: int, stop: int) -> list[dict]:
    return [m for i in range(start, stop) for m in (user(f"q{i} " + "w" * 2000), assistant(f"a{i} " + "v" * 2000))]


def compress_logged(tmp_path, before: list[dict], after: list[dict]) -> tuple[object, list[str]]:
    """Ingest ``before`` (the turns the host showed), then force a compaction of ``after``."""
    log: list[str] = []
    eng = engine_on(tmp_path, log=log, fresh_tail_count=4)
    eng.ingest(before)
    eng.compress(after, current_tokens=tokens.count_messages(after) + 1500, force=True)
    return eng, log


def covered_contents(eng) -> list[str]:
    rt = eng.runtime
    ids = {i for node in rt.dag.frontier("s1") for i in rt.dag.descendant_store_ids(node.node_id)}
    return [r.content for r in rt.store.page("s1", 0, 1000) if r.store_id in ids]


def test_an_undone_turn_stays_stored_and_covered_but_out_of_every_summary(tmp_path):
    before = turns(0, 3) + [user(TAKEN_BACK), assistant("noted: KESTREL-1234")]
    after = turns(0, 3) + turns(3, 12)  # /undo dropped the last turn; the chat went on
    eng, log = compress_logged(tmp_path, before, after)
    assert log and not [p for p in log if "KESTREL" in p]
    assert TAKEN_BACK in covered_contents(eng)  # trove_expand still reaches it
    assert_lossless(eng)


def test_a_retried_answer_replaces_the_old_one_in_the_summary(tmp_path):
    before = turns(0, 3) + [user("what is the capital of France?"), assistant("the old answer: Lyon")]
    after = turns(0, 3) + [user("what is the capital of France?"), assistant("the new answer: Paris")] \
        + turns(3, 12)
    eng, log = compress_logged(tmp_path, before, after)
    summarised = "\n".join(log)
    assert "the new answer: Paris" in summarised and "Lyon" not in summarised
    assert "the old answer: Lyon" in covered_contents(eng)
    assert_lossless(eng)


@pytest.mark.parametrize("place", ["replaced", "before the first shown"])
def test_rows_the_list_replaced_or_left_earlier_are_still_summarised(tmp_path, place):
    """A message the host shows rewritten in its place (a stubbed tool result, a merged user turn)
    and rows older than the list are not taken back: their stored text is summarised."""
    before = [user("q-old " + "x" * 2000), assistant("original answer OLD-7")] + turns(0, 12)
    if place == "replaced":
        after = [before[0], assistant("rewritten answer")] + before[2:]
    else:
        after = before[2:]
    eng, log = compress_logged(tmp_path, before, after)
    assert [p for p in log if "original answer OLD-7" in p]
    assert_lossless(eng)


def test_a_rewritten_message_a_partial_compaction_kept_back_is_still_summarised(tmp_path):
    """A compaction that folds only the oldest turns keeps the rest of the list as the host showed it,
    a message shown rewritten (no stored identity) included: dropping it would leave its stored row
    between two messages the next list shows side by side, read there as taken back and never
    summarised."""
    def turns(start: int, stop: int) -> list[dict]:
        return [m for i in range(start, stop) for m in (user(f"q{i} " + "w " * 900), assistant(f"a{i} " + "v " * 900))]

    log: list[str] = []
    eng = engine_on(tmp_path, log=log, fresh_tail_count=4, leaf_chunk_tokens=1000)
    before = turns(0, 20) + [user("which port?"), assistant("the stored answer: port ORIG-99")] + turns(20, 30)
    eng.ingest(before)
    shown = [*before[:41], assistant("the answer as the host shows it now"), *before[42:]]
    out = eng.compress(shown, current_tokens=tokens.count_messages(shown) + 500)
    assert not [p for p in log if "ORIG-99" in p]  # a partial compaction: that turn is still raw
    assert any(m.get("content") == "the answer as the host shows it now" for m in out)
    later = out + turns(30, 60)
    eng.ingest(later)
    for _ in range(2):
        eng.compress(later, current_tokens=tokens.count_messages(later) + 500, force=True)
    assert "the stored answer: port ORIG-99" in covered_contents(eng)
    assert [p for p in log if "ORIG-99" in p]
    assert_lossless(eng)


def test_messages_the_ignore_patterns_filter_out_still_leave_the_prompt(tmp_path):
    """Only rewritten messages stay among the kept turns: those an ignore pattern keeps out of the
    store leave the prompt as before, so the compaction still brings it under the trigger."""
    pytest.importorskip("regex")
    eng = engine_on(tmp_path, fresh_tail_count=4, ignore_message_patterns=("^noise",))
    msgs = [m for i in range(30) for m in (user(f"q{i} short"), assistant(f"a{i} short"),
                                             user(f"noise {i} " + "n " * 1500))] + [user("last"), assistant("done")]
    eng.ingest(msgs)
    out = eng.compress(msgs, current_tokens=tokens.count_messages(msgs))
    assert tokens.count_messages(msgs) > eng.threshold_tokens > tokens.count_messages(out)
    assert not [m for m in out[:-4] if str(m.get("content")).startswith("noise")]
