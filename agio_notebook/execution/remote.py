"""Runs that cross a process: the limits of nesting carried in a remote call's metadata.

An agent that calls another agent over MCP or A2A would start a fresh tree there, at depth 0 with a
budget of its own, so an agent calling itself through its own server would never stop. So a tool that
calls a remote agent from inside a run does it in :func:`remote_call`: the call's metadata (MCP ``_meta``,
A2A message ``metadata``) carries the calling run's depth and its share of what is left of its outermost
run's ``max_tokens``, ``max_cost`` and ``max_nested_runs`` (set aside in the tree until the call ends, so
parallel calls cannot each be handed all of it). The server (``serve/``) reads them with
:meth:`CallerLimits.from_meta`, refuses a call past :data:`MAX_DEPTH` or past its share, starts its run one
level deeper with its limits capped by that share (:func:`served_config`, :class:`RemoteParent`), and answers
with what that run and everything it called spent, its runs included (:meth:`RemoteParent.spent_meta`); the
caller counts that in its tree (:meth:`RemoteCall.answered`), so the outermost budget holds across processes.
"""

from __future__ import annotations

import dataclasses
import math
import re
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from ..core import AgentRun, AgioError, ExecutionConfig
from ..tools.context import get_call
from .nested import MAX_DEPTH, Loan, Tree, least, current_scope, tree_of

CALLER_KEY = "agio-notebook/caller"  # in the request's metadata: who calls, how deep, with what budget left
SPENT_KEY = "agio-notebook/spent"  # in the answer's metadata: what the served run and its tree spent


_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")

# Who can name the span a remote call is made from, as a W3C ``traceparent`` (``telemetry.py`` registers
# itself while it exports): (calling run id, tool call id) -> traceparent or None. A served run's spans then
# join the caller's trace under that tool call's span, in whichever process serves it.
trace_parent_of: list[Callable[[str, str | None], str | None]] = []
# The limits of the remote call a served run is answering (set by the server around the run), for the hooks.
served_caller: ContextVar[CallerLimits | None] = ContextVar("agio_served_caller", default=None)


class RemoteLimitError(AgioError):
    """A remote call refused by its limits (too deep, no budget left) or carrying malformed limits."""


@dataclass(frozen=True)
class CallerLimits:
    """The calling run as a server sees it: its depth, its ids, and the outermost budget left."""

    depth: int
    run_id: str | None = None
    tool_call_id: str | None = None
    max_tokens: int | None = None
    max_cost: float | None = None
    traceparent: str | None = None  # the calling tool call's span, when its process exports traces
    max_runs: int | None = None  # runs it may start: the served run itself and those nested in it

    def to_meta(self) -> dict[str, Any]:
        return {CALLER_KEY: {k: v for k, v in dataclasses.asdict(self).items() if v is not None}}

    @classmethod
    def from_meta(cls, meta: Any) -> CallerLimits | None:
        """The limits a request carries (None when it carries none); one clear line when they are malformed
        (they come from the network: a token holder can send anything)."""
        value = meta.get(CALLER_KEY) if isinstance(meta, dict) else None
        if value is None:
            return None
        if not isinstance(value, dict):
            raise RemoteLimitError(f"metadata {CALLER_KEY!r} must be an object, got {type(value).__name__}")
        depth = value.get("depth")
        if isinstance(depth, bool) or not isinstance(depth, int) or not 0 <= depth <= 10_000:
            raise RemoteLimitError(f"metadata {CALLER_KEY!r}: depth must be a whole number >= 0, got {depth!r}")
        tokens, cost = value.get("max_tokens"), value.get("max_cost")
        if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0):
            raise RemoteLimitError(f"metadata {CALLER_KEY!r}: max_tokens must be a whole number >= 0, got {tokens!r}")
        if cost is not None and (isinstance(cost, bool) or not isinstance(cost, (int, float))
                                 or not math.isfinite(cost) or cost < 0):
            raise RemoteLimitError(f"metadata {CALLER_KEY!r}: max_cost must be a number >= 0, got {cost!r}")
        runs = value.get("max_runs")
        if runs is not None and (isinstance(runs, bool) or not isinstance(runs, int) or runs < 0):
            raise RemoteLimitError(f"metadata {CALLER_KEY!r}: max_runs must be a whole number >= 0, got {runs!r}")
        ids = {k: value.get(k) for k in ("run_id", "tool_call_id")}
        for key, text in ids.items():
            if text is not None and (not isinstance(text, str) or not 0 < len(text) <= 128):
                raise RemoteLimitError(f"metadata {CALLER_KEY!r}: {key} must be a short string")
        parent = value.get("traceparent")
        if parent is not None and (not isinstance(parent, str) or not _TRACEPARENT.match(parent)):
            raise RemoteLimitError(f"metadata {CALLER_KEY!r}: traceparent must be a W3C traceparent")
        return cls(depth, ids["run_id"], ids["tool_call_id"], tokens, None if cost is None else float(cost), parent,
                   runs)

    def check(self, agent_name: str) -> None:
        """Refuse a call that would nest past :data:`MAX_DEPTH` or has no budget left (one line each)."""
        if self.depth + 1 > MAX_DEPTH:
            raise RemoteLimitError(f"agent {agent_name!r} not run: agents may nest {MAX_DEPTH} levels deep, and "
                                   f"this call came from depth {self.depth} (the depth crosses servers)")
        if self.max_tokens == 0:
            raise RemoteLimitError(f"agent {agent_name!r} not run: the calling run's outermost token budget "
                                   "is used up")
        if self.max_cost == 0:
            raise RemoteLimitError(f"agent {agent_name!r} not run: the calling run's outermost max_cost is used up")
        if self.max_runs == 0:
            raise RemoteLimitError(f"agent {agent_name!r} not run: the calling run's outermost run already started "
                                   "its max_nested_runs nested runs")


def served_config(config: ExecutionConfig, limits: CallerLimits | None) -> ExecutionConfig:
    """``config`` with its budget capped by what the caller has left."""
    if limits is None:
        return config
    runs = None if limits.max_runs is None else max(limits.max_runs - 1, 0)  # the served run is one of them
    return dataclasses.replace(config, max_tokens=least(config.max_tokens, limits.max_tokens),
                               max_cost=least(config.max_cost, limits.max_cost),
                               max_nested_runs=least(config.max_nested_runs, runs))


class RemoteParent:
    """The parent link of a served run (``StepRunner.run_stream(_parent=)``), and what the run spent.

    Called from another agio run (``limits`` given), the run names the calling run and tool call, sits one
    level deeper, and is the root of its own budget tree here (the caller's tree lives in the caller's
    process, which counts what this run reports back). :meth:`see` after each event keeps the run's tree,
    which is forgotten as the run ends: its own usage plus its tree's nested spend (agents called as tools,
    and what its own remote calls reported) is what :meth:`spent_meta` reports.
    """

    def __init__(self, limits: CallerLimits | None):
        self.limits = limits
        self.run: AgentRun | None = None
        self._tree: Tree | None = None

    def apply(self, run: AgentRun) -> None:
        self.run = run
        if self.limits is not None:
            run.parent_run_id = self.limits.run_id or "remote"
            run.parent_tool_call_id = self.limits.tool_call_id
            run.depth, run.root_run_id = self.limits.depth + 1, run.id

    def see(self) -> None:
        tree = tree_of(self.run) if self.run is not None else None
        if tree is not None:
            self._tree = tree

    def spent_meta(self, run: dict[str, Any]) -> dict[str, Any]:
        tree = self._tree
        runs = 1 + (tree.nested_runs if tree is not None else 0)  # the run, and every run it started
        if tree is not None and tree.limited:  # every call of the tree settled into it, remote ones too
            return {SPENT_KEY: {"tokens": tree.spent_tokens, "cost": tree.spent_cost, "runs": runs}}
        m = run.get("metrics") or {}  # no budget here: only the run's own usage is known
        return {SPENT_KEY: {"tokens": m.get("total_tokens") or 0, "cost": m.get("cost"), "runs": runs}}


class RemoteCall:
    """A call to an agent in another process made from inside a run (:func:`remote_call`): ``meta`` is what
    it carries (None outside a run), :meth:`answered` counts what its answer says was spent."""

    def __init__(self, tree: Tree | None, loan: Loan | None, meta: dict[str, Any] | None):
        self.meta, self._tree, self._loan = meta, tree, loan
        self._spent: tuple[int, float, int] | None = None

    def answered(self, meta: Any) -> None:
        """The remote call answered (or was refused, or failed, after its runs spent something): what it
        reports spent, its runs too, counts against the calling run's tree; nothing reported counts one run."""
        spent = meta.get(SPENT_KEY) if isinstance(meta, dict) else None
        spent = spent if isinstance(spent, dict) else {}
        tokens, cost, runs = spent.get("tokens"), spent.get("cost"), spent.get("runs", 1)
        self._spent = (tokens if _count(tokens) else 0,
                       float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) and cost > 0
                       else 0.0, runs if _count(runs) else 1)

    def end(self) -> None:
        if self._tree is not None and self._loan is not None:
            tokens, cost, runs = self._spent or (0, 0.0, 0)  # never answered: none of its spend is known
            self._tree.repaid(self._loan, tokens, cost, runs)
            self._loan = None


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@contextmanager
def remote_call() -> Iterator[RemoteCall]:
    """A call to an agent in another process, from the current tool call: its metadata carries the calling
    run's depth and its share of what is left of the outermost run's budget (``max_tokens``, ``max_cost``,
    ``max_nested_runs``), set aside in the tree until the call ends, however it ends."""
    scope, call = current_scope.get(), get_call()
    if scope is None:
        yield RemoteCall(None, None, None)
        return
    run, tree = scope.run, tree_of(scope.run)
    loan = tree.lend(tuple(call.batch_call_ids) if call is not None else ()) if tree is not None else None
    call_id = call.tool_call_id if call else None
    parent = next((tp for named in trace_parent_of if (tp := named(run.id, call_id))), None)
    limits = CallerLimits(run.depth, run.id, call_id, loan.tokens if loan else None, loan.cost if loan else None,
                          parent, loan.runs if loan else None)
    remote = RemoteCall(tree, loan, limits.to_meta())
    try:
        yield remote
    finally:
        remote.end()
