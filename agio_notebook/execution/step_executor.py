"""StepExecutor: the model <-> tools loop of one run, as a stream of events.

Each turn streams one model reply into an assistant step, makes it durable,
runs its tool calls (in parallel when allowed), makes their results durable,
and goes back to the model — until the model answers without tool calls or
``max_steps`` model calls have been made.  Persisting happens at exactly two
checkpoints per turn (before the tools run, before the next model call), and every
``step_completed`` is yielded only once its step is on disk (the final answer included).
A tool with side effects runs only once a step saying it started is on disk, so a crash
or a store error can never make a replay or a resume run it a second time.

One model call is a :class:`ModelTurn`: its request (:meth:`StepExecutor.request`), the stream of
chunks folded by a :class:`ReplyAssembler`, and the step it becomes.
"""

from __future__ import annotations

import asyncio
import json
import time
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

from ..core import ExecutionConfig, ModelError, RunStatus, Step, StepEvent, StepEventType, StepMetrics, StepRole, ToolCall
from ..core.redact import mask_known
from ..models.base import Finish, TextDelta, ToolCallDelta, Usage
from ..models.pricing import cost_of
from ..models.recording import Recording, reuse_key
from ..models.replay import response_chunks, step_response
from ..models.request import MessageChain, stored_request, tools_digest
from ..models.settings import check_settings, merge_settings
from ..tools import Tool, ToolCallContext, ToolResult
from ..tools.context import RunContext
from ..tools.output import ACCEPTED, FINAL_RESULT, NOT_USED, Answer, OutputError, OutputSpec
from .approval import ApprovalDecision, ApprovalRequest, Approver, edited_note
from .budget import Budget
from .handoff import take_handoff
from .hooks import HookCaller
from .nested import Reservation, Tree, interleave, join_tree, needs_scope, tool_engine
from .pauses import ModelCall
from .recorder import RunRecorder
from .requests import redact_for
from .tool_executor import ToolExecutor
from .watchdog import Watchdog

_E = StepEventType

# what a side-effect call's step says from the moment it starts until its result replaces it: if the
# process dies in between, this is what every later reader, resume and replay sees
STARTED_NOT_FINISHED = ("The call started but its result was never stored (the run stopped while it ran). "
                        "The tool has side effects, so it is not run again automatically.")


def _elide(value: Any, limit: int = 2000) -> Any:
    if isinstance(value, str) and len(value) > limit:
        return value[:limit] + f"… [{len(value)} characters; whole on the tool step]"
    if isinstance(value, dict):
        return {k: _elide(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_elide(v, limit) for v in value]
    return value


@dataclass(slots=True)
class _CallSlot:
    """One tool call as its deltas arrive."""

    id: str | None
    name: str | None
    position: int  # the order calls started in
    pieces: list[str] = field(default_factory=list)


class ReplyAssembler:
    """A model's streamed chunks folded into its reply: text, and tool calls in the order they started."""

    __slots__ = ("texts", "slots", "_by_index")

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.slots: list[_CallSlot] = []
        self._by_index: dict[int, _CallSlot] = {}

    @property
    def text(self) -> str:
        return "".join(self.texts)

    def add_call(self, delta: ToolCallDelta) -> int:
        """Fold one tool-call delta in; the position of the call it belongs to."""
        slot = self._by_index.get(delta.index)
        # a new id on a used index starts a new call (Ollama streams parallel calls all at index 0)
        if slot is None or (delta.id and slot.id and delta.id != slot.id):
            slot = self._by_index[delta.index] = _CallSlot(delta.id, delta.name, len(self.slots))
            self.slots.append(slot)
        else:
            slot.id = slot.id or delta.id
            slot.name = slot.name or delta.name
        if delta.arguments:
            slot.pieces.append(delta.arguments)
        return slot.position

    def tool_calls(self, sequence: int) -> list[ToolCall]:
        """The reply's calls, each with an id of its own: a missing id is made up, and an id the reply
        already gave another call is re-keyed (one id answering two calls would lose one of them)."""
        calls: list[ToolCall] = []
        used: set[str] = set()
        for i, slot in enumerate(self.slots):
            call_id = slot.id or f"call_{sequence}_{i}"
            if call_id in used:
                n = 2
                while f"{call_id}_{n}" in used:
                    n += 1
                call_id = f"{call_id}_{n}"
            used.add(call_id)
            calls.append(ToolCall(id=call_id, name=slot.name or "", arguments="".join(slot.pieces) or "{}"))
        return calls


class ModelTurn:
    """One model call of a run, tried again on a retryable error nothing was shown of: the request, the
    streamed reply and the step it becomes (``step``, set once its ``step_completed`` is yielded).

    ``streamed`` says whether anything of the current attempt arrived (then an error is not retried:
    the person saw it).
    """

    __slots__ = ("executor", "rec", "chain", "recording", "streamed", "step")

    def __init__(self, executor: StepExecutor, rec: RunRecorder, chain: MessageChain, recording: Recording | None):
        self.executor, self.rec, self.chain, self.recording = executor, rec, chain, recording
        self.streamed = False
        self.step: Step | None = None

    async def events(self) -> AsyncIterator[StepEvent]:
        config = self.executor.config
        attempts = 1 + (config.max_retries if config.enable_retry else 0)
        for attempt in range(attempts):
            self.streamed = False
            try:
                async for event in self._attempt():
                    yield event
                return
            except ModelError as exc:
                if not exc.retryable or self.streamed or attempt + 1 >= attempts:
                    raise
            await asyncio.sleep(min(0.25 * 2 ** attempt, 4.0))

    async def _attempt(self) -> AsyncIterator[StepEvent]:
        executor, rec = self.executor, self.rec
        sequence = rec.upcoming_sequence  # taken for good once the step completes
        settings = executor.settings_for(rec)
        call = ModelCall(rec.messages, settings, executor.request(rec.messages, self.chain, settings))
        if executor.debugger is not None:  # step mode: the final request may be paused on and edited
            async for event in executor.debugger.before_model(rec, call, executor.model.name, executor.schemas):
                yield event
        # with reuse, a request recorded before (same messages, tools, settings and model) is answered from the record
        recording = self.recording
        reused = recording.take_reply(reuse_key(call.request)) if recording is not None and recording.reuse else None
        reply, usage = ReplyAssembler(), None
        failure: ModelError | None = None
        stopped = False  # cancelled while the reply streamed: the text shown so far is kept, marked partial
        t0 = time.perf_counter()
        ttft: float | None = None
        try:
            async with aclosing(self._chunks(call, reused)) as chunks:
                async for chunk in chunks:
                    kind = type(chunk)
                    if kind is Usage:
                        usage = chunk
                        continue
                    if kind is Finish:
                        continue
                    if ttft is None:
                        ttft = time.perf_counter()
                    self.streamed = True
                    if kind is TextDelta:
                        reply.texts.append(chunk.text)
                        if executor.config.stream:
                            yield rec.emit(_E.STEP_DELTA, {"sequence": sequence, "content": chunk.text})
                    else:
                        position = reply.add_call(chunk)
                        if executor.config.stream:
                            yield rec.emit(_E.STEP_DELTA, {"sequence": sequence, "tool_call": {
                                "index": position, "id": chunk.id, "name": chunk.name, "arguments": chunk.arguments}})
        except ModelError as exc:
            if not reply.texts:
                raise
            failure = exc  # the text streamed so far is kept on a failed step
        except asyncio.CancelledError:
            if not reply.texts:
                raise
            stopped = True
        model_ms = (time.perf_counter() - t0) * 1000.0
        step = executor.reply_step(rec, reply, call.request, usage, reused, model_ms,
                                   (ttft - t0) * 1000.0 if ttft is not None else model_ms,
                                   tool_calls=failure is None and not stopped)
        if failure is not None:
            step.status = "error"
            step.error = redact_for(executor.model, failure.args[0] if failure.args else str(failure))
        elif stopped:  # what the person watched stream stays, as a step marked partial
            step.status = "cancelled"
            step.extra["partial"] = True
        elif executor.debugger is not None:  # the reply may be edited before it is stored and its tools run
            async for event in executor.debugger.after_reply(rec, step):
                yield event
        rec.record_step(step)
        self.step = step
        event = rec.emit(_E.STEP_COMPLETED, {"step": step.to_dict()})
        if failure is None and not stopped and executor.may_end_run(step):
            rec.held_steps = [step]  # the final answer: durable with the run's end, and announced then
            yield event
            return
        await rec.commit()  # durable before announced: before any tool runs, a failed call too
        yield event
        if failure is not None:
            raise failure
        if stopped:
            raise asyncio.CancelledError
        await executor.hooks.call("on_step_end", rec.run, step)

    async def _chunks(self, call: ModelCall, reused: Step | None) -> AsyncIterator[Any]:
        """The model's chunks under the watchdog's three time limits; a model's own bug is one clear line."""
        executor, config = self.executor, self.executor.config
        watch = Watchdog(config.first_token_timeout, config.idle_timeout, config.timeout_per_step,
                         executor.model.name)
        kwargs: dict[str, Any] = {"stream": config.stream}
        if call.settings:
            kwargs["settings"] = call.settings
        source = (response_chunks(step_response(reused)) if reused is not None
                  else executor.model.stream(call.messages, executor.schemas, **kwargs))
        agen = source.__aiter__()
        started = False
        try:
            while True:
                watch.begin_wait()
                try:
                    chunk = await agen.__anext__()
                except StopAsyncIteration:
                    return
                except asyncio.CancelledError:
                    watch.raise_if_expired()
                    raise
                except ModelError:
                    raise
                except Exception as exc:  # noqa: BLE001 - a model's own bug still ends as one clear line
                    raise ModelError(f"model {executor.model.name!r} failed: {type(exc).__name__}: {exc}") from None
                finally:
                    watch.waiting = False
                if type(chunk) in (TextDelta, ToolCallDelta):
                    if not started:
                        started = True
                        watch.started()
                elif type(chunk) not in (Usage, Finish):
                    raise ModelError(f"model {executor.model.name!r} yielded an unknown chunk {chunk!r}")
                yield chunk
        finally:
            watch.close()
            await agen.aclose()


class StepExecutor:
    def __init__(self, agent: Any, config: ExecutionConfig, hooks: HookCaller, approver: Approver | None = None):
        self.config = config
        self.hooks = hooks
        self.approver = approver
        self.debugger: Any = None  # step mode: an execution.debug.Debugger awaited at the pause points
        self.use(agent)

    def use(self, agent: Any) -> None:
        """Answer with ``agent`` from now on: its model, settings, tools and schemas. The one place an
        executor is set up for an agent: a new run, and a handoff in the middle of one."""
        model = agent.model
        own = getattr(model, "settings", None)
        self.agent = agent
        self.model = model
        # the effective settings, stored with every request: the model's own defaults, the agent's, the run's
        self.settings = merge_settings(own if isinstance(own, dict) else None,
                                       agent.output.settings if agent.output is not None else None,
                                       check_settings(agent.model_settings), check_settings(self.config.model_settings))
        self.registry = agent.registry
        self.tool_executor = ToolExecutor(agent.registry, self.config)
        self.schemas = agent.registry.schemas()
        self._tools_sha = tools_digest(self.schemas)

    def may_end_run(self, reply: Step) -> bool:
        """Whether this reply may be the run's final answer, so it waits to be made durable with the run's
        end (one commit for both): a reply without tool calls (a typed agent's in JSON), or a typed agent's
        whose calls are all ``final_result`` (they run nothing, so nothing waits on the reply being durable),
        not in step mode, whose pauses are announced as they come. A typed answer that does not fit is
        committed with its refusal before the model is asked again (:meth:`_release_held`)."""
        if not reply.tool_calls:
            return True
        spec = self.agent.output
        return (spec is not None and spec.by_call and self.config.execute_tools and self.debugger is None
                and all(call.name == FINAL_RESULT for call in reply.tool_calls))

    async def _release_held(self, rec: RunRecorder) -> None:
        """Commit what the turn made (a reply held as the answer, and why it was refused); the held reply
        is then announced (the lifecycle passes on its events) and its hooks called."""
        await rec.commit()
        released, rec.held_steps = rec.held_steps, []
        for step in released:
            await self.hooks.call("on_step_end", rec.run, step)

    def request(self, messages: list[dict[str, Any]], chain: MessageChain,
                settings: dict[str, Any] | None = None) -> dict[str, Any]:
        """What is stored with the step: the call's request, its messages by reference (see execution.requests)."""
        return stored_request(self.model.name, messages, chain.update(messages),
                              self.settings if settings is None else settings, self.schemas, self._tools_sha,
                              self.config.stream)

    def settings_for(self, rec: RunRecorder) -> dict[str, Any]:
        """The settings of the next model call: the merged ones, and what the agent's ``settings_hook``
        returns for this call (it sees the run's context and the messages about to be sent)."""
        hook = self.agent.settings_hook
        if hook is None:
            return self.settings
        run = rec.run
        ctx = RunContext(rec.deps, run.session_id, run.id, self.agent.name, step=run.metrics.model_calls + 1)
        extra = hook(ctx, list(rec.messages))
        if extra is None:
            return self.settings
        return merge_settings(self.settings, check_settings(extra, "settings_hook"))

    async def execute(self, rec: RunRecorder, pending: tuple[Step, list[str]] | None = None,
                      recording: Recording | None = None) -> AsyncIterator[StepEvent]:
        """Drive the loop; on return ``rec`` holds the outcome (completed, max_steps or budget_exceeded).

        ``recording`` (a retry's or fork's earlier attempts, or a replaying model's) answers repeated
        requests when it allows reuse, and decides what recorded side-effect tool calls do.
        """
        if recording is None:
            recording = getattr(self.model, "recording", None)
        budget, tree = Budget(self.config), join_tree(rec.run, self.config)
        if pending is not None:  # resume: answer the dangling tool calls before asking the model again
            if pending[1]:  # none dangle when a typed answer was accepted but its run stopped before it ended
                async for event in self._run_tools(rec, pending[0], set(pending[1]), recording):
                    yield event
            spec = self.agent.output
            given = rec.answer or (self._final_result(rec, pending[0], spec) if spec is not None and spec.by_call
                                   else None)
            if isinstance(given, Answer):  # a dangling call was a typed answer that fits
                rec.give(given)
                rec.finish(RunStatus.COMPLETED)
                return
        max_steps = self.config.max_steps
        refusals = 0  # a typed agent's answers that did not fit its output type
        chain = MessageChain()  # running digest of the context, extended by each turn's new messages
        chained, model = rec.messages, self.model
        while True:
            if rec.messages is not chained:  # a handoff put new instructions first: digest afresh
                chain, chained = MessageChain(), rec.messages
            if self.model is not model:  # a handoff: the budget counts with the new model from here
                model = self.model
                budget.switched()
            if rec.run.metrics.model_calls >= max_steps:
                rec.finish(RunStatus.MAX_STEPS, f"max_steps ({max_steps}) reached before a final answer")
                return
            reserved = self._reserve(rec, budget, tree)
            if isinstance(reserved, str):
                rec.finish(RunStatus.BUDGET_EXCEEDED, reserved)
                return
            turn = ModelTurn(self, rec, chain, recording)
            try:
                async for event in turn.events():
                    yield event
            finally:
                if reserved is not None and tree is not None:
                    tree.settle(reserved, turn.step)
            step = turn.step
            if step is None:  # events() returns only once its step is recorded
                raise RuntimeError("a model turn ended without its step")
            budget.called(rec.messages, step.metrics.prompt_tokens, step.metrics.completion_tokens)
            spec = self.agent.output  # a typed agent's, after any handoff
            if not step.tool_calls or not self.config.execute_tools:  # else the calls stay pending
                yield self._close_turn(rec, step)
                if spec is None or not self.config.execute_tools and (spec.by_call or step.tool_calls):
                    rec.finish(RunStatus.COMPLETED)  # a native answer needs no tool run: it is read below
                    return
                try:  # a typed answer given as text (JSON), as providers' structured output gives it
                    rec.give(spec.answer(spec.from_text(step.content)))
                except OutputError as exc:
                    refusals += 1
                    for event in await self._ask_for_output(rec, step, exc):  # stored even on the last try: a
                        yield event  # resume asks again, the model reading why
                    if refusals > self.agent.output_retries:
                        rec.finish(RunStatus.FAILED, _no_output(spec, refusals, exc))
                        return
                    continue
                rec.finish(RunStatus.COMPLETED)
                return
            async for event in self._run_tools(rec, step, None, recording):
                yield event
            if spec is not None and spec.by_call:  # given by this turn's final_result call, or refused (and told why)
                given = rec.answer or self._final_result(rec, step, spec)
                if isinstance(given, OutputError):
                    refusals += 1
                    if refusals > self.agent.output_retries:
                        rec.finish(RunStatus.FAILED, _no_output(spec, refusals, given))
                        return
                elif given is not None:
                    if given is not rec.answer:  # given beside another tool, read back from its step
                        rec.give(given)
                    rec.finish(RunStatus.COMPLETED)
                    return

    @staticmethod
    def _final_result(rec: RunRecorder, step: Step, spec: OutputSpec) -> Answer | OutputError | None:
        """What this turn's ``final_result`` call gave (one that ran beside other tools, or a resumed run's):
        its :class:`Answer`, its :class:`OutputError` (it was refused, the model was told why), or None
        (no such call)."""
        calls = [c for c in step.tool_calls if c.name == FINAL_RESULT]
        if not calls:
            return None
        answered = {s.tool_call_id: s for s in rec.steps if s.role is StepRole.TOOL and s.run_id == rec.run.id}
        for call in calls:
            result = answered.get(call.id)
            if result is not None and result.status != "ok":  # refused, the model told why
                continue
            arguments = call.arguments if result is None else _ran_with(call, result)
            if arguments is None:  # answered by hand at a step-mode pause: that is no answer of the type
                continue
            try:  # accepted; or unanswered by the run a resume goes on from, where the first that fits was its answer
                return spec.answer(spec.from_arguments(json.loads(arguments or "{}")))
            except ValueError as exc:  # OutputError too
                if result is not None:
                    return OutputError(str(exc))
        last = answered.get(calls[-1].id)
        return OutputError(last.error if last is not None and last.error else "the answer was refused")

    async def _ask_for_output(self, rec: RunRecorder, step: Step, why: OutputError) -> list[StepEvent]:
        """A text answer a typed agent could not give as its type: the model is told why, in a user
        message of the engine's (stored like any step), and asked again."""
        ask = Step(session_id=rec.run.session_id, run_id=rec.run.id, sequence=rec.next_sequence(),
                   role=StepRole.USER, content=f"{str(why).rstrip('.')}. {self.agent.output.ask}",
                   extra={"kind": "output_retry"})
        rec.record_step(ask)
        event = rec.emit(_E.STEP_COMPLETED, {"step": ask.to_dict()})
        await self._release_held(rec)
        await self.hooks.call("on_step_end", rec.run, ask)
        return [event]

    def _reserve(self, rec: RunRecorder, budget: Budget, tree: Tree | None) -> Reservation | str | None:
        """The next call's estimate checked against the run's own limits, then set aside from its tree's
        (the outermost run's); why it may not be made, as a line."""
        if not budget.active and (tree is None or not tree.limited):
            return None
        name = self.model.name
        estimate = budget.estimate(rec.messages, name)
        over = budget.check(rec.run.metrics, estimate, name)
        if over is not None or tree is None or not tree.limited:
            return over
        return tree.reserve(*estimate, lambda p, c: cost_of(name, p, c), nested=rec.run.parent_run_id is not None)

    def reply_step(self, rec: RunRecorder, reply: ReplyAssembler, request: dict[str, Any], usage: Usage | None,
                   reused: Step | None, model_ms: float, ttft_ms: float, *, tool_calls: bool) -> Step:
        """The assistant step a model call becomes: its text (with this process's secrets masked), its
        calls, the request it answered, and its metrics and cost (unknown usage stays unknown, never 0)."""
        sequence = rec.next_sequence()
        calls = reply.tool_calls(sequence) if tool_calls else []
        metrics = StepMetrics(ttft_ms=ttft_ms, model_ms=model_ms, duration_ms=model_ms)
        if usage is not None:
            metrics.prompt_tokens = usage.prompt_tokens
            metrics.completion_tokens = usage.completion_tokens
            metrics.total_tokens = usage.total_tokens if usage.total_tokens is not None else (
                None if usage.prompt_tokens is None and usage.completion_tokens is None
                else (usage.prompt_tokens or 0) + (usage.completion_tokens or 0))
            metrics.cached_tokens = usage.cached_tokens
            metrics.cost = 0.0 if reused is not None or getattr(self.model, "cost_free", False) else cost_of(
                self.model.name, usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens)
        step = Step(session_id=rec.run.session_id, run_id=rec.run.id, sequence=sequence, role=StepRole.ASSISTANT,
                    content=mask_known(reply.text) if reply.texts or not calls else None,
                    tool_calls=[ToolCall(c.id, c.name, mask_known(c.arguments)) for c in calls], metrics=metrics)
        step.extra["request"] = request
        if reused is not None:
            step.extra["reused"] = reused.id
        return step

    # -- tools -----------------------------------------------------------------
    async def _run_tools(self, rec: RunRecorder, step: Step, only: set[str] | None,
                         recording: Recording | None = None) -> AsyncIterator[StepEvent]:
        run = rec.run
        calls = [c for c in step.tool_calls if only is None or c.id in only]
        sequences = {c.id: rec.next_sequence() for c in calls}
        for call in calls:
            yield rec.emit(_E.TOOL_CALL_STARTED, {"tool_call_id": call.id, "name": call.name,
                                                  "arguments": call.arguments, "sequence": step.sequence})
            await self.hooks.call("on_tool_start", run, call)
        batch = _ToolBatch(calls, sequences)
        if self._to_decide(batch, recording):
            async for event in self._triage(rec, batch, recording):
                yield event
        else:
            batch.to_run = list(calls)
        if self.debugger is not None:  # pause before each call: edit its arguments, or answer it by hand
            async for event in self.debugger.before_tools(rec, batch.to_run, batch.results, sequences,
                                                          self.registry):
                yield event
        await self._mark_started(rec, step, batch)
        t0 = time.perf_counter()
        spec = self.agent.output
        if spec is not None and spec.by_call and batch.to_run and all(c.name == FINAL_RESULT for c in batch.to_run):
            for call in batch.to_run:  # a typed answer only: nothing runs, nothing waits
                result = batch.results[call.id] = self._give_output(rec, call, spec)
                yield self._result_event(rec, result, batch.sequences)
                await self.hooks.call("on_tool_end", run, result)
        else:
            async for event in self._execute(rec, step, batch, recording):
                yield event
        tool_ms = (time.perf_counter() - t0) * 1000.0
        if self.debugger is not None:  # pause after each result: edit it before it is stored
            async for event in self.debugger.after_tools(rec, calls, batch.results, sequences):
                yield event
        handoff = take_handoff(self, rec, calls, batch.results)  # the run goes on with another agent
        stored = [self._store_result(rec, step, call, batch) for call in calls]
        if step.run_id == run.id:  # the turn's step of this run: its tool time is now known
            step.metrics.tool_ms = tool_ms
            step.metrics.duration_ms = (step.metrics.model_ms or 0.0) + tool_ms
            rec.update_step(step)
        closing = self._close_turn(rec, step)
        if rec.answer is not None:  # a typed answer was given: it ends the run
            rec.held_steps += [tool_step for _, tool_step in stored]
        else:
            await self._release_held(rec)  # tool results are durable before the next model call
        for event, tool_step in stored:
            yield event
            if not rec.held_steps:
                await self.hooks.call("on_step_end", run, tool_step)
        if handoff is not None:
            yield handoff
        yield closing

    def _to_decide(self, batch: _ToolBatch, recording: Recording | None) -> bool:
        """Whether any call waits on a decision (:meth:`_triage`) before it runs; else all of them run."""
        return any(_decided(self.registry.get(call.name), call, recording) for call in batch.calls)

    async def _triage(self, rec: RunRecorder, batch: _ToolBatch, recording: Recording | None
                      ) -> AsyncIterator[StepEvent]:
        """Decide each call before anything runs: a recorded side-effect call follows its ``on_replay``, a
        call needing approval waits for it, the rest run."""
        for call in batch.calls:
            tool = self.registry.get(call.name)
            if not _decided(tool, call, recording):
                batch.to_run.append(call)
                continue
            if _replayed_side_effect(tool, call, recording) and tool.on_replay != "confirm":
                result = self._side_effect_result(call, tool.on_replay, recording, batch.replayed)
                batch.results[call.id] = result
                yield self._result_event(rec, result, batch.sequences, replayed=call.id in batch.replayed)
                continue
            async for event in self._approve(rec, call, batch):  # a person decides (again, for a side effect)
                yield event

    async def _mark_started(self, rec: RunRecorder, step: Step, batch: _ToolBatch) -> None:
        """Side-effect calls about to run: a step saying so is made durable first (its result replaces it)."""
        started = []
        for call in batch.to_run:
            tool = self.registry.get(call.name)
            if tool is not None and tool.side_effects:
                marker = Step(session_id=rec.run.session_id, run_id=rec.run.id, sequence=batch.sequences[call.id],
                              role=StepRole.TOOL, content=STARTED_NOT_FINISHED, tool_call_id=call.id, name=call.name,
                              status="started", error="started, result never stored", parent_ids=[step.id])
                batch.markers[call.id] = marker
                started.append(marker)
        if started:
            rec.stage(started)
            await rec.commit()

    async def _execute(self, rec: RunRecorder, step: Step, batch: _ToolBatch, recording: Recording | None
                       ) -> AsyncIterator[StepEvent]:
        """Run the calls that go ahead (in parallel where allowed); nested runs' events stream in between."""
        if not batch.to_run:
            return
        run = rec.run
        batch_ids = tuple(c.id for c in batch.calls)
        engine = tool_engine()

        def context(call: ToolCall) -> ToolCallContext:
            return ToolCallContext(run.session_id, run.id, call.id, call.name, step.sequence,
                                   batch.sequences[call.id], rec.repository, batch_ids, engine=engine,
                                   deps=rec.deps, agent_name=self.agent.name, model_calls=run.metrics.model_calls)

        results: AsyncIterator[Any] = self.tool_executor.execute_batch(batch.to_run, context)
        if any(needs_scope(self.registry.get(c.name)) for c in batch.to_run):  # nested runs stream in between
            results = interleave(results, rec, self, recording, step.id, [c.id for c in batch.to_run])
        async for result in results:
            if isinstance(result, StepEvent):
                yield result
                continue
            batch.results[result.tool_call_id] = result
            for action in result.actions:
                for event in self._action_events(rec, action):
                    yield event
            yield self._result_event(rec, result, batch.sequences)
            await self.hooks.call("on_tool_end", run, result)

    def _give_output(self, rec: RunRecorder, call: ToolCall, spec: OutputSpec) -> ToolResult:
        """A ``final_result`` call answered here: its arguments validated once, the first that fit become
        the run's answer (the tool does nothing else, so no context, scope or timeout is set up for it)."""
        started, executor = time.perf_counter(), self.tool_executor
        arguments = executor.parsed(call, started)
        if isinstance(arguments, ToolResult):
            return arguments
        try:
            answer = spec.answer(spec.from_arguments(arguments))
        except OutputError as exc:
            return executor.invalid(call, str(exc), started, arguments)
        content = ACCEPTED
        if rec.answer is None:
            rec.give(answer)
        else:  # the model gave two in one turn: the first is the answer
            content = NOT_USED
        return ToolResult(tool_call_id=call.id, name=call.name, content=content,
                          duration_ms=(time.perf_counter() - started) * 1000.0, arguments=arguments)

    def _store_result(self, rec: RunRecorder, step: Step, call: ToolCall, batch: _ToolBatch
                      ) -> tuple[StepEvent, Step]:
        """A call's result as its tool step (replacing its started marker), recorded for the next commit."""
        run, result = rec.run, batch.results[call.id]
        marker = batch.markers.get(call.id)
        tool_step = Step(session_id=run.session_id, run_id=run.id, sequence=batch.sequences[call.id],
                         role=StepRole.TOOL, content=result.content, tool_call_id=call.id, name=call.name,
                         status=result.status, error=result.error, parent_ids=[step.id],
                         metrics=StepMetrics(tool_ms=result.duration_ms, duration_ms=result.duration_ms))
        if marker is not None:
            tool_step.id = marker.id
        approval = batch.approvals.get(call.id)
        if approval is not None:
            tool_step.extra["approval"] = approval
            if approval["edited"] and approval["approved"]:  # the model learns its call was changed
                tool_step.content = f"{tool_step.content}\n\n" + edited_note(
                    approval["proposed_arguments"], approval["arguments"])
        tool_step.extra.update(result.step_extra)
        if result.actions:
            tool_step.extra["actions"] = result.actions
        if call.id in batch.replayed:
            tool_step.extra["replayed"] = batch.replayed[call.id]
        rec.record_step(tool_step)
        return rec.emit(_E.STEP_COMPLETED, {"step": tool_step.to_dict()}), tool_step

    async def _approve(self, rec: RunRecorder, call: ToolCall, batch: _ToolBatch) -> AsyncIterator[StepEvent]:
        try:
            arguments = json.loads(call.arguments or "{}")
        except json.JSONDecodeError:
            batch.to_run.append(call)  # the executor reports the malformed JSON; nothing runs
            return
        yield rec.emit(_E.APPROVAL_REQUESTED, {"tool_call_id": call.id, "name": call.name,
                                               "arguments": call.arguments})
        if self.approver is None:
            decision = ApprovalDecision(False, reason="no approver is configured for tools that need approval")
        else:
            decision = await self.approver(ApprovalRequest(call.id, call.name, arguments))
        final_args = decision.arguments if decision.arguments is not None else arguments
        batch.approvals[call.id] = {"approved": decision.approved, "reason": decision.reason,
                                    "edited": decision.arguments is not None,
                                    "proposed_arguments": call.arguments, "arguments": json.dumps(final_args)}
        yield rec.emit(_E.APPROVAL_RESOLVED, {"tool_call_id": call.id, "name": call.name,
                                              "approved": decision.approved,
                                              "arguments": json.dumps(final_args), "reason": decision.reason})
        if decision.approved:
            batch.to_run.append(ToolCall(call.id, call.name, json.dumps(final_args))
                                if decision.arguments is not None else call)
            return
        reason = decision.reason or "rejected by the user"
        result = ToolResult(tool_call_id=call.id, name=call.name,
                            content=f"Tool call rejected: {reason}", status="rejected", error=reason,
                            error_type="rejected", duration_ms=0.0, attempts=0, arguments=arguments)
        batch.results[call.id] = result
        yield self._result_event(rec, result, batch.sequences)

    @staticmethod
    def _side_effect_result(call: ToolCall, policy: str, recording: Recording,
                            replayed: dict[str, str]) -> ToolResult:
        """A recorded call of a side-effect tool, not run again: its recorded result, or blocked."""
        recorded = recording.take_tool_result(call.name, call.arguments) if policy == "record" else None
        if recorded is not None:
            replayed[call.id] = recorded.id
            return ToolResult(tool_call_id=call.id, name=call.name, content=recorded.content or "",
                              duration_ms=0.0, attempts=0)
        reason = f"{call.name} has side effects and was already called with these arguments; not run again"
        return ToolResult(tool_call_id=call.id, name=call.name, content=f"Tool call blocked: {reason}",
                          status="error", error=reason, error_type="blocked", duration_ms=0.0, attempts=0)

    @staticmethod
    def _result_event(rec: RunRecorder, result: ToolResult, sequences: dict[str, int],
                      replayed: bool = False) -> StepEvent:
        if result.status == "ok":
            payload = {"tool_call_id": result.tool_call_id, "name": result.name, "content": result.content,
                       "duration_ms": result.duration_ms, "attempts": result.attempts,
                       "sequence": sequences[result.tool_call_id]}
            if replayed:
                payload["replayed"] = True
            return rec.emit(_E.TOOL_CALL_COMPLETED, payload)
        return rec.emit(_E.TOOL_CALL_FAILED, {
            "tool_call_id": result.tool_call_id, "name": result.name, "error": result.error,
            "error_type": result.error_type, "duration_ms": result.duration_ms, "attempts": result.attempts,
            "sequence": sequences[result.tool_call_id]})

    @staticmethod
    def _action_events(rec: RunRecorder, action: dict[str, Any]) -> list[StepEvent]:
        """An action's start and its outcome (emitted when the tool returns; times are the real ones).

        Long strings (figures, screenshots, big outputs) are cut in the events: the tool step carries
        the whole record (``extra["actions"]``), so a transcript holds them once.
        """
        start = {k: _elide(action.get(k)) for k in ("action_id", "kind", "name", "tool_call_id", "step_sequence",
                                                    "result_sequence", "started_at", "input")}
        done = _E.ACTION_COMPLETED if action.get("status") == "ok" else _E.ACTION_FAILED
        return [rec.emit(_E.ACTION_STARTED, start), rec.emit(done, _elide(action))]

    @staticmethod
    def _close_turn(rec: RunRecorder, step: Step) -> StepEvent:
        """The turn's metrics event: last event of every model turn."""
        return rec.emit(_E.METRICS, {"sequence": step.sequence, "step": step.metrics.to_dict(),
                                     "run": rec.run.metrics.to_dict()})


@dataclass(slots=True)
class _ToolBatch:
    """One turn's tool calls on their way through: what runs, what was decided, what came back."""

    calls: list[ToolCall]
    sequences: dict[str, int]
    to_run: list[ToolCall] = field(default_factory=list)
    results: dict[str, ToolResult] = field(default_factory=dict)
    approvals: dict[str, dict[str, Any]] = field(default_factory=dict)
    replayed: dict[str, str] = field(default_factory=dict)  # call id -> the recorded step that answered it
    markers: dict[str, Step] = field(default_factory=dict)  # side-effect calls' "started" steps


def _ran_with(call: ToolCall, result: Step) -> str | None:
    """The arguments a call ran with, from its result's step: the model's, or those edited at a step-mode pause
    or an approval; None for a call a person answered by hand at a pause (it did not run)."""
    edited = result.extra.get("edited") or {}
    if edited.get("skipped"):
        return None
    if "arguments" in edited:
        return edited["arguments"]["sent"]
    approval = result.extra.get("approval")
    if approval and approval.get("edited"):
        return approval["arguments"]
    return call.arguments


def _replayed_side_effect(tool: Tool | None, call: ToolCall, recording: Recording | None) -> bool:
    """A side-effect call the recording already holds a result of: it follows the tool's ``on_replay``."""
    return (tool is not None and tool.side_effects and recording is not None
            and recording.has_tool_result(call.name, call.arguments))


def _decided(tool: Tool | None, call: ToolCall, recording: Recording | None) -> bool:
    """Whether a call waits on a decision before it runs: approval, or a recorded side effect's ``on_replay``."""
    return tool is not None and (tool.requires_approval or _replayed_side_effect(tool, call, recording))


def _no_output(spec: OutputSpec, tries: int, why: Exception) -> str:
    return f"no answer of type {spec.name} after {tries} {'try' if tries == 1 else 'tries'}; the last: {why}"
