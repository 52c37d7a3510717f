"""Helpers for the action tests: a scripted agent that makes one tool call and answers."""

from __future__ import annotations

import asyncio
from typing import Any

from agio_notebook import Agent, ExecutionConfig, ScriptedModel, StepRunner
from agio_notebook.models.scripted import Reply


def run_calls(repo: Any, session: str, tools: list[Any], *calls: tuple[str, dict[str, Any]],
              tool_timeout: float = 60.0):
    """One run in ``session``: the model makes ``calls`` one turn each, then says "done"."""
    replies = [Reply.call(name, **args) for name, args in calls] + [Reply.say("done")]
    agent = Agent(model=ScriptedModel(replies), tools=tools,
                  config=ExecutionConfig(tool_timeout=tool_timeout, enable_retry=False))
    return asyncio.run(StepRunner(agent, repository=repo).run(session, "go"))


def tool_steps(result: Any) -> list[Any]:
    return [s for s in result.steps if s.role.value == "tool"]


def one_tool_step(repo: Any, session: str, tools: list[Any], name: str, **args: Any) -> Any:
    result = run_calls(repo, session, tools, (name, args))
    (step,) = tool_steps(result)
    return step
