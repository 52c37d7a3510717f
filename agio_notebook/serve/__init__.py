"""The notebook's agents and the store, served to any MCP client.

From a notebook or a script: ``server = agio_notebook.serve_mcp(agents=[researcher])`` serves over
streamable HTTP on loopback from a background thread (``server.url``, ``server.headers`` carry the
bearer token; ``server.stop()``). From a terminal: ``agio mcp serve --agents my_agents:team`` (stdio) or
``--http``. What a token holder can reach is ``access.py``'s rules. See ``docs/serving.md``.
"""

from __future__ import annotations

from typing import Any, Iterable

from ..storage import current_store, open_repository
from ..storage.base import Repository
from .agents import load_agents, named_agents
from .http import HTTPServer, new_token, start_http
from .server import build_server, http_app


def serve_mcp(agents: Any, *, store: Repository | str | None = None, host: str = "127.0.0.1", port: int = 0,
              token: str | None = None, allowed_hosts: Iterable[str] = (), allowed_origins: Iterable[str] = (),
              expose_store: bool = False) -> HTTPServer:
    """Serve ``agents`` (an Agent, a list, or a dict name -> Agent) and their runs over streamable HTTP.

    A bearer ``token`` is always required (a new random one unless given); the server binds to loopback
    unless ``host`` says otherwise, and answers only requests whose Host names it (``allowed_hosts`` adds
    names, e.g. a proxy's; ``allowed_origins`` adds browser origins). Clients see the served agents' own
    runs only, unless ``expose_store=True`` shows them every run of the store.
    """
    repository = store if isinstance(store, Repository) else (open_repository(store) if store else current_store())
    server = build_server(named_agents(agents), repository, expose_store=expose_store)
    return start_http(http_app(server), token or new_token(), host, port, allowed_hosts=allowed_hosts,
                      allowed_origins=allowed_origins)


__all__ = ["HTTPServer", "build_server", "http_app", "load_agents", "named_agents", "new_token", "serve_mcp",
           "start_http"]
