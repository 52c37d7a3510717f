"""Export a store (or one session) for sharing: JSON Lines, or Parquet through pyarrow.

Both go through the Repository protocol, so every backend exports the same way, and both load back
(:func:`load_export`) into an in-memory repository that builds the same frames as the original.

A whole store's export carries everything it holds (see :mod:`.contents`): besides ``sessions``,
``runs``, ``steps`` (every attempt) and ``events``, the table ``journal`` (one row per document of every
named journal: ``journal``, ``table``, ``key``, ``doc``: memory and its vectors, feedback, batches and
executions, plans, exercise progress, …) and ``files`` (the files kept beside the store, workspaces:
``path``, ``mode``, ``link``, ``data`` in base64). A one-session export carries that session's records.

- JSON Lines: one ``{"table": ..., "doc": {...}}`` per line, documents exactly as stored.
- Parquet: a directory with one ``<table>.parquet`` per table; one column per top-level field, nested
  fields (metrics, tool calls, payloads, journal documents) as JSON text, named in the file's metadata
  (``agio_json_columns``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

import orjson

from ..core import AgentRun, AgentSession, Step, StepEvent, mask
from .base import Repository, iter_events
from .contents import file_docs, journal_rows, write_files, write_journal_rows
from .journal import atomic_write
from .memory import InMemoryRepository

TABLES = ("sessions", "runs", "steps", "events", "journal", "files")


def iter_records(repository: Repository, session_id: str | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(table, doc)`` for everything stored (or one session's), sessions first; secrets masked (an export
    is shared)."""
    for table, doc in _records(repository, session_id):
        yield table, mask(doc)


def _records(repository: Repository, session_id: str | None) -> Iterator[tuple[str, dict[str, Any]]]:
    sessions = repository.list_sessions()
    if session_id is not None:
        sessions = [s for s in sessions if s.session_id == session_id]
    for session in sessions:
        yield "sessions", session.to_dict()
    runs = list(repository.iter_run_dicts(session_id))
    for run in runs:
        yield "runs", run
    for step in repository.iter_step_dicts(session_id):
        yield "steps", step
    for run in runs:
        for event in iter_events(repository, run["id"]):
            yield "events", event.to_dict()
    if session_id is None:  # journals and files belong to the store, not to one session
        for name, table, key, doc in journal_rows(repository):
            yield "journal", {"journal": name, "table": table, "key": key, "doc": doc}
        for doc in file_docs(repository):
            yield "files", doc


def export_jsonl(repository: Repository, path: str | os.PathLike[str], session_id: str | None = None) -> int:
    """Write the store as JSON Lines (atomically); returns how many records."""
    lines = [orjson.dumps({"table": table, "doc": doc}) for table, doc in iter_records(repository, session_id)]
    atomic_write(Path(path), b"\n".join(lines) + (b"\n" if lines else b""))
    return len(lines)


_ABSENT = "_agio_absent"  # a Parquet table's column naming the keys each record did not have


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        from ..core import AgioError

        raise AgioError("Parquet export needs pyarrow: pip install 'agio-notebook[parquet]'") from None
    return pyarrow


def export_parquet(repository: Repository, directory: str | os.PathLike[str],
                   session_id: str | None = None) -> dict[str, int]:
    """Write one Parquet file per table into ``directory``; returns rows per table."""
    pa = _pyarrow()
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    rows: dict[str, list[dict[str, Any]]] = {t: [] for t in TABLES}
    for table, doc in iter_records(repository, session_id):
        rows[table].append(doc)
    counts = {}
    for table, docs in rows.items():
        columns: dict[str, list[Any]] = {}
        for doc in docs:
            for key in doc:
                columns.setdefault(key, [])
        # a table's columns hold every key any of its records has; which ones a record lacked is kept
        # apart, so that it comes back as it was (a run's "output": absent, or an answer that was None)
        absent = [[k for k in columns if k not in doc] or None for doc in docs]
        for key in columns:
            columns[key] = [doc.get(key) for doc in docs]
        if any(absent):
            columns[_ABSENT] = absent
        nested = sorted(k for k, values in columns.items() if any(isinstance(v, (dict, list)) for v in values))
        for key in nested:
            columns[key] = [None if v is None else json.dumps(v) for v in columns[key]]
        arrays = {}
        for key, values in columns.items():
            try:
                arrays[key] = pa.array(values)
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):  # mixed types, ints past 64 bits: as JSON text
                arrays[key] = pa.array([None if v is None else json.dumps(v) for v in values])
                nested.append(key)
        schema_meta = {b"agio_json_columns": json.dumps(sorted(nested)).encode(), b"agio_table": table.encode()}
        tbl = pa.table(arrays).replace_schema_metadata(schema_meta) if arrays else \
            pa.table({}).replace_schema_metadata(schema_meta)
        tmp = out / f".{table}.parquet.tmp"
        pa.parquet.write_table(tbl, tmp)
        os.replace(tmp, out / f"{table}.parquet")
        counts[table] = len(docs)
    return counts


def _parquet_records(directory: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    pa = _pyarrow()
    for table in TABLES:
        path = directory / f"{table}.parquet"
        if not path.exists():
            continue
        tbl = pa.parquet.read_table(path)
        meta = tbl.schema.metadata or {}
        nested = set(json.loads(meta.get(b"agio_json_columns", b"[]")))
        for row in tbl.to_pylist():
            doc = {k: (json.loads(v) if k in nested and v is not None else v) for k, v in row.items()}
            for key in doc.pop(_ABSENT, None) or ():
                doc.pop(key, None)
            yield table, doc


def load_export(path: str | os.PathLike[str], files_root: str | os.PathLike[str] | None = None) -> InMemoryRepository:
    """An export (a ``.jsonl`` file or a Parquet directory) as a repository: frames, replay, retry, executions,
    memory. Files it carries (workspaces) are written under ``files_root``, by default a folder beside the
    export (``<export>.files``), which becomes the repository's ``files_root``."""
    path = Path(path)
    if path.is_dir():
        records: Iterator[tuple[str, dict[str, Any]]] = _parquet_records(path)
    else:
        records = ((r["table"], r["doc"]) for r in map(orjson.loads, path.read_bytes().splitlines()) if r)
    repo = InMemoryRepository()
    journal: list[tuple[str, str, str, dict[str, Any]]] = []
    files: list[dict[str, Any]] = []
    for table, doc in records:
        if table == "sessions":
            repo.commit(session=AgentSession.from_dict(doc))
        elif table == "runs":
            repo.commit(run=AgentRun.from_dict(doc))
        elif table == "steps":
            repo.commit(steps=[Step.from_dict(doc)])
        elif table == "events":
            repo.commit(events=[StepEvent.from_dict(doc)])
        elif table == "journal":
            journal.append((doc["journal"], doc["table"], doc["key"], doc["doc"]))
        elif table == "files":
            files.append(doc)
    write_journal_rows(repo, journal)
    if files:
        root = Path(files_root) if files_root is not None else path.with_name(path.name + ".files")
        write_files(root, files)
        repo.files_root = root  # type: ignore[attr-defined]
    return repo
