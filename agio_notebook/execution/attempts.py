"""Attempts of a run: list them, and make any of them the current one again.

A run and its retries form a family; the n-th attempt is ``attempt == n`` in that family. Exactly one
attempt is current: its steps are the session's current steps from where the attempts diverge. Making
another attempt current swaps which steps are superseded, in one durable commit; nothing is deleted.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core import AgentRun, InvalidOperationError, NotFoundError, Step
from ..storage import current_store
from ..storage.base import Repository
from ..storage.ids import resolve_run_id
from ..tools.context import history_changed
from .retry import attempt_family
from .session_claims import claim_session


@dataclass(frozen=True)
class Attempt:
    number: int
    run: AgentRun
    current: bool
    steps: int  # how many steps this attempt wrote

    @property
    def run_id(self) -> str:
        return self.run.id


def is_current(run: AgentRun) -> bool:
    """A run is current when nothing replaced it and it wrote at least one step."""
    return run.superseded_by is None and run.start_sequence is not None


def attempts_of(repository: Repository | str, run_id: str | None = None) -> list[Attempt]:
    """Every attempt of ``run_id``'s family, oldest first, with which one is current.

    ``attempts_of(run_id)`` reads the current store; ``attempts_of(repository, run_id)`` another one.
    ``agio_notebook.list_attempts`` is the same as a frame.
    """
    if isinstance(repository, str):
        repository, run_id = current_store(), repository
    run = _require_run(repository, run_id)
    # run records only (no steps read): a run writes one contiguous range of sequences
    return [Attempt(i + 1, r, is_current(r), _written(r)) for i, r in enumerate(attempt_family(repository, run))]


def _written(run: AgentRun) -> int:
    if run.start_sequence is None or run.end_sequence is None:
        return 0
    return run.end_sequence - run.start_sequence + 1


def use_attempt(repository: Repository | str, run_id: str | int, number: int | None = None) -> AgentRun:
    """Make attempt ``number`` of ``run_id``'s family current again; returns that attempt's run.

    ``use_attempt(run_id, number)`` acts on the current store; ``use_attempt(repository, run_id, number)``
    on another one. The runs replaced together with it (later queries of the same conversation) come back
    with it, and whatever replaced them is superseded in turn.
    """
    if isinstance(repository, str):
        repository, run_id, number = current_store(), repository, run_id  # type: ignore[assignment]
    if isinstance(number, bool) or not isinstance(number, int):
        raise InvalidOperationError(f"an attempt number is a whole number, got {number!r}")
    run_id = resolve_run_id(repository, run_id)
    attempts = attempts_of(repository, run_id)
    if not 1 <= number <= len(attempts):
        raise NotFoundError(f"run {run_id} has attempts 1..{len(attempts)}, not {number}")
    target = attempts[number - 1]
    if target.steps == 0:
        raise InvalidOperationError(f"attempt {number} of run {run_id} ({target.run.status.value}) wrote no step; "
                                    "there is nothing to make current")
    if target.current:
        return target.run
    session_id = target.run.session_id
    with claim_session(repository, session_id, "a change of attempts"):
        runs = {r.id: r for r in repository.list_runs(session_id)}
        replaced_by = runs[target.run_id].superseded_by
        group = {target.run_id} | {r.id for r in runs.values() if replaced_by is not None
                                   and r.superseded_by == replaced_by and r.start_sequence is not None}
        steps = repository.get_steps(session_id, include_superseded=True)
        back = [s for s in steps if s.run_id in group and s.superseded]
        if not back:
            raise InvalidOperationError(f"attempt {number} of run {run_id} has no superseded step to restore")
        start = min(s.sequence for s in back)
        out = [s for s in steps if not s.superseded and s.sequence >= start and s.run_id not in group]
        _flip(back, False)
        _flip(out, True)
        repository.commit(steps=[*out, *back])  # one commit, the replaced first: never two current steps at a sequence
        for rid in group:
            runs[rid].superseded_by = None
            repository.commit(run=runs[rid])
        for rid in {s.run_id for s in out if s.run_id} - group:
            if rid in runs:
                runs[rid].superseded_by = target.run_id
                repository.commit(run=runs[rid])
    history_changed(session_id, repository)  # e.g. the workspace becomes that attempt's
    return runs[target.run_id]


def _flip(steps: list[Step], superseded: bool) -> None:
    for step in steps:
        step.superseded = superseded


def _require_run(repository: Repository, run_id: str) -> AgentRun:
    run = repository.get_run(resolve_run_id(repository, run_id))
    if run is None:
        raise NotFoundError(f"no run {run_id!r} in the store")
    return run
