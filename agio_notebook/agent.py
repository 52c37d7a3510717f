"""Agent: a model, its tools and its instructions — what a runner runs."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import pydantic

from .core import AgentSession, ExecutionConfig
from .models import default_model
from .models.base import Model
from .models.settings import check_settings
from .tools import Tool, ToolRegistry, tool
from .tools.context import get_call
from .tools.decorator import _inline_refs


_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

def _engine(what: str) -> Any:
    """The engine running this tool call (its context's ``engine``: ``execution.agent_tool``), handed down by
    the run, so this module imports nothing above it; outside a run there is none."""
    ctx = get_call()
    if ctx is None or ctx.engine is None:
        raise RuntimeError(f"{what} runs inside a run of the agent that has it; to run an agent on its own, "
                           "use agent.run_sync(query) or StepRunner(agent)")
    return ctx.engine


class AgentCall:
    """The function of an agent tool: calling it runs the agent in a nested run (see Agent.as_tool)."""

    needs_scope = True  # runs under the calling run (see execution/nested.py)

    def __init__(self, agent: Agent, input_model: type[pydantic.BaseModel] | None):
        self.agent = agent
        self.input_model = input_model

    async def __call__(self, query: str, input: Any = None) -> str:  # noqa: A002 - the model's word
        return await _engine(f"agent tool {self.agent.name!r}").call_agent(self, query, input)


class Handoff:
    """The function of a ``transfer_to_<name>`` tool: the conversation goes to ``target``."""

    needs_scope = True

    def __init__(self, source: str, target: Agent):
        self.source = source
        self.target = target

    async def __call__(self, reason: str | None = None) -> str:
        return await _engine(f"the handoff to {self.target.name!r}").hand_off(self, reason)


def _tool_name(name: str, what: str) -> str:
    if not isinstance(name, str) or not _TOOL_NAME.match(name):
        raise ValueError(f"{what} must be 1-64 letters, digits, '_' or '-' (a tool name), got {name!r}")
    return name


HANDOFF_PREFIX = "transfer_to_"


def handoff_tool_name(agent: Agent) -> str:
    return f"{HANDOFF_PREFIX}{agent.name}"


@dataclass
class Agent:
    """Plain functions in ``tools`` are wrapped with :func:`agio_notebook.tool`; an ``Agent`` in ``tools``
    becomes an agent tool (:meth:`as_tool`): the model calls it with a query and gets its final answer.

    ``model=None`` picks :func:`agio_notebook.models.default_model` (offline unless an endpoint is
    configured).  ``config`` is the agent's default :class:`ExecutionConfig`; a runner's own wins.
    ``memory`` is an :class:`agio_notebook.memory.MemoryConfig` (None: the defaults, retrieval on).
    ``model_settings`` (``temperature``, ``max_tokens``, ``tool_choice``, ``extra_body``...) go with every
    model call; a run's ``ExecutionConfig.model_settings`` (e.g. from ``%%agio --settings``) override them.
    """

    model: Model | None = None
    tools: Sequence[Tool | Callable[..., Any]] = ()
    system_prompt: str | None = None
    name: str = "agent"
    config: ExecutionConfig | None = None
    memory: Any = None
    model_settings: dict[str, Any] | None = None
    # agents this one may hand the conversation to: a ``transfer_to_<name>`` tool each (see docs/compose.md)
    handoffs: Sequence[Agent] = ()
    description: str | None = None  # what the agent does, for the models that may call it or hand off to it
    registry: ToolRegistry = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.model is None:
            self.model = default_model()
        self.model_settings = check_settings(self.model_settings) or None
        self.registry = ToolRegistry([t if isinstance(t, Tool) else t.as_tool() if isinstance(t, Agent) else tool(t)
                                      for t in self.tools])
        for t in self.registry:  # the prefix is the handoffs': a tool of that name would block a real one
            if t.name.startswith(HANDOFF_PREFIX) and not isinstance(t.function, Handoff):
                raise ValueError(f"agent {self.name!r}: tool {t.name!r} may not start with {HANDOFF_PREFIX!r}, "
                                 "which names handoffs (Agent(handoffs=[...])); rename the tool")
        for target in self.handoffs:
            if not isinstance(target, Agent):
                raise TypeError(f"agent {self.name!r}: handoffs must be Agents, got {type(target).__name__}")
            if target is self:
                raise ValueError(f"agent {self.name!r} cannot hand off to itself")
            self.registry.add(self._handoff_tool(target))

    def _handoff_tool(self, target: Agent) -> Tool:
        name = _tool_name(handoff_tool_name(target), f"agent {self.name!r}: the handoff tool name")
        about = f" ({target.description})" if target.description else ""
        args = pydantic.create_model(f"{name}_arguments", __config__=pydantic.ConfigDict(extra="forbid"),
                                     reason=(str | None, None))
        return Tool(name=name, description=f"Hand the conversation to the agent {target.name!r}{about}. "
                                            "It answers from then on, with its own tools and instructions.",
                    parameters={"type": "object", "properties": {"reason": {
                        "type": "string", "description": "why the conversation goes to that agent"}},
                        "required": []},
                    function=Handoff(self.name, target), is_async=True,
                    validate=lambda a: dict(args.model_validate(a).__dict__))

    def as_tool(self, name: str | None = None, description: str | None = None,
                input: type[pydantic.BaseModel] | None = None) -> Tool:  # noqa: A002 - as the issue names it
        """This agent as a tool of another: the model sends a ``query`` (and, with ``input``, a structured
        ``input`` validated by that pydantic model); the agent runs its own loop in a nested run of its own,
        and its final answer is the tool's result. See docs/compose.md.
        """
        name = _tool_name(name or self.name, "an agent tool's name")
        if input is not None and not (isinstance(input, type) and issubclass(input, pydantic.BaseModel)):
            raise TypeError(f"agent tool {name!r}: input must be a pydantic model class, got {input!r}")
        fields: dict[str, Any] = {"query": (str, pydantic.Field(description="what to ask the agent"))}
        if input is not None:
            fields["input"] = (input, pydantic.Field(description="structured input for the agent"))
        args = pydantic.create_model(f"{name}_arguments", __config__=pydantic.ConfigDict(extra="forbid"), **fields)
        schema = _inline_refs(args.model_json_schema())
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        text = description or self.description or f"Ask the agent {self.name!r}; its final answer comes back."
        # a nested run may take long: the agent's own limits (max_steps, timeouts) bound it, not tool_timeout
        return Tool(name=name, description=text, parameters=schema, function=AgentCall(self, input),
                    is_async=True, validate=lambda a: dict(args.model_validate(a).__dict__), timeout=86400.0)

    @property
    def model_name(self) -> str:
        return getattr(self.model, "name", type(self.model).__name__)

    @property
    def fingerprint(self) -> str:
        """Who this agent is, the same in every process: its name, instructions and tool names (not its
        model). A session records the fingerprint of the agent that made it (:func:`stamp_owner`); a server
        continues only the sessions of the agents it serves, so another agent that merely shares a name
        cannot be continued through it."""
        who = [self.name, self.system_prompt or "", sorted(t.name for t in self.registry)]
        return hashlib.sha256(json.dumps(who, ensure_ascii=False).encode()).hexdigest()[:32]

    def close(self) -> None:
        """Release what the agent's tools hold (e.g. a browser's contexts); safe to call twice."""
        for t in self.registry:
            if t.close is not None:
                t.close()

    def with_tools(self, tools: Sequence[Tool | Callable[..., Any]]) -> Agent:
        """The same agent with more tools (e.g. a cell's ``--mcp`` servers); names must stay unique."""
        return Agent(model=self.model, tools=[*self._own_tools(), *tools], system_prompt=self.system_prompt,
                     name=self.name, config=self.config, model_settings=self.model_settings, memory=self.memory,
                     handoffs=self.handoffs, description=self.description)

    def with_model(self, model: Model) -> Agent:
        """The same agent on another model (e.g. to retry a step with a stronger one)."""
        return Agent(model=model, tools=self._own_tools(), system_prompt=self.system_prompt,
                     name=self.name, config=self.config, model_settings=self.model_settings, memory=self.memory,
                     handoffs=self.handoffs, description=self.description)

    def _own_tools(self) -> list[Tool]:
        """The registry's tools but the handoff tools (a copy of the agent makes its own)."""
        return [t for t in self.registry if not isinstance(t.function, Handoff)]


OWNER = "owner"  # the session metadata key of the agent that made the session


def stamp_owner(session: AgentSession, agent: Agent, via: str | None = None) -> AgentSession:
    """Record on a new ``session`` which agent made it (and ``via`` which server, if one did); a stamp
    already there stays (a server stamps before the runner does)."""
    session.metadata.setdefault(OWNER, {"agent": agent.name, "fingerprint": agent.fingerprint,
                                        **({"via": via} if via else {})})
    return session

