"""Agents as tools: an agent tool's call runs the agent in a nested run of its own.

The nested run is a run like any other (its own session, steps and events in the same store), linked
both ways: its record names the outer run, the outer assistant step and the tool call that asked
(``parent_run_id``, ``parent_step_id``, ``parent_tool_call_id``, ``depth``, ``root_run_id``), and the
outer tool step names it (``extra["nested_run"]``). Its events stream into the outer run's stream
(``nested`` events, see ``nested.py``); its final answer is the tool's result, and a failure or a
cancellation of its own becomes a tool error the outer model sees.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator

from ..agent import AgentCall
from ..core import AgentRun, AgentSession, ExecutionConfig, RunStatus, StepEvent, StepEventType
from ..tools.context import get_call
from .handoff import hand_off
from .remote import remote_call
from .runner import StepRunner
from .nested import MAX_DEPTH, ParentLink, Scope, current_agents, current_scope, forward, tree_of

_E = StepEventType


class NestedRunError(RuntimeError):
    """A nested run ended without an answer, or could not start; the outer model sees the message."""


def _query_text(call: AgentCall, query: str, input: Any) -> str:  # noqa: A002
    if input is None:
        return query
    data = input.model_dump(mode="json") if hasattr(input, "model_dump") else input
    return f"{query}\n\nInput:\n{json.dumps(data, ensure_ascii=False, indent=1)}"


def _arguments(query: str, input: Any) -> str:  # noqa: A002
    """The call's arguments as the model sent them (for matching a recorded call)."""
    args: dict[str, Any] = {"query": query}
    if input is not None:
        args["input"] = input.model_dump(mode="json") if hasattr(input, "model_dump") else input
    return json.dumps(args)


async def call_agent(call: AgentCall, query: str, input: Any = None) -> str:  # noqa: A002
    """Run ``call.agent`` on ``query`` under the run whose tool call this is; its final answer."""
    agent = call.agent
    ctx, scope = get_call(), current_scope.get()
    text = _query_text(call, query, input)
    if ctx is None or scope is None:  # only a run hands agent tools their engine, with a scope
        raise NestedRunError(f"agent {agent.name!r} can only be called as a tool inside a run")
    parent = scope.run
    chain = (*scope.agents, parent.agent_name or "?", agent.name)
    if parent.depth + 1 > MAX_DEPTH:
        raise NestedRunError(f"agent {agent.name!r} not called: agents may nest {MAX_DEPTH} levels deep "
                             f"({' → '.join(chain)})")
    recorded = _recorded(scope, ctx.tool_name, _arguments(query, input))
    if recorded is not None:  # retry/fork with reuse: an unchanged call answers from its recorded run
        ctx.step_extra["nested_run"] = {**recorded.extra.get("nested_run", {}), "reused": True}
        return recorded.content or ""
    model = scope.model
    if getattr(model, "replays_tree", False):  # a replay of a recorded tree answers the nested calls too
        agent = agent.with_model(model)
    link = ParentLink(parent.id, scope.calls.get(ctx.tool_call_id), ctx.tool_call_id, parent.depth + 1,
                      parent.tree_root_id)
    session = AgentSession(title=f"{agent.name} (nested in run {parent.id[:8]})",
                           metadata={"parent_run_id": parent.id, "parent_session_id": parent.session_id})
    repository = ctx.repository if ctx.repository is not None else scope.recorder.repository
    config = agent.config or ExecutionConfig()
    runner = StepRunner(agent, config=config, repository=repository, approver=scope.approver)
    tree = tree_of(parent)
    refused = tree.start_nested() if tree is not None else None
    if refused is not None:
        raise NestedRunError(f"agent {agent.name!r} not called: {refused}")
    final: AgentRun | None = None
    child_id: str | None = None
    token = current_agents.set(chain[:-1])
    try:
        stream = runner.run_stream(session, text, deps=ctx.deps, _parent=link)  # the caller's deps
        async for event in _own_cancel_ends(stream):
            if child_id is None:
                child_id = event.run_id
                ctx.step_extra["nested_run"] = {"run_id": child_id, "session_id": session.session_id,
                                                "agent": agent.name}
            forward(scope, ctx.tool_call_id, child_id, event)
            if event.run_id == child_id and event.type.is_terminal:
                final = AgentRun.from_dict(event.payload["run"])
    finally:
        current_agents.reset(token)
    if final is None:  # the stream ended without a terminal event: never by design, said plainly if it does
        raise NestedRunError(f"agent {agent.name!r}: its nested run ended without an outcome")
    return _answer(agent.name, final)


async def _own_cancel_ends(stream: AsyncIterator[StepEvent]) -> AsyncIterator[StepEvent]:
    """The nested run's events; a cancellation of the nested run alone (not of the task running the outer
    run) ends the stream after its ``run_cancelled``, so it becomes a tool error like any other ending."""
    try:
        async for event in stream:
            yield event
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # the outer run is being cancelled: it goes on up


def _recorded(scope: Scope, name: str, arguments: str) -> Any:
    recording = scope.recording
    if recording is None or not recording.reuse or not recording.has_tool_result(name, arguments):
        return None
    return recording.take_tool_result(name, arguments)


def _answer(name: str, run: AgentRun) -> str:
    if run.status is RunStatus.COMPLETED:
        return run.final_text or ""
    raise NestedRunError(f"agent {name!r} (nested run {run.id[:8]}) ended {run.status.value}"
                         + (f": {run.error}" if run.error else ""))


# what a run hands its tools as their engine (ToolCallContext.engine): agents as tools, handoffs, and calls
# to agents in other processes (the limits they carry there and the spend they bring back)
__all__ = ["NestedRunError", "call_agent", "hand_off", "remote_call"]
