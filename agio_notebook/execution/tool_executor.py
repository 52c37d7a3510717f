"""ToolExecutor: run the model's tool calls safely.

Every problem — unknown tool, malformed JSON, invalid arguments, an
exception, a timeout — becomes an error ``ToolResult`` that the model sees
on its next turn; only cancellation propagates.  A batch runs in parallel
when ``parallel_tool_calls`` is on, capped at ``max_parallel_tools``.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, AsyncIterator, Callable, Iterable

import pydantic

from ..core import ExecutionConfig, ToolCall, scrub
from ..core.redact import mask_known
from ..tools import Tool, ToolRegistry, ToolResult
from ..tools.base import to_content
from ..tools.context import RunContext, ToolCallContext, tool_call_scope
from ..tools.threads import in_tool_thread

# Builds the context of one call (session, run, asking step); see tools/context.py.
ContextFactory = Callable[[ToolCall], ToolCallContext]


def _validation_message(exc: pydantic.ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
        parts.append(f"{where}: {err.get('msg')}")
    return "; ".join(parts)


class ToolExecutor:
    def __init__(self, tools: Iterable[Tool] | ToolRegistry, config: ExecutionConfig | None = None):
        self.registry = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
        self.config = config or ExecutionConfig()

    def _fail(self, call: ToolCall, error_type: str, error: str, started: float, attempts: int = 0,
              arguments: dict[str, Any] | None = None) -> ToolResult:
        error = scrub(error) or error  # a failing HTTP call may quote its Authorization header
        return ToolResult(tool_call_id=call.id, name=call.name, content=f"Error ({error_type}): {error}",
                          status="error", error=error, error_type=error_type,
                          duration_ms=(time.perf_counter() - started) * 1000.0, attempts=attempts,
                          arguments=arguments)

    async def execute(self, call: ToolCall, context: ContextFactory | None = None) -> ToolResult:
        """Run one call; never raises for tool problems. ``context`` makes the call's context current."""
        ctx = context(call) if context is not None else None
        with tool_call_scope(ctx):
            result = await self._execute(call, ctx)
        if ctx is not None:
            result.actions, result.step_extra = ctx.actions, ctx.step_extra
        return result

    def parsed(self, call: ToolCall, started: float) -> dict[str, Any] | ToolResult:
        """A call's arguments as the model sent them, or the error result that tells the model they are
        malformed JSON or not an object."""
        try:
            arguments = json.loads(call.arguments) if call.arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return self._fail(call, "invalid_json", f"arguments are not valid JSON ({exc.msg} at position "
                                                    f"{exc.pos}): {call.arguments[:200]}", started)
        if not isinstance(arguments, dict):
            return self._fail(call, "invalid_arguments", f"arguments must be a JSON object, got "
                                                         f"{type(arguments).__name__}", started)
        return arguments

    def invalid(self, call: ToolCall, reason: str, started: float, arguments: dict[str, Any]) -> ToolResult:
        """Arguments that parse but do not fit: the error result, with the reason the model reads."""
        return self._fail(call, "invalid_arguments", reason, started, arguments=arguments)

    async def _execute(self, call: ToolCall, ctx: ToolCallContext | None) -> ToolResult:
        started = time.perf_counter()
        tool = self.registry.get(call.name)
        if tool is None:
            available = ", ".join(self.registry.names()) or "none"
            return self._fail(call, "unknown_tool", f"no tool named {call.name!r} (available: {available})",
                              started)
        arguments = self.parsed(call, started)
        if isinstance(arguments, ToolResult):
            return arguments
        try:
            kwargs = tool.validate(arguments)
        except pydantic.ValidationError as exc:
            return self.invalid(call, _validation_message(exc), started, arguments)
        except ValueError as exc:  # a validator's own reason (a typed output's final_result)
            return self.invalid(call, str(exc), started, arguments)
        config = self.config
        args: tuple[Any, ...] = ()
        if tool.takes_context:  # what the tool may know of its run, the run's deps above all
            args = (ctx.run_context() if ctx is not None else
                    RunContext(None, "", tool_call_id=call.id, tool_name=call.name),)
        timeout = tool.timeout if tool.timeout is not None else config.tool_timeout
        allowed = 1 + (min(tool.retries, config.max_retries) if config.enable_retry else 0)
        attempt = 0
        while True:
            attempt += 1
            try:
                if tool.is_async:
                    if timeout is None:
                        value = await tool.function(*args, **kwargs)
                    else:
                        async with asyncio.timeout(timeout):
                            value = await tool.function(*args, **kwargs)
                else:
                    work = in_tool_thread(tool.function, *args, **kwargs)
                    value = await (work if timeout is None else asyncio.wait_for(work, timeout))
            except TimeoutError:
                if attempt < allowed:
                    continue
                return self._fail(call, "timeout", f"{call.name} took longer than {timeout:g}s", started,
                                  attempt, arguments)
            except Exception as exc:  # noqa: BLE001 - a failing tool is a result, not a crash
                if attempt < allowed:
                    continue
                return self._fail(call, "exception", f"{type(exc).__name__}: {exc}", started, attempt, arguments)
            try:
                content = to_content(value)
            except Exception as exc:  # noqa: BLE001
                return self._fail(call, "exception", f"result cannot be serialised: {exc}", started, attempt,
                                  arguments)
            # a tool that echoes a key of this process never hands it to the model, the store or a view
            return ToolResult(tool_call_id=call.id, name=call.name, content=mask_known(content),
                              duration_ms=(time.perf_counter() - started) * 1000.0, attempts=attempt,
                              arguments=arguments)

    async def execute_batch(self, calls: list[ToolCall], context: ContextFactory | None = None
                            ) -> AsyncIterator[ToolResult]:
        """Results in completion order; concurrently when the config allows it."""
        if len(calls) == 1 or not self.config.parallel_tool_calls:
            for call in calls:
                yield await self.execute(call, context)
            return
        limit = asyncio.Semaphore(self.config.max_parallel_tools)

        async def bounded(call: ToolCall) -> ToolResult:
            async with limit:
                return await self.execute(call, context)

        tasks = [asyncio.ensure_future(bounded(c)) for c in calls]
        try:
            for next_done in asyncio.as_completed(tasks):
                yield await next_done
        finally:
            for task in tasks:
                if not task.done():
                    task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
