"""StepExecutor: the model <-> tools loop of one run, as a stream of events.

Each turn streams one model reply into an assistant step, makes it durable,
runs its tool calls (in parallel when allowed), makes their results durable,
and goes back to the model — until the model answers without tool calls or
``max_steps`` model calls have been made.  Persisting happens at exactly two
checkpoints per turn (before the tools run, before the next model call), and every
``step_completed`` is yielded only once its step is on disk (the final answer included).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, AsyncIterator

from ..core import ExecutionConfig, ModelError, RunStatus, Step, StepEvent, StepEventType, StepMetrics, StepRole, ToolCall
from ..core.redact import mask_known
from ..models.base import Finish, Model, TextDelta, ToolCallDelta, Usage
from ..models.pricing import cost_of
from ..models.recording import Recording, reuse_key
from ..models.replay import response_chunks, step_response
from ..models.request import MessageChain, fingerprint_parts, tools_digest
from ..models.settings import check_settings, merge_settings
from ..tools import ToolCallContext, ToolRegistry, ToolResult
from .approval import ApprovalDecision, ApprovalRequest, Approver, edited_note
from .budget import Budget
from .handoff import take_handoff
from .pauses import ModelCall
from .hooks import HookCaller
from .nested import interleave, over_tree_budget, needs_scope
from .recorder import RunRecorder
from .requests import redact_for
from .tool_executor import ToolExecutor
from .watchdog import Watchdog

_E = StepEventType


def _elide(value: Any, limit: int = 2000) -> Any:
    if isinstance(value, str) and len(value) > limit:
        return value[:limit] + f"… [{len(value)} characters; whole on the tool step]"
    if isinstance(value, dict):
        return {k: _elide(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_elide(v, limit) for v in value]
    return value


class StepExecutor:
    def __init__(self, model: Model, registry: ToolRegistry, config: ExecutionConfig, hooks: HookCaller,
                 approver: Approver | None = None, settings: dict[str, Any] | None = None):
        self.model = model
        # the effective settings, stored with every request: the model's own defaults, the agent's, the run's
        own = getattr(model, "settings", None)
        self.settings = merge_settings(own if isinstance(own, dict) else None, check_settings(settings),
                                       check_settings(config.model_settings))
        self.registry = registry
        self.config = config
        self.hooks = hooks
        self.approver = approver
        self.tool_executor = ToolExecutor(registry, config)
        self._schemas = registry.schemas()
        self._tools_sha = tools_digest(self._schemas)
        self.debugger: Any = None  # step mode: an execution.debug.Debugger awaited at the pause points

    async def execute(self, rec: RunRecorder, pending: tuple[Step, list[str]] | None = None,
                      recording: Recording | None = None) -> AsyncIterator[StepEvent]:
        """Drive the loop; on return ``rec`` holds the outcome (completed, max_steps or budget_exceeded).

        ``recording`` (a retry's or fork's earlier attempts, or a replaying model's) answers repeated
        requests when it allows reuse, and decides what recorded side-effect tool calls do.
        """
        if recording is None:
            recording = getattr(self.model, "recording", None)
        budget = Budget(self.config, self.model.name)
        if pending is not None:  # resume: answer the dangling tool calls before asking the model again
            async for event in self._run_tools(rec, pending[0], set(pending[1]), recording):
                yield event
        max_steps = self.config.max_steps
        chain = MessageChain()  # running digest of the context, extended by each turn's new messages
        chained = rec.messages
        while True:
            if rec.messages is not chained:  # a handoff put new instructions first: digest afresh
                chain, chained = MessageChain(), rec.messages
            if rec.run.metrics.model_calls >= max_steps:
                rec.finish(RunStatus.MAX_STEPS, f"max_steps ({max_steps}) reached before a final answer")
                return
            over = (budget.check(rec.run.metrics, rec.messages)  # max_tokens, then max_cost: one estimate
                    or over_tree_budget(rec.run))  # and the outermost run's, with its nested runs
            if over is not None:
                rec.finish(RunStatus.BUDGET_EXCEEDED, over)
                return
            step: Step | None = None
            async for event in self._model_turn(rec, chain, recording):
                if event is None:
                    step = rec.steps[-1]
                    continue
                yield event
            assert step is not None
            budget.called(rec.messages, step.metrics.prompt_tokens, step.metrics.completion_tokens)
            if not step.tool_calls or not self.config.execute_tools:  # else the calls stay pending
                yield self._close_turn(rec, step)
                rec.finish(RunStatus.COMPLETED)
                return
            async for event in self._run_tools(rec, step, None, recording):
                yield event

    # -- one model call --------------------------------------------------------
    async def _model_turn(self, rec: RunRecorder, chain: MessageChain | None = None,
                          recording: Recording | None = None) -> AsyncIterator[StepEvent | None]:
        config = self.config
        chain = chain if chain is not None else MessageChain()
        attempts = 1 + (config.max_retries if config.enable_retry else 0)
        for attempt in range(attempts):
            got_any = [False]
            try:
                async for event in self._stream_reply(rec, got_any, chain, recording):
                    yield event
                return
            except ModelError as exc:
                if not exc.retryable or got_any[0] or attempt + 1 >= attempts:
                    raise
            await asyncio.sleep(min(0.25 * 2 ** attempt, 4.0))

    def _request(self, messages: list[dict[str, Any]], chain: MessageChain, stream: bool) -> dict[str, Any]:
        """What is stored with the step: the call's request, its messages by reference (see execution.requests)."""
        sha = chain.update(messages)
        first = messages[0] if messages else None
        system = first.get("content") if first is not None and first.get("role") == "system" else None
        return {"model": self.model.name, "settings": self.settings, "tools": self._schemas, "stream": stream,
                "messages": {"system": system, "count": len(messages), "sha256": sha},
                "fingerprint": fingerprint_parts(sha, self._tools_sha, self.settings),
                "content": fingerprint_parts(sha, self._tools_sha, None)}

    async def _stream_reply(self, rec: RunRecorder, got_any: list[bool], chain: MessageChain,
                            recording: Recording | None = None) -> AsyncIterator[StepEvent | None]:
        config = self.config
        stream = config.stream
        sequence = rec.upcoming_sequence  # taken for good once the step completes
        texts: list[str] = []
        calls: list[list[Any]] = []  # [id, name, argument pieces, position], in the order the calls started
        by_index: dict[int, list[Any]] = {}
        usage: Usage | None = None
        request = self._request(rec.messages, chain, stream)
        messages, settings = rec.messages, self.settings
        if self.debugger is not None:  # step mode: the final request may be paused on and edited
            call = ModelCall(messages, settings, request)
            async for event in self.debugger.before_model(rec, call, self.model.name, self._schemas):
                yield event
            messages, settings, request = call.messages, call.settings, call.request
        t0 = time.perf_counter()
        ttft: float | None = None
        # with reuse, a request recorded before (same messages, tools, settings and model) is answered from the record
        reused = recording.take_reply(reuse_key(request)) if recording is not None and recording.reuse else None
        watch = Watchdog(config.first_token_timeout, config.idle_timeout, config.timeout_per_step,
                         self.model.name)
        kwargs: dict[str, Any] = {"stream": stream}
        if settings:
            kwargs["settings"] = settings
        source = (response_chunks(step_response(reused)) if reused is not None
                  else self.model.stream(messages, self._schemas, **kwargs))
        agen = source.__aiter__()
        failure: ModelError | None = None
        stopped = False  # cancelled while the reply streamed: the text shown so far is kept, marked partial
        try:
            while True:
                watch.begin_wait()
                try:
                    chunk = await agen.__anext__()
                except StopAsyncIteration:
                    break
                except asyncio.CancelledError:
                    watch.raise_if_expired()
                    raise
                except ModelError:
                    raise
                except Exception as exc:  # noqa: BLE001 - a model's own bug still ends as one clear line
                    raise ModelError(f"model {self.model.name!r} failed: {type(exc).__name__}: {exc}") from None
                finally:
                    watch.waiting = False
                kind = type(chunk)
                if kind is TextDelta:
                    if ttft is None:
                        ttft = time.perf_counter()
                        watch.started()
                    got_any[0] = True
                    texts.append(chunk.text)
                    if stream:
                        yield rec.emit(_E.STEP_DELTA, {"sequence": sequence, "content": chunk.text})
                elif kind is ToolCallDelta:
                    if ttft is None:
                        ttft = time.perf_counter()
                        watch.started()
                    got_any[0] = True
                    slot = by_index.get(chunk.index)
                    # a new id on a used index starts a new call (Ollama streams parallel calls all at index 0)
                    if slot is None or (chunk.id and slot[0] and chunk.id != slot[0]):
                        slot = by_index[chunk.index] = [chunk.id, chunk.name, [], len(calls)]
                        calls.append(slot)
                    else:
                        slot[0] = slot[0] or chunk.id
                        slot[1] = slot[1] or chunk.name
                    if chunk.arguments:
                        slot[2].append(chunk.arguments)
                    if stream:
                        yield rec.emit(_E.STEP_DELTA, {"sequence": sequence, "tool_call": {
                            "index": slot[3],
                            "id": chunk.id, "name": chunk.name, "arguments": chunk.arguments}})
                elif kind is Usage:
                    usage = chunk
                elif kind is not Finish:
                    raise ModelError(f"model {self.model.name!r} yielded an unknown chunk {chunk!r}")
        except ModelError as exc:
            if not texts:
                raise
            failure = exc  # the text streamed so far is kept on a failed step
        except asyncio.CancelledError:
            if not texts:
                raise
            stopped = True
        finally:
            watch.close()
            await agen.aclose()
        t1 = time.perf_counter()
        model_ms = (t1 - t0) * 1000.0
        tool_calls = [] if failure is not None or stopped else [
            ToolCall(id=slot[0] or f"call_{sequence}_{i}", name=slot[1] or "", arguments="".join(slot[2]) or "{}")
            for i, slot in enumerate(calls)]
        metrics = StepMetrics(ttft_ms=(ttft - t0) * 1000.0 if ttft is not None else model_ms,
                              model_ms=model_ms, duration_ms=model_ms)
        if usage is not None:  # no usage from the server: tokens stay unknown (None), never 0
            metrics.prompt_tokens = usage.prompt_tokens
            metrics.completion_tokens = usage.completion_tokens
            metrics.total_tokens = usage.total_tokens if usage.total_tokens is not None else (
                None if usage.prompt_tokens is None and usage.completion_tokens is None
                else (usage.prompt_tokens or 0) + (usage.completion_tokens or 0))
            metrics.cached_tokens = usage.cached_tokens
            metrics.cost = 0.0 if reused is not None or getattr(self.model, "cost_free", False) else cost_of(
                self.model.name, usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens)
        step = Step(session_id=rec.run.session_id, run_id=rec.run.id, sequence=rec.next_sequence(),
                    role=StepRole.ASSISTANT, content=mask_known("".join(texts)) if texts or not tool_calls else None,
                    tool_calls=tool_calls, metrics=metrics)
        step.extra["request"] = request
        if reused is not None:
            step.extra["reused"] = reused.id
        if failure is not None:
            step.status = "error"
            step.error = redact_for(self.model, failure.args[0] if failure.args else str(failure))
        elif stopped:  # what the person watched stream stays, as a step marked partial
            step.status = "cancelled"
            step.extra["partial"] = True
        elif self.debugger is not None:  # the reply may be edited before it is stored and its tools run
            async for event in self.debugger.after_reply(rec, step):
                yield event
        rec.record_step(step)
        event = rec.emit(_E.STEP_COMPLETED, {"step": step.to_dict()})
        await rec.commit()  # durable before announced: before any tool runs, a final answer, a failed call too
        if failure is not None:
            yield event
            raise failure
        if stopped:
            yield event
            raise asyncio.CancelledError
        yield None  # tells execute() the step is recorded
        yield event
        await self.hooks.call("on_step_end", rec.run, step)

    # -- tools -----------------------------------------------------------------
    async def _run_tools(self, rec: RunRecorder, step: Step, only: set[str] | None,
                         recording: Recording | None = None) -> AsyncIterator[StepEvent]:
        run = rec.run
        calls = [c for c in step.tool_calls if only is None or c.id in only]
        sequences = {c.id: rec.next_sequence() for c in calls}
        hooks = self.hooks
        for call in calls:
            yield rec.emit(_E.TOOL_CALL_STARTED, {"tool_call_id": call.id, "name": call.name,
                                                  "arguments": call.arguments, "sequence": step.sequence})
            await hooks.call("on_tool_start", run, call)
        results: dict[str, ToolResult] = {}
        approvals: dict[str, dict[str, Any]] = {}
        to_run: list[ToolCall] = []
        replayed: dict[str, str] = {}
        for call in calls:
            tool = self.registry.get(call.name)
            if (recording is not None and tool is not None and tool.side_effects
                    and recording.has_tool_result(call.name, call.arguments)):
                if tool.on_replay == "confirm":  # a person decides whether it runs again
                    async for event in self._approve(rec, call, to_run, results, approvals, sequences):
                        yield event
                    continue
                result = self._side_effect_result(call, tool.on_replay, recording, replayed)
                results[call.id] = result
                yield self._result_event(rec, result, sequences, replayed=call.id in replayed)
                continue
            if tool is None or not tool.requires_approval:
                to_run.append(call)
                continue
            async for event in self._approve(rec, call, to_run, results, approvals, sequences):
                yield event
        if self.debugger is not None:  # pause before each call: edit its arguments, or answer it by hand
            async for event in self.debugger.before_tools(rec, to_run, results, sequences):
                yield event
        t0 = time.perf_counter()
        if to_run:
            batch_ids = tuple(c.id for c in calls)

            def context(call: ToolCall) -> ToolCallContext:
                return ToolCallContext(run.session_id, run.id, call.id, call.name, step.sequence,
                                       sequences[call.id], rec.repository, batch_ids)

            batch: AsyncIterator[Any] = self.tool_executor.execute_batch(to_run, context)
            if any(needs_scope(self.registry.get(c.name)) for c in to_run):  # nested runs stream in between
                batch = interleave(batch, rec, self, recording, step.id, [c.id for c in to_run])
            async for result in batch:
                if isinstance(result, StepEvent):
                    yield result
                    continue
                results[result.tool_call_id] = result
                for action in result.actions:
                    for event in self._action_events(rec, action):
                        yield event
                yield self._result_event(rec, result, sequences)
                await hooks.call("on_tool_end", run, result)
        tool_ms = (time.perf_counter() - t0) * 1000.0
        if self.debugger is not None:  # pause after each result: edit it before it is stored
            async for event in self.debugger.after_tools(rec, calls, results, sequences):
                yield event
        handoff = take_handoff(self, rec, calls, results)  # the run goes on with another agent
        new_events = []
        for call in calls:
            result = results[call.id]
            tool_step = Step(session_id=run.session_id, run_id=run.id, sequence=sequences[call.id],
                             role=StepRole.TOOL, content=result.content, tool_call_id=call.id, name=call.name,
                             status=result.status, error=result.error, parent_ids=[step.id],
                             metrics=StepMetrics(tool_ms=result.duration_ms, duration_ms=result.duration_ms))
            if call.id in approvals:
                tool_step.extra["approval"] = approval = approvals[call.id]
                if approval["edited"] and approval["approved"]:  # the model learns its call was changed
                    tool_step.content = f"{tool_step.content}\n\n" + edited_note(
                        approval["proposed_arguments"], approval["arguments"])
            tool_step.extra.update(result.step_extra)
            if result.actions:
                tool_step.extra["actions"] = result.actions
            if call.id in replayed:
                tool_step.extra["replayed"] = replayed[call.id]
            rec.record_step(tool_step)
            new_events.append((rec.emit(_E.STEP_COMPLETED, {"step": tool_step.to_dict()}), tool_step))
        if step.run_id == run.id:  # the turn's step of this run: its tool time is now known
            step.metrics.tool_ms = tool_ms
            step.metrics.duration_ms = (step.metrics.model_ms or 0.0) + tool_ms
            rec.update_step(step)
        closing = self._close_turn(rec, step)
        await rec.commit()  # tool results are durable before the next model call
        for event, tool_step in new_events:
            yield event
            await hooks.call("on_step_end", run, tool_step)
        if handoff is not None:
            yield handoff
        yield closing

    async def _approve(self, rec: RunRecorder, call: ToolCall, to_run: list[ToolCall],
                       results: dict[str, ToolResult], approvals: dict[str, dict[str, Any]],
                       sequences: dict[str, int]) -> AsyncIterator[StepEvent]:
        try:
            arguments = json.loads(call.arguments or "{}")
        except json.JSONDecodeError:
            to_run.append(call)  # the executor reports the malformed JSON; nothing runs
            return
        yield rec.emit(_E.APPROVAL_REQUESTED, {"tool_call_id": call.id, "name": call.name,
                                               "arguments": call.arguments})
        if self.approver is None:
            decision = ApprovalDecision(False, reason="no approver is configured for tools that need approval")
        else:
            decision = await self.approver(ApprovalRequest(call.id, call.name, arguments))
        final_args = decision.arguments if decision.arguments is not None else arguments
        approvals[call.id] = {"approved": decision.approved, "reason": decision.reason,
                              "edited": decision.arguments is not None,
                              "proposed_arguments": call.arguments, "arguments": json.dumps(final_args)}
        yield rec.emit(_E.APPROVAL_RESOLVED, {"tool_call_id": call.id, "name": call.name,
                                              "approved": decision.approved,
                                              "arguments": json.dumps(final_args), "reason": decision.reason})
        if decision.approved:
            to_run.append(ToolCall(call.id, call.name, json.dumps(final_args)) if decision.arguments is not None
                          else call)
            return
        reason = decision.reason or "rejected by the user"
        result = ToolResult(tool_call_id=call.id, name=call.name,
                            content=f"Tool call rejected: {reason}", status="rejected", error=reason,
                            error_type="rejected", duration_ms=0.0, attempts=0, arguments=arguments)
        results[call.id] = result
        yield self._result_event(rec, result, sequences)

    @staticmethod
    def _side_effect_result(call: ToolCall, policy: str, recording: Recording,
                            replayed: dict[str, str]) -> ToolResult:
        """A recorded call of a side-effect tool, not run again: its recorded result, or blocked."""
        if policy == "record":
            recorded = recording.take_tool_result(call.name, call.arguments)
            assert recorded is not None
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
