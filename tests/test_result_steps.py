"""A run's result carries its steps as the store holds them: taken from what the run's own commits made
durable (no read of the store), or read from the store when something it wrote did not become durable."""

from __future__ import annotations

import asyncio

import pytest
from agio_notebook import Agent, StepRunner, tool
from agio_notebook.core import RunStatus, StoreError
from agio_notebook.storage import new_repository

from engine_support import ChunkModel, calls, commits_of, text


@tool
def double(n: int) -> int:
    """Twice n."""
    return 2 * n


def _agent(*replies) -> Agent:
    return Agent(model=ChunkModel(list(replies)), tools=[double])


def test_the_results_steps_are_the_stored_ones_without_reading_them(store_url, monkeypatch):
    repo = new_repository(store_url)
    reads = []
    real = repo.get_steps
    monkeypatch.setattr(repo, "get_steps", lambda *a, **k: reads.append(a) or real(*a, **k))
    runner = StepRunner(_agent(calls(("double", {"n": 2}), ("double", {"n": 5})), text("4 and 10"), text("yes")),
                        repository=repo)
    first = asyncio.run(runner.run("s", "double 2 and 5"))
    second = asyncio.run(runner.run("s", "again?"))  # a second run in the session: only its own steps
    assert reads == [("s",)]  # the second run reads the session it goes on; no result reads its steps back
    monkeypatch.undo()
    reopened = new_repository(store_url)
    try:
        for result in (first, second):
            stored = [s for s in reopened.get_steps("s") if s.run_id == result.run_id]
            assert [s.to_dict() for s in result.steps] == [s.to_dict() for s in stored]
        assert [s.role.value for s in first.steps] == ["user", "assistant", "tool", "tool", "assistant"]
        assert [s.content for s in first.steps if s.role.value == "tool"] == ["4", "10"]
        assert all(s.metrics.tool_ms is not None for s in first.steps if s.role.value == "assistant"
                   and s.tool_calls)  # filled in after the step's own event
        assert [(s.sequence, s.content) for s in second.steps] == [(6, "again?"), (7, "yes")]
    finally:
        reopened.close()
        repo.close()


def test_a_result_whose_last_commit_failed_shows_what_the_store_holds(tmp_path, monkeypatch):
    repo = new_repository(str(tmp_path / "store"))
    runner = StepRunner(_agent(text("the answer")), repository=repo)
    real = repo.commit_group

    def refuse_the_answer(commits):
        if any(step.content == "the answer" for c in commits for step in c.get("steps", ())):
            raise StoreError("the disk is full")
        return real(commits)

    monkeypatch.setattr(repo, "commit_group", refuse_the_answer)
    monkeypatch.setattr(repo, "commit", lambda **c: refuse_the_answer([c]))
    result = asyncio.run(runner.run("s", "question"))
    monkeypatch.undo()
    assert result.status is not RunStatus.COMPLETED and "disk is full" in (result.error or "")
    stored = [s for s in repo.get_steps("s") if s.run_id == result.run_id]
    assert [s.content for s in result.steps] == [s.content for s in stored] == ["question"]
    repo.close()


@pytest.mark.parametrize("typed", [False, True], ids=["text", "typed"])
def test_an_answer_the_store_refused_is_not_announced(tmp_path, monkeypatch, typed):
    """The final answer (a plain agent's last step, a typed agent's accepted ``final_result``) is made durable
    with the run's end; when that commit fails, the answer is not announced and the run failed."""
    from agio_notebook import Reply, ScriptedModel
    from agio_notebook.core import StepEventType as E

    repo = new_repository(str(tmp_path / "store"))
    final = "Final result accepted." if typed else "the answer"

    def refuse_the_answer(commits, real=repo.commit_group):
        if any(step.content == final for c in commits for step in c.get("steps", ())):
            raise StoreError("the disk is full")
        return real(commits)

    monkeypatch.setattr(repo, "commit_group", refuse_the_answer)
    monkeypatch.setattr(repo, "commit", lambda **c: refuse_the_answer([c]))
    agent = (Agent(model=ScriptedModel([Reply.call("final_result", result=42)]), output_type=int) if typed
             else _agent(text("the answer")))

    async def events():
        return [e async for e in StepRunner(agent, repository=repo).run_stream("s", "question")]

    seen = asyncio.run(events())
    monkeypatch.undo()
    answers = [e for e in seen if e.type is E.STEP_COMPLETED and e.payload["step"]["content"] == final]
    assert answers == [] and seen[-1].type is E.RUN_FAILED
    run = seen[-1].payload["run"]
    assert "the final answer could not be stored: the disk is full" in run["error"]
    assert run.get("output") is None
    repo.close()


@pytest.mark.parametrize("how", ["final_result", "json"])
def test_a_typed_answer_is_made_durable_with_the_runs_end(store_url, monkeypatch, how):
    """A typed answer costs no commit of its own, as a plain one: given by a ``final_result`` call or as JSON
    text, the reply (and the call's accepted result) is made durable with the run's end."""
    from agio_notebook import Reply, ScriptedModel

    repo = new_repository(store_url)
    commits = commits_of(repo, monkeypatch)
    reply = Reply.call("final_result", result=42) if how == "final_result" else Reply.say("42")
    agent = Agent(model=ScriptedModel([reply]), output_type=int)
    result = asyncio.run(StepRunner(agent, repository=repo).run("s", "the answer?"))
    monkeypatch.undo()
    roles = ["assistant", "tool"] if how == "final_result" else ["assistant"]
    assert result.output == 42 and commits == [["user"], roles], commits  # two commits, as a plain answer's
    stored = repo.get_run(result.run_id)
    assert stored.status is RunStatus.COMPLETED and stored.output == 42
    assert [s.role.value for s in repo.get_steps("s")] == ["user", *roles]
    repo.close()


@pytest.mark.parametrize("how", ["final_result", "json"])
def test_a_typed_answer_that_does_not_fit_is_durable_and_announced_before_the_model_is_asked_again(
        tmp_path, how):
    """A reply held as the answer but refused is committed with its refusal, and its events and hooks come
    out, in order, before the model is called again."""
    from agio_notebook import AgentHook, FunctionModel, Reply
    from agio_notebook.core import StepEventType as E

    repo = new_repository(str(tmp_path / "store"))
    seen: list = []
    hooked: list[str] = []
    at_second_call: dict = {}

    def model(messages, tools):
        if len(messages) == 1:
            return Reply.call("final_result", result="many") if how == "final_result" else Reply.say("many")
        at_second_call["seen"] = [e.type for e in seen]
        at_second_call["stored"] = [s.role.value for s in repo.get_steps("s")]
        return Reply.call("final_result", result=7) if how == "final_result" else Reply.say("7")

    class Steps(AgentHook):
        async def on_step_end(self, run, step):
            hooked.append(f"{step.role.value}:{step.sequence}")

    async def consume():
        runner = StepRunner(Agent(model=FunctionModel(model), output_type=int), hooks=[Steps()], repository=repo)
        async for event in runner.run_stream("s", "how many?"):
            seen.append(event)

    asyncio.run(consume())
    assert seen[-1].type is E.RUN_COMPLETED and seen[-1].payload["run"]["output"] == 7
    refused = ["user", "assistant", "tool"] if how == "final_result" else ["user", "assistant", "user"]
    assert at_second_call["stored"] == refused  # the refused reply is durable before the model is asked again
    first_reply = [e for e in seen if e.type is E.STEP_COMPLETED and e.payload["step"]["sequence"] == 2]
    assert first_reply and first_reply[0].type in at_second_call["seen"]
    assert len([t for t in at_second_call["seen"] if t is E.STEP_COMPLETED]) == 3  # query, reply, refusal
    assert [e.seq for e in seen] == sorted(e.seq for e in seen)  # announced in order
    assert hooked == ["user:1", "assistant:2", f"{refused[2]}:3", "assistant:4"] + (
        ["tool:5"] if how == "final_result" else [])
    repo.close()
