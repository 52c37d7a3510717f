"""A real HTTP server on 127.0.0.1 speaking the chat-completions wire format (SSE when streaming).

Each test scripts the responses: a list of entries, one per request, each either a list of
chunk dicts (streamed as ``data: {...}`` events, then ``data: [DONE]``), a :class:`Stream` (the same
with pauses, a missing ``[DONE]`` or a connection dropped mid-body), a full response dict
(non-streaming), ``(status, body)`` for an error, or a function of the request returning one of these
(e.g. to echo a header back, as real servers do). Requests are recorded (path, headers, body).

``strict_tool_content=True`` answers 500 to an assistant message with ``"content": null`` beside
``tool_calls``, as llama-cpp-python's server does.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, usage: dict[str, int] | None = None,
          choices: bool = True) -> dict[str, Any]:
    """One ``chat.completion.chunk``."""
    body: dict[str, Any] = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": int(time.time()),
                            "model": "fake-model", "choices": []}
    if choices:
        body["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish, "logprobs": None}]
    if usage is not None:
        body["usage"] = usage
    return body


def text_chunks(*pieces: str, usage: dict[str, int] | None = None) -> list[dict[str, Any]]:
    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": p}) for p in pieces]
    out.append(chunk({}, finish="stop"))
    if usage:
        out.append(chunk(usage=usage, choices=False))
    return out


@dataclass
class Stream:
    """A streamed reply with timing and endings real servers produce."""

    chunks: list[dict[str, Any]]
    done: bool = True  # send "data: [DONE]" (a server out of context closes without it)
    first_delay: float = 0.0  # seconds before the first chunk (a hung server: long)
    gap: float = 0.0  # seconds between chunks (a slow local model)
    stall_after: int | None = None  # after this many chunks, go silent for stall seconds
    stall: float = 0.0
    cut_after: int | None = None  # after this many chunks, drop the connection mid-body


class FakeOpenAIServer:
    def __init__(self, strict_tool_content: bool = False) -> None:
        self.script: list[Any] = []
        self.requests: list[dict[str, Any]] = []
        self.strict_tool_content = strict_tool_content
        self.stopping = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                server.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
                request = server.requests[-1]
                entry = server.script.pop(0) if server.script else (500, {"error": {"message": "script empty"}})
                if callable(entry):
                    entry = entry(request)
                if server.strict_tool_content and any(
                        m.get("role") == "assistant" and m.get("tool_calls") and m.get("content") is None
                        for m in body.get("messages") or ()):
                    entry = (500, {"error": {"message": "Expected 'content' to be a string"}})
                if isinstance(entry, tuple):
                    status, payload = entry
                    data = json.dumps(payload).encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    if status == 429:
                        self.send_header("Retry-After", "0")
                    self.end_headers()
                    self.wfile.write(data)
                    return
                if isinstance(entry, dict):  # non-streaming completion
                    data = json.dumps(entry).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self._stream(entry if isinstance(entry, Stream) else Stream(entry))

            def _piece(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def _stream(self, plan: Stream) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                wait = server.stopping.wait
                if plan.first_delay and wait(plan.first_delay):
                    return
                try:
                    for i, item in enumerate(plan.chunks):
                        if plan.cut_after is not None and i == plan.cut_after:
                            self.wfile.flush()
                            self.connection.shutdown(2)  # mid-body: no terminating chunk
                            return
                        if plan.stall_after is not None and i == plan.stall_after and wait(plan.stall):
                            return
                        if i and plan.gap and wait(plan.gap):
                            return
                        self._piece(f"data: {json.dumps(item)}\n\n".encode())
                    if plan.done:
                        self._piece(b"data: [DONE]\n\n")
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):  # the client gave up first
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FakeOpenAIServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
