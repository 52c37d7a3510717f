"""Any id shown can be typed back: a unique prefix of 6+ characters names a run, session, batch,
execution or memory record, on every backend; an ambiguous prefix or one naming nothing is one line."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from agio_notebook import Agent, ScriptedModel, scheduling, StepRunner, fork_session, frames, memory
from agio_notebook.core import AgentRun, AgentSession, AmbiguousIdError, NotFoundError, RunStatus
from agio_notebook.execution.attempts import attempts_of, use_attempt
from agio_notebook.explore import diff, sweep, tree
from agio_notebook.scoring import regex, score_runs
from agio_notebook.memory.trace import trace
from agio_notebook.execution import build_context_from_sequence_range
from agio_notebook.models import ReplayModel
from agio_notebook.models.replay import export_cassette
from agio_notebook.memory import memory_for
from agio_notebook.memory.records import Skill
from agio_notebook.scheduling import ExecutionRecord, ExecutionStore, Executor, batch, resume_batch
from agio_notebook.storage import new_repository
from agio_notebook.storage.ids import resolve_run_id, resolve_session_id


def go(coro):
    return asyncio.run(coro)


def test_resolvers_on_every_backend(store_url):
    repo = new_repository(store_url)
    twins = ["abcdef01" + "0" * 24, "abcdef02" + "0" * 24, "abcdef02" + "1" * 24]
    for i, sid in enumerate(twins):
        repo.commit(session=AgentSession(session_id=sid), run=AgentRun(id=sid.replace("0", "9", 1)[::-1],
                                                                       session_id=sid, query=f"q{i}"))
    lone = "f00dfeed" + "5" * 24
    repo.commit(session=AgentSession(session_id=lone), run=AgentRun(id="bead" + "7" * 28, session_id=lone))
    assert resolve_session_id(repo, lone) == lone  # a full id as is
    assert resolve_session_id(repo, lone[:8]) == lone and resolve_session_id(repo, lone[:6]) == lone
    assert resolve_session_id(repo, "abcdef01") == twins[0]
    assert resolve_session_id(repo, "  F00DFEED ") == lone  # typed in capitals, with spaces around
    assert resolve_run_id(repo, "bead77") == "bead" + "7" * 28
    with pytest.raises(AmbiguousIdError) as info:
        resolve_session_id(repo, "abcdef02")
    message = str(info.value)
    assert "\n" not in message and twins[1] in message and twins[2] in message and twins[0] not in message
    with pytest.raises(AmbiguousIdError, match="starts 3 session ids"):
        resolve_session_id(repo, "abcdef")
    with pytest.raises(NotFoundError, match="no session 'a1b2c3d4' in the store"):
        resolve_session_id(repo, "a1b2c3d4")
    with pytest.raises(NotFoundError, match="at least 6 characters"):
        resolve_session_id(repo, "abcde")
    with pytest.raises(NotFoundError, match="^no session 'nope' in the store at [^ ]+$"):
        resolve_session_id(repo, "nope")
    with pytest.raises(NotFoundError, match="no run"):
        resolve_run_id(repo, lone[:8])  # a session's id is no run's
    with pytest.raises(TypeError, match="a run id is a string"):
        resolve_run_id(repo, 42)
    # LIKE's wildcards are characters of the prefix, not patterns
    with pytest.raises(NotFoundError):
        resolve_session_id(repo, "abcd%_")
    # the kinds kept in the store's journals: batches, executions, memory records
    store = ExecutionStore(repo)
    for name in ("report-alpha", "report-beta"):
        store.put_batch({"id": name})
        store.put(ExecutionRecord(batch=name, id=f"e{name[7]}cafe" + "0" * 26))
    store.flush()
    assert store.resolve_batch("report-a") == "report-alpha"
    with pytest.raises(AmbiguousIdError, match="report-alpha, report-beta"):
        store.resolve_batch("report-")
    executor = Executor(repository=repo)
    assert executor.resolve_execution("eacafe") == "eacafe" + "0" * 26
    with pytest.raises(NotFoundError, match="no execution 'ecafe0'"):
        executor.resolve_execution("ecafe0")
    mem = memory_for(repo)
    for rid in twins:
        mem.add(Skill(name="n", text="t", id=rid))
    assert mem.resolve("skill", "abcdef01", ("skills",)) == twins[0]
    with pytest.raises(AmbiguousIdError, match="starts 2 skill ids"):
        mem.resolve("skill", "abcdef02", ("skills",))
    memory.delete(twins[0][:8], repository=repo)
    assert list(memory.skills(repository=repo)["id"]) == twins[1:]
    repo.close()


@pytest.fixture
def conversation(tmp_path):
    repo = new_repository(tmp_path / "store")
    runner = StepRunner(Agent(model=ScriptedModel(["one", "two", "three", "four", "five"], loop=True), name="a"),
                        repository=repo)
    first = go(runner.run(None, "hello"))
    yield repo, runner, first
    repo.close()


def test_python_entry_points_take_the_8_characters_a_repr_shows(conversation, tmp_path):
    repo, runner, first = conversation
    short_run, short_session = first.run_id[:8], first.session_id[:8]
    retried = go(runner.retry(short_run))
    assert retried.run.retry_of == first.run_id
    assert [a.run.id for a in attempts_of(repo, short_run)] == [first.run_id, retried.run_id]
    assert use_attempt(repo, retried.run_id[:8], 1).id == first.run_id
    forked = fork_session(short_session, 1, repo)
    assert go(runner.resume(forked[:8])).status is RunStatus.COMPLETED
    assert go(runner.fork(short_session, 1, "again")).status is RunStatus.COMPLETED
    assert trace(short_run, repository=repo).run_id == first.run_id
    assert tree(short_session, repository=repo) is not None
    assert diff(short_run, retried.run_id[:8], repository=repo).changed >= 1
    assert diff(short_session, forked[:8], repository=repo) is not None
    assert ReplayModel.from_run(short_run, repo) is not None
    assert ReplayModel.from_session(short_session, repo) is not None
    assert export_cassette(tmp_path / "c.json", repo, run_id=short_run).exists()
    assert export_cassette(tmp_path / "s.json", repo, session_id=short_session).exists()
    assert build_context_from_sequence_range(short_session, repo, 1, 1) == [{"role": "user", "content": "hello"}]
    assert list(frames.steps(run_id=short_run, repository=repo)["run_id"].unique()) == [first.run_id]
    assert set(frames.runs(short_session, repository=repo)["session_id"]) == {first.session_id}
    result = sweep(short_run, 2, agent=Agent(model=ScriptedModel(["swept"], loop=True)), repository=repo,
                   monitor=False)
    assert result.source == first.session_id and len(result.frame) == 1
    assert list(score_runs([short_run], [regex("one")], repo)) == [first.run_id]
    item = memory.add_feedback(short_run, "+1", "good", repository=repo)
    assert item.run_id == first.run_id
    assert list(memory.feedback(short_run, repository=repo)["id"]) == [item.id]
    proposal = memory.propose(item.id[:8], repository=repo)
    experience = memory.accept(proposal.id[:8], repository=repo)
    assert memory.edit(experience.id[:8], lesson="short ids work", repository=repo).lesson == "short ids work"
    memory.delete(experience.id[:8], repository=repo)
    assert memory.experiences(repository=repo).empty


def test_bad_prefixes_are_one_line_and_change_nothing(conversation):
    repo, runner, first = conversation
    before = len(repo.list_runs())
    for bad in ("zzzzzzzz", "abc", first.session_id[:8]):
        with pytest.raises(NotFoundError) as info:
            go(runner.retry(bad))
        assert "\n" not in str(info.value)
    with pytest.raises(NotFoundError, match="no session"):
        fork_session("zzzzzzzz", 1, repo)
    assert len(repo.list_runs()) == before and len(repo.list_sessions()) == 1


def test_batches_and_executions_by_prefix(tmp_path):
    repo = new_repository(tmp_path / "store")
    ex = Executor(repository=repo)
    agent = Agent(model=ScriptedModel(["ok"], loop=True), name="echo")
    handle = batch(agent, ["a", "b"], name="report-alpha", executor=ex).wait(60)
    batch(agent, ["c"], name="report-beta", executor=ex).wait(60)
    record = handle.records()[0]
    assert ex.get_execution_status(record.id[:8]).id == record.id
    assert ex.wait_for(record.id[:8], 10).id == record.id
    assert resume_batch("report-a", agent, executor=ex).name == "report-alpha"
    with pytest.raises(AmbiguousIdError, match="report-alpha, report-beta"):
        resume_batch("report-", agent, executor=ex)
    assert set(scheduling.executions(batch="report-b", repository=repo)["batch"]) == {"report-beta"}
    with pytest.raises(NotFoundError, match="no execution 'zzzzzzzz'"):
        ex.get_execution_status("zzzzzzzz")
    repo.close()


def test_cli_replay_and_runs_take_a_prefix(conversation, tmp_path):
    repo, runner, first = conversation
    store = str(tmp_path / "store")
    out = subprocess.run([sys.executable, "-m", "agio_notebook", "--store", store, "replay", first.run_id[:8]],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "one" in out.stdout, out.stderr
    runs = subprocess.run([sys.executable, "-m", "agio_notebook", "--store", store, "runs", "--session",
                           first.session_id[:8]], capture_output=True, text=True, timeout=120)
    assert runs.returncode == 0 and first.run_id[:8] in runs.stdout, runs.stderr
    bad = subprocess.run([sys.executable, "-m", "agio_notebook", "--store", store, "replay", "zzzzzzzz"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1 and "no run 'zzzzzzzz'" in bad.stderr


def test_an_id_longer_than_any_is_quoted_by_its_start_and_length():
    """A caller may send anything as an id (a served agent's client, a huge string): the line quotes its
    start and says how long it was, never the whole of it."""
    from agio_notebook.storage import InMemoryRepository
    from agio_notebook.storage.ids import resolve_run_id, resolve_session_id

    repo = InMemoryRepository()
    for resolve, kind in ((resolve_session_id, "session"), (resolve_run_id, "run")):
        with pytest.raises(NotFoundError) as info:
            resolve(repo, "x" * 100_000)
        assert str(info.value) == f"no {kind} {'x' * 40!r}… (100000 characters) in the store"
        with pytest.raises(NotFoundError) as info:
            resolve(repo, "abcdef12")
        assert str(info.value) == f"no {kind} 'abcdef12' in the store"
