"""The Repository protocol: what the engine, frames and notebook need of a store.

Reads and writes are plain (synchronous) calls: the store is local files, an
append costs one write and one fsync, and keeping it synchronous lets frames,
the CLI and the notebook use it without an event loop.

Writes go through :meth:`Repository.commit`, which makes a whole batch durable
at once (one fsync): the engine commits the assistant step before the tools
run and the tool results before the next model call, no more.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Protocol, runtime_checkable

from ..core import AgentRun, AgentSession, Step, StepEvent
from .damage import Damage
from .reports import Pruned, Repaired, StoreStats
from .run_query import RunFilter, RunPage


@runtime_checkable
class Repository(Protocol):
    """``files_root`` (an attribute, may be None): a local folder of this store's own for files kept beside
    it, such as workspaces (a PostgreSQL store's is ``./.agio/postgres-<hash of its URL>``)."""

    # -- the write path ---------------------------------------------------------
    def commit(self, *, session: AgentSession | None = None, run: AgentRun | None = None,
               steps: Iterable[Step] = (), events: Iterable[StepEvent] = ()) -> None:
        """Durably store a batch (upsert by id; later versions replace earlier ones).

        Steps and events belong to one session.  When this returns, the batch is
        on disk (fsynced) and visible to other processes.
        """
        ...

    # -- sessions ---------------------------------------------------------------
    def get_session(self, session_id: str) -> AgentSession | None: ...
    def list_sessions(self) -> list[AgentSession]: ...

    # -- steps ------------------------------------------------------------------
    def get_steps(self, session_id: str, start_seq: int | None = None, end_seq: int | None = None,
                  *, include_superseded: bool = False) -> list[Step]:
        """Steps of a session ordered by (sequence, attempt); superseded ones only when asked."""
        ...

    def get_last_step(self, session_id: str) -> Step | None:
        """The highest-sequence step that is not superseded."""
        ...

    def delete_steps(self, session_id: str, start_seq: int) -> int:
        """Remove steps with sequence >= start_seq (all attempts); returns how many."""
        ...

    # -- runs and events --------------------------------------------------------
    def get_run(self, run_id: str) -> AgentRun | None: ...
    def list_runs(self, session_id: str | None = None) -> list[AgentRun]: ...
    def get_events(self, run_id: str, cursor: int = 0, limit: int = 100) -> list[StepEvent]:
        """Stored events of a run with ``seq > cursor``, in order, at most ``limit``."""
        ...

    def query_runs(self, where: RunFilter = RunFilter(), limit: int = 50, cursor: str | None = None) -> RunPage:
        """A page of runs, newest first, matching ``where``, filtered by the store (never a read of every
        run); ``RunPage.next_cursor`` asks for the next page. See ``storage/run_query.py``."""
        ...

    def run_facets(self, limit: int = 100) -> dict[str, list[str]]:
        """The values each filter of ``query_runs`` can take: {"agent", "status", "notebook", "user"} -> sorted."""
        ...

    def ids_with_prefix(self, kind: str, prefix: str, limit: int = 20) -> list[str]:
        """Ids of ``kind`` ("run" or "session") starting with ``prefix``, sorted, at most ``limit``
        (what ``storage.ids`` resolves a typed prefix with)."""
        ...

    # -- bulk reads for frames (raw dicts, no object wrapping) ------------------
    def iter_step_dicts(self, session_id: str | None = None) -> Iterator[dict[str, Any]]: ...
    def iter_run_dicts(self, session_id: str | None = None) -> Iterator[dict[str, Any]]: ...

    # -- named journals: records other systems keep beside the sessions -----------------------------
    def journal(self, name: str, keys: dict[str, Any]) -> Any:
        """The journal ``name`` ("memory", "executions/BATCH"): ``tables`` (table -> key -> doc, current
        after ``refresh()``), ``append(records, deletes)`` (durable when it returns), ``on_change``, ``close()``.
        A file of the TinyDB store, or rows of a SQL store."""
        ...

    def journal_names(self, prefix: str = "") -> list[str]: ...

    # -- claims: one run per session at a time, across processes ---------------------------------
    def claim_session(self, session_id: str, what: str = "a run") -> None:
        """Hold the session for one run; raise ``SessionBusyError`` naming the holder (pid, host).

        A claim whose holder died is taken over, and the runs it left ``running`` become
        ``interrupted``. The engine allocates sequences only while it holds the claim, and ``commit``
        refuses a step whose sequence another current step of the session already holds.
        """
        ...

    def release_session(self, session_id: str) -> None: ...

    def recover_interrupted(self, session_id: str | None = None) -> list[str]:
        """Mark ``interrupted`` the runs left ``running`` by a process that is gone; their ids.

        Backends call it when the store is opened and before they return a run that looks running.
        """
        ...

    # -- maintenance ------------------------------------------------------------------------------
    def stats(self, top: int = 5) -> StoreStats: ...

    def verify(self) -> list[Damage]:
        """Every problem found (empty: healthy). Reads never fail on damage; they warn."""
        ...

    def repair(self) -> list[Repaired]:
        """Salvage every readable record of each damaged file into a fresh one; keep the original."""
        ...

    def delete_session(self, session_id: str) -> Pruned: ...
    def delete_run(self, run_id: str) -> Pruned: ...

    def prune(self, *, superseded: bool = False, older_than: Any = None) -> Pruned:
        """Remove superseded attempts and/or sessions whose last activity is before ``older_than``."""
        ...

    def compact(self, min_lines: int = 1) -> list[Any]:
        """Reclaim space; returns what was skipped (damaged files)."""
        ...

    def close(self) -> None: ...


def iter_events(repository: Repository, run_id: str, page: int = 500) -> Iterator[StepEvent]:
    """Every stored event of a run, in order, read a page at a time through ``get_events``."""
    cursor = 0
    while batch := repository.get_events(run_id, cursor, page):
        yield from batch
        cursor = batch[-1].seq
