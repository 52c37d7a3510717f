"""agio-notebook: a Jupyter-native execution engine for LLM agents."""

from __future__ import annotations

from typing import Any

from .agent import Agent
from .core import (AgentRun, AgentSession, ExecutionConfig, RunStatus, Step, StepEvent, StepEventType,
                   StepRole)
from .execution import AgentHook, RunResult, StepRunner, fork_session
from .models import FunctionModel, OpenAIModel, Reply, ScriptedModel, default_model
from .tools import Tool, tool
from .tools.context import RunContext

__version__ = "0.1.0"

_FRAMES = ("runs", "steps", "tool_calls", "sessions", "run_metrics", "actions", "context", "outputs", "list_attempts")
_EXPLORE = ("diff", "sweep", "tree", "evaluate", "compare", "evaluations")
_SCHEDULING = ("batch", "resume_batch", "executions", "RateLimit")
_AGENT_RUNNER = ("AgentRunner", "AgentConfig", "CallResult")


def __getattr__(name: str) -> Any:
    # frames pull in pandas; load them on first use so `import agio_notebook` stays light
    if name in _FRAMES:
        from . import frames

        return getattr(frames, name)
    if name in _EXPLORE:
        from . import explore

        return getattr(explore, name)
    if name == "scoring":  # a module of its own (import_module: `from . import` would ask this hook again)
        import importlib

        return importlib.import_module(f"{__name__}.scoring")
    if name == "memory":
        from . import memory

        return memory
    if name == "trace":  # agio_notebook.trace(run_id): the run's trace graph
        from .memory.trace import trace

        return trace
    if name == "feedback":  # agio_notebook.feedback(): every feedback item as a frame
        from .memory import feedback

        return feedback
    if name in _SCHEDULING:
        from . import scheduling

        return getattr(scheduling, name)
    if name in ("serve_mcp", "serve_a2a"):  # agio_notebook.serve_mcp(agents=[...]): over MCP or A2A, from a thread
        from . import serve

        return getattr(serve, name)
    if name == "a2a_agent":  # a remote A2A agent as a tool
        from .serve.a2a_client import a2a_agent

        return a2a_agent
    if name in _AGENT_RUNNER:
        from . import agent_runner

        return getattr(agent_runner, name)
    raise AttributeError(f"module 'agio_notebook' has no attribute {name!r}")


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
