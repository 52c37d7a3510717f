"""Plans: tasks with dependencies (a DAG), run as executions; failures are reflected on and retried.

A task runs once every task it depends on has completed; independent tasks run concurrently (up to
the plan's concurrency). A task's query may use ``{name}`` of a dependency to receive its answer.
When a task fails and ``allow_failure`` is False, the model is shown the failure and asked for a
revised task (``execute_with_reflection``), at most ``max_reflections`` times; if it still fails, the
plan stops, cancels what runs, and says which task failed and why. A task with ``allow_failure``
may fail without stopping the plan; its dependents see ``(failed: <error>)`` as its answer.

Every task attempt and every reflection is an execution record (batch = the plan's name, parent =
what it revises), and the plan's own document (tasks, edges, states) is stored beside them.
"""

from __future__ import annotations

import asyncio
import graphlib
import json
import re
import string
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Generator

from ..agent import Agent
from ..core import InvalidOperationError, new_id, now
from ..storage import Repository
from . import loop as sched_loop
from . import options as check
from .errors import SchedulingError
from .executor import ExecutionRequest, Executor, default_executor
from .records import ExecStatus, ExecutionRecord

if TYPE_CHECKING:
    import pandas as pd

REFLECT_PROMPT = """A task in a plan failed.

Task {name}: {query}

It failed with this error:
{error}

Rewrite the task so that it can succeed. Reply with the revised task only, nothing else."""

PROPOSE_PROMPT = """Break this goal into a plan of tasks with dependencies.

Goal: {goal}

Reply with JSON only: a list of objects {{"name": "short_id", "query": "what to do", "depends_on": ["name", ...]}}.
A task's query may use {{name}} of a task it depends on to receive that task's answer."""


@dataclass
class Task:
    name: str
    query: str
    depends_on: list[str] = field(default_factory=list)
    agent: Agent | None = None
    allow_failure: bool = False


class Plan:
    """A DAG of :class:`Task`; build with :meth:`add` or let an agent :meth:`propose` one."""

    def __init__(self, tasks: list[Task] | None = None, *, name: str | None = None):
        self.name = name or f"plan-{new_id()[:8]}"
        self.tasks: dict[str, Task] = {}
        for t in tasks or ():
            self._put(t)

    def _put(self, task: Task) -> None:
        if not re.fullmatch(r"[A-Za-z_][\w-]*", task.name or ""):
            raise SchedulingError(f"task name {task.name!r} must be an identifier-like word (letters, digits, _ or -)")
        if task.name in self.tasks:
            raise SchedulingError(f"the plan already has a task named {task.name!r}")
        self.tasks[task.name] = task

    def add(self, name: str, query: str, depends_on: list[str] | tuple[str, ...] = (), *, agent: Agent | None = None,
            allow_failure: bool = False) -> Plan:
        self._put(Task(name, query, list(depends_on), agent, allow_failure))
        return self

    def order(self) -> list[str]:
        """A topological order; unknown dependencies and cycles are one clear error."""
        if not self.tasks:
            raise SchedulingError("the plan has no tasks")
        for t in self.tasks.values():
            for d in t.depends_on:
                if d not in self.tasks:
                    raise SchedulingError(f"task {t.name!r} depends on {d!r}, which is not in the plan")
        try:
            return list(graphlib.TopologicalSorter({t.name: t.depends_on for t in self.tasks.values()}).static_order())
        except graphlib.CycleError as exc:
            raise SchedulingError(f"the plan has a dependency cycle: {' -> '.join(exc.args[1])}") from None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "tasks": [{"name": t.name, "query": t.query, "depends_on": t.depends_on,
                                              "allow_failure": t.allow_failure,
                                              "agent_name": t.agent.name if t.agent else None}
                                             for t in self.tasks.values()]}

    @classmethod
    def propose(cls, agent: Agent, goal: str, *, name: str | None = None,
                repository: Repository | None = None) -> Plan:
        """Ask ``agent`` for a plan (JSON tasks); its reply is recorded as an execution like any other."""
        ex = default_executor(repository)
        eid = ex.submit(ExecutionRequest(agent=agent, query=PROPOSE_PROMPT.format(goal=goal), batch=name or "plans"))
        rec = ex.wait_for(eid, 600)
        if rec.status is not ExecStatus.COMPLETED:
            raise SchedulingError(f"the agent could not propose a plan: {rec.error}")
        return cls.from_json(rec.result or "", name=name)

    @classmethod
    def from_json(cls, text: str, *, name: str | None = None) -> Plan:
        match = re.search(r"\[.*\]", text, re.S)
        try:
            items = json.loads(match.group(0) if match else text)
            tasks = [Task(str(i["name"]), str(i["query"]), [str(d) for d in i.get("depends_on") or []]) for i in items]
        except (ValueError, KeyError, TypeError) as exc:
            raise SchedulingError(f"the proposed plan is not a JSON list of tasks ({exc})") from None
        plan = cls(tasks, name=name)
        plan.order()
        return plan


@dataclass
class TaskState:
    name: str
    status: str = "pending"  # pending | running | reflecting | completed | failed | cancelled
    attempts: int = 0
    query: str | None = None
    result: str | None = None
    error: str | None = None
    execution_ids: list[str] = field(default_factory=list)


class PlanHandle:
    """A running or finished plan: ``.wait()``, ``await``, ``.results()``, ``.cancel()``, task states."""

    def __init__(self, plan: Plan, executor: Executor):
        self.plan = plan
        self.executor = executor
        self.tasks = {n: TaskState(n) for n in plan.tasks}
        self.status = "running"
        self.error: str | None = None
        self.failed_task: str | None = None
        self.started_at = now()
        self.ended_at: float | None = None
        self._future: Any = None
        self._listeners: list[Callable[[], None]] = []

    @property
    def name(self) -> str:
        return self.plan.name

    @property
    def done(self) -> bool:
        return self._future is not None and self._future.done()

    def on_change(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` (on the scheduler loop) whenever a task changes state; used by the live DAG view."""
        self._listeners.append(fn)

    def _changed(self) -> None:
        for fn in list(self._listeners):
            try:
                fn()
            except Exception:  # noqa: BLE001 - a view must not stop the plan
                pass

    def wait(self, timeout: float | None = None) -> PlanHandle:
        try:
            self._future.result(timeout)
        except TimeoutError:
            pass
        return self

    def __await__(self) -> Generator[Any, None, PlanHandle]:
        async def wait() -> PlanHandle:
            try:
                while not self._future.done():  # wakes often, so a kernel interrupt is heard (see BatchHandle)
                    await asyncio.sleep(0.1)
            except (asyncio.CancelledError, KeyboardInterrupt):
                if not self.done:
                    self.cancel()
                raise
            return self
        return wait().__await__()

    def cancel(self) -> None:
        if self.done:
            raise InvalidOperationError(f"plan {self.name!r} has already finished; nothing to cancel")
        sched_loop.call(lambda: self._driver.cancel())

    def edges(self) -> list[tuple[str, str]]:
        return [(d, t.name) for t in self.plan.tasks.values() for d in t.depends_on]

    def results(self) -> pd.DataFrame:
        import pandas as pd

        recs = self.executor.records
        rows = []
        for name in self.plan.order():
            st = self.tasks[name]
            last = recs.get(st.execution_ids[-1]) if st.execution_ids else None
            rows.append({"task": name, "status": st.status, "attempts": st.attempts, "query": st.query,
                         "final_text": st.result, "error": st.error,
                         "depends_on": ",".join(self.plan.tasks[name].depends_on),
                         "session_id": last.session_id if last else None, "run_id": last.run_id if last else None,
                         "execution_id": last.id if last else None})
        frame = pd.DataFrame(rows)
        for col in ("task", "status", "query", "final_text", "error", "depends_on", "session_id", "run_id",
                    "execution_id"):
            frame[col] = frame[col].astype("string")
        frame["attempts"] = frame["attempts"].astype("Int64")
        return frame

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.name, "kind": "plan", **self.plan.to_dict(), "status": self.status, "error": self.error,
                "failed_task": self.failed_task, "started_at": self.started_at, "ended_at": self.ended_at,
                "states": {n: {"status": s.status, "attempts": s.attempts, "error": s.error,
                               "execution_ids": s.execution_ids} for n, s in self.tasks.items()}}

    def __repr__(self) -> str:
        counts: dict[str, int] = {}
        for s in self.tasks.values():
            counts[s.status] = counts.get(s.status, 0) + 1
        summary = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
        why = f" — task {self.failed_task!r} failed: {self.error}" if self.failed_task else ""
        return f"<agio plan {self.name!r} {self.status}: {summary}{why}>"


class PlanExecutor:
    """Runs plans on an :class:`Executor` (the seed's ``PlanExecutor.execute_plan``)."""

    def __init__(self, agent: Agent | None = None, *, executor: Executor | None = None,
                 repository: Repository | None = None, concurrency: int = 4, max_reflections: int = 2,
                 reflector: Agent | None = None, timeout: float | None = None):
        concurrency = check.whole("concurrency", concurrency, minimum=1)
        max_reflections = check.whole("max_reflections", max_reflections, minimum=0)
        check.real("timeout", timeout, positive=True, optional=True, what="a positive number of seconds (None: no limit)")
        self.agent = agent
        self.executor = executor or default_executor(repository)
        self.concurrency = concurrency
        self.max_reflections = max_reflections
        self.reflector = reflector
        self.timeout = timeout

    def execute_plan(self, plan: Plan) -> PlanHandle:
        """Start ``plan`` in the background and return its handle."""
        plan.order()
        for t in plan.tasks.values():
            if (t.agent or self.agent) is None:
                raise SchedulingError(f"task {t.name!r} has no agent; give the task one or PlanExecutor(agent)")
        self.executor.refuse_running(plan.name)
        handle = PlanHandle(plan, self.executor)
        self.executor.store.put_batch(handle.to_dict())
        self.executor.batch_state(plan.name, concurrency=self.concurrency)

        async def start() -> None:
            handle._driver = asyncio.get_running_loop().create_task(self._drive(handle))  # type: ignore[attr-defined]
            await asyncio.shield(handle._driver)  # type: ignore[attr-defined]

        handle._future = sched_loop.submit(start())
        self.executor.hold(plan.name, handle._future)
        return handle

    # -- on the scheduler loop ------------------------------------------------------------------
    async def _drive(self, handle: PlanHandle) -> None:
        plan = handle.plan
        sorter = graphlib.TopologicalSorter({t.name: t.depends_on for t in plan.tasks.values()})
        sorter.prepare()
        running: dict[asyncio.Task[ExecutionRecord], str] = {}
        counter = [0]
        try:
            while sorter.is_active():
                for name in sorter.get_ready():
                    task = plan.tasks[name]
                    query = _fill(task.query, {d: _answer(handle.tasks[d]) for d in task.depends_on})
                    running[asyncio.ensure_future(
                        self.execute_with_reflection(task, self.max_reflections, query=query, handle=handle,
                                                     counter=counter))] = name
                if not running:
                    break
                finished, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for fut in finished:
                    name = running.pop(fut)
                    rec = fut.result()
                    if rec.status is ExecStatus.COMPLETED or plan.tasks[name].allow_failure:
                        sorter.done(name)
                        continue
                    handle.status, handle.failed_task = "failed", name
                    handle.error = rec.error or rec.status.value
                    raise _PlanStopped
            handle.status = "completed"
        except (_PlanStopped, asyncio.CancelledError) as exc:
            if isinstance(exc, asyncio.CancelledError):
                handle.status, handle.error = "cancelled", "cancelled"
            for fut in running:
                fut.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            for st in handle.tasks.values():
                if st.status in ("pending", "running", "reflecting"):
                    st.status = "cancelled"
        finally:
            handle.ended_at = now()
            self.executor.store.put_batch(handle.to_dict())
            self.executor.store.flush()
            handle._changed()

    async def execute_with_reflection(self, task: Task, max_retries: int, *, query: str | None = None,
                                      handle: PlanHandle | None = None, counter: list[int] | None = None
                                      ) -> ExecutionRecord:
        """Run ``task``; on failure ask the model to revise it and run the revision, at most ``max_retries`` times.

        Must run on the scheduler loop (plans call it there).
        """
        agent = task.agent or self.agent
        assert agent is not None
        batch = handle.name if handle is not None else "reflections"
        counter = counter if counter is not None else [0]
        state = handle.tasks[task.name] if handle is not None else TaskState(task.name)
        query = query if query is not None else task.query
        parent: str | None = None
        rec: ExecutionRecord | None = None
        for attempt in range(max_retries + 1):
            state.status, state.query, state.attempts = "running", query, attempt + 1
            self._changed(handle)
            rec = await self._run(agent, query, batch, counter, parent, {"task": task.name, "attempt": attempt + 1})
            state.execution_ids.append(rec.id)
            if rec.status is ExecStatus.COMPLETED:
                state.status, state.result, state.error = "completed", rec.result, None
                self._changed(handle)
                return rec
            state.error = rec.error or rec.status.value
            if rec.status is ExecStatus.CANCELLED or task.allow_failure or attempt == max_retries:
                break
            state.status = "reflecting"
            self._changed(handle)
            reflection = await self._run(self.reflector or agent,
                                         REFLECT_PROMPT.format(name=task.name, query=query, error=state.error),
                                         batch, counter, rec.id, {"task": task.name, "reflection_of": rec.id})
            if reflection.status is not ExecStatus.COMPLETED or not (reflection.result or "").strip():
                state.error = f"{state.error}; and reflecting on it failed: {reflection.error}"
                break
            parent, query = rec.id, reflection.result.strip()
        state.status = "cancelled" if rec is not None and rec.status is ExecStatus.CANCELLED else "failed"
        self._changed(handle)
        assert rec is not None
        return rec

    async def _run(self, agent: Agent, query: str, batch: str, counter: list[int], parent: str | None,
                   inputs: dict[str, Any]) -> ExecutionRecord:
        ex = self.executor
        counter[0] += 1
        eid = ex.submit(ExecutionRequest(agent=agent, query=query, batch=batch, index=counter[0] - 1, inputs=inputs,
                                         parent=parent, timeout=self.timeout))
        try:
            return await ex.completion(eid)
        except asyncio.CancelledError:
            ex._cancel(eid, "plan stopped")
            await asyncio.shield(ex.completion(eid))
            raise

    def _changed(self, handle: PlanHandle | None) -> None:
        if handle is not None:
            self.executor.store.put_batch(handle.to_dict())
            handle._changed()


class _PlanStopped(Exception):
    pass


def _answer(state: TaskState) -> str:
    return state.result if state.status == "completed" and state.result is not None else f"(failed: {state.error})"


def _fill(query: str, answers: dict[str, str]) -> str:
    """``{name}`` of a dependency becomes its answer; other braces stay as written."""
    try:
        parts = list(string.Formatter().parse(query))
    except ValueError:  # unbalanced braces: replace what can be replaced, leave the rest
        for name, answer in answers.items():
            query = query.replace("{" + name + "}", answer)
        return query
    out = []
    for literal, field_name, spec, conv in parts:
        out.append(literal)
        if field_name is None:
            continue
        if field_name in answers:
            out.append(answers[field_name])
        else:
            out.append("{" + field_name + (f"!{conv}" if conv else "") + (f":{spec}" if spec else "") + "}")
    return "".join(out)


def execute_plan(plan: Plan, agent: Agent | None = None, **options: Any) -> PlanHandle:
    """Shortcut: ``PlanExecutor(agent, **options).execute_plan(plan)``."""
    return PlanExecutor(agent, **options).execute_plan(plan)
