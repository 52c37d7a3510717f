"""A small MCP server built on the SDK, for the edge cases a reference server does not show:
a tool error, a hang, a crash.  ``python mcp_edge_server.py [stdio | http PORT]``."""

from __future__ import annotations

import os
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("agio-edge")


@server.tool()
def echo(text: str, times: int = 1) -> str:
    """Repeat the text.

    Args:
        text: what to repeat
        times: how many times
    """
    return " ".join([text] * times)


@server.tool()
def fail(reason: str) -> str:
    """Always fails with the given reason (a failure the model reads)."""
    raise ToolError(reason)


@server.tool()
def hang(seconds: float) -> str:
    """Sleeps, so the caller's timeout answers first."""
    time.sleep(seconds)
    return "woke up"


@server.tool()
def crash() -> str:
    """Kills the server process mid-call."""
    os._exit(3)


@server.tool()
def pid() -> str:
    """The server's process id, so a test can see a restart."""
    return str(os.getpid())


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        import anyio

        anyio.run(lambda: server.run_streamable_http_async(host="127.0.0.1", port=int(sys.argv[2])))
    else:
        server.run("stdio")
