"""The context a tool call runs in: which session, run and step asked for it.

Built-in actions (sandboxed Python, workspace files, web, browser) need to know the session they act
for (its workspace, its interpreter), the step that asked (to link their records to it) and a place to
put what they did.  The engine sets :data:`current_call` around every tool call (a contextvar, so it
follows the call onto the tool threads and into tasks); a tool reads it with :func:`get_call`.
Outside a run (a tool called by hand) there is no context and ``get_call()`` is ``None``.
"""

from __future__ import annotations

import warnings
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Iterator, TypeVar

Deps = TypeVar("Deps")


@dataclass(frozen=True)
class RunContext(Generic[Deps]):
    """What a tool, a dynamic system prompt or a settings hook can know of the run it serves.

    ``deps`` are the run's dependencies (``runner.run(..., deps=...)``): a connection, a client, a user,
    typed as the agent's ``deps_type``; never stored (the run records only their type). A tool takes it
    by naming a first parameter annotated ``RunContext`` (or ``RunContext[MyDeps]``), which the model
    never sees. ``step`` is the number of the model call the run is at (1 for the first).
    """

    deps: Deps
    session_id: str
    run_id: str | None = None
    agent: str | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    step: int = 0


@dataclass
class ToolCallContext:
    """One tool call as the engine sees it.

    ``step_sequence`` is the assistant step that asked for the call and ``result_sequence`` the tool
    step its result will become.  ``batch_call_ids`` are the ids of the calls of the same model turn
    (their steps are not stored yet while the batch runs).  Tools append action records to
    ``actions`` and fields for the tool step's ``extra`` to ``step_extra``; the engine stores both
    with the tool step and announces the actions as events.
    """

    session_id: str
    run_id: str | None
    tool_call_id: str
    tool_name: str
    step_sequence: int | None = None
    result_sequence: int | None = None
    repository: Any = None
    batch_call_ids: tuple[str, ...] = ()
    actions: list[dict[str, Any]] = field(default_factory=list)
    step_extra: dict[str, Any] = field(default_factory=dict)
    # the running engine, for tools that act through their run (agent tools, handoffs): it has
    # ``call_agent(call, query, input)`` and ``hand_off(handoff, reason)``; None outside a run
    engine: Any = None
    deps: Any = None  # the run's dependencies (see RunContext)
    agent_name: str | None = None
    model_calls: int = 0

    def run_context(self) -> RunContext[Any]:
        """What a tool taking a :class:`RunContext` receives."""
        return RunContext(self.deps, self.session_id, self.run_id, self.agent_name, self.tool_call_id,
                          self.tool_name, self.model_calls)


current_call: ContextVar[ToolCallContext | None] = ContextVar("agio_current_tool_call", default=None)


def get_call() -> ToolCallContext | None:
    """The tool call being executed in this context, if any."""
    return current_call.get()


@contextmanager
def tool_call_scope(context: ToolCallContext | None) -> Iterator[ToolCallContext | None]:
    """Make ``context`` current for the duration of one tool call."""
    token = current_call.set(context)
    try:
        yield context
    finally:
        current_call.reset(token)


# Called with (session_id, repository) when a session's history changes under it (a retry superseded
# steps), so tools that keep state per session (a workspace, an interpreter) can follow at once.
history_listeners: list[Callable[[str, Any], None]] = []


def history_changed(session_id: str, repository: Any) -> None:
    """Tell the listeners; one failing never fails the retry (tools re-check before their next action)."""
    for listener in list(history_listeners):
        try:
            listener(session_id, repository)
        except Exception as exc:  # noqa: BLE001
            warnings.warn(f"after the retry in session {session_id}: {type(exc).__name__}: {exc}", stacklevel=2)


# A tool that calls an agent in another process passes its run's limits along, through the engine its call
# was handed (``ToolCallContext.engine``), so this layer needs nothing above it.
def remote_call() -> AbstractContextManager[Any]:
    """Around a call to an agent in another process: ``.meta`` is what the call carries (the calling run's
    depth and its share of the outermost budget; None outside a run), ``.answered(meta)`` counts what the
    answer says was spent. See ``execution.remote.remote_call``."""
    ctx = get_call()
    if ctx is not None and ctx.engine is not None:
        return ctx.engine.remote_call()
    return nullcontext(_OutsideARun())


class _OutsideARun:
    meta = None

    def answered(self, meta: Any) -> None:
        """Outside a run nothing counts what a remote call spent."""
