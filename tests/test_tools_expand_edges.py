"""trove_expand and trove_describe at their edges: selector and number tables, content paging
that reads every character exactly once, exact refs that verify, tool-call parts, unicode, an
empty session, and nodes out of reach."""
from __future__ import annotations

import json

import pytest
from conftest import assistant, tool_call, user

from hermes_trove.refs import parse_claim, verify
from hermes_trove.store import SessionKey
from hermes_trove.tools import dispatch

BACKENDS = ("sqlite", "postgresql")  # every test here runs on the file and on a server

KEY = SessionKey("s1", platform="cli")


def call(engine, name, **args):
    out = json.loads(dispatch(engine.tool_context(), name, args))
    assert isinstance(out, dict)
    return out


def put(engine, *msgs, key=KEY):
    return engine.runtime.store.append(key, list(msgs))


@pytest.mark.parametrize("args, message", [
    ({}, "give exactly one of node_id, store_id or externalized_ref"),
    ({"node_id": 1, "store_id": 1}, "(got node_id, store_id)"),
    ({"store_id": 1, "externalized_ref": "x"}, "(got store_id, externalized_ref)"),
    ({"node_id": "", "store_id": None}, "give exactly one"),
    ({"store_id": 0}, "store_id"),
    ({"store_id": -3}, "store_id"),
    ({"store_id": "abc"}, "store_id"),
    ({"store_id": True}, "store_id"),
    ({"store_id": 1.5}, "store_id"),
    ({"store_id": 999999}, "no stored message with store_id 999999"),
    ({"store_id": 1, "part": "body"}, "part must be one of"),
    ({"store_id": 1, "content_offset": -1}, "content_offset"),
    ({"store_id": 1, "max_tokens": 0}, "max_tokens"),
    ({"node_id": 424242}, "not visible in the current session"),
    # part is checked in every mode: a wrong value beside node_id or a payload ref was ignored
    ({"node_id": 1, "part": {"a": "b"}}, "part must be one of"),
    ({"externalized_ref": "x", "part": "body"}, "part must be one of"),
    ({"node_id": 1, "part": "tool_calls"}, "part='tool_calls' reads one message's tool calls: give store_id"),
])
def test_expand_argument_table(engine, args, message):
    put(engine, user("hello there"))
    assert message in call(engine, "trove_expand", **args).get("error", ""), args


@pytest.mark.parametrize("max_tokens, clamped", [(1, None), (16000, None), (16001, 16001), (10**7, 10**7)])
def test_max_tokens_clamp_table(engine, max_tokens, clamped):
    [sid] = put(engine, user("short text"))
    out = call(engine, "trove_expand", store_id=sid, max_tokens=max_tokens)
    assert out.get("max_tokens_clamped_from") == clamped and "short text".startswith(out["content"])
    assert out["content"] == "short text" or max_tokens == 1  # one token is about four characters


@pytest.mark.parametrize("text", [
    "plain ascii " * 500,
    "naïve café Ålesund " * 400,
    "日本語のテキスト" * 700,
    "emoji 🙂🚀 mix " * 600,
    "x" * 30000,
    "line\n" * 4000,
])
def test_paging_a_long_message_reads_every_character_exactly_once(engine, text):
    [sid] = put(engine, user(text))
    pieces, offset, pages = [], 0, 0
    while True:
        out = call(engine, "trove_expand", store_id=sid, max_tokens=300, content_offset=offset)
        pieces.append(out["content"])
        pages += 1
        if not out["has_more"]:
            break
        assert out["expand_args"] == {"store_id": sid, "part": "content", "content_offset": out["next_content_offset"]}
        assert out["next_content_offset"] > offset
        offset = out["next_content_offset"]
    assert "".join(pieces) == text and pages > 1


def test_an_offset_at_the_end_returns_nothing_more(engine):
    [sid] = put(engine, user("abcdef"))
    out = call(engine, "trove_expand", store_id=sid, content_offset=6)
    assert out["content"] == "" and out["has_more"] is False


def test_an_offset_past_the_end_is_refused_or_empty(engine):
    [sid] = put(engine, user("abcdef"))
    out = call(engine, "trove_expand", store_id=sid, content_offset=600)
    assert "error" in out or (out["content"] == "" and out["has_more"] is False)


@pytest.mark.parametrize("offset", [0, 3, 10])
def test_exact_refs_of_a_page_verify_against_the_store(engine, offset):
    text = "The staging deploy key lives in /etc/keys/staging.pem, rotated monthly."
    [sid] = put(engine, user(text))
    out = call(engine, "trove_expand", store_id=sid, content_offset=offset, max_tokens=5, include_exact_ref=True)
    full = out["exact_ref_full"]
    assert full["quote"] == text[offset:offset + len(full["quote"])]
    claim = parse_claim({k: full[k] for k in ("store_id", "span_start", "span_end", "quote", "content_sha256")})
    assert verify(claim, engine.runtime.store.get(sid)).quote == full["quote"]
    assert out["exact_ref"].startswith(f"trove:{sid}:{offset}-")


def test_tool_call_arguments_are_their_own_part(engine):
    args = json.dumps({"cmd": "ls " + "/very/long/path/" * 300})
    [sid] = put(engine, assistant("running", [tool_call("c1", "terminal", args)]))
    content = call(engine, "trove_expand", store_id=sid)
    assert content["part"] == "content" and content["content"] == "running"
    assert content.get("tool_calls_truncated") is True
    assert content["tool_calls_expand_args"] == {"store_id": sid, "part": "tool_calls"}
    calls = call(engine, "trove_expand", store_id=sid, part="tool_calls", max_tokens=16000)
    assert calls["part"] == "tool_calls" and "/very/long/path/" in calls["content"]
    assert json.loads(calls["content"])[0]["function"]["arguments"] == args


def test_short_tool_calls_come_back_parsed(engine):
    [sid] = put(engine, assistant("", [tool_call("c1", "terminal", '{"cmd": "pwd"}')]))
    out = call(engine, "trove_expand", store_id=sid)
    assert out["tool_calls"][0]["function"]["name"] == "terminal"


def test_a_message_without_tool_calls_has_an_empty_tool_calls_part(engine):
    [sid] = put(engine, user("no calls here"))
    out = call(engine, "trove_expand", store_id=sid, part="tool_calls")
    assert out["content"] == "" and out["has_more"] is False


def test_a_row_of_another_session_is_readable_and_says_so(engine):
    [sid] = put(engine, user("from elsewhere"), key=SessionKey("other", platform="cli"))
    out = call(engine, "trove_expand", store_id=sid)
    assert out["session_id"] == "other" and out["from_current_session"] is False


def test_describe_an_empty_session(engine):
    out = call(engine, "trove_describe")
    assert out["session_id"] == "s1" and out["total_nodes"] == 0 and out["depths"] == {}
    assert out["store_message_count"] == 0 and out["frontier_node_ids"] == []


@pytest.mark.parametrize("args, message", [
    ({"node_id": 1, "externalized_ref": "x"}, "not both"),
    ({"node_id": 0}, "node_id"),
    ({"node_id": "one"}, "node_id"),
    ({"node_id": 31337}, "not visible"),
    ({"externalized_ref": "../../etc/passwd"}, "externalized_ref"),
])
def test_describe_argument_table(engine, args, message):
    assert message in call(engine, "trove_describe", **args).get("error", "")


def test_describe_a_leaf_lists_its_messages_without_content(engine):
    ids = put(engine, user("first source"), assistant("second source, longer"))
    node = engine.runtime.dag.add_leaf("s1", "two sources", ids, token_count=3, source_token_count=10,
                                       earliest_at=None, latest_at=None)
    out = call(engine, "trove_describe", node_id=node)
    assert [c["store_id"] for c in out["children"]] == ids
    assert [c["content_chars"] for c in out["children"]] == [12, 21]
    assert out["num_sources"] == 2 and out["children_truncated"] is False and out["source_type"] == "messages"
    assert out["descendant_message_count"] == 2 and out["summary_preview"] == "two sources"


def test_expanding_a_leaf_pages_its_sources_with_a_small_budget(engine):
    ids = put(engine, *[user(f"source number {i} " + "y" * 400) for i in range(6)])
    node = engine.runtime.dag.add_leaf("s1", "six sources", ids, token_count=3, source_token_count=600,
                                       earliest_at=None, latest_at=None)
    seen, args = [], {"node_id": node, "max_tokens": 250}
    for _ in range(50):
        out = call(engine, "trove_expand", **args)
        assert "error" not in out, out
        seen += [m["store_id"] for m in out["expanded"] if m.get("content_offset", 0) == 0]
        if not out["pagination"]["has_more"]:
            break
        args = {"max_tokens": 250, **out["expand_args"]}
    assert seen == ids
