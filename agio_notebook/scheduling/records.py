"""Execution records, logs and batches: the seed's ``executions`` and ``execution_logs``, stored.

Layout beside the sessions of a store (each file a TinyDB-readable journal, see ``docs/store.md``)::

    <root>/executions/<batch>.jsonl   tables: batch (one doc), executions, execution_logs

One journal per batch keeps every append small (the repository's named journals: a file of the
TinyDB store, rows of a SQL store). Record changes are group-committed (one fsync per
flush, not per change): a record that lags behind its run on disk is reconciled from the run
itself on resume, so no completed run is ever run twice.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any, Iterator

from ..core import new_id, now
from ..storage.ids import resolve_prefix
from ..storage.layout import session_file_name

Doc = dict[str, Any]


class ExecStatus(str, Enum):
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"

    @property
    def is_terminal(self) -> bool:
        return self not in (ExecStatus.QUEUED, ExecStatus.RUNNING)


EXEC_STATUSES = [s.value for s in ExecStatus]


@dataclass(slots=True)
class ExecutionRecord:
    """One execution: a batch item, a plan task or a request submitted on its own."""

    batch: str
    index: int = 0
    request: Doc = field(default_factory=dict)  # query, input columns, kind
    status: ExecStatus = ExecStatus.QUEUED
    priority: int = 0
    parent: str | None = None  # the execution (or plan) this one belongs to
    agent_name: str | None = None
    model_name: str | None = None
    result: str | None = None  # final text
    error: str | None = None
    session_id: str | None = None
    run_id: str | None = None
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cost: float | None = None
    model_calls: int = 0
    tool_calls: int = 0
    queued_at: float = field(default_factory=now)
    started_at: float | None = None
    ended_at: float | None = None
    duration_ms: float | None = None
    id: str = field(default_factory=new_id)

    def to_dict(self) -> Doc:
        # shallow on purpose (dataclasses.asdict deep-copies: ~1 ms a record, the scheduler's largest cost)
        d = {name: getattr(self, name) for name in _FIELDS}
        d["status"] = self.status.value
        d["request"] = dict(self.request)
        return d

    @classmethod
    def from_dict(cls, d: Doc) -> ExecutionRecord:
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        kw["status"] = ExecStatus(kw.get("status", "queued"))
        return cls(**kw)


_FIELDS = tuple(f.name for f in fields(ExecutionRecord))


def active_seconds(records: list[ExecutionRecord]) -> float:
    """How long some execution of ``records`` was running: the union of their [start, end] spans, so the
    hours a batch sat stopped between a cancel (or a dead kernel) and its resume are not counted."""
    total, start, end = 0.0, None, None
    for a, b in sorted((r.started_at, r.ended_at) for r in records
                       if r.started_at is not None and r.ended_at is not None and r.ended_at >= r.started_at):
        if end is None or a > end:
            total += 0.0 if end is None or start is None else end - start
            start, end = a, b
        else:
            end = max(end, b)
    return total + (0.0 if end is None or start is None else end - start)


def item_session(batch: str, index: int, attempt: int) -> str:
    """The session of a batch item's attempt: derived, so a resume finds what any attempt stored."""
    base = f"{batch}-{index:05d}"
    return base if attempt <= 1 else f"{base}-a{attempt}"

KEYS = {
    "batch": lambda d: d["id"],
    "executions": lambda d: d["id"],
    "execution_logs": lambda d: f"{d['execution_id']}:{d['n']}",
}


class ExecutionStore:
    """The records kept beside a repository's sessions, in its named journals ``executions/<batch>``
    (a file of the TinyDB store, rows of a SQL store); buffered writes, one commit per batch and flush.

    A repository without named journals keeps the records in this object only.
    """

    def __init__(self, repository: Any):
        self.repository = repository
        self.persistent = callable(getattr(repository, "journal", None))
        self._journals: dict[str, Any] = {}
        self._pending: dict[str, list[tuple[str, Doc]]] = {}
        self._log_n: dict[str, int] = {}
        self._lock = threading.RLock()
        self._flushing = threading.RLock()
        self._memory: dict[str, dict[str, dict[str, Doc]]] = {}

    @staticmethod
    def journal_name(batch: str) -> str:
        """``executions/<batch>`` with the batch name made safe for a file name (hashed when it is not)."""
        return "executions/" + session_file_name(batch)[: -len(".jsonl")]

    def _journal(self, batch: str) -> Any:
        j = self._journals.get(batch)
        if j is None:
            j = self._journals[batch] = self.repository.journal(self.journal_name(batch), KEYS)
        return j

    # -- writes ------------------------------------------------------------------------------------
    def put(self, record: ExecutionRecord) -> None:
        """Queue a record's current version for the next flush."""
        with self._lock:
            self._pending.setdefault(record.batch, []).append(("executions", record.to_dict()))

    def log(self, record: ExecutionRecord, message: str, level: str = "info") -> None:
        with self._lock:
            n = self._log_n.get(record.id, 0) + 1
            self._log_n[record.id] = n
            self._pending.setdefault(record.batch, []).append(("execution_logs", {
                "execution_id": record.id, "batch": record.batch, "n": n, "ts": now(), "level": level,
                "attempt": record.attempts, "message": message}))

    def put_batch(self, doc: Doc) -> None:
        """Write a batch's (or plan's) own document now: creating one fails loudly if the store is locked."""
        with self._flushing, self._lock:
            self._write(doc["id"], [("batch", doc)])

    def _write(self, batch: str, records: list[tuple[str, Doc]]) -> None:
        if not self.persistent:
            tables = self._memory.setdefault(batch, {})
            for table, doc in records:
                tables.setdefault(table, {})[KEYS[table](doc)] = doc
            return
        self._journal(batch).append(records)

    def flush(self) -> None:
        """Make every queued change durable: one append (one fsync) per batch."""
        with self._flushing:  # writers wait for each other, not for put()
            with self._lock:
                pending, self._pending = self._pending, {}
            for batch, records in pending.items():
                self._write(batch, records)

    # -- reads -------------------------------------------------------------------------------------
    def _tables(self, batch: str) -> dict[str, dict[str, Doc]] | None:
        if not self.persistent:
            return self._memory.get(batch)
        if batch not in self._journals and self.journal_name(batch) not in self.repository.journal_names(
                self.journal_name(batch)):
            return None
        j = self._journal(batch)
        j.refresh()
        return j.tables

    def get_batch(self, batch: str) -> Doc | None:
        with self._flushing, self._lock:
            tables = self._tables(batch)
            return None if tables is None else tables.get("batch", {}).get(batch)

    def records(self, batch: str) -> list[ExecutionRecord]:
        with self._flushing, self._lock:
            tables = self._tables(batch)
            docs = [] if tables is None else list(tables.get("executions", {}).values())
        return [ExecutionRecord.from_dict(d) for d in docs]

    def logs(self, batch: str) -> list[Doc]:
        with self._flushing, self._lock:
            tables = self._tables(batch)
            return [] if tables is None else list(tables.get("execution_logs", {}).values())

    def batch_names(self) -> list[str]:
        """Every batch (and plan) with records here, by its own name."""
        if not self.persistent:
            return list(self._memory)
        with self._flushing, self._lock:
            names: list[str] = []
            for journal_name in self.repository.journal_names("executions/"):
                j = self.repository.journal(journal_name, KEYS)
                batch_docs = j.tables.get("batch", {})
                names += list(batch_docs)
                for name in batch_docs:
                    self._journals.setdefault(name, j)
            return names

    def resolve_batch(self, name: str) -> str:
        """The batch ``name`` names: the name itself or a unique prefix of 6+ characters of one."""
        names = set(self.batch_names())
        return resolve_prefix("batch", name, names.__contains__, lambda prefix: names)

    def iter_records(self) -> Iterator[ExecutionRecord]:
        for batch in self.batch_names():
            yield from self.records(batch)

    def close(self) -> None:
        self.flush()
        with self._lock:
            for j in self._journals.values():
                j.close()
            self._journals.clear()
