"""MCP servers as agio tools, through the official ``mcp`` SDK (stdio and streamable HTTP).

A server is one :class:`MCPConnection`: it lives on a thread of its own with its own event loop, so
its lifetime does not depend on which loop a run uses (a notebook cell, a worker thread, a batch).
It starts once, is reused by every agent that names the same server, and closes when the kernel
(the process) exits or :func:`close_mcp_servers` is called.  A server that crashes, hangs or answers
with an error gives the model an error tool result; the next call starts it again, a bounded number
of times.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import os
import re
import shlex
import shutil
import tempfile
import threading
import warnings
from typing import Any, Sequence

import jsonschema
import pydantic

from ..core import AgioError
from ..core.redact import register_secret
from .base import Tool
from .context import remote_call
from .mcp_checks import MAX_RESULT_CHARS, bad_name, bad_schema, cap


class MCPError(AgioError):
    """An MCP server could not be started, listed or reached."""


class MCPToolError(Exception):
    """The server ran the tool and reported an error (``isError``): the model sees the text."""

    def __init__(self, text: str, meta: Any = None):
        super().__init__(text)
        self.meta = meta


class MCPToolRefused(UserWarning):
    """A tool a server offers that cannot be used (a bad name, a schema with a ``$ref`` loop): the
    server's other tools are kept."""


_SECRET_HEADER = re.compile(r"(?i)authorization|cookie|key|token|secret|password")


def register_header_secrets(headers: dict[str, str]) -> None:
    """The values of credential headers are secrets of this process: masked wherever they would show."""
    for name, value in headers.items():
        if isinstance(value, str) and _SECRET_HEADER.search(name):
            register_secret(value)
            register_secret(value.partition(" ")[2])  # "Bearer <token>": the token alone too


def _is_url(target: str) -> bool:
    return target.startswith(("http://", "https://"))


class MCPConnection:
    """One MCP server: a command line (stdio) or a URL (streamable HTTP).

    ``timeout`` bounds each call (a hung server becomes an error result); ``max_restarts`` bounds how
    often a crashed or hung server is started again before its tools fail at once.
    """

    def __init__(self, target: str | Sequence[str], *, name: str | None = None, env: dict[str, str] | None = None,
                 cwd: str | None = None, timeout: float = 30.0, startup_timeout: float = 60.0,
                 max_restarts: int = 3, headers: dict[str, str] | None = None,
                 max_result_chars: int = MAX_RESULT_CHARS):
        argv = None
        if isinstance(target, str) and not _is_url(target):
            argv = shlex.split(target)
        elif not isinstance(target, str):
            argv = list(target)
        if argv is not None and not argv:
            raise MCPError("mcp_tools: the server command is empty")
        self.url = target if isinstance(target, str) and _is_url(target) else None
        self.argv = argv
        self.name = name or self.url or _command_name(argv or ["mcp"])
        self.env, self.cwd = env, cwd
        if headers is not None and self.url is None:
            raise MCPError("mcp_tools: headers= are for an HTTP server (a URL)")
        self._headers = dict(headers or {})  # e.g. a bearer token: never shown in a name, repr or error
        register_header_secrets(self._headers)
        self.max_result_chars = max_result_chars
        self.timeout, self.startup_timeout, self.max_restarts = timeout, startup_timeout, max_restarts
        self.restarts = 0
        self.tools: list[Any] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: Any = None
        self._stop: asyncio.Event | None = None
        self._broken: str | None = None
        self._stderr: Any = None
        self._lock = threading.Lock()

    # -- lifetime -------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._client is not None and self._broken is None

    def start(self) -> None:
        """Start the server and list its tools (blocking); one clear line when that fails."""
        with self._lock:
            if self.running:
                return
            self._shutdown()
            self._broken = None
            if self.argv is not None and shutil.which(self.argv[0]) is None:
                raise MCPError(f"MCP server {self.name!r}: command not found: {self.argv[0]}")
            ready: concurrent.futures.Future[None] = concurrent.futures.Future()
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._thread = threading.Thread(target=self._serve_forever, args=(loop, ready), daemon=True,
                                            name=f"agio-mcp-{self.name}")
            self._thread.start()
            try:
                ready.result(self.startup_timeout)
            except concurrent.futures.TimeoutError:
                self._shutdown()
                raise MCPError(f"MCP server {self.name!r} did not start within {self.startup_timeout:g}s") from None
            except MCPError:
                self._shutdown()
                raise

    def close(self) -> None:
        with self._lock:
            self._shutdown()

    def _shutdown(self) -> None:
        loop, thread, stop = self._loop, self._thread, self._stop
        self._client = None
        if loop is not None and stop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(stop.set)
        if thread is not None:
            thread.join(10)
        self._loop = self._thread = self._stop = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def _serve_forever(self, loop: asyncio.AbstractEventLoop, ready: concurrent.futures.Future[None]) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._serve(ready))
        finally:
            loop.close()

    async def _serve(self, ready: concurrent.futures.Future[None]) -> None:
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters, stdio_client

        self._stop = asyncio.Event()
        server: Any
        if self.url is not None and self._headers:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            server = streamable_http_client(self.url, http_client=create_mcp_http_client(headers=self._headers))
        elif self.url is not None:
            server = self.url
        else:
            argv = self.argv or [""]  # a connection without a URL was made with a command
            params = StdioServerParameters(command=argv[0], args=argv[1:], env=self.env, cwd=self.cwd)
            # the server's stderr goes to a file, not into the notebook; its tail explains a crash
            self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
            server = stdio_client(params, errlog=self._stderr)
        try:
            async with Client(server, read_timeout_seconds=self.timeout) as client:
                listing = await client.list_tools()
                self.tools = list(listing.tools)
                self._client = client
                ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:  # noqa: BLE001 - reported to the starter or to the next call
            message = one_line(exc) + self._stderr_tail()
            if not ready.done():
                ready.set_exception(MCPError(f"MCP server {self.name!r} could not be started: {message}"))
            else:
                self._broken = message
        finally:
            self._client = None

    def _stderr_tail(self) -> str:
        log = self._stderr
        if log is None or log.closed:
            return ""
        log.flush()
        log.seek(0)
        lines = [line.strip() for line in log.read().splitlines() if line.strip()]
        return f" (server stderr: {lines[-1][:200]})" if lines else ""

    # -- calls ------------------------------------------------------------------------------
    async def call(self, tool_name: str, arguments: dict[str, Any],
                   meta: dict[str, Any] | None = None) -> tuple[str, Any]:
        """Call a tool from any event loop: its text and the result's metadata; a failure raises (the
        engine turns it into an error result)."""
        if not self.running:
            await asyncio.to_thread(self._restart)
        loop, client = self._loop, self._client
        if loop is None or client is None:
            raise MCPError(f"MCP server {self.name!r} is not running ({self._broken or 'stopped'})")
        future = asyncio.run_coroutine_threadsafe(self._call(client, tool_name, arguments, meta), loop)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except MCPToolError:
            raise
        except Exception as exc:
            self._broken = one_line(exc)  # crashed or hung: start it again on the next call
            raise MCPError(f"MCP server {self.name!r} failed during {tool_name}: {self._broken}") from None

    def _restart(self) -> None:
        if self.restarts >= self.max_restarts:
            raise MCPError(f"MCP server {self.name!r} stopped ({self._broken}) and was restarted "
                           f"{self.restarts} times already; not starting it again")
        self.restarts += 1
        self.start()

    async def _call(self, client: Any, tool_name: str, arguments: dict[str, Any],
                    meta: dict[str, Any] | None) -> tuple[str, Any]:
        try:
            async with asyncio.timeout(self.timeout):
                result = await client.call_tool(tool_name, arguments, meta=meta)
        except TimeoutError:
            raise MCPError(f"no answer within {self.timeout:g}s") from None
        text = _result_text(result, self.max_result_chars)
        result_meta = getattr(result, "meta", None)
        if getattr(result, "is_error", False):
            raise MCPToolError(text or "the server reported an error", result_meta)
        return text, result_meta


def _command_name(argv: list[str]) -> str:
    """A short readable name: the module of ``-m``, else a script's file name, else the program."""
    if "-m" in argv[:-1]:
        return argv[argv.index("-m") + 1]
    scripts = [a for a in argv[1:] if a.endswith(".py")]
    return os.path.basename(scripts[0] if scripts else argv[0])


def _result_text(result: Any, limit: int = MAX_RESULT_CHARS) -> str:
    """The result as the model reads it, at most ``limit`` characters (and a line saying what was cut)."""
    parts = []
    for item in getattr(result, "content", None) or []:
        kind = getattr(item, "type", "")
        if kind == "text":
            parts.append(item.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind}: {getattr(item, 'mime_type', None) or ''}]")
        elif kind == "resource":
            resource = item.resource
            parts.append(getattr(resource, "text", None) or f"[resource: {resource.uri}]")
        else:
            parts.append(f"[{kind}]")
    if not parts:
        structured = getattr(result, "structured_content", None)
        if structured is not None:
            import json

            parts = [json.dumps(structured, ensure_ascii=False)]
    return cap(parts, limit)


def one_line(exc: BaseException) -> str:
    """An exception (the first of a group) as one line of at most 300 characters."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:299] + "…"


def _validator(name: str, schema: dict[str, Any]) -> Any:
    checker = jsonschema.validators.validator_for(schema)(schema)

    def validate(arguments: dict[str, Any]) -> dict[str, Any]:
        errors = sorted(checker.iter_errors(arguments), key=lambda e: list(e.absolute_path))
        if errors:
            raise pydantic.ValidationError.from_exception_data(name, [
                {"type": "value_error", "loc": tuple(e.absolute_path) or ("arguments",), "input": arguments,
                 "ctx": {"error": e.message}} for e in errors[:5]])
        return dict(arguments)

    return validate


def _as_tool(connection: MCPConnection, spec: Any, prefix: str) -> Tool:
    schema = dict(getattr(spec, "input_schema", None) or {})
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    remote = spec.name

    async def call(**arguments: Any) -> str:
        with remote_call() as budget:
            try:
                text, meta = await connection.call(remote, arguments, budget.meta)
            except MCPToolError as exc:
                budget.answered(exc.meta)  # a refused or failed remote run still spent what it spent
                raise
            budget.answered(meta)
            return text

    call.needs_scope = True  # type: ignore[attr-defined] - sees its run: the depth and budget go along
    return Tool(name=f"{prefix}{remote}", description=spec.description or remote, parameters=schema,
                function=call, is_async=True, validate=_validator(remote, schema),
                timeout=connection.timeout + 5.0)  # the server's own timeout answers first, clearly


def _refusal(spec: Any, prefix: str) -> str | None:
    """Why a tool the server offers cannot be an agio tool, or None."""
    return bad_name(f"{prefix}{spec.name}") or bad_schema(getattr(spec, "input_schema", None) or {})


_CONNECTIONS: dict[tuple[Any, ...], MCPConnection] = {}
_NAMED: dict[str, MCPConnection] = {}


def mcp_tools(server: str | Sequence[str] | MCPConnection, *, allow: Sequence[str] | None = None,
              prefix: str = "", env: dict[str, str] | None = None, cwd: str | None = None,
              timeout: float = 30.0, name: str | None = None, headers: dict[str, str] | None = None,
              max_result_chars: int = MAX_RESULT_CHARS) -> list[Tool]:
    """The tools of an MCP server: ``"python -m some_server …"`` (stdio) or ``"http://…/mcp"`` (with
    ``headers=``, e.g. ``{"Authorization": "Bearer …"}``, sent with every request).

    The same server (same command or URL, env, cwd and headers) is started once per process and reused.
    ``allow`` keeps only the named tools (an unknown name is an error: a typo must not hide a tool).
    A tool with a name providers refuse or a schema with a ``$ref`` loop is left out with a warning naming
    the server (the others are kept); a result longer than ``max_result_chars`` is cut and says so.
    """
    if isinstance(server, MCPConnection):
        connection = server
    else:
        key = (tuple(server) if not isinstance(server, str) else server, tuple(sorted((env or {}).items())), cwd,
               tuple(sorted((headers or {}).items())), max_result_chars)
        connection = _CONNECTIONS.get(key)
        if connection is None:
            connection = _CONNECTIONS[key] = MCPConnection(server, name=name, env=env, cwd=cwd, timeout=timeout,
                                                           headers=headers, max_result_chars=max_result_chars)
    connection.start()
    specs = connection.tools
    if allow is not None:
        known = {s.name for s in specs}
        missing = [n for n in allow if n not in known]
        if missing:
            raise MCPError(f"MCP server {connection.name!r} has no tool {', '.join(map(repr, missing))} "
                           f"(it has: {', '.join(sorted(map(str, known))) or 'none'})")
        specs = [s for s in specs if s.name in set(allow)]
    tools = []
    for spec in specs:
        why = _refusal(spec, prefix)
        if why is None:
            tools.append(_as_tool(connection, spec, prefix))
        elif allow is not None:  # asked for by name: the caller must know at once
            raise MCPError(f"MCP server {connection.name!r} offers tool {str(spec.name)[:80]!r}, but {why}")
        else:
            warnings.warn(MCPToolRefused(f"MCP server {connection.name!r}: tool {str(spec.name)[:80]!r} left out: "
                                         f"{why}"), stacklevel=2)
    return tools


def register_server(name: str, server: str | Sequence[str], **options: Any) -> MCPConnection:
    """Name a server for ``%%agio --mcp NAME``; it starts on first use."""
    if name in _NAMED:
        _NAMED.pop(name).close()
    connection = _NAMED[name] = MCPConnection(server, name=name, **options)
    return connection


def named_server(name: str) -> MCPConnection:
    try:
        return _NAMED[name]
    except KeyError:
        known = ", ".join(sorted(_NAMED)) or "none"
        raise MCPError(f"no MCP server named {name!r} (registered: {known}); add one with "
                       f"%agio mcp add NAME COMMAND-OR-URL") from None


def named_servers() -> dict[str, MCPConnection]:
    return dict(_NAMED)


def close_mcp_servers() -> None:
    """Close every server this process started (also run at exit)."""
    for connection in [*_CONNECTIONS.values(), *_NAMED.values()]:
        connection.close()
    _CONNECTIONS.clear()


atexit.register(close_mcp_servers)
