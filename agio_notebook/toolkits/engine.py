"""The seed's ``ExecutionEngine``: one entry point that routes an action to the right executor.

``ExecutionEngine(session_id).execute_action(Action("code_execution", {"code": ...}))`` runs code in the
session's sandbox; ``"file_operation"`` reads or writes workspace files; ``"web_browsing"`` fetches a
URL (``action: "fetch"``) or drives the browser (``"navigate"``, ``"fill_form"``, ``"click"``,
``"screenshot"``); ``"tool_call"`` runs any :class:`~agio_notebook.tools.Tool` by name.  These are the
same tools an agent gets, so the same records are made (``ContextGraphRecorder``), whether the engine is
used by hand, from a plan, or behind an agent's tool calls.  ``execute_with_reflection`` retries a failed
action with a revised one (the seed's external-loop reflection).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

from ..tools import Tool
from ..tools.context import ToolCallContext, tool_call_scope
from ..tools.threads import in_tool_thread
from ..core import new_id
from .errors import ActionError
from .recorder import ContextGraphRecorder


@dataclass
class Action:
    type: str  # code_execution | file_operation | web_browsing | tool_call
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class ExecutionResult:
    success: bool
    data: Any = None
    error: str | None = None
    actions: list[dict[str, Any]] = field(default_factory=list)


class ExecutionEngine:
    """Routes actions for one session; ``context_graph.records`` holds what was done.

    ``tools`` are extra tools for ``tool_call`` actions; ``allow`` is passed to the web and browser
    guards; ``workspace_root`` to the sandbox and file tools.
    """

    def __init__(self, session_id: str, *, tools: list[Tool] = (), allow: list[str] | tuple[str, ...] = (),
                 workspace_root: str | Path | None = None, isolation: str = "bubblewrap"):
        from .files import workspace_files
        from .python_tool import python_sandbox
        from .web import web_fetch

        self.session_id = session_id
        self.context_graph = ContextGraphRecorder()
        self._allow = tuple(allow)
        self._tools: dict[str, Tool] = {t.name: t for t in [
            *python_sandbox(workspace_root=workspace_root, isolation=isolation),
            *workspace_files(workspace_root=workspace_root), web_fetch(allow=allow), *tools]}
        self._browser: list[Tool] | None = None

    def _tool(self, name: str) -> Tool:
        if name in ("navigate_and_extract", "click", "fill_form", "screenshot") and self._browser is None:
            from .browser_tool import browser

            self._browser = browser(allow=self._allow)
            self._tools.update({t.name: t for t in self._browser})
        tool = self._tools.get(name)
        if tool is None:
            raise ActionError(f"no tool named {name!r} (available: {', '.join(sorted(self._tools))})")
        return tool

    def _route(self, action: Action) -> tuple[str, dict[str, Any]]:
        d = dict(action.data)
        if action.type == "code_execution":
            if d.get("language", "python") != "python":
                raise ActionError(f"only python code can be executed, not {d['language']!r}")
            return "run_python", {"code": d["code"]}
        if action.type == "file_operation":
            op = d.pop("operation", None)
            names = {"read": "read_file", "write": "write_file", "append": "append_file", "list": "list_files",
                     "glob": "glob_files", "search": "search_files", "replace": "replace_in_file"}
            if op not in names:
                raise ActionError(f"unknown file operation {op!r} (choose from {', '.join(names)})")
            return names[op], d
        if action.type == "web_browsing":
            kind = d.pop("action", "fetch")
            names = {"fetch": "web_fetch", "navigate": "navigate_and_extract", "fill_form": "fill_form",
                     "click": "click", "screenshot": "screenshot"}
            if kind not in names:
                raise ActionError(f"unknown web action {kind!r} (choose from {', '.join(names)})")
            return names[kind], d
        if action.type == "tool_call":
            return d["name"], d.get("arguments") or {}
        raise ActionError(f"Unknown action type: {action.type}")

    async def execute_action(self, action: Action) -> ExecutionResult:
        """Run one action; failures come back as ``success=False`` with the one-line error."""
        try:
            name, arguments = self._route(action)
            tool = self._tool(name)
            kwargs = tool.validate(arguments)
        except (ActionError, KeyError, ValueError) as exc:
            return ExecutionResult(False, error=str(exc))
        ctx = ToolCallContext(self.session_id, None, new_id(), name)

        def call() -> Any:
            with tool_call_scope(ctx):
                return tool.function(**kwargs)

        try:
            value = await in_tool_thread(call)
        except Exception as exc:  # noqa: BLE001 - a failed action is a result
            self.context_graph.records.extend(ctx.actions)
            return ExecutionResult(False, error=str(exc), actions=ctx.actions)
        self.context_graph.records.extend(ctx.actions)
        return ExecutionResult(True, data=value if isinstance(value, str) else json.loads(json.dumps(value, default=str)),
                               actions=ctx.actions)


Reviser = Callable[[Action, ExecutionResult], Awaitable[Action | None]]


async def execute_with_reflection(engine: ExecutionEngine, action: Action, max_retries: int = 2,
                                  revise: Reviser | None = None) -> ExecutionResult:
    """The seed's external-loop reflection: run ``action``; on failure ask ``revise(action, result)`` for a
    corrected action (e.g. a model reading the error) and try again, up to ``max_retries`` times.
    ``revise`` returning None gives up. Every attempt is recorded like any other action."""
    if max_retries < 0:
        raise ActionError(f"max_retries must be >= 0, got {max_retries}")
    result = await engine.execute_action(action)
    for _ in range(max_retries):
        if result.success or revise is None:
            break
        revised = await revise(action, result)
        if revised is None:
            break
        action = revised
        result = await engine.execute_action(action)
    return result
