"""The lifecycle of one run: started, its opening steps, the loop, and exactly one durable end.

Every entry point (a new query, a retry, a resume, a fork) goes through here, so each emits
``run_started`` and exactly one terminal event, and saves a run record (the original project's resumes
were invisible; these are not). The end is committed before it is announced; a cancelled or failed run
keeps every step it wrote.
"""

from __future__ import annotations

import asyncio
from typing import AsyncIterator, Callable

from ..core import ModelError, RunStatus, Step, StepEvent, StepEventType
from ..core.conversation import is_memory_step
from ..models.recording import Recording
from .hooks import HookCaller
from .memory_read import memory_event_payload
from .nested import forget_tree
from .recorder import RunRecorder
from .requests import redact_for
from .session_claims import ACTIVE_SESSIONS
from .step_executor import StepExecutor

_E = StepEventType
TERMINAL = {RunStatus.COMPLETED: _E.RUN_COMPLETED, RunStatus.FAILED: _E.RUN_FAILED,
            RunStatus.CANCELLED: _E.RUN_CANCELLED, RunStatus.MAX_STEPS: _E.RUN_MAX_STEPS,
            RunStatus.BUDGET_EXCEEDED: _E.RUN_BUDGET_EXCEEDED}


async def lifecycle(executor: StepExecutor, hooks: HookCaller, rec: RunRecorder, setup: Callable[[], list[Step]],
                    pending: tuple[Step, list[str]] | None = None,
                    recording: Recording | None = None) -> AsyncIterator[StepEvent]:
    """Run ``rec``'s run to its end: ``setup`` makes its opening steps (the query, memory...), ``pending``
    tool calls a resume answers first, ``recording`` answers repeated requests and recorded side effects."""
    run = rec.run
    ACTIVE_SESSIONS[run.session_id] = run.id
    held: list[StepEvent] = []
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
        async for event in executor.execute(rec, pending, recording):
            if rec.held_steps:  # from the final answer on, the events wait for the run's end to be committed
                held.append(event)
                continue
            for earlier in held:  # a reply held as a typed answer, refused: committed since, with its refusal
                yield earlier
            held.clear()
            yield event
    except asyncio.CancelledError:
        final = finish(rec, RunStatus.CANCELLED, "cancelled")
        async for event in _announce(rec, hooks, held):
            yield event
        await hooks.call("on_run_end", run)
        yield final
        raise
    except GeneratorExit:  # the consumer stopped listening: the run ends here, cancelled
        finish(rec, RunStatus.CANCELLED, "the consumer closed the event stream")
        await hooks.call("on_run_end", run)
        raise
    except Exception as exc:  # noqa: BLE001 - any failure ends the run as failed, steps kept
        message = str(exc) if isinstance(exc, ModelError) else f"{type(exc).__name__}: {exc}"
        message = redact_for(executor.model, message)  # providers echo keys; never store or show them
        final = await finish_durably(rec, RunStatus.FAILED, message)
        async for event in _announce(rec, hooks, held):
            yield event
        await hooks.call("on_error", run, exc)
        await hooks.call("on_run_end", run)
        yield final
        return
    final = await finish_durably(rec, run.status, run.error)
    async for event in _announce(rec, hooks, held):
        yield event
    await hooks.call("on_run_end", run)
    yield final


async def _announce(rec: RunRecorder, hooks: HookCaller, held: list[StepEvent]) -> AsyncIterator[StepEvent]:
    """The events held for the run's end (its final answer's on), once that end is committed: a final
    answer costs no commit of its own. If the commit failed, the answer is not durable: it is not
    announced, and the run's end says why."""
    steps, rec.held_steps = rec.held_steps, []
    if not steps or not rec.all_durable():
        return
    for event in held:
        yield event
    for step in steps:
        await hooks.call("on_step_end", rec.run, step)


def finish(rec: RunRecorder, status: RunStatus, error: str | None) -> StepEvent:
    """The run's end, committed before it is announced (blocking: the cancel paths)."""
    event = _terminal_event(rec, status, error)
    try:
        rec.checkpoint()
    except Exception as exc:  # noqa: BLE001 - the store failing must not hide the run's own outcome
        _store_failed(rec, event, status, exc)
    return event


async def finish_durably(rec: RunRecorder, status: RunStatus, error: str | None) -> StepEvent:
    """:func:`finish` awaiting the store's writer, so the loop serves other runs meanwhile."""
    event = _terminal_event(rec, status, error)
    try:
        await rec.commit()
    except Exception as exc:  # noqa: BLE001 - the store failing must not hide the run's own outcome
        _store_failed(rec, event, status, exc)
    return event


def _terminal_event(rec: RunRecorder, status: RunStatus, error: str | None) -> StepEvent:
    forget_tree(rec.run)
    if status is not RunStatus.COMPLETED and rec.answer is not None:  # cancelled, failed: no answer
        rec.forget_answer()
    rec.finish(status, error)
    return rec.emit(TERMINAL[status], {"run": rec.run.to_dict()})


def _store_failed(rec: RunRecorder, event: StepEvent, status: RunStatus, exc: Exception) -> None:
    if rec.held_steps and status is RunStatus.COMPLETED:  # its answer is not durable: not completed
        rec.run.status, rec.run.error = RunStatus.FAILED, f"the final answer could not be stored: {exc}"
        if rec.answer is not None:  # a typed answer: a failed run has none
            rec.forget_answer()
        event.type = TERMINAL[RunStatus.FAILED]
    else:
        rec.run.error = f"{rec.run.error or status.value}; and the store failed: {exc}"
    event.payload["run"] = rec.run.to_dict()
