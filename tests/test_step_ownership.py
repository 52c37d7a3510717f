"""A step named together with a run must be that run's: step numbers count across the session, so
``retry <run B> --from-seq 2`` where step 2 is run A's is refused in one line naming run A, through
every door (StepRunner, the notebook's retry and fork, ``%agio`` in a kernel, the MCP server's retry),
and nothing stored changes. Steps of a run's retries, and of the run a retry retried, are its own."""

from __future__ import annotations

import pytest

from agio_notebook import Agent, ScriptedModel, StepRunner
from agio_notebook.core import InvalidOperationError
from agio_notebook.execution import fork_session
from agio_notebook.notebook.controller import Controller
from agio_notebook.storage import TinyDBRepository
from explore_support import go, repo  # noqa: F401 - the fixture
from kernel_support import Kernel, install_kernelspec


def two_runs(repo) -> tuple[StepRunner, str, str, str]:
    """Session s: run A (steps 1-2), run B (steps 3-4)."""
    runner = StepRunner(Agent(model=ScriptedModel(["A1", "B1", "A2", "B2", "C", "D"]), name="a"), repository=repo)
    a = runner.run_sync("s", "question A")
    b = runner.run_sync("s", "question B")
    return runner, "s", a.run_id, b.run_id


def snapshot(repo, session: str) -> tuple:
    return ([(s.id, s.superseded) for s in repo.get_steps(session, include_superseded=True)],
            sorted(r.id for r in repo.list_runs()), sorted(s.session_id for s in repo.list_sessions()))


def test_a_retry_from_another_runs_step_is_refused_naming_the_owner(repo):
    runner, session, a, b = two_runs(repo)
    before = snapshot(repo, session)
    with pytest.raises(InvalidOperationError) as err:
        go(runner.retry(b, from_seq=2))
    assert str(err.value) == (f"cannot retry run {b[:8]} at step 2: step 2 belongs to run {a[:8]}, "
                              f"not to run {b[:8]} (whose steps are 3–4)")
    with pytest.raises(InvalidOperationError, match=f"step 1 belongs to run {a[:8]}"):
        go(runner.retry(b, from_seq=1))
    assert snapshot(repo, session) == before  # nothing superseded, no run started
    # its own steps still work: the user step (the answer is regenerated) and the answer itself
    assert go(runner.retry(b, from_seq=3)).final_text == "A2"
    assert go(runner.retry(a, from_seq=2)).final_text == "B2"


def test_a_retrys_steps_and_the_retried_runs_belong_to_one_family(repo):
    runner, session, a, b = two_runs(repo)
    again = go(runner.retry(b, from_seq=4))  # step 3 stays run B's, step 4 is the retry's now
    assert go(StepRunner(Agent(model=ScriptedModel(["third"])), repository=repo).retry(again.run_id, from_seq=3)
              ).final_text == "third"  # step 3 is the retried run's: the same family
    with pytest.raises(InvalidOperationError, match=f"step 2 belongs to run {a[:8]}"):
        go(runner.retry(again.run_id, from_seq=2))


def test_a_fork_of_an_attempt_takes_only_that_attempts_steps(repo):
    _, session, a, b = two_runs(repo)
    before = snapshot(repo, session)
    with pytest.raises(InvalidOperationError) as err:
        fork_session(session, 2, repo, attempt=b)
    assert str(err.value) == (f"cannot fork run {b[:8]} at step 2: step 2 belongs to run {a[:8]}, "
                              f"not to run {b[:8]} (whose steps are 3–4)")
    assert snapshot(repo, session) == before
    assert [s.content for s in repo.get_steps(fork_session(session, 4, repo, attempt=b))][-1] == "B1"
    assert len(repo.get_steps(fork_session(session, 2, repo))) == 2  # the session itself: any step


def test_a_step_a_fork_copied_belongs_to_no_run(repo):
    _, session, _, _ = two_runs(repo)
    fork = fork_session(session, 2, repo)
    runner = StepRunner(Agent(model=ScriptedModel(["in the fork", "again"])), repository=repo)
    c = runner.run_sync(fork, "question C")
    with pytest.raises(InvalidOperationError, match=r"step 2 belongs to no run \(it was copied into this session "
                                                    rf"by a fork\), not to run {c.run_id[:8]} \(whose steps are 3–4\)"):
        go(runner.retry(c.run_id, from_seq=2))


def test_the_notebook_checks_before_it_changes_the_current_attempt(repo):
    runner, session, a, b = two_runs(repo)
    go(runner.retry(b, from_seq=4))  # b is a replaced attempt now: retrying it would make it current again
    controller = Controller(store=str(repo.root))
    before = snapshot(controller.repository, session)
    with pytest.raises(InvalidOperationError, match=f"step 2 belongs to run {a[:8]}, not to run {b[:8]}"):
        controller.retry(b, 2, agent=Agent(model=ScriptedModel(["x"]), name="a"))
    with pytest.raises(InvalidOperationError, match=f"cannot fork run {b[:8]} at step 1"):
        controller.fork(session, 1, attempt=b)
    assert snapshot(controller.repository, session) == before  # b was not made current


def test_the_mcp_servers_retry_refuses_in_one_line(repo):
    from mcp import Client

    from agio_notebook.serve import build_server

    _, _, a, b = two_runs(repo)
    server = build_server({"a": Agent(model=ScriptedModel(["x"]), name="a")}, repo)

    async def call():
        async with Client(server) as client:
            return await client.call_tool("retry", {"run_id": b, "from_seq": 2})

    result = go(call())
    assert result.is_error
    assert result.content[0].text == (f"Error executing tool retry: cannot retry run {b[:8]} at step 2: step 2 belongs to run {a[:8]}, "
                                      f"not to run {b[:8]} (whose steps are 3–4)")


@pytest.mark.parametrize("bad", [4.0, "3", True, None, 2.5])
def test_a_step_number_of_the_wrong_type_is_refused_before_anything_is_stored(repo, bad):
    runner, session, a, b = two_runs(repo)
    before = snapshot(repo, session)
    calls = [lambda: go(runner.fork(session, bad, "again")), lambda: go(runner.fork(session, bad)),
             lambda: fork_session(session, bad, repo)]
    if bad is not None:  # a retry without from_seq starts at the run's first model step
        calls.append(lambda: go(runner.retry(b, from_seq=bad)))
    for call in calls:
        with pytest.raises(TypeError, match="sequence number .*a whole number.*got"):
            call()
    assert snapshot(repo, session) == before


def test_a_fork_refused_for_ending_in_an_answer_stores_nothing(repo):
    """Forking without a query answers the copy as it stands: a copy that ends in an answer is refused, naming
    the source session and step, before any copy is made."""
    import numpy as np

    runner, session, a, b = two_runs(repo)
    before = snapshot(repo, session)
    with pytest.raises(InvalidOperationError, match=f"session {session} at step 4 already ends with an answer"):
        go(runner.fork(session, 4))
    assert snapshot(repo, session) == before
    result = go(runner.fork(session, np.int64(3)))  # a number read from a frame is a step number too
    assert result.steps[-1].content == "A2" and repo.get_session(result.session_id).forked_at == 3


def test_a_query_or_session_of_the_wrong_type_is_refused_before_anything_is_stored(repo):
    """A fork's query that is not text is refused before its copy is made; a session given as a number is
    refused, not stored as a number that no later call could name."""
    runner, session, _, _ = two_runs(repo)
    before = snapshot(repo, session)
    sessions = len(repo.list_sessions())
    with pytest.raises(TypeError, match="query must be a string, got int"):
        go(runner.fork(session, 1, 5))
    with pytest.raises(TypeError, match="session must be a session id .*, got int"):
        runner.run_sync(123, "q")
    with pytest.raises(TypeError, match="session must be a session id .*, got list"):
        go(runner.run([session], "q"))
    assert snapshot(repo, session) == before and len(repo.list_sessions()) == sessions


def test_percent_agio_retry_and_fork_in_a_kernel(tmp_path):
    store = tmp_path / "store"
    repo = TinyDBRepository(store)
    _, session, a, b = two_runs(repo)
    repo.close()
    install_kernelspec(tmp_path / "jupyter")
    kernel = Kernel(tmp_path)
    try:
        kernel.execute("%load_ext agio_notebook\nfrom agio_notebook import Agent, ScriptedModel\n"
                       "a = Agent(model=ScriptedModel(['again']), name='a')")
        for cell, what in ((f"%agio retry {b[:8]} --from-seq 2 --agent a", "retry"),
                           (f"%agio fork {session} --at 2 --run {b[:8]}", "fork")):
            reply = kernel.execute(cell)["reply"]["content"]
            assert reply["ename"] == "UsageError", reply
            assert reply["evalue"] == (f"%agio: cannot {what} run {b[:8]} at step 2: step 2 belongs to run {a[:8]}, "
                                       f"not to run {b[:8]} (whose steps are 3–4)")
        assert kernel.value("len(__import__('agio_notebook').storage.open_repository().list_runs())") == 2
    finally:
        kernel.close()
