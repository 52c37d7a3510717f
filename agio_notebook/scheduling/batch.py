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
from ..core import AgentRun, InvalidOperationError, RunStatus, new_id, now
from ..models.pricing import check_priced
from ..storage import Repository
from ..storage.ids import resolve_filter
from . import loop as sched_loop
from . import options as check
from .errors import SchedulingError
from .executor import (BatchState, ExecutionRequest, Executor, budget_spent, cancelled_for_budget, default_executor,
                       figures)
from .limits import RateLimit
from .records import ExecStatus, ExecutionRecord, active_seconds, item_session

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
    # every option is checked before anything is stored or queued: a refused batch leaves nothing behind
    options = _options(concurrency=concurrency, priority=priority, timeout=timeout, retries=retries,
                       retry_delay=retry_delay, rate_limit=rate_limit, max_tokens=max_tokens,
                       batch_max_tokens=batch_max_tokens, batch_max_cost=batch_max_cost)
    rate_limit = check.rate_limit(rate_limit)
    if batch_max_cost is not None:
        check_priced(agent.model_name)  # an unknown price would make the budget meaningless
    if backend not in (None, "local", "ray"):
        raise SchedulingError(f"unknown backend {backend!r}; use 'local' or 'ray'")
    if address is not None and backend != "ray":
        raise SchedulingError("address= names a Ray cluster: use it with backend='ray'")
    rows, queries, columns = _rows(inputs, check.prompt(prompt))
    name = check.name(name)
    executor = executor or _executor_for(repository, backend, address, agent)
    name = name or f"batch-{new_id()[:8]}"
    fingerprint = _fingerprint(queries)
    executor.refuse_running(name)
    stored = executor.store.get_batch(name)
    if stored is not None and stored.get("fingerprint") != fingerprint:
        raise SchedulingError(f"a batch named {name!r} already exists with different inputs "
                              f"({stored.get('n')} items stored, {len(queries)} given); choose another name")
    definition = None if stored is not None else {
        "id": name, "name": name, "created_at": now(), "n": len(queries), "fingerprint": fingerprint,
        "agent_name": agent.name, "model_name": agent.model_name, "prompt": prompt, "columns": columns,
        "inputs": rows, "options": options}
    _agents[name] = agent
    return _start(executor, agent, name, rows, queries, columns, options, rate_limit, definition)


def _options(*, concurrency: Any, priority: Any, timeout: Any, retries: Any, retry_delay: Any, rate_limit: Any,
             max_tokens: Any, batch_max_tokens: Any, batch_max_cost: Any) -> dict[str, Any]:
    """The batch's options as stored with its definition, each checked (one line for the first bad one)."""
    limit = check.rate_limit(rate_limit)
    return {"concurrency": check.whole("concurrency", concurrency, minimum=1),
            "priority": check.priority(priority),
            "timeout": check.real("timeout", timeout, positive=True, optional=True, what="a positive number of seconds (None: no limit)"),
            "retries": check.whole("retries", retries, minimum=0),
            "retry_delay": check.real("retry_delay", retry_delay),
            "max_tokens": check.whole("max_tokens", max_tokens, minimum=1, optional=True),
            "batch_max_tokens": check.whole("batch_max_tokens", batch_max_tokens, minimum=1, optional=True),
            "batch_max_cost": check.real("batch_max_cost", batch_max_cost, positive=True, optional=True,
                                         what="a positive amount of USD"),
            "rate_limit": None if limit is None else {"rpm": limit.rpm, "tpm": limit.tpm, "endpoint": limit.endpoint,
                                                      "period": limit.period}}


def _executor_for(repository: Repository | None, backend: Any, address: str | None, agent: Agent) -> Executor:
    if backend is None or backend == "local":
        return default_executor(repository)
    if backend == "ray":
        from .ray_backend import ray_executor

        return ray_executor(repository, address, agent)
    raise SchedulingError(f"unknown backend {backend!r}; use 'local' or 'ray'")


def _start(executor: Executor, agent: Agent, name: str, rows: list[dict[str, Any]], queries: list[str],
           columns: list[str], options: dict[str, Any], rate_limit: RateLimit | None,
           definition: dict[str, Any] | None = None) -> BatchHandle:
    """Store the definition and every item's record durably, then queue what is unfinished.

    Nothing runs before the records are on disk: a kill at any moment after this leaves a record for
    every item, and each attempt's session derives from (batch, item, attempt), so a resume finds
    every run an item made, finished or not.
    """
    stored = [] if definition is not None else executor.store.records(name)
    done = {r.index: r for r in _reconcile(executor, name, len(rows), stored)} if definition is None else {}
    earlier = active_seconds(list(done.values()))  # before queuing again resets what these records say
    # the budget is the whole batch's: what its earlier starts spent counts, a resume gets only what is left
    spent = BatchState(name, max_tokens=options["batch_max_tokens"], max_cost=options.get("batch_max_cost"),
                       tokens=sum(r.total_tokens for r in done.values()),
                       cost=_sum_known(r.cost for r in done.values()))
    out_of_budget = budget_spent(spent)
    finished: list[ExecutionRecord] = []
    todo: list[tuple[ExecutionRequest, ExecutionRecord | None]] = []
    for index, (row, query) in enumerate(zip(rows, queries)):
        rec = done.get(index)
        if rec is not None and (rec.status in (ExecStatus.COMPLETED, ExecStatus.FAILED, ExecStatus.TIMED_OUT)
                                or cancelled_for_budget(rec)):
            finished.append(rec)  # finished in an earlier kernel (or cancelled for the budget): kept, not run again
            continue
        request = ExecutionRequest(agent=agent, query=query, batch=name, index=index, inputs=row,
                                   priority=options["priority"], timeout=options["timeout"],
                                   retries=options["retries"], retry_delay=options["retry_delay"],
                                   max_tokens=options["max_tokens"], rate_limit=rate_limit, resumable=True)
        todo.append((request, executor.new_record(request, rec)))
    for request, _ in todo:
        executor.check(request)
    if definition is not None:
        executor.store.put_batch(definition)  # fails loudly (a locked store) before anything is queued
    if out_of_budget is not None:  # nothing may start: what is unfinished is cancelled for the budget, not run
        for _, rec in todo:
            rec.status, rec.error, rec.ended_at = ExecStatus.CANCELLED, out_of_budget, now()
            executor.store.put(rec)
            executor.store.log(rec, f"not run again: {out_of_budget}", "error")
            finished.append(rec)
        todo = []
    for _, rec in todo:
        executor.store.put(rec)
        executor.store.log(rec, f"queued with priority {rec.priority}" if rec.attempts == 0 else
                           f"resumed: queued again after {rec.attempts} interrupted or cancelled attempt(s); "
                           "the next runs in a new session")
    executor.store.flush()  # the definition and every record are durable before the first item starts
    state = executor.batch_state(name, concurrency=options["concurrency"], max_tokens=options["batch_max_tokens"],
                                 max_cost=options.get("batch_max_cost"))
    state.earlier_s, state.tokens, state.cost = earlier, spent.tokens, spent.cost
    for rec in finished:
        executor.records[rec.id] = rec
        state.ids.append(rec.id)
    handle = BatchHandle(name, executor, state, columns)
    if todo:
        executor.submit_many(todo, stored=True)
    else:
        executor.call_done(state)
    return handle


def _sum_known(values: Any) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _reconcile(executor: Executor, name: str, n: int, records: list[ExecutionRecord]) -> list[ExecutionRecord]:
    """Records of an earlier kernel, corrected from the runs each item's sessions hold.

    A run that completed makes its item completed (its record may lag behind it), and an item whose
    attempts left sessions behind counts them, so its next attempt runs in a new session and its
    model never sees the input twice. An item with no record at all (a store written before records
    were made durable up front) is found the same way.
    """
    by_index = {r.index: r for r in records}
    prefix = f"{name}-"
    runs: dict[str, list[dict[str, Any]]] = {}
    for doc in executor.repository.iter_run_dicts():
        if str(doc.get("session_id", "")).startswith(prefix):
            runs.setdefault(doc["session_id"], []).append(doc)
    for index in range(n):
        rec = by_index.get(index)
        if rec is not None and rec.status.is_terminal and rec.status is not ExecStatus.CANCELLED:
            continue
        attempt = 1
        while (docs := runs.get(item_session(name, index, attempt))) is not None:
            if rec is None:
                rec = by_index[index] = ExecutionRecord(batch=name, index=index)
            rec.attempts = max(rec.attempts, attempt)
            completed = [d for d in docs if d.get("status") == RunStatus.COMPLETED.value]
            if completed:
                _completed_from(executor, rec, AgentRun.from_dict(max(completed, key=lambda d: d["started_at"])))
                break
            attempt += 1
    return list(by_index.values())


def _completed_from(executor: Executor, rec: ExecutionRecord, run: AgentRun) -> None:
    stored = executor.repository.get_run(run.id) or run  # the session's own version has the final metrics
    m = stored.metrics
    rec.status, rec.result, rec.error = ExecStatus.COMPLETED, stored.final_text, None
    rec.session_id, rec.run_id = stored.session_id, stored.id
    rec.prompt_tokens, rec.completion_tokens, rec.total_tokens = (
        m.prompt_tokens or 0, m.completion_tokens or 0, m.total_tokens or 0)
    rec.model_calls, rec.tool_calls = m.model_calls, m.tool_calls
    rec.started_at = rec.started_at or stored.started_at
    rec.ended_at = stored.ended_at
    rec.duration_ms = m.duration_ms
    executor.store.put(rec)
    executor.store.log(rec, f"completed in an earlier kernel (run {stored.id}); not run again")


def resume_batch(name: str, agent: Agent | None = None, *, executor: Executor | None = None,
                 repository: Repository | None = None) -> BatchHandle:
    """Run the unfinished items of a stored batch again (after a restart, a crash or a cancel).

    ``agent`` defaults to the one the batch ran with in this kernel, else an ``Agent`` named like the
    batch's agent in the notebook's namespace.
    """
    executor = executor or default_executor(repository)
    name = resolve_filter(lambda _, n: executor.store.resolve_batch(n), None, name)  # as shown, or a prefix
    executor.refuse_running(name)  # a second start would run every unfinished item twice
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
    concurrency = check.whole("concurrency", concurrency, minimum=1)
    executor = executor or default_executor(repository)
    name = check.name(name) or f"jobs-{new_id()[:8]}"
    executor.refuse_running(name)
    columns = ["agent", "session", "query"]
    requests: list[tuple[ExecutionRequest, ExecutionRecord | None]] = [
        (ExecutionRequest(agent=agent, query=query, batch=name, index=i, session_id=session,
                          inputs={"agent": agent.name, "session": session, "query": query}, priority=priority,
                          timeout=timeout, retries=retries, retry_delay=retry_delay, max_tokens=max_tokens), None)
        for i, (agent, session, query) in enumerate(jobs)]
    for request, _ in requests:
        executor.check(request)
    state = executor.batch_state(name, concurrency=concurrency)
    executor.submit_many(requests)
    return BatchHandle(name, executor, state, columns)
