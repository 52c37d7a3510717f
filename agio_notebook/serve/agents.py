"""Which agents a server serves: ``module:attribute`` paths or objects, each under one tool name."""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import re
from typing import Any, Iterable, Mapping

from ..agent import Agent
from ..core import AgioError

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
RESERVED = {"list_runs", "list_sessions", "read_transcript", "retry", "fork"}


def load_agents(path: str) -> dict[str, Agent]:
    """``package.module:attribute``: an Agent, a list of Agents, a dict name -> Agent, or a function
    returning one of those."""
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise AgioError(f"--agents takes module:attribute (e.g. my_agents:researcher), got {path!r}")
    try:
        module = _import_from_here(module_name)
    except ImportError as exc:
        raise AgioError(f"--agents {path}: cannot import {module_name!r} ({exc})") from None
    try:
        value = getattr(module, attribute)
    except AttributeError:
        raise AgioError(f"--agents {path}: module {module_name!r} has no attribute {attribute!r}") from None
    if inspect.isfunction(value):  # a factory: called once, with no arguments
        try:
            value = value()
        except Exception as exc:  # noqa: BLE001 - the user's factory failing is one line, not a traceback
            raise AgioError(f"--agents {path}: calling {attribute}() failed: {type(exc).__name__}: {exc}") from None
    return named_agents(value, where=f"--agents {path}")


def load_agent_paths(paths: Iterable[str], what: str) -> dict[str, Agent]:
    """The agents of several ``module:attribute`` paths (``--agents`` repeated), names unique across them."""
    agents: dict[str, Agent] = {}
    for path in paths:
        for name, agent in load_agents(path).items():
            if name in agents:
                raise AgioError(f"--agents: two agents are named {name!r}")
            agents[name] = agent
    if not agents:
        raise AgioError(f"{what}: name the agents to serve with --agents module:attribute")
    return agents


def _import_from_here(module_name: str) -> Any:
    """Import as ``python -m`` would: the working directory first on the path (the ``agio`` command's own
    directory is not where a user's ``my_agents.py`` lives)."""
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)
    return importlib.import_module(module_name)


def named_agents(value: Any, *, where: str = "agents") -> dict[str, Agent]:
    """One name per agent: a dict's keys, else each agent's ``name``; names must be unique tool names."""
    if isinstance(value, Agent):
        items: Iterable[tuple[str, Any]] = [(value.name, value)]
    elif isinstance(value, Mapping):
        items = value.items()
    elif isinstance(value, (list, tuple)):
        items = [(getattr(a, "name", None), a) for a in value]
    else:
        raise AgioError(f"{where}: expected an Agent, a list of Agents or a dict of them, got {type(value).__name__}")
    named: dict[str, Agent] = {}
    for name, agent in items:
        if not isinstance(agent, Agent):
            raise AgioError(f"{where}: {name!r} is a {type(agent).__name__}, not an Agent")
        if not isinstance(name, str) or not _NAME.match(name):
            raise AgioError(f"{where}: {name!r} cannot be a tool name (letters, digits, _ and -, at most 64)")
        if name in RESERVED:
            raise AgioError(f"{where}: an agent may not be called {name!r}: the server has a tool of that name")
        if name in named:
            raise AgioError(f"{where}: two agents are named {name!r}; give them different Agent(name=...)")
        named[name] = agent
    if not named:
        raise AgioError(f"{where}: no agents to serve")
    return named
