"""Agent: a model, its tools and its instructions — what a runner runs."""

from __future__ import annotations

import hashlib
import json
import dataclasses
import re
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import pydantic

from .core import AgentSession, ExecutionConfig
from .models import default_model
from .models.base import Model
from .models.settings import check_settings
from .tools import Tool, ToolRegistry, tool
from .tools.context import RunContext, get_call
from .tools.output import FINAL_RESULT, OutputSpec, output_spec, type_name
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


def _fits(wanted: Any, value: Any) -> bool | None:
    """Whether ``value`` is of the type ``wanted``, as far as a check at run time can tell (None: it
    cannot, as for a TypedDict or a Protocol): ``Optional[...]`` and unions take any of their members, a
    parameterised type its origin (``dict[str, float]``: a dict; its items are the tools' business)."""
    if wanted is Any:
        return True
    if wanted is None or wanted is type(None):
        return value is None
    origin = typing.get_origin(wanted)
    if origin is typing.Union or origin is types.UnionType:
        answers = [_fits(member, value) for member in typing.get_args(wanted)]
        return True if True in answers else None if None in answers else False
    if origin is typing.Annotated:
        return _fits(typing.get_args(wanted)[0], value)
    if origin is typing.Literal:
        return value in typing.get_args(wanted)
    try:
        return isinstance(value, origin or wanted)
    except TypeError:
        return None


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

    Typed agents (see ``docs/models.md``): ``output_type`` asks the model for an answer of that type (a
    pydantic model, a dataclass, a ``TypedDict``, a list of them, ``int``...), validated, retried up to
    ``output_retries`` times with the reason, and returned as ``result.output``; ``output_mode="native"``
    asks with the provider's structured output (``response_format``) instead of a ``final_result`` tool.
    ``deps_type`` is the type of the dependencies a run is given (``run(..., deps=...)``), which tools and a
    dynamic ``system_prompt``
    (a function of a :class:`~agio_notebook.tools.context.RunContext`) receive. ``settings_hook(ctx,
    messages)`` returns settings for one model call (merged over the others), e.g. a per-turn ``extra_body``.
    """

    model: Model | None = None
    tools: Sequence[Tool | Callable[..., Any]] = ()
    system_prompt: str | Callable[[RunContext[Any]], str | None] | None = None
    name: str = "agent"
    config: ExecutionConfig | None = None
    memory: Any = None
    model_settings: dict[str, Any] | None = None
    # agents this one may hand the conversation to: a ``transfer_to_<name>`` tool each (see docs/compose.md)
    handoffs: Sequence[Agent] = ()
    description: str | None = None  # what the agent does, for the models that may call it or hand off to it
    output_type: Any = None
    output_retries: int = 3
    output_mode: str = "tool"  # "native": the provider's structured output (response_format), no final_result tool
    deps_type: Any = None
    settings_hook: Callable[[RunContext[Any], list[dict[str, Any]]], dict[str, Any] | None] | None = None
    registry: ToolRegistry = field(init=False, repr=False)
    output: OutputSpec | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.model is None:
            self.model = default_model()
        self.model_settings = check_settings(self.model_settings) or None
        if self.system_prompt is not None and not isinstance(self.system_prompt, str) and not callable(self.system_prompt):
            raise TypeError(f"agent {self.name!r}: system_prompt must be text or a function of the run's context, "
                            f"got {type(self.system_prompt).__name__}")
        if isinstance(self.output_retries, bool) or not isinstance(self.output_retries, int) or self.output_retries < 0:
            raise ValueError(f"agent {self.name!r}: output_retries must be a whole number >= 0, got {self.output_retries!r}")
        if self.settings_hook is not None and not callable(self.settings_hook):
            raise TypeError(f"agent {self.name!r}: settings_hook must be a function, got {type(self.settings_hook).__name__}")
        try:
            self.output = output_spec(self.output_type, self.output_mode)
        except ValueError as exc:
            raise ValueError(f"agent {self.name!r}: {exc}") from None
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
        if self.output is not None:
            if FINAL_RESULT in self.registry.names():
                raise ValueError(f"agent {self.name!r}: a tool may not be named {FINAL_RESULT!r}, which gives a typed "
                                 "agent's answer")
            if self.output.by_call:
                self.registry.add(self.output.tool)

    def instructions(self, ctx: RunContext[Any]) -> str | None:
        """The system prompt for a run: the text, or what the function of the run's context returns."""
        prompt = self.system_prompt
        if prompt is None or isinstance(prompt, str):
            return prompt
        value = prompt(ctx)
        if value is not None and not isinstance(value, str):
            raise TypeError(f"agent {self.name!r}: its system_prompt function returned "
                            f"{type(value).__name__}, not text")
        return value

    def check_deps(self, deps: Any, _checked: set[str] | None = None) -> None:
        """Dependencies of the declared ``deps_type``, checked before anything is stored (one line): this
        agent's, and those of every agent it may hand the run to (they answer with the same deps)."""
        checked = _checked if _checked is not None else set()
        checked.add(self.name)
        self._check_own_deps(deps)
        for handoff in self.registry:
            if isinstance(handoff.function, Handoff) and handoff.function.target.name not in checked:
                handoff.function.target.check_deps(deps, checked)

    def _check_own_deps(self, deps: Any) -> None:
        wanted = self.deps_type
        if wanted is None:
            return
        fits = _fits(wanted, deps)
        if fits or (fits is None and deps is not None):  # what cannot be told here is let through
            return
        if deps is None:
            raise ValueError(f"agent {self.name!r} needs deps of type {type_name(wanted)}: run(..., deps=...)")
        raise TypeError(f"agent {self.name!r} takes deps of type {type_name(wanted)}, got {type(deps).__qualname__}")

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
        prompt = self.system_prompt
        instructions = prompt if isinstance(prompt, str) or prompt is None else getattr(prompt, "__qualname__", "")
        who = [self.name, instructions or "", sorted(t.name for t in self.registry)]
        return hashlib.sha256(json.dumps(who, ensure_ascii=False).encode()).hexdigest()[:32]

    def close(self) -> None:
        """Release what the agent's tools hold (e.g. a browser's contexts); safe to call twice."""
        for t in self.registry:
            if t.close is not None:
                t.close()

    def with_tools(self, tools: Sequence[Tool | Callable[..., Any]]) -> Agent:
        """The same agent with more tools (e.g. a cell's ``--mcp`` servers); names must stay unique."""
        return dataclasses.replace(self, tools=[*self._own_tools(), *tools])

    def with_model(self, model: Model) -> Agent:
        """The same agent on another model (e.g. to retry a step with a stronger one)."""
        return dataclasses.replace(self, model=model, tools=self._own_tools())

    def with_instructions(self, system_prompt: str | Callable[[RunContext[Any]], str | None] | None) -> Agent:
        """The same agent with other instructions (e.g. to fork a session with another system prompt)."""
        return dataclasses.replace(self, system_prompt=system_prompt, tools=self._own_tools())

    def _own_tools(self) -> list[Tool]:
        """The registry's tools but those the agent makes itself (handoffs, a typed agent's final_result)."""
        return [t for t in self.registry if not isinstance(t.function, Handoff) and
                (self.output is None or t is not self.output.tool)]

    # -- the short path: one call runs the agent in the default store (StepRunner for control) ----------
    def run_sync(self, query: str, *, session: Any = None, deps: Any = None) -> Any:
        """Run the agent on ``query`` from a plain script (new session unless ``session``); its result."""
        return self._runner().run_sync(session, query, deps=deps)

    async def run(self, query: str, *, session: Any = None, deps: Any = None) -> Any:
        """``await agent.run(query)`` in a notebook or any event loop; its result (``.output``, ``.final_text``)."""
        return await self._runner().run(session, query, deps=deps)

    def run_stream(self, query: str, *, session: Any = None, deps: Any = None) -> Any:
        """``async for event in agent.run_stream(query)``: the run's events as they happen."""
        return self._runner().run_stream(session, query, deps=deps)

    def _runner(self) -> Any:
        # the short path is the one place this layer starts the engine above it (declared in the layers
        # contract in pyproject.toml): agent.run_sync() is StepRunner(agent).run_sync(...)
        from .execution.runner import StepRunner

        return StepRunner(self)


OWNER = "owner"  # the session metadata key of the agent that made the session


def stamp_owner(session: AgentSession, agent: Agent, via: str | None = None) -> AgentSession:
    """Record on a new ``session`` which agent made it (and ``via`` which server, if one did); a stamp
    already there stays (a server stamps before the runner does)."""
    session.metadata.setdefault(OWNER, {"agent": agent.name, "fingerprint": agent.fingerprint,
                                        **({"via": via} if via else {})})
    return session

