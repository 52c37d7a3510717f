"""``AgentRunner``: the seed's facade — one traced model call, the agent loop with memory and the trace,
and feedback that becomes experience.

It is a thin layer: ``call`` and ``run`` go through :class:`~agio_notebook.execution.StepRunner` (the one
loop), so every call and run is a stored run with its steps, events, request and metrics, visible to
``runs()``, transcripts, retry, fork and replay. ``trace_id`` in the seed's vocabulary is agio's run id.

>>> runner = AgentRunner(llm_call=my_llm)                       # any async (messages, model, tools) -> dict
>>> result = await runner.call([{"role": "user", "content": "hi"}], model="gpt-4o-mini")
>>> async for event in runner.run("What is 2 + 3?", tools=["add"]): ...
>>> await runner.add_feedback(result.trace_id, result.step_id, "correction", "It is 5.")
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, AsyncIterator, Literal, Sequence

from .agent import Agent
from .core import (AgentSession, ExecutionConfig, InvalidOperationError, ModelError, NotFoundError, RunStatus,
                   StepEvent, StepRole)
from .execution import StepRunner
from .execution.feedback import feedback_and_proposal
from .core.messages import check_answered
from .execution.history import split_system
from .memory.retrieval import MemoryConfig
from .memory.store import MemoryStore, memory_for
from .models import OpenAIModel, default_model
from .models.base import Model
from .models.llm_call import LLMCall, LLMCallModel
from .storage import current_store, open_repository
from .storage.base import Repository
from .tools import Tool, ToolRegistry, tool

FeedbackType = Literal["positive", "negative", "correction"]
_RATING = {"positive": 1, "negative": -1, "correction": -1}


@dataclass
class AgentConfig:
    """The runner's defaults; each ``run()`` argument of the same name overrides one."""

    agent_type: str = "default"
    max_iterations: int = 10
    enable_memory: bool = True
    auto_execute_tools: bool = True


@dataclass
class CallResult:
    """One model call: its reply and tool calls, and where it is stored (``trace_id`` is the run id)."""

    reply: str
    tool_calls: list[dict[str, Any]] | None = None
    trace_id: str | None = None
    step_id: str | None = None
    tokens: dict[str, int] | None = None
    cost: float = 0.0


class AgentRunner:
    """``trace_store``: a repository, a store path or URL (default: the current store, ``AGIO_STORE`` or
    ``./.agio``); it keeps the trace and the conversation state alike, so ``state_store``, if given, must
    be the same store. ``memory_store``: a :class:`~agio_notebook.memory.MemoryStore` or a repository whose
    memory to use (default: the trace store's). ``tool_registry``: a ``ToolRegistry`` or a list of tools
    (functions are wrapped with ``@tool``); ``call``/``run`` pick from it by name. ``llm_call``: an async
    ``(messages, model, tools, **settings) -> dict`` (see :mod:`agio_notebook.models.llm_call`); without
    it, ``model`` is a :class:`~agio_notebook.models.Model`, a model name for ``OpenAIModel``, or None for
    :func:`~agio_notebook.models.default_model`.
    """

    def __init__(self, trace_store: Repository | str | None = None, memory_store: MemoryStore | Repository | None = None,
                 state_store: Repository | str | None = None, tool_registry: ToolRegistry | Sequence[Any] | None = None,
                 llm_call: LLMCall | None = None, config: AgentConfig | None = None):
        self.trace_store = _repository(trace_store)
        if state_store is not None and _repository(state_store) is not self.trace_store:
            raise InvalidOperationError("agio keeps a session's state in its trace (the steps): give one store, "
                                        "as trace_store")
        self.memory_store = _memory(memory_store, self.trace_store)
        self.tools = _registry(tool_registry)
        if llm_call is not None and not callable(llm_call):
            raise TypeError(f"llm_call must be an async function, got {type(llm_call).__name__}")
        self.llm_call = llm_call
        self.config = config or AgentConfig()

    # -- one call ---------------------------------------------------------------------------
    async def call(self, messages: list[dict[str, Any]], model: str | Model | None = None,
                   tools: Sequence[str] | None = None, uid: str | None = None, **settings: Any) -> CallResult:
        """One model call on ``messages`` (which end with a user message), stored as a run of its own.

        Tool calls in the reply are returned, not run. ``settings`` go with the request.
        """
        system, rest = split_system(messages)
        if not rest or rest[-1]["role"] != "user":
            raise InvalidOperationError("call() needs messages that end with a user message")
        check_answered(rest[:-1])
        agent = self._agent(model, tools, system, self.config.agent_type, enable_memory=False)
        config = ExecutionConfig(max_steps=1, execute_tools=False, model_settings=settings or None)
        runner = StepRunner(agent, config=config, repository=self.trace_store)
        result = await runner.run(_session(uid), rest[-1]["content"] or "", history=rest[:-1])
        if result.status is RunStatus.FAILED:
            raise ModelError(result.error or "the model call failed")
        reply = next((s for s in reversed(result.steps) if s.role is StepRole.ASSISTANT), None)
        if reply is None:
            raise InvalidOperationError(f"the call ended {result.status.value} before the model replied")
        m = reply.metrics
        return CallResult(reply=reply.content or "", tool_calls=[c.to_dict() for c in reply.tool_calls] or None,
                          trace_id=result.run_id, step_id=reply.id,
                          tokens={"prompt": m.prompt_tokens or 0, "completion": m.completion_tokens or 0},
                          cost=m.cost or 0.0)

    # -- the agent loop ------------------------------------------------------------------------
    async def run(self, task: str, messages: list[dict[str, Any]] | None = None, system_prompt: str | None = None,
                  model: str | Model | None = None, tools: Sequence[str] | None = None,
                  agent_type: str | None = None, uid: str | None = None, max_iterations: int | None = None,
                  enable_memory: bool | None = None, auto_execute_tools: bool | None = None,
                  **settings: Any) -> AsyncIterator[StepEvent]:
        """Run ``task`` through the loop (memory retrieved first, every step traced) and yield its events.

        ``messages`` is a conversation that began before (its system message, if any, is the system
        prompt unless ``system_prompt`` is given). ``max_iterations`` caps model calls. With
        ``auto_execute_tools=False`` the run stops at the first reply with tool calls, which stay pending.
        """
        if not isinstance(task, str):
            raise TypeError(f"task must be a string, got {type(task).__name__}")
        seeded_system, history = split_system(messages or [])
        c = self.config
        agent = self._agent(model, tools, system_prompt or seeded_system, agent_type or c.agent_type,
                            enable_memory=c.enable_memory if enable_memory is None else enable_memory)
        config = ExecutionConfig(max_steps=max_iterations or c.max_iterations,
                                 execute_tools=c.auto_execute_tools if auto_execute_tools is None else auto_execute_tools,
                                 model_settings=settings or None)
        runner = StepRunner(agent, config=config, repository=self.trace_store)
        async for event in runner.run_stream(_session(uid), task, history=history):
            yield event

    # -- feedback -----------------------------------------------------------------------------------
    async def add_feedback(self, trace_id: str, target_step_id: str | int, feedback_type: FeedbackType, content: str,
                           extract_experience: bool = True) -> str | None:
        """Feedback on a step of a run (``trace_id``): ``positive``, ``negative`` or ``correction`` (``content``
        is then the right answer). With ``extract_experience`` an experience is extracted from it into
        memory at once; returns its id (None without extraction)."""
        if feedback_type not in _RATING:
            raise InvalidOperationError(f"feedback_type must be positive, negative or correction, got {feedback_type!r}")
        if not isinstance(content, str):
            raise TypeError(f"content must be text, got {type(content).__name__}")
        run = self.trace_store.get_run(trace_id)
        if run is None:
            raise NotFoundError(f"no run (trace) {trace_id!r} in the store")
        correction = content if feedback_type == "correction" else None
        comment = "" if correction is not None else content
        agent = Agent(model=default_model(), name=run.agent_name or self.config.agent_type,
                      memory=MemoryConfig(store=self.memory_store))
        _, proposal = feedback_and_proposal(self.trace_store, run.id, _RATING[feedback_type], comment,
                                            step=target_step_id, propose=extract_experience, agent=agent,
                                            correction=correction, auto_accept=True)
        return proposal.experience_id if proposal is not None else None

    # -- helpers ----------------------------------------------------------------------------------
    def _agent(self, model: str | Model | None, tools: Sequence[str] | None, system_prompt: str | None,
               name: str, *, enable_memory: bool) -> Agent:
        return Agent(model=self._model(model), tools=self._pick(tools), system_prompt=system_prompt, name=name,
                     memory=MemoryConfig(enabled=enable_memory, store=self.memory_store))

    def _model(self, model: str | Model | None) -> Model:
        if model is not None and not isinstance(model, str):
            if not isinstance(model, Model):
                raise TypeError(f"model must be a model name or a Model, got {type(model).__name__}")
            return model
        if self.llm_call is not None:
            return LLMCallModel(self.llm_call, model)
        return OpenAIModel(model) if model else default_model()

    def _pick(self, names: Sequence[str] | None) -> list[Tool]:
        if names is None:
            return []
        if isinstance(names, str):
            names = [names]
        known = {t.name: t for t in self.tools}
        missing = [n for n in names if n not in known]
        if missing:
            raise NotFoundError(f"no tool {', '.join(map(repr, missing))} in the runner's registry "
                                f"(it has: {', '.join(sorted(known)) or 'none'})")
        return [known[n] for n in names]


def _repository(store: Repository | str | None) -> Repository:
    if store is None or isinstance(store, Repository):
        return current_store(store)
    return open_repository(store)


def _memory(memory: MemoryStore | Repository | None, trace_store: Repository) -> MemoryStore:
    if isinstance(memory, MemoryStore):
        return memory
    if memory is None or isinstance(memory, Repository):
        return memory_for(memory if memory is not None else trace_store)
    raise TypeError(f"memory_store must be a MemoryStore or a repository, got {type(memory).__name__}")


def _registry(tools: ToolRegistry | Sequence[Any] | None) -> ToolRegistry:
    if tools is None or isinstance(tools, ToolRegistry):
        return tools if tools is not None else ToolRegistry([])
    return ToolRegistry([t if isinstance(t, Tool) else tool(t) for t in tools])


def _session(uid: str | None) -> AgentSession:
    """A new session; the seed's ``uid`` (who asked) is kept in its metadata."""
    if uid is not None and not isinstance(uid, str):
        raise TypeError(f"uid must be a string, got {type(uid).__name__}")
    return AgentSession(metadata={"uid": uid} if uid is not None else {})
