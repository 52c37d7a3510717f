"""Batches: one agent over many inputs, each input its own execution (and its own session).

``batch()`` returns at once; the batch runs on the scheduler loop. Its definition (inputs, template,
options) is stored with its records, so calling the same batch again after a kernel restart, or
``resume_batch(name)``, runs only what did not finish: an item whose run completed is never run
again, even when the kernel died before its record said so (the record is reconciled from the run).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import string
import sys
from typing import TYPE_CHECKING, Any, Callable, Generator, Sequence

from ..agent import Agent
from ..core import InvalidOperationError, RunStatus, new_id, now
from ..models.pricing import check_priced
from ..storage import Repository
from ..storage.ids import resolve_filter
from . import loop as sched_loop
from .errors import SchedulingError
from .executor import BatchState, ExecutionRequest, Executor, default_executor, figures
from .limits import RateLimit
from .records import ExecStatus, ExecutionRecord

if TYPE_CHECKING:
    import pandas as pd


def _rows(inputs: Any, prompt: str | None) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """(JSON-safe input rows, queries, input column names) for a list of strings or a DataFrame."""
    columns: list[str]
    if hasattr(inputs, "to_json") and hasattr(inputs, "columns"):  # a DataFrame
        columns = [str(c) for c in inputs.columns]
        rows = json.loads(inputs.to_json(orient="records", date_format="iso"))
        if prompt is None:
            if len(columns) != 1:
                raise SchedulingError(f"a DataFrame with {len(columns)} columns needs prompt= with "
                                      "{column} placeholders")
            prompt = "{" + columns[0] + "}"
    else:
        if isinstance(inputs, str) or not isinstance(inputs, Sequence):
            raise SchedulingError(f"inputs must be a list of strings or a DataFrame, got {type(inputs).__name__}")
        bad = next((i for i, x in enumerate(inputs) if not isinstance(x, str)), None)
        if bad is not None:
            raise SchedulingError(f"inputs[{bad}] is a {type(inputs[bad]).__name__}, not a string")
        columns = ["input"]
        rows = [{"input": x} for x in inputs]
    if not rows:
        raise SchedulingError("the input list is empty: nothing to run")
    if prompt is None:
        return rows, [r["input"] for r in rows], columns
    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(prompt) if f is not None}
    except ValueError as exc:
        raise SchedulingError(f"the prompt template is malformed ({exc}); write {{{{ and }}}} for literal braces") from None
    names = {f.split(".")[0].split("[")[0] for f in fields}
    if "" in names:
        raise SchedulingError("the prompt template has an empty {} placeholder; name a column, e.g. {text}")
    missing = sorted(names - set(columns))
    if missing:
        raise SchedulingError(f"the prompt template uses column {missing[0]!r}, which the inputs do not have "
                              f"(columns: {', '.join(columns)})")
    return rows, [fill(prompt, r) for r in rows], columns


class _ByColumn(string.Formatter):
    """``{name}`` (and ``{0}`` for a column named 0) looked up among the row's columns by name."""

    def get_value(self, key: Any, args: Any, kwargs: Any) -> Any:
        return kwargs[str(key)]


def fill(prompt: str, row: dict[str, Any]) -> str:
    """The prompt for one input row; a value the template cannot use is one clear line."""
    try:
        return _ByColumn().vformat(prompt, (), row)
    except (KeyError, IndexError, ValueError, TypeError, AttributeError) as exc:
        raise SchedulingError(f"the prompt template cannot be filled from row {row!r:.120}: "
                              f"{type(exc).__name__}: {exc}") from None


def _fingerprint(queries: list[str]) -> str:
    return hashlib.sha1(json.dumps(queries).encode()).hexdigest()


class BatchHandle:
    """A running or finished batch: ``.wait()``, ``await``, ``.results()``, ``.metrics()``, ``.cancel()``."""

    def __init__(self, name: str, executor: Executor, state: BatchState, columns: list[str]):
        self.name = name
        self.executor = executor
        self.state = state
        self.columns = columns

    # -- waiting -----------------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self.state.done.done()

    def wait(self, timeout: float | None = None) -> BatchHandle:
        """Block until the batch ends (or ``timeout`` seconds pass); Ctrl-C / interrupt cancels it."""
        try:
            self.state.done.result(timeout)
        except TimeoutError:
            pass
        except KeyboardInterrupt:
            self.cancel_if_running()
            raise
        return self

    def __await__(self) -> Generator[Any, None, BatchHandle]:
        return self._wait_async().__await__()

    async def _wait_async(self) -> BatchHandle:
        # Wake every 0.1 s rather than sleeping until the batch ends: ipykernel 7 delivers a kernel
        # interrupt to an awaiting cell with a callback that only runs when the cell's loop wakes up.
        try:
            while not self.state.done.done():
                await asyncio.sleep(0.1)
        except (asyncio.CancelledError, KeyboardInterrupt):  # the awaiting cell was interrupted: so is the batch
            self.cancel_if_running()
            raise
        return self

    def cancel_if_running(self) -> None:
        """Cancel what has not finished, if anything has not (an interrupt's clean-up)."""
        if not self.done:
            try:
                self.cancel()
            except InvalidOperationError:
                pass

    def on_finish(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` once the batch ends, before anyone waiting on it wakes (at once if it has ended)."""
        def register() -> bool:
            if self.state.ended_at is not None:
                return True
            self.state.on_finish.append(fn)
            return False
        if sched_loop.call(register):
            fn()

    def cancel(self) -> int:
        """Cancel what has not finished (completed items stay); an error if the batch already ended."""
        return self.executor.cancel_batch(self.name)

    # -- figures and frames --------------------------------------------------------------------------
    def records(self) -> list[ExecutionRecord]:
        recs = self.executor.records
        return sorted((recs[i] for i in self.state.ids if i in recs), key=lambda r: r.index)

    @property
    def status(self) -> str:
        if self.state.ended_at is None:
            return "running"
        return "cancelled" if self.state.cancelled else "finished"

    def metrics(self) -> dict[str, Any]:
        """Totals, successes, failures, average time, concurrency, queue length, error rate, tokens, cost."""
        return figures(self.records(), self.state)

    def results(self) -> pd.DataFrame:
        """One row per input: input columns, final text, status, error, tokens, cost, latency, ids."""
        from .frames import results_frame

        return results_frame(self.records(), self.columns)

    def executions(self) -> pd.DataFrame:
        from .frames import records_frame

        return records_frame(self.records())

    def logs(self) -> pd.DataFrame:
        from .frames import logs_frame

        self.executor.store.flush()
        return logs_frame(self.executor.store.logs(self.name))

    def __repr__(self) -> str:
        m = self.metrics()
        return (f"<agio batch {self.name!r} {self.status}: {m['done']}/{m['total']} done, "
                f"{m['completed']} completed, {m['failures']} failed, {m['cancelled']} cancelled>")


_agents: dict[str, Agent] = {}  # batch name -> the agent it ran with in this process


def batch(agent: Agent, inputs: Any, *, prompt: str | None = None, name: str | None = None,
          concurrency: int = 8, priority: int = 0, timeout: float | None = None, retries: int = 0,
          retry_delay: float = 1.0, rate_limit: RateLimit | dict[str, Any] | None = None,
          max_tokens: int | None = None, batch_max_tokens: int | None = None, batch_max_cost: float | None = None,
          executor: Executor | None = None, repository: Repository | None = None,
          backend: Any = None, address: str | None = None) -> BatchHandle:
    """Run ``agent`` on every input, in the background; returns a :class:`BatchHandle` at once.

    ``inputs``: a list of strings, or a DataFrame whose columns fill ``{column}`` placeholders of
    ``prompt``. ``name`` makes the batch resumable by name (same inputs: only unfinished items run).
    ``rate_limit``: a :class:`RateLimit` or ``{"rpm": .., "tpm": .., "endpoint": ..}``, shared by every
    batch naming the same endpoint. ``max_tokens`` is each execution's token budget,
    ``batch_max_tokens`` the whole batch's; ``batch_max_cost`` (USD) ends the batch once it is spent,
    each run getting what is left as its own ``max_cost``. ``backend="ray"`` runs the items on Ray (``address=``
    for an existing cluster).
    """
    if not isinstance(agent, Agent):
        raise SchedulingError(f"agent must be an agio Agent, got {type(agent).__name__}")
    if concurrency < 1:
        raise SchedulingError(f"concurrency must be at least 1, got {concurrency}")
    if retry_delay < 0:
        raise SchedulingError(f"retry_delay must be >= 0, got {retry_delay}")
    if batch_max_tokens is not None and batch_max_tokens < 1:
        raise SchedulingError(f"batch_max_tokens must be >= 1, got {batch_max_tokens}")
    if batch_max_cost is not None:
        if batch_max_cost <= 0:
            raise SchedulingError(f"batch_max_cost must be a positive amount of USD, got {batch_max_cost!r}")
        check_priced(agent.model_name)  # an unknown price would make the budget meaningless
    if backend not in (None, "local", "ray"):
        raise SchedulingError(f"unknown backend {backend!r}; use 'local' or 'ray'")
    if address is not None and backend != "ray":
        raise SchedulingError("address= names a Ray cluster: use it with backend='ray'")
    if isinstance(rate_limit, dict):
        rate_limit = RateLimit(**rate_limit)
    rows, queries, columns = _rows(inputs, prompt)
    executor = executor or _executor_for(repository, backend, address, agent)
    name = name or f"batch-{new_id()[:8]}"
    options = {"concurrency": concurrency, "priority": priority, "timeout": timeout, "retries": retries,
               "retry_delay": retry_delay, "max_tokens": max_tokens, "batch_max_tokens": batch_max_tokens,
               "batch_max_cost": batch_max_cost,
               "rate_limit": None if rate_limit is None else {"rpm": rate_limit.rpm, "tpm": rate_limit.tpm,
                                                               "endpoint": rate_limit.endpoint}}
    fingerprint = _fingerprint(queries)
    stored = executor.store.get_batch(name)
    running = executor.batches.get(name)
    if running is not None and not running.done.done():
        raise SchedulingError(f"batch {name!r} is already running in this kernel; wait for it or cancel it")
    if stored is not None and stored.get("fingerprint") != fingerprint:
        raise SchedulingError(f"a batch named {name!r} already exists with different inputs "
                              f"({stored.get('n')} items stored, {len(queries)} given); choose another name")
    if stored is None:
        executor.store.put_batch({"id": name, "name": name, "created_at": now(), "n": len(queries),
                                  "fingerprint": fingerprint, "agent_name": agent.name,
                                  "model_name": agent.model_name, "prompt": prompt, "columns": columns,
                                  "inputs": rows, "options": options})
    _agents[name] = agent
    return _start(executor, agent, name, rows, queries, columns, options, rate_limit)


def _executor_for(repository: Repository | None, backend: Any, address: str | None, agent: Agent) -> Executor:
    if backend is None or backend == "local":
        return default_executor(repository)
    if backend == "ray":
        from .ray_backend import ray_executor

        return ray_executor(repository, address, agent)
    raise SchedulingError(f"unknown backend {backend!r}; use 'local' or 'ray'")


def _start(executor: Executor, agent: Agent, name: str, rows: list[dict[str, Any]], queries: list[str],
           columns: list[str], options: dict[str, Any], rate_limit: RateLimit | None) -> BatchHandle:
    done = {r.index: r for r in _reconcile(executor, executor.store.records(name))}
    state = executor.batch_state(name, concurrency=options["concurrency"], max_tokens=options["batch_max_tokens"],
                                 max_cost=options.get("batch_max_cost"))
    todo: list[tuple[ExecutionRequest, ExecutionRecord | None]] = []
    for index, (row, query) in enumerate(zip(rows, queries)):
        rec = done.get(index)
        if rec is not None and rec.status in (ExecStatus.COMPLETED, ExecStatus.FAILED, ExecStatus.TIMED_OUT):
            executor.records[rec.id] = rec  # finished in an earlier kernel: kept, not run again
            state.ids.append(rec.id)
            continue
        request = ExecutionRequest(agent=agent, query=query, batch=name, index=index, inputs=row,
                                   priority=options["priority"], timeout=options["timeout"],
                                   retries=options["retries"], retry_delay=options["retry_delay"],
                                   max_tokens=options["max_tokens"], rate_limit=rate_limit, resumable=True)
        if rec is not None:
            rec.status, rec.error = ExecStatus.QUEUED, None
            executor.store.log(rec, "resumed: queued again after an interrupted or cancelled attempt")
        todo.append((request, rec))
    handle = BatchHandle(name, executor, state, columns)
    if todo:
        executor.submit_many(todo)
    else:
        executor.call_done(state)
    return handle


def _reconcile(executor: Executor, records: list[ExecutionRecord]) -> list[ExecutionRecord]:
    """Records of an earlier kernel, corrected from the runs: a run that completed is a completed item."""
    repo = executor.repository
    for rec in records:
        if rec.status.is_terminal and rec.status is not ExecStatus.CANCELLED:
            continue
        base = f"{rec.batch}-{rec.index:05d}"
        for attempt in range(1, rec.attempts + 2):
            session_id = base if attempt == 1 else f"{base}-a{attempt}"
            finished = [r for r in repo.list_runs(session_id) if r.status is RunStatus.COMPLETED]
            if finished:
                run = finished[-1]
                m = run.metrics
                rec.status, rec.result, rec.error = ExecStatus.COMPLETED, run.final_text, None
                rec.session_id, rec.run_id, rec.attempts = session_id, run.id, max(rec.attempts, attempt)
                rec.prompt_tokens, rec.completion_tokens, rec.total_tokens = (
                    m.prompt_tokens or 0, m.completion_tokens or 0, m.total_tokens or 0)
                rec.model_calls, rec.tool_calls = m.model_calls, m.tool_calls
                rec.started_at = rec.started_at or run.started_at
                rec.ended_at = run.ended_at
                rec.duration_ms = m.duration_ms
                executor.store.put(rec)
                executor.store.log(rec, f"completed in an earlier kernel (run {run.id}); not run again")
                break
    return records


def resume_batch(name: str, agent: Agent | None = None, *, executor: Executor | None = None,
                 repository: Repository | None = None) -> BatchHandle:
    """Run the unfinished items of a stored batch again (after a restart, a crash or a cancel).

    ``agent`` defaults to the one the batch ran with in this kernel, else an ``Agent`` named like the
    batch's agent in the notebook's namespace.
    """
    executor = executor or default_executor(repository)
    name = resolve_filter(lambda _, n: executor.store.resolve_batch(n), None, name)  # as shown, or a prefix
    stored = executor.store.get_batch(name)
    if stored is None:
        known = ", ".join(executor.store.batch_names()[-5:]) or "none"
        raise SchedulingError(f"no batch named {name!r} in the store (recent: {known})")
    agent = agent or _agents.get(name) or _find_agent(stored.get("agent_name"))
    if agent is None:
        raise SchedulingError(f"batch {name!r} ran with agent {stored.get('agent_name')!r}, which is not defined "
                              "here; pass it: resume_batch(name, agent)")
    o = stored["options"]
    rl = o.get("rate_limit")
    rows = stored["inputs"]
    queries = [fill(stored["prompt"], r) if stored.get("prompt") else r["input"] for r in rows]
    if _fingerprint(queries) != stored["fingerprint"]:
        raise SchedulingError(f"batch {name!r} is stored inconsistently (its inputs do not match its fingerprint)")
    _agents[name] = agent
    return _start(executor, agent, name, rows, queries, stored["columns"], o, RateLimit(**rl) if rl else None)


def _find_agent(agent_name: str | None) -> Agent | None:
    main = sys.modules.get("__main__")
    found = [v for v in vars(main).values() if isinstance(v, Agent)] if main is not None else []
    named = [a for a in found if a.name == agent_name]
    return named[-1] if named else None


def run_jobs(jobs: Sequence[tuple[Agent, str | None, str]], *, name: str | None = None, concurrency: int = 8,
             priority: int = 0, timeout: float | None = None, retries: int = 0, retry_delay: float = 1.0,
             max_tokens: int | None = None, executor: Executor | None = None,
             repository: Repository | None = None) -> BatchHandle:
    """Run ``(agent, session_id_or_None, query)`` jobs, each an execution, and return a batch handle.

    For tools built on the executor (sweeps across models and prompts): a job may continue an
    existing session or a fork of one (``session_id``), or start a new session (``None``). Results
    come back with ``handle.results()`` (columns ``agent``, ``session``, ``query``). Such a batch is
    not resumable by name: its sessions are the caller's.
    """
    if not jobs:
        raise SchedulingError("the job list is empty: nothing to run")
    for i, job in enumerate(jobs):
        if len(job) != 3 or not isinstance(job[0], Agent) or not isinstance(job[2], str):
            raise SchedulingError(f"jobs[{i}] must be (Agent, session id or None, query string)")
    executor = executor or default_executor(repository)
    name = name or f"jobs-{new_id()[:8]}"
    state = executor.batch_state(name, concurrency=concurrency)
    columns = ["agent", "session", "query"]
    requests: list[tuple[ExecutionRequest, ExecutionRecord | None]] = [
        (ExecutionRequest(agent=agent, query=query, batch=name, index=i, session_id=session,
                          inputs={"agent": agent.name, "session": session, "query": query}, priority=priority,
                          timeout=timeout, retries=retries, retry_delay=retry_delay, max_tokens=max_tokens), None)
        for i, (agent, session, query) in enumerate(jobs)]
    executor.submit_many(requests)
    return BatchHandle(name, executor, state, columns)
