"""Nested runs: what a run shares with the runs of the agents it calls as tools.

A run that calls an agent as a tool gets back more than a result: the nested run's events stream into
its own event stream (as ``nested`` events tagged with their path), the nested run counts against the
outermost run's budget, and the outer run's cancellation reaches it (it runs inside the tool call's
task). This module holds the pieces the executor needs for that and nothing that runs an agent
(that is ``agent_tool.py``), so the executor can import it without a cycle.

- :func:`interleave` runs a batch of tool calls while forwarding what nested runs emit;
- :class:`Scope` is what a tool call running under a run can see of it (a contextvar);
- :class:`Tree` is the outermost run's budget and fan-out, shared by every run nested in it.
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, TypeVar

from ..core import AgentRun, ExecutionConfig, Step, StepEvent, StepEventType, run_tree
from ..models.recording import Recording
from ..storage.base import Repository, iter_events
from .recorder import RunRecorder

T = TypeVar("T")

# How deep agents may call agents (the outermost run is depth 0); past it a call is one clear tool error.
MAX_DEPTH = 5


@dataclass(frozen=True, slots=True)
class ParentLink:
    """Where a nested run sits: set on its run record when it starts."""

    run_id: str
    step_id: str | None
    tool_call_id: str
    depth: int
    root_run_id: str

    def apply(self, run: AgentRun) -> None:
        run.parent_run_id, run.parent_step_id, run.parent_tool_call_id = self.run_id, self.step_id, self.tool_call_id
        run.depth, run.root_run_id = self.depth, self.root_run_id


FIRST_ANSWER_GUESS = 256  # tokens a nested call is expected to answer with when nothing is known yet


@dataclass(frozen=True)
class Loan:
    """What a call to an agent in another process was lent of its outermost run's budget (None: unlimited)."""

    tokens: int | None
    cost: float | None
    runs: int


def least(a: Any, b: Any) -> Any:
    """The smaller of two limits, None being no limit."""
    return b if a is None else a if b is None else min(a, b)


@dataclass(frozen=True, slots=True)
class Reservation:
    """What one model call set aside from its tree's budget before it was made."""

    tokens: int
    cost: float


@dataclass
class Tree:
    """The outermost run's budget and fan-out, shared by every run nested in it.

    Every model call of every run of the tree reserves its estimate before it is made and settles it
    with what it really spent after, so parallel branches cannot all pass the same check: the tree
    spends past the outermost ``max_tokens``/``max_cost`` by no more than one call's misestimate. A
    call with no history of its own is expected to answer as long as the longest answer seen in the tree,
    and a nested run's first call at least :data:`FIRST_ANSWER_GUESS` tokens long: parallel branches that all
    start at once would otherwise each be let through on a prompt-only estimate.
    """

    root_id: str
    max_tokens: int | None
    max_cost: float | None
    max_runs: int
    spent_tokens: int = 0
    spent_cost: float = 0.0
    nested_tokens: int = 0  # of spent_tokens and spent_cost, what nested runs spent
    nested_cost: float = 0.0
    reserved_tokens: int = 0
    reserved_cost: float = 0.0
    nested_runs: int = 0
    longest_completion: int = 0
    reserved_runs: int = 0  # lent to calls to agents in other processes, in flight
    _shares: dict[tuple[str, ...], Loan] = field(default_factory=dict)  # by tool batch: each remote call's share

    @property
    def limited(self) -> bool:
        return self.max_tokens is not None or self.max_cost is not None

    def reserve(self, prompt: int, completion: int, price: Callable[[int, int], float | None], *,
                nested: bool) -> Reservation | str:
        """Set aside the next call's estimate; why it may not be made (a line) when the tree cannot afford it.

        Runs on the event loop the whole tree shares, so a check and its reservation are one step."""
        completion = max(completion, self.longest_completion, FIRST_ANSWER_GUESS if nested else 0)
        tokens = prompt + completion
        if self.max_tokens is not None:
            committed = self.spent_tokens + self.reserved_tokens
            if committed + tokens > self.max_tokens:
                return (f"token budget max_tokens={self.max_tokens} of the outermost run would be exceeded "
                        f"({self.spent_tokens} spent, {self.nested_tokens} of them by nested runs; "
                        f"{self.reserved_tokens} set aside by calls in flight; about {tokens} more needed)")
        cost = 0.0
        if self.max_cost is not None:
            estimate = price(prompt, completion)
            if estimate is None:
                return "max_cost is set but the price of a model in the outermost run's tree is unknown"
            cost = estimate
            if self.spent_cost + self.reserved_cost + cost > self.max_cost:
                return (f"max_cost (${self.max_cost:g}) of the outermost run would be exceeded: "
                        f"${self.spent_cost:.6f} spent (${self.nested_cost:.6f} by nested runs), "
                        f"${self.reserved_cost:.6f} set aside by calls in flight, next call ~${cost:.6f}")
        self.reserved_tokens += tokens
        self.reserved_cost += cost
        return Reservation(tokens, cost)

    def settle(self, reservation: Reservation, step: Step | None) -> None:
        """A reserved call ended (``step``: what it became, None if it failed before): its reservation goes,
        what it spent stays (the estimate where the spend is unknown)."""
        self.reserved_tokens -= reservation.tokens
        self.reserved_cost -= reservation.cost
        if step is not None and "reused" in step.extra:  # answered from a recording: nothing spent
            return
        m = step.metrics if step is not None else None
        tokens = m.total_tokens if m is not None else None
        cost = m.cost if m is not None else None
        spent, paid = reservation.tokens if tokens is None else tokens, reservation.cost if cost is None else cost
        self.spent_tokens += spent
        self.spent_cost += paid
        if step is None or step.run_id != self.root_id:
            self.nested_tokens += spent
            self.nested_cost += paid
        self.longest_completion = max(self.longest_completion, (m.completion_tokens or 0) if m is not None else 0)

    def spent_elsewhere(self, tokens: int, cost: float) -> None:
        """What runs in another process spent for this tree (an agio agent called over MCP or A2A reports it)."""
        self.spent_tokens += tokens
        self.spent_cost += cost
        self.nested_tokens += tokens
        self.nested_cost += cost

    def lend(self, batch: tuple[str, ...]) -> Loan:
        """What a call to an agent in another process may spend (that process counts against it, and
        reports back what it spent): of what the tree has left, an equal share for each call of the tool
        batch it is part of, set aside until it answers, so that calls made in parallel cannot each be
        handed all of it (the first of a batch fixes the share)."""
        tokens = None if self.max_tokens is None else max(self.max_tokens - self.spent_tokens - self.reserved_tokens, 0)
        cost = None if self.max_cost is None else max(self.max_cost - self.spent_cost - self.reserved_cost, 0.0)
        runs = max(self.max_runs - self.nested_runs - self.reserved_runs, 0)
        share = self._shares.get(batch)
        if share is None:
            n = max(len(batch), 1)
            share = self._shares[batch] = Loan(None if tokens is None else tokens // n,
                                               None if cost is None else cost / n, max(runs // n, min(runs, 1)))
        loan = Loan(least(share.tokens, tokens), least(share.cost, cost), min(share.runs, runs))
        self.reserved_tokens += loan.tokens or 0
        self.reserved_cost += loan.cost or 0.0
        self.reserved_runs += loan.runs
        return loan

    def repaid(self, loan: Loan, tokens: int, cost: float, runs: int) -> None:
        """A remote call ended: what it was lent is no longer set aside; what it reported spent (its runs
        included) counts."""
        self.reserved_tokens -= loan.tokens or 0
        self.reserved_cost -= loan.cost or 0.0
        self.reserved_runs -= loan.runs
        self.spent_elsewhere(tokens, cost)
        self.nested_runs += runs

    def start_nested(self) -> str | None:
        """A nested run is about to start; why not (a line) past ``max_nested_runs``."""
        if self.nested_runs >= self.max_runs:
            return (f"the outermost run already started {self.nested_runs} nested runs "
                    f"(max_nested_runs={self.max_runs}); answer with what you have")
        self.nested_runs += 1
        return None


_TREES: dict[str, Tree] = {}


def tool_engine() -> Any:
    """What agent tools and handoffs call back into (``execution.agent_tool``): handed to every tool call
    in its context, so the agent layer never imports the engine. Imported on first use, as it runs a
    ``StepRunner``, which imports this module."""
    from . import agent_tool

    return agent_tool


def needs_scope(tool: Any) -> bool:
    """Whether calling ``tool`` needs to see its run (an agent tool starts a nested run; a handoff)."""
    return tool is not None and getattr(tool.function, "needs_scope", False)


def join_tree(run: AgentRun, config: ExecutionConfig) -> Tree | None:
    """The tree ``run`` spends from: a new one for an outermost run (its config's limits hold for every run
    nested in it), the outermost run's for a nested one (None when that is not in this process)."""
    if run.tree_root_id == run.id:  # an outermost run, or one served to a run of another process (remote.py)
        tree = _TREES[run.id] = Tree(run.id, config.max_tokens, config.max_cost, config.max_nested_runs)
        return tree
    return _TREES.get(run.tree_root_id)


def tree_of(run: AgentRun) -> Tree | None:
    return _TREES.get(run.tree_root_id)


def forget_tree(run: AgentRun) -> None:
    """The root of a tree ended (an outermost run, or a run served to another process): its budget goes."""
    if run.tree_root_id == run.id:
        _TREES.pop(run.id, None)


@dataclass
class Scope:
    """The run a tool call runs under, as an agent tool needs it."""

    recorder: RunRecorder
    config: ExecutionConfig
    recording: Recording | None
    model: Any
    approver: Any  # the outer run's: tools needing approval in nested runs ask the same person
    sink: asyncio.Queue[Any]
    agents: tuple[str, ...] = ()  # agent names from the outermost run down to this one
    calls: dict[str, str] = field(default_factory=dict)  # tool call id -> the assistant step id that asked

    @property
    def run(self) -> AgentRun:
        return self.recorder.run


current_scope: ContextVar[Scope | None] = ContextVar("agio_nested_scope", default=None)
# the agent names of the runs around this one (set by an agent tool around its nested run)
current_agents: ContextVar[tuple[str, ...]] = ContextVar("agio_nested_agents", default=())


@dataclass(slots=True)
class Forward:
    """A nested run's event on its way up: the path from the run that receives it, and the event."""

    path: list[dict[str, Any]]
    event: dict[str, Any]


def forward(scope: Scope, tool_call_id: str, child_run_id: str, event: StepEvent) -> None:
    """Send a nested run's event to the run above, tagged with where it comes from."""
    here = {"tool_call_id": tool_call_id, "run_id": child_run_id}
    if event.type is StepEventType.NESTED:
        scope.sink.put_nowait(Forward([here, *event.payload["path"]], event.payload["event"]))
    else:
        scope.sink.put_nowait(Forward([here], event.to_dict()))


_DONE = object()


async def interleave(results: AsyncIterator[T], rec: RunRecorder, executor: Any, recording: Recording | None,
                     step_id: str, call_ids: list[str]) -> AsyncIterator[T | StepEvent]:
    """The batch's results, and between them a ``nested`` event for each event of a nested run.

    The batch runs in a task of its own that sees the :class:`Scope`; cancelling the caller cancels it,
    and so every nested run under it (each records its cancellation and keeps its steps).
    """
    config = executor.config
    queue: asyncio.Queue[Any] = asyncio.Queue()
    scope = Scope(rec, config, recording, executor.model, executor.approver, queue, current_agents.get(),
                  {call_id: step_id for call_id in call_ids})

    async def pump() -> None:
        try:
            async for result in results:
                queue.put_nowait(result)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which re-raises it
            queue.put_nowait(_Failure(exc))
        finally:
            queue.put_nowait(_DONE)

    token = current_scope.set(scope)
    try:
        task = asyncio.ensure_future(pump())  # copies the context: the tool calls see the scope
    finally:
        current_scope.reset(token)
    try:
        while True:
            item = await queue.get()
            if item is _DONE:
                break
            if isinstance(item, _Failure):
                raise item.exc
            if isinstance(item, Forward):
                yield rec.emit(StepEventType.NESTED, {"path": item.path, "event": item.event})
            else:
                yield item
    finally:
        if not task.done():
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@dataclass(slots=True)
class _Failure:
    exc: BaseException


def nested_events(repository: Repository, run_id: str) -> list[dict[str, Any]]:
    """The ``nested`` events of a stored run, rebuilt from its nested runs' stored events (the stream
    does not store them twice): what a transcript rebuilt from the store needs to draw the nesting."""
    runs = run_tree(repository.iter_run_dicts(), run_id)
    paths: dict[str, list[dict[str, Any]]] = {run_id: []}
    out: list[dict[str, Any]] = []
    for run in runs[1:]:
        parent = paths.get(run.get("parent_run_id") or "")
        if parent is None:
            continue
        path = paths[run["id"]] = [*parent, {"tool_call_id": run.get("parent_tool_call_id"), "run_id": run["id"]}]
        for event in iter_events(repository, run["id"]):
            out.append({"type": StepEventType.NESTED.value, "run_id": run_id, "session_id": runs[0]["session_id"], "seq": 0,
                        "ts": event.ts, "payload": {"path": path, "event": event.to_dict()}})
    return out
