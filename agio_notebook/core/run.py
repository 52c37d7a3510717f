"""Runs and sessions: light summaries. The truth lives in the steps."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Iterable

from .origin import current_notebook, current_user
from .step import new_id, now


class RunStatus(str, Enum):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    MAX_STEPS = "max_steps"
    BUDGET_EXCEEDED = "budget_exceeded"
    INTERRUPTED = "interrupted"  # its process died mid-run (kill -9, kernel restart); found by the store

    @property
    def is_terminal(self) -> bool:
        return self is not RunStatus.RUNNING


@dataclass(slots=True)
class RunMetrics:
    """Per-run totals, folded from the steps as they complete."""

    steps: int = 0
    model_calls: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    prompt_tokens: int | None = None  # None: no model call of the run reported usage (unknown, not 0)
    completion_tokens: int | None = None
    total_tokens: int | None = None
    ttft_ms: float | None = None  # of the run's first model call
    model_ms: float = 0.0
    tool_ms: float = 0.0
    duration_ms: float = 0.0
    paused_ms: float = 0.0  # waiting at step-mode pauses: part of duration_ms, never of model or tool time
    cached_tokens: int = 0
    cost: float | None = 0.0  # None once any model call's price is unknown: unknown, never 0
    reused_calls: int = 0  # model calls answered from a recording (retry/fork with reuse)
    reused_tokens: int = 0  # tokens those calls would have spent

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> RunMetrics:
        d = d or {}
        kw = {k: v for k, v in d.items() if k in cls.__slots__}
        if d and "cost" not in d:  # stored before costs were recorded: unknown
            kw["cost"] = None
        return cls(**kw)


@dataclass(slots=True)
class AgentRun:
    """One call of ``run``/``run_stream``/retry/resume: a query and the steps it produced."""

    session_id: str
    query: str | None = None
    status: RunStatus = RunStatus.RUNNING
    agent_name: str | None = None
    model_name: str | None = None
    kind: str = "run"  # run | retry | resume
    start_sequence: int | None = None  # first sequence this run wrote
    end_sequence: int | None = None  # last sequence this run wrote
    attempt: int = 1
    retry_of: str | None = None  # run id this run retries
    superseded_by: str | None = None  # run id of the retry that replaced this attempt
    final_text: str | None = None
    output: Any = None  # a typed agent's answer, as JSON data (its type: ``output_type``)
    answered: bool = False  # it gave one (None is an answer of an Optional type): ``output`` is recorded
    output_type: str | None = None  # the name of a typed agent's output type
    deps_type: str | None = None  # the type of the dependencies the run was given (never the deps themselves)
    error: str | None = None
    scores: dict[str, Any] = field(default_factory=dict)  # scorer name -> value (see agio_notebook.scoring)
    metrics: RunMetrics = field(default_factory=RunMetrics)
    id: str = field(default_factory=new_id)
    started_at: float = field(default_factory=now)
    ended_at: float | None = None
    # a nested run (an agent called as another agent's tool): the outer run, the outer assistant step
    # and tool call that asked, how deep it sits (the outermost run is 0) and the outermost run
    parent_run_id: str | None = None
    parent_step_id: str | None = None
    parent_tool_call_id: str | None = None
    depth: int = 0
    root_run_id: str | None = None
    # where it was started: the notebook (its path) and the user (on a PostgreSQL store, the database role
    # that wrote the run, which the store reports in place of what the process said)
    notebook: str | None = field(default_factory=current_notebook)
    user: str | None = field(default_factory=current_user)

    @property
    def tree_root_id(self) -> str:
        """The outermost run of this run's tree (itself when it is not nested)."""
        return self.root_run_id or self.id

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "session_id": self.session_id,
            "query": self.query,
            "status": self.status.value,
            "agent_name": self.agent_name,
            "model_name": self.model_name,
            "kind": self.kind,
            "start_sequence": self.start_sequence,
            "end_sequence": self.end_sequence,
            "attempt": self.attempt,
            "retry_of": self.retry_of,
            "superseded_by": self.superseded_by,
            "final_text": self.final_text,
            **({"output": self.output} if self.answered or self.output is not None else {}),
            **({"output_type": self.output_type} if self.output_type else {}),
            **({"deps_type": self.deps_type} if self.deps_type else {}),
            "error": self.error,
            "metrics": self.metrics.to_dict(),
            **({"scores": self.scores} if self.scores else {}),
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            **({"parent_run_id": self.parent_run_id, "parent_step_id": self.parent_step_id,
                "parent_tool_call_id": self.parent_tool_call_id, "depth": self.depth,
                "root_run_id": self.root_run_id} if self.parent_run_id else {}),
            **({"notebook": self.notebook} if self.notebook else {}),
            **({"user": self.user} if self.user else {}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AgentRun:
        kw = {k: d.get(k) for k in ("id", "session_id", "query", "agent_name", "model_name", "start_sequence",
                                     "end_sequence", "retry_of", "superseded_by", "final_text", "error", "ended_at",
                                     "parent_run_id", "parent_step_id", "parent_tool_call_id", "root_run_id",
                                     "notebook", "user", "output", "output_type", "deps_type")}
        return cls(status=RunStatus(d.get("status", "running")), kind=d.get("kind", "run"),
                   attempt=d.get("attempt", 1), metrics=RunMetrics.from_dict(d.get("metrics")),
                   scores=dict(d.get("scores") or {}),
                   started_at=d.get("started_at", 0.0), depth=d.get("depth") or 0, answered=_recorded(d), **kw)


def gave_answer(run: AgentRun | dict[str, Any]) -> bool:
    """Whether a run (or its stored dict) gave a typed answer (``None`` too, for an ``Optional`` type): it
    completed with its output recorded. The one rule for what shows an answer: frames, transcripts, a
    handle's output."""
    if isinstance(run, AgentRun):
        return run.status is RunStatus.COMPLETED and run.answered
    return run.get("status") == RunStatus.COMPLETED.value and _recorded(run)


def _recorded(run: dict[str, Any]) -> bool:
    """An output is recorded: a value, or a ``None`` a typed run gave (a table that has the column for
    every run, as Parquet's, holds ``None`` for runs that gave none, and those have no ``output_type``)."""
    return "output" in run and (run["output"] is not None or bool(run.get("output_type")))


def run_tree(run_dicts: Iterable[dict[str, Any]], root_id: str) -> list[dict[str, Any]]:
    """The run ``root_id`` and every run nested under it (at any depth), parents before children."""
    children: dict[str | None, list[dict[str, Any]]] = {}
    root: dict[str, Any] | None = None
    for d in run_dicts:
        if d.get("id") == root_id:
            root = d
        children.setdefault(d.get("parent_run_id"), []).append(d)
    if root is None:
        return []
    out, queue = [], [root]
    while queue:
        run = queue.pop(0)
        out.append(run)
        queue.extend(sorted(children.get(run["id"], ()), key=lambda d: d.get("started_at") or 0.0))
    return out


@dataclass(slots=True)
class AgentSession:
    """A conversation: the steps sharing one ``session_id``.

    A fork records where it came from (``forked_from`` session and ``forked_at`` sequence).
    """

    session_id: str = field(default_factory=new_id)
    title: str | None = None
    forked_from: str | None = None
    forked_at: int | None = None
    created_at: float = field(default_factory=now)
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "title": self.title, "forked_from": self.forked_from,
                "forked_at": self.forked_at, "created_at": self.created_at, "metadata": self.metadata}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AgentSession:
        return cls(session_id=d["session_id"], title=d.get("title"), forked_from=d.get("forked_from"),
                   forked_at=d.get("forked_at"), created_at=d.get("created_at", 0.0),
                   metadata=d.get("metadata") or {})
