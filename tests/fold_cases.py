"""The shared fixture of the run fold: real engine runs' events, and the state the fold must reach.

``tests/fixtures/fold_cases.json`` is read by the Python fold's tests (``test_view_fold.py``) and by the
extension's (``labextension/test/fold.test.ts``): the same events, the same expected state, so the two folds
cannot drift. The events come from real runs of the engine (offline models, an in-memory store); ids are
replaced by stable names so the file reads well and a re-run gives the same text.

    .venv/bin/python tests/fold_cases.py      # rewrite the fixture (review the diff of its states)
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agio_notebook import Agent, FunctionModel, Reply, ScriptedModel, StepRunner, memory, tool  # noqa: E402
from agio_notebook.core import ExecutionConfig  # noqa: E402
from agio_notebook.execution import ApprovalDecision  # noqa: E402
from agio_notebook.models import call  # noqa: E402
from agio_notebook.notebook.view_model import RunView, fold  # noqa: E402
from agio_notebook.storage import InMemoryRepository  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "fold_cases.json"
_ID = re.compile(r"\b(?:[0-9a-f]{32}|call_[0-9a-f_]+)\b")


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def divide(a: float, b: float) -> float:
    """Divide a by b."""
    return a / b


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (asks first)."""
    return f"deleted {path}"


@tool
async def slow(topic: str) -> str:
    """Look a topic up, slowly."""
    await asyncio.sleep(30)
    return topic


def _asks(name: str, **arguments: Any) -> Callable[..., Any]:
    """A model that calls ``name`` once, then answers with the tool's result."""
    def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "tool" and messages[-1].get("name") == name:
            return f"{name} said {messages[-1]['content']}"
        return Reply.call(name, **arguments)
    return model


async def _events(runner: StepRunner, query: str, *, cut: Callable[[list], bool] | None = None) -> list[dict]:
    """The run's events (deltas included, as the live view gets them); ``cut`` stops early (a run seen live)."""
    out: list[dict] = []
    async for event in runner.run_stream(None, query):
        out.append(event.to_dict())
        if cut is not None and cut(out):
            break
    return out


async def tools_ok_and_failed() -> list[dict]:
    model = ScriptedModel([Reply.calls(call("add", a=2, b=3), call("divide", a=1, b=0)), "2 + 3 is 5; 1/0 fails."])
    return await _events(StepRunner(Agent(model=model, tools=[add, divide], name="calc"),
                                    repository=InMemoryRepository()), "add and divide")


async def live_mid_run() -> list[dict]:
    model = ScriptedModel([Reply.calls(call("add", a=1, b=1), call("slow", topic="owls")), "done"])
    runner = StepRunner(Agent(model=model, tools=[add, slow], name="live"), repository=InMemoryRepository())
    return await _events(runner, "start two tools", cut=lambda out: out[-1]["type"] == "tool_call_completed")


async def approvals() -> list[dict]:
    async def approver(request: Any) -> ApprovalDecision:
        if request.arguments.get("path") == "notes.txt":
            return ApprovalDecision(True, {"path": "old-notes.txt"})
        return ApprovalDecision(False, reason="not that one")
    model = ScriptedModel([Reply.calls(call("delete_file", path="notes.txt"), call("delete_file", path="/etc/passwd")),
                           "One deleted, one refused."])
    runner = StepRunner(Agent(model=model, tools=[delete_file], name="janitor"), repository=InMemoryRepository(),
                        approver=approver)
    return await _events(runner, "clean up")


async def handoff() -> list[dict]:
    planner = Agent(model=FunctionModel(_asks("add", a=20, b=22)), tools=[add], name="planner",
                    description="plans")

    def desk(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "tool":
            return "unreachable"
        return Reply.call("transfer_to_planner", reason="a sum")
    agent = Agent(model=FunctionModel(desk), name="desk", handoffs=[planner])
    return await _events(StepRunner(agent, repository=InMemoryRepository()), "what is 20 + 22?")


def _nested_agents(leaf: Any) -> Agent:
    researcher = Agent(model=FunctionModel(_asks(leaf.name, topic="owls")), tools=[leaf], name="researcher",
                       description="looks things up")
    return Agent(model=FunctionModel(_asks("researcher", query="owls")), tools=[researcher], name="writer")


async def nested() -> list[dict]:
    @tool
    def notes(topic: str) -> str:
        """Field notes on a topic."""
        return f"{topic} hunt at night"
    return await _events(StepRunner(_nested_agents(notes), repository=InMemoryRepository()), "write about owls")


async def nested_cancelled() -> list[dict]:
    runner = StepRunner(_nested_agents(slow), repository=InMemoryRepository())
    out: list[dict] = []

    async def go() -> None:
        async for event in runner.run_stream(None, "write about owls"):
            out.append(event.to_dict())
    task = asyncio.create_task(go())
    while not any(e["type"] == "nested" and e["payload"]["event"]["type"] == "tool_call_started" for e in out):
        await asyncio.sleep(0.01)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    return out


async def memory_read() -> list[dict]:
    repo = InMemoryRepository()
    memory.add_skill("units", "Give sums as words.", repository=repo)
    model = ScriptedModel(["Forty-two."])
    return await _events(StepRunner(Agent(model=model, name="tutor"), repository=repo), "what are units of a sum?")


async def max_steps() -> list[dict]:
    model = ScriptedModel([Reply.call("add", a=1, b=1)], loop=True)
    agent = Agent(model=model, tools=[add], name="looper", config=ExecutionConfig(max_steps=2))
    return await _events(StepRunner(agent, repository=InMemoryRepository()), "never stop")


async def step_mode() -> list[dict]:
    runner = StepRunner(Agent(model=FunctionModel(_asks("add", a=2, b=2)), tools=[add], name="adder"),
                        repository=InMemoryRepository())
    debug = runner.debug(None, "what is 2 + 3?", breakpoints=["model", "tool"])
    async for pause in debug:
        if pause.kind.value == "tool":
            pause.edit(arguments={"a": 2, "b": 3})
        pause.cont()
    return [e.to_dict() for e in debug.result.events]


async def file_action() -> list[dict]:
    """A built-in action (a workspace file written, then one refused): action events and the diff on the card."""
    import tempfile

    from agio_notebook.toolkits import workspace_files

    with tempfile.TemporaryDirectory(prefix="agio-fold-") as root:
        model = ScriptedModel([Reply.calls(call("write_file", path="notes.md", content="owls\n"),
                                           call("write_file", path="../outside.md", content="x")), "Wrote notes.md."])
        agent = Agent(model=model, tools=workspace_files(workspace_root=root), name="scribe")
        events = await _events(StepRunner(agent, repository=InMemoryRepository()), "write notes")
        return json.loads(json.dumps(events).replace(root, "/workspaces"))


async def model_failed() -> list[dict]:
    def broken(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "tool":
            raise KeyError("content")
        return Reply.call("add", a=1, b=2)
    agent = Agent(model=FunctionModel(broken, name="broken"), tools=[add], name="fragile",
                  config=ExecutionConfig(enable_retry=False))
    return await _events(StepRunner(agent, repository=InMemoryRepository()), "add 1 and 2")


async def skipped_and_edited_results() -> list[dict]:
    """Step mode: one call answered by hand (skip), one result edited: the model read those, not the tool's."""
    model = ScriptedModel([Reply.call("add", a=1, b=1), Reply.call("add", a=2, b=2), "done"])
    runner = StepRunner(Agent(model=model, tools=[add], name="adder"), repository=InMemoryRepository())
    debug = runner.debug(None, "add twice", breakpoints=["tool", "result"])
    async for pause in debug:
        if pause.kind.value == "tool" and pause.arguments == {"a": 1, "b": 1}:
            pause.skip("two, by hand")
            continue
        if pause.kind.value == "result" and pause.result == "4":
            pause.edit(result="four, edited")
        pause.cont()
    return [e.to_dict() for e in debug.result.events]


async def paused_before_a_tool() -> list[dict]:
    """Step mode as the live view had it while the run waited before its tool call."""
    events = await step_mode()
    at = next(i for i, e in enumerate(events) if e["type"] == "run_paused" and e["payload"]["kind"] == "tool")
    return events[:at + 1]


async def typed_output() -> list[dict]:
    """A typed agent: one refused answer, then one that fits its type."""
    model = ScriptedModel([Reply.call("final_result", result="many"), Reply.call("final_result", result=42)])
    agent = Agent(model=model, name="counter", output_type=int)
    return await _events(StepRunner(agent, repository=InMemoryRepository()), "how many?")


CASES: dict[str, Callable[[], Any]] = {
    "tools_ok_and_failed": tools_ok_and_failed, "live_mid_run": live_mid_run, "approvals": approvals,
    "handoff": handoff, "nested": nested, "nested_cancelled": nested_cancelled, "memory_read": memory_read,
    "max_steps": max_steps, "step_mode": step_mode, "paused_before_a_tool": paused_before_a_tool,
    "file_action": file_action, "model_failed": model_failed,
    "skipped_and_edited_results": skipped_and_edited_results, "typed_output": typed_output,
}


def stable_ids(cases: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """Every generated id (runs, sessions, steps, calls) named by its first appearance: ``id-1``, ``id-2``..."""
    names: dict[str, str] = {}

    def rename(match: re.Match[str]) -> str:
        return names.setdefault(match.group(0), f"id-{len(names) + 1}")
    text = _ID.sub(rename, json.dumps(cases))
    return json.loads(text)


def state(view: RunView) -> dict[str, Any]:
    """What both folds must agree on: the run, its steps and cards as drawn, and the footer's counts."""
    shown = view.counted_metrics()
    return {
        "status": view.status, "output": view.output, "agent": view.agent_name, "handoffs": [[h["from"], h["to"]] for h in view.handoffs],
        "paused": (view.paused or {}).get("kind"),
        "metrics": {k: shown.get(k) for k in ("steps", "model_calls", "tool_calls", "tool_errors", "tool_unfinished",
                                              "total_tokens")},
        "steps": [{"sequence": s.sequence, "role": s.role, "text": s.text, "status": s.status, "attempt": s.attempt,
                   "superseded": s.superseded, "agent": s.agent if s.role == "assistant" else None,
                   "memory": len(s.memory.get("items") or []) if s.memory else None,
                   "cards": [{"id": c.tool_call_id, "name": c.name, "arguments": c.arguments, "status": c.status,
                              "result": c.result, "error": c.error, "diff": c.diff, "isolation": c.isolation,
                              "nested": state(c.nested) if c.nested is not None else None}
                             for c in s.tool_cards]}
                  for s in view.conversation()],
    }


def generate() -> list[dict[str, Any]]:
    """Run every case now; each with its events and the state the Python fold reaches."""
    events = stable_ids({name: asyncio.run(make()) for name, make in CASES.items()})
    return [{"name": name, "events": evs, "state": state(fold(evs))} for name, evs in events.items()]


if __name__ == "__main__":
    FIXTURE.write_text(json.dumps(generate(), indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {FIXTURE}")
