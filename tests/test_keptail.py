"""The exchanges a ``/compress here N`` kept (keptail.py): bounded work per turn, and a record that goes
when no turn could ever show it (a server gone mid-turn: test_pg_outbox)."""
from __future__ import annotations

import random

from conftest import assistant, make_engine, tool_call, user

from hermes_trove import keptail, tokens
from hermes_trove.keptail import HEADER, MAX_CHARS, kept_tail_context

BACKENDS = ("sqlite", "postgresql")


def exchanges(n: int, tag: str = "here") -> list[dict]:
    return [m for i in range(n) for m in (user(f"{tag} turn {i}: the lantern code is {1000 + i}"),
                                         assistant(f"noted lantern code {1000 + i} " + "detail " * (i % 7) * 40))]


def compacted_here(runtime, chat: list[dict], keep: int, engine=None) -> list[dict]:
    """``chat`` stored, then ``/compress here``: the prefix passed, the newest ``keep`` messages kept."""
    engine = engine or make_engine(runtime)
    engine.ingest(chat)
    out = engine.compress(chat[:-keep], current_tokens=2000, force=True)
    assert engine.state.last_status == "compacted", engine.state.last_reason
    assert runtime.compactions.kept_tail("s1") is not None
    return out


def oldest_first(rows, limit: int) -> str:
    """The rule ``fitted`` keeps, written the plain way: the oldest rows go until the rest fits."""
    for start in range(len(rows)):
        text = HEADER + "\n" + keptail.serialize_messages(rows[start:], keptail.PER_ROW_CHARS)
        if len(text) <= limit and tokens.count(text) <= keptail.MAX_TOKENS:
            return text
    return ""


def test_a_long_kept_tail_is_fitted_with_a_few_renders_and_the_same_text(runtime, monkeypatch):
    # a /compress here of many tool-heavy exchanges: one render per row made each turn's hook cost seconds
    chat = exchanges(260)
    compacted_here(runtime, chat, 500)
    first, last = runtime.compactions.kept_tail("s1")
    rows = [r for r in runtime.store.page("s1", first - 1, 10 ** 6) if r.store_id <= last]
    assert len(rows) == 500
    renders = []
    real = keptail.serialize_messages
    monkeypatch.setattr(keptail, "serialize_messages", lambda rs, cap: renders.append(len(rs)) or real(rs, cap))
    rng = random.Random(7)
    for limit in [MAX_CHARS, 9000, 400, 60, *(rng.randrange(100, 30000) for _ in range(6))]:
        renders.clear()
        got = keptail.fitted(rows, limit)
        assert len(renders) <= 12 and sum(renders) <= 400, (limit, renders)
        monkeypatch.setattr(keptail, "serialize_messages", real)
        assert got == oldest_first(rows, limit), limit
        monkeypatch.setattr(keptail, "serialize_messages", lambda rs, cap: renders.append(len(rs)) or real(rs, cap))


def test_each_turn_reads_only_the_kept_rows_not_the_chat_that_follows(runtime):
    chat, engine = exchanges(8), make_engine(runtime)
    out = compacted_here(runtime, chat, 4, engine)
    engine.ingest(chat + exchanges(150, "later"))  # the chat goes on (no turn carried the block)
    fetched: list[int] = []
    for name in ("page", "backlog"):
        real = getattr(runtime.store, name)
        setattr(runtime.store, name, lambda *a, _real=real, **k: fetched.append(len(rows := _real(*a, **k))) or rows)
    text = kept_tail_context(runtime, "s1", [dict(out[0]), user("what did we say?")], None)
    assert all(m["content"] in text for m in chat[-4:]) and "later turn" not in text
    assert sum(fetched) == 4, fetched


def test_a_kept_row_no_room_could_hold_drops_the_record(runtime):
    # the newest kept message alone is longer than any block (sixty tool calls): no turn will ever show it,
    # so the record goes instead of being read again on every turn until the next compaction
    calls = [tool_call(f"c{i}", "terminal", '{"cmd": "' + "x" * 700 + '"}') for i in range(60)]
    chat = exchanges(6) + [user("run them all"), assistant("running", calls)]
    out = compacted_here(runtime, chat, 2)
    assert kept_tail_context(runtime, "s1", [dict(out[0]), user("next")], None) == ""
    assert runtime.compactions.kept_tail("s1") is None


def test_a_room_too_small_this_turn_keeps_the_record_for_a_later_one(runtime):
    chat = exchanges(8)
    out = compacted_here(runtime, chat, 4)
    assert kept_tail_context(runtime, "s1", [dict(out[0]), user("next")], 50) == ""
    assert runtime.compactions.kept_tail("s1") is not None
    assert chat[-1]["content"] in kept_tail_context(runtime, "s1", [dict(out[0]), user("next")], None)


def test_a_kept_message_the_user_types_again_is_no_sign_the_list_shows_them(runtime):
    # "continue" again after /compress here: one kept message's twin in the list dropped the record, so
    # the gateway chat never saw the exchanges it kept; a list that shows most of them (the CLI) still drops it
    chat = exchanges(6) + [user("continue"), assistant("step 7 done: the kiln is at 900 C"),
                           user("continue"), assistant("step 8 done: the glaze is celadon")]
    out = compacted_here(runtime, chat, 4)
    turn = [dict(out[0]), assistant("working on it"), user("continue")]
    text = kept_tail_context(runtime, "s1", turn, None)
    assert "the glaze is celadon" in text and "the kiln is at 900 C" in text
    assert kept_tail_context(runtime, "s1", out + chat[-4:] + [user("continue")], None) == ""
    assert runtime.compactions.kept_tail("s1") is None


def test_a_kept_tail_in_chinese_stays_within_the_token_bound_too(runtime):
    # the 24,000-character bound is about 6,000 tokens of English; the same characters of Chinese were
    # about 16,000 tokens (with the host's spill cap off, nothing else bounds the block)
    chat = exchanges(6) + [m for i in range(4) for m in (user(f"第{i}步" + "窑炉温度与釉色记录" * 300),
                                                         assistant(f"记下了{i}" + "青瓷釉面开片" * 400))]
    out = compacted_here(runtime, chat, 8)
    text = kept_tail_context(runtime, "s1", [dict(out[0]), user("接着说")], None)
    assert text.startswith(HEADER) and chat[-1]["content"][:40] in text
    assert tokens.count(text) <= keptail.MAX_TOKENS, tokens.count(text)
