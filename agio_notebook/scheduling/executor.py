"""Executor: the seed's executor, scheduler and worker pool over one event loop.

A request becomes an :class:`ExecutionRecord` (queued), waits in a :class:`FairQueue`, runs under
the concurrency caps (the executor's and its batch's), behind its endpoint's shared rate limit, with
a timeout and a token budget; a retryable failure goes back to the queue after an exponential
backoff, without holding a worker meanwhile. The seed splits this into ``Executor``, ``Scheduler``
and ``WorkerPool``; here the three share one loop and one lock-free state, and the two others are
views of it (:attr:`Executor.scheduler`, :attr:`Executor.pool`) that keep the seed's calls.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import dataclasses
import json
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Iterable

from ..agent import Agent
from ..core import AgentRun, ExecutionConfig, InvalidOperationError, NotFoundError, RunStatus, ToolCall, new_id, now
from ..execution import AgentHook, StepRunner
from ..execution.tool_executor import ToolExecutor
from ..storage import Repository, open_repository
from ..storage.group_commit import StoreWait, store_wait
from ..storage.ids import resolve_prefix
from ..tools import Tool, ToolRegistry, tool as as_tool
from . import loop as sched_loop
from . import options as check
from .errors import SchedulingError
from .limits import LimitedModel, RateLimit, backoff, is_retryable, limiter_for
from .queue import FairQueue
from .records import ExecStatus, ExecutionRecord, ExecutionStore, item_session

SINGLE = "single"  # the batch of requests submitted on their own


def _pricing() -> Callable[..., float | None] | None:
    try:
        from ..models.pricing import cost_of as price  # type: ignore[import-not-found]
    except ImportError:
        return None
    return price


_PRICE = _pricing()


def cost_of(model_name: str | None, prompt_tokens: int, completion_tokens: int) -> float | None:
    """The dollar cost of a call when the pricing table knows the model; None = unknown."""
    if _PRICE is None or not model_name:
        return None
    return _PRICE(model_name, prompt_tokens, completion_tokens)


@dataclass
class ExecutionRequest:
    """What to execute: ``query`` sent to ``agent`` (a run), or one call of ``tool`` (a tool execution).

    ``session_id`` runs in that session instead of a new one per execution. ``fork=(session, at)``
    runs in a new fork of ``session`` at step ``at`` (what a sweep runs): ``query`` is sent there, or
    with ``query=None`` the fork's last user step or pending tool calls are answered; ``reuse``
    answers model calls identical to the source's recorded ones from the record.
    """

    agent: Agent | None = None
    query: str | None = ""
    config: ExecutionConfig | None = None  # the run's config (default: the agent's)
    fork: tuple[str, int] | None = None
    reuse: bool = False
    tool: Tool | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    batch: str = SINGLE
    index: int = 0
    inputs: dict[str, Any] = field(default_factory=dict)
    priority: int = 0
    timeout: float | None = None
    retries: int = 0
    retry_delay: float = 1.0
    max_tokens: int | None = None
    rate_limit: RateLimit | None = None
    session_id: str | None = None
    parent: str | None = None
    resumable: bool = False  # a batch item: its session id derives from (batch, index) so a resume finds it

    def describe(self) -> dict[str, Any]:
        """The stored ``request`` of the record (no agent object, no secrets)."""
        if self.tool is not None:
            return {"kind": "tool", "tool": self.tool.name, "arguments": self.arguments}
        return {"kind": "run", "query": self.query, "inputs": self.inputs,
                **({"session_id": self.session_id} if self.session_id else {}),
                **({"fork": {"session_id": self.fork[0], "at": self.fork[1]}} if self.fork else {})}


@dataclass
class BatchState:
    """What the executor tracks of one batch while it runs (its records are in ``Executor.records``)."""

    id: str
    concurrency: int = 8
    max_tokens: int | None = None  # the batch's token budget
    max_cost: float | None = None  # the batch's budget in USD
    ids: list[str] = field(default_factory=list)
    running: int = 0
    waiting: int = 0  # backing off before a retry
    tokens: int = 0
    cost: float | None = None
    started_at: float = field(default_factory=now)
    ended_at: float | None = None
    earlier_s: float = 0.0  # how long the batch ran before this start (a resume): counted in its elapsed time
    cancelled: bool = False
    latencies_ms: list[float] = field(default_factory=list)
    errors: deque[tuple[int, str]] = field(default_factory=lambda: deque(maxlen=5))
    done: concurrent.futures.Future[None] = field(default_factory=concurrent.futures.Future)
    on_finish: list[Callable[[], None]] = field(default_factory=list)


@dataclass
class _Job:
    record: ExecutionRecord
    request: ExecutionRequest
    task: asyncio.Task[None] | None = None
    cancel_requested: bool = False
    started: bool = False
    retry_handle: asyncio.TimerHandle | None = None


class _Catcher(AgentHook):
    """Keeps what the runner's lifecycle swallows: the failure itself (retryable or not) and the run id."""

    def __init__(self, record: ExecutionRecord) -> None:
        self.record = record
        self.error: BaseException | None = None
        self.run_id: str | None = None

    def started(self, run_id: str) -> None:
        """The run exists (and is stored): the record points at it from now on."""
        self.run_id = self.record.run_id = run_id

    async def on_run_start(self, run: Any) -> None:
        self.started(run.id)
        self.record.session_id = run.session_id  # a fork's session exists only once its run starts

    async def on_error(self, run: Any, error: BaseException) -> None:
        self.error = error


class Executor:
    """Schedules and runs executions on the scheduler loop, with records in the store.

    ``max_concurrency`` caps executions running at once across all batches; each batch has its own
    cap too. ``backend`` is ``"local"`` (this process) or a :class:`~agio_notebook.scheduling.ray_backend.RayBackend`.
    """

    def __init__(self, repository: Repository | None = None, *, max_concurrency: int = 64,
                 backend: Any = None, flush_interval: float = 0.2):
        if max_concurrency < 1:
            raise SchedulingError(f"max_concurrency must be at least 1, got {max_concurrency}")
        self.repository = repository if repository is not None else open_repository()
        self.store = ExecutionStore(self.repository)
        self.max_concurrency = max_concurrency
        self.backend = backend
        self.flush_interval = flush_interval
        self.records: dict[str, ExecutionRecord] = {}
        self.batches: dict[str, BatchState] = {}
        self._jobs: dict[str, _Job] = {}
        self._queue: FairQueue[_Job] = FairQueue()
        self._running = 0
        self._peak = 0
        self._flusher: asyncio.Task[None] | None = None
        self._dirty = False
        self._waiters: dict[str, list[asyncio.Future[ExecutionRecord]]] = {}
        self._totals = {"submitted": 0, "completed": 0, "failed": 0, "cancelled": 0, "timed_out": 0}
        self._held: dict[str, concurrent.futures.Future[Any]] = {}  # plan name -> its driver, while it runs
        self.scheduler = Scheduler(self)
        self.pool = WorkerPool(self)

    # -- submitting -----------------------------------------------------------------------------
    def batch_state(self, batch: str, *, concurrency: int = 8, max_tokens: int | None = None,
                    max_cost: float | None = None) -> BatchState:
        """The state of ``batch``, created with these limits if new (called before its submits)."""
        def make() -> BatchState:
            state = self.batches.get(batch)
            if state is None or state.done.done():
                state = self.batches[batch] = BatchState(batch, concurrency=concurrency, max_tokens=max_tokens,
                                                         max_cost=max_cost)
            return state
        return sched_loop.call(make)

    def refuse_running(self, name: str) -> None:
        """Refuse to start a batch, jobs or a plan under a name this executor is still running something of."""
        held = self._held.get(name)
        if held is not None and not held.done():
            raise SchedulingError(f"plan {name!r} is already running in this kernel; wait for it or cancel it")
        state = self.batches.get(name)
        if state is not None and not state.done.done():
            raise SchedulingError(f"batch {name!r} is already running in this kernel; wait for it or cancel it")

    def hold(self, name: str, running: concurrent.futures.Future[Any]) -> None:
        """``name`` is in use until ``running`` ends (a plan: between its tasks none of its items may run)."""
        self._held[name] = running

    def check(self, request: ExecutionRequest) -> None:
        """Refuse a request that could not run, in one line, before anything of it is stored or queued."""
        _check_request(request)
        if request.fork is not None and self.backend is not None:
            raise SchedulingError("forks run on the local backend (a Ray worker starts from its own copy of the store)")

    def submit(self, request: ExecutionRequest, *, record: ExecutionRecord | None = None) -> str:
        """Queue ``request``; returns its execution id at once (the seed's submit)."""
        self.check(request)
        warm_up(request.agent)
        rec = self.new_record(request, record)
        sched_loop.call(lambda: self._enqueue(_Job(rec, request), new=record is None or rec.attempts == 0))
        return rec.id

    def new_record(self, request: ExecutionRequest, record: ExecutionRecord | None = None) -> ExecutionRecord:
        """The record ``request`` runs under: ``record`` (an earlier kernel's, queued again) or a new one."""
        rec = record or ExecutionRecord(batch=request.batch, index=request.index, request=request.describe(),
                                        priority=request.priority, parent=request.parent)
        rec.status, rec.error, rec.priority = ExecStatus.QUEUED, None, request.priority
        rec.agent_name = request.agent.name if request.agent is not None else None
        rec.model_name = request.agent.model_name if request.agent is not None else None
        return rec

    def submit_many(self, requests: Iterable[tuple[ExecutionRequest, ExecutionRecord | None]], *,
                    stored: bool = False) -> list[str]:
        """Queue many at once (one hop to the loop). ``stored``: their records are already durable."""
        requests = list(requests)
        for request, _ in requests:
            self.check(request)  # all of them, before any is queued
        for agent in {id(r.agent): r.agent for r, _ in requests}.values():
            warm_up(agent)
        jobs = [_Job(self.new_record(request, record), request) for request, record in requests]

        def enqueue_all() -> None:
            for job in jobs:
                self._enqueue(job, new=not stored, pump=False)
            self._pump()
        sched_loop.call(enqueue_all)
        return [j.record.id for j in jobs]

    def _enqueue(self, job: _Job, *, new: bool = True, pump: bool = True) -> None:
        rec = job.record
        state = self.batches.get(rec.batch)
        if state is None:
            state = self.batches[rec.batch] = BatchState(rec.batch)
        elif state.done.done():  # the batch goes on (a plan's next wave): with its limits and what it spent
            state = self.batches[rec.batch] = BatchState(rec.batch, concurrency=state.concurrency,
                                                         max_tokens=state.max_tokens, max_cost=state.max_cost,
                                                         tokens=state.tokens, cost=state.cost)
        self.records[rec.id] = rec
        self._jobs[rec.id] = job
        if rec.id not in state.ids:
            state.ids.append(rec.id)
        self._totals["submitted"] += 1
        rec.status = ExecStatus.QUEUED
        if new:
            self.store.put(rec)
            self.store.log(rec, f"queued with priority {rec.priority}")
        self._queue.push(job, rec.priority, rec.batch)
        self._touch()
        if pump:
            self._pump()

    # -- the dispatch loop ----------------------------------------------------------------------
    def _pump(self) -> None:
        """Start queued jobs while workers are free (called on every change)."""
        while self._running < self.max_concurrency:
            job = self._queue.pop(lambda b: self.batches[b].running < self.batches[b].concurrency)
            if job is None:
                return
            state = self.batches[job.record.batch]
            self._running += 1
            state.running += 1
            self._peak = max(self._peak, self._running)
            job.started = False
            job.task = asyncio.get_running_loop().create_task(self._execute(job, state))
            job.task.add_done_callback(lambda t, job=job, state=state: self._never_started(t, job, state))

    def _never_started(self, task: asyncio.Task[None], job: _Job, state: BatchState) -> None:
        """A task cancelled before its first step never ran ``_execute``: do its bookkeeping here."""
        if job.started or not task.cancelled() or not job.cancel_requested:
            return
        self._running -= 1
        state.running -= 1
        self._finish(job, state, ExecStatus.CANCELLED, None, "cancelled", None)
        self._pump()
        self._maybe_done(state)

    async def _execute(self, job: _Job, state: BatchState) -> None:
        store_wait.set(StoreWait())  # this task's own: what its run waits for the disk is not its time
        job.started = True
        rec, req = job.record, job.request
        rec.attempts += 1
        rec.status = ExecStatus.RUNNING
        t0 = now()
        rec.started_at = rec.started_at or t0
        if req.tool is None and req.fork is None:
            rec.session_id = req.session_id or (_session_for(rec) if req.resumable else f"{rec.batch}-{rec.id}")
        self.store.put(rec)
        self.store.log(rec, f"attempt {rec.attempts} started" + (f" in session {rec.session_id}" if rec.session_id else ""))
        self._touch()
        catcher = _Catcher(rec)
        error: BaseException | None = None
        status, result, message = ExecStatus.FAILED, None, None
        tokens = (0, 0, 0)
        tokens_spent = False  # what the batch has left cannot pay for one more model call
        run_ids: list[str] = []
        run = None
        try:
            budget = _budget(req.max_tokens, state)
            spent = budget_spent(state)
            if spent is not None:
                raise _BudgetSpent(spent)
            async with _item_timeout(req.timeout):
                if req.tool is not None:
                    status, result, message = await self._run_tool(req)
                else:
                    status, result, message, run = await self._run_agent(req, rec, catcher, budget, _cost_left(state))
                    if _too_little_left(run, budget, req.max_tokens):
                        tokens_spent = True
                        raise _BudgetSpent(f"{_tokens_spent(state.max_tokens)}: {budget} "
                                           "left, less than the next model call needs")
            error = catcher.error
        except _BudgetSpent as exc:
            status, message = ExecStatus.CANCELLED, str(exc)
        except TimeoutError as exc:
            status, error = ExecStatus.TIMED_OUT, exc
            message = f"timed out after {req.timeout:g}s"
        except asyncio.CancelledError as exc:
            if job.cancel_requested:
                status, message = ExecStatus.CANCELLED, "cancelled"
            elif _cancelled_from_outside():
                raise  # the executor itself is shutting down
            else:  # the agent, a model or a tool raised it on its own (it awaited something cancelled elsewhere)
                status, error = ExecStatus.FAILED, exc
                message = ("the run raised CancelledError though nothing cancelled the item "
                           "(it awaited a task that was cancelled elsewhere)")
        except Exception as exc:  # noqa: BLE001 - every failure is recorded on the item, never lost
            status, error = ExecStatus.FAILED, exc
            message = f"{type(exc).__name__}: {exc}"
        finally:
            if catcher.run_id is not None:
                run_ids.append(catcher.run_id)
        t1 = now()
        if run_ids:
            rec.run_id = run_ids[-1]
            if run is None or run.id != rec.run_id:  # timed out or cancelled: the stored version
                run = self.repository.get_run(rec.run_id)
            if run is not None:
                if status is ExecStatus.CANCELLED and run.status is RunStatus.COMPLETED:
                    # cancelled after its run had stored its answer: the item is done, as a resume would find it
                    status, result, message = ExecStatus.COMPLETED, run.final_text, None
                m = run.metrics
                tokens = (m.prompt_tokens or 0, m.completion_tokens or 0, m.total_tokens or 0)
                rec.model_calls += m.model_calls
                rec.tool_calls += m.tool_calls
        rec.prompt_tokens += tokens[0]
        rec.completion_tokens += tokens[1]
        rec.total_tokens += tokens[2]
        state.tokens += tokens[2]
        attempt_cost = run.metrics.cost if run is not None and run.metrics.cost is not None else (
            cost_of(rec.model_name, tokens[0], tokens[1]))  # the run's own cost knows the user's price table
        if attempt_cost is not None:
            rec.cost = (rec.cost or 0.0) + attempt_cost
            state.cost = (state.cost or 0.0) + attempt_cost
        self._running -= 1
        state.running -= 1
        retryable = status in (ExecStatus.FAILED, ExecStatus.TIMED_OUT) and is_retryable(error)
        if retryable and rec.attempts <= req.retries and not job.cancel_requested and not state.cancelled:
            delay = backoff(rec.attempts, req.retry_delay)
            rec.status, rec.error = ExecStatus.QUEUED, message
            self.store.put(rec)
            self.store.log(rec, f"attempt {rec.attempts} {status.value}: {message}; retrying in {delay:g}s", "warning")
            state.waiting += 1
            job.task = None
            job.retry_handle = asyncio.get_running_loop().call_later(delay, self._retry_now, job, state)
        else:
            self._finish(job, state, status, result, message, (t1 - t0) * 1000.0)
        spent = _tokens_spent(state.max_tokens) if tokens_spent else budget_spent(state)
        if spent is not None:
            self._cancel_queued(state, spent)
        self._pump()
        self._maybe_done(state)

    async def _run_agent(self, req: ExecutionRequest, rec: ExecutionRecord, catcher: _Catcher,
                         budget: int | None, cost_left: float | None
                         ) -> tuple[ExecStatus, str | None, str | None, AgentRun]:
        agent = req.agent
        assert agent is not None
        config = req.config or agent.config or ExecutionConfig()
        if budget is not None:
            config = dataclasses.replace(config, max_tokens=budget)
        if cost_left is not None:  # what the batch has left is this run's budget too
            config = dataclasses.replace(config, max_cost=min(cost_left, config.max_cost or cost_left))
        limiter = None
        if req.rate_limit is not None:
            limiter = limiter_for(req.rate_limit, req.rate_limit.endpoint or agent.model_name)
        if self.backend is not None:
            # the limiter lives in this process: on a remote worker it gates whole runs, not each call
            reserved = await limiter.acquire() if limiter is not None else 0.0
            try:
                run = await self.backend.run(self, agent, config, rec, catcher)
            finally:
                if limiter is not None:
                    stored = self.repository.get_run(catcher.run_id) if catcher.run_id else None
                    limiter.spend(stored.metrics.total_tokens if stored else 0, reserved)
        else:
            if limiter is not None:
                agent = agent.with_model(LimitedModel(agent.model, limiter))  # type: ignore[arg-type]
            runner = StepRunner(agent, hooks=[catcher], config=config, repository=self.repository)
            if req.fork is not None:
                stream = runner.fork_stream(*req.fork, req.query, reuse=req.reuse)
            else:
                stream = runner.run_stream(rec.session_id, req.query or "")
            run = await _final_run(stream)
        if run.status is RunStatus.COMPLETED:
            return ExecStatus.COMPLETED, run.final_text, None, run
        if run.status is RunStatus.CANCELLED:
            return ExecStatus.CANCELLED, run.final_text, run.error, run
        return ExecStatus.FAILED, run.final_text, run.error or run.status.value, run

    async def _run_tool(self, req: ExecutionRequest) -> tuple[ExecStatus, str | None, str | None]:
        assert req.tool is not None
        config = ExecutionConfig(enable_retry=False)
        executor = ToolExecutor(ToolRegistry([req.tool]), config)
        call = ToolCall(id=f"call_{new_id()[:8]}", name=req.tool.name, arguments=json.dumps(req.arguments))
        async for res in executor.execute_batch([call]):
            if res.status == "ok":
                return ExecStatus.COMPLETED, res.content, None
            return ExecStatus.FAILED, res.content, res.error
        return ExecStatus.FAILED, None, "the tool returned nothing"

    def _retry_now(self, job: _Job, state: BatchState) -> None:
        state.waiting -= 1
        job.retry_handle = None
        if job.cancel_requested or state.cancelled:
            self._finish(job, state, ExecStatus.CANCELLED, None, "cancelled while waiting to retry", None)
            self._maybe_done(state)
            return
        self._queue.push(job, job.record.priority, job.record.batch)
        self._pump()

    def _finish(self, job: _Job, state: BatchState, status: ExecStatus, result: str | None,
                message: str | None, duration_ms: float | None) -> None:
        rec = job.record
        rec.status, rec.result, rec.error = status, result, message
        rec.ended_at = now()
        rec.duration_ms = duration_ms
        self._totals[status.value] = self._totals.get(status.value, 0) + 1
        if duration_ms is not None and status is ExecStatus.COMPLETED:
            state.latencies_ms.append(duration_ms)
        user_cancel = status is ExecStatus.CANCELLED and (job.cancel_requested or state.cancelled)
        if status is not ExecStatus.COMPLETED and message and not user_cancel:
            state.errors.append((rec.index, message))  # failures, time-outs, budget cancellations
        self.store.put(rec)
        self.store.log(rec, f"{status.value}" + (f": {message}" if message else ""),
                       "info" if status is ExecStatus.COMPLETED else "error")
        self._jobs.pop(rec.id, None)
        for waiter in self._waiters.pop(rec.id, ()):
            if not waiter.done():
                waiter.set_result(rec)
        self._touch()

    def completion(self, execution_id: str) -> asyncio.Future[ExecutionRecord]:
        """On the scheduler loop: a future resolved with the record when the execution ends."""
        fut: asyncio.Future[ExecutionRecord] = asyncio.get_running_loop().create_future()
        rec = self.records.get(execution_id)
        if rec is not None and rec.status.is_terminal and execution_id not in self._jobs:
            fut.set_result(rec)
        else:
            self._waiters.setdefault(execution_id, []).append(fut)
        return fut

    def call_done(self, state: BatchState) -> None:
        """End ``state`` now if nothing of it is left to run (a resumed batch with all items finished)."""
        sched_loop.call(lambda: self._maybe_done(state))

    def _maybe_done(self, state: BatchState) -> None:
        if state.done.done() or state.running or state.waiting:
            return
        if any(not self.records[i].status.is_terminal for i in state.ids):
            return
        state.ended_at = now()
        self.store.flush()  # the records are durable before anyone hears the batch ended
        for fn in state.on_finish:
            try:
                fn()
            except Exception:  # noqa: BLE001 - a listener must not block the batch's end
                pass
        state.done.set_result(None)

    # -- cancelling -----------------------------------------------------------------------------
    def cancel_execution(self, execution_id: str) -> bool:
        """Cancel one execution (queued: at once; running: its run ends cancelled). False if already over."""
        execution_id = self.resolve_execution(execution_id)
        return sched_loop.call(lambda: self._cancel(execution_id, "cancelled"))

    def _cancel(self, execution_id: str, reason: str) -> bool:
        rec = self.records.get(execution_id)
        if rec is None:
            raise NotFoundError(f"no execution {execution_id!r} in this kernel")
        job = self._jobs.get(execution_id)
        if rec.status.is_terminal or job is None:
            return False
        state = self.batches[rec.batch]
        job.cancel_requested = True
        if job.task is not None:
            job.task.cancel()
        elif job.retry_handle is not None:
            job.retry_handle.cancel()
            job.retry_handle = None
            state.waiting -= 1
            self._finish(job, state, ExecStatus.CANCELLED, None, reason, None)
        else:
            self._queue.remove(lambda j: j is job)
            self._finish(job, state, ExecStatus.CANCELLED, None, reason, None)
        self._maybe_done(state)
        return True

    def _cancel_queued(self, state: BatchState, reason: str) -> None:
        for job in self._queue.remove(lambda j: j.record.batch == state.id):
            self._finish(job, state, ExecStatus.CANCELLED, None, reason, None)

    def cancel_batch(self, batch: str) -> int:
        """Cancel every unfinished execution of ``batch``; returns how many were cancelled."""
        def cancel() -> int:
            state = self.batches.get(batch)
            if state is None:
                raise NotFoundError(f"no batch {batch!r} running in this kernel")
            if state.done.done():
                raise InvalidOperationError(f"batch {batch!r} has already finished; nothing to cancel")
            state.cancelled = True
            n = 0
            for rid in list(state.ids):
                if not self.records[rid].status.is_terminal and self._cancel(rid, "batch cancelled"):
                    n += 1
            return n
        return sched_loop.call(cancel)

    # -- flushing ---------------------------------------------------------------------------------
    def _touch(self) -> None:
        self._dirty = True
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_soon())

    async def _flush_soon(self) -> None:
        while self._dirty:
            self._dirty = False
            await asyncio.sleep(self.flush_interval)
            try:
                await asyncio.get_running_loop().run_in_executor(None, self.store.flush)
            except RuntimeError:  # the interpreter is exiting: its thread pool is gone
                self.store.flush()

    # -- the seed's calls ---------------------------------------------------------------------------
    def execute_tool_async(self, tool: Tool | Callable[..., Any], arguments: dict[str, Any] | None = None,
                           **options: Any) -> str:
        """Run one tool call as an execution of its own; returns its id at once."""
        t = tool if isinstance(tool, Tool) else as_tool(tool)
        return self.submit(ExecutionRequest(tool=t, arguments=dict(arguments or {}), **options))

    def execute_tool(self, tool: Tool | Callable[..., Any], arguments: dict[str, Any] | None = None,
                     *, wait: float | None = None, **options: Any) -> ExecutionRecord:
        """Run one tool call as an execution and wait for its record."""
        eid = self.execute_tool_async(tool, arguments, **options)
        return self.wait_for(eid, wait)

    def wait_for(self, execution_id: str, timeout: float | None = None) -> ExecutionRecord:
        execution_id = self.resolve_execution(execution_id)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            rec = self.get_execution_status(execution_id)
            if rec.status.is_terminal:
                return rec
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"execution {execution_id} still {rec.status.value} after {timeout}s")
            time.sleep(0.01)

    def resolve_execution(self, execution_id: str) -> str:
        """The full id of an execution of this kernel or the store (a unique prefix of 6+ characters works)."""
        if execution_id in self.records:
            return execution_id
        known = set(self.records) | {r.id for r in self.store.iter_records()}
        return resolve_prefix("execution", execution_id, known.__contains__, lambda prefix: known)

    def get_execution_status(self, execution_id: str) -> ExecutionRecord:
        execution_id = self.resolve_execution(execution_id)
        rec = self.records.get(execution_id)
        if rec is None:
            rec = next((r for r in self.store.iter_records() if r.id == execution_id), None)
        if rec is None:
            raise NotFoundError(f"no execution {execution_id!r}")
        return rec

    def get_execution_result(self, execution_id: str) -> str | None:
        rec = self.get_execution_status(execution_id)
        if not rec.status.is_terminal:
            raise InvalidOperationError(f"execution {execution_id} is still {rec.status.value}")
        return rec.result

    def list_executions(self, *, status: str | None = None, batch: str | None = None, agent: str | None = None,
                        since: float | None = None, until: float | None = None) -> list[ExecutionRecord]:
        """Records from the store and this kernel (this kernel's version wins), filtered."""
        found = {r.id: r for r in self.store.iter_records()}
        found.update(self.records)
        out = [r for r in found.values()
               if (status is None or r.status.value == status) and (batch is None or r.batch == batch)
               and (agent is None or r.agent_name == agent)
               and (since is None or r.queued_at >= since) and (until is None or r.queued_at <= until)]
        return sorted(out, key=lambda r: (r.queued_at, r.index))

    def get_queue_status(self) -> dict[str, Any]:
        def status() -> dict[str, Any]:
            return {"queued": len(self._queue), "running": self._running,
                    "waiting_retry": sum(b.waiting for b in self.batches.values()),
                    "max_concurrency": self.max_concurrency, "peak_concurrency": self._peak,
                    "by_priority": self._queue.counts_by_priority(),
                    "batches": {b.id: {"running": b.running, "concurrency": b.concurrency}
                                for b in self.batches.values() if not b.done.done()},
                    **{f"total_{k}": v for k, v in self._totals.items()}}
        return sched_loop.call(status)

    def metrics(self, batch: str | None = None) -> dict[str, Any]:
        """The seed's monitoring figures, for one batch or for everything this executor ran."""
        ids = self.batches[batch].ids if batch is not None else list(self.records)
        return figures([self.records[i] for i in ids if i in self.records],
                       self.batches.get(batch) if batch else None, self._running if batch is None else None)


def figures(records: list[ExecutionRecord], state: BatchState | None, running: int | None = None) -> dict[str, Any]:
    """Totals, successes, failures, average time, concurrency, queue length, error rate, tokens, cost."""
    counts = {s.value: 0 for s in ExecStatus}
    for r in records:
        counts[r.status.value] += 1
    finished = [r for r in records if r.status.is_terminal]
    durations = [r.duration_ms for r in records if r.status is ExecStatus.COMPLETED and r.duration_ms is not None]
    started = state.started_at if state else min((r.queued_at for r in records), default=now())
    ended = state.ended_at if state and state.ended_at else now()
    # a resumed batch: its items and its time before the resume both count, the time it sat stopped does not
    elapsed = max(ended - started + (state.earlier_s if state else 0.0), 1e-9)
    failures = counts["failed"] + counts["timed_out"]
    done = len(finished)
    rate = done / elapsed if done else 0.0
    remaining = len(records) - done
    costs = [r.cost for r in records if r.cost is not None]
    return {
        "total": len(records), "done": done, **counts,
        "succeeded": counts["completed"], "failures": failures,
        "error_rate": failures / done if done else 0.0,
        "avg_ms": sum(durations) / len(durations) if durations else None,
        "concurrency": state.running if state else (running or 0),
        "queue_length": counts["queued"],
        "throughput_per_s": rate, "elapsed_s": elapsed,
        "eta_s": remaining / rate if rate and remaining else (0.0 if not remaining else None),
        "tokens": sum(r.total_tokens for r in records),
        "cost": sum(costs) if costs else None,
        "latencies_ms": durations,
        "last_errors": list(state.errors) if state else [(r.index, r.error) for r in finished if r.error][-5:],
    }


async def _final_run(stream: Any) -> AgentRun:
    """The run as its terminal event carries it (``runner.run`` would also read every step back)."""
    run = None
    async for event in stream:
        if event.type.is_terminal:
            run = AgentRun.from_dict(event.payload["run"])
    if run is None:  # every run's stream ends with its outcome; said plainly if one ever does not
        raise SchedulingError("a run's event stream ended without its outcome")
    return run


class _BudgetSpent(Exception):
    pass


def _cost_left(state: BatchState) -> float | None:
    """USD the batch may still spend (None: no budget)."""
    return None if state.max_cost is None else max(0.0, state.max_cost - (state.cost or 0.0))


_TOKEN_BUDGET, _COST_BUDGET = "the batch's token budget (", "the batch's cost budget ("


def _tokens_spent(max_tokens: int | None) -> str:
    return f"{_TOKEN_BUDGET}{max_tokens}) is spent"


def _cost_spent(max_cost: float | None) -> str:
    return f"{_COST_BUDGET}${max_cost:g}) is spent"


def budget_spent(state: BatchState) -> str | None:
    """Why the batch may start nothing more (its token or cost budget is spent), or None."""
    if state.max_tokens is not None and state.tokens >= state.max_tokens:
        return _tokens_spent(state.max_tokens)
    if _cost_left(state) == 0.0:
        return _cost_spent(state.max_cost)
    return None


def cancelled_for_budget(rec: ExecutionRecord) -> bool:
    """The item was cancelled because its batch's budget was spent (a resume leaves it so)."""
    return rec.status is ExecStatus.CANCELLED and (rec.error or "").startswith((_TOKEN_BUDGET, _COST_BUDGET))


def _too_little_left(run: Any, budget: int | None, per_item: int | None) -> bool:
    """The run stopped before its first model call for want of the batch's budget (not its own)."""
    return (run is not None and run.status is RunStatus.BUDGET_EXCEEDED and not run.metrics.model_calls
            and budget is not None and budget != per_item)


def _budget(per_item: int | None, state: BatchState) -> int | None:
    left = None if state.max_tokens is None else state.max_tokens - state.tokens
    if per_item is None:
        return left
    return per_item if left is None else min(per_item, left)


def _cancelled_from_outside() -> bool:
    """This task is being cancelled (``task.cancel()``), not merely handed a CancelledError someone raised."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


@contextlib.asynccontextmanager
async def _item_timeout(seconds: float | None) -> AsyncIterator[None]:
    """``asyncio.timeout(seconds)`` that does not count the time the item waited for durable commits.

    Those waits are the store's (a slow disk, other runs' syncs), not the item's: the deadline moves
    on by each of them, so a timeout measures the item's own model and tool time.
    """
    if seconds is None:
        yield
        return
    loop = asyncio.get_running_loop()
    waited = store_wait.get() or StoreWait()
    start = loop.time()
    async with asyncio.timeout(None) as scope:
        def expire_or_wait() -> None:
            deadline = start + seconds + waited.elapsed()
            if loop.time() + 0.001 >= deadline:
                scope.reschedule(loop.time())
            else:
                nonlocal handle
                handle = loop.call_at(deadline, expire_or_wait)
        handle = loop.call_at(start + seconds, expire_or_wait)
        try:
            yield
        finally:
            handle.cancel()


def warm_up(agent: Agent | None) -> None:
    """Import and load what a first run needs (the price table) before the first item's clock starts."""
    if agent is not None:
        from ..models.pricing import cost_of as price_of

        price_of(agent.model_name, 1, 1)


def _session_for(rec: ExecutionRecord) -> str:
    """A session id derived from the item, so a resume finds what an interrupted attempt stored."""
    return item_session(rec.batch, rec.index, rec.attempts)


def _check_request(request: ExecutionRequest) -> None:
    if (request.agent is None) == (request.tool is None):
        raise SchedulingError("an execution runs either an agent (agent=, query=) or a tool (tool=), not both")
    if request.agent is not None and not isinstance(request.agent, Agent):
        raise SchedulingError(f"agent must be an agio Agent, got {type(request.agent).__name__}")
    check.priority(request.priority)
    check.real("timeout", request.timeout, positive=True, optional=True, what="a positive number of seconds (None: no limit)")
    check.whole("retries", request.retries, minimum=0)
    check.real("retry_delay", request.retry_delay)
    check.whole("max_tokens", request.max_tokens, minimum=1, optional=True)
    if request.rate_limit is not None and not isinstance(request.rate_limit, RateLimit):
        raise SchedulingError(f"rate_limit of a request must be a RateLimit, got {type(request.rate_limit).__name__}")
    if request.query is not None and not isinstance(request.query, str):
        raise SchedulingError(f"query must be a string, got {type(request.query).__name__}")
    if request.query is None and request.fork is None:
        raise SchedulingError("query=None continues a fork: give fork=(session_id, at) too")
    if request.fork is not None and request.session_id is not None:
        raise SchedulingError("a request runs in session_id= or in a new fork=(session_id, at), not both")


class Scheduler:
    """The seed's ``Scheduler``: the queue and its policies, as calls on the executor."""

    def __init__(self, executor: Executor):
        self._x = executor

    def schedule_task(self, request: ExecutionRequest) -> str:
        return self._x.submit(request)

    def get_task_status(self, task_id: str) -> str:
        return self._x.get_execution_status(task_id).status.value

    def cancel_task(self, task_id: str) -> bool:
        return self._x.cancel_execution(task_id)

    def get_queue_status(self) -> dict[str, Any]:
        return self._x.get_queue_status()


class WorkerPool:
    """The seed's ``WorkerPool``: the workers (concurrency slots) the executor runs jobs on."""

    def __init__(self, executor: Executor):
        self._x = executor

    def submit_work(self, request: ExecutionRequest) -> str:
        return self._x.submit(request)

    def get_work_status(self, work_id: str) -> str:
        return self._x.get_execution_status(work_id).status.value

    def get_pool_status(self) -> dict[str, Any]:
        q = self._x.get_queue_status()
        return {"workers": q["max_concurrency"], "busy": q["running"], "idle": q["max_concurrency"] - q["running"],
                "peak_busy": q["peak_concurrency"]}


_executors: dict[Any, Executor] = {}


@atexit.register
def _flush_all() -> None:
    """Records still buffered when the process exits are written (a SIGKILL is what resume is for)."""
    for ex in list(_executors.values()):
        try:
            ex.store.flush()
        except Exception:  # noqa: BLE001 - exiting anyway
            pass


def default_executor(repository: Repository | None = None) -> Executor:
    """One executor per store in a process, so every batch shares its caps and rate limits."""
    repo = repository if repository is not None else open_repository()
    key = getattr(repo, "root", None) or id(repo)
    ex = _executors.get(key)
    if ex is None or ex.repository is not repo:
        ex = _executors[key] = Executor(repo)
    return ex
