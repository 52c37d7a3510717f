"""What a run returns: its record, the steps and events it wrote, and its typed output."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable

import pydantic

from ..agent import Agent
from ..core import (AgentRun, InvalidOperationError, RunMetrics, RunStatus, Step, StepEvent, StepEventType,
                    gave_answer)
from ..storage import Repository
from ..tools.output import Answer
from .handoff import reachable
from .recorder import RunRecorder, recent_answer


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

    answer: Answer | None = field(default=None, repr=False, compare=False)

    @property
    def output(self) -> Any:
        """A typed agent's answer as its ``output_type`` (None unless the run completed with one); for other
        agents, the final text. See :func:`output_of`."""
        return output_of(self.run, self.answer, self.agent)

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


def output_of(run: AgentRun, answer: Answer | None, agent: Agent | None) -> Any:
    """A run's answer: the one rule for every handle on a run (a result, a notebook cell's value).

    A typed run's answer is the value as it was validated when this process ran it (``answer``), or else
    its stored JSON validated by the type that gave it (the agent's, or one it hands off to, found by the
    run's ``output_type``; the JSON as stored if none is at hand); None unless the run completed with one.
    A run of an untyped agent: its final text."""
    if answer is not None:
        return answer.value
    if run.output_type is None:
        return run.output if run.output is not None else run.final_text
    if not gave_answer(run):
        return None
    kept = recent_answer(run.id)  # validated in this process: a validator that transforms runs once
    if kept is not None:
        return kept.value
    specs = [a.output for a in reachable(agent).values() if a.output is not None] if agent is not None else []
    for spec in sorted(specs, key=lambda s: s.name != run.output_type):  # the type that answered first
        try:
            return spec.load(run.output)
        except pydantic.ValidationError:
            continue
    return run.output


async def collect(stream: AsyncIterator[StepEvent], repository: Repository, agent: Agent,
                  recorder_of: Callable[[str], RunRecorder | None] | None = None) -> RunResult:
    """Drive a run's event stream to its end; the result, with the steps as stored (metrics filled in
    after their event, such as tool time, included). ``recorder_of`` finds the run's recorder, which
    knows what its commits made durable (no read of the store); without it, or if something it wrote
    is not durable, the store is read."""
    events: list[StepEvent] = []
    run: AgentRun | None = None
    rec: RunRecorder | None = None
    async for event in stream:
        if event.type is StepEventType.STEP_DELTA:
            continue
        events.append(event)
        if event.type.is_terminal:
            run = AgentRun.from_dict(event.payload["run"])
            rec = recorder_of(run.id) if recorder_of is not None else None  # held now: its stream is ending
    if run is None:  # every stream ends with a terminal event; said plainly if one ever does not
        raise InvalidOperationError("the run's event stream ended without its outcome")
    steps = rec.durable_steps() if rec is not None else None
    if steps is None:
        steps = [] if run.start_sequence is None else [
            s for s in repository.get_steps(run.session_id, run.start_sequence, run.end_sequence) if s.run_id == run.id]
    return RunResult(run=run, steps=steps, events=events, repository=repository, agent=agent,
                     answer=rec.answer if rec is not None else None)


async def replayed(events: list[StepEvent]) -> AsyncIterator[StepEvent]:
    for event in events:
        yield event
