"""Copy a store to another store, of any backend, without loss (``agio store migrate SRC DST``)."""

from __future__ import annotations

from dataclasses import dataclass

from ..core import AgentRun, AgentSession, Step, StoreError
from .base import Repository, iter_events


@dataclass(frozen=True)
class MigrationReport:
    sessions: int
    runs: int
    steps: int
    events: int


def migrate(source: Repository, target: Repository, *, merge: bool = False) -> MigrationReport:
    """Copy every session with its runs, steps (all attempts) and events, one commit per session.

    A target that already holds sessions is refused unless ``merge=True`` (then records with the same
    ids are replaced by the source's).
    """
    existing = target.list_sessions()
    if existing and not merge:
        raise StoreError(f"the target store {getattr(target, 'root', '')} is not empty ({len(existing)} sessions); "
                         "pass merge=True (--merge) to copy into it anyway")
    counts = [0, 0, 0, 0]
    for session in source.list_sessions():
        sid = session.session_id
        steps = [Step.from_dict(d) for d in source.iter_step_dicts(sid)]
        runs = [AgentRun.from_dict(d) for d in source.iter_run_dicts(sid)]
        events = [e for run in runs for e in iter_events(source, run.id)]
        target.commit(session=AgentSession.from_dict(session.to_dict()), steps=steps, events=events)
        for run in runs:  # the protocol commits one run record per call
            target.commit(run=run)
        counts = [counts[0] + 1, counts[1] + len(runs), counts[2] + len(steps), counts[3] + len(events)]
    return MigrationReport(*counts)
