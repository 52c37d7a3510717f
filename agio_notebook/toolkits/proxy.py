"""A filtering HTTP proxy on 127.0.0.1: the browser's network-level SSRF guard.

A Playwright request filter does not see WebSocket connections or every redirect hop, so chromium is
also started with ``--proxy-server`` pointing here (and ``<-loopback>`` so loopback goes through it
too).  Every plain request, redirect hop, ``CONNECT`` (HTTPS, WSS) and WebSocket upgrade arrives here,
is checked by the same :class:`~agio_notebook.toolkits.web.Guard` as ``web_fetch``, and is connected to
the address that was checked.  A refusal is a 403 with an ``X-Agio-Blocked`` header saying why.
"""

from __future__ import annotations

import selectors
import socket
import socketserver
import threading
from urllib.parse import urlsplit

from .errors import ActionError
from .web import Guard

BLOCK_HEADER = "X-Agio-Blocked"


def _pipe(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes both ways until one side closes or both are silent for 60 s. A selector, not
    ``select.select``: a kernel that has been running a while holds descriptors above 1024, which
    ``select`` refuses."""
    with selectors.DefaultSelector() as selector:
        selector.register(a, selectors.EVENT_READ, b)
        selector.register(b, selectors.EVENT_READ, a)
        try:
            while True:
                ready = selector.select(60)
                if not ready:
                    return
                for key, _ in ready:
                    data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                    if not data:
                        return
                    key.data.sendall(data)
        except OSError:
            return


class _Handler(socketserver.BaseRequestHandler):
    server: "_Server"

    def handle(self) -> None:
        client = self.request
        client.settimeout(30)
        head = b""
        try:
            while b"\r\n\r\n" not in head:
                chunk = client.recv(65536)
                if not chunk:
                    return
                head += chunk
                if len(head) > 65536:
                    return
        except OSError:
            return
        header, _, rest = head.partition(b"\r\n\r\n")
        lines = header.decode("latin-1").split("\r\n")
        try:
            method, target, version = lines[0].split(" ", 2)
        except ValueError:
            return
        try:
            if method == "CONNECT":
                host, _, port = target.rpartition(":")
                _, _, port_n, address = self.server.guard.check(f"https://{host.strip('[]')}:{port}/")
                upstream = socket.create_connection((address, port_n), timeout=15)
                client.sendall(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                if rest:
                    upstream.sendall(rest)
            else:
                _, host, port_n, address = self.server.guard.check(target)
                parts = urlsplit(target)
                path = parts.path or "/"
                if parts.query:
                    path += "?" + parts.query
                kept = [line for line in lines[1:] if not line.lower().startswith(("proxy-connection:", "proxy-authorization:"))]
                upstream = socket.create_connection((address, port_n), timeout=15)
                upstream.sendall(f"{method} {path} {version}\r\n".encode("latin-1")
                                 + "\r\n".join(kept).encode("latin-1") + b"\r\n\r\n" + rest)
        except ActionError as exc:
            self._refuse(str(exc))
            return
        except OSError as exc:
            self._refuse(f"cannot connect: {exc}", status="502 Bad Gateway")
            return
        with upstream:
            _pipe(client, upstream)

    def _refuse(self, reason: str, status: str = "403 Forbidden") -> None:
        body = reason.encode()
        self.server.refusals.append(reason)
        try:
            self.request.sendall(f"HTTP/1.1 {status}\r\n{BLOCK_HEADER}: {reason.splitlines()[0][:300]}\r\n"
                                 f"Content-Type: text/plain\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
                                 .encode("latin-1", errors="replace") + body)
        except OSError:
            pass


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, guard: Guard):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.guard = guard
        self.refusals: list[str] = []


class FilteringProxy:
    """Start with :meth:`start`; ``url`` is what chromium's ``--proxy-server`` gets."""

    def __init__(self, guard: Guard):
        self.server = _Server(guard)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True, name="agio-browser-proxy")

    @property
    def refusals(self) -> list[str]:
        return self.server.refusals

    def start(self) -> FilteringProxy:
        self._thread.start()
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
