"""Property-style checks: whatever the store externalizes comes back byte-identical."""
from __future__ import annotations

import base64
import json
import random
import re

import pytest
from conftest import make_config

from hermes_trove.payloads import sidecar as payloads
from hermes_trove.runtime import build_runtime
from hermes_trove.store import SessionKey

PLACEHOLDER = re.compile(r"\[trove:payload ref=(\S+) kind=\S+ mime=\S+ chars=\d+\]")
ALPHABETS = ["abcdefghij klmnop\n", "日本語のテキスト、", "emoji 🎉🚀 ", "ÄÖÜ ß é", "\t{}[]\"\\/",
             "\u200b\u00a0zero width", "\ud83d", "A1b2+/=="]


def random_text(rng: random.Random, size: int) -> str:
    kind = rng.randrange(5)
    if kind == 0:  # binary-ish base64, maybe as a data URI
        raw = base64.b64encode(rng.randbytes(max(1, size * 3 // 4))).decode()
        return f"data:application/pdf;base64,{raw}" if rng.random() < 0.5 else raw
    if kind == 1:  # unicode soup, lone surrogates included
        return "".join(rng.choice(ALPHABETS) for _ in range(max(1, size // 8)))[:size]
    if kind == 2:  # prose with an embedded data URI
        uri = "data:image/jpeg;base64," + base64.b64encode(rng.randbytes(rng.randrange(20, 3000))).decode()
        return "before " * rng.randrange(1, 50) + uri + " after" * rng.randrange(1, 50)
    if kind == 3:  # arbitrary code points
        return "".join(chr(rng.choice([rng.randrange(32, 127), rng.randrange(0x80, 0xD7FF),
                                      rng.randrange(0xE000, 0x10FFFF)])) for _ in range(size))
    return "".join(rng.choice("ab\n ") for _ in range(size))


def read_all(runtime, ref: str, rng: random.Random) -> str:
    out, offset = [], 0
    while True:
        page = payloads.read_ref(runtime, ref, content_offset=offset, max_chars=rng.choice([1, 7, 500, 20000]))
        assert page["content_returned_chars"] == len(page["content"]) >= (1 if page["has_more"] else 0)
        out.append(page["content"])
        if not page["has_more"]:
            return "".join(out)
        offset = page["next_content_offset"]


def restore(runtime, text: str, rng: random.Random) -> str:
    """Put every payload placeholder's original text back."""
    head = payloads.EXTERNALIZED_HEAD.match(text)
    if head:
        return restore(runtime, read_all(runtime, head.group(1), rng), rng)
    return PLACEHOLDER.sub(lambda m: read_all(runtime, m.group(1), rng), text)


def test_every_externalized_text_recovers_byte_identical_through_paging(tmp_path):
    rt = build_runtime(make_config(tmp_path))
    rng = random.Random(1234)
    for i in range(120):
        text = random_text(rng, rng.choice([1, 50, 3000, 40000]))
        ref = payloads.externalize_text(rt, f"s{i % 3}", text)
        assert ref is not None
        assert read_all(rt, ref, rng).encode("utf-8", "surrogatepass") == text.encode("utf-8", "surrogatepass")


@pytest.mark.parametrize("externalize", [False, True])
def test_rows_stored_through_the_guard_restore_to_the_original_message(tmp_path, externalize):
    rt = build_runtime(make_config(tmp_path, large_output_externalization_enabled=externalize,
                                   large_output_externalization_threshold_chars=2000))
    rng = random.Random(99 + externalize)
    originals = []
    for i in range(80):
        text = random_text(rng, rng.choice([10, 900, 5000, 60000]))
        role = rng.choice(["user", "assistant", "tool"])
        msg = {"role": role, "content": text}
        if role == "tool":
            msg["tool_call_id"] = f"c{i}"
        originals.append(msg)
    rt.store.append(SessionKey("s1"), originals)
    rows = rt.store.page("s1", 0, 1000)
    assert len(rows) == len(originals)
    for row, msg in zip(rows, originals, strict=True):
        assert restore(rt, row.content, rng) == msg["content"]


def test_multimodal_and_tool_call_payloads_restore_exactly(tmp_path):
    rt = build_runtime(make_config(tmp_path))
    rng = random.Random(7)
    for i in range(30):
        uri = "data:image/webp;base64," + base64.b64encode(rng.randbytes(rng.randrange(100, 20000))).decode()
        blob = base64.b64encode(rng.randbytes(rng.randrange(800, 5000))).decode()
        msgs = [{"role": "user", "content": [{"type": "text", "text": f"img {i}"},
                                             {"type": "image_url", "image_url": {"url": uri}}]},
                {"role": "assistant", "content": "",
                 "tool_calls": [{"id": f"c{i}", "type": "function",
                                 "function": {"name": "upload", "arguments": json.dumps({"blob": blob})}}]}]
        rt.store.append(SessionKey("s1"), msgs)
    rows = rt.store.page("s1", 0, 1000)
    for n, row in enumerate(rows):
        if n % 2 == 0:
            url = row.content_value()[1]["image_url"]["url"]
            assert restore(rt, url, rng).startswith("data:image/webp;base64,")
            assert base64.b64decode(restore(rt, url, rng).split(",", 1)[1])
        else:
            args = json.loads(json.loads(row.tool_calls)[0]["function"]["arguments"])
            assert len(restore(rt, args["blob"], rng)) >= 800 and "[trove" not in restore(rt, args["blob"], rng)


def test_huge_payload_pages_without_loss(tmp_path):
    rt = build_runtime(make_config(tmp_path))
    text = "".join(chr(0x4E00 + (i % 2000)) if i % 3 else "x" for i in range(3_000_000))
    ref = payloads.externalize_text(rt, "s1", text)
    assert ref is not None
    out, offset = [], 0
    while True:
        page = payloads.read_ref(rt, ref, content_offset=offset, max_chars=200000)
        out.append(page["content"])
        if not page["has_more"]:
            break
        offset = page["next_content_offset"]
    assert "".join(out) == text and len(out) == 15
