"""Helpers for the action tests: a scripted agent that makes one tool call and answers."""

from __future__ import annotations

import asyncio
import os
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


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid``, read from /proc (what a kill must leave nothing of)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found
