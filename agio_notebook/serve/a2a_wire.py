"""What agio's A2A server and client agree on beyond the protocol: where a card is, and metadata as plain
values (protobuf's ``Struct`` carries every JSON number as a float: a depth of 3 arrives as 3.0)."""

from __future__ import annotations

import re
import ssl
from datetime import datetime
from functools import lru_cache
from typing import Any, AsyncIterator

import httpx

CARD_PATH = "/.well-known/agent-card.json"


def plain_metadata(holder: Any) -> dict[str, Any]:
    """The ``metadata`` of a message, artifact or event as plain values (whole numbers as ints)."""
    from google.protobuf.json_format import MessageToDict

    return whole_numbers(MessageToDict(holder.metadata)) if holder.HasField("metadata") else {}


def whole_numbers(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: whole_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [whole_numbers(v) for v in value]
    return value


_NAIVE_TIMESTAMP = re.compile(rb'("timestamp"\s*:\s*")(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)(")')


def _zoned(match: re.Match[bytes]) -> bytes:
    local = datetime.fromisoformat(match[2].decode()).astimezone()  # a naive time is the server's local time
    return match[1] + local.isoformat().encode() + match[3]


class ZonedTimestamps(httpx.AsyncBaseTransport):
    """Some servers (pydantic's fasta2a 2.1) send timestamps without a time zone, which the a2a-sdk's
    client refuses (protobuf wants RFC 3339), failing the whole call: their responses get the zone of the
    server's clock, line by line (a stream of server-sent events is line-based; a JSON body is one piece).
    """

    def __init__(self, inner: httpx.AsyncBaseTransport | None = None):
        # one TLS context for the process: loading the CA bundle costs ~30 ms, too much for every call
        self.inner = inner or httpx.AsyncHTTPTransport(verify=_tls())

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        return httpx.Response(response.status_code, headers=response.headers, stream=_Lines(response.stream),
                              extensions=response.extensions, request=request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@lru_cache(maxsize=1)
def _tls() -> ssl.SSLContext:
    return ssl.create_default_context()


class _Lines(httpx.AsyncByteStream):
    def __init__(self, inner: Any):
        self.inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        pending = b""
        async for chunk in self.inner:
            pending += chunk
            done, _, pending = pending.rpartition(b"\n")
            if done:
                yield _NAIVE_TIMESTAMP.sub(_zoned, done + b"\n")
        if pending:
            yield _NAIVE_TIMESTAMP.sub(_zoned, pending)

    async def aclose(self) -> None:
        await self.inner.aclose()
