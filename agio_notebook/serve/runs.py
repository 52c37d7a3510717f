"""One run on behalf of a client of a server (MCP or A2A): limits applied, progress told, answer made.

Both servers run an agent the same way: the limits a calling agio run sent along are checked and applied
(``execution/remote.py``: depth, the outermost budget left), every stored step is told to the client as it
is stored, the served run's own steps and its nested runs' (tagged with their path), and the run's end
becomes an answer: its text, its ids and status, and what it spent, all masked of the process's secrets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable

from ..agent import Agent
from ..core import AgentSession, AgioError, ExecutionConfig, StepEvent, StepEventType, mask
from ..execution import StepRunner
from ..execution.remote import CallerLimits, RemoteParent, served_caller, served_config
from .access import Access

_E = StepEventType


@dataclass(frozen=True)
class Progress:
    """A step stored by the served run (``path`` empty) or by a run nested in it."""

    step: dict[str, Any]
    path: tuple[str, ...] = ()  # run ids from the served run's child down to the run that stored the step

    @property
    def message(self) -> str:
        where = f"[nested run {' › '.join(r[:8] for r in self.path)}] " if self.path else ""
        return f"{where}step {self.step['sequence']} ({self.step['role']}) stored"


@dataclass
class Answer:
    """How a served run ended, as a client is told: masked text, ids, status, what the tree spent."""

    text: str
    run: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.run["status"] == "completed"

    @property
    def ids(self) -> dict[str, str]:
        return {"run_id": self.run["id"], "session_id": self.run["session_id"], "status": self.run["status"]}


OnProgress = Callable[[Progress], Awaitable[None]]


def runner_for(access: Access, agent: Agent, limits: CallerLimits | None) -> StepRunner:
    """A runner of ``agent`` on the server's store, its budget capped by what the caller has left;
    a call past the depth limit or with no budget left is refused here (one line)."""
    if limits is not None:
        limits.check(agent.name)
    return StepRunner(agent, config=served_config(agent.config or ExecutionConfig(), limits),
                      repository=access.repository)


async def run_agent(access: Access, agent: Agent, query: str, session: AgentSession | str | None,
                    limits: CallerLimits | None, on_progress: OnProgress) -> Answer:
    """Run ``agent`` on ``query``: in a new session (None: one made here and stamped so; an AgentSession
    made by the caller through ``access.new_session``), or in the session ``session`` names if the agent
    owns it."""
    if not isinstance(query, str):
        raise AgioError(f"query must be a string, got {type(query).__name__}")
    runner = runner_for(access, agent, limits)
    runner.session_guard = lambda found: access.check_owned(agent, found)
    if session is None:
        session = access.new_session(agent)
    elif not isinstance(session, AgentSession):
        session = access.continued_session(agent, session)
    parent = RemoteParent(limits)
    token = served_caller.set(limits)  # the hooks see who called (telemetry joins the caller's trace)
    try:
        return await drive(runner.run_stream(session, query, _parent=parent), on_progress, parent)
    finally:
        served_caller.reset(token)


async def drive(events: AsyncIterator[StepEvent], on_progress: OnProgress,
                parent: RemoteParent | None = None) -> Answer:
    """Follow a run's events to its end, telling each stored step; its answer."""
    final: dict[str, Any] | None = None
    async for event in events:
        if parent is not None:
            parent.see()
        if event.type is _E.STEP_COMPLETED:
            await on_progress(Progress(event.payload["step"]))
        elif event.type is _E.NESTED:
            inner, path = event.payload["event"], event.payload["path"]
            if inner["type"] == _E.STEP_COMPLETED.value:
                await on_progress(Progress(inner["payload"]["step"], tuple(p["run_id"] for p in path)))
        elif event.type.is_terminal:
            final = event.payload["run"]
    if final is None:
        raise AgioError("the run ended without its final event")
    meta = parent.spent_meta(final) if parent is not None else {}
    if final["status"] == "completed":
        text = final.get("final_text") or ""
    else:
        reason = f": {final['error']}" if final.get("error") else ""
        text = f"the run ended {final['status']}{reason} (run {final['id']})"
    return Answer(mask(text), mask(final), meta)
