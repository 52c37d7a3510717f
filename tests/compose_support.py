"""Agents that call agents, for the composition tests: function models that decide from the messages."""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from agio_notebook import Agent, FunctionModel, tool
from agio_notebook.models.scripted import Reply, ToolCallSpec, call


class Brain:
    """A model for one agent: on a user message it makes ``make_calls(query)`` (if any), and once tool
    results are in it answers with them. ``calls`` counts its model calls."""

    def __init__(self, name: str, make_calls: Callable[[str], list[ToolCallSpec]] | None = None):
        self.label = name
        self.make_calls = make_calls or (lambda q: [])
        self.calls = 0
        self.model = FunctionModel(self, name=f"brain-{name}")

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        self.calls += 1
        last = messages[-1]
        if last["role"] == "user":
            made = self.make_calls(last["content"])
            if made:
                return Reply.calls(*made)
        results = [m["content"] for m in messages[messages.index(_last_user(messages)):] if m["role"] == "tool"]
        return f"{self.label}: " + " | ".join(results) if results else f"{self.label} answers {last['content']}"


def _last_user(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return next(m for m in reversed(messages) if m["role"] == "user")


def tree_of_agents(gate: asyncio.Event | None = None, leaf_delay: float = 0.05) -> tuple[Agent, dict[str, Brain]]:
    """planner (depth 0) → two researchers in parallel (1) → a checker each (2) → a source each (3)."""

    @tool
    async def lookup(topic: str) -> str:
        """Look up a topic."""
        if gate is not None:
            await gate.wait()
        await asyncio.sleep(leaf_delay)  # the two branches overlap in time
        return f"fact about {topic}"

    brains = {
        "source": Brain("source", lambda q: [call("lookup", topic=q.split()[-1])]),
        "checker": Brain("checker", lambda q: [call("source", query=q)]),
        "researcher": Brain("researcher", lambda q: [call("checker", query=q)]),
        "planner": Brain("planner", lambda q: [call("researcher", query="cats"), call("researcher", query="dogs")]),
    }
    source = Agent(model=brains["source"].model, tools=[lookup], name="source")
    checker = Agent(model=brains["checker"].model, tools=[source], name="checker")
    researcher = Agent(model=brains["researcher"].model, tools=[checker], name="researcher",
                       description="finds facts")
    planner = Agent(model=brains["planner"].model, tools=[researcher], name="planner")
    return planner, brains
