"""InMemoryRepository: the Repository protocol in process memory (tests, benchmarks, scratch work)."""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from ..core import AgentRun, AgentSession, Step, StepEvent


class InMemoryRepository:
    """Keeps live objects (no copies), so a commit costs a few dict writes."""

    def __init__(self) -> None:
        self._sessions: dict[str, AgentSession] = {}
        self._steps: dict[str, dict[str, Step]] = {}  # session -> step id -> step
        self._runs: dict[str, AgentRun] = {}
        self._events: dict[str, list[StepEvent]] = {}  # run -> events

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

    def iter_step_dicts(self, session_id: str | None = None) -> Iterator[dict[str, Any]]:
        for sid, steps in self._steps.items():
            if session_id is None or sid == session_id:
                for step in steps.values():
                    yield step.to_dict()

    def iter_run_dicts(self, session_id: str | None = None) -> Iterator[dict[str, Any]]:
        for run in self.list_runs(session_id):
            yield run.to_dict()

    def close(self) -> None:
        pass
