"""Where a run's commits are made: a run alone in its process on a SQL store makes them on its own thread
(nothing to group them with; the hand-over to the writer thread and back cost more than the commit), runs
at once hand them to the store's writer thread, which groups them; a TinyDB store always does (its writer
also checkpoints the store's log)."""

from __future__ import annotations

import asyncio
import threading

from agio_notebook import Agent, StepRunner, tool
from agio_notebook.storage import new_repository
from agio_notebook.storage.group_commit import committer_for

from engine_support import ChunkModel, calls, text


@tool
async def nap(seconds: float) -> str:
    """Sleep a while."""
    await asyncio.sleep(seconds)
    return "rested"


def _runner(repo) -> StepRunner:
    return StepRunner(Agent(model=ChunkModel([calls(("nap", {"seconds": 0.2})), text("done")]), tools=[nap]),
                      repository=repo)


def test_a_lone_run_commits_on_its_thread_and_runs_at_once_share_the_writer(store_url, monkeypatch):
    repo = new_repository(store_url)
    where: list[str] = []
    for name in ("commit", "commit_group"):
        real = getattr(repo, name)

        def spy(*args, _real=real, **kwargs):
            where.append(threading.current_thread().name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(repo, name, spy)
    sql = type(repo).__name__ != "TinyDBRepository"
    try:
        alone = asyncio.run(_runner(repo).run(None, "rest"))
        assert alone.final_text == "done"
        assert set(where) == ({threading.current_thread().name} if sql else {"agio-store-writer"}), where
        where.clear()

        async def two():
            return await asyncio.gather(_runner(repo).run(None, "rest"), _runner(repo).run(None, "rest too"))

        both = asyncio.run(two())
        assert [r.final_text for r in both] == ["done", "done"]
        # each run's first commit is made while the other's run is in progress: both go to the writer
        assert where.count("agio-store-writer") >= 2 and committer_for(repo).commits >= 2, where
        for r in (alone, *both):  # wherever they were made, every step is in the store
            assert [s.role.value for s in repo.get_steps(r.session_id)] == ["user", "assistant", "tool", "assistant"]
    finally:
        monkeypatch.undo()
        repo.close()


def test_a_lone_run_hands_its_commit_over_while_the_writer_has_others(store_url):
    """A commit made on the run's thread never overtakes one still queued or being written."""
    repo = new_repository(store_url)
    committer = committer_for(repo)
    gate = threading.Event()
    real = repo.commit_group

    def slow(commits):
        gate.wait(10)
        return real(commits)

    repo.commit_group = slow
    try:
        from agio_notebook.core import AgentSession

        pending = committer.submit({"session": AgentSession(session_id="other")})
        assert not committer.idle()
        done = threading.Event()
        result: list = []

        def run():
            result.append(asyncio.run(_runner(repo).run(None, "rest")))
            done.set()

        worker = threading.Thread(target=run)
        worker.start()
        assert not done.wait(0.5)  # its first commit waits behind the writer's
        gate.set()
        worker.join(30)
        pending.result(10)
        assert result[0].final_text == "done"
    finally:
        gate.set()
        del repo.commit_group
        repo.close()
