"""Hooks: user code called at fixed points of a run.

Hooks observe; they never steer.  A hook that raises is logged and the run
goes on (a buggy metrics hook must not lose a user's run).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Sequence

from ..core import AgentRun, Step, ToolCall

if TYPE_CHECKING:
    from ..tools import ToolResult

log = logging.getLogger("agio_notebook.hooks")


class AgentHook:
    """Override any subset. Called in this order: on_run_start, (on_step_end | on_tool_start |
    on_tool_end)*, then on_error (failed runs only), then on_run_end.

    ``on_step_end`` comes once the step is durable. A final answer is made durable with the run's end, so
    its ``on_step_end`` comes then: for a typed agent's ``final_result`` call, after that call's
    ``on_tool_start`` and ``on_tool_end``."""

    async def on_run_start(self, run: AgentRun) -> None: ...

    async def on_step_end(self, run: AgentRun, step: Step) -> None: ...

    async def on_tool_start(self, run: AgentRun, call: ToolCall) -> None: ...

    async def on_tool_end(self, run: AgentRun, result: ToolResult) -> None: ...

    async def on_run_end(self, run: AgentRun) -> None: ...

    async def on_error(self, run: AgentRun, error: BaseException) -> None: ...


_DEFAULT_HOOKS: list[AgentHook] = []


def add_default_hook(hook: AgentHook) -> None:
    """Call ``hook`` in every runner created from now on (e.g. telemetry turned on once per kernel)."""
    if hook not in _DEFAULT_HOOKS:
        _DEFAULT_HOOKS.append(hook)


def remove_default_hook(hook: AgentHook) -> None:
    if hook in _DEFAULT_HOOKS:
        _DEFAULT_HOOKS.remove(hook)


def default_hooks() -> list[AgentHook]:
    return list(_DEFAULT_HOOKS)


class HookCaller:
    """Calls one method on every hook that overrides it, isolating their failures."""

    __slots__ = ("_by_method",)

    def __init__(self, hooks: Sequence[AgentHook]):
        self._by_method: dict[str, list[Any]] = {}
        for name in ("on_run_start", "on_step_end", "on_tool_start", "on_tool_end", "on_run_end", "on_error"):
            base = getattr(AgentHook, name)
            self._by_method[name] = [getattr(h, name) for h in hooks
                                     if getattr(type(h), name, base) is not base]

    async def call(self, method: str, *args: Any) -> None:
        for fn in self._by_method[method]:
            try:
                await fn(*args)
            except Exception:  # noqa: BLE001 - hooks must not break runs
                log.exception("hook %s.%s failed", getattr(fn, "__self__", fn).__class__.__name__, method)
