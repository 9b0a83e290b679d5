"""Message shapes from a real chat: content given as parts (text and a pasted image), text in
several scripts, then one 200,000-character paste (about 50,000 tokens, past the whole trigger
of a 128K window on its own) and searches for what came before it.

Checks: every message is stored once (the image's data URI moved to a payload file, the paste
whole), no request comes near the window, the summary of the turns before the paste stays in
view next to it, and ``trove_grep`` finds each script's words in the right message.
"""
from __future__ import annotations

import base64
import json
import random
import re
from typing import Any

import pytest

from .harness import FALLBACK_WARNING, chat_requests, query, request_tokens

CONTEXT_LENGTH = 128000
NODE_LABEL = re.compile(r"\[d\d+ node \d+ \|")
WORDS = ("amber", "basalt", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper")
IMAGE = base64.b64encode(bytes(random.Random(7).randrange(256) for _ in range(3000))).decode()
PARTS = [{"type": "text", "text": "what is in this photo of the hydrangea shed ZEBRA-IMG-7?"},
         {"type": "image_url", "image_url": {"url": "data:image/png;base64," + IMAGE}}]
SCRIPTS = "我的猫叫小龙 مرحبا بالعالم 🦜🦜 cafe\u0301 Ωmega"
PASTE = "PASTE-MARK-Q " + " ".join(f"{WORDS[k % len(WORDS)]}{k % 89}" for k in range(200000 // 7))[:200000]
QUERIES = {"小龙": SCRIPTS, "مرحبا": SCRIPTS, "🦜": SCRIPTS, "ZEBRA-IMG-7": PARTS}


@pytest.fixture(scope="module")
def shapes(make_home, fake_llm) -> dict[str, Any]:
    home = make_home(context_length=CONTEXT_LENGTH)
    start = len(fake_llm.requests())
    turns = [PARTS, SCRIPTS, PASTE] + [f"<<tool:trove_grep {json.dumps({'query': q})}>>" for q in QUERIES]
    result = home.run_driver({"turns": turns, "max_iterations": 4}, "shapes", timeout=600)
    rows = query(home.db_path, "SELECT store_id, role, content FROM messages WHERE session_id = ? ORDER BY store_id",
                 (result["session_id"],))
    return {"home": home, "result": result, "rows": rows, "requests": fake_llm.requests()[start:]}


def test_trove_served_and_stored_each_shape_once(shapes):
    result, rows = shapes["result"], shapes["rows"]
    assert result["engine_name"] == "trove" and not [w for w in result["warnings"] if FALLBACK_WARNING in w]
    users = [content for _, role, content in rows if role == "user"]
    assert users.count(SCRIPTS) == 1 and users.count(PASTE) == 1
    parts = [c for c in users if "ZEBRA-IMG-7?" in c and c.startswith("[")]
    assert len(parts) == 1 and IMAGE[:200] not in parts[0] and "[trove:payload ref=" in parts[0], parts
    assert list((shapes["home"].home / "trove-payloads").glob("*")), "the image went to no payload file"


def test_no_request_nears_the_window_and_the_summary_stays_beside_the_paste(shapes):
    bodies = chat_requests(shapes["requests"])
    assert max(request_tokens(b) for b in bodies) < int(CONTEXT_LENGTH * 0.6)
    with_paste = [b for b in bodies if any(PASTE[:40] in json.dumps(m.get("content"), ensure_ascii=False)
                                           for m in b["messages"])]
    assert with_paste and shapes["result"]["compression_count"] >= 1
    for body in with_paste[1:]:
        assert NODE_LABEL.search(json.dumps(body["messages"], ensure_ascii=False)), "no summary beside the paste"


def test_grep_finds_each_script_in_its_message(shapes):
    ids = {}
    for store_id, role, content in shapes["rows"]:
        if role == "user":
            ids.setdefault(content if isinstance(content, str) else "", store_id)
    wanted = {q: next(i for c, i in ids.items() if (c == want if isinstance(want, str) else "ZEBRA-IMG-7?" in c))
              for q, want in QUERIES.items()}
    answers = {}
    for body in chat_requests(shapes["requests"]):
        for m in body["messages"]:
            if m.get("role") == "tool" and m.get("content", "").startswith('{"query"'):
                found = json.loads(m["content"])
                answers[found["query"]] = [r.get("store_id") for r in found["results"]]
    for q, store_id in wanted.items():
        assert store_id in answers.get(q, []), (q, store_id, answers.get(q))
