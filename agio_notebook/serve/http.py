"""Serving over HTTP (MCP and A2A alike): loopback by default, Host and Origin checked on every bind, a
bearer token always, on a thread of its own, the host process's logging left as it was.

Every request passes two gates before it reaches the app:

1. **Host and Origin** (against DNS rebinding and cross-site pages): the ``Host`` header must name this
   server: a loopback name or address, the address it is bound to, this machine's names and addresses
   when bound to every interface (``0.0.0.0``, ``::``, ``""``), or an entry of ``allowed_hosts``
   (``name`` for any port, ``name:port`` for one); otherwise 421. An ``Origin`` header, when a browser
   sends one, must be this server itself or an entry of ``allowed_origins``; otherwise 403.
2. **The bearer token**, compared in constant time; otherwise 401. The token is registered as a secret
   of the process (``core.redact``), so it is masked wherever it could show, and it is never in a repr,
   a log line or an error.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import secrets
import socket
import threading
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable
from urllib.parse import urlsplit

from ..core.redact import register_secret

Scope = dict[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]

_WILDCARDS = ("0.0.0.0", "::", "")
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_HOST_ENTRY = re.compile(r"^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$")  # name[:port], [v6][:port]


def new_token() -> str:
    return secrets.token_urlsafe(32)


def _header(scope: Scope, name: bytes) -> str | None:
    value = next((v for k, v in scope.get("headers") or () if k.lower() == name), None)
    return value.decode("latin-1") if value is not None else None


async def _refuse(send: Any, status: int, text: str, extra: list[tuple[bytes, bytes]] = ()) -> None:  # type: ignore[assignment]
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain"), *extra]})
    await send({"type": "http.response.body", "body": text.encode()})


def _split_host(value: str) -> tuple[str, int | None] | None:
    """``name[:port]`` or ``[v6][:port]`` -> (lower-case name without brackets, port or None)."""
    try:
        parts = urlsplit("//" + value.strip())
        return (parts.hostname or "").lower(), parts.port
    except ValueError:
        return None


class HostOriginGuard:
    """ASGI middleware: the Host header must name this server and an Origin, if any, must be allowed."""

    def __init__(self, app: ASGIApp, bind: str, port: int, allowed_hosts: Iterable[str] = (),
                 allowed_origins: Iterable[str] = ()):
        self.app = app
        self.port = port
        names = {*_LOOPBACK, bind.strip("[]").lower()}
        if bind in _WILDCARDS:
            names |= _machine_names()
        self._names = {n for n in names if n}
        self._extra: list[tuple[str, int | None]] = []
        for entry in allowed_hosts:
            parsed = _split_host(entry) if isinstance(entry, str) and _HOST_ENTRY.match(entry) else None
            if parsed is None or not parsed[0]:
                raise ValueError(f"allowed_hosts: {entry!r} is not a host name or host:port")
            self._extra.append(parsed)
        self._origins = {o.rstrip("/").lower() for o in allowed_origins}

    def host_ok(self, value: str | None) -> bool:
        parsed = _split_host(value) if value else None
        if parsed is None:
            return False
        name, port = parsed
        if name in self._names and (port or 80) == self.port:
            return True
        return any(name == n and (p is None or p == (port or 80)) for n, p in self._extra)

    def origin_ok(self, value: str | None) -> bool:
        if value is None:
            return True  # not a browser (MCP and A2A clients send none)
        if value.rstrip("/").lower() in self._origins:
            return True
        parts = urlsplit(value)
        try:
            return parts.scheme in ("http", "https") and self.host_ok(parts.netloc) and not parts.path.strip("/")
        except ValueError:
            return False

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            if not self.host_ok(_header(scope, b"host")):
                await _refuse(send, 421, "this server does not answer to that Host\n")
                return
            if not self.origin_ok(_header(scope, b"origin")):
                await _refuse(send, 403, "requests from that Origin are not allowed\n")
                return
        await self.app(scope, receive, send)


def _machine_names() -> set[str]:
    """This machine's host names and addresses (those its name resolves to, and its addresses on the
    default routes): what clients on the network call it by. Other names go in ``allowed_hosts``."""
    names = {socket.gethostname().lower(), socket.getfqdn().lower()}
    try:
        names |= {_address(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None)}
    except (OSError, ValueError):
        pass
    for family, probe in ((socket.AF_INET, "198.51.100.1"), (socket.AF_INET6, "2001:db8::1")):
        try:  # a UDP socket "connected" to a documentation address: the kernel picks the source, sends nothing
            with socket.socket(family, socket.SOCK_DGRAM) as udp:
                udp.connect((probe, 9))
                names.add(_address(udp.getsockname()[0]))
        except (OSError, ValueError):
            continue
    return names


def _address(text: str) -> str:
    return str(ipaddress.ip_address(text.split("%")[0]))


class BearerAuth:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str):
        if not isinstance(token, str) or len(token) < 16:
            raise ValueError("the server's token must be a string of at least 16 characters")
        register_secret(token)
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not self._authorized(scope):
            await _refuse(send, 401, "missing or wrong bearer token\n", [(b"www-authenticate", b"Bearer")])
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
    urls: dict[str, str] = field(default_factory=dict)  # A2A: each agent's URL (its card is below it)

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


def start_http(app: ASGIApp, token: str, host: str = "127.0.0.1", port: int = 0, *, path: str = "/mcp",
               allowed_hosts: Iterable[str] = (), allowed_origins: Iterable[str] = (),
               what: str = "MCP") -> HTTPServer:
    """Serve ``app`` behind the Host/Origin check and the token on ``host:port`` (0: a free port) from a
    daemon thread; ``url`` is where a client on this machine reaches ``path``."""
    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot serve {what} on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(128)
    bound = sock.getsockname()[1]
    guarded = HostOriginGuard(BearerAuth(app, token), host, bound, allowed_hosts, allowed_origins)
    # log_config=None: uvicorn configures no logging of its own, so the host process's stays as it was
    server = uvicorn.Server(uvicorn.Config(guarded, log_level="warning", log_config=None, lifespan="on"))
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

    thread = threading.Thread(target=serve, name=f"agio-{what.lower()}-http-{bound}", daemon=True)
    thread.start()
    ready.wait(30)
    if not server.started:
        raise OSError(f"the {what} server on {host}:{bound} did not start")
    local = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "[::1]"}.get(host)
    shown = local or (f"[{host}]" if family == socket.AF_INET6 else host)
    return HTTPServer(url=f"http://{shown}:{bound}{path}", token=token, _server=server, _thread=thread)
