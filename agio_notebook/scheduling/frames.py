"""Execution records as DataFrames with real dtypes: the executions frame and a batch's results."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..storage import Repository
from ..storage.ids import resolve_filter
from .records import EXEC_STATUSES, ExecutionRecord


def _times(values: list[float | None]) -> pd.Series:
    return pd.to_datetime(pd.Series(values, dtype="float64"), unit="s", utc=True)


def records_frame(records: list[ExecutionRecord]) -> pd.DataFrame:
    """One row per execution (the seed's ``executions`` table)."""
    return pd.DataFrame({
        "execution_id": pd.Series([r.id for r in records], dtype="string"),
        "batch": pd.Series([r.batch for r in records], dtype="string"),
        "index": pd.Series([r.index for r in records], dtype="Int64"),
        "status": pd.Categorical([r.status.value for r in records], categories=EXEC_STATUSES),
        "kind": pd.Series([r.request.get("kind", "run") for r in records], dtype="string"),
        "query": pd.Series([r.request.get("query") for r in records], dtype="string"),
        "result": pd.Series([r.result for r in records], dtype="string"),
        "error": pd.Series([r.error for r in records], dtype="string"),
        "priority": pd.Series([r.priority for r in records], dtype="Int64"),
        "parent": pd.Series([r.parent for r in records], dtype="string"),
        "agent_name": pd.Series([r.agent_name for r in records], dtype="string"),
        "model_name": pd.Series([r.model_name for r in records], dtype="string"),
        "attempts": pd.Series([r.attempts for r in records], dtype="Int64"),
        "session_id": pd.Series([r.session_id for r in records], dtype="string"),
        "run_id": pd.Series([r.run_id for r in records], dtype="string"),
        "prompt_tokens": pd.Series([r.prompt_tokens for r in records], dtype="Int64"),
        "completion_tokens": pd.Series([r.completion_tokens for r in records], dtype="Int64"),
        "total_tokens": pd.Series([r.total_tokens for r in records], dtype="Int64"),
        "cost": pd.Series([r.cost for r in records], dtype="Float64"),
        "queued_at": _times([r.queued_at for r in records]),
        "started_at": _times([r.started_at for r in records]),
        "ended_at": _times([r.ended_at for r in records]),
        "duration_ms": pd.Series([r.duration_ms for r in records], dtype="Float64"),
    })


def results_frame(records: list[ExecutionRecord], columns: list[str]) -> pd.DataFrame:
    """One row per input, indexed by its position in the input (an unnamed index): its columns, then the
    outcome; ``session_id``/``run_id`` join the steps frames. An outcome column whose name the input
    already uses is ``agio_<name>``, so no name of the library's hides one of the user's."""
    inputs = pd.DataFrame([r.request.get("inputs") or {} for r in records], columns=columns)
    out = records_frame(records)
    outcome = pd.DataFrame({
        "final_text": out["result"], "status": out["status"], "error": out["error"],
        "prompt_tokens": out["prompt_tokens"], "completion_tokens": out["completion_tokens"],
        "total_tokens": out["total_tokens"], "cost": out["cost"], "latency_ms": out["duration_ms"],
        "attempts": out["attempts"], "session_id": out["session_id"], "run_id": out["run_id"],
        "execution_id": out["execution_id"]})
    outcome.columns = [f"agio_{c}" if c in set(columns) else c for c in outcome.columns]
    frame = pd.concat([inputs.reset_index(drop=True), outcome], axis=1)
    frame.index = pd.Index([r.index for r in records])
    return frame


def logs_frame(docs: list[dict[str, Any]]) -> pd.DataFrame:
    docs = sorted(docs, key=lambda d: (d["ts"], d["n"]))
    return pd.DataFrame({
        "execution_id": pd.Series([d["execution_id"] for d in docs], dtype="string"),
        "ts": _times([d["ts"] for d in docs]),
        "level": pd.Series([d["level"] for d in docs], dtype="string"),
        "attempt": pd.Series([d["attempt"] for d in docs], dtype="Int64"),
        "message": pd.Series([d["message"] for d in docs], dtype="string"),
    })


def executions(status: str | None = None, batch: str | None = None, agent: str | None = None,
               since: Any = None, until: Any = None, *, repository: Repository | None = None) -> pd.DataFrame:
    """Every execution record in the store (and this kernel), filtered; times accept anything pandas parses."""
    from .executor import default_executor

    def ts(value: Any) -> float | None:
        return None if value is None else pd.Timestamp(value, tz="UTC").timestamp() \
            if not isinstance(value, (int, float)) else float(value)

    executor = default_executor(repository)
    batch = resolve_filter(lambda _, name: executor.store.resolve_batch(name), None, batch)  # a prefix works
    records = executor.list_executions(status=status, batch=batch, agent=agent, since=ts(since), until=ts(until))
    return records_frame(records)
