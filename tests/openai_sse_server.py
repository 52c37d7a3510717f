"""A real HTTP server on 127.0.0.1 speaking the chat-completions wire format (SSE when streaming).

Each test scripts the responses: a list of entries, one per request, each either a list of
chunk dicts (streamed as ``data: {...}`` events, then ``data: [DONE]``), a full response dict
(non-streaming), or ``(status, body)`` for an error. Requests are recorded (path, headers, body).
"""

from __future__ import annotations

import json
import threading
import time
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


class FakeOpenAIServer:
    def __init__(self) -> None:
        self.script: list[Any] = []
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                server.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
                entry = server.script.pop(0) if server.script else (500, {"error": {"message": "script empty"}})
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
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for item in entry:
                    self.wfile.write(f"data: {json.dumps(item)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

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
        self.httpd.shutdown()
        self.httpd.server_close()
