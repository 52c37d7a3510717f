"""agio-notebook: a Jupyter-native execution engine for LLM agents.

Every name here is imported when first used, so importing a part of the package (``agio_notebook.storage``
for the Jupyter server's Runs panel, the CLI's store commands) does not import the engine, its models and
its tools first (about 150 ms).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# name -> the module of the package that defines it
_NAMES = {
    "Agent": "agent",
    **dict.fromkeys(("AgentRun", "AgentSession", "ExecutionConfig", "RunStatus", "Step", "StepEvent", "StepEventType",
                     "StepRole"), "core"),
    **dict.fromkeys(("AgentHook", "RunResult", "StepRunner", "fork_session"), "execution"),
    **dict.fromkeys(("FunctionModel", "OpenAIModel", "Reply", "ScriptedModel", "default_model"), "models"),
    **dict.fromkeys(("Tool", "tool"), "tools"),
    "RunContext": "tools.context",
}
_FRAMES = ("runs", "steps", "tool_calls", "sessions", "run_metrics", "actions", "context", "outputs", "list_attempts")
_EXPLORE = ("diff", "sweep", "tree", "evaluate", "compare", "evaluations")
_SCHEDULING = ("batch", "resume_batch", "executions", "RateLimit")
_AGENT_RUNNER = ("AgentRunner", "AgentConfig", "CallResult")


def __getattr__(name: str) -> Any:
    value = _lazy(name)
    globals()[name] = value  # looked up once
    return value


def _lazy(name: str) -> Any:
    if name in _NAMES:
        return getattr(importlib.import_module(f"{__name__}.{_NAMES[name]}"), name)
    # frames pull in pandas; load them on first use so `import agio_notebook` stays light
    if name in _FRAMES:
        return getattr(_module("frames"), name)
    if name in _EXPLORE:
        return getattr(_module("explore"), name)
    if name in ("scoring", "memory"):  # modules of their own
        return _module(name)
    if name == "trace":  # agio_notebook.trace(run_id): the run's trace graph
        from .memory.trace import trace

        return trace
    if name == "feedback":  # agio_notebook.feedback(): every feedback item as a frame
        from .memory import feedback

        return feedback
    if name in _SCHEDULING:
        return getattr(_module("scheduling"), name)
    if name in ("serve_mcp", "serve_a2a"):  # agio_notebook.serve_mcp(agents=[...]): over MCP or A2A, from a thread
        return getattr(_module("serve"), name)
    if name == "a2a_agent":  # a remote A2A agent as a tool
        from .serve.a2a_client import a2a_agent

        return a2a_agent
    if name in _AGENT_RUNNER:
        return getattr(_module("agent_runner"), name)
    try:  # a module of the package not imported yet (``agio_notebook.frames``)
        return _module(name)
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
    raise AttributeError(f"module 'agio_notebook' has no attribute {name!r}")


def _module(name: str) -> Any:
    """A submodule, imported by name: ``from . import`` would ask this module's ``__getattr__`` first."""
    return importlib.import_module(f"{__name__}.{name}")


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where `jupyter labextension develop` finds the prebuilt transcript renderer."""
    return [{"src": "labextension", "dest": "agio-notebook"}]


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext agio_notebook`: register the %agio / %%agio magics."""
    from .notebook.magics import load_ipython_extension as load

    load(ipython)


__all__ = [
    "RunContext",
    "Agent", "AgentHook", "AgentRun", "AgentSession", "ExecutionConfig", "FunctionModel", "OpenAIModel", "Reply",
    "RunResult", "RunStatus", "ScriptedModel", "Step", "StepEvent", "StepEventType", "StepRole", "StepRunner",
    "Tool", "default_model", "fork_session", "tool", "memory", "trace", "feedback", *_FRAMES, *_EXPLORE,
    *_SCHEDULING, *_AGENT_RUNNER, "serve_mcp",
]
