"""The executor without a kernel: priorities, fairness, caps, rate limits, retries, timeouts, budgets,
cancel, records in the store, resume, and each bad input's one-line error."""

from __future__ import annotations

import asyncio
import threading
import time

import pandas as pd
import pytest

import agio_notebook as agio
from agio_notebook import Agent, ExecutionConfig, FunctionModel, ScriptedModel, frames
from agio_notebook.core import InvalidOperationError, RunStatus, StoreError
from agio_notebook.models.scripted import call
from agio_notebook.scheduling import (ExecStatus, ExecutionRequest, ExecutionStore, Executor, RateLimit,
                                      SchedulingError, batch, resume_batch)
from agio_notebook.storage import TinyDBRepository
from agio_notebook.storage.locking import FileLock
from agio_notebook.storage.layout import session_file_name
from agio_notebook.tools import tool
from scheduling_support import Probe, ex, repo, slow_agent, wait_until  # noqa: F401 - ex, repo: fixtures


def test_batch_runs_each_input_in_its_own_stored_session(repo, ex):
    probe = Probe()
    h = batch(slow_agent(probe, 0.01), ["a", "b", "c"], name="abc", executor=ex).wait(60)
    res = h.results()
    assert list(res["input"]) == ["a", "b", "c"]
    assert list(res["final_text"]) == ["echo: a", "echo: b", "echo: c"]
    assert list(res["status"]) == ["completed"] * 3
    assert res["session_id"].nunique() == 3
    for sid, rid in zip(res["session_id"], res["run_id"]):
        assert repo.get_run(rid).session_id == sid
        assert repo.get_run(rid).status is RunStatus.COMPLETED
    assert (res["total_tokens"] > 0).all() and (res["latency_ms"] > 0).all()
    # joinable with the steps and tool_calls frames
    steps = frames.steps(repository=repo)
    joined = res.merge(steps, on="run_id", suffixes=("", "_step"))
    assert set(joined["input"]) == {"a", "b", "c"} and len(joined) == 6  # user + assistant per item
    m = h.metrics()
    assert (m["total"], m["completed"], m["failures"], m["error_rate"]) == (3, 3, 0, 0.0)
    assert m["avg_ms"] > 0 and m["tokens"] == res["total_tokens"].sum() and m["cost"] is None


def test_dataframe_template_fills_columns(ex):
    probe = Probe()
    df = pd.DataFrame({"city": ["Oslo", "Lima"], "n": [1, 2]})
    h = batch(slow_agent(probe, 0.0), df, prompt="{n}. weather in {city}?", executor=ex).wait(60)
    res = h.results()
    assert list(res.columns[:2]) == ["city", "n"]
    assert list(res["final_text"]) == ["echo: 1. weather in Oslo?", "echo: 2. weather in Lima?"]


def test_records_are_stored_and_listed_with_filters(repo, ex):
    probe = Probe()
    t0 = time.time()
    batch(slow_agent(probe, 0.0, name="alpha"), ["x", "y"], name="b1", executor=ex).wait(60)
    batch(slow_agent(probe, 0.0, name="beta", fail_first=1, retryable=False), ["z"], name="b2", executor=ex).wait(60)
    fresh = ExecutionStore(TinyDBRepository(repo.root))  # what another kernel reads from disk
    stored = {r.index: r for r in fresh.records("b1")}
    assert {r.status for r in stored.values()} == {ExecStatus.COMPLETED}
    assert stored[0].request["query"] == "x" and stored[0].run_id and stored[0].session_id
    assert [d["message"] for d in sorted(fresh.logs("b2"), key=lambda d: d["n"])][0].startswith("queued")
    frame = agio.executions(repository=repo)
    assert len(frame) >= 3
    assert set(frame[frame.batch == "b2"]["status"]) == {"failed"}
    other = Executor(repo)
    assert {r.batch for r in other.list_executions(status="completed")} == {"b1"}
    assert [r.batch for r in other.list_executions(agent="beta")] == ["b2"]
    assert other.list_executions(since=time.time() + 10) == []
    assert len(other.list_executions(since=t0, batch="b1")) == 2
    assert str(frame["status"].dtype) == "category" and str(frame["queued_at"].dtype).startswith("datetime64")


def gated_batch(ex: Executor, gate: threading.Event):
    """A one-item batch that holds the executor's only worker until ``gate`` is set."""

    async def blocked(messages, tools):
        while not gate.is_set():
            await asyncio.sleep(0.01)
        return "unblocked"

    return batch(Agent(model=FunctionModel(blocked), name="blocker"), ["hold"], executor=ex)


def test_high_priority_batch_submitted_later_starts_before_queued_low_items(repo):
    ex = Executor(repo, max_concurrency=1)
    gate = threading.Event()
    blocker = gated_batch(ex, gate)
    probe = Probe()
    low = batch(slow_agent(probe, 0.01), [f"low{i}" for i in range(6)], name="low", executor=ex, priority=0)
    high = batch(slow_agent(probe, 0.01), ["high0", "high1"], name="high", executor=ex, priority=10)
    gate.set()
    blocker.wait(60), low.wait(60), high.wait(60)
    order = [q for _, q in sorted(probe.starts)]
    assert order[:2] == ["high0", "high1"] and order[2:] == [f"low{i}" for i in range(6)], order


def test_equal_priority_batches_share_workers_round_robin(repo):
    ex = Executor(repo, max_concurrency=1)
    gate = threading.Event()
    blocker = gated_batch(ex, gate)  # holds the only worker until both batches are queued
    probe = Probe()
    a = batch(slow_agent(probe, 0.01), [f"a{i}" for i in range(4)], name="fa", executor=ex)
    b = batch(slow_agent(probe, 0.01), [f"b{i}" for i in range(4)], name="fb", executor=ex)
    gate.set()
    blocker.wait(60), a.wait(60), b.wait(60)
    order = [q[0] for _, q in sorted(probe.starts)]
    assert order == list("abababab"), order  # not a drained first


def test_concurrency_cap_is_observed(ex):
    probe = Probe()
    h = batch(slow_agent(probe, 0.05), [f"q{i}" for i in range(12)], concurrency=3, executor=ex).wait(60)
    assert h.metrics()["completed"] == 12
    assert probe.peak == 3
    assert ex.get_queue_status()["peak_concurrency"] >= 3


def test_rate_limit_is_shared_by_batches_on_one_endpoint(ex):
    probe = Probe()
    limit = RateLimit(rpm=4, endpoint="shared-endpoint", period=1.0)
    t0 = time.monotonic()
    h1 = batch(slow_agent(probe, 0.0, name="one"), [f"x{i}" for i in range(4)], rate_limit=limit,
               concurrency=8, executor=ex)
    h2 = batch(slow_agent(probe, 0.0, name="two"), [f"y{i}" for i in range(4)], rate_limit=limit,
               concurrency=8, executor=ex)
    h1.wait(60), h2.wait(60)
    starts = sorted(t for t, _ in probe.starts)
    assert len(starts) == 8
    # 8 calls through one 4-per-second window: the 5th waits for the first to age out
    assert starts[4] - starts[0] >= 0.95
    for i in range(len(starts) - 4):
        assert starts[i + 4] - starts[i] >= 0.95
    assert time.monotonic() - t0 >= 0.95


def test_tokens_per_minute_limit_delays_calls(ex):
    probe = Probe()
    # each call reports ~10 tokens; 15 tokens per 1 s window lets one call through per window
    limit = RateLimit(tpm=15, endpoint="tpm-endpoint", period=1.0)
    batch(slow_agent(probe, 0.0), ["p", "q", "r"], rate_limit=limit, executor=ex).wait(60)
    starts = sorted(t for t, _ in probe.starts)
    assert starts[2] - starts[0] >= 0.95


def test_retries_back_off_exponentially_for_retryable_errors_only(ex):
    probe = Probe()
    h = batch(slow_agent(probe, 0.0, fail_first=2), ["flaky"], retries=3, retry_delay=0.2, executor=ex).wait(60)
    rec = h.records()[0]
    assert rec.status is ExecStatus.COMPLETED and rec.attempts == 3 and probe.calls["flaky"] == 3
    t = sorted(t for t, _ in probe.starts)
    assert t[1] - t[0] >= 0.2 and t[2] - t[1] >= 0.4  # 0.2 s, then 0.4 s
    messages = list(h.logs()["message"])
    assert any("retrying in 0.2s" in m for m in messages) and any("retrying in 0.4s" in m for m in messages)
    # each attempt ran in its own session, the failed ones kept in the store
    assert rec.session_id.endswith("-a3")

    probe2 = Probe()
    h2 = batch(slow_agent(probe2, 0.0, fail_first=5, retryable=False), ["bad"], retries=3, retry_delay=0.01,
               executor=ex).wait(60)
    rec2 = h2.records()[0]
    assert rec2.status is ExecStatus.FAILED and rec2.attempts == 1 and probe2.calls["bad"] == 1
    assert "overloaded" in rec2.error


def test_timeout_per_execution(repo, ex):
    probe = Probe()
    h = batch(slow_agent(probe, 30.0), ["slow"], timeout=0.3, executor=ex).wait(60)
    rec = h.records()[0]
    assert rec.status is ExecStatus.TIMED_OUT and "0.3" in rec.error
    assert repo.get_run(rec.run_id).status is RunStatus.CANCELLED
    assert h.metrics()["failures"] == 1


def test_token_budget_per_execution_ends_the_run_before_the_call_that_would_exceed_it(repo, ex):
    @tool
    def ping() -> str:
        """Reply pong."""
        return "pong"

    agent = Agent(model=ScriptedModel([call("ping")], loop=True), tools=[ping], name="looper",
                  config=ExecutionConfig(enable_retry=False, max_steps=50))
    h = batch(agent, ["go"], max_tokens=60, executor=ex).wait(60)
    rec = h.records()[0]
    run = repo.get_run(rec.run_id)
    assert run.status is RunStatus.BUDGET_EXCEEDED
    assert run.metrics.total_tokens <= 60 and run.metrics.model_calls >= 2
    assert rec.status is ExecStatus.FAILED and "max_tokens=60" in rec.error


def test_token_budget_per_batch_stops_the_rest(ex):
    probe = Probe()
    h = batch(slow_agent(probe, 0.0), [f"i{i}" for i in range(10)], concurrency=1, batch_max_tokens=25,
              executor=ex).wait(60)
    m = h.metrics()
    assert m["completed"] < 10 and m["cancelled"] == 10 - m["completed"]
    assert any("token budget" in e for _, e in m["last_errors"])
    assert m["tokens"] <= 25 + 15  # at most one run in flight overshoots


def test_cost_budget_per_batch_stops_the_rest(repo, ex):
    from agio_notebook import Reply
    from agio_notebook.models.base import Usage
    from agio_notebook.models.pricing import PricingError, set_prices

    set_prices({"dear": {"prompt": 1.0, "completion": 1.0}})
    try:
        dear = Agent(model=ScriptedModel([Reply("ok", usage=Usage(100_000, 0, 100_000))], name="dear", loop=True))
        # $0.10 a run; $0.25 to spend: runs 1-3 start (the 3rd with the $0.05 left as its own max_cost)
        h = batch(dear, [f"i{i}" for i in range(6)], concurrency=1, batch_max_cost=0.25, executor=ex).wait(60)
        res = h.results()
        assert list(res["status"]) == ["completed"] * 3 + ["cancelled"] * 3
        assert res["cost"].iloc[:3].sum() == pytest.approx(0.3) and res["run_id"].iloc[3:].isna().all()
        assert res["error"].iloc[3] == "the batch's cost budget ($0.25) is spent"
        assert h.metrics()["cost"] == pytest.approx(0.3)
        with pytest.raises(PricingError, match="no price known for model 'cheap'"):
            batch(Agent(model=ScriptedModel(["x"], name="cheap")), ["a"], batch_max_cost=1.0, executor=ex)
        with pytest.raises(SchedulingError, match="batch_max_cost must be a positive amount"):
            batch(dear, ["a"], batch_max_cost=0, executor=ex)
    finally:
        set_prices({}, replace=True)


def test_a_resumed_batch_spends_only_what_is_left_of_its_token_budget(repo):
    """The budget is the batch's across all its starts: a resume gets what is left, and the items the budget
    cancelled stay cancelled (a second resume runs nothing and spends nothing)."""
    probe = Probe()
    agent = slow_agent(probe, 0.3)
    budget = 60
    h = batch(agent, [f"item{i}" for i in range(12)], name="capped", concurrency=1, batch_max_tokens=budget,
              executor=Executor(repo))
    wait_until(lambda: h.metrics()["completed"] >= 2, what="two done")
    h.cancel()
    h.wait(30)
    first = h.metrics()
    per_item = first["tokens"] // first["completed"]
    assert per_item > 0 and first["tokens"] == per_item * first["completed"] < budget

    h2 = resume_batch("capped", agent, executor=Executor(repo)).wait(60)
    second = h2.metrics()
    assert budget - per_item < second["tokens"] <= budget  # the earlier start's tokens count against the budget
    assert second["tokens"] == per_item * second["completed"]
    assert second["completed"] + second["cancelled"] == 12
    cut = [r for r in h2.records() if r.status is ExecStatus.CANCELLED]
    assert {r.error.split(":")[0] for r in cut} == {"the batch's token budget (60) is spent"}
    calls, attempts = dict(probe.calls), {r.index: r.attempts for r in h2.records()}

    h3 = resume_batch("capped", agent, executor=Executor(repo)).wait(30)
    third = h3.metrics()
    assert (third["tokens"], third["completed"], third["cancelled"]) == (
        second["tokens"], second["completed"], second["cancelled"])
    assert dict(probe.calls) == calls and {r.index: r.attempts for r in h3.records()} == attempts
    assert [r.error for r in h3.records()] == [r.error for r in h2.records()]


def test_a_resumed_batch_whose_cost_budget_is_spent_runs_nothing_more(repo):
    """Cost counts across a resume too: with the budget spent, an item cancelled by hand is cancelled for the
    budget instead of run, and the batch's cost stays what it was."""
    from agio_notebook import Reply
    from agio_notebook.models.base import Usage
    from agio_notebook.models.pricing import set_prices

    gate = threading.Event()

    async def dear(messages, tools):
        while not gate.is_set():
            await asyncio.sleep(0.01)
        return Reply("ok", usage=Usage(100_000, 0, 100_000))  # $0.10 a run

    set_prices({"dear": {"prompt": 1.0, "completion": 1.0}})
    try:
        agent = Agent(model=FunctionModel(dear, name="dear"), name="dear", config=ExecutionConfig(enable_retry=False))
        ex = Executor(repo)
        h = batch(agent, [f"i{i}" for i in range(4)], name="priced", concurrency=2, batch_max_cost=0.25, executor=ex)
        wait_until(lambda: h.metrics()["concurrency"] == 2, what="two running")
        assert ex.cancel_execution(h.records()[3].id) is True  # cancelled by hand while queued
        gate.set()
        h.wait(30)
        assert [(r.status.value, r.error) for r in h.records()] == [("completed", None)] * 3 + [("cancelled", "cancelled")]
        assert h.metrics()["cost"] == pytest.approx(0.3)

        again = resume_batch("priced", agent, executor=Executor(repo)).wait(30)
        assert again.done and again.metrics()["cost"] == pytest.approx(0.3)
        assert [(r.status.value, r.error, r.attempts, r.run_id) for r in again.records()] == [
            (r.status.value, r.error, r.attempts, r.run_id) for r in h.records()[:3]] + [
            ("cancelled", "the batch's cost budget ($0.25) is spent", 0, None)]
    finally:
        set_prices({}, replace=True)


def test_cancel_one_item_and_the_batch_and_not_a_finished_batch(repo, ex):
    probe = Probe()
    h = batch(slow_agent(probe, 30.0), [f"c{i}" for i in range(5)], concurrency=2, executor=ex)
    wait_until(lambda: probe.in_flight == 2, what="two running")
    running, queued = h.records()[0], h.records()[4]
    assert ex.cancel_execution(queued.id) is True
    assert ex.cancel_execution(running.id) is True
    wait_until(lambda: h.records()[0].status.is_terminal, what="running item cancelled")
    assert h.records()[4].status is ExecStatus.CANCELLED and h.records()[0].status is ExecStatus.CANCELLED
    assert repo.get_run(h.records()[0].run_id).status is RunStatus.CANCELLED
    n = h.cancel()
    assert n == 3
    h.wait(30)
    assert h.done and h.metrics()["cancelled"] == 5
    with pytest.raises(InvalidOperationError, match="already finished"):
        h.cancel()
    assert ex.cancel_execution(running.id) is False


def test_an_item_whose_agent_raises_cancelled_error_itself_fails_and_the_batch_ends(repo):
    """A CancelledError nothing sent to the item (a tool awaited a job cancelled elsewhere, a model raised it)
    is the item's failure, not the executor's shutdown: its slot is freed and the batch ends."""
    from agio_notebook import Reply

    @tool
    async def flaky() -> str:
        """Awaits a shared job that something else cancels."""
        job = asyncio.ensure_future(asyncio.sleep(10))
        asyncio.get_running_loop().call_soon(job.cancel)
        return await job

    def uses_tool(messages, tools):
        return Reply.call("flaky") if messages[-1]["role"] == "user" else "done"

    async def raises(messages, tools):
        raise asyncio.CancelledError()

    ex = Executor(repo, max_concurrency=1)
    for agent in (Agent(model=FunctionModel(uses_tool, name="m"), tools=[flaky], name="t",
                        config=ExecutionConfig(enable_retry=False)),
                  Agent(model=FunctionModel(raises, name="m"), name="r", config=ExecutionConfig(enable_retry=False))):
        h = batch(agent, ["x", "y", "z"], concurrency=1, retries=2, executor=ex).wait(30)
        assert h.done and h.status == "finished"
        m = h.metrics()
        assert (m["total"], m["done"], m["failed"], m["cancelled"], m["concurrency"]) == (3, 3, 3, 0, 0)
        assert [r.attempts for r in h.records()] == [1, 1, 1]  # not retried: nothing says a second try helps
        assert {r.error for r in h.records()} == {
            "the run raised CancelledError though nothing cancelled the item (it awaited a task that was "
            "cancelled elsewhere)"}
        assert ex.get_queue_status()["running"] == 0
    # the executor's one slot was given back: another batch runs on it
    after = batch(slow_agent(Probe(), 0.0), ["ok"], executor=ex).wait(30)
    assert after.metrics()["completed"] == 1


def test_resume_runs_only_unfinished_items(repo):
    ex = Executor(repo)
    probe = Probe()
    agent = slow_agent(probe, 0.2)
    h = batch(agent, [f"r{i}" for i in range(8)], name="resumable", concurrency=2, executor=ex)
    wait_until(lambda: h.metrics()["completed"] >= 3, what="three done")
    h.cancel()
    h.wait(30)
    completed = {r.request["query"] for r in h.records() if r.status is ExecStatus.COMPLETED}
    assert 3 <= len(completed) < 8
    before = dict(probe.calls)
    h2 = resume_batch("resumable", agent, executor=Executor(repo)).wait(60)
    assert h2.metrics()["completed"] == 8
    for q in completed:
        assert probe.calls[q] == before[q] == 1  # nothing completed ran twice
    # calling batch() again with the same name and inputs is the same as resuming (nothing left)
    h3 = batch(agent, [f"r{i}" for i in range(8)], name="resumable", executor=Executor(repo)).wait(30)
    assert h3.metrics()["completed"] == 8
    attempts = dict(zip(h2.results()["input"], h2.results()["attempts"]))
    for q, n in probe.calls.items():  # an attempt cancelled before its model call made no call
        assert 1 <= n <= attempts[q], (q, n, attempts[q])


def test_a_batch_running_in_this_kernel_is_not_started_again_by_resume_or_jobs(repo):
    probe = Probe()
    agent = slow_agent(probe, 0.2)
    inputs = [f"t{i}" for i in range(6)]
    h = batch(agent, inputs, name="twice", concurrency=2, executor=Executor(repo))
    wait_until(lambda: h.metrics()["completed"] >= 2, what="two done")
    h.cancel()
    h.wait(30)
    ex = Executor(repo)
    unfinished = {r.request["query"] for r in h.records() if r.status is not ExecStatus.COMPLETED}
    before = dict(probe.calls)
    first = resume_batch("twice", agent, executor=ex)
    line = "batch 'twice' is already running in this kernel; wait for it or cancel it"
    for start in (lambda: resume_batch("twice", agent, executor=ex),
                  lambda: batch(agent, inputs, name="twice", executor=ex),
                  lambda: agio.scheduling.run_jobs([(agent, None, "t0")], name="twice", executor=ex)):
        with pytest.raises(SchedulingError) as refused:
            start()
        assert str(refused.value) == line
    first.wait(60)
    assert first.metrics()["completed"] == 6 and first.metrics()["total"] == 6
    assert len(ex.store.records("twice")) == 6
    # each unfinished item's model was asked once more, in one new session: none ran twice in the resume
    assert unfinished and {q: probe.calls[q] - before.get(q, 0) for q in inputs} == {
        q: 1 if q in unfinished else 0 for q in inputs}
    for r in first.records():
        assert len(repo.list_runs(r.session_id)) == 1
    # once it ended, the name is free again
    assert resume_batch("twice", agent, executor=ex).wait(30).metrics()["completed"] == 6


def test_single_tool_execution_and_seed_calls(ex):
    @tool
    def double(x: int) -> int:
        """Twice x."""
        return 2 * x

    rec = ex.execute_tool(double, {"x": 21}, wait=30)
    assert rec.status is ExecStatus.COMPLETED and rec.result == "42"
    eid = ex.execute_tool_async(double, {"x": "nope"})
    assert ex.wait_for(eid, 30).status is ExecStatus.FAILED
    assert ex.get_execution_status(eid).error
    assert ex.get_execution_result(rec.id) == "42"
    assert ex.scheduler.get_task_status(rec.id) == "completed"
    assert set(ex.pool.get_pool_status()) == {"workers", "busy", "idle", "peak_busy"}
    q = ex.scheduler.get_queue_status()
    assert q["queued"] == 0 and q["max_concurrency"] == 64
    probe = Probe()
    sid = ex.scheduler.schedule_task(ExecutionRequest(agent=slow_agent(probe, 0.0), query="alone"))
    assert ex.wait_for(sid, 30).result == "echo: alone"
    assert [r.id for r in ex.list_executions(batch="single") if r.id == sid] == [sid]
    m = ex.metrics()  # the seed's figures over everything this executor ran
    assert m["total"] == 3 and m["completed"] == 2 and m["failed"] == 1 and m["error_rate"] == pytest.approx(1 / 3)


@pytest.mark.parametrize("kwargs,message", [
    ({"inputs": []}, "input list is empty"),
    ({"inputs": pd.DataFrame({"a": [1]}), "prompt": "{b}"}, "column 'b'"),
    ({"inputs": ["x"], "rate_limit": {"rpm": 0}}, "rpm=0"),
    ({"inputs": "abc"}, "list of strings or a DataFrame"),
    ({"inputs": ["x"], "concurrency": 0}, "concurrency must be at least 1"),
    ({"inputs": ["x"], "address": "127.0.0.1:6379"}, "use it with backend='ray'"),
    ({"inputs": ["x"], "backend": "dask"}, "unknown backend 'dask'"),
    ({"inputs": pd.DataFrame({"score": [1.5, None]}), "prompt": "Score {score:.1f}"}, "cannot be filled"),
    ({"inputs": pd.DataFrame({"text": ["x"]}), "prompt": "{text.upper}{text.nope}"}, "cannot be filled"),
])
def test_bad_input_gets_one_clear_line(ex, kwargs, message):
    probe = Probe()
    with pytest.raises(SchedulingError, match=message) as info:
        batch(slow_agent(probe), executor=ex, **kwargs)
    assert "\n" not in str(info.value)
    assert probe.calls == {}


def test_a_dataframe_of_one_unnamed_column_is_its_own_prompt(ex):
    probe = Probe()
    handle = batch(slow_agent(probe, 0.0), pd.DataFrame(["first", "second"]), executor=ex).wait(30)
    assert sorted(handle.results().final_text) == ["echo: first", "echo: second"]


def test_duplicate_name_with_different_inputs_is_refused_and_loses_nothing(ex):
    probe = Probe()
    batch(slow_agent(probe, 0.0), ["one", "two"], name="dup", executor=ex).wait(30)
    with pytest.raises(SchedulingError, match="already exists with different inputs"):
        batch(slow_agent(probe, 0.0), ["three"], name="dup", executor=ex)
    assert {r.request["query"] for r in ex.store.records("dup")} == {"one", "two"}
    with pytest.raises(SchedulingError, match="no batch named 'nope'"):
        resume_batch("nope", executor=ex)


def test_a_locked_store_gets_one_clear_line(repo, ex):
    probe = Probe()
    path = repo.root / "executions" / session_file_name("locked")
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(path, 5.0, on_file=True):
        with pytest.raises(StoreError, match="locked") as info:
            batch(slow_agent(probe), ["x"], name="locked", executor=ex)
    assert "\n" not in str(info.value) and probe.calls == {}


def test_execution_config_max_tokens_ends_a_plain_run_with_budget_exceeded(repo):
    @tool
    def ping() -> str:
        """Reply pong."""
        return "pong"

    agent = Agent(model=ScriptedModel([call("ping")], loop=True), tools=[ping],
                  config=ExecutionConfig(max_tokens=45, max_steps=50))
    result = agio.StepRunner(agent, repository=repo).run_sync(None, "go")
    assert result.status is RunStatus.BUDGET_EXCEEDED and result.metrics.total_tokens <= 45
    assert result.events[-1].type.value == "run_budget_exceeded"
    assert repo.get_run(result.run_id).status is RunStatus.BUDGET_EXCEEDED
    unlimited = agio.StepRunner(agent.with_model(ScriptedModel([call("ping")] * 3 + ["done"])),
                                config=ExecutionConfig(max_steps=50), repository=repo).run_sync(None, "go")
    assert unlimited.status is RunStatus.COMPLETED and unlimited.metrics.total_tokens > 45
    with pytest.raises(ValueError, match="max_tokens"):
        ExecutionConfig(max_tokens=0)


def test_run_jobs_continues_given_sessions_and_forks(repo, ex):
    probe = Probe()
    agent = slow_agent(probe, 0.0)
    first = agio.StepRunner(agent, repository=repo).run_sync(None, "hello")
    fork = agio.fork_session(first.session_id, 2, repo)
    h = agio.scheduling.run_jobs([(agent, first.session_id, "again"), (agent, fork, "in the fork"),
                                  (agent, None, "fresh")], executor=ex).wait(60)
    res = h.results()
    assert list(res["status"]) == ["completed"] * 3
    assert list(res["session_id"][:2]) == [first.session_id, fork]
    assert [s.role.value for s in repo.get_steps(first.session_id)] == ["user", "assistant"] * 2
    assert res["session_id"][2] not in (first.session_id, fork)
    with pytest.raises(SchedulingError, match="empty"):
        agio.scheduling.run_jobs([], executor=ex)


def test_records_live_in_the_repositorys_own_journals_on_sqlite_too(tmp_path):
    from agio_notebook.storage import open_repository

    repo = open_repository(f"sqlite:///{tmp_path / 'store.db'}")
    probe = Probe()
    ex = Executor(repo)
    h = batch(slow_agent(probe, 0.0), ["s1", "s2"], name="on-sqlite", executor=ex).wait(60)
    assert h.metrics()["completed"] == 2
    fresh = ExecutionStore(repo)
    assert {r.status for r in fresh.records("on-sqlite")} == {ExecStatus.COMPLETED}
    assert "on-sqlite" in fresh.batch_names()
    assert repo.get_run(h.records()[0].run_id).status is RunStatus.COMPLETED
    again = resume_batch("on-sqlite", slow_agent(probe, 0.0), executor=Executor(repo)).wait(60)
    assert again.metrics()["completed"] == 2 and sum(probe.calls.values()) == 2  # nothing ran twice


def test_cost_is_summed_when_the_pricing_table_knows_the_model(ex, monkeypatch):
    from agio_notebook.scheduling import executor as executor_module

    seen = []

    def price(model, prompt, completion):
        seen.append((model, prompt, completion))
        return 0.5 if model == "slow-model" else None

    monkeypatch.setattr(executor_module, "_PRICE", price)
    probe = Probe()
    h = batch(slow_agent(probe, 0.0), ["p", "q"], executor=ex).wait(60)
    res = h.results()
    assert list(res["cost"]) == [0.5, 0.5] and h.metrics()["cost"] == 1.0
    assert seen and all(m == "slow-model" and p > 0 for m, p, _ in seen)
    monkeypatch.setattr(executor_module, "_PRICE", None)
    h2 = batch(slow_agent(probe, 0.0), ["r"], executor=ex).wait(60)
    assert h2.results()["cost"].isna().all() and h2.metrics()["cost"] is None  # unknown, not zero


def test_a_resumed_batch_counts_its_items_and_time_across_the_resume(repo):
    """Throughput and elapsed time span the resume: the items finished before it and the time spent on
    them count, the time the batch sat stopped does not (no 300 items/s just after a resume, no
    0.0001 s for a finished resumed batch)."""
    probe = Probe()
    agent = slow_agent(probe, 0.2)
    fastest = 2 / 0.2  # two at a time, 0.2 s each: no honest figure is above this
    h = batch(agent, [f"m{i}" for i in range(8)], name="metered", concurrency=2, executor=Executor(repo))
    wait_until(lambda: h.metrics()["completed"] >= 3, what="three done")
    h.cancel()
    h.wait(30)
    before = h.metrics()
    finished = [r for r in h.records() if r.status is ExecStatus.COMPLETED]

    gate = threading.Event()  # the resumed items wait here, so nothing new finishes before `early` is read

    async def gated(messages, tools):
        while not gate.is_set():
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        return "echo"

    resumed = Agent(model=FunctionModel(gated, name="slow-model"), name="slow",
                    config=ExecutionConfig(enable_retry=False))
    h2 = resume_batch("metered", resumed, executor=Executor(repo))
    early = h2.metrics()  # just after the resume: nothing new has finished yet
    gate.set()
    assert early["completed"] == len(finished) and early["total"] == 8
    assert early["elapsed_s"] >= sum(r.duration_ms for r in finished) / 1000 / 2 * 0.9
    assert early["throughput_per_s"] <= fastest * 1.2, early
    if early["eta_s"] is not None:
        assert early["eta_s"] >= (8 - early["done"]) / fastest * 0.8, early
    h2.wait(60)
    end = h2.metrics()
    assert end["completed"] == 8 and end["done"] == 8
    assert 8 * 0.2 / 2 * 0.9 <= end["elapsed_s"], end
    assert end["throughput_per_s"] == pytest.approx(8 / end["elapsed_s"]) and end["throughput_per_s"] <= fastest * 1.2
    assert end["elapsed_s"] >= before["elapsed_s"] * 0.9  # the first part's time is still in it

    h3 = resume_batch("metered", resumed, executor=Executor(repo)).wait(30)  # nothing left: finished at once
    last = h3.metrics()
    assert last["done"] == 8 and 8 * 0.2 / 2 * 0.9 <= last["elapsed_s"], last
    assert last["throughput_per_s"] <= fastest * 1.2, last


def test_an_item_cancelled_after_its_run_stored_its_answer_is_completed(repo):
    """Cancel lands between the run's durable end and the item's record: the answer is kept and the item is
    completed, in this kernel's figures as in a resume's (which reads the runs)."""
    from agio_notebook.execution.hooks import add_default_hook, remove_default_hook

    ended, release = threading.Event(), threading.Event()

    class Linger(agio.AgentHook):
        async def on_run_end(self, run):  # after the run's end is stored
            ended.set()
            while not release.is_set():
                await asyncio.sleep(0.01)

    hook = Linger()
    add_default_hook(hook)
    try:
        h = batch(slow_agent(Probe(), 0.0), ["one"], name="late-cancel", executor=Executor(repo))
        wait_until(ended.is_set, what="the run's end stored")
        h.cancel()
        release.set()
        h.wait(30)
    finally:
        remove_default_hook(hook)
    (rec,) = h.records()
    assert rec.status is ExecStatus.COMPLETED and rec.result == "echo: one"
    assert repo.get_run(rec.run_id).status is RunStatus.COMPLETED
    again = resume_batch("late-cancel", slow_agent(Probe(), 0.0), executor=Executor(repo)).wait(30)
    assert again.metrics()["completed"] == h.metrics()["completed"] == 1


def test_active_time_is_the_union_of_the_runs_spans_gaps_left_out():
    from agio_notebook.scheduling.records import ExecutionRecord, active_seconds

    def rec(start, end):
        return ExecutionRecord(batch="b", started_at=start, ended_at=end)

    assert active_seconds([]) == 0.0
    assert active_seconds([rec(10.0, 11.0)]) == 1.0
    # overlapping (concurrency 2), then a stop of an hour, then one more item; unfinished ones do not count
    spans = [rec(0.0, 1.0), rec(0.5, 2.0), rec(2.0, 2.5), rec(3600.0, 3601.5), rec(5.0, None), rec(None, None)]
    assert active_seconds(spans) == pytest.approx(2.5 + 1.5)
    assert active_seconds(list(reversed(spans))) == pytest.approx(4.0)
    assert active_seconds([rec(0.0, 10.0), rec(2.0, 3.0)]) == 10.0  # inside another: counted once


def test_a_results_frame_never_hides_the_inputs_names(tmp_path):
    """An input with columns named item, status and run_id: groupby('item') works, and both statuses stay."""
    import pandas as pd

    import agio_notebook as agio
    from agio_notebook import Agent, ScriptedModel
    from agio_notebook.storage import open_repository

    repo = open_repository(str(tmp_path / "s"))
    data = pd.DataFrame({"item": ["a", "a", "b"], "status": ["new", "old", "new"], "text": ["x", "y", "z"]})
    h = agio.batch(Agent(model=ScriptedModel(["ok"], loop=True)), data, prompt="Summarise: {text}", name="cols",
                   repository=repo)
    h.wait(60)
    results = h.results()
    assert results.index.name is None
    assert list(results["status"]) == ["new", "old", "new"]  # the user's column
    assert set(results["agio_status"]) == {"completed"}  # the outcome, renamed beside it
    assert results.groupby("item").size().to_dict() == {"a": 2, "b": 1}
