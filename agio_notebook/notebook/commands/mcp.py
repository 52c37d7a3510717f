"""``%agio mcp add|list|close``: name MCP servers for ``%%agio --mcp NAME``."""

from __future__ import annotations

import os
from typing import Any

from ...tools.base import Tool
from . import arg, command


def tools_for(names: str) -> list[Tool]:
    """The tools of the servers named in ``--mcp a,b`` (each started once, then reused)."""
    from ...tools.mcp import mcp_tools, named_server

    tools: list[Tool] = []
    for name in filter(None, (n.strip() for n in names.split(","))):
        tools += mcp_tools(named_server(name))
    return tools


@command("mcp", "MCP servers: `add NAME -- COMMAND…` or `add NAME URL` names one for %%agio --mcp NAME (it starts on first "
                "use); `list` shows them; `close NAME` stops one",
         arg("action", choices=["add", "list", "close"]), arg("name", nargs="?", default=None),
         arg("target", nargs="*", help="the server's command line, or its streamable HTTP URL"),
         arg("--timeout", type=float, default=30.0, help="seconds one tool call may take"))
def mcp(c: Any, args: Any) -> Any:
    from ...tools.mcp import MCPError, named_server, named_servers, register_server

    if args.action == "list":
        import pandas as pd

        servers = named_servers()
        return pd.DataFrame({
            "name": list(servers),
            "server": [s.url or " ".join([os.path.basename(s.argv[0]), *s.argv[1:]]) if s.argv else s.url
                       for s in servers.values()],
            "running": [s.running for s in servers.values()],
            "tools": [", ".join(t.name for t in s.tools) for s in servers.values()],
        })
    if not args.name:
        raise MCPError(f"%agio mcp {args.action}: name the server")
    if args.action == "close":
        named_server(args.name).close()
        print(f"agio: MCP server {args.name!r} closed")
        return None
    if not args.target:
        raise MCPError("%agio mcp add NAME: give the server's command line or URL after its name")
    target = args.target[0] if len(args.target) == 1 and args.target[0].startswith(("http://", "https://")) \
        else list(args.target)
    register_server(args.name, target, timeout=args.timeout)
    print(f"agio: MCP server {args.name!r} registered; `%%agio --mcp {args.name}` gives a cell its tools")
    return None
