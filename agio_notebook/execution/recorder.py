"""RunRecorder: the state of one run while it executes.

It numbers events and steps, keeps the model context growing one message at
a time (never rebuilt per turn), folds step metrics into run totals, and
groups everything produced since the last checkpoint into one durable commit, made by the
store's writer thread (grouped with other runs' commits) while the event loop goes on.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from contextlib import contextmanager
from typing import Any, Iterator

from ..core import (TRANSIENT_EVENTS, AgentRun, AgentSession, RunStatus, Step, StepEvent, StepEventType,
                    StepRole, now)
from ..core.conversation import is_memory_step
from ..storage.base import Repository
from ..storage.group_commit import GroupCommitter, committer_for, store_wait
from ..tools.output import Answer
from .session_claims import store_calls_inline


# the typed answers of this process's latest runs, as validated (a cell's handle reads its run's back from the
# store; a validator that transforms must not run twice)
_RECENT_ANSWERS: OrderedDict[str, Answer] = OrderedDict()
_RECENT = 256


def recent_answer(run_id: str) -> Answer | None:
    answer = _RECENT_ANSWERS.get(run_id)
    if answer is not None:
        _RECENT_ANSWERS.move_to_end(run_id)  # the least recently read go first
    return answer


class RunRecorder:
    __slots__ = ("run", "repository", "messages", "steps", "events", "deps", "instructions", "_seq", "_next_sequence",
                 "_pending_steps", "_pending_events", "_pending_session", "_run_dirty", "_started", "tail",
                 "_tail_tools", "_committer", "held_steps", "answer", "__weakref__")

    def __init__(self, run: AgentRun, repository: Repository, messages: list[dict[str, Any]],
                 next_sequence: int, session: AgentSession | None = None, tail: list[str] | None = None):
        self.run = run
        self.repository = repository
        self.messages = messages
        self.steps: list[Step] = []  # steps this run wrote, in order
        self.events: list[StepEvent] = []  # stored (non-transient) events of this run
        self.deps: Any = None  # the run's dependencies (handed to tools; never stored)
        self.instructions: str | None = None  # the system prompt of the agent answering (before memory)
        self._seq = 0
        self._next_sequence = next_sequence
        self._pending_steps: list[Step] = []
        self._pending_events: list[StepEvent] = []
        self._pending_session = session
        self._run_dirty = True
        self._started = now()
        self.tail = list(tail or ())  # ids the next step follows in the trace graph
        self._tail_tools = False
        self._committer = committer_for(repository)  # the store's writer thread (None: commits inline)
        # the run's final answer (a plain agent's last step, or a typed answer's tool steps), made durable
        # with the run's end (one commit for both): from it on, the run's events wait for that commit
        # before they are announced (see ``lifecycle``)
        self.held_steps: list[Step] = []
        self.answer: Answer | None = None  # a typed agent's answer, once one fit (its value may be None)

    # -- numbering -------------------------------------------------------------
    @property
    def upcoming_sequence(self) -> int:
        """The sequence the next step will take (streamed deltas carry it before the step exists)."""
        return self._next_sequence

    def next_sequence(self) -> int:
        seq = self._next_sequence
        self._next_sequence += 1
        return seq

    def emit(self, type_: StepEventType, payload: dict[str, Any]) -> StepEvent:
        self._seq += 1
        run = self.run
        event = StepEvent(type_, run.id, run.session_id, self._seq, payload)
        if type_ not in TRANSIENT_EVENTS:
            self._pending_events.append(event)
            self.events.append(event)
        return event

    # -- steps -----------------------------------------------------------------
    def record_step(self, step: Step) -> None:
        """A new step of this run: into context, into run totals, into the next commit."""
        run = self.run
        if run.attempt > 1 and step.run_id == run.id:
            step.attempt = run.attempt  # a retry's steps are that attempt's
        self._link(step)
        if not is_memory_step(step):  # memory goes into the system prompt instead
            self.messages.append(step.to_message())
        self.steps.append(step)
        self._pending_steps.append(step)
        if run.start_sequence is None:
            run.start_sequence = step.sequence
        run.end_sequence = step.sequence
        m, s = run.metrics, step.metrics
        m.steps += 1
        if step.role is StepRole.ASSISTANT:
            m.model_calls += 1
            if "reused" in step.extra:  # answered from a recording: nothing spent (a known 0)
                m.reused_calls += 1
                m.reused_tokens += s.total_tokens or 0
                m.prompt_tokens, m.completion_tokens = m.prompt_tokens or 0, m.completion_tokens or 0
                m.total_tokens = m.total_tokens or 0
            else:
                if s.prompt_tokens is not None:  # unknown usage stays unknown (None), never 0
                    m.prompt_tokens = (m.prompt_tokens or 0) + s.prompt_tokens
                if s.completion_tokens is not None:
                    m.completion_tokens = (m.completion_tokens or 0) + s.completion_tokens
                if s.total_tokens is not None:
                    m.total_tokens = (m.total_tokens or 0) + s.total_tokens
                m.cached_tokens += s.cached_tokens or 0
            if m.cost is not None:
                m.cost = None if s.cost is None else m.cost + s.cost
            m.model_ms += s.model_ms or 0.0
            if m.ttft_ms is None:
                m.ttft_ms = s.ttft_ms
        elif step.role is StepRole.TOOL:
            m.tool_calls += 1
            m.tool_ms += s.duration_ms or 0.0
            if step.status != "ok":
                m.tool_errors += 1

    def _link(self, step: Step) -> None:
        """Parent ids: a tool step follows its model step; anything else follows the tail (all of a
        parallel tool batch, or the last step)."""
        if step.role is StepRole.TOOL:
            if not step.parent_ids:
                step.parent_ids = list(self._batch_parent or self.tail)
            if not self._tail_tools:
                self.tail, self._tail_tools = [], True
            self.tail.append(step.id)
            return
        if not step.parent_ids:
            step.parent_ids = list(self.tail)
        self.tail, self._tail_tools = [step.id], False

    @property
    def _batch_parent(self) -> list[str]:
        last = self.steps[-1] if self.steps else None
        return list(last.parent_ids) if last is not None and last.role is StepRole.TOOL else []

    def stage(self, steps: list[Step]) -> None:
        """Steps that go into the next commit only: not into the context or the run's totals (a side-effect
        call's "started" step, which its result replaces, same id, before the next model call)."""
        self._pending_steps.extend(steps)

    def all_durable(self) -> bool:
        """Every step and event of the run so far is committed (a failed commit leaves them pending)."""
        return not (self._pending_steps or self._pending_events)

    def durable_steps(self) -> list[Step] | None:
        """This run's steps as its commits made them durable, in order; None while any change is not yet
        durable (a failed commit stays pending): then only a read of the store says what it holds."""
        if self._pending_steps:
            return None
        run_id = self.run.id
        return sorted((s for s in self.steps if s.run_id == run_id), key=lambda s: (s.sequence, s.attempt))

    def update_step(self, step: Step) -> None:
        """A changed version of an already stored step (e.g. tool time filled in, superseded)."""
        if not any(p is step for p in self._pending_steps):
            self._pending_steps.append(step)

    def mark_run_dirty(self) -> None:
        self._run_dirty = True

    # -- durability ------------------------------------------------------------
    def _take(self) -> dict[str, Any] | None:
        """Everything produced since the last commit, as one commit (None: nothing)."""
        if not (self._pending_steps or self._pending_events or self._run_dirty or self._pending_session):
            return None
        commit = {"session": self._pending_session, "run": self.run if self._run_dirty else None,
                  "steps": self._pending_steps, "events": self._pending_events}
        self._pending_steps = []
        self._pending_events = []
        self._pending_session = None
        self._run_dirty = False
        return commit

    def _restore(self, commit: dict[str, Any]) -> None:
        """A commit that failed stays pending: the next one (the run's last) tries it again."""
        self._pending_steps = [*commit["steps"], *self._pending_steps]
        self._pending_events = [*commit["events"], *self._pending_events]
        self._pending_session = self._pending_session or commit["session"]
        self._run_dirty = self._run_dirty or commit["run"] is not None

    def checkpoint(self) -> None:
        """One durable commit of everything produced since the last one; blocks until it is durable.

        It goes through the store's writer thread like :meth:`commit`, after any commit still in flight.
        The cancel paths use it; a running step uses :meth:`commit`, which does not block the loop.
        """
        commit = self._take()
        if commit is None:
            return
        committer = self._committer
        with self._durably(commit):
            if committer is None:
                self.repository.commit(**commit)
            else:
                committer.submit(commit).result()

    async def commit(self) -> None:
        """:meth:`checkpoint` without blocking the event loop: the store's writer thread makes it
        durable, grouped with other runs' commits (one sync for all), and this returns once it is.
        The time waited counts in the caller's :data:`store_wait`, not as the run's own."""
        commit = self._take()
        if commit is None:
            return
        committer = self._committer
        with self._durably(commit):
            if committer is None or self._alone(committer):
                self.repository.commit(**commit)
            else:
                durable = committer.submit_async(commit)
                durable.add_done_callback(lambda f: f.cancelled() or f.exception())  # a cancelled waiter's outcome is seen
                await asyncio.shield(durable)  # a cancelled run's commit still completes, in order

    def _alone(self, committer: GroupCommitter) -> bool:
        """Whether this run commits on its own thread (see ``store_calls_inline``): handing the commit to the
        writer thread and back would cost more than the commit, and the loop waits for it either way. Never
        while the writer has commits of others: one made here would overtake them."""
        return store_calls_inline(self.repository, holding=True) and committer.idle()

    @contextmanager
    def _durably(self, commit: dict[str, Any]) -> Iterator[None]:
        """Around one commit: its wait counted as the store's (:data:`store_wait`); a failed commit stays
        pending for the next (the run's last) to try again; :meth:`committed` once it is durable."""
        wait = store_wait.get()
        if wait is not None:
            wait.begin()
        try:
            yield
        except asyncio.CancelledError:
            raise  # the shielded commit goes on, and lands
        except BaseException:
            self._restore(commit)
            raise
        finally:
            if wait is not None:
                wait.end()
        self.committed()

    def committed(self) -> None:
        """Called after each durable commit (a retry links the runs it replaces then)."""

    def give(self, answer: Answer) -> None:
        """The run's typed answer (the first that fit): stored with the run as JSON, its text that JSON,
        whatever words came with it."""
        self.answer = answer
        self.run.output, self.run.answered = answer.data, True
        self.run.final_text = answer.text
        _RECENT_ANSWERS[self.run.id] = answer
        while len(_RECENT_ANSWERS) > _RECENT:
            _RECENT_ANSWERS.popitem(last=False)
        self._run_dirty = True

    def forget_answer(self) -> None:
        """A run that ends without its answer (it could not be stored) has none."""
        self.answer = None
        self.run.output = self.run.final_text = None
        self.run.answered = False
        _RECENT_ANSWERS.pop(self.run.id, None)
        self._run_dirty = True

    def finish(self, status: RunStatus, error: str | None = None) -> None:
        run = self.run
        run.status = status
        run.error = error
        run.ended_at = now()
        run.metrics.duration_ms = (run.ended_at - self._started) * 1000.0
        if self.answer is None:  # else the answer's JSON (``give``)
            run.final_text = next((s.content for s in reversed(self.steps) if s.role is StepRole.ASSISTANT), None)
        self._run_dirty = True
