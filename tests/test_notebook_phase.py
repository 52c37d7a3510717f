"""The live footer's phase, folded from a real run's events: model, streaming, tools, approval, finishing."""

from __future__ import annotations

import asyncio

from agio_notebook import Agent, StepRunner, tool
from agio_notebook.execution import ApprovalDecision
from agio_notebook.notebook.phase import phase
from agio_notebook.notebook.render import footer_html
from agio_notebook.notebook.view_model import RunView
from agio_notebook.storage import TinyDBRepository

from engine_support import ChunkModel, add, calls, nap, text


@tool(requires_approval=True)
def delete(path: str) -> str:
    """Delete a file (asks first)."""
    return f"deleted {path}"


def phases(tmp_path, agent, approver=None) -> list[str | None]:
    runner = StepRunner(agent, repository=TinyDBRepository(tmp_path / "store"), approver=approver)

    async def go():
        return [e async for e in runner.run_stream("s", "hi")]

    view, seen = RunView(), []
    for event in asyncio.run(go()):
        view.apply(event)
        now = phase(view)
        if not seen or seen[-1] != now:
            seen.append(now)
    return seen


def test_phases_of_a_run_with_two_tools(tmp_path):
    model = ChunkModel([calls(("add", {"a": 1, "b": 2}), ("nap", {"seconds": 0.01})), text("it ", "is ", "3")])
    seen = phases(tmp_path, Agent(model=model, tools=[add, nap]))
    assert seen == ["waiting for the model…", "running 2 tools (add, nap)…", "running 1 tool (nap)…",
                    "waiting for the model…", "streaming…", "finishing…", None], seen


def test_phase_while_a_tool_waits_for_approval(tmp_path):
    async def approve(request):
        return ApprovalDecision(True)

    model = ChunkModel([calls(("delete", {"path": "x"})), text("done")])
    seen = phases(tmp_path, Agent(model=model, tools=[delete]), approver=approve)
    assert seen == ["waiting for the model…", "running 1 tool (delete)…", "waiting for approval (delete)…",
                    "running 1 tool (delete)…", "waiting for the model…", "streaming…", "finishing…", None], seen


def test_footer_shows_the_phase_while_running_and_metrics_after(tmp_path):
    view = RunView(status="running")
    assert '<span class="agio-phase">waiting for the model…</span>' in footer_html(view)
    view.status, view.run_metrics = "completed", {"model_calls": 1, "steps": 2, "tool_calls": 0}
    assert "agio-phase" not in footer_html(view) and "2 steps" in footer_html(view)
