"""StepRunner: the entry points of runs — a query, a retry, a fork, a resume, step mode.

Each entry point does the same few things, once each: check what it was given (before anything is
stored), hold the session (``session_claims``), find where the run starts (the session, its history, the
record a fork or retry replays, the agent holding it after a handoff), and hand the run to its
:func:`~.lifecycle.lifecycle`. The loop itself is the :class:`~.step_executor.StepExecutor`'s.
"""

from __future__ import annotations

import asyncio
import copy
import weakref
from typing import Any, AsyncIterator, Callable, Sequence

from ..agent import Agent, stamp_owner
from ..core import AgentRun, AgentSession, ExecutionConfig, InvalidOperationError, Step, StepEvent, StepRole
from ..core.blocking import run_blocking
from ..core.conversation import is_memory_step
from ..core.messages import check_answered, check_messages
from ..models.recording import Recording
from ..storage import Repository, open_repository
from ..storage.ids import resolve_run_id, resolve_session_id
from ..tools.context import RunContext
from .approval import Approver
from .context import pending_tool_calls, steps_to_messages, trailing_ids
from .debug import Debugger, DebugRun, Handler
from .fork import attempts_recording, fork_recording, fork_session
from .handoff import holder
from .history import history_steps
from .hooks import AgentHook, HookCaller, default_hooks
from .lifecycle import lifecycle
from .memory_read import memory_read_sequence, read_memory
from .nested import ParentLink
from .pauses import BreakpointSpec, parse_breakpoints
from .recorder import RunRecorder
from .result import RunResult, collect, replayed
from .retry import check_resumable, plan_resume, plan_retry, step_number
from .session_claims import active_run_ids, claimed
from .step_executor import StepExecutor
from .supersede import RetryRecorder

__all__ = ["RunResult", "StepRunner"]


class StepRunner:
    """Runs an agent against sessions stored in a repository.

    ``config`` defaults to the agent's own, then to ``ExecutionConfig()``;
    ``repository`` to the default TinyDB store (``AGIO_STORE`` or ``./.agio``).
    Every entry point takes ``deps``: the run's dependencies, handed to tools and a dynamic system prompt
    through their :class:`~agio_notebook.tools.context.RunContext`, never stored.
    """

    def __init__(self, agent: Agent, hooks: Sequence[AgentHook] = (), config: ExecutionConfig | None = None,
                 repository: Repository | None = None, approver: Approver | None = None):
        self.agent = agent
        self.hooks = [*default_hooks(), *(h for h in hooks if h not in default_hooks())]
        self.config = config or agent.config or ExecutionConfig()
        self.repository = repository if repository is not None else open_repository()
        self.approver = approver
        # what may be continued: called with a stored session once it is claimed, it raises if this runner
        # may not go on in it (a server's: only its agent's own sessions; None: any session)
        self.session_guard: Callable[[AgentSession], None] | None = None
        self._hook_caller = HookCaller(self.hooks)
        self._executor = StepExecutor(agent, self.config, self._hook_caller, approver)
        # the recorders of this runner's runs, by run id, while something holds them (their streams)
        self._recorders: weakref.WeakValueDictionary[str, RunRecorder] = weakref.WeakValueDictionary()

    def _with(self, agent: Agent) -> StepRunner:
        """This runner for another agent (the one holding a session after a handoff, a retry's)."""
        if agent is self.agent:
            return self
        other = StepRunner(agent, self.hooks, self.config, self.repository, self.approver)
        other._executor.debugger = self._executor.debugger
        other.session_guard = self.session_guard
        other._recorders = self._recorders  # its runs' results are collected here
        return other

    # -- a new query -------------------------------------------------------------
    async def run_stream(self, session: AgentSession | str | None, query: str, *,
                         history: Sequence[dict[str, Any]] = (), deps: Any = None,
                         _recording: Recording | None = None, _parent: ParentLink | None = None
                         ) -> AsyncIterator[StepEvent]:
        """Send ``query`` to the agent in ``session`` (new if None or unknown) and stream the events.

        ``history`` (chat messages, no system message) is a conversation that began elsewhere: for a new
        session only, it is stored first as the session's opening steps (of no run, like a fork's copies).
        A session handed off to another agent (``Agent(handoffs=...)``) goes on with the agent holding it.
        """
        _check_query(query, session)
        history = _checked_history(history)
        self.agent.check_deps(deps)
        session_id = session.session_id if isinstance(session, AgentSession) else session or AgentSession().session_id
        async with claimed(self.repository, session_id, self.config.session_wait):
            new_session, steps = self._open_session(session, session_id, history, made_here=session is None)
            if _recording is None and steps:  # the first run of a fork re-enters the forked session
                _recording = fork_recording(self.repository, session_id, steps)
            me = self._with(holder(self.agent, steps))  # a session handed off: the agent holding it answers
            rec = me._recorder(session_id, "run", query, steps, new_session, deps=deps)
            if _parent is not None:
                _parent.apply(rec.run)
            async for event in me._lifecycle(rec, me._opening(rec, steps, query), recording=_recording):
                yield event

    def _open_session(self, session: AgentSession | str | None, session_id: str,
                      history: list[dict[str, Any]], made_here: bool = False) -> tuple[AgentSession | None, list[Step]]:
        """The session a run goes into (a new one to store, or None when stored) and its steps so far; a
        new session records which agent made it, and a given history becomes its opening steps.
        ``made_here``: the id was drawn for this run, so the store cannot hold it yet (no read to ask)."""
        repo = self.repository
        found = None if made_here else repo.get_session(session_id)
        stored = found is not None
        if found is not None and self.session_guard is not None:  # asked now it is claimed: no race between
            self.session_guard(found)  # a check and the claim lets another's session in
        new_session = None if stored else session if isinstance(session, AgentSession) else AgentSession(
            session_id=session_id)
        if new_session is not None:
            stamp_owner(new_session, self.agent)  # which agent made it: servers continue only their own
        steps = repo.get_steps(session_id) if stored else []
        if history:
            if steps:
                raise InvalidOperationError(f"history is for a new session; session {session_id} already "
                                            f"has {len(steps)} steps")
            steps = history_steps(history, session_id)
            repo.commit(session=new_session, steps=steps)
            new_session = None
        return new_session, steps

    def _opening(self, rec: RunRecorder, steps: list[Step], query: str) -> Callable[[], list[Step]]:
        """The first steps of a new run: answers to calls a cancelled run left open, the query, memory."""
        repo, session_id = self.repository, rec.run.session_id

        def setup() -> list[Step]:
            new: list[Step] = []
            dangling, missing = pending_tool_calls(steps)
            if dangling is not None:  # a cancelled run left tool calls unanswered
                for call in dangling.tool_calls:
                    if call.id in missing:
                        new.append(Step(session_id=session_id, run_id=rec.run.id,
                                        sequence=rec.next_sequence(), role=StepRole.TOOL,
                                        content="Tool call interrupted before it returned a result.",
                                        tool_call_id=call.id, name=call.name, status="error",
                                        error="interrupted"))
            new.append(Step(session_id=session_id, run_id=rec.run.id, sequence=rec.next_sequence(),
                            role=StepRole.USER, content=query))
            memory = read_memory(self.agent, repo, query, rec)  # before the first model call
            return new + [memory] if memory is not None else new

        return setup

    async def run(self, session: AgentSession | str | None, query: str, *,
                  history: Sequence[dict[str, Any]] = (), deps: Any = None) -> RunResult:
        """Run to the end and return the result (``final_text``, ``output``, ``steps``, ``metrics``...)."""
        return await self._collect(self.run_stream(session, query, history=history, deps=deps))

    def run_sync(self, session: AgentSession | str | None, query: str, *, deps: Any = None) -> RunResult:
        """``run`` for plain scripts; inside Jupyter use ``await runner.run(...)`` or ``%%agio``."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return run_blocking(self.run(session, query, deps=deps))
        raise InvalidOperationError("run_sync() cannot be called from a running event loop; "
                                    "use `await runner.run(...)` instead")

    # -- step mode ---------------------------------------------------------------
    def debug(self, session: AgentSession | str | None, query: str, *,
              breakpoints: Sequence[BreakpointSpec] | str | None = None, deps: Any = None) -> DebugRun:
        """Step mode: ``async for pause in runner.debug(session, query)`` yields the run's pauses.

        ``breakpoints`` (default ``("model", "tool")``): ``"model"``, ``"tool"``, ``"tool:NAME"``,
        ``"step:N"`` or ``N``, ``"reply"``, ``"result"``, or a function of the pause; ``[]`` stops nowhere
        until a pause asks to ``step()``. See :mod:`agio_notebook.execution.debug`.
        """
        _check_query(query, session)
        parse_breakpoints(breakpoints)  # a bad breakpoint is one clear error before anything runs
        self.agent.check_deps(deps)

        async def start(handler: Handler) -> RunResult:
            events: list[StepEvent] = []
            try:
                async for event in self.debug_stream(session, query, Debugger(handler, breakpoints), deps=deps):
                    events.append(event)
            except asyncio.CancelledError:
                if not events or not events[-1].type.is_terminal:
                    raise
            return await self._collect(replayed(events))

        return DebugRun(start)

    def debug_stream(self, session: AgentSession | str | None, query: str,
                     debugger: Debugger, *, deps: Any = None) -> AsyncIterator[StepEvent]:
        """``run_stream`` in step mode, pausing where ``debugger`` says (the notebook's pause view uses it)."""
        runner = StepRunner(self.agent, self.hooks, self.config, self.repository, self.approver)
        runner._executor.debugger = debugger
        return runner.run_stream(session, query, deps=deps)

    # -- again, from a step ------------------------------------------------------
    async def retry_stream(self, run_id: str, from_seq: int | None = None,
                           agent: Agent | None = None, fresh_memory: bool = False, *, reuse: bool = False,
                           deps: Any = None) -> AsyncIterator[StepEvent]:
        """Regenerate run ``run_id`` from ``from_seq`` (default: its first model step).

        Steps from ``from_seq`` on are kept but marked superseded; the new attempt never sees them.
        ``agent`` retries with another agent/model. The retry sends the memory the run recorded,
        unless ``fresh_memory`` (or a ``from_seq`` at the memory_read step) asks to retrieve again.
        ``reuse`` answers a model call whose exact request (messages, tools, settings) was recorded
        before from the record; recorded calls of ``side_effects=True`` tools follow their ``on_replay``
        policy either way. ``deps`` are this retry's: dependencies are never stored.
        """
        run_id = resolve_run_id(self.repository, run_id)  # an 8-character id from a table works too
        if agent is not None and agent is not self.agent:
            async for event in self._with(agent).retry_stream(run_id, from_seq, fresh_memory=fresh_memory,
                                                              reuse=reuse, deps=deps):
                yield event
            return
        if fresh_memory and from_seq is None:
            from_seq = memory_read_sequence(self.repository, run_id)
        plan = plan_retry(self.repository, run_id, from_seq, active_run_ids())  # clear errors before waiting
        held = holder(self.agent, plan.context) if agent is None else self.agent
        if held is not self.agent:  # at that point the conversation was with another agent (a handoff)
            async for event in self.retry_stream(run_id, from_seq, held, fresh_memory, reuse=reuse, deps=deps):
                yield event
            return
        self.agent.check_deps(deps)
        async with claimed(self.repository, plan.session_id, self.config.session_wait):
            plan = plan_retry(self.repository, run_id, from_seq, active_run_ids())  # what is stored now
            recording = Recording.from_steps(self.repository.get_steps(plan.session_id, include_superseded=True),
                                             reuse=reuse)
            base = self._recorder(plan.session_id, "retry", plan.old_run.query, plan.context, None,
                                  next_sequence=plan.from_seq, deps=deps)
            # the old attempt is superseded only once the retry writes a step (a failed start changes nothing)
            rec = RetryRecorder(base.run, self.repository, base.messages, plan.from_seq, plan=plan)
            rec.run.retry_of = plan.old_run.id
            rec.run.attempt = plan.attempt
            rec.tail = base.tail  # the trace graph continues from the retry's context
            rec.deps, rec.instructions = deps, base.instructions

            def setup() -> list[Step]:
                if any(is_memory_step(s) for s in plan.superseded):  # asked to retrieve afresh
                    memory = read_memory(self.agent, self.repository, plan.old_run.query or "", rec)
                    return [memory] if memory is not None else []
                return []

            async for event in self._lifecycle(rec, setup, recording=recording):
                yield event

    async def retry(self, run_id: str, from_seq: int | None = None, agent: Agent | None = None,
                    fresh_memory: bool = False, *, reuse: bool = False, deps: Any = None) -> RunResult:
        return await self._collect(self.retry_stream(run_id, from_seq, agent, fresh_memory, reuse=reuse, deps=deps))

    async def fork_stream(self, session_id: str, at: int, query: str | None = None, *,
                          reuse: bool = False, agent: Agent | None = None,
                          deps: Any = None) -> AsyncIterator[StepEvent]:
        """Fork ``session_id`` at sequence ``at`` and continue the copy: send ``query``, or (without one)
        answer the copy's last user step or pending tool calls. ``agent`` continues the copy with another
        agent (another model, or instructions: ``agent.with_instructions(...)``). ``reuse`` and side-effect
        tools work as in :meth:`retry_stream`, with the original session as the record. ``at=0`` copies
        nothing: ``query`` starts a new session that still re-enters the record (a sweep of step 1)."""
        if agent is not None and agent is not self.agent:
            async for event in self._with(agent).fork_stream(session_id, at, query, reuse=reuse, deps=deps):
                yield event
            return
        session_id = resolve_session_id(self.repository, session_id)
        at = step_number(at, "at")
        if query is not None:
            _check_query(query)
        self.agent.check_deps(deps)
        stored = self.repository.get_steps(session_id, include_superseded=True)
        if query is None:  # the copy is answered as it stands: refused before anything is copied
            check_resumable([s for s in stored if not s.superseded and s.sequence <= at],
                            f"session {session_id} at step {at}")
        recording = Recording.from_steps(stored, reuse=reuse)
        if at == 0 and query is not None:
            new_session: AgentSession | str = AgentSession()  # nothing copied: not a fork of the source
        else:
            new_session = fork_session(session_id, at, self.repository)
        if query is not None:
            stream = self.run_stream(new_session, query, _recording=recording, deps=deps)
        else:
            stream = self.resume_stream(new_session, _recording=recording, deps=deps)
        async for event in stream:
            yield event

    async def fork(self, session_id: str, at: int, query: str | None = None, *, reuse: bool = False,
                   agent: Agent | None = None, deps: Any = None) -> RunResult:
        return await self._collect(self.fork_stream(session_id, at, query, reuse=reuse, agent=agent, deps=deps))

    async def resume_stream(self, session_id: str, *, deps: Any = None, _recording: Recording | None = None
                            ) -> AsyncIterator[StepEvent]:
        """Continue a session that stopped before its answer (crash, cancel, max_steps).

        Ends in a user step: ask the model.  Ends with unanswered tool calls: run them first.
        """
        session_id = resolve_session_id(self.repository, session_id)
        plan_resume(self.repository, session_id)  # clear errors before waiting
        self.agent.check_deps(deps)
        async with claimed(self.repository, session_id, self.config.session_wait):
            plan = plan_resume(self.repository, session_id)  # what is stored now
            if _recording is None:  # a fork or a retry resumed: recorded side-effect calls follow their on_replay
                _recording = (fork_recording(self.repository, session_id, plan.context)
                              or attempts_recording(self.repository, session_id))
            rec = self._recorder(session_id, "resume", plan.query, plan.context, None, deps=deps)
            async for event in self._lifecycle(rec, list, pending=plan.pending, recording=_recording):
                yield event

    async def resume_from_user_step(self, session_id: str, step: Step) -> AsyncIterator[StepEvent]:
        """Seed API: continue from ``step``, which must be the session's last (user) step."""
        last = self.repository.get_last_step(session_id)
        if not step.is_user_step():
            raise InvalidOperationError(f"step {step.sequence} is a {step.role.value} step, not a user step")
        if last is None or last.id != step.id:
            raise InvalidOperationError(
                f"step {step.sequence} is not the last step of session {session_id}"
                + (f" (the last is {last.sequence})" if last else ""))
        async for event in self.resume_stream(session_id):
            yield event

    async def resume(self, session_id: str, *, deps: Any = None) -> RunResult:
        return await self._collect(self.resume_stream(session_id, deps=deps))

    # -- what every entry point shares ---------------------------------------------
    def _recorder(self, session_id: str, kind: str, query: str | None, context: list[Step],
                  new_session: AgentSession | None, next_sequence: int | None = None,
                  deps: Any = None) -> RunRecorder:
        """The record of a new run and its context: the stored steps as messages behind the agent's
        instructions (a dynamic system prompt sees the run's deps)."""
        agent = self.agent
        run = AgentRun(session_id=session_id, query=query, agent_name=agent.name, model_name=agent.model_name,
                       kind=kind, output_type=agent.output.name if agent.output is not None else None,
                       deps_type=type(deps).__qualname__ if deps is not None else None)
        if next_sequence is None:
            next_sequence = context[-1].sequence + 1 if context else 1
        instructions = agent.instructions(RunContext(deps, session_id, run.id, agent.name))
        rec = RunRecorder(run, self.repository, steps_to_messages(context, instructions), next_sequence,
                          new_session, tail=trailing_ids(context))
        rec.deps, rec.instructions = deps, instructions
        return rec

    def _lifecycle(self, rec: RunRecorder, setup: Callable[[], list[Step]],
                   pending: tuple[Step, list[str]] | None = None,
                   recording: Recording | None = None) -> AsyncIterator[StepEvent]:
        # each run drives a copy: a handoff repoints the run's executor, never the runner's next runs
        self._recorders[rec.run.id] = rec  # for the result's steps, while the run's stream is alive
        return lifecycle(copy.copy(self._executor), self._hook_caller, rec, setup, pending, recording)

    async def _collect(self, stream: AsyncIterator[StepEvent]) -> RunResult:
        return await collect(stream, self.repository, self.agent, self._recorders.get)


def _check_query(query: Any, session: Any = None) -> None:
    """A run's query and session, of the types they must be, checked before anything is stored."""
    if not isinstance(query, str):
        raise TypeError(f"query must be a string, got {type(query).__name__}")
    if session is not None and not isinstance(session, (str, AgentSession)):
        raise TypeError(f"session must be a session id (a string), an AgentSession or None, got "
                        f"{type(session).__name__}")


def _checked_history(history: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A conversation given to a new session, as every conversation is checked (``core.messages``)."""
    history = check_messages(history)
    if history and history[0]["role"] == "system":
        raise InvalidOperationError("history: give the system prompt to the agent, not as a message")
    check_answered(history)
    return history
