"""Step mode: the loop awaits at its pause points, shows what comes next, takes edits, and goes on.

The executor calls a :class:`Debugger` at four points (before a model call, after its reply, before
each tool call, after each result). At each one the debugger decides whether a breakpoint fires; if it
does, it emits ``run_paused``, hands the :class:`~.pauses.Pause` to its handler (a notebook view, or
:class:`DebugRun` for ``async for pause in runner.debug(...)``) and awaits the decision. The loop waits
*at the point where the request is final*, so nothing runs twice, and edits are written into the steps
this run stores: the step keeps what was proposed and what was sent, marked ``edited``. A point where
no breakpoint fires changes nothing, so such a run stores exactly what a normal run stores.

Time spent paused is counted in ``RunMetrics.paused_ms``, never in model or tool time.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable

from ..core import Step, StepEvent, StepEventType, ToolCall
from ..models.request import messages_digest, stored_request, tools_digest
from ..tools import ToolRegistry, ToolResult
from .pauses import BreakpointSpec, DebugError, ModelCall, Pause, PauseKind, parse_breakpoints
from .recorder import RunRecorder
from .step_executor import StepExecutor

_E = StepEventType
Handler = Callable[[Pause], "Awaitable[None] | None"]


class Debugger:
    """The pause points of one run in step mode (see the module's docstring)."""

    def __init__(self, handler: Handler, breakpoints: Iterable[BreakpointSpec] | str | None = None):
        self.handler = handler
        self.breakpoints = parse_breakpoints(breakpoints)
        self._plain = [b for b in self.breakpoints if b.predicate is None]
        self._predicates = [b for b in self.breakpoints if b.predicate is not None]
        self.stepping = False  # after Step: stop at the very next point
        self.points = 0
        self.current: Pause | None = None  # the pause waiting for a decision, if any
        self._argument_edits: dict[str, dict[str, Any]] = {}  # tool call id -> what was proposed and sent

    # -- the four points (called by StepExecutor) -------------------------------------------
    async def before_model(self, rec: RunRecorder, call: ModelCall, model: str,
                           tools: list[dict[str, Any]]) -> AsyncIterator[StepEvent]:
        request = {"model": model, "messages": call.messages, "tools": tools, "settings": call.settings,
                   "stream": call.request.get("stream", True)}
        pause = self._point(rec, PauseKind.MODEL, rec.upcoming_sequence, request=request)
        if pause is None:
            return
        async for event in self._wait(rec, pause):
            yield event
        edits = pause.edits
        if not edits:
            return
        messages = [dict(m) for m in edits.get("messages", call.messages)]
        if "system" in edits:
            if messages and messages[0]["role"] == "system":
                messages[0] = {"role": "system", "content": edits["system"]}
            else:
                messages.insert(0, {"role": "system", "content": edits["system"]})
        settings = edits.get("settings", call.settings)
        sent = stored_request(call.request["model"], messages, messages_digest(messages), settings, tools,
                              tools_digest(tools), call.request.get("stream", True), inline=True)
        sent["edited"] = {"proposed": {"messages": list(call.messages), "settings": call.settings},
                          "fields": sorted(edits)}
        call.messages, call.settings, call.request = messages, settings, sent

    async def after_reply(self, rec: RunRecorder, step: Step) -> AsyncIterator[StepEvent]:
        reply = {"content": step.content, "tool_calls": [c.to_dict() for c in step.tool_calls]}
        pause = self._point(rec, PauseKind.REPLY, step.sequence, reply=reply)
        if pause is None:
            return
        async for event in self._wait(rec, pause):
            yield event
        if "reply" in pause.edits:
            sent = pause.edits["reply"]
            step.content = sent["content"]
            step.tool_calls = [ToolCall.from_dict(c) for c in sent["tool_calls"]]
            step.extra["edited"] = {"reply": {"proposed": reply, "sent": sent}}

    async def before_tools(self, rec: RunRecorder, to_run: list[ToolCall], results: dict[str, ToolResult],
                           sequences: dict[str, int], registry: ToolRegistry) -> AsyncIterator[StepEvent]:
        """Pause before each call of the batch; an edit replaces its arguments (checked against ``registry``:
        the tools of the agent holding the run now, after any handoff), a skip answers it by hand."""
        for call in list(to_run):
            tool = registry.get(call.name)
            pause = self._point(rec, PauseKind.TOOL, sequences[call.id], tool=tool,
                                tool_call={"id": call.id, "name": call.name, "arguments": call.arguments})
            if pause is None:
                continue
            async for event in self._wait(rec, pause):
                yield event
            if "arguments" in pause.edits:
                sent = json.dumps(pause.edits["arguments"])
                self._argument_edits[call.id] = {"proposed": call.arguments, "sent": sent}
                to_run[to_run.index(call)] = call = ToolCall(call.id, call.name, sent)
            if pause.action == "skip":
                to_run.remove(call)
                result = ToolResult(tool_call_id=call.id, name=call.name, content=pause.skipped_result or "",
                                    duration_ms=0.0, attempts=0)
                result.step_extra["edited"] = {"skipped": True}
                results[call.id] = result
                yield StepExecutor._result_event(rec, result, sequences)

    async def after_tools(self, rec: RunRecorder, calls: list[ToolCall], results: dict[str, ToolResult],
                          sequences: dict[str, int]) -> AsyncIterator[StepEvent]:
        """Record argument edits on their results, then pause after each result (in call order)."""
        for call in calls:
            result = results[call.id]
            edit = self._argument_edits.pop(call.id, None)
            if edit is not None:
                result.step_extra.setdefault("edited", {})["arguments"] = edit
                # the model learns its call was changed (as after an edited approval)
                result.content = f"{result.content}\n\n" + argument_note(edit["proposed"], edit["sent"])
            pause = self._point(rec, PauseKind.RESULT, sequences[call.id], status=result.status,
                                tool_call={"id": call.id, "name": call.name, "arguments": call.arguments},
                                result=result.content)
            if pause is None:
                continue
            async for event in self._wait(rec, pause):
                yield event
            if "result" in pause.edits:
                result.step_extra.setdefault("edited", {})["result"] = {"proposed": result.content,
                                                                       "sent": pause.edits["result"]}
                result.content = pause.edits["result"]

    # -- deciding whether to stop, and waiting ------------------------------------------
    def _point(self, rec: RunRecorder, kind: PauseKind, sequence: int, **parts: Any) -> Pause | None:
        self.points += 1
        if not self.stepping:
            call = parts.get("tool_call")
            name = call["name"] if call else None
            if not any(b.fires_at(kind, sequence, name) for b in self._plain):
                if not self._predicates:
                    return None
                pause = Pause(kind, rec.run.id, rec.run.session_id, sequence, self.points, **parts)
                return pause if any(b.predicate(pause) for b in self._predicates) else None
        return Pause(kind, rec.run.id, rec.run.session_id, sequence, self.points, **parts)

    async def _wait(self, rec: RunRecorder, pause: Pause) -> AsyncIterator[StepEvent]:
        yield rec.emit(_E.RUN_PAUSED, _paused_payload(pause))
        self.current = pause
        started = time.perf_counter()
        try:
            shown = self.handler(pause)
            if shown is not None:
                await shown
            action = await asyncio.wrap_future(pause._decided)
        except BaseException:
            pause._close()
            raise
        finally:
            self.current = None
            paused_ms = (time.perf_counter() - started) * 1000.0
            rec.run.metrics.paused_ms += paused_ms
            rec.mark_run_dirty()
        self.stepping = action == "step"
        yield rec.emit(_E.RUN_RESUMED, _resumed_payload(pause, paused_ms))
        if action == "abort":
            raise asyncio.CancelledError("aborted at a pause")


def argument_note(proposed: str, sent: str) -> str:
    """What the model reads after the result of a call whose arguments were edited at a pause."""
    return f"[Note: this call was edited before it ran. You proposed {proposed}; it ran with {sent}.]"


def _paused_payload(pause: Pause) -> dict[str, Any]:
    payload: dict[str, Any] = {"kind": pause.kind.value, "sequence": pause.sequence, "index": pause.index}
    if pause.tool_call is not None:
        payload["tool_call_id"] = pause.tool_call["id"]
        payload["name"] = pause.tool_call["name"]
        payload["arguments"] = pause.tool_call["arguments"]
    if pause.request is not None:
        payload["messages"] = len(pause.request["messages"])
        payload["tokens"] = pause.token_total
        payload["tokens_estimated"] = any(t.estimated for t in pause.tokens)
    return payload


def _resumed_payload(pause: Pause, paused_ms: float) -> dict[str, Any]:
    payload: dict[str, Any] = {"kind": pause.kind.value, "sequence": pause.sequence, "action": pause.action,
                               "paused_ms": paused_ms}
    if pause.tool_call is not None:
        payload["tool_call_id"] = pause.tool_call["id"]
        payload["name"] = pause.tool_call["name"]
    if pause.edits:
        payload["edited"] = sorted(pause.edits)
        payload["edits"] = {k: v for k, v in pause.edits.items() if k != "messages"}
        if "messages" in pause.edits:
            payload["edits"]["messages"] = len(pause.edits["messages"])
    if pause.action == "skip":
        payload["result"] = pause.skipped_result
    return payload


class DebugRun:
    """``async for pause in runner.debug(session, query)``: the run's pauses, one at a time.

    A pause left undecided when the loop asks for the next one continues. After the loop, ``result`` is
    the run's :class:`~agio_notebook.execution.runner.RunResult`. Leaving the loop early (``break``)
    leaves the run paused: call :meth:`abort` (or decide the pause) to end it.
    """

    def __init__(self, start: Callable[[Handler], Awaitable[Any]]):
        self._start = start
        self._queue: asyncio.Queue[Pause] = asyncio.Queue()
        self._task: asyncio.Task[Any] | None = None
        self._last: Pause | None = None
        self.result: Any = None
        self.pauses: list[Pause] = []

    def __aiter__(self) -> DebugRun:
        return self

    async def _handle(self, pause: Pause) -> None:
        await self._queue.put(pause)

    async def __anext__(self) -> Pause:
        if self._task is None:
            self._task = asyncio.ensure_future(self._start(self._handle))
        last = self._last
        if last is not None and not last.decided and not last.ended:
            last.cont()
        getter = asyncio.ensure_future(self._queue.get())
        try:
            await asyncio.wait({getter, self._task}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            getter.cancel()
            await self.abort()
            raise
        if getter.done():
            self._last = pause = getter.result()
            self.pauses.append(pause)
            return pause
        getter.cancel()
        self.result = await self._outcome()
        raise StopAsyncIteration

    async def _outcome(self) -> Any:
        assert self._task is not None
        try:
            return await self._task
        except asyncio.CancelledError:
            return None

    async def run(self) -> Any:
        """Continue through every pause to the end; the run's result."""
        async for pause in self:
            pause.cont()
        return self.result

    async def abort(self) -> Any:
        """End the run now, cancelled (its stored steps stay); the run's result."""
        if self._task is None:
            return None
        last = self._last
        if last is not None and not last.decided and not last.ended:
            last.abort()
        elif not self._task.done():
            self._task.cancel()
        self.result = await self._outcome()
        return self.result


__all__ = ["DebugError", "DebugRun", "Debugger", "ModelCall", "Pause", "PauseKind"]
