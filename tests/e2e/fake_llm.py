"""A fake OpenAI-compatible chat server for end-to-end runs of the real Hermes host.

Standard library only. It listens on 127.0.0.1 (a free port by default), answers
``POST .../chat/completions`` with or without streaming (SSE with tool-call deltas and a
final usage chunk), logs every request body as one JSON line, and follows a small,
deterministic script driven by markers in the conversation (see ``decide``).
"""
from __future__ import annotations

import argparse
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MODEL = "fake-model"
# ``<<tool:NAME {json args}>>`` in the newest user message: answer with that tool call.
TOOL_MARKER = re.compile(r"<<tool:(?P<name>[A-Za-z0-9_\-]+)\s*(?P<args>\{.*?\})?>>", re.S)
# ``<<then:NAME>>`` in the newest user message: once a tool result arrives, call NAME next,
# with arguments read from that result (see ``CHAINS``); at most once per user turn.
THEN_MARKER = re.compile(r"<<then:(?P<name>[A-Za-z0-9_\-]+)>>")
# In the newest user message: requests to a model named in ``FakeLLM.model_faults`` fail.
DOWN_MARKER = "<<primary-down>>"
SUMMARY_REPLY = "FAKE-SUMMARY #{n}: the earlier turns discussed numbered topics."


def oldest_message_hit(payload: Any) -> dict[str, Any] | None:
    """``trove_expand`` arguments for the oldest raw-message hit of a ``trove_grep`` result;
    for a ``trove_recall`` result, the ``expand`` arguments of its best hit."""
    recalled = payload.get("hits") if isinstance(payload, dict) else None
    if isinstance(recalled, list):
        best = recalled[0] if recalled and isinstance(recalled[0], dict) else {}
        expand = best.get("expand") if isinstance(best.get("expand"), dict) else {}
        return dict(expand["args"]) if expand.get("tool") == "trove_expand" else None
    results = payload.get("results") if isinstance(payload, dict) else None
    hits = [r["store_id"] for r in results or [] if isinstance(r, dict) and r.get("type") == "message"
            and isinstance(r.get("store_id"), int)]
    return {"store_id": min(hits)} if hits else None


# Follow-up tool name -> how its arguments come from the previous tool result's JSON.
def grep_hits_as_operands(payload: Any) -> dict[str, Any] | None:
    """``trove_compute`` arguments over the whole-message hits of a ``trove_grep`` result: each
    short user message whose snippet is its full text becomes an exact-ref operand (oldest two)."""
    results = payload.get("results") if isinstance(payload, dict) else None
    operands = []
    for r in sorted((r for r in results or [] if isinstance(r, dict) and r.get("type") == "message"
                     and r.get("role") == "user"), key=lambda r: r.get("store_id", 0)):
        text = str(r.get("snippet") or "").replace(">>>", "").replace("<<<", "")
        if "\u2026" in text or "<<" in text or not isinstance(r.get("store_id"), int):
            continue  # a cut snippet, or the question turn itself
        operands.append({"store_id": r["store_id"], "span_start": 0, "span_end": len(text), "quote": text})
    if len(operands) < 2:
        return None
    # A date-only question_date, the way a model writes one.
    return {"question": "How many days passed between these two events?", "operands": operands[:2],
            "question_date": "2026-12-01"}


CHAINS = {"trove_expand": oldest_message_hit, "trove_compute": grep_hits_as_operands}

# An assertion-extraction request (``state/contract.py`` opens its prompt with this marker): the
# fake model reads the messages block it was shown and states each "my <thing> is|to <value>" of
# a user message as a fact of ``user:self``, quoting the matched words exactly.
EXTRACTION_MARKER = "TROVE-ASSERTION-EXTRACTION"
_SHOWN = re.compile(r"^--- message store_id=(?P<id>\d+) role=(?P<role>\w+) ---\n(?P<text>.*?)"
                    r"(?=^--- message store_id=|^</messages>)", re.S | re.M)
_MY_THING = re.compile(r"\bmy (?P<thing>[a-z]+) (?:is|to) (?P<value>[A-Za-z][\w\-]*)")


def extract_assertions(prompt: str) -> dict[str, Any]:
    """The extraction answer for ``prompt``, built only from the user messages it shows."""
    found = []
    for shown in _SHOWN.finditer(prompt):
        if shown.group("role") != "user":
            continue
        for m in _MY_THING.finditer(shown.group("text")):
            found.append({"store_id": int(shown.group("id")), "quote": m.group(0), "subject": "user:self",
                          "predicate": f"prefers_{m.group('thing')}", "value": m.group("value"),
                          "kind": "preference", "polarity": "positive", "confidence": 0.9})
    return {"assertions": found}


def text_of(content: Any) -> str:
    """Plain text of a message ``content`` (string or list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def newest_user_text(body: dict[str, Any]) -> str:
    """Text of the newest user message of a request ("" when there is none)."""
    users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
    return text_of(users[-1].get("content")) if users else ""


def estimate_prompt_tokens(body: dict[str, Any]) -> int:
    """The usage figure the server reports: about four characters per token."""
    size = len(json.dumps(body.get("messages") or [])) + len(json.dumps(body.get("tools") or []))
    return max(1, size // 4)


def requested_answer_tokens(body: dict[str, Any]) -> int:
    """The answer a request asks room for (``max_tokens`` or ``max_completion_tokens``; 0 if neither)."""
    for key in ("max_tokens", "max_completion_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0


def decide(body: dict[str, Any], n: int) -> dict[str, Any]:
    """The scripted answer for one request: ``{"text": str}`` or ``{"tool": (name, args_json)}``.

    * No ``tools`` in the request: an auxiliary call. An assertion-extraction prompt gets the
      assertions read from its own messages (``extract_assertions``); any other a short summary.
    * Last message is a tool result and the newest user message asks ``<<then:NAME>>``: call
      NAME with arguments taken from that result, unless NAME was already called this turn.
    * Last message is a tool result: acknowledge it, quoting its start.
    * Newest user message has a tool marker and the request offers that tool: call it.
    * Otherwise: a short acknowledgement naming the request number.
    """
    msgs = body.get("messages") or []
    if not body.get("tools"):
        if msgs and EXTRACTION_MARKER in text_of(msgs[-1].get("content")):
            return {"text": json.dumps(extract_assertions(text_of(msgs[-1].get("content"))))}
        return {"text": SUMMARY_REPLY.format(n=n)}
    last = msgs[-1] if msgs else {}
    if last.get("role") == "tool":
        users = [m for m in msgs if m.get("role") == "user"]
        looping = TOOL_MARKER.search(text_of(users[-1].get("content"))) if users else None
        if looping and "<<loop>>" in text_of(users[-1].get("content")):
            return {"tool": (looping.group("name"), looping.group("args") or "{}")}
        follow = _chained_call(msgs, body)
        if follow is not None:
            return {"tool": follow}
        return {"text": f"TOOL-RESULT-SEEN #{n}: {text_of(last.get('content'))[:200]}"}
    if last.get("role") == "user":
        match = TOOL_MARKER.search(text_of(last.get("content")))
        offered = {(t.get("function") or {}).get("name") for t in body.get("tools") or []}
        if match and match.group("name") in offered:
            return {"tool": (match.group("name"), match.group("args") or "{}")}
    return {"text": f"ack #{n}"}


def _chained_call(msgs: list[dict[str, Any]], body: dict[str, Any]) -> tuple[str, str] | None:
    """The ``<<then:NAME>>`` follow-up for a request ending in a tool result, if one is due."""
    users = [i for i, m in enumerate(msgs) if m.get("role") == "user"]
    if not users:
        return None
    match = THEN_MARKER.search(text_of(msgs[users[-1]].get("content")))
    if not match or match.group("name") not in CHAINS:
        return None
    name = match.group("name")
    offered = {(t.get("function") or {}).get("name") for t in body.get("tools") or []}
    called = {(c.get("function") or {}).get("name") for m in msgs[users[-1]:] if m.get("role") == "assistant"
              for c in m.get("tool_calls") or []}
    if name not in offered or name in called:
        return None
    try:
        payload = json.loads(text_of(msgs[-1].get("content")))
    except ValueError:
        return None
    args = CHAINS[name](payload)
    return None if args is None else (name, json.dumps(args))


class FakeLLM:
    """The server object: ``start()``, ``url``, ``requests()``, ``stop()``."""

    def __init__(self, log_path: str | Path, port: int = 0):
        self.log_path = Path(log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path.touch()
        self._lock = threading.Lock()
        self._count = 0
        # Set ``hold_summaries``: each summary request sets ``summary_held`` and waits (up to 120 s) for
        # ``hold_summaries`` to clear, so a test can kill the host while its summarizer call is in flight.
        self.hold_summaries, self.summary_held = threading.Event(), threading.Event()
        # ``summary_faults``: what the next summary requests get, one entry each, in order, then normal
        # answers: "500" (a server error), "empty" (an empty reply), "garbage" (an unfinished
        # reasoning block) or "slow:S" (the normal answer after S seconds).
        self.summary_faults: list[str] = []
        # ``context_limit``: requests (main or auxiliary) estimated past it are refused as a provider does
        # (HTTP 400 naming the real limit); an auxiliary one counts the ``max_tokens`` it asks for too; 0 = no limit.
        self.context_limit = 0
        # ``model_faults``: model name -> "429" (rate limited) or "503" (overloaded): main requests for
        # that model whose newest user message holds ``DOWN_MARKER`` get that error, as from a provider
        # that is down; every other request is answered. ``model_limits``: model name -> its window:
        # every request to that model (main or auxiliary) estimated above it is refused like ``context_limit``.
        self.model_faults: dict[str, str] = {}
        self.model_limits: dict[str, int] = {}
        # ``refused``: each request refused for its window (model, prompt estimate, max_tokens, limit).
        self.refused: list[dict[str, Any]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler_for(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeLLM:
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-llm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def record(self, path: str, body: dict[str, Any]) -> int:
        with self._lock:
            self._count += 1
            with self.log_path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps({"n": self._count, "path": path, "at": time.time(), "body": body}) + "\n")
            return self._count

    def requests(self) -> list[dict[str, Any]]:
        """Every logged request, oldest first: ``{"n", "path", "at", "body"}``."""
        with self._lock:
            lines = self.log_path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]


def _handler_for(server: FakeLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def _json(self, code: int, obj: Any) -> None:
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
            else:
                self._json(404, {"error": {"message": "not found: " + self.path}})

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {"_unparsed": raw.decode("utf-8", "replace")}
            n = server.record(self.path, body)
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._json(404, {"error": {"message": "unsupported: " + self.path}})
                return
            if server.hold_summaries.is_set() and decide(body, n).get("text") == SUMMARY_REPLY.format(n=n):
                server.summary_held.set()
                deadline = time.monotonic() + 120
                while server.hold_summaries.is_set() and time.monotonic() < deadline:
                    time.sleep(0.05)
            down = server.model_faults.get(str(body.get("model") or ""), "") if body.get("tools") else ""
            if down and DOWN_MARKER in newest_user_text(body):
                kind = "rate_limit_error" if down == "429" else "server_error"
                self._json(int(down), {"error": {"message": f"fake provider is down ({down})", "type": kind}})
                return
            model_limit = server.model_limits.get(str(body.get("model") or ""), 0)  # every request to it
            limit = model_limit or server.context_limit  # the served window: main and auxiliary requests alike
            # An auxiliary request (a summary: the engine sizes its max_tokens) must leave the window room
            # for the answer it asks; a main request counts its prompt only: the host asks each one for
            # its provider default (65,536 tokens here), which is not the engine's to choose.
            prompt = estimate_prompt_tokens(body)
            answer = 0 if body.get("tools") else requested_answer_tokens(body)
            if limit and prompt + answer > limit:
                with server._lock:
                    server.refused.append({"model": body.get("model"), "tools": bool(body.get("tools")),
                                           "prompt": prompt, "max_tokens": answer, "limit": limit})
                self._json(400, {"error": {"code": "context_length_exceeded", "type": "invalid_request_error",
                                           "message": f"This model's maximum context length is {limit}"
                                           f" tokens. However, you requested {prompt + answer} tokens ({prompt} in"
                                           f" the messages, {answer} in the completion). Please reduce the length"
                                           " of the messages or completion."}})
                return
            fault = ""
            if decide(body, n).get("text") == SUMMARY_REPLY.format(n=n):
                with server._lock:
                    fault = server.summary_faults.pop(0) if server.summary_faults else ""
            try:
                if fault == "500":
                    self._json(500, {"error": {"message": "fake upstream failure", "type": "server_error"}})
                    return
                if fault.startswith("slow:"):
                    time.sleep(float(fault.split(":", 1)[1]))
                self._answer(body, n, {"empty": "", "garbage": "<think>\x07\ufffd%%%% unfinished"}.get(fault))
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client is gone (killed while it waited)

        def _answer(self, body: dict[str, Any], n: int, text: str | None = None) -> None:
            plan = decide(body, n) if text is None else {"text": text}
            prompt = estimate_prompt_tokens(body)
            usage = {"prompt_tokens": prompt, "completion_tokens": 7, "total_tokens": prompt + 7}
            base = {"id": f"chatcmpl-{n}", "created": int(time.time()), "model": MODEL}
            call = None
            if "tool" in plan:
                call = {"id": f"call_{n}", "type": "function",
                        "function": {"name": plan["tool"][0], "arguments": plan["tool"][1]}}
                message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
                finish = "tool_calls"
            else:
                message, finish = {"role": "assistant", "content": plan["text"]}, "stop"
            if not body.get("stream"):
                self._json(200, dict(base, object="chat.completion", usage=usage,
                                     choices=[{"index": 0, "message": message, "finish_reason": finish}]))
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            events = [{"role": "assistant", "content": ""}]
            if call is not None:
                events.append({"tool_calls": [{"index": 0, "id": call["id"], "type": "function",
                                               "function": {"name": call["function"]["name"], "arguments": ""}}]})
                args = call["function"]["arguments"]
                half = len(args) // 2  # arguments arrive in two deltas, like a real stream
                events.append({"tool_calls": [{"index": 0, "function": {"arguments": args[:half]}}]})
                events.append({"tool_calls": [{"index": 0, "function": {"arguments": args[half:]}}]})
            else:
                events.append({"content": plan["text"]})
            chunks = [dict(base, object="chat.completion.chunk",
                           choices=[{"index": 0, "delta": d, "finish_reason": None}]) for d in events]
            chunks.append(dict(base, object="chat.completion.chunk",
                               choices=[{"index": 0, "delta": {}, "finish_reason": finish}]))
            chunks.append(dict(base, object="chat.completion.chunk", choices=[], usage=usage))
            for chunk in chunks:
                self.wfile.write(("data: " + json.dumps(chunk) + "\n\n").encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Run the fake chat server in the foreground.")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", default="fake_llm_requests.jsonl")
    args = parser.parse_args(argv)
    srv = FakeLLM(args.log, port=args.port).start()
    print(f"fake LLM listening on {srv.url} (log: {args.log})", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        srv.stop()


if __name__ == "__main__":
    main()
