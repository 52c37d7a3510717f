"""What the model saw: agio_notebook.context(run_id, step) over stored runs, retries and forks."""

from __future__ import annotations

import asyncio

import pytest

import agio_notebook
from agio_notebook import Agent, Reply, ScriptedModel, StepRunner, tool
from agio_notebook.core import NotFoundError
from agio_notebook.storage import open_repository


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def make_runner(tmp_path) -> StepRunner:
    model = ScriptedModel([Reply.call("add", _id="c1", a=2, b=3), "2 + 3 = 5"], loop=True)
    agent = Agent(model=model, tools=[add], system_prompt="You add.")
    return StepRunner(agent, repository=open_repository(str(tmp_path / "store")))


def test_each_model_call_shows_the_exact_messages_with_roles_tokens_and_origins(tmp_path):
    runner = make_runner(tmp_path)
    first = asyncio.run(runner.run("s", "What is 2 + 3?"))
    frame = agio_notebook.context(first.run_id, 2, repository=runner.repository)
    assert list(frame["role"]) == ["system", "user"]
    assert list(frame["text"]) == ["You add.", "What is 2 + 3?"]
    assert str(frame["tokens"].dtype) == "Int64" and (frame["tokens"] > 0).all()
    assert frame["step"].isna().iloc[0] and frame["step"].iloc[1] == 1
    last = agio_notebook.context(first.run_id, 4, repository=runner.repository)
    assert list(last["role"]) == ["system", "user", "assistant", "tool"]
    assert list(last["step"].iloc[1:]) == [1, 2, 3]
    assert last["text"].iloc[2] == 'add({"a": 2, "b": 3})' and last["text"].iloc[3] == "5"
    assert not last["edited"].any()
    # a second run sees the first one's messages, each from its step
    second = asyncio.run(runner.run("s", "Again?"))
    again = agio_notebook.context(second.run_id, 6, repository=runner.repository)
    assert list(again["step"].iloc[1:]) == [1, 2, 3, 4, 5]


def test_retried_and_forked_runs_show_what_their_own_calls_saw(tmp_path):
    runner = make_runner(tmp_path)
    first = asyncio.run(runner.run("s", "What is 2 + 3?"))
    retry = asyncio.run(runner.retry(first.run_id, 4))
    assert retry.steps[0].sequence == 4 and retry.steps[0].attempt == 2
    seen = agio_notebook.context(retry.run_id, 4, repository=runner.repository)
    assert list(seen["step"].iloc[1:]) == [1, 2, 3]
    # the first attempt's call still shows what it saw
    assert len(agio_notebook.context(first.run_id, 4, repository=runner.repository)) == 4
    fork = asyncio.run(runner.fork("s", 3, "And 4 + 4?"))
    forked = agio_notebook.context(fork.run_id, 5, repository=runner.repository)
    assert list(forked["text"].iloc[1:]) == ["What is 2 + 3?", 'add({"a": 2, "b": 3})', "5", "And 4 + 4?"]


def test_a_step_that_is_not_a_model_call_is_one_clear_error(tmp_path):
    runner = make_runner(tmp_path)
    run = asyncio.run(runner.run("s", "What is 2 + 3?"))
    with pytest.raises(NotFoundError, match="step 3 is a tool step; its model calls are steps 2, 4"):
        agio_notebook.context(run.run_id, 3, repository=runner.repository)
    with pytest.raises(NotFoundError, match="has no step 9"):
        agio_notebook.context(run.run_id, 9, repository=runner.repository)
    with pytest.raises(NotFoundError, match="no run 'nope'"):
        agio_notebook.context("nope", 2, repository=runner.repository)
    with pytest.raises(TypeError, match="step must be a step number"):
        agio_notebook.context(run.run_id, "2", repository=runner.repository)


def test_every_reader_of_a_call_agrees_on_what_the_model_saw(tmp_path):
    """The run's own context, the rebuilt request, context() and a replay's recording name the same messages
    for each call of a run with memory, a tool and a retry (core/conversation.py is their one home)."""
    from agio_notebook import Agent, Reply, ScriptedModel, StepRunner, memory, tool
    from agio_notebook.core import StepRole
    from agio_notebook.execution.requests import request_of
    from agio_notebook.models.replay import recorded_calls
    from agio_notebook.storage import open_repository

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    repo = open_repository(str(tmp_path / "s"))
    memory.add_skill("sums", "Show sums as words.", scope="adder", repository=repo)
    model = ScriptedModel([Reply.call("add", a=2, b=3), "five"], loop=True)
    runner = StepRunner(Agent(model=model, tools=[add], name="adder", system_prompt="Add."), repository=repo)
    first = runner.run_sync(None, "what are the sums of two and three?")
    retried = __import__("asyncio").run(runner.retry(first.run_id, first.steps[-1].sequence))
    steps = repo.get_steps(first.session_id, include_superseded=True)
    recorded = {c.step.id: c.messages() for c in recorded_calls(steps)}
    sent = [model.messages_of(i) for i in range(len(model.calls))]
    calls = [s for s in steps if s.role is StepRole.ASSISTANT]
    assert len(calls) == len(sent) == 4  # two calls, and two again from the retried step
    for call, what_was_sent in zip(sorted(calls, key=lambda s: s.created_at), sent):
        rebuilt = request_of(repo, call)["messages"]
        assert rebuilt == what_was_sent == recorded[call.id]
        seen = agio_notebook.context(call.run_id, call.sequence, repository=repo)
        assert list(seen["text"])[0].startswith("Add.") and "Show sums as words." in list(seen["text"])[0]
        assert len(seen) == len(what_was_sent)
    assert retried.status.value == "completed"
