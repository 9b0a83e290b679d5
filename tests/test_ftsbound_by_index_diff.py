"""``store.search`` with the full-text-only window gives the rows the walk over the rows gives: random
stores of many chats (odd session ids among them: a NUL, an empty id, non-ASCII, ids that sort as
numbers would not), owner scopes the caller may or may not read, and stores of about
``OWNED_SESSIONS`` sessions, so the check session by session both sees every session and runs out."""
from __future__ import annotations

import random

import pytest
from conftest import make_config, user

from hermes_trove import ftsbound
from hermes_trove.runtime import build_runtime
from hermes_trove.scope import Visibility
from hermes_trove.store import SessionKey

WORDS = ["coffee", "note", "trip", "cake", "zanzibar", "river", "lamp"]
ODD = ["a\x00b", "a", "\x00", "é-chat", "10", "9", "Z", "z\x00"]


def results(runtime, match: str, session: str, visible: Visibility, n: int, common: int | None, limit: int):
    hits = runtime.store.search(match, [session], limit=limit, snippets=False, max_candidates=n,
                                common_candidates=common, visible=visible)
    return [(row.store_id, row.session_id, round(rank, 9)) for row, rank, _ in hits]


@pytest.mark.parametrize("seed", range(16))
def test_search_with_the_index_only_window_gives_the_walks_rows(tmp_path, backend, monkeypatch, seed):
    if backend != "sqlite":
        pytest.skip("FTS5's window")
    rng = random.Random(seed)
    monkeypatch.setattr(ftsbound, "RARE_BUDGET", rng.choice([2, 5, 40]))
    monkeypatch.setattr(ftsbound, "OWNED_STEP", rng.choice([1, 2, 64]))
    monkeypatch.setattr(ftsbound, "CHAT_CHECK_IDS", rng.choice([0, 0, 10**9]))
    monkeypatch.setattr(ftsbound, "OWNED_SESSIONS", rng.choice([3, 31, 32, 33]))
    runtime = build_runtime(make_config(tmp_path))
    chats = rng.sample(ODD, rng.randint(2, len(ODD)))
    scopes = {chat: rng.choice(["local", "tg:1", "tg:2"]) for chat in chats}
    fillers = [f"f{i:02d}" for i in range(rng.choice([0, 24, 26, 30]))]  # one-row sessions
    for _ in range(rng.randint(4, 14)):
        chat = rng.choice(chats + fillers[:1])
        runtime.store.append(SessionKey(chat, scope=scopes.get(chat, "local")),
                             [user(" ".join(rng.choices(WORDS, k=rng.randint(1, 3))))
                              for _ in range(rng.choice([1, 2, 30, 90]))])
        if fillers and rng.random() < 0.5:
            runtime.store.append(SessionKey(fillers.pop(), scope="local"), [user(rng.choice(WORDS))])
    for name in fillers:  # the rest after every chat's rows
        runtime.store.append(SessionKey(name, scope="local"), [user(rng.choice(WORDS))])
    real = ftsbound._by_index
    compared = 0
    for _ in range(40):
        chat = rng.choice(chats)
        visible = rng.choice([Visibility(), Visibility("conversation", scopes[chat]),
                              Visibility("conversation", "tg:9"), Visibility("session", "", chat),
                              Visibility("session", "", rng.choice(chats))])
        query = " OR ".join(f'"{w}"' for w in rng.sample(WORDS, rng.randint(1, 3)))
        args = (query, chat, visible, rng.choice([1, 3, 10, 40, 120]), rng.choice([None, 1, 5, 30]),
                rng.choice([1, 5, 50]))
        monkeypatch.setattr(ftsbound, "_by_index", real)
        fast = results(runtime, *args)
        monkeypatch.setattr(ftsbound, "_by_index", lambda *a, **k: (False, None))  # the walk alone
        walked = results(runtime, *args)
        assert fast == walked, args
        compared += bool(walked)
    assert compared >= 1
