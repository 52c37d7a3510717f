"""``python_sandbox()``: the ``run_python`` tool — code in the session's sandboxed interpreter.

State persists across calls of a session.  A retry or fork that changes the session's history starts
a fresh interpreter (an interpreter's memory cannot be snapshotted); the result says so, and
:func:`replay_python` re-runs the recorded code when asked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..tools import Tool, tool
from ..tools.context import ToolCallContext, history_listeners
from .actions import current_workspace, recorded
from .errors import ActionError
from .sandbox import ISOLATION_LEVELS, ExecResult, Sandbox, SandboxLimits, pool

ISOLATION_NOTES = {"bubblewrap": "bubblewrap: no network, read-only system, writable /workspace only",
                   "process": "process (weak, opted in): limits and a clean environment only, no namespaces"}


def _fresh_reason(box: Sandbox, ctx: ToolCallContext | None) -> str | None:
    """Why this call gets a fresh interpreter, if it does: the history it ran was retried away, the
    workspace was restored, the session's earlier code ran elsewhere (a fork, an earlier kernel), or it
    died."""
    stale = pool.stale.pop(box.workspace.session_id, None)
    steps = ctx.repository.get_steps(ctx.session_id) if ctx is not None and ctx.repository is not None else []
    if box.executed and ctx is not None and ctx.repository is not None:
        live = set(ctx.batch_call_ids) | {s.tool_call_id for s in steps if s.tool_call_id}
        if not set(box.executed) <= live:
            box.close()
            return stale or "the conversation was retried since this interpreter ran"
    if stale:
        return stale
    if not box.alive and box.calls:
        return "the previous interpreter ended"
    if not box.executed and any(s.name == "run_python" for s in steps if s.tool_call_id):
        return "this session's earlier code ran in another interpreter (a fork, a retry or an earlier kernel)"
    return None


def _follow_retry(session_id: str, repository: Any) -> None:
    """A retry superseded steps: an interpreter that ran their code is stale, so it ends now."""
    box = pool._boxes.get(session_id)
    if box is not None and box.executed:
        live = {s.tool_call_id for s in repository.get_steps(session_id) if s.tool_call_id}
        if not set(box.executed) <= live:
            pool.close(session_id)
            pool.stale.setdefault(session_id, "the conversation was retried since this interpreter ran")


history_listeners.append(_follow_retry)


def format_result(result: ExecResult, isolation: str, fresh: str | None) -> str:
    parts = [f"[sandbox: {ISOLATION_NOTES[isolation]}]"]
    if fresh:
        parts.append(f"[fresh interpreter: {fresh}; earlier variables are gone]")
    if result.stdout:
        parts.append(result.stdout.rstrip("\n"))
    if result.stderr:
        parts.append("[stderr]\n" + result.stderr.rstrip("\n"))
    if result.truncated_bytes:
        parts.append(f"[output truncated: {result.truncated_bytes} more bytes not kept]")
    if result.value is not None:
        parts.append(f"[value] {result.value}")
    figures = sum(1 for d in result.displays if d["mime"] == "image/png")
    tables = sum(1 for d in result.displays if d["mime"] == "text/html")
    if figures or tables:
        parts.append(f"[shown to the user: {figures} figure(s), {tables} table(s)]")
    return "\n".join(parts)


def run_code(code: str, *, limits: SandboxLimits, isolation: str, root: Path | None) -> dict[str, Any]:
    """Run code as a recorded action in the current session's sandbox; raises ActionError on failure."""
    ctx, ws, _ = current_workspace(root)  # a restore ends the interpreter and leaves its reason in pool.stale
    box = pool.get(ws.session_id, ws, limits, isolation)
    fresh = _fresh_reason(box, ctx)
    with recorded("code_execution", "run_python", {"code": code, "isolation": isolation}) as action:
        result = box.execute(code)
        if ctx is not None and not result.timed_out and not result.crashed:
            box.executed.append(ctx.tool_call_id)
        changes = ws.scan()
        ws.record(ctx, changes)
        text = format_result(result, isolation, fresh)
        action.output = {"stdout": result.stdout, "stderr": result.stderr, "value": result.value,
                         "displays": result.displays, "truncated_bytes": result.truncated_bytes,
                         "isolation": isolation, "fresh_interpreter": fresh, "workspace_changes": changes,
                         "timed_out": result.timed_out, "memory_bound": box.memory_bound,
                         "memory_kills": result.memory_kills}
        if result.error:
            raise ActionError(f"{result.error.strip()}\n{text}")
    return {"text": text, "result": result}


def replay_python(session_id: str, repository: Any, upto: int | None = None, *, root: Path | None = None,
                  limits: SandboxLimits | None = None, isolation: str = "bubblewrap") -> list[ExecResult]:
    """Re-run, in a fresh interpreter, the ``run_python`` code recorded in the session's current steps
    (up to step ``upto``), so variables come back after a retry or fork.  The code runs again as it is,
    so code that wrote files writes them again (the next action's snapshot records any difference).
    Pass the ``limits`` and ``isolation`` the toolkit uses, or its next call starts over.  Returns each
    call's result."""
    from ..storage.ids import resolve_session_id
    from .workspace import workspace_for

    if repository is not None:  # a unique prefix of 6+ characters works too
        session_id = resolve_session_id(repository, session_id)
    ws = workspace_for(session_id, root, repository)
    box = pool.get(session_id, ws, limits or SandboxLimits(), isolation)
    box.close()
    results = []
    for step in repository.get_steps(session_id):
        if upto is not None and step.sequence > upto:
            break
        for action in step.extra.get("actions") or ():
            if action.get("name") == "run_python" and action.get("status") == "ok":
                results.append(box.execute(action["input"]["code"]))
                box.executed.append(step.tool_call_id)
    return results


class SandboxTools(list):  # type: ignore[type-arg]
    """The toolkit's tools (a plain list to ``Agent(tools=...)``) whose repr says which bounds are in force."""

    def __init__(self, tools: list[Tool], limits: SandboxLimits, isolation: str):
        super().__init__(tools)
        self.limits = limits
        self.isolation = isolation

    @property
    def memory_bound(self) -> str:
        """The memory bound a sandbox gets here: a cgroup for the whole sandbox, or per process only."""
        from . import cgroups

        per_process = f"{self.limits.memory_bytes >> 20} MiB address space per process (rlimit)"
        whole = cgroups.memory_bound(self.limits.memory_bytes)
        if whole is None:
            return (per_process + f" only, no cgroup here ({cgroups.why_none()}): up to {self.limits.processes} "
                    "processes x that")
        return f"{whole}, and {per_process}"

    def __repr__(self) -> str:
        return (f"<python_sandbox {[t.name for t in self]}: isolation {ISOLATION_NOTES[self.isolation]}; "
                f"memory: {self.memory_bound}; processes: {self.limits.processes}; timeout {self.limits.timeout:g}s "
                "per call, the call's processes killed when it returns>")


def python_sandbox(*, limits: SandboxLimits | None = None, isolation: str = "bubblewrap",
                   workspace_root: str | Path | None = None, requires_approval: bool = False) -> SandboxTools:
    """The ``run_python`` tool. ``isolation="process"`` opts into running without OS isolation."""
    if isolation not in ISOLATION_LEVELS:
        raise ActionError(f"unknown isolation level {isolation!r} (choose from {', '.join(ISOLATION_LEVELS)})")
    limits = limits or SandboxLimits()
    root = Path(workspace_root).absolute() if workspace_root is not None else None

    @tool(name="run_python", timeout=limits.timeout + 30, requires_approval=requires_approval)
    def run_python(code: str) -> str:
        """Run Python code in a sandboxed interpreter whose variables persist between calls. The working
        directory is the session's workspace. The last expression's value is returned; matplotlib figures
        and DataFrames are shown to the user. There is no network access.

        Args:
            code: Python source to execute.
        """
        return run_code(code, limits=limits, isolation=isolation, root=root)["text"]

    return SandboxTools([run_python], limits, isolation)
