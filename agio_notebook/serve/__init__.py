"""The notebook's agents and their runs, served to any MCP or A2A client.

From a notebook or a script: ``server = agio_notebook.serve_mcp(agents=[researcher])`` serves MCP over
streamable HTTP, ``agio_notebook.serve_a2a(agents=[researcher])`` serves A2A, each on loopback from a
background thread (``server.url``, ``server.headers`` carry the bearer token; ``server.stop()``). From a
terminal: ``agio mcp serve --agents my_agents:team`` (stdio, or ``--http``), ``agio a2a serve --agents
my_agents:team``. What a token holder can reach is ``access.py``'s rules. See ``docs/serving.md``.
"""

from __future__ import annotations

from typing import Any, Iterable

from ..storage import current_store, open_repository
from ..storage.base import Repository
from .agents import load_agent_paths, load_agents, named_agents
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


def serve_a2a(agents: Any, *, store: Repository | str | None = None, host: str = "127.0.0.1", port: int = 0,
              token: str | None = None, allowed_hosts: Iterable[str] = (), allowed_origins: Iterable[str] = (),
              expose_store: bool = False) -> HTTPServer:
    """Serve ``agents`` over A2A (the ``a2a-sdk``), each at ``server.urls[name]`` (its card at
    ``…/.well-known/agent-card.json``); the same token, Host/Origin and access rules as :func:`serve_mcp`."""
    try:
        from .a2a_server import agent_urls, build_a2a_app
    except ImportError as exc:  # the A2A SDK is an extra
        raise ImportError(f"serving A2A needs the A2A SDK: pip install 'agio-notebook[a2a]' ({exc})") from None
    named = named_agents(agents)
    repository = store if isinstance(store, Repository) else (open_repository(store) if store else current_store())
    app = build_a2a_app(named, repository, expose_store=expose_store)
    server = start_http(app, token or new_token(), host, port, path="", allowed_hosts=allowed_hosts,
                        allowed_origins=allowed_origins, what="A2A")
    server.urls = agent_urls(server.url, named)
    return server


__all__ = ["HTTPServer", "build_server", "http_app", "load_agent_paths", "load_agents", "named_agents", "new_token", "serve_a2a",
           "serve_mcp", "start_http"]
