"""Nested runs stay inside the outermost budget and fan-out limit; a tool call never runs without its step.

- Every model call of a tree reserves its estimate from the outermost budget before it is made, so one
  nested call, or eight in parallel, cannot spend past it by more than one call's misestimate.
- ``max_nested_runs`` bounds how many nested runs one outermost run may start, at any depth.
- Two calls sharing one id in a reply are re-keyed before any tool runs, on every backend, and a replay
  of the run runs the side-effect tool no more often.
- A side-effect call is on disk as started before it runs: a store that fails afterwards, or a resume
  after a crash, never runs it again.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from agio_notebook import Agent, ExecutionConfig, FunctionModel, Reply, ScriptedModel, StepRunner, tool
from agio_notebook.models.replay import ReplayModel
from agio_notebook.core import RunStatus, StepRole
from agio_notebook.execution.step_executor import STARTED_NOT_FINISHED
from agio_notebook.models.base import TextDelta, ToolCallDelta, Usage
from agio_notebook.models.scripted import call
from agio_notebook.storage import open_repository
from explore_support import go


def fan_out_planner(width: int, inner: Agent) -> Agent:
    def fn(messages, tools):
        if messages[-1]["role"] == "user":
            return Reply(tool_calls=[call(inner.name, query=f"part {i}") for i in range(width)])
        return "done"

    return Agent(model=FunctionModel(fn, name="planner-model"), tools=[inner], name="planner")


def tree_tokens(repo, result) -> int:
    return sum((d.get("metrics") or {}).get("total_tokens") or 0 for d in repo.iter_run_dicts()
               if d.get("root_run_id") == result.run_id or d["id"] == result.run_id)


@pytest.mark.parametrize("width,delay", [(1, 0.0), (8, 0.0), (8, 0.05)], ids=["one", "eight", "eight-slow"])
def test_nested_calls_never_spend_past_the_outermost_budget(tmp_path, width, delay):
    repo = open_repository(str(tmp_path / "s"))
    inner_calls = []

    @tool
    def fetch(page: int) -> str:
        """Fetch a page of a long document."""
        return f"page {page}: " + "lorem ipsum dolor sit amet " * 60

    async def inner_fn(messages, tools):  # reads page after page; its usage is counted as a real model's is
        inner_calls.append(1)
        if delay:
            await asyncio.sleep(delay)
        pages = sum(m["role"] == "tool" for m in messages)
        return Reply.call("fetch", page=pages + 1) if pages < 9 else "I read it all."

    inner = Agent(model=FunctionModel(inner_fn, name="reader"), tools=[fetch], name="reader")
    planner = fan_out_planner(width, inner)
    budget = 4000
    result = go(StepRunner(planner, config=ExecutionConfig(max_tokens=budget), repository=repo).run(None, "go"))
    spent = tree_tokens(repo, result)
    # the tree passes the budget by at most one call's misestimate, never by its width
    assert spent <= budget * 1.05, (spent, len(inner_calls))
    unlimited = go(StepRunner(planner, repository=repo).run(None, "go"))
    assert tree_tokens(repo, unlimited) > 2 * budget  # without the budget the tree would have spent far more


def test_fan_out_is_limited_per_outermost_run(tmp_path):
    repo = open_repository(str(tmp_path / "s"))
    made: list[str] = []

    def recursive(messages, tools):
        last = messages[-1]
        if last["role"] == "user":  # every agent asks three copies of itself, as deep as allowed
            return Reply(tool_calls=[call("fractal", query=f"{last['content']}.{i}") for i in range(3)])
        made.append(last["content"])
        return "ok"

    fractal = Agent(model=FunctionModel(recursive, name="fractal-model"), name="fractal")
    fractal.registry.add(fractal.as_tool())  # it calls itself
    result = go(StepRunner(fractal, config=ExecutionConfig(max_nested_runs=12), repository=repo).run(None, "q"))
    nested = [d for d in repo.iter_run_dicts() if d.get("root_run_id") == result.run_id and d["id"] != result.run_id]
    assert len(nested) == 12  # 3 + 9 + a few before the limit: never 363
    refusals = [s for s in repo.get_steps(result.session_id) if s.role is StepRole.TOOL and s.status != "ok"]
    tool_steps = [s for d in nested for s in repo.get_steps(d["session_id"])
                  if s.role is StepRole.TOOL and "max_nested_runs=12" in (s.content or "")]
    assert tool_steps or refusals
    assert all("max_nested_runs=12" in s.content for s in tool_steps)
    with pytest.raises(ValueError, match="max_nested_runs"):
        ExecutionConfig(max_nested_runs=-1)


class TwinIds:
    """A model whose first reply makes two calls with one id (as a buggy server or an edit can)."""

    name = "twin-ids"

    def __init__(self):
        self.calls = 0

    async def stream(self, messages, tools, *, stream=True, settings=None):
        self.calls += 1
        if self.calls == 1:
            yield ToolCallDelta(0, "dup", "delete_account", json.dumps({"user": "ann"}))
            yield ToolCallDelta(1, "dup", "delete_account", json.dumps({"user": "bob"}))
        else:
            yield TextDelta("both deleted")
        yield Usage(10, 5, 15)


def test_duplicate_tool_call_ids_are_rekeyed_before_any_tool_runs(store_url):
    deleted: list[str] = []

    @tool(side_effects=True)
    def delete_account(user: str) -> str:
        """Delete a user's account."""
        deleted.append(user)
        return f"deleted {user}"

    repo = open_repository(store_url)
    try:
        agent = Agent(model=TwinIds(), tools=[delete_account])
        result = go(StepRunner(agent, repository=repo).run(None, "delete ann and bob"))
        assert result.status is RunStatus.COMPLETED, result.error
        assert sorted(deleted) == ["ann", "bob"]
        steps = repo.get_steps(result.session_id)
        ids = [c.id for c in steps[1].tool_calls]
        assert len(set(ids)) == 2 and ids[0] == "dup"
        results = {s.tool_call_id: s.content for s in steps if s.role is StepRole.TOOL}
        assert results == {ids[0]: "deleted ann", ids[1]: "deleted bob"}  # each call its own result
        # a replay of the stored run answers the side-effect calls from the record: nothing runs again
        replay = go(StepRunner(Agent(model=ReplayModel.from_run(result.run_id, repo), tools=[delete_account]),
                               repository=repo).run(None, "delete ann and bob"))
        assert replay.status is RunStatus.COMPLETED and sorted(deleted) == ["ann", "bob"]
    finally:
        repo.close()


def test_a_store_failing_after_a_side_effect_never_lets_it_run_twice(tmp_path):
    ran: list[str] = []

    @tool(side_effects=True)
    def pay(amount: int) -> str:
        """Pay an amount."""
        ran.append("paid")
        return f"paid {amount}"

    repo = open_repository(str(tmp_path / "s"))
    model = ScriptedModel([Reply.call("pay", amount=5), "Paid."], loop=True)
    agent = Agent(model=model, tools=[pay])
    real_commit = repo.commit
    commits = {"n": 0, "fail_at": None}

    def flaky(**kwargs):
        steps = list(kwargs.get("steps") or ())
        if any(s.role is StepRole.TOOL and s.status == "ok" for s in steps) and commits["fail_at"] is None:
            commits["fail_at"] = True
            raise OSError("disk full")
        return real_commit(**{**kwargs, "steps": steps})

    repo.commit = flaky  # type: ignore[method-assign]
    repo.commit_group = None  # the writer thread then commits one by one, through the failing commit
    failed = go(StepRunner(agent, repository=repo).run(None, "pay 5"))
    repo.commit = real_commit  # type: ignore[method-assign]
    del repo.commit_group
    assert ran == ["paid"] and failed.status is not RunStatus.COMPLETED
    stored = [s for s in repo.get_steps(failed.session_id) if s.role is StepRole.TOOL]
    assert stored and stored[-1].status in ("started", "ok")
    # resuming the session answers from what is stored: the payment does not run a second time
    go(StepRunner(agent, repository=repo).resume(failed.session_id))
    assert ran == ["paid"]


def test_a_side_effect_call_is_on_disk_as_started_before_it_runs(tmp_path):
    seen: dict[str, object] = {}
    repo = open_repository(str(tmp_path / "s"))

    @tool(side_effects=True)
    def launch(target: str) -> str:
        """Launch something."""
        # while the tool runs, another reader of the store already sees the call as started
        other = open_repository(str(tmp_path / "s"))
        seen["steps"] = [(s.role.value, s.status, s.content) for s in other.get_steps(seen["session"])]
        other.close()
        return "launched"

    model = ScriptedModel([Reply.call("launch", target="moon"), "Done."])
    runner = StepRunner(Agent(model=model, tools=[launch]), repository=repo)

    async def go_run():
        async for event in runner.run_stream(None, "launch"):
            seen.setdefault("session", event.session_id)

    go(go_run())
    assert ("tool", "started", STARTED_NOT_FINISHED) in seen["steps"]
    final = [s for s in repo.get_steps(seen["session"]) if s.role is StepRole.TOOL]
    assert [(s.status, s.content) for s in final] == [("ok", "launched")]  # the result replaced the marker


def test_the_handoff_prefix_is_reserved_for_handoffs():
    @tool
    def transfer_to_savings(amount: int) -> str:
        """Move money to savings."""
        return "moved"

    with pytest.raises(ValueError, match="may not start with 'transfer_to_'"):
        Agent(model=ScriptedModel(["x"]), tools=[transfer_to_savings])
    desk = Agent(model=ScriptedModel(["x"]), name="desk")
    assert "transfer_to_desk" in Agent(model=ScriptedModel(["x"]), handoffs=[desk]).registry.names()
