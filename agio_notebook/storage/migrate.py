"""Copy a store to another store, of any backend, without loss (``agio store migrate SRC DST``).

Everything the store holds travels: sessions, runs, steps (every attempt), events, every named journal
(memory with its vectors, feedback, batches and their executions, plans, exercise progress, and any
journal added later, whatever its name; see :mod:`.contents`) and the files kept beside the store
(workspaces). The report counts what was copied.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core import AgentRun, AgentSession, Step, StoreError
from .base import Repository, iter_events
from .contents import copy_files, journal_rows, write_journal_rows


@dataclass(frozen=True)
class MigrationReport:
    sessions: int
    runs: int
    steps: int
    events: int
    journals: int = 0  # named journals copied
    journal_records: int = 0  # their documents
    files: int = 0  # files beside the store (workspaces)

    def to_text(self, where: str) -> str:
        return (f"copied {self.sessions} sessions, {self.runs} runs, {self.steps} steps, {self.events} events, "
                f"{self.journal_records} records in {self.journals} journals and {self.files} files to {where}")


def migrate(source: Repository, target: Repository, *, merge: bool = False) -> MigrationReport:
    """Copy every session with its runs, steps (all attempts) and events, one commit per session, then every
    journal and the files beside the store.

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
    rows = list(journal_rows(source))
    records = write_journal_rows(target, rows)
    files = copy_files(source, target)
    return MigrationReport(*counts, journals=len({r[0] for r in rows}), journal_records=records, files=files)
