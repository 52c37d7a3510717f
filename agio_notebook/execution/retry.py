"""Retry and resume: where a new attempt starts and what it may see.

Nothing is deleted: a retry marks the steps it replaces ``superseded`` (they
stay queryable, with their attempt number) and its own steps start at the
same sequence with the next attempt number.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field, replace
from typing import Any

from ..core import AgentRun, InvalidOperationError, NotFoundError, RunStatus, Step, StepRole
from ..core.conversation import is_memory_step
from ..storage.base import Repository
from ..storage.ids import resolve_run_id, resolve_session_id
from .context import answered_by, pending_tool_calls


@dataclass
class RetryPlan:
    session_id: str
    old_run: AgentRun
    from_seq: int
    attempt: int
    context: list[Step]  # current steps before from_seq
    superseded: list[Step]  # current steps from from_seq on, superseded once the retry writes its first step
    superseded_runs: list[AgentRun] = field(default_factory=list)


@dataclass
class ResumePlan:
    session_id: str
    query: str | None
    context: list[Step]
    pending: tuple[Step, list[str]] | None


def session_steps(repository: Repository, session_id: str) -> list[Step]:
    """The session's current steps; a session without any cannot be resumed or forked."""
    steps = repository.get_steps(session_id)
    if not steps:
        raise NotFoundError(f"no session {session_id!r} with steps in the store")
    return steps


def step_number(value: Any, what: str = "step") -> int:
    """A step's sequence as given by a caller (a number typed in a command, a frame's cell): a whole number,
    or one clear error before anything is planned or stored (``4.0``, ``"3"`` or ``True`` are not)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what} must be a step's sequence number (a whole number), got {type(value).__name__} "
                        f"{value!r}")
    return int(value)


def check_resumable(steps: list[Step], where: str) -> None:
    """Steps a run can go on from without a new query: they end in a user step or unanswered tool calls,
    not with an answer (a last reply, or a typed agent's accepted ``final_result``)."""
    answer = answered_by(steps)
    if answer is not None:
        raise InvalidOperationError(f"{where} already ends with an answer (step {answer.sequence}); "
                                    "send a new query or retry instead")


def check_sequence_exists(steps: list[Step], seq: int, session_id: str) -> None:
    if not any(s.sequence == seq for s in steps):
        raise NotFoundError(f"session {session_id} has no current step at sequence {seq} "
                            f"(current steps: 1..{steps[-1].sequence})")


def check_step_of_run(repository: Repository, run: AgentRun, seq: int, steps: list[Step], what: str) -> None:
    """A step named together with a run must be that run's (or a retry's of it, or the run's it retries).

    Step numbers count across the session, so "step 4" with run B may be run A's: refuse in one line that
    names the step's run. ``steps`` are the conversation the number is read in (the run's attempt)."""
    step = next((s for s in steps if s.sequence == seq), None)
    if step is None:
        return  # check_sequence_exists says what is there
    family = {r.id for r in attempt_family(repository, run)}
    if step.run_id in family:
        return
    owner = f"run {step.run_id[:8]}" if step.run_id else "no run (it was copied into this session by a fork)"
    own = _spans([s.sequence for s in steps if s.run_id in family])
    raise InvalidOperationError(f"cannot {what} run {run.id[:8]} at step {seq}: step {seq} belongs to {owner}, "
                                f"not to run {run.id[:8]} (whose steps are {own or 'none'})")


def _spans(numbers: list[int]) -> str:
    """``1, 2, 3, 6, 7`` as ``1–3, 6–7``."""
    spans: list[list[int]] = []
    for n in sorted(set(numbers)):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in spans)


def check_continuation_point(steps: list[Step], seq: int, what: str) -> None:
    """Steps ``1..seq`` must end where a model call can follow: not inside a half-finished tool batch."""
    upto = [s for s in steps if s.sequence <= seq]
    dangling, missing = pending_tool_calls(upto)
    if dangling is not None:
        raise InvalidOperationError(
            f"cannot {what} at sequence {seq}: it is inside the tool batch of step {dangling.sequence} "
            f"({len(missing)} tool result(s) missing); pick {dangling.sequence - 1} or the batch's last tool step")


def plan_retry(repository: Repository, run_id: str, from_seq: int | None, active_runs: set[str]) -> RetryPlan:
    run_id = resolve_run_id(repository, run_id)  # a prefix shown in a table or transcript works too
    run = repository.get_run(run_id)
    if run is None:
        raise NotFoundError(f"no run {run_id!r} in the store")
    if run_id in active_runs:
        raise InvalidOperationError(f"run {run_id} is still running; cancel it or wait for it to finish")
    steps = repository.get_steps(run.session_id)
    if not steps:
        raise NotFoundError(f"session {run.session_id} of run {run_id} has no steps")
    if from_seq is not None:
        from_seq = step_number(from_seq, "from_seq")
    if from_seq is None:
        own = [s for s in steps if s.run_id == run_id and s.role is not StepRole.USER
               and not is_memory_step(s)]  # a retry reuses the recorded memory
        if not own:
            raise InvalidOperationError(f"run {run_id} has no current model step to retry; pass from_seq")
        from_seq = own[0].sequence
    check_sequence_exists(steps, from_seq, run.session_id)
    check_step_of_run(repository, run, from_seq, steps, "retry")
    by_seq = {s.sequence: s for s in steps}
    if by_seq[from_seq].role is StepRole.USER:
        from_seq += 1  # keep the user's message; regenerate what followed it
    if by_seq.get(from_seq) is not None and by_seq[from_seq].role is StepRole.TOOL:
        raise InvalidOperationError(f"cannot retry from sequence {from_seq}: it is a tool result inside a tool "
                                    "batch; retry from the assistant step that called the tool")
    check_continuation_point(steps, from_seq - 1, "retry")
    context = [s for s in steps if s.sequence < from_seq]
    # copies: planning never changes what a repository holds (an in-memory one keeps live objects)
    superseded = [replace(s, superseded=True) for s in steps if s.sequence >= from_seq]
    all_at = repository.get_steps(run.session_id, from_seq, from_seq, include_superseded=True)
    family = attempt_family(repository, run)
    # numbers stay unique within the family, so "attempt n" names one run
    attempt = max([s.attempt for s in all_at] + [r.attempt for r in family]) + 1
    later_runs = {s.run_id for s in superseded if s.run_id}
    superseded_runs = [r for r in (repository.get_run(rid) for rid in later_runs | {run_id}) if r is not None
                       and r.status is not RunStatus.RUNNING]
    return RetryPlan(run.session_id, run, from_seq, attempt, context, superseded, superseded_runs)


def attempt_family(repository: Repository, run: AgentRun) -> list[AgentRun]:
    """``run`` and every retry of it (and of its retries), oldest attempt first."""
    runs = {r.id: r for r in repository.list_runs(run.session_id)}
    runs[run.id] = run

    def root(r: AgentRun) -> str:
        seen = set()
        while r.retry_of and r.retry_of in runs and r.id not in seen:
            seen.add(r.id)
            r = runs[r.retry_of]
        return r.id

    top = root(run)
    family = [r for r in runs.values() if root(r) == top]
    return sorted(family, key=lambda r: (r.attempt, r.started_at))


def plan_resume(repository: Repository, session_id: str) -> ResumePlan:
    session_id = resolve_session_id(repository, session_id)
    steps = session_steps(repository, session_id)
    answer = answered_by(steps)
    if answer is not None and answer.tool_calls and not _ended_with(repository, session_id, answer):
        # a typed answer accepted by a run that stopped before it ended (killed): the resume gives it
        return ResumePlan(session_id, _last_query(steps), steps, (answer, []))
    check_resumable(steps, f"session {session_id}")
    dangling, missing = pending_tool_calls(steps)
    return ResumePlan(session_id, _last_query(steps), steps, (dangling, missing) if dangling is not None else None)


def _ended_with(repository: Repository, session_id: str, answer: Step) -> bool:
    """Whether a run ended with ``answer``: the run that gave it completed, or a resume of it did (a step
    copied by a fork, of no run here, ended its run where it was made)."""
    runs = repository.list_runs(session_id)
    owner = next((r for r in runs if r.id == answer.run_id), None)
    return owner is None or any(r.status is RunStatus.COMPLETED and r.started_at >= owner.started_at for r in runs)


def _last_query(steps: list[Step]) -> str | None:
    return next((s.content for s in reversed(steps) if s.role is StepRole.USER), None)
