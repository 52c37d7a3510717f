"""The notebook's agents and the store, served to any MCP client.

From a notebook or a script: ``server = agio_notebook.serve_mcp(agents=[researcher])`` serves over
streamable HTTP on loopback from a background thread (``server.url``, ``server.headers`` carry the
bearer token; ``server.stop()``). From a terminal: ``agio mcp serve --agents my_agents:team`` (stdio) or
``--http``. See ``docs/serving.md``.
"""

from __future__ import annotations

from typing import Any

from ..storage import current_store, open_repository
from ..storage.base import Repository
from .agents import load_agents, named_agents
from .http import HTTPServer, new_token, start_http
from .server import build_server


def serve_mcp(agents: Any, *, store: Repository | str | None = None, host: str = "127.0.0.1", port: int = 0,
              token: str | None = None) -> HTTPServer:
    """Serve ``agents`` (an Agent, a list, or a dict name -> Agent) and the store over streamable HTTP.

    A bearer ``token`` is always required (a new random one unless given); the server binds to
    loopback unless ``host`` says otherwise.
    """
    repository = store if isinstance(store, Repository) else (open_repository(store) if store else current_store())
    server = build_server(named_agents(agents), repository)
    return start_http(server.streamable_http_app(host=host), token or new_token(), host, port)


__all__ = ["HTTPServer", "build_server", "load_agents", "named_agents", "new_token", "serve_mcp", "start_http"]
