"""InMemoryRepository: the Repository protocol in process memory (tests, benchmarks, scratch work)."""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from ..core import AgentRun, AgentSession, NotFoundError, SessionBusyError, Step, StepEvent
from .damage import Damage
from .prune import prune
from .reports import Pruned, Repaired, SessionSize, StoreStats
from .run_query import FACETS, RunFilter, RunPage, check_limit, facets_of, newest_first, run_row


class MemoryJournal:
    """A named journal kept in process memory (the interface of ``Repository.journal``)."""

    def __init__(self, keys: dict[str, Any]):
        self.keys = keys
        self.tables: dict[str, dict[str, dict[str, Any]]] = {}
        self.on_change: Any = None
        self.lines = 0

    def refresh(self, **_: Any) -> bool:
        return False

    def append(self, records: Iterable[tuple[str, dict[str, Any]]], deletes: Iterable[tuple[str, str]] = ()) -> None:
        for table, doc in records:
            key = self.keys[table](doc) if table in self.keys else str(doc.get("id"))
            self.tables.setdefault(table, {})[key] = doc
            if self.on_change is not None:
                self.on_change(table, key, doc)
        for table, key in deletes:
            self.tables.get(table, {}).pop(key, None)
            if self.on_change is not None:
                self.on_change(table, key, None)

    def compact(self) -> bool:
        return True

    def close(self) -> None:
        pass


class InMemoryRepository:
    """Keeps live objects (no copies), so a commit costs a few dict writes."""

    durable = False  # nothing to wait for: commits are made inline, not on a writer thread

    def __init__(self) -> None:
        self._sessions: dict[str, AgentSession] = {}
        self._steps: dict[str, dict[str, Step]] = {}  # session -> step id -> step
        self._runs: dict[str, AgentRun] = {}
        self._events: dict[str, list[StepEvent]] = {}  # run -> events
        self._claimed: set[str] = set()
        self._journals: dict[str, MemoryJournal] = {}
        self.files_root: Any = None  # no folder of its own (a loaded export sets one for the files it carries)

    def commit(self, *, session: AgentSession | None = None, run: AgentRun | None = None,
               steps: Iterable[Step] = (), events: Iterable[StepEvent] = ()) -> None:
        if session is not None:
            self._sessions[session.session_id] = session
        if run is not None:
            self._runs[run.id] = run
            if run.session_id not in self._sessions:
                self._sessions[run.session_id] = AgentSession(session_id=run.session_id)
        for step in steps:
            if step.session_id not in self._sessions:
                self._sessions[step.session_id] = AgentSession(session_id=step.session_id)
            self._steps.setdefault(step.session_id, {})[step.id] = step
        for event in events:
            self._events.setdefault(event.run_id, []).append(event)

    def get_session(self, session_id: str) -> AgentSession | None:
        return self._sessions.get(session_id)

    def list_sessions(self) -> list[AgentSession]:
        return sorted(self._sessions.values(), key=lambda s: s.created_at)

    def get_steps(self, session_id: str, start_seq: int | None = None, end_seq: int | None = None,
                  *, include_superseded: bool = False) -> list[Step]:
        steps = [s for s in self._steps.get(session_id, {}).values()
                 if (include_superseded or not s.superseded)
                 and (start_seq is None or s.sequence >= start_seq)
                 and (end_seq is None or s.sequence <= end_seq)]
        steps.sort(key=lambda s: (s.sequence, s.attempt))
        return steps

    def get_last_step(self, session_id: str) -> Step | None:
        steps = self.get_steps(session_id)
        return steps[-1] if steps else None

    def delete_steps(self, session_id: str, start_seq: int) -> int:
        steps = self._steps.get(session_id, {})
        doomed = [k for k, s in steps.items() if s.sequence >= start_seq]
        for k in doomed:
            del steps[k]
        return len(doomed)

    def get_run(self, run_id: str) -> AgentRun | None:
        return self._runs.get(run_id)

    def list_runs(self, session_id: str | None = None) -> list[AgentRun]:
        runs = [r for r in self._runs.values() if session_id is None or r.session_id == session_id]
        return sorted(runs, key=lambda r: r.started_at)

    def get_events(self, run_id: str, cursor: int = 0, limit: int = 100) -> list[StepEvent]:
        return [e for e in self._events.get(run_id, []) if e.seq > cursor][:limit]

    def query_runs(self, where: RunFilter = RunFilter(), limit: int = 50, cursor: str | None = None) -> RunPage:
        return newest_first((r.to_dict() for r in self._runs.values()), where, check_limit(limit), cursor)

    def run_facets(self, limit: int = 100) -> dict[str, list[str]]:
        rows = [run_row(r.to_dict()) for r in self._runs.values()]
        return facets_of({name: {row[column] for row in rows} for name, column in FACETS.items()}, limit)

    def iter_step_dicts(self, session_id: str | None = None) -> Iterator[dict[str, Any]]:
        for sid, steps in self._steps.items():
            if session_id is None or sid == session_id:
                for step in steps.values():
                    yield step.to_dict()

    def iter_run_dicts(self, session_id: str | None = None) -> Iterator[dict[str, Any]]:
        for run in self.list_runs(session_id):
            yield run.to_dict()

    def ids_with_prefix(self, kind: str, prefix: str, limit: int = 20) -> list[str]:
        ids = self._runs if kind == "run" else self._sessions
        return sorted(i for i in ids if i.startswith(prefix))[:limit]

    # -- named journals -------------------------------------------------------------------------
    def journal(self, name: str, keys: dict[str, Any]) -> MemoryJournal:
        journal = self._journals.get(name)
        if journal is None:
            journal = self._journals[name] = MemoryJournal(keys)
        elif keys:  # its owner's keys (a journal loaded from an export was filled with the export's)
            journal.keys = keys
        return journal

    def journal_names(self, prefix: str = "") -> list[str]:
        return sorted(n for n in self._journals if n.startswith(prefix))

    # -- claims: one process, so a set; nothing can be left running by a dead process ----------
    def claim_session(self, session_id: str, what: str = "a run") -> None:
        if session_id in self._claimed:
            raise SessionBusyError(f"session {session_id} is in use by another run of this process")
        self._claimed.add(session_id)

    def release_session(self, session_id: str) -> None:
        self._claimed.discard(session_id)

    def recover_interrupted(self, session_id: str | None = None) -> list[str]:
        return []

    # -- maintenance ---------------------------------------------------------------------------
    def stats(self, top: int = 5) -> StoreStats:
        sizes = [SessionSize(sid, len(self._steps.get(sid, {})), len(self.list_runs(sid)), 0) for sid in self._sessions]
        statuses: dict[str, int] = {}
        for run in self._runs.values():
            statuses[run.status.value] = statuses.get(run.status.value, 0) + 1
        return StoreStats(len(self._sessions), len(self._runs), sum(len(s) for s in self._steps.values()),
                          sum(len(e) for e in self._events.values()), 0, statuses,
                          sorted(sizes, key=lambda s: -s.steps)[:top])

    def verify(self) -> list[Damage]:
        return []

    def repair(self) -> list[Repaired]:
        return []

    def compact(self, min_lines: int = 1) -> list:
        return []

    def delete_session(self, session_id: str) -> Pruned:
        if session_id not in self._sessions:
            raise NotFoundError(f"no session {session_id!r}")
        if session_id in self._claimed:
            raise SessionBusyError(f"session {session_id} is in use by a run of this process")
        runs = [r.id for r in self.list_runs(session_id)]
        gone = Pruned(1, len(runs), len(self._steps.pop(session_id, {})),
                      sum(len(self._events.pop(r, [])) for r in runs))
        for r in runs:
            del self._runs[r]
        del self._sessions[session_id]
        return gone

    def delete_run(self, run_id: str) -> Pruned:
        run = self._runs.get(run_id)
        if run is None:
            raise NotFoundError(f"no run {run_id!r}")
        if run.session_id in self._claimed:
            raise SessionBusyError(f"session {run.session_id} is in use by a run of this process")
        steps = self._steps.get(run.session_id, {})
        doomed = [k for k, s in steps.items() if s.run_id == run_id]
        for k in doomed:
            del steps[k]
        del self._runs[run_id]
        return Pruned(0, 1, len(doomed), len(self._events.pop(run_id, [])))

    def prune(self, *, superseded: bool = False, older_than: Any = None) -> Pruned:
        return prune(self, superseded=superseded, older_than=older_than, remove_superseded=self._prune_superseded)

    def _prune_superseded(self) -> Pruned:
        total = Pruned()
        for sid, steps in self._steps.items():
            if sid in self._claimed:
                continue
            doomed = [k for k, s in steps.items() if s.superseded]
            for k in doomed:
                del steps[k]
            total += Pruned(0, 0, len(doomed), 0)
        for run in [r for r in self._runs.values() if r.superseded_by and r.session_id not in self._claimed]:
            del self._runs[run.id]
            total += Pruned(0, 1, 0, len(self._events.pop(run.id, [])))
        return total

    def close(self) -> None:
        pass
