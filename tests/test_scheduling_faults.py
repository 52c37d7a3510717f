"""Batches under attack: a SIGKILL in the first moments, an interrupted item without a record, bad
options (refused whole, nothing stored, nothing queued, other batches unharmed), and timeouts that
measure the item rather than the store."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agio_notebook import Agent, ExecutionConfig, FunctionModel
from agio_notebook.scheduling import (ExecStatus, ExecutionRequest, Executor, RateLimit, SchedulingError, batch,
                                      resume_batch, run_jobs)
from agio_notebook.storage import TinyDBRepository
from scheduling_support import Probe, ex, repo, slow_agent, wait_until  # noqa: F401 - ex, repo: fixtures

KILLER = [sys.executable, str(Path(__file__).with_name("batch_killer.py"))]


# -- 1, 2: a kill in the first moments --------------------------------------------------------------------

def _killed_at(root: Path, moment: str) -> str:
    proc = subprocess.run([*KILLER, str(root), moment], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stdout, proc.stderr)
    return proc.stdout


def _resume_and_check(root: Path) -> dict[str, list[list[str]]]:
    """Resume in this process; every item completes once, and no session's model saw its input twice."""
    seen: dict[str, list[list[str]]] = {}

    def reply(messages, tools):
        asked = [m["content"] for m in messages if m["role"] == "user"]
        seen.setdefault(asked[-1], []).append(asked)
        return f"echo: {asked[-1]}"

    agent = Agent(model=FunctionModel(reply, name="echo"), name="echo", config=ExecutionConfig(enable_retry=False))
    repo = TinyDBRepository(root)
    h = resume_batch("k", agent, executor=Executor(repo)).wait(120)
    assert h.metrics()["completed"] == 4, h.records()
    completed: dict[int, int] = {}
    for run in repo.list_runs():
        assert run.session_id.startswith("k-")
        if run.status.value == "completed":
            item = int(run.session_id.split("-")[1])
            completed[item] = completed.get(item, 0) + 1
        users = [s.content for s in repo.get_steps(run.session_id) if s.role.value == "user"]
        assert len(users) == 1, (run.session_id, users)  # a model never sees its input twice
    assert completed == {0: 1, 1: 1, 2: 1, 3: 1}, completed  # nothing completed twice
    for asked in seen.values():
        assert all(len(a) == 1 for a in asked), seen
    return seen


def test_a_kill_before_the_first_record_runs_nothing_twice(tmp_path):
    out = _killed_at(tmp_path / "store", "first-record")
    assert "model saw" not in out  # the records are durable before the first item starts
    seen = _resume_and_check(tmp_path / "store")
    assert sorted(seen) == ["item 0", "item 1", "item 2", "item 3"]


def test_a_kill_between_a_runs_completion_and_its_record_does_not_run_it_again(tmp_path):
    out = _killed_at(tmp_path / "store", "completion")
    assert "model saw ['item 0']" in out
    seen = _resume_and_check(tmp_path / "store")
    assert "item 0" not in seen  # completed in the killed process: reconciled, not run again
    records = {r.index: r for r in Executor(TinyDBRepository(tmp_path / "store")).store.records("k")}
    assert records[0].session_id == "k-00000" and records[0].result == "echo: item 0"


def test_an_interrupted_item_without_a_record_resumes_in_a_new_session(tmp_path):
    out = _killed_at(tmp_path / "store", "mid-run")
    assert "model saw ['item 2']" in out and "model saw ['item 3']" not in out
    seen = _resume_and_check(tmp_path / "store")
    assert seen["item 2"] == [["item 2"]]  # not ['item 2', 'item 2']
    assert "item 0" not in seen and "item 1" not in seen
    records = {r.index: r for r in Executor(TinyDBRepository(tmp_path / "store")).store.records("k")}
    assert records[2].session_id == "k-00002-a2" and records[2].attempts == 2
    assert records[3].session_id == "k-00003"


# -- 3, 4: bad options are refused whole ------------------------------------------------------------------

BAD = [
    ({"priority": None}, "priority must be a number"),
    ({"priority": "high"}, "priority must be a number"),
    ({"priority": float("nan")}, "priority must be a number"),
    ({"concurrency": "4"}, "write concurrency=4"),
    ({"concurrency": 2.5}, "concurrency must be a whole number"),
    ({"concurrency": True}, "concurrency must be a whole number"),
    ({"rate_limit": 100}, "does not say per what"),
    ({"rate_limit": "100/min"}, "rate_limit must be a RateLimit or a dict"),
    ({"rate_limit": {"rpm": "5"}}, "rate limit rpm must be a number"),
    ({"rate_limit": {"rps": 0}}, "rpm=0"),
    ({"rate_limit": {"per_second": 5}}, "unknown key 'per_second'"),
    ({"rate_limit": {"rps": 5, "rpm": 10}}, "give rps alone"),
    ({"rate_limit": {"rpm": 5, "endpoint": 7}}, "endpoint must be a string"),
    ({"timeout": 0}, "timeout must be a positive number of seconds"),
    ({"timeout": -1}, "timeout must be a positive number of seconds"),
    ({"timeout": "5"}, "timeout must be a positive number of seconds"),
    ({"retries": -1}, "retries must be at least 0"),
    ({"retries": "2"}, "retries must be a whole number"),
    ({"retry_delay": -1}, "retry_delay must be a number >= 0"),
    ({"max_tokens": 0}, "max_tokens must be at least 1"),
    ({"max_tokens": "100"}, "max_tokens must be a whole number"),
    ({"batch_max_tokens": 0}, "batch_max_tokens must be at least 1"),
    ({"batch_max_cost": 0}, "batch_max_cost must be a positive amount of USD"),
    ({"batch_max_cost": "1"}, "batch_max_cost must be a positive amount of USD"),
    ({"name": 5}, "name must be a non-empty string"),
    ({"prompt": 3}, "prompt must be a string template"),
]


@pytest.mark.parametrize("kwargs,message", BAD, ids=[repr(k) for k, _ in BAD])
def test_a_bad_option_is_one_line_and_leaves_nothing_stored_or_queued(ex, kwargs, message):
    probe = Probe()
    kwargs = {"name": "refused", **kwargs}
    with pytest.raises(SchedulingError, match=message) as info:
        batch(slow_agent(probe, 0.0), ["x", "y"], executor=ex, **kwargs)
    assert "\n" not in str(info.value)
    assert ex.store.batch_names() == [] and ex.store.get_batch("refused") is None
    with pytest.raises(SchedulingError, match="no batch named 'refused'.*recent: none"):
        resume_batch("refused", slow_agent(probe), executor=ex)
    assert ex.get_queue_status()["queued"] == 0 and probe.calls == {}


def test_the_forms_a_user_writes_are_accepted(ex):
    probe = Probe()
    h = batch(slow_agent(probe, 0.0), ["x", "y"], name="forms", executor=ex, priority=0.5, timeout=30,
              rate_limit={"rps": 50, "endpoint": "forms"}).wait(60)
    assert h.metrics()["completed"] == 2
    stored = ex.store.get_batch("forms")["options"]
    assert stored["priority"] == 0.5 and stored["rate_limit"] == {"rpm": 50, "tpm": None, "endpoint": "forms",
                                                                   "period": 1.0}
    assert RateLimit(rpm=600).period == 60.0


def test_a_refused_batch_or_request_does_not_stall_a_running_batch(ex, caplog):
    caplog.set_level(logging.ERROR, logger="asyncio")
    probe = Probe()
    gate = threading.Event()

    async def gated(messages, tools):
        while not gate.is_set():
            import asyncio

            await asyncio.sleep(0.01)
        return "ok"

    running = batch(Agent(model=FunctionModel(gated, name="gated"), name="gated",
                          config=ExecutionConfig(enable_retry=False)),
                    [f"r{i}" for i in range(10)], name="running", concurrency=2, executor=ex)
    wait_until(lambda: running.metrics()["concurrency"] == 2, what="the first batch running")
    for bad in ({"priority": None}, {"priority": "high"}, {"concurrency": "4"}, {"rate_limit": {"rps": 5, "x": 1}}):
        with pytest.raises(SchedulingError):
            batch(slow_agent(probe, 0.0), ["a", "b"], name="bad", executor=ex, **bad)
    with pytest.raises(SchedulingError, match="priority must be a number"):
        ex.submit(ExecutionRequest(agent=slow_agent(probe, 0.0), query="q", priority=None))
    with pytest.raises(SchedulingError, match="priority must be a number"):
        run_jobs([(slow_agent(probe, 0.0), None, "q")], priority="high", executor=ex)
    gate.set()
    running.wait(60)
    assert running.metrics()["completed"] == 10 and probe.calls == {}
    assert "never retrieved" not in caplog.text and ex.store.get_batch("bad") is None


def _durability():
    """The module whose ``syncfs`` a group commit calls (absent from stores that fsync each file)."""
    try:
        from agio_notebook.storage import durability
    except ImportError:
        return None
    return durability


# -- 5: a timeout measures the item, not the store -----------------------------------------------------------

def test_a_fast_item_with_a_short_timeout_beside_slow_store_writes_does_not_time_out(tmp_path, monkeypatch):
    """fsync takes 0.3 s here; a 20 ms item with a 1 s timeout beside 16 others still completes."""
    import os

    durability = _durability()

    def slowly(sync):
        def slow(fd):
            time.sleep(0.3)
            sync(fd)
        return slow

    repo = TinyDBRepository(tmp_path / "store")
    ex = Executor(repo)
    monkeypatch.setattr(os, "fsync", slowly(os.fsync))
    monkeypatch.setattr(os, "fdatasync", slowly(os.fdatasync))
    if durability is not None:
        monkeypatch.setattr(durability, "syncfs", slowly(durability.syncfs))
    probe = Probe()
    others = batch(slow_agent(probe, 0.02, name="others"), [f"o{i}" for i in range(16)], name="others",
                   concurrency=16, executor=ex)
    fast = batch(slow_agent(probe, 0.02, name="fast"), ["f0", "f1"], name="fast", timeout=1.0, concurrency=2,
                 executor=ex)
    fast.wait(120)
    others.wait(120)
    statuses = [r.status for r in fast.records()]
    assert statuses == [ExecStatus.COMPLETED, ExecStatus.COMPLETED], [(r.status, r.error) for r in fast.records()]
    assert others.metrics()["completed"] == 16


# -- 5: group commit keeps "durable before announced" ------------------------------------------------------

def test_concurrent_runs_share_syncs_and_each_step_is_synced_before_its_event(tmp_path, monkeypatch):
    """Writes, syncs and deliveries in one timeline: every step event comes after a sync that came after
    the step's write, and 16 concurrent runs need fewer syncs than commits."""
    import asyncio
    import os

    from agio_notebook import StepRunner
    from agio_notebook.storage.journal import Journal

    durability = _durability()

    timeline: list[tuple[str, object]] = []
    lock = threading.Lock()
    append = Journal.append

    def logged_append(self, records, deletes=(), **kw):
        appended = append(self, records, deletes, **kw)
        with lock:
            timeline.extend(("write", doc["id"]) for table, doc in records if table == "steps")
            if kw.get("sync", True):
                timeline.append(("sync", None))
        return appended

    def logged(sync):
        def call(fd):
            sync(fd)
            with lock:
                timeline.append(("sync", None))
        return call

    monkeypatch.setattr(Journal, "append", logged_append)
    monkeypatch.setattr(os, "fsync", logged(os.fsync))
    monkeypatch.setattr(os, "fdatasync", logged(os.fdatasync))  # the write-ahead log's sync
    if durability is not None:
        monkeypatch.setattr(durability, "syncfs", logged(durability.syncfs))

    async def reply(messages, tools):
        await asyncio.sleep(0.01)
        return "ok"

    repo = TinyDBRepository(tmp_path / "store")
    runner = StepRunner(Agent(model=FunctionModel(reply, name="m"), name="a",
                              config=ExecutionConfig(enable_retry=False)), repository=repo)

    async def one(i: int) -> None:
        async for event in runner.run_stream(f"s{i}", f"q{i}"):
            if event.type.value == "step_completed":
                with lock:
                    timeline.append(("event", event.payload["step"]["id"]))

    async def all_runs() -> None:
        await asyncio.gather(*(one(i) for i in range(16)))

    asyncio.run(all_runs())
    events = [(n, sid) for n, (kind, sid) in enumerate(timeline) if kind == "event"]
    assert len(events) == 32  # a user step and an answer per run
    for n, sid in events:
        wrote = timeline.index(("write", sid))
        assert wrote < n and ("sync", None) in timeline[wrote + 1:n], f"step {sid} announced before it was synced"
    commits = 16 * 3  # the opening (user step), the answer, the run's end
    syncs = sum(kind == "sync" for kind, _ in timeline)
    assert syncs < commits, (syncs, commits)


FIRST_RUN = r'''
import sys
from agio_notebook import Agent, ExecutionConfig, FunctionModel
from agio_notebook.scheduling import Executor, batch
from agio_notebook.storage import InMemoryRepository

loaded = []

def reply(messages, tools):
    loaded.append("genai_prices" in sys.modules)
    return "ok"

agent = Agent(model=FunctionModel(reply, name="gpt-4o-mini"), name="a", config=ExecutionConfig(enable_retry=False))
h = batch(agent, ["x"], timeout=5, executor=Executor(InMemoryRepository())).wait(60)
print(h.records()[0].status.value, loaded)
'''


def test_the_price_table_is_loaded_before_the_first_items_clock_starts():
    """In a fresh interpreter the first item's run finds the pricing library already imported."""
    proc = subprocess.run([sys.executable, "-c", FIRST_RUN], capture_output=True, text=True, timeout=120)
    assert proc.stdout.split("\n")[0] == "completed [True]", (proc.stdout, proc.stderr)


def test_group_commit_on_every_backend_keeps_each_commits_outcome_its_own(store_url):
    """Concurrent runs through the writer thread on TinyDB, SQLite and PostgreSQL: every step stored; a
    commit whose sequence is taken fails alone, the others of its group are durable."""
    import asyncio

    from agio_notebook import StepRunner
    from agio_notebook.core import Step, StepRole
    from agio_notebook.storage import open_repository
    from agio_notebook.storage.group_commit import committer_for

    repo = open_repository(store_url)
    try:
        async def reply(messages, tools):
            await asyncio.sleep(0.005)
            return "ok"

        runner = StepRunner(Agent(model=FunctionModel(reply, name="m"), name="a",
                                  config=ExecutionConfig(enable_retry=False)), repository=repo)

        async def runs() -> None:
            await asyncio.gather(*(runner.run(f"g{i}", f"q{i}") for i in range(8)))

        asyncio.run(runs())
        assert all(len(repo.get_steps(f"g{i}")) == 2 for i in range(8))
        assert all(r.status.value == "completed" for r in repo.list_runs())
        taken = Step(session_id="g0", run_id="x", sequence=1, role=StepRole.USER, content="again")
        fresh = Step(session_id="g1", run_id="x", sequence=3, role=StepRole.USER, content="new")
        committer = committer_for(repo)
        outcomes = repo.commit_group([{"steps": [taken]}, {"steps": [fresh]}])
        assert outcomes[0] is not None and "already taken" in str(outcomes[0]) and outcomes[1] is None
        assert [s.content for s in repo.get_steps("g1")][-1] == "new"
        assert committer is not None and committer.submit({"steps": [taken]}).exception(30) is not None
    finally:
        repo.close()
