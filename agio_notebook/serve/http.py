"""Serving over streamable HTTP: loopback by default, a bearer token always, on a thread of its own.

The token is compared in constant time before a request reaches the MCP app; a request without it (or
with a wrong one) gets 401 and nothing else. The token is never in a repr, a log line or an error.
"""

from __future__ import annotations

import hmac
import secrets
import socket
import threading
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

Scope = dict[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


def new_token() -> str:
    return secrets.token_urlsafe(32)


class BearerAuth:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str):
        if not isinstance(token, str) or len(token) < 16:
            raise ValueError("the MCP server's token must be a string of at least 16 characters")
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not self._authorized(scope):
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"text/plain"), (b"www-authenticate", b"Bearer")]})
            await send({"type": "http.response.body", "body": b"missing or wrong bearer token\n"})
            return
        await self.app(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        given = next((v for k, v in scope.get("headers") or () if k.lower() == b"authorization"), b"")
        return hmac.compare_digest(given, self._expected)


@dataclass
class HTTPServer:
    """A running server: ``url``, ``token`` (kept out of the repr), ``stop()``."""

    url: str
    token: str = field(repr=False)
    _server: Any = field(repr=False)
    _thread: threading.Thread = field(repr=False)

    @property
    def headers(self) -> dict[str, str]:
        """What a client sends: ``mcp_tools(server.url, headers=server.headers)``."""
        return {"Authorization": f"Bearer {self.token}"}

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = 10.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout)


def start_http(app: ASGIApp, token: str, host: str = "127.0.0.1", port: int = 0) -> HTTPServer:
    """Serve ``app`` behind the token on ``host:port`` (0: a free port) from a daemon thread."""
    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot serve MCP on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(128)
    bound = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(BearerAuth(app, token), log_level="warning", lifespan="on"))
    ready = threading.Event()

    def serve() -> None:
        import asyncio

        async def main() -> None:
            task = asyncio.create_task(server.serve(sockets=[sock]))
            while not server.started and not task.done():
                await asyncio.sleep(0.01)
            ready.set()
            await task

        try:
            asyncio.run(main())
        finally:
            ready.set()
            sock.close()

    thread = threading.Thread(target=serve, name=f"agio-mcp-http-{bound}", daemon=True)
    thread.start()
    ready.wait(30)
    if not server.started:
        raise OSError(f"the MCP server on {host}:{bound} did not start")
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    return HTTPServer(url=f"http://{shown}:{bound}/mcp", token=token, _server=server, _thread=thread)
