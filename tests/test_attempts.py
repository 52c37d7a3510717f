"""Attempts: a retry that fails before any step supersedes nothing; any attempt can be made current again."""

from __future__ import annotations

import asyncio

import pytest

from agio_notebook import Agent, ScriptedModel, StepRunner, frames
from agio_notebook.core import InvalidOperationError, NotFoundError, RunStatus, SessionBusyError
from agio_notebook.execution import fork_session, attempts_of, use_attempt
from agio_notebook.storage import new_repository

from engine_support import ChunkModel, add, calls, text


@pytest.fixture
def repo(store_url):
    r = new_repository(store_url)  # on every backend
    yield r
    r.close()


def run(repo, replies, coro):
    runner = StepRunner(Agent(model=ChunkModel(replies), tools=[add]), repository=repo)
    return asyncio.run(coro(runner))


def current(repo, session="s"):
    return [(s.sequence, s.content) for s in repo.get_steps(session) if s.role.value != "tool"]


def conversation(repo):
    """Two runs in one session: a tool round then an answer, then a second query."""
    first = run(repo, [calls(("add", {"a": 2, "b": 2})), text("it is 5")], lambda r: r.run("s", "2+2?"))
    second = run(repo, [text("you are welcome")], lambda r: r.run("s", "thanks"))
    return first, second


def test_a_retry_that_fails_before_any_step_supersedes_nothing(repo):
    first, second = conversation(repo)
    before = current(repo)
    failed = run(repo, [], lambda r: r.retry(first.run_id, from_seq=2))  # the model has no replies left
    assert failed.status is RunStatus.FAILED and "no replies left" in failed.error
    assert current(repo) == before
    assert not any(s.superseded for s in repo.get_steps("s", include_superseded=True))
    assert repo.get_run(first.run_id).superseded_by is None and repo.get_run(second.run_id).superseded_by is None
    # the conversation still forks after the first answer, as it did before the failed retry
    fork = fork_session("s", 4, repo)
    assert [s.content for s in repo.get_steps(fork)][-1] == "it is 5"
    # frames: the failed attempt is listed and not current; the original runs are
    runs = frames.runs("s", repository=repo).set_index("run_id")
    assert runs.loc[failed.run_id, "current"] == False  # noqa: E712 - numpy bool
    assert runs.loc[[first.run_id, second.run_id], "current"].tolist() == [True, True]
    attempts = attempts_of(repo, first.run_id)
    assert [(a.number, a.run.status.value, a.current, a.steps) for a in attempts] == [
        (1, "completed", True, 4), (2, "failed", False, 0)]
    with pytest.raises(InvalidOperationError, match="wrote no step"):
        use_attempt(repo, first.run_id, 2)


def test_a_retry_that_fails_after_a_step_still_replaces(repo):
    first, _ = conversation(repo)
    broken = run(repo, [calls(("add", {"a": 1, "b": 1}))], lambda r: r.retry(first.run_id, from_seq=2))
    assert broken.status is RunStatus.FAILED and broken.run.start_sequence == 2
    assert repo.get_run(first.run_id).superseded_by == broken.run_id


def test_use_attempt_switches_back_and_forth_and_frames_agree(repo):
    first, second = conversation(repo)
    retry = run(repo, [text("it is 4")], lambda r: r.retry(first.run_id, from_seq=2))
    assert current(repo) == [(1, "2+2?"), (2, "it is 4")]
    assert [a.current for a in attempts_of(repo, retry.run_id)] == [False, True]

    use_attempt(repo, retry.run_id, 1)  # the first attempt, and the later query that went with it
    assert current(repo) == [(1, "2+2?"), (2, None), (4, "it is 5"), (5, "thanks"), (6, "you are welcome")]
    assert [a.current for a in attempts_of(repo, first.run_id)] == [True, False]
    runs = frames.runs("s", repository=repo).set_index("run_id")
    assert runs["current"].to_dict() == {first.run_id: True, second.run_id: True, retry.run_id: False}
    steps = frames.steps("s", repository=repo)
    assert (steps["current"] == ~steps["superseded"]).all()
    by_run = steps.groupby("run_id")["current"].all().to_dict()
    assert by_run == {first.run_id: True, second.run_id: True, retry.run_id: False}
    # each sequence has exactly one current step
    assert not steps[steps["current"]]["sequence"].duplicated().any()
    # a new query continues from the restored attempt
    model = ChunkModel([text("ok")])
    asyncio.run(StepRunner(Agent(model=model), repository=repo).run("s", "and now?"))
    assert [m.get("content") for m in model.seen[0]][-3:] == ["thanks", "you are welcome", "and now?"]

    use_attempt(repo, first.run_id, 2)
    assert current(repo)[:2] == [(1, "2+2?"), (2, "it is 4")] and len(current(repo)) == 2
    runs = frames.runs("s", repository=repo).set_index("run_id")
    assert runs.loc[retry.run_id, "current"] and not runs.loc[first.run_id, "current"]


def test_attempt_numbers_are_unique_and_bad_numbers_are_clear(repo):
    first, _ = conversation(repo)
    late = run(repo, [text("it is 4")], lambda r: r.retry(first.run_id, from_seq=4))
    early = run(repo, [text("four")], lambda r: r.retry(first.run_id, from_seq=2))
    assert [a.run.attempt for a in attempts_of(repo, first.run_id)] == [1, 2, 3]
    assert (late.run.attempt, early.run.attempt) == (2, 3)
    with pytest.raises(NotFoundError, match="attempts 1..3, not 7"):
        use_attempt(repo, first.run_id, 7)
    with pytest.raises(NotFoundError):
        use_attempt(repo, "nope", 1)


def test_attempts_do_not_change_under_a_running_run(repo):
    first, _ = conversation(repo)
    run(repo, [text("it is 4")], lambda r: r.retry(first.run_id, from_seq=2))
    runner = StepRunner(Agent(model=ChunkModel([text("slow")], delay=5.0)), repository=repo)

    async def meanwhile():
        stream = runner.run_stream("s", "one more")
        await stream.__anext__()  # the run has started and holds the session
        try:
            with pytest.raises(SessionBusyError, match="in progress"):
                use_attempt(repo, first.run_id, 1)
        finally:
            await stream.aclose()

    before = current(repo)
    asyncio.run(meanwhile())
    assert current(repo)[:2] == before[:2]
    assert [a.current for a in attempts_of(repo, first.run_id)] == [False, True]


def test_list_attempts_is_a_frame_like_every_listing(repo):
    import agio_notebook

    model = ScriptedModel(["first", "second"])
    runner = StepRunner(Agent(model=model), repository=repo)
    first = runner.run_sync(None, "hi")
    retried = asyncio.run(runner.retry(first.run_id))
    frame = agio_notebook.list_attempts(repo, first.run_id[:8])
    assert list(frame["attempt"]) == [1, 2] and list(frame["current"]) == [False, True]
    assert list(frame["run_id"]) == [first.run_id, retried.run_id]
    assert str(frame["started_at"].dtype).startswith("datetime64")
