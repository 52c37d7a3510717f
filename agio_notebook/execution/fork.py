"""Fork: a new session that starts as a copy of another one up to a sequence.

Copies get new ids (the original project reused them, and its upsert-by-id
moved the original steps into the fork); the fork records its origin.
"""

from __future__ import annotations

from dataclasses import replace

from ..core import AgentSession, NotFoundError, Step, new_id
from ..storage.base import Repository
from .retry import check_continuation_point, check_sequence_exists, session_steps


def attempt_steps(repository: Repository, run_id: str) -> list[Step]:
    """The conversation as attempt ``run_id`` left it: the current steps before its first step, then its
    own steps (superseded or not). For a current attempt, the session's current steps."""
    run = repository.get_run(run_id)
    if run is None:
        raise NotFoundError(f"no run {run_id!r} in the store")
    if run.superseded_by is None or run.start_sequence is None:
        return session_steps(repository, run.session_id)
    every = repository.get_steps(run.session_id, include_superseded=True)
    before = [s for s in every if not s.superseded and s.sequence < run.start_sequence]
    return sorted(before + [s for s in every if s.run_id == run_id], key=lambda s: s.sequence)


def fork_session(original_session_id: str, fork_at_sequence: int, repository: Repository, *,
                 attempt: str | None = None) -> str:
    """Copy steps ``1..fork_at_sequence`` into a new session; returns the new session id.

    With ``attempt`` (a run id of that session), the steps are that attempt's, even if a retry replaced it.
    """
    steps = attempt_steps(repository, attempt) if attempt is not None else session_steps(
        repository, original_session_id)
    check_sequence_exists(steps, fork_at_sequence, original_session_id)
    check_continuation_point(steps, fork_at_sequence, "fork")
    origin = repository.get_session(original_session_id)
    session = AgentSession(title=origin.title if origin else None, forked_from=original_session_id,
                           forked_at=fork_at_sequence)
    kept = [s for s in steps if s.sequence <= fork_at_sequence]
    new_ids = {s.id: new_id() for s in kept}  # the trace graph's parent ids point at the copies
    copies = [replace(s, id=new_ids[s.id], session_id=session.session_id, run_id=None, superseded=False,
                      tool_calls=list(s.tool_calls), extra={**s.extra, "copied_from": s.id},
                      metrics=replace(s.metrics), parent_ids=[new_ids.get(p, p) for p in s.parent_ids])
              for s in kept]
    repository.commit(session=session, steps=copies)
    return session.session_id
