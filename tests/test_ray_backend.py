"""The Ray backend against a real local Ray: same results as local, the store written by the driver only,
cancel, a killed worker's item retried, and an agent that cannot be pickled refused in one line."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is installed by scripts/setup.sh")

from agio_notebook import Agent, ExecutionConfig, FunctionModel  # noqa: E402
from agio_notebook.core import RunStatus  # noqa: E402
from agio_notebook.scheduling import ExecStatus, SchedulingError, batch  # noqa: E402
from agio_notebook.storage import TinyDBRepository  # noqa: E402
from scheduling_support import wait_until  # noqa: E402


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    r = TinyDBRepository(tmp_path_factory.mktemp("ray") / "store")
    yield r
    ray.shutdown()


def echo_agent(delay: float = 0.05) -> Agent:
    async def reply(messages, tools):
        await asyncio.sleep(delay)
        q = next(m["content"] for m in messages if m["role"] == "user")
        return f"echo: {q} from {os.getpid()}"

    return Agent(model=FunctionModel(reply, name="echo"), name="echo", config=ExecutionConfig(enable_retry=False))


def test_ray_batch_results_come_back_and_only_the_driver_writes_the_store(repo):
    h = batch(echo_agent(), ["a", "b", "c", "d"], name="ray-basic", backend="ray", repository=repo).wait(300)
    res = h.results()
    assert list(res["status"]) == ["completed"] * 4, res[["status", "error"]]
    pids = {int(t.rsplit(" ", 1)[1]) for t in res["final_text"]}
    assert os.getpid() not in pids  # the model ran in Ray workers
    for sid, rid in zip(res["session_id"], res["run_id"]):
        run = repo.get_run(rid)
        assert run.status is RunStatus.COMPLETED and run.session_id == sid
        roles = [s.role.value for s in repo.get_steps(sid)]
        assert roles == ["user", "assistant"]
        types = [e.type.value for e in repo.get_events(rid)]
        assert types[0] == "run_started" and types[-1] == "run_completed"


def test_a_killed_worker_has_its_item_retried(repo, tmp_path):
    flag = tmp_path / "first-attempt-pid"

    async def reply(messages, tools, flag=str(flag)):
        if not Path(flag).exists():
            Path(flag).write_text(str(os.getpid()))
            await asyncio.sleep(60)  # killed here
        return "survived"

    agent = Agent(model=FunctionModel(reply, name="victim"), name="victim", config=ExecutionConfig(enable_retry=False))
    h = batch(agent, ["only"], name="ray-kill", backend="ray", repository=repo, retries=1, retry_delay=0.1)
    wait_until(lambda: flag.exists() and flag.read_text(), 120, "the first attempt to start on a worker")
    os.kill(int(flag.read_text()), signal.SIGKILL)
    h.wait(300)
    rec = h.records()[0]
    assert rec.status is ExecStatus.COMPLETED and rec.result == "survived" and rec.attempts == 2, rec
    first = repo.list_runs("ray-kill-00000")
    assert first and first[-1].status is RunStatus.FAILED and "lost" in first[-1].error
    assert any("lost" in m for m in h.logs()["message"])


def test_cancel_a_ray_batch(repo):
    h = batch(echo_agent(60), ["x", "y"], name="ray-cancel", backend="ray", repository=repo)
    wait_until(lambda: h.metrics()["running"] == 2, 120, "both running")
    wait_until(lambda: all(r.run_id for r in h.records()), 120, "runs started on the workers")
    assert not h.done, [(r.status, r.error) for r in h.records()]
    h.cancel()
    h.wait(120)
    assert h.metrics()["cancelled"] == 2
    for r in h.records():
        assert repo.get_run(r.run_id).status is RunStatus.CANCELLED


def test_an_agent_that_cannot_be_pickled_is_refused(repo):
    lock = threading.Lock()

    def reply(messages, tools):
        with lock:
            return "x"

    agent = Agent(model=FunctionModel(reply), name="locked")
    agent.model.lock = lock  # a lock cannot cross to a worker
    with pytest.raises(SchedulingError, match="cannot be pickled for Ray") as info:
        batch(agent, ["x"], backend="ray", repository=repo)
    assert "\n" not in str(info.value)


class FakeRay:
    """Ray's start as a busy machine sees it: the first ``fail`` starts time out."""

    def __init__(self, fail: int, error: str = "The current node timed out during startup. This could happen"):
        self.fail, self.error, self.inits, self.shutdowns = fail, error, 0, 0
        self.left: list = []

    def init(self, **kwargs):
        import subprocess
        import sys

        import psutil

        self.inits += 1
        if self.inits <= self.fail:
            # what a timed-out start leaves behind: a process ray.shutdown() does not know of
            process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "raylet"])
            self.left.append(process)
            # Ray's own processes have long been running when its start times out; wait until this one
            # runs as itself (a busy machine may not yet have exec'd it, and a bare fork is not Ray's)
            wait_until(lambda: "raylet" in psutil.Process(process.pid).cmdline(), 30, "the fake raylet to start")
            raise Exception(self.error)

    def shutdown(self):
        self.shutdowns += 1


def test_a_local_start_that_times_out_is_tried_again():
    from agio_notebook.scheduling.ray_backend import _start

    fake = FakeRay(fail=2)
    _start(fake, None)
    assert (fake.inits, fake.shutdowns) == (3, 2)
    stopped = [p.poll() is not None for p in fake.left]
    for p in fake.left:
        p.kill()
    assert stopped == [True, True]  # each failed attempt's processes were stopped


def test_a_start_that_keeps_timing_out_is_one_clear_line_and_other_errors_are_not_retried():
    from agio_notebook.scheduling.ray_backend import _start

    fake = FakeRay(fail=5)
    with pytest.raises(SchedulingError, match="Ray did not start in 3 attempts") as info:
        _start(fake, None)
    assert fake.inits == 3 and "\n" not in str(info.value)
    other = FakeRay(fail=1, error="address not found")
    with pytest.raises(Exception, match="address not found"):
        _start(other, "10.0.0.1:6379")
    assert other.inits == 1


CLUSTER = r"""
import sys
from agio_notebook.scheduling.ray_backend import ensure_ray
ray = ensure_ray()  # a local cluster, started as a batch would start it
print(ray.get_runtime_context().gcs_address, flush=True)
sys.stdin.readline()  # the test says when to go; ray.shutdown() then stops the cluster this process started
ray.shutdown()
"""

DRIVER = r"""
import asyncio, json, os, sys
import ray
from agio_notebook import Agent, ExecutionConfig, FunctionModel
from agio_notebook.scheduling import batch
from agio_notebook.storage import TinyDBRepository

async def reply(messages, tools):
    return f"from {os.getpid()}"

agent = Agent(model=FunctionModel(reply, name="remote"), name="remote", config=ExecutionConfig(enable_retry=False))
h = batch(agent, ["a", "b"], name="on-cluster", backend="ray", address=sys.argv[1],
          repository=TinyDBRepository(sys.argv[2])).wait(300)
print(json.dumps({"gcs": ray.get_runtime_context().gcs_address, "status": list(h.results()["status"]),
                  "driver": os.getpid(), "texts": list(h.results()["final_text"])}))
"""


def test_a_batch_joins_an_existing_cluster_by_address(tmp_path):
    import json
    import subprocess
    import sys

    cluster = subprocess.Popen([sys.executable, "-c", CLUSTER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    try:
        address = cluster.stdout.readline().strip()
        assert address, "the cluster did not start"
        # the local cluster enables Ray's token authentication; a driver joining it must use it too
        env = {**os.environ, "RAY_AUTH_MODE": "token"}
        out = subprocess.run([sys.executable, "-c", DRIVER, address, str(tmp_path / "store")], capture_output=True,
                             text=True, timeout=600, env=env)
        assert out.returncode == 0, out.stderr[-2000:]
        result = json.loads(out.stdout.strip().splitlines()[-1])
        assert result["gcs"] == address and result["status"] == ["completed", "completed"]
        assert all(t.startswith("from ") and int(t.split()[1]) != result["driver"] for t in result["texts"])
        runs = TinyDBRepository(tmp_path / "store").list_runs()
        assert len(runs) == 2 and {r.status for r in runs} == {RunStatus.COMPLETED}  # the driver wrote them
    finally:
        cluster.stdin.write("\n")
        cluster.stdin.flush()
        try:
            cluster.wait(60)
        except subprocess.TimeoutExpired:
            cluster.kill()


def planner_agent(inner_reply) -> Agent:
    """An agent that asks its researcher (an agent called as a tool) once, then answers with its words."""
    researcher = Agent(model=FunctionModel(inner_reply, name="inner"), name="researcher",
                       config=ExecutionConfig(enable_retry=False))

    def outer(messages, tools):
        from agio_notebook import Reply

        if messages[-1]["role"] == "tool":
            return f"planned with: {messages[-1]['content']}"
        return Reply.call("researcher", query=f"facts about {messages[-1]['content']}")

    return Agent(model=FunctionModel(outer, name="outer"), name="planner", tools=[researcher],
                 config=ExecutionConfig(enable_retry=False))


def _shape(repo, run_id: str) -> list[tuple]:
    """A run tree as the store holds it: each run's agent, depth, parent links, steps and events."""
    from agio_notebook.core import run_tree
    from agio_notebook.storage import iter_events

    rows = []
    for d in run_tree(repo.iter_run_dicts(), run_id):
        session = repo.get_session(d["session_id"])
        steps = [(s.role.value, s.content) for s in repo.get_steps(d["session_id"]) if s.run_id == d["id"]]
        rows.append((d["agent_name"], d.get("depth", 0), d.get("parent_run_id") is not None,
                     d.get("parent_tool_call_id") is not None, d["status"], steps,
                     [e.type.value for e in iter_events(repo, d["id"])],
                     sorted(session.metadata), session.title is not None))
    return rows


def test_a_ray_batch_of_an_agent_using_agents_as_tools_records_nested_runs_as_in_the_notebook(repo):
    from agio_notebook import StepRunner

    agent = planner_agent(lambda messages, tools: f"the tides of {messages[-1]['content'].rsplit(' ', 1)[-1]}")
    h = batch(agent, ["Lisbon"], name="ray-nested", backend="ray", repository=repo).wait(300)
    res = h.results()
    assert list(res["final_text"]) == ["planned with: the tides of Lisbon"]
    on_ray = _shape(repo, res["run_id"][0])
    local = StepRunner(agent, repository=repo).run_sync(None, "Lisbon")
    assert on_ray == _shape(repo, local.run_id)  # the same tree, links, steps, events and session records
    (outer, inner) = on_ray
    assert inner[1:4] == (1, True, True) and inner[4] == "completed"
    assert inner[6][0] == "run_started" and inner[6][-1] == "run_completed"
    tool_step = next(s for s in repo.get_steps(res["session_id"][0]) if s.role.value == "tool")
    nested = repo.get_run(tool_step.extra["nested_run"]["run_id"])
    assert nested.parent_run_id == res["run_id"][0] and nested.root_run_id == res["run_id"][0]


def test_a_killed_workers_nested_runs_show_interrupted_and_resume(repo, tmp_path):
    from agio_notebook import StepRunner

    flag = tmp_path / "inner-pid"

    async def inner(messages, tools, flag=str(flag)):
        if not Path(flag).exists():
            Path(flag).write_text(str(os.getpid()))
            await asyncio.sleep(60)  # killed here, inside the nested run
        return "found it"

    agent = planner_agent(inner)
    earlier = {r.id for r in repo.list_runs()}  # the module's store holds other tests' nested runs

    def this_batchs_nested_runs() -> list:
        return [r for r in repo.list_runs() if r.agent_name == "researcher" and r.parent_run_id and r.id not in earlier]

    h = batch(agent, ["Porto"], name="ray-nested-kill", backend="ray", repository=repo, retries=1, retry_delay=0.1)
    wait_until(lambda: flag.exists() and flag.read_text(), 120, "the nested run to start on a worker")

    def nested_step_stored() -> bool:  # the worker's events reach the driver's store a moment after the flag
        return any(repo.get_steps(r.session_id) for r in this_batchs_nested_runs())

    wait_until(nested_step_stored, 120, "the nested run's first step to reach the store")
    os.kill(int(flag.read_text()), signal.SIGKILL)
    h.wait(300)
    assert h.records()[0].status is ExecStatus.COMPLETED and h.results()["final_text"][0] == "planned with: found it"
    nested = this_batchs_nested_runs()
    lost = [r for r in nested if r.status is RunStatus.INTERRUPTED]
    # the driver says the worker was lost; a read of the store that finds the dead worker's lease first says so
    assert len(lost) == 1 and ("lost" in lost[0].error or "stopped before the run finished" in lost[0].error), \
        [(r.status, r.error) for r in nested]
    assert repo.get_run(lost[0].parent_run_id).status is RunStatus.FAILED
    # the interrupted nested run resumes like any interrupted run: its session answered from where it stopped
    researcher = agent.registry.get("researcher").function.agent
    result = asyncio.run(StepRunner(researcher, repository=repo).resume(lost[0].session_id))
    assert result.status is RunStatus.COMPLETED and result.final_text == "found it"
    assert [s.role.value for s in repo.get_steps(lost[0].session_id)] == ["user", "assistant"]
