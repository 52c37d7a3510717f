"""StepRunner: the lifecycle of runs — start, execute, persist, finish.

Every entry point (a new query, a retry, a resume) goes through the same
lifecycle, so each emits ``run_started`` and exactly one terminal event and
saves a run record (the original project's resumes were invisible; these
are not).
"""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Iterator, Sequence

from ..agent import Agent, stamp_owner
from ..core import (AgentRun, AgentSession, ExecutionConfig, InvalidOperationError, ModelError, RunMetrics,
                    RunStatus, SessionBusyError, Step, StepEvent, StepEventType, StepRole)
from ..core.conversation import is_memory_step
from ..core.messages import check_answered, check_messages
from ..models.recording import Recording
from ..storage import Repository, open_repository
from ..storage.ids import resolve_run_id, resolve_session_id
from .approval import Approver
from .debug import Debugger, DebugRun, Handler
from .pauses import BreakpointSpec, parse_breakpoints
from .context import pending_tool_calls, steps_to_messages, trailing_ids
from .fork import attempts_recording, fork_recording, fork_session
from .handoff import holder
from .history import history_steps
from .hooks import AgentHook, HookCaller, default_hooks
from .nested import ParentLink, forget_tree
from .memory_read import memory_event_payload, memory_read_sequence, read_memory
from .recorder import RunRecorder
from .requests import redact_for
from .retry import plan_resume, plan_retry
from .step_executor import StepExecutor
from .supersede import RetryRecorder

_E = StepEventType
_TERMINAL = {RunStatus.COMPLETED: _E.RUN_COMPLETED, RunStatus.FAILED: _E.RUN_FAILED,
             RunStatus.CANCELLED: _E.RUN_CANCELLED, RunStatus.MAX_STEPS: _E.RUN_MAX_STEPS,
             RunStatus.BUDGET_EXCEEDED: _E.RUN_BUDGET_EXCEEDED}

# Sessions with a run in progress in this process: two concurrent runs in one
# session would interleave their sequences.
_ACTIVE_SESSIONS: dict[str, str] = {}


def active_run_ids() -> set[str]:
    return set(_ACTIVE_SESSIONS.values())


@asynccontextmanager
async def _claimed(repository: Repository, session_id: str, wait: float | None) -> AsyncIterator[None]:
    """Hold the session for one run, in this process and through the store across processes.

    A second run meanwhile gets a clear error naming the holder, or waits up to ``wait`` seconds
    (``None``: as long as it takes) for the session to be released.
    """
    deadline = None if wait is None else time.monotonic() + wait
    while True:
        try:
            if session_id in _ACTIVE_SESSIONS:
                raise SessionBusyError(f"session {session_id} already has a run in progress "
                                       f"({_ACTIVE_SESSIONS[session_id]}); wait for it or cancel it")
            await _off_loop(repository, repository.claim_session, session_id, "a run")
            break
        except SessionBusyError:
            if deadline is not None and time.monotonic() >= deadline:
                raise
        await asyncio.sleep(0.05)
    _ACTIVE_SESSIONS[session_id] = "pending"
    try:
        yield
    finally:
        _ACTIVE_SESSIONS.pop(session_id, None)
        repository.release_session(session_id)  # a store with claim files finishes it on a worker thread


async def _off_loop(repository: Repository, call: Any, session_id: str, *args: Any) -> Any:
    """A store's claim call, on a worker thread when it touches files (creating a claim file waits
    for the filesystem, which a batch's other runs on this loop must not). A session this process
    released a moment ago is taken back at once, on the loop: no other process may slip in while a
    worker thread is found for the claim (a busy machine can take longer than the release lingers)."""
    if not getattr(repository, "durable", True) or getattr(repository, "session_releasing", _never)(session_id):
        return call(session_id, *args)
    return await asyncio.to_thread(call, session_id, *args)


def _never(session_id: str) -> bool:
    return False


@contextmanager
def claim_session(repository: Repository, session_id: str, what: str) -> Iterator[None]:
    """Hold a session for a short synchronous change (e.g. of attempts), so no run writes meanwhile.

    Busy (a run in progress here or in another process): ``SessionBusyError`` at once, naming the holder.
    """
    if session_id in _ACTIVE_SESSIONS:
        raise SessionBusyError(f"session {session_id} has a run in progress ({_ACTIVE_SESSIONS[session_id]}); "
                               "wait for it or cancel it")
    repository.claim_session(session_id, what)
    _ACTIVE_SESSIONS[session_id] = what
    try:
        yield
    finally:
        _ACTIVE_SESSIONS.pop(session_id, None)
        repository.release_session(session_id)


async def _replay(events: list[StepEvent]) -> AsyncIterator[StepEvent]:
    for event in events:
        yield event


@dataclass
class RunResult:
    """What ``run()`` returns: the outcome of one run and everything it wrote."""

    run: AgentRun
    steps: list[Step] = field(default_factory=list)
    events: list[StepEvent] = field(default_factory=list)
    repository: Repository | None = field(default=None, repr=False, compare=False)
    agent: Agent | None = field(default=None, repr=False, compare=False)

    @property
    def run_id(self) -> str:
        return self.run.id

    @property
    def session_id(self) -> str:
        return self.run.session_id

    @property
    def status(self) -> RunStatus:
        return self.run.status

    @property
    def final_text(self) -> str | None:
        return self.run.final_text

    @property
    def metrics(self) -> RunMetrics:
        return self.run.metrics

    @property
    def error(self) -> str | None:
        return self.run.error

    def feedback(self, rating: Any, comment: str = "", *, step: int | str | None = None,
                 correction: str | None = None, propose: bool = True) -> Any:
        """+1 or -1 (and a comment) on this run or one of its steps, or -1 with the right answer as
        ``correction``. Returns the experience the agent's extractor proposed (review it with
        ``agio_notebook.memory.accept/reject``), or the stored feedback with ``propose=False``."""
        from .feedback import feedback_and_proposal

        if self.repository is None or self.agent is None:
            raise InvalidOperationError("this result was not made by a runner; use agio_notebook.memory.add_feedback")
        item, proposal = feedback_and_proposal(self.repository, self.run_id, rating, comment, step=step,
                                               propose=propose, agent=self.agent, correction=correction)
        return proposal if proposal is not None else item


class StepRunner:
    """Runs an agent against sessions stored in a repository.

    ``config`` defaults to the agent's own, then to ``ExecutionConfig()``;
    ``repository`` to the default TinyDB store (``AGIO_STORE`` or ``./.agio``).
    """

    def __init__(self, agent: Agent, hooks: Sequence[AgentHook] = (), config: ExecutionConfig | None = None,
                 repository: Repository | None = None, approver: Approver | None = None):
        self.agent = agent
        self.hooks = [*default_hooks(), *(h for h in hooks if h not in default_hooks())]
        self.config = config or agent.config or ExecutionConfig()
        self.repository = repository if repository is not None else open_repository()
        self.approver = approver
        self._hook_caller = HookCaller(self.hooks)
        self._executor = StepExecutor(agent, self.config, self._hook_caller, approver)

    # -- public entry points -----------------------------------------------------
    async def run_stream(self, session: AgentSession | str | None, query: str, *,
                         history: Sequence[dict[str, Any]] = (),
                         _recording: Recording | None = None, _parent: ParentLink | None = None
                         ) -> AsyncIterator[StepEvent]:
        """Send ``query`` to the agent in ``session`` (new if None or unknown) and stream the events.

        ``history`` (chat messages, no system message) is a conversation that began elsewhere: for a new
        session only, it is stored first as the session's opening steps (of no run, like a fork's copies).
        A session handed off to another agent (``Agent(handoffs=...)``) goes on with the agent holding it.
        """
        if not isinstance(query, str):
            raise TypeError(f"query must be a string, got {type(query).__name__}")
        history = check_messages(history)
        if history and history[0]["role"] == "system":
            raise InvalidOperationError("history: give the system prompt to the agent, not as a message")
        check_answered(history)
        repo = self.repository
        session_id = session.session_id if isinstance(session, AgentSession) else session or AgentSession().session_id
        async with _claimed(repo, session_id, self.config.session_wait):
            if isinstance(session, AgentSession):
                new_session = session if repo.get_session(session_id) is None else None
            else:
                new_session = None if repo.get_session(session_id) is not None else AgentSession(session_id=session_id)
            if new_session is not None:
                stamp_owner(new_session, self.agent)  # which agent made it: servers continue only their own
            steps = repo.get_steps(session_id) if new_session is None else []
            if history:
                if steps:
                    raise InvalidOperationError(f"history is for a new session; session {session_id} already "
                                                f"has {len(steps)} steps")
                steps = history_steps(history, session_id)
                repo.commit(session=new_session, steps=steps)
                new_session = None
            if _recording is None and steps:  # the first run of a fork re-enters the forked session
                _recording = fork_recording(repo, session_id, steps)
            agent = holder(self.agent, steps)
            # a session handed off to another agent: the agent holding it answers
            me = self if agent is self.agent else StepRunner(agent, self.hooks, self.config, repo, self.approver)
            rec = me._recorder(session_id, "run", query, steps, new_session)
            stream = me._lifecycle(rec, me._opening(rec, steps, query), recording=_recording)
            if _parent is not None:
                _parent.apply(rec.run)
            async for event in stream:
                yield event

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
                  history: Sequence[dict[str, Any]] = ()) -> RunResult:
        """Run to the end and return the result (``final_text``, ``steps``, ``metrics``...)."""
        return await self._collect(self.run_stream(session, query, history=history))

    def run_sync(self, session: AgentSession | str | None, query: str) -> RunResult:
        """``run`` for plain scripts; inside Jupyter use ``await runner.run(...)`` or ``%%agio``."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.run(session, query))
        raise InvalidOperationError("run_sync() cannot be called from a running event loop; "
                                    "use `await runner.run(...)` instead")

    def debug(self, session: AgentSession | str | None, query: str, *,
              breakpoints: Sequence[BreakpointSpec] | str | None = None) -> DebugRun:
        """Step mode: ``async for pause in runner.debug(session, query)`` yields the run's pauses.

        ``breakpoints`` (default ``("model", "tool")``): ``"model"``, ``"tool"``, ``"tool:NAME"``,
        ``"step:N"`` or ``N``, ``"reply"``, ``"result"``, or a function of the pause; ``[]`` stops nowhere
        until a pause asks to ``step()``. See :mod:`agio_notebook.execution.debug`.
        """
        if not isinstance(query, str):
            raise TypeError(f"query must be a string, got {type(query).__name__}")
        parse_breakpoints(breakpoints)  # a bad breakpoint is one clear error before anything runs

        async def start(handler: Handler) -> RunResult:
            events: list[StepEvent] = []
            try:
                async for event in self.debug_stream(session, query, Debugger(handler, breakpoints)):
                    events.append(event)
            except asyncio.CancelledError:
                if not events or not events[-1].type.is_terminal:
                    raise
            return await self._collect(_replay(events))

        return DebugRun(start)

    def debug_stream(self, session: AgentSession | str | None, query: str,
                     debugger: Debugger) -> AsyncIterator[StepEvent]:
        """``run_stream`` in step mode, pausing where ``debugger`` says (the notebook's pause view uses it)."""
        runner = StepRunner(self.agent, self.hooks, self.config, self.repository, self.approver)
        runner._executor.debugger = debugger
        return runner.run_stream(session, query)

    async def retry_stream(self, run_id: str, from_seq: int | None = None,
                           agent: Agent | None = None, fresh_memory: bool = False, *, reuse: bool = False
                           ) -> AsyncIterator[StepEvent]:
        """Regenerate run ``run_id`` from ``from_seq`` (default: its first model step).

        Steps from ``from_seq`` on are kept but marked superseded; the new attempt never sees them.
        ``agent`` retries with another agent/model. The retry sends the memory the run recorded,
        unless ``fresh_memory`` (or a ``from_seq`` at the memory_read step) asks to retrieve again.
        ``reuse`` answers a model call whose exact request (messages, tools, settings) was recorded
        before from the record; recorded calls of ``side_effects=True`` tools follow their ``on_replay``
        policy either way.
        """
        run_id = resolve_run_id(self.repository, run_id)  # an 8-character id from a table works too
        if agent is not None and agent is not self.agent:
            other = StepRunner(agent, self.hooks, self.config, self.repository, self.approver)
            async for event in other.retry_stream(run_id, from_seq, fresh_memory=fresh_memory, reuse=reuse):
                yield event
            return
        if fresh_memory and from_seq is None:
            from_seq = memory_read_sequence(self.repository, run_id)
        plan = plan_retry(self.repository, run_id, from_seq, active_run_ids())  # clear errors before waiting
        held = holder(self.agent, plan.context) if agent is None else self.agent
        if held is not self.agent:  # at that point the conversation was with another agent (a handoff)
            async for event in self.retry_stream(run_id, from_seq, held, fresh_memory, reuse=reuse):
                yield event
            return
        async with _claimed(self.repository, plan.session_id, self.config.session_wait):
            plan = plan_retry(self.repository, run_id, from_seq, active_run_ids())  # what is stored now
            recording = Recording.from_steps(self.repository.get_steps(plan.session_id, include_superseded=True),
                                             reuse=reuse)
            base = self._recorder(plan.session_id, "retry", plan.old_run.query, plan.context, None,
                                  next_sequence=plan.from_seq)
            # the old attempt is superseded only once the retry writes a step (a failed start changes nothing)
            rec = RetryRecorder(base.run, self.repository, base.messages, plan.from_seq, plan=plan)
            rec.run.retry_of = plan.old_run.id
            rec.run.attempt = plan.attempt
            rec.tail = base.tail  # the trace graph continues from the retry's context

            def setup() -> list[Step]:
                if any(is_memory_step(s) for s in plan.superseded):  # asked to retrieve afresh
                    memory = read_memory(self.agent, self.repository, plan.old_run.query or "", rec)
                    return [memory] if memory is not None else []
                return []

            async for event in self._lifecycle(rec, setup, recording=recording):
                yield event

    async def retry(self, run_id: str, from_seq: int | None = None, agent: Agent | None = None,
                    fresh_memory: bool = False, *, reuse: bool = False) -> RunResult:
        return await self._collect(self.retry_stream(run_id, from_seq, agent, fresh_memory, reuse=reuse))

    async def fork_stream(self, session_id: str, at: int, query: str | None = None, *,
                          reuse: bool = False) -> AsyncIterator[StepEvent]:
        """Fork ``session_id`` at sequence ``at`` and continue the copy: send ``query``, or (without one)
        answer the copy's last user step or pending tool calls. ``reuse`` and side-effect tools work as
        in :meth:`retry_stream`, with the original session as the record. ``at=0`` copies nothing: ``query``
        starts a new session that still re-enters the record (a sweep of step 1)."""
        session_id = resolve_session_id(self.repository, session_id)
        recording = Recording.from_steps(self.repository.get_steps(session_id, include_superseded=True),
                                         reuse=reuse)
        if at == 0 and query is not None:
            new_session: AgentSession | str = AgentSession()  # nothing copied: not a fork of the source
        else:
            new_session = fork_session(session_id, at, self.repository)
        if query is not None:
            stream = self.run_stream(new_session, query, _recording=recording)
        else:
            stream = self.resume_stream(new_session, _recording=recording)
        async for event in stream:
            yield event

    async def fork(self, session_id: str, at: int, query: str | None = None, *, reuse: bool = False) -> RunResult:
        return await self._collect(self.fork_stream(session_id, at, query, reuse=reuse))

    async def resume_stream(self, session_id: str, *, _recording: Recording | None = None
                            ) -> AsyncIterator[StepEvent]:
        """Continue a session that stopped before its answer (crash, cancel, max_steps).

        Ends in a user step: ask the model.  Ends with unanswered tool calls: run them first.
        """
        session_id = resolve_session_id(self.repository, session_id)
        plan_resume(self.repository, session_id)  # clear errors before waiting
        async with _claimed(self.repository, session_id, self.config.session_wait):
            plan = plan_resume(self.repository, session_id)  # what is stored now
            if _recording is None:  # a fork or a retry resumed: recorded side-effect calls follow their on_replay
                _recording = (fork_recording(self.repository, session_id, plan.context)
                              or attempts_recording(self.repository, session_id))
            rec = self._recorder(session_id, "resume", plan.query, plan.context, None)
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

    async def resume(self, session_id: str) -> RunResult:
        return await self._collect(self.resume_stream(session_id))

    # -- lifecycle ---------------------------------------------------------------
    def _recorder(self, session_id: str, kind: str, query: str | None, context: list[Step],
                  new_session: AgentSession | None, next_sequence: int | None = None) -> RunRecorder:
        agent = self.agent
        run = AgentRun(session_id=session_id, query=query, agent_name=agent.name, model_name=agent.model_name,
                       kind=kind)
        if next_sequence is None:
            next_sequence = context[-1].sequence + 1 if context else 1
        return RunRecorder(run, self.repository, steps_to_messages(context, agent.system_prompt), next_sequence,
                           new_session, tail=trailing_ids(context))

    async def _lifecycle(self, rec: RunRecorder, setup: Callable[[], list[Step]],
                         pending: tuple[Step, list[str]] | None = None,
                         recording: Recording | None = None) -> AsyncIterator[StepEvent]:
        run, hooks = rec.run, self._hook_caller
        _ACTIVE_SESSIONS[run.session_id] = run.id
        try:
            opening = [rec.emit(_E.RUN_STARTED, {"run": run.to_dict()})]
            new_steps = setup()
            for step in new_steps:
                rec.record_step(step)
                opening.append(rec.emit(_E.STEP_COMPLETED, {"step": step.to_dict()}))
                if is_memory_step(step):
                    opening.append(rec.emit(_E.MEMORY_READ, memory_event_payload(step)))
            rec.mark_run_dirty()
            await rec.commit()
            await hooks.call("on_run_start", run)
            for event in opening:
                yield event
            for step in new_steps:
                await hooks.call("on_step_end", run, step)
            async for event in self._executor.execute(rec, pending, recording):
                yield event
        except asyncio.CancelledError:
            final = self._finish(rec, RunStatus.CANCELLED, "cancelled")
            await hooks.call("on_run_end", run)
            yield final
            raise
        except GeneratorExit:  # the consumer stopped listening: the run ends here, cancelled
            self._finish(rec, RunStatus.CANCELLED, "the consumer closed the event stream")
            await hooks.call("on_run_end", run)
            raise
        except Exception as exc:  # noqa: BLE001 - any failure ends the run as failed, steps kept
            message = str(exc) if isinstance(exc, ModelError) else f"{type(exc).__name__}: {exc}"
            message = redact_for(self.agent.model, message)  # providers echo keys; never store or show them
            final = await self._finish_durably(rec, RunStatus.FAILED, message)
            await hooks.call("on_error", run, exc)
            await hooks.call("on_run_end", run)
            yield final
            return
        final = await self._finish_durably(rec, run.status, run.error)
        await hooks.call("on_run_end", run)
        yield final

    @staticmethod
    def _finish(rec: RunRecorder, status: RunStatus, error: str | None) -> StepEvent:
        """The run's end, committed before it is announced (blocking: the cancel paths)."""
        event = StepRunner._terminal_event(rec, status, error)
        try:
            rec.checkpoint()
        except Exception as exc:  # noqa: BLE001 - the store failing must not hide the run's own outcome
            StepRunner._store_failed(rec, event, status, exc)
        return event

    @staticmethod
    async def _finish_durably(rec: RunRecorder, status: RunStatus, error: str | None) -> StepEvent:
        """:meth:`_finish` awaiting the store's writer, so the loop serves other runs meanwhile."""
        event = StepRunner._terminal_event(rec, status, error)
        try:
            await rec.commit()
        except Exception as exc:  # noqa: BLE001 - the store failing must not hide the run's own outcome
            StepRunner._store_failed(rec, event, status, exc)
        return event

    @staticmethod
    def _terminal_event(rec: RunRecorder, status: RunStatus, error: str | None) -> StepEvent:
        forget_tree(rec.run)
        rec.finish(status, error)
        return rec.emit(_TERMINAL[status], {"run": rec.run.to_dict()})

    @staticmethod
    def _store_failed(rec: RunRecorder, event: StepEvent, status: RunStatus, exc: Exception) -> None:
        rec.run.error = f"{rec.run.error or status.value}; and the store failed: {exc}"
        event.payload["run"] = rec.run.to_dict()

    async def _collect(self, stream: AsyncIterator[StepEvent]) -> RunResult:
        events: list[StepEvent] = []
        run: AgentRun | None = None
        async for event in stream:
            if event.type is _E.STEP_DELTA:
                continue
            events.append(event)
            if event.type.is_terminal:
                run = AgentRun.from_dict(event.payload["run"])
        assert run is not None
        # the stored versions: metrics filled in after their event (e.g. tool time) are included
        steps = [] if run.start_sequence is None else [
            s for s in self.repository.get_steps(run.session_id, run.start_sequence, run.end_sequence)
            if s.run_id == run.id]
        return RunResult(run=run, steps=steps, events=events, repository=self.repository, agent=self.agent)
