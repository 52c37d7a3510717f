"""A stand-in OpenAI-compatible endpoint on 127.0.0.1, for trying the real-model path with no network.

``OpenAIModel`` talks to it through the official ``openai`` client exactly as it talks to OpenAI, vLLM,
Ollama or a llama.cpp server: real HTTP, the chat-completions wire format, streamed as server-sent events.
It is not a language model. By default (:func:`stand_in_answer`) it reads the last message and nothing else:

- asked how many letters a quoted word has (``'notebook'``) with a ``word_length`` tool offered, it calls it;
- given a tool's result, it answers with it;
- otherwise it echoes the question, one token per word, stopping at ``max_tokens`` (so a setting shows);
- a question with the word "slowly" in it waits ``slow_seconds`` before its first token (so a time limit
  shows).

Every request body it receives is kept in ``requests`` (headers are not: the key never lands there), so a
notebook can set what agio stored beside what the server got. ``openai_endpoint.ipynb`` uses it; the
endpoint exercise gives it an ``answer`` of its own (a scripted reply, pauses, a key it insists on) and
judges what ``received`` holds (headers included).

    with LocalEndpoint() as endpoint:
        model = OpenAIModel("stand-in", base_url=endpoint.url)
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_QUOTED = re.compile(r"['\"‘“]([^'\"’”]+)['\"’”]")


@dataclass
class Answer:
    """What the server sends for one request: text in ``pieces`` (one streamed chunk each) or a
    ``tool_call`` (name, arguments); and when: ``first_delay`` seconds before the first piece, ``gap``
    between two, and ``stall`` seconds of silence before piece number ``stall_after``."""

    pieces: list[str] = field(default_factory=list)
    tool_call: tuple[str, dict[str, Any]] | None = None
    finish: str = "stop"
    first_delay: float = 0.0
    gap: float = 0.0
    stall_after: int | None = None
    stall: float = 0.0

    @classmethod
    def words(cls, text: str, **timing: Any) -> Answer:
        """``text`` one word per piece (the space kept with the word before it), as a tokenizer streams it."""
        words = text.split(" ")
        return cls([w if i == len(words) - 1 else w + " " for i, w in enumerate(words)], **timing)

    @property
    def text(self) -> str:
        return "".join(self.pieces)


def stand_in_answer(body: dict[str, Any], slow_seconds: float = 3.0) -> Answer:
    """What the stand-in answers to a request body (see the module's text)."""
    messages = body.get("messages") or [{}]
    last = messages[-1]
    tools = {t.get("function", {}).get("name") for t in body.get("tools") or ()}
    text = str(last.get("content") or "")
    delay = slow_seconds if "slowly" in text.lower() else 0.0
    if last.get("role") == "tool":
        return Answer.words(f"The tool says: {last.get('content')}.", first_delay=delay)
    word = _QUOTED.search(text)
    if "word_length" in tools and word and "letter" in text.lower():
        return Answer(tool_call=("word_length", {"word": word.group(1)}), finish="tool_calls", first_delay=delay)
    words = f"You said: {text}".split()
    limit = body.get("max_tokens") or body.get("max_completion_tokens")
    cut = isinstance(limit, int) and len(words) > limit
    answer = Answer.words(" ".join(words[:limit] if cut else words), first_delay=delay)
    answer.finish = "length" if cut else "stop"
    return answer


@dataclass
class Received:
    """One request as the server got it."""

    path: str
    headers: dict[str, str]  # lower-cased names
    body: dict[str, Any]


class LocalEndpoint:
    """The server, on a free port of 127.0.0.1, in a thread of this process; ``url`` (also ``base_url``) is
    its base URL (``http://127.0.0.1:PORT/v1``); ``requests`` the bodies it received, ``received`` the whole
    requests; ``close()`` stops it, ending any answer it is still sending.

    ``answer(body)`` decides each reply (default: the stand-in's). With ``key`` it refuses any other bearer
    key (401), as a real provider does."""

    def __init__(self, *, slow_seconds: float = 3.0, answer: Callable[[dict[str, Any]], Answer] | None = None,
                 key: str | None = None):
        self.received: list[Received] = []
        self.slow_seconds = slow_seconds
        self.answer = answer or (lambda body: stand_in_answer(body, self.slow_seconds))
        self.key = key
        self._stop = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="agio-local-endpoint", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    base_url = url

    @property
    def requests(self) -> list[dict[str, Any]]:
        return [r.body for r in self.received]

    def close(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> LocalEndpoint:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<agio stand-in endpoint at {self.url}: {len(self.received)} request(s)>"


def _usage(body: dict[str, Any], answer: Answer) -> dict[str, int]:
    prompt = sum(len(str(m.get("content") or "").split()) + 4 for m in body.get("messages") or ())
    completion = 8 if answer.tool_call else len(answer.pieces)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _handler(endpoint: LocalEndpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # quiet: a notebook cell is no place for access logs
            pass

        def do_POST(self) -> None:  # the stdlib's name
            try:
                self._answer()
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (a time limit): nothing to say
                pass

        def _answer(self) -> None:
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            except ValueError:
                self._json(400, {"error": {"message": "the body is not JSON"}})
                return
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._json(404, {"error": {"message": f"no route {self.path}"}})
                return
            headers = {k.lower(): v for k, v in self.headers.items()}
            endpoint.received.append(Received(self.path, headers, body if isinstance(body, dict) else {}))
            if endpoint.key is not None and headers.get("authorization") != f"Bearer {endpoint.key}":
                self._json(401, {"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error",
                                           "code": "invalid_api_key"}})
                return
            answer = endpoint.answer(body)
            if body.get("stream"):
                self._stream(body, answer)
            elif not self._pause(answer.first_delay):
                self._json(200, _completion(body, answer, len(endpoint.received)))

        def _pause(self, seconds: float) -> bool:
            """Wait ``seconds``; True if the server closed meanwhile (the answer is abandoned)."""
            return bool(seconds) and endpoint._stop.wait(seconds)

        def _stream(self, body: dict[str, Any], answer: Answer) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            model = str(body.get("model") or "stand-in")
            if self._pause(answer.first_delay):
                return
            if answer.tool_call:
                name, args = answer.tool_call
                call = {"index": 0, "id": f"call_{len(endpoint.received)}", "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)}}
                self._event(_chunk(model, {"role": "assistant", "tool_calls": [call]}))
            else:
                self._event(_chunk(model, {"role": "assistant", "content": ""}))
                for i, piece in enumerate(answer.pieces):
                    if answer.stall_after is not None and i == answer.stall_after and self._pause(answer.stall):
                        return
                    if i and self._pause(answer.gap):
                        return
                    self._event(_chunk(model, {"content": piece}))
            self._event(_chunk(model, {}, answer.finish))
            if (body.get("stream_options") or {}).get("include_usage"):
                self._event(_chunk(model, None, usage=_usage(body, answer)))
            self._event("[DONE]")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def _event(self, payload: Any) -> None:
            data = f"data: {payload if isinstance(payload, str) else json.dumps(payload)}\n\n".encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _json(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def _chunk(model: str, delta: dict[str, Any] | None, finish: str | None = None,
           usage: dict[str, int] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"id": "chatcmpl-local", "object": "chat.completion.chunk", "created": int(time.time()),
                            "model": model,
                            "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage is not None:
        body["usage"] = usage
    return body


def _completion(body: dict[str, Any], answer: Answer, number: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None if answer.tool_call else answer.text}
    if answer.tool_call:
        name, args = answer.tool_call
        message["tool_calls"] = [{"id": f"call_{number}", "type": "function",
                                  "function": {"name": name, "arguments": json.dumps(args)}}]
    return {"id": "chatcmpl-local", "object": "chat.completion", "created": int(time.time()),
            "model": str(body.get("model") or "stand-in"), "usage": _usage(body, answer),
            "choices": [{"index": 0, "message": message, "finish_reason": answer.finish}]}
