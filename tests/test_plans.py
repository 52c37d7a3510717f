"""Plans: a DAG whose independent tasks run concurrently, answers flowing along edges, reflect-and-retry,
stopping with the failed task named, stored plan documents, and plans proposed by an agent."""

from __future__ import annotations

import asyncio
import time

import pytest

from agio_notebook import Agent, ExecutionConfig, FunctionModel, ScriptedModel
from agio_notebook.scheduling import Executor, Plan, PlanExecutor, SchedulingError
from agio_notebook.storage import TinyDBRepository
from scheduling_support import query_of


@pytest.fixture
def ex(tmp_path):
    repo = TinyDBRepository(tmp_path / "store", lock_timeout=2.0)
    yield Executor(repo)
    repo.close()


def worker(spans: dict[str, tuple[float, float]], delay: float = 0.3) -> Agent:
    """Answers ``done(<query>)`` after ``delay``; fails any query containing 'BROKEN'."""

    async def reply(messages, tools):
        q = query_of(messages)
        t0 = time.monotonic()
        await asyncio.sleep(delay)
        spans[q] = (t0, time.monotonic())
        if "BROKEN" in q:
            raise RuntimeError(f"cannot do task #{len(spans)}")
        return f"done({q})"

    return Agent(model=FunctionModel(reply, name="worker"), name="worker", config=ExecutionConfig(enable_retry=False))


def fixer() -> Agent:
    """A reflector that rewrites the failed task without the word BROKEN."""

    def reply(messages, tools):
        q = query_of(messages)
        task = q.split("\n")[2].split(": ", 1)[1]
        return task.replace("BROKEN", "fixed")

    return Agent(model=FunctionModel(reply, name="fixer"), name="fixer")


def test_independent_tasks_run_concurrently_and_answers_flow_along_edges(ex):
    spans: dict[str, tuple[float, float]] = {}
    plan = (Plan(name="diamond")
            .add("a", "fetch A")
            .add("b", "fetch B")
            .add("c", "combine {a} and {b}", depends_on=["a", "b"]))
    h = PlanExecutor(worker(spans), executor=ex, concurrency=4).execute_plan(plan).wait(60)
    assert h.status == "completed", h
    (a0, a1), (b0, b1) = spans["fetch A"], spans["fetch B"]
    assert a0 < b1 and b0 < a1  # a and b overlapped
    c_query = "combine done(fetch A) and done(fetch B)"
    assert spans[c_query][0] >= max(a1, b1)  # c waited for both
    res = h.results()
    assert list(res["task"])[-1] == "c" and res.set_index("task").loc["c", "final_text"] == f"done({c_query})"
    stored = ex.store.get_batch("diamond")
    assert stored["kind"] == "plan" and stored["status"] == "completed"
    assert {s["status"] for s in stored["states"].values()} == {"completed"}
    assert {r.batch for r in ex.store.records("diamond")} == {"diamond"}


def test_concurrency_of_a_plan_is_capped(ex):
    spans: dict[str, tuple[float, float]] = {}
    plan = Plan(name="wide")
    for i in range(4):
        plan.add(f"t{i}", f"job {i}")
    PlanExecutor(worker(spans, 0.2), executor=ex, concurrency=1).execute_plan(plan).wait(60)
    ordered = sorted(spans.values())
    assert all(ordered[i][1] <= ordered[i + 1][0] + 0.01 for i in range(3))  # one at a time


def test_a_plans_concurrency_holds_for_every_wave(ex):
    """The tasks after a first one (a second wave, once it is done) run one at a time too."""
    spans: dict[str, tuple[float, float]] = {}
    plan = Plan(name="waves").add("first", "job first")
    for i in range(3):
        plan.add(f"t{i}", f"job {i} after {{first}}", depends_on=["first"])
    h = PlanExecutor(worker(spans, 0.2), executor=ex, concurrency=1).execute_plan(plan).wait(60)
    assert h.status == "completed", h
    later = sorted(span for query, span in spans.items() if query != "job first")
    assert len(later) == 3 and all(later[i][1] <= later[i + 1][0] + 0.01 for i in range(2))  # one at a time


def test_failed_task_is_reflected_on_and_retried(ex):
    spans: dict[str, tuple[float, float]] = {}
    plan = Plan(name="reflect").add("x", "do the BROKEN thing").add("y", "use {x}", depends_on=["x"])
    h = PlanExecutor(worker(spans, 0.01), executor=ex, reflector=fixer()).execute_plan(plan).wait(60)
    assert h.status == "completed", h
    x = h.tasks["x"]
    assert x.attempts == 2 and x.query == "do the fixed thing" and x.result == "done(do the fixed thing)"
    recs = {r.id: r for r in ex.store.records("reflect")}
    first, reflection, second = (recs[i] for i in (x.execution_ids[0], *[
        r.id for r in recs.values() if r.parent == x.execution_ids[0] and r.request["inputs"].get("reflection_of")],
        x.execution_ids[1]))
    assert first.status.value == "failed" and "cannot do" in first.error
    assert reflection.status.value == "completed" and "cannot do" in reflection.request["query"]
    assert second.parent == first.id and second.status.value == "completed"


def test_plan_stops_and_names_the_failed_task_when_reflection_runs_out(ex):
    spans: dict[str, tuple[float, float]] = {}
    stubborn = Agent(model=ScriptedModel(["still BROKEN"], loop=True), name="stubborn")
    plan = (Plan(name="stops").add("ok", "fine").add("bad", "BROKEN step")
            .add("after", "after {bad}", depends_on=["bad", "ok"]))
    h = PlanExecutor(worker(spans, 0.01), executor=ex, reflector=stubborn, max_reflections=2).execute_plan(plan).wait(60)
    assert h.status == "failed" and h.failed_task == "bad" and "cannot do" in h.error
    assert h.tasks["bad"].attempts == 3 and h.tasks["after"].status == "cancelled"
    assert "task 'bad' failed" in repr(h)
    assert not any(q.startswith("after") for q in spans)
    assert ex.store.get_batch("stops")["failed_task"] == "bad"


def test_allow_failure_lets_the_plan_go_on(ex):
    spans: dict[str, tuple[float, float]] = {}
    plan = Plan(name="tolerant")
    plan.add("flaky", "BROKEN probe", allow_failure=True).add("next", "report {flaky}", depends_on=["flaky"])
    h = PlanExecutor(worker(spans, 0.01), executor=ex).execute_plan(plan).wait(60)
    assert h.status == "completed" and h.tasks["flaky"].status == "failed" and h.tasks["flaky"].attempts == 1
    assert h.tasks["next"].result.startswith("done(report (failed: ") and "RuntimeError" in h.tasks["next"].result


def test_cancel_a_running_plan(ex):
    spans: dict[str, tuple[float, float]] = {}
    plan = Plan(name="cancelled").add("slow", "slow").add("later", "later {slow}", depends_on=["slow"])
    h = PlanExecutor(worker(spans, 30), executor=ex).execute_plan(plan)
    deadline = time.monotonic() + 30
    while h.tasks["slow"].status != "running" and time.monotonic() < deadline:
        time.sleep(0.01)
    h.cancel()
    h.wait(30)
    assert h.status == "cancelled" and {s.status for s in h.tasks.values()} == {"cancelled"}


def test_a_plan_running_in_this_kernel_is_not_started_again(ex):
    spans: dict[str, tuple[float, float]] = {}
    plan = Plan(name="once").add("a", "first").add("b", "second {a}", depends_on=["a"])
    runner = PlanExecutor(worker(spans, 0.3), executor=ex)
    h = runner.execute_plan(plan)
    with pytest.raises(SchedulingError) as refused:
        runner.execute_plan(Plan(name="once").add("x", "other"))
    assert str(refused.value) == "plan 'once' is already running in this kernel; wait for it or cancel it"
    deadline = time.monotonic() + 30
    while h.tasks["b"].status != "running" and time.monotonic() < deadline:  # between its tasks too
        time.sleep(0.01)
    with pytest.raises(SchedulingError, match="plan 'once' is already running"):
        runner.execute_plan(Plan(name="once").add("x", "other"))
    h.wait(60)
    assert h.status == "completed" and set(spans) == {"first", "second done(first)"}
    assert runner.execute_plan(Plan(name="once").add("x", "other")).wait(60).status == "completed"


@pytest.mark.parametrize("build,message", [
    (lambda: Plan().add("a", "x", depends_on=["zzz"]), "depends on 'zzz'"),
    (lambda: Plan().add("a", "x", depends_on=["b"]).add("b", "y", depends_on=["a"]), "dependency cycle"),
    (lambda: Plan(), "no tasks"),
    (lambda: Plan().add("a", "x").add("a", "y"), "already has a task"),
])
def test_bad_plans_get_one_clear_line(ex, build, message):
    with pytest.raises(SchedulingError, match=message):
        PlanExecutor(worker({}), executor=ex).execute_plan(build())


def test_an_agent_proposes_a_plan(ex):
    planner = Agent(model=ScriptedModel(['Here: [{"name": "research", "query": "find facts"}, '
                                         '{"name": "write", "query": "write with {research}", '
                                         '"depends_on": ["research"]}]']), name="planner")
    plan = Plan.propose(planner, "write a report", name="proposed", repository=ex.repository)
    assert plan.order() == ["research", "write"]
    spans: dict[str, tuple[float, float]] = {}
    h = PlanExecutor(worker(spans, 0.01), executor=ex).execute_plan(plan).wait(60)
    assert h.tasks["write"].result == "done(write with done(find facts))"
    with pytest.raises(SchedulingError, match="not a JSON list"):
        Plan.from_json("no plan here")


def test_the_dag_drawing_never_turns_a_task_error_into_markup():
    """A task's name and error can come from a model: DOT's HTML-like labels would let them add links."""
    from types import SimpleNamespace

    from agio_notebook.notebook.plan_view import dag_svg

    evil = '<a> URL="javascript:alert(document.domain)" target="_self" label=<b>'
    failed = SimpleNamespace(status="failed", attempts=2, error=evil)
    done = SimpleNamespace(status="completed", attempts=1, error=None)
    svg = dag_svg(SimpleNamespace(tasks={"<b>draft</b>": failed, "review": done},
                                  edges=lambda: [("<b>draft</b>", "review")]))
    assert svg is not None and "<svg" in svg
    assert "xlink:href" not in svg and "<b>draft" not in svg and "&lt;b&gt;draft" in svg
