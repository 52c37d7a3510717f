"""Execution records, logs and batches: the seed's ``executions`` and ``execution_logs``, stored.

Layout beside the sessions of a store (each file a TinyDB-readable journal, see ``docs/store.md``)::

    <root>/executions/<batch>.jsonl   tables: batch (one doc), executions, execution_logs

One file per batch keeps every append small. Record changes are group-committed (one fsync per
flush, not per change): a record that lags behind its run on disk is reconciled from the run
itself on resume, so no completed run is ever run twice.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import Any, Iterator

from ..core import new_id, now
from ..storage.journal import Journal
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

KEYS = {
    "batch": lambda d: d["id"],
    "executions": lambda d: d["id"],
    "execution_logs": lambda d: f"{d['execution_id']}:{d['n']}",
}


class ExecutionStore:
    """The records of one store directory; buffered writes, flushed as one commit per batch file."""

    def __init__(self, root: str | os.PathLike[str] | None, lock_timeout: float = 10.0):
        # root=None: records kept in memory only (a repository without files, e.g. in tests)
        self.dir = Path(root) / "executions" if root is not None else None
        self.lock_timeout = lock_timeout
        self._journals: dict[str, Journal] = {}
        self._pending: dict[str, list[tuple[str, Doc]]] = {}
        self._log_n: dict[str, int] = {}
        self._lock = threading.RLock()
        self._flushing = threading.RLock()
        self._memory: dict[str, dict[str, dict[str, Doc]]] = {}

    def _journal(self, batch: str) -> Journal:
        assert self.dir is not None
        j = self._journals.get(batch)
        if j is None:
            self.dir.mkdir(parents=True, exist_ok=True)
            j = self._journals[batch] = Journal(self.dir / session_file_name(batch), KEYS, self.lock_timeout)
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
        """Write a batch's own document now (creating a batch must fail loudly if the store is locked)."""
        if self.dir is None:
            self._memory.setdefault(doc["id"], {}).setdefault("batch", {})[doc["id"]] = doc
            return
        with self._flushing, self._lock:
            self._journal(doc["id"]).append([("batch", doc)])

    def flush(self) -> None:
        """Make every queued change durable: one append and one fsync per batch file."""
        with self._flushing:  # writers wait for each other, not for put()
            with self._lock:
                pending, self._pending = self._pending, {}
            for batch, records in pending.items():
                if self.dir is None:
                    tables = self._memory.setdefault(batch, {})
                    for table, doc in records:
                        tables.setdefault(table, {})[KEYS[table](doc)] = doc
                    continue
                with self._lock:
                    journal = self._journal(batch)
                journal.append(records)

    # -- reads -------------------------------------------------------------------------------------
    def _read(self, batch: str) -> Any:
        """Something with ``.tables`` for ``batch``, or None."""
        if self.dir is None:
            tables = self._memory.get(batch)
            return None if tables is None else _Tables(tables)
        if not (self.dir / session_file_name(batch)).exists():
            return None
        j = self._journal(batch)
        j.refresh()
        return j

    def get_batch(self, batch: str) -> Doc | None:
        with self._flushing, self._lock:
            j = self._read(batch)
            return None if j is None else j.tables.get("batch", {}).get(batch)

    def records(self, batch: str) -> list[ExecutionRecord]:
        with self._flushing, self._lock:
            j = self._read(batch)
            docs = [] if j is None else list(j.tables.get("executions", {}).values())
        return [ExecutionRecord.from_dict(d) for d in docs]

    def logs(self, batch: str) -> list[Doc]:
        with self._flushing, self._lock:
            j = self._read(batch)
            return [] if j is None else list(j.tables.get("execution_logs", {}).values())

    def batch_names(self) -> list[str]:
        if self.dir is None:
            return list(self._memory)
        if not self.dir.exists():
            return []
        with self._flushing, self._lock:
            names = []
            for name in sorted(os.listdir(self.dir)):
                if name.endswith(".jsonl"):
                    j = self._journal_for_file(name)
                    names += list(j.tables.get("batch", {}))
            return names

    def _journal_for_file(self, file_name: str) -> Journal:
        for j in self._journals.values():
            if j.path.name == file_name:
                j.refresh()
                return j
        j = Journal(self.dir / file_name, KEYS, self.lock_timeout)
        j.refresh()
        batch = next(iter(j.tables.get("batch", {})), None)
        if batch is not None:
            self._journals[batch] = j
        return j

    def iter_records(self) -> Iterator[ExecutionRecord]:
        for batch in self.batch_names():
            yield from self.records(batch)

    def close(self) -> None:
        self.flush()
        with self._lock:
            for j in self._journals.values():
                j.close()
            self._journals.clear()


@dataclass
class _Tables:
    tables: dict[str, dict[str, Doc]]
