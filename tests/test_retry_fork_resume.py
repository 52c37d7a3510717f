"""Retry, resume and fork keep history: attempts stay queryable, forks are isolated both ways."""

from __future__ import annotations

import asyncio

import pytest

from agio_notebook import Agent, StepRunner, fork_session, tool
from agio_notebook.core import InvalidOperationError, NotFoundError, RunStatus, StepEventType as E
from agio_notebook.storage import new_repository

from engine_support import ChunkModel, add, calls, cancel_when, nap, text, tool_started




@pytest.fixture
def repo(store_url):
    """Every test here runs on each backend: TinyDB files, SQLite, PostgreSQL."""
    r = new_repository(store_url)
    yield r
    r.close()


def runner_for(repo, replies, tools=(add, nap)):
    model = ChunkModel(replies)
    return StepRunner(Agent(model=model, tools=list(tools)), repository=repo), model


def go(coro):
    return asyncio.run(coro)


def test_retry_keeps_old_attempt_and_builds_clean_context(repo):
    runner, _ = runner_for(repo, [calls(("add", {"a": 2, "b": 2})), text("it is 5")])
    first = go(runner.run("s", "2+2?"))
    assert [s.sequence for s in first.steps] == [1, 2, 3, 4]

    retry_runner, model = runner_for(repo, [text("it is 4")])
    second = go(retry_runner.retry(first.run_id, from_seq=4))
    assert second.status is RunStatus.COMPLETED and second.final_text == "it is 4"
    assert second.run.kind == "retry" and second.run.retry_of == first.run_id and second.run.attempt == 2
    # the new attempt saw steps 1..3 only
    assert [m["role"] for m in model.seen[0]] == ["user", "assistant", "tool"]
    current = repo.get_steps("s")
    assert [(s.sequence, s.attempt, s.content) for s in current][-1] == (4, 2, "it is 4")
    everything = repo.get_steps("s", include_superseded=True)
    old = [s for s in everything if s.superseded]
    assert [(s.sequence, s.content, s.attempt) for s in old] == [(4, "it is 5", 1)]
    assert repo.get_run(first.run_id).superseded_by == second.run_id
    # a further query continues from the new attempt
    runner3, model3 = runner_for(repo, [text("bye")])
    go(runner3.run("s", "thanks"))
    assert [m.get("content") for m in model3.seen[0]][-2:] == ["it is 4", "thanks"]


def test_retry_default_regenerates_whole_answer_and_with_another_model(repo):
    runner, _ = runner_for(repo, [text("first answer")])
    first = go(runner.run("s", "q"))
    other = Agent(model=ChunkModel([text("better answer")]), name="stronger")
    second = go(runner.retry(first.run_id, agent=other))
    assert second.final_text == "better answer" and second.run.agent_name == "stronger"
    assert [(s.content, s.superseded) for s in repo.get_steps("s", include_superseded=True)] == [
        ("q", False), ("first answer", True), ("better answer", False)]


def test_retry_clear_errors(repo):
    runner, _ = runner_for(repo, [calls(("add", {"a": 1, "b": 1}), ("add", {"a": 2, "b": 2})), text("ok")])
    first = go(runner.run("s", "q"))
    with pytest.raises(NotFoundError, match="no run"):
        go(runner.retry("nope"))
    with pytest.raises(NotFoundError, match="sequence 99"):
        go(runner.retry(first.run_id, from_seq=99))
    with pytest.raises(InvalidOperationError, match="tool"):
        go(runner.retry(first.run_id, from_seq=4))
    assert len(repo.get_steps("s")) == 5  # nothing touched


def test_retry_of_running_run_is_refused(repo):
    runner, _ = runner_for(repo, [calls(("nap", {"seconds": 5}))])

    async def refuse(events):
        with pytest.raises(InvalidOperationError, match="still running|in progress"):
            await runner.retry(events[0].run_id)

    go(cancel_when(runner.run_stream("s", "q"), while_running=refuse))


def test_resume_after_cancelled_run_runs_pending_tools_first(repo):
    runner, _ = runner_for(repo, [calls(("nap", {"seconds": 10}))])

    go(cancel_when(runner.run_stream("s", "q"), tool_started))
    assert repo.get_last_step("s").role.value == "assistant"

    # the tool is fast now: resuming runs the pending call, then asks the model
    resume_model = ChunkModel([text("rested well")])
    @tool(name="nap")
    def fast_nap(seconds: float) -> str:
        """Sleep no more."""
        return "rested"

    resumer = StepRunner(Agent(model=resume_model, tools=[fast_nap]), repository=repo)
    events = go(_collect(resumer.resume_stream("s")))
    types = [e.type for e in events]
    assert types[0] is E.RUN_STARTED and types[-1] is E.RUN_COMPLETED
    assert types.index(E.TOOL_CALL_COMPLETED) < types.index(E.STEP_DELTA)
    assert events[0].payload["run"]["kind"] == "resume"
    assert [m["role"] for m in resume_model.seen[0]] == ["user", "assistant", "tool"]
    assert repo.get_run(events[0].run_id).status is RunStatus.COMPLETED


def test_resume_from_user_step(repo):
    from agio_notebook.core import AgentSession, Step, StepRole
    session = AgentSession()
    user = Step(session_id=session.session_id, run_id=None, sequence=1, role=StepRole.USER, content="hello?")
    repo.commit(session=session, steps=[user])
    runner, model = runner_for(repo, [text("hello!")])
    events = go(_collect(runner.resume_from_user_step(session.session_id, repo.get_last_step(session.session_id))))
    assert events[-1].payload["run"]["final_text"] == "hello!"
    assert model.seen[0] == [{"role": "user", "content": "hello?"}]
    with pytest.raises(InvalidOperationError, match="already ends with an answer"):
        go(_collect(runner.resume_stream(session.session_id)))


def test_fork_is_isolated_both_ways(repo):
    runner, _ = runner_for(repo, [calls(("add", {"a": 1, "b": 2})), text("3"), text("later original")])
    first = go(runner.run("orig", "1+2?"))
    fork_id = fork_session("orig", 4, repo)
    session = repo.get_session(fork_id)
    assert (session.forked_from, session.forked_at) == ("orig", 4)
    copies = repo.get_steps(fork_id)
    originals = repo.get_steps("orig")
    assert [s.content for s in copies] == [s.content for s in originals]
    assert not {s.id for s in copies} & {s.id for s in originals}

    fork_runner, fork_model = runner_for(repo, [text("in the fork")])
    go(fork_runner.run(fork_id, "fork question"))
    go(runner.run("orig", "original question"))
    assert [s.content for s in repo.get_steps("orig")][-2:] == ["original question", "later original"]
    assert [s.content for s in repo.get_steps(fork_id)][-2:] == ["fork question", "in the fork"]
    assert len(repo.get_steps("orig")) == 6 and len(repo.get_steps(fork_id)) == 6
    assert [m["role"] for m in fork_model.seen[0]] == ["user", "assistant", "tool", "assistant", "user"]
    assert first.run_id not in {s.run_id for s in repo.get_steps(fork_id)}


def test_fork_clear_errors(repo):
    runner, _ = runner_for(repo, [calls(("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})), text("ok")])
    go(runner.run("orig", "q"))
    with pytest.raises(NotFoundError, match="sequence 42"):
        fork_session("orig", 42, repo)
    with pytest.raises(InvalidOperationError, match="inside the tool batch"):
        fork_session("orig", 3, repo)
    with pytest.raises(NotFoundError):
        fork_session("missing", 1, repo)
    assert len(repo.list_sessions()) == 1


async def _collect(stream):
    return [e async for e in stream]
