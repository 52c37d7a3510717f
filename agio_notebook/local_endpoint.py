"""A stand-in OpenAI-compatible endpoint on 127.0.0.1, for trying the real-model path with no network.

``OpenAIModel`` talks to it through the official ``openai`` client exactly as it talks to OpenAI, vLLM,
Ollama or a llama.cpp server: real HTTP, the chat-completions wire format, streamed as server-sent events.
It is not a language model. It reads the last message and nothing else:

- asked how many letters a quoted word has (``'notebook'``) with a ``word_length`` tool offered, it calls it;
- given a tool's result, it answers with it;
- otherwise it echoes the question, one token per word, stopping at ``max_tokens`` (so a setting shows);
- a question with the word "slowly" in it waits ``slow_seconds`` before its first token (so a time limit
  shows).

Every request body it receives is kept in ``requests`` (headers are not: the key never lands there), so a
notebook can set what agio stored beside what the server got. ``openai_endpoint.ipynb`` uses it.

    with LocalEndpoint() as endpoint:
        model = OpenAIModel("stand-in", base_url=endpoint.url)
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_QUOTED = re.compile(r"['\"‘“]([^'\"’”]+)['\"’”]")


def reply_to(body: dict[str, Any]) -> dict[str, Any]:
    """What the stand-in answers to a request body: ``{"content": str}`` or ``{"tool_call": (name, args)}``."""
    messages = body.get("messages") or [{}]
    last = messages[-1]
    tools = {t.get("function", {}).get("name") for t in body.get("tools") or ()}
    if last.get("role") == "tool":
        return {"content": f"The tool says: {last.get('content')}."}
    text = str(last.get("content") or "")
    word = _QUOTED.search(text)
    if "word_length" in tools and word and "letter" in text.lower():
        return {"tool_call": ("word_length", {"word": word.group(1)})}
    words = f"You said: {text}".split()
    limit = body.get("max_tokens") or body.get("max_completion_tokens")
    return {"content": " ".join(words[:limit] if isinstance(limit, int) else words),
            "cut": isinstance(limit, int) and len(words) > limit}


class LocalEndpoint:
    """The stand-in server, on a free port of 127.0.0.1, in a thread of this process; ``url`` is its base
    URL (``http://127.0.0.1:PORT/v1``); ``requests`` the bodies it received; ``close()`` stops it."""

    def __init__(self, *, slow_seconds: float = 3.0):
        self.requests: list[dict[str, Any]] = []
        self.slow_seconds = slow_seconds
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="agio-local-endpoint", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> LocalEndpoint:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<agio stand-in endpoint at {self.url}: {len(self.requests)} request(s)>"


def _chunk(delta: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None) -> bytes:
    body: dict[str, Any] = {"id": "chatcmpl-standin", "object": "chat.completion.chunk", "created": int(time.time()),
                            "model": "stand-in",
                            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}] if usage is None else []}
    if usage is not None:
        body["usage"] = usage
    return f"data: {json.dumps(body)}\n\n".encode()


def _handler(endpoint: LocalEndpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet: a notebook cell is no place for access logs
            pass

        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            try:
                self._answer()
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (a time limit): nothing to say
                pass

        def _answer(self) -> None:
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._json(404, {"error": {"message": f"no route {self.path}"}})
                return
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            except ValueError:
                self._json(400, {"error": {"message": "the body is not JSON"}})
                return
            endpoint.requests.append(body)
            answer = reply_to(body)
            last = str((body.get("messages") or [{}])[-1].get("content") or "")
            if "slowly" in last.lower():
                time.sleep(endpoint.slow_seconds)
            prompt = sum(len(str(m.get("content") or "").split()) + 4 for m in body.get("messages") or ())
            if "tool_call" in answer:
                name, args = answer["tool_call"]
                call = {"index": 0, "id": f"call_{len(endpoint.requests)}", "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)}}
                pieces, finish, completion = [{"role": "assistant", "tool_calls": [call]}], "tool_calls", 8
            else:
                words = answer["content"].split(" ")
                pieces = [{"role": "assistant", "content": ""}] + [{"content": w if i == 0 else " " + w}
                                                                   for i, w in enumerate(words)]
                finish, completion = ("length" if answer.get("cut") else "stop"), len(words)
            usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
            if not body.get("stream"):
                message = {"role": "assistant", "content": answer.get("content")}
                if "tool_call" in answer:
                    message["tool_calls"] = [{k: v for k, v in pieces[0]["tool_calls"][0].items() if k != "index"}]
                self._json(200, {"id": "chatcmpl-standin", "object": "chat.completion", "created": int(time.time()),
                                 "model": "stand-in", "usage": usage,
                                 "choices": [{"index": 0, "message": message, "finish_reason": finish}]})
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for piece in pieces:
                self.wfile.write(_chunk(piece))
            self.wfile.write(_chunk({}, finish))
            if (body.get("stream_options") or {}).get("include_usage"):
                self.wfile.write(_chunk({}, usage=usage))
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

        def _json(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
