"""Built-in actions: sandboxed Python, workspace files, web fetch and a browser, recorded as a graph.

Each toolkit is a function returning ordinary tools::

    Agent(tools=[*python_sandbox(), *workspace_files(), web_fetch(), *browser()])

Every action is recorded (``ContextGraphRecorder``) on the tool step that asked for it, and the
session's workspace follows retries and forks (``workspace.py``).  See ``docs/actions.md``.
"""

from __future__ import annotations

from typing import Any

from .errors import ActionError, IsolationUnavailable
from .files import FileLimits, workspace_files
from .python_tool import python_sandbox, replay_python
from .recorder import ContextGraphRecorder
from .sandbox import SandboxLimits
from .workspace import Workspace, prune_workspaces, workspace_for

_LAZY = {"web_fetch": ".web", "WebLimits": ".web", "browser": ".browser_tool", "close_browsers": ".browser_tool", "BrowserLimits": ".browser_tool",
         "ExecutionEngine": ".engine", "Action": ".engine", "ExecutionResult": ".engine",
         "execute_with_reflection": ".engine"}


def __getattr__(name: str) -> Any:
    # httpx and playwright load on first use
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def toolkit(names: str | list[str], **options: Any) -> list[Any]:
    """Tools by short name, as in ``%%agio --tools python,files,web,browser``."""
    wanted = [n.strip() for n in (names.split(",") if isinstance(names, str) else names) if n.strip()]
    makers = {"python": lambda: python_sandbox(**options.get("python", {})),
              "files": lambda: workspace_files(**options.get("files", {})),
              "web": lambda: [__getattr__("web_fetch")(**options.get("web", {}))],
              "browser": lambda: __getattr__("browser")(**options.get("browser", {}))}
    unknown = [n for n in wanted if n not in makers]
    if unknown:
        raise ActionError(f"unknown toolkit(s) {', '.join(unknown)} (choose from {', '.join(makers)})")
    return [t for n in wanted for t in makers[n]()]


__all__ = ["Action", "ActionError", "BrowserLimits", "ContextGraphRecorder", "ExecutionEngine", "ExecutionResult",
           "FileLimits", "IsolationUnavailable", "SandboxLimits", "WebLimits", "Workspace", "browser",
           "close_browsers", "execute_with_reflection", "prune_workspaces", "python_sandbox", "replay_python", "toolkit", "web_fetch",
           "workspace_files", "workspace_for"]
