"""Handoffs: an agent hands the conversation to another (``Agent(handoffs=[...])``).

A ``transfer_to_<name>`` call is a tool step like any other, with ``extra["handoff"]`` saying who handed
to whom. Once the turn's tool results are in, the run goes on with the new agent: its model, tools and
instructions (the executor switches in place, so it is still one run and one loop), and a ``handoff``
event tells the views. The run record's ``agent_name`` is the agent that answered; the next run in the
session starts with the agent holding it (:func:`holder`). Only the first handoff of a turn is honoured;
the others, and a handoff back to an agent that already held the conversation in this run (a cycle),
are tool errors the model sees.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from ..agent import HANDOFF_PREFIX, Agent, Handoff
from ..core import InvalidOperationError, Step, StepEvent, StepEventType, StepRole, ToolCall
from ..tools import ToolResult
from ..tools.context import RunContext, get_call
from .nested import current_scope

if TYPE_CHECKING:
    from .recorder import RunRecorder


class HandoffError(RuntimeError):
    """A handoff that is not made; the model sees why."""


async def hand_off(handoff: Handoff, reason: str | None = None) -> str:
    """The ``transfer_to_<name>`` tool: checks the handoff may happen and records it on the tool step."""
    ctx, scope = get_call(), current_scope.get()
    target = handoff.target.name
    if ctx is None or scope is None:
        raise HandoffError(f"a handoff to {target!r} only works inside a run")
    rec = scope.recorder
    asking = next((s for s in reversed(rec.steps) if s.role is StepRole.ASSISTANT), None)
    calls = asking.tool_calls if asking is not None else []
    first = next((c for c in calls if c.name.startswith(HANDOFF_PREFIX)), None)
    if first is not None and first.id != ctx.tool_call_id:
        raise HandoffError(f"not handed to {target!r}: only the first handoff of a turn is honoured "
                           f"({first.name} was first)")
    chain = holders(rec.steps, handoff.source)
    if target in chain:
        raise HandoffError(f"handoff to {target!r} refused: a cycle of handoffs in one turn "
                           f"({' → '.join([*chain, target])})")
    ctx.step_extra["handoff"] = {"from": handoff.source, "to": target, "reason": reason}
    return f"The conversation is now with agent {target!r}."


def holders(steps: Iterable[Step], current: str) -> list[str]:
    """The agents that held the conversation through a run's ``steps``, in order; ``current`` holds it now."""
    made = [s.extra["handoff"] for s in steps
            if s.role is StepRole.TOOL and s.status == "ok" and "handoff" in s.extra and not s.superseded]
    return [made[0]["from"], *(h["to"] for h in made)] if made else [current]


def take_handoff(executor: Any, rec: RunRecorder, calls: list[ToolCall],
                 results: dict[str, ToolResult]) -> StepEvent | None:
    """After a turn's tools: if one of them handed off, the run goes on with the new agent."""
    for call in calls:
        result = results.get(call.id)
        tool = executor.registry.get(call.name)
        if result is None or result.status != "ok" or tool is None or not isinstance(tool.function, Handoff):
            continue
        if "handoff" not in result.step_extra:
            continue
        target: Agent = tool.function.target
        switch(executor, rec, target)
        return rec.emit(StepEventType.HANDOFF, {"tool_call_id": call.id, "from": tool.function.source,
                                                "to": target.name, "model_name": rec.run.model_name,
                                                "reason": result.step_extra["handoff"].get("reason")})
    return None


def switch(executor: Any, rec: RunRecorder, agent: Agent) -> None:
    """Point a running executor at ``agent``: its model, settings, tools and instructions."""
    if getattr(executor.model, "replays_tree", False):  # a replayed tree answers the new agent's calls too
        agent = agent.with_model(executor.model)
    executor.use(agent)
    # a new list (the executor digests a context it sees change identity afresh)
    body = rec.messages[1:] if rec.messages and rec.messages[0].get("role") == "system" else rec.messages
    instructions = agent.instructions(RunContext(rec.deps, rec.run.session_id, rec.run.id, agent.name))
    rec.instructions = instructions
    rec.messages = ([{"role": "system", "content": instructions}] if instructions else []) + body
    rec.run.agent_name, rec.run.model_name = agent.name, agent.model_name
    rec.run.output_type = agent.output.name if agent.output is not None else None  # the answer's type is its
    rec.mark_run_dirty()


def reachable(agent: Agent) -> dict[str, Agent]:
    """Every agent ``agent`` can hand off to, directly or through others, by name (itself included)."""
    found: dict[str, Agent] = {}
    queue = [agent]
    while queue:
        a = queue.pop(0)
        if a.name in found:
            continue
        found[a.name] = a
        queue.extend(t.function.target for t in a.registry if isinstance(t.function, Handoff))
    return found


def holder(agent: Agent, steps: list[Step]) -> Agent:
    """The agent that holds a session: the target of its last handoff, else ``agent``.

    A holder ``agent`` cannot reach through its handoffs is one clear error (nothing is stored).
    """
    last = None
    for step in steps:
        handoff = step.extra.get("handoff") if step.role is StepRole.TOOL and step.status == "ok" else None
        if handoff and not step.superseded:
            last = handoff["to"]
    if last is None or last == agent.name:
        return agent
    known = reachable(agent)
    if last not in known:
        raise InvalidOperationError(
            f"this session was handed off to agent {last!r}, which agent {agent.name!r} cannot reach "
            f"(it knows: {', '.join(sorted(known))}); run the session with that agent")
    return known[last]
