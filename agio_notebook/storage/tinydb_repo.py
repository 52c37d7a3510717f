"""TinyDBRepository: the default store — a directory of TinyDB-readable journal files.

Durable (every commit fsynced before it returns), safe across processes (file locks; each writer
first reads what others appended), fast as it grows (an append touches one session file and never
re-reads or rewrites it). See ``docs/store.md``.
"""

from __future__ import annotations

import atexit
import os
import threading
import weakref
from pathlib import Path
from typing import Any, Iterable, Iterator

import orjson

from ..core import AgentRun, AgentSession, Step, StepEvent, StoreError
from .journal import Journal, atomic_write
from .layout import INDEX_KEYS, SCHEMA_VERSION, SESSION_KEYS, session_file_name, store_root

_MAX_OPEN_FILES = 128
_COMPACT_AFTER_LINES = 64


class TinyDBRepository:
    def __init__(self, path: str | os.PathLike[str] | None = None, *, lock_timeout: float = 10.0):
        self.root = store_root(path)
        self.lock_timeout = lock_timeout
        self._sessions_dir = self.root / "sessions"
        try:
            self._sessions_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the store at {self.root}: {exc}") from None
        self._check_meta()
        self._index = Journal(self.root / "index.jsonl", INDEX_KEYS, lock_timeout)
        self._index.refresh()
        self._journals: dict[str, Journal] = {}
        self._lock = threading.RLock()
        self._repaired = False
        _live.add(self)

    # -- meta ------------------------------------------------------------------
    def _check_meta(self) -> None:
        meta_path = self.root / "meta.json"
        if not meta_path.exists():
            atomic_write(meta_path, orjson.dumps({"schema_version": SCHEMA_VERSION,
                                                  "layout": "session-journals"}, option=orjson.OPT_INDENT_2))
        try:
            meta = orjson.loads(meta_path.read_bytes())
        except (orjson.JSONDecodeError, OSError) as exc:
            raise StoreError(f"store metadata {meta_path} is unreadable: {exc}") from None
        version = meta.get("schema_version")
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise StoreError(f"store {self.root} has schema version {version!r}; this agio-notebook reads "
                             f"version {SCHEMA_VERSION} (upgrade agio-notebook to open it)")
        self.schema_version = version

    # -- session journals --------------------------------------------------------
    def session_file(self, session_id: str) -> Path:
        return self._sessions_dir / session_file_name(session_id)

    def _journal(self, session_id: str, *, refresh: bool = True) -> Journal:
        journal = self._journals.get(session_id)
        if journal is None:
            journal = self._journals[session_id] = Journal(self.session_file(session_id), SESSION_KEYS,
                                                           self.lock_timeout)
        if refresh:
            journal.refresh()
        return journal

    def _limit_open_files(self, keep: Journal) -> None:
        open_ = [j for j in self._journals.values() if j._fd is not None and j is not keep]
        if len(open_) >= _MAX_OPEN_FILES:
            for j in open_:
                j.close()

    # -- writes ----------------------------------------------------------------
    def commit(self, *, session: AgentSession | None = None, run: AgentRun | None = None,
               steps: Iterable[Step] = (), events: Iterable[StepEvent] = ()) -> None:
        records: list[tuple[str, dict[str, Any]]] = []
        session_id = None
        if session is not None:
            session_id = session.session_id
            records.append(("session", session.to_dict()))
        if run is not None:
            session_id = session_id or run.session_id
            records.append(("runs", run.to_dict()))
        for step in steps:
            session_id = session_id or step.session_id
            records.append(("steps", step.to_dict()))
        for event in events:
            session_id = session_id or event.session_id
            records.append(("events", event.to_dict()))
        if session_id is None:
            return
        with self._lock:
            journal = self._journal(session_id, refresh=False)
            self._limit_open_files(journal)
            with journal.lock:  # read, decide and append as one step against other writers
                journal.refresh(repair=True)  # a torn tail from a crashed writer is cut, not reported
                known = "session" in journal.tables and session_id in journal.tables["session"]
                if not known and session is None:  # first write to a session created implicitly
                    implicit = AgentSession(session_id=session_id)
                    records.insert(0, ("session", implicit.to_dict()))
                    session = implicit
                journal.append(records)
            self._update_index(session, run)

    def _update_index(self, session: AgentSession | None, run: AgentRun | None) -> None:
        if session is None and run is None:
            return
        index = self._index
        index.refresh()
        updates: list[tuple[str, dict[str, Any]]] = []
        if session is not None:
            doc = session.to_dict()
            doc["file"] = session_file_name(session.session_id)
            updates.append(("sessions", doc))
        if run is not None:
            stored = index.tables.get("runs", {}).get(run.id)
            if stored is None or stored.get("status") != run.status.value or \
                    stored.get("superseded_by") != run.superseded_by or stored.get("scores") != (run.scores or None):
                updates.append(("runs", run.to_dict()))
        if updates:
            index.append(updates)

    def delete_steps(self, session_id: str, start_seq: int) -> int:
        with self._lock:
            journal = self._journal(session_id)
            doomed = [key for key, d in journal.tables.get("steps", {}).items() if d["sequence"] >= start_seq]
            journal.append((), [("steps", key) for key in doomed])
            return len(doomed)

    # -- reads -----------------------------------------------------------------
    def _repair_index(self) -> None:
        """Sessions whose file exists but whose index entry was lost (crash between the two writes)."""
        if self._repaired:
            return
        self._repaired = True
        indexed = {d.get("file") for d in self._index.tables.get("sessions", {}).values()}
        for name in sorted(os.listdir(self._sessions_dir)):
            if not name.endswith(".jsonl") or name in indexed:
                continue
            journal = Journal(self._sessions_dir / name, SESSION_KEYS, self.lock_timeout)
            try:
                journal.refresh()
            except StoreError:
                continue  # reported when the session itself is read
            for doc in journal.tables.get("session", {}).values():
                self._update_index(AgentSession.from_dict(doc), None)
            for doc in journal.tables.get("runs", {}).values():
                self._update_index(None, AgentRun.from_dict(doc))

    def get_session(self, session_id: str) -> AgentSession | None:
        with self._lock:
            self._index.refresh()
            doc = self._index.tables.get("sessions", {}).get(session_id)
            if doc is None and self.session_file(session_id).exists():
                doc = self._journal(session_id).tables.get("session", {}).get(session_id)
            return AgentSession.from_dict(doc) if doc is not None else None

    def list_sessions(self) -> list[AgentSession]:
        with self._lock:
            self._index.refresh()
            self._repair_index()
            docs = self._index.tables.get("sessions", {}).values()
            return sorted((AgentSession.from_dict(d) for d in docs), key=lambda s: s.created_at)

    def get_steps(self, session_id: str, start_seq: int | None = None, end_seq: int | None = None,
                  *, include_superseded: bool = False) -> list[Step]:
        with self._lock:
            if not self.session_file(session_id).exists():
                return []
            docs = self._journal(session_id).tables.get("steps", {}).values()
            picked = [d for d in docs if (include_superseded or not d.get("superseded"))
                      and (start_seq is None or d["sequence"] >= start_seq)
                      and (end_seq is None or d["sequence"] <= end_seq)]
        picked.sort(key=lambda d: (d["sequence"], d.get("attempt", 1)))
        return [Step.from_dict(d) for d in picked]

    def get_last_step(self, session_id: str) -> Step | None:
        with self._lock:
            if not self.session_file(session_id).exists():
                return None
            docs = [d for d in self._journal(session_id).tables.get("steps", {}).values()
                    if not d.get("superseded")]
        if not docs:
            return None
        return Step.from_dict(max(docs, key=lambda d: (d["sequence"], d.get("attempt", 1))))

    def get_run(self, run_id: str) -> AgentRun | None:
        with self._lock:
            self._index.refresh()
            doc = self._index.tables.get("runs", {}).get(run_id)
            if doc is not None:
                # the session file holds the latest version (the index only tracks status changes)
                journal = self._journal(doc["session_id"])
                doc = journal.tables.get("runs", {}).get(run_id, doc)
            return AgentRun.from_dict(doc) if doc is not None else None

    def list_runs(self, session_id: str | None = None) -> list[AgentRun]:
        return sorted((AgentRun.from_dict(d) for d in self.iter_run_dicts(session_id)), key=lambda r: r.started_at)

    def get_events(self, run_id: str, cursor: int = 0, limit: int = 100) -> list[StepEvent]:
        with self._lock:
            self._index.refresh()
            run = self._index.tables.get("runs", {}).get(run_id)
            if run is None:
                return []
            docs = [d for d in self._journal(run["session_id"]).tables.get("events", {}).values()
                    if d["run_id"] == run_id and d["seq"] > cursor]
        docs.sort(key=lambda d: d["seq"])
        return [StepEvent.from_dict(d) for d in docs[:limit]]

    # -- bulk reads for frames -----------------------------------------------------
    def iter_step_dicts(self, session_id: str | None = None) -> Iterator[dict[str, Any]]:
        if session_id is not None:
            with self._lock:
                if not self.session_file(session_id).exists():
                    return
                docs = list(self._journal(session_id).tables.get("steps", {}).values())
            yield from docs
            return
        for name in sorted(os.listdir(self._sessions_dir)):
            if name.endswith(".jsonl"):
                yield from read_table_fast(self._sessions_dir / name, "steps")

    def iter_run_dicts(self, session_id: str | None = None) -> Iterator[dict[str, Any]]:
        with self._lock:
            self._index.refresh()
            self._repair_index()
            docs = [d for d in self._index.tables.get("runs", {}).values()
                    if session_id is None or d["session_id"] == session_id]
        yield from docs

    # -- maintenance -----------------------------------------------------------------
    def compact(self, min_lines: int = 1) -> None:
        """Rewrite journals with at least ``min_lines`` change lines as single snapshots (atomic)."""
        with self._lock:
            for journal in [*self._journals.values(), self._index]:
                if journal.lines >= min_lines:
                    journal.compact()

    def close(self) -> None:
        with self._lock:
            try:
                self.compact(_COMPACT_AFTER_LINES)
            except StoreError:
                pass  # another process holds a lock: compaction waits for a later close
            for journal in self._journals.values():
                journal.close()
            self._index.close()
            self._journals.clear()


def read_table_fast(path: Path, table: str) -> list[dict[str, Any]]:
    """Current docs of one table, parsing only that table's lines (frames read 100k steps this way)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    docs: dict[str, dict[str, Any]] = {}
    prefix = b'{"t":"%s"' % table.encode()
    key_fn = SESSION_KEYS[table]
    lines = data.split(b"\n")
    lines.pop()  # an unterminated tail is a torn write: ignore it
    for n, raw in enumerate(lines):
        if n == 0 and raw.startswith(b'{"agio_journal"'):
            try:
                snap = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise StoreError(f"store file {path} is corrupt (snapshot line): {exc}") from None
            for doc in (snap.get("snapshot") or {}).get(table, {}).values():
                docs[key_fn(doc)] = doc
        elif raw.startswith(prefix):
            try:
                rec = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise StoreError(f"store file {path} is corrupt at line {n + 1}: {exc}") from None
            if rec.get("x"):
                docs.pop(rec["k"], None)
            else:
                doc = rec["d"]
                docs[key_fn(doc)] = doc
    return list(docs.values())


_live: "weakref.WeakSet[TinyDBRepository]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for repo in list(_live):
        try:
            repo.close()
        except Exception:  # noqa: BLE001 - exiting anyway
            pass
