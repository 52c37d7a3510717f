"""Fork: a new session that starts as a copy of another one up to a sequence.

Copies get new ids (the original project reused them, and its upsert-by-id
moved the original steps into the fork); the fork records its origin.
"""

from __future__ import annotations

from dataclasses import replace

from ..agent import OWNER
from ..core import AgentSession, NotFoundError, Step, new_id
from ..models.recording import Recording
from ..storage import current_store
from ..storage.base import Repository
from ..storage.ids import resolve_session_id
from .retry import check_continuation_point, check_sequence_exists, check_step_of_run, session_steps, step_number


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


def fork_session(original_session_id: str, fork_at_sequence: int, repository: Repository | None = None, *,
                 attempt: str | None = None) -> str:
    """Copy steps ``1..fork_at_sequence`` into a new session (of the current store unless ``repository``
    is given); returns the new session id.

    With ``attempt`` (a run id of that session), the steps are that attempt's, even if a retry replaced it.
    """
    fork_at_sequence = step_number(fork_at_sequence, "the fork's step")
    repository = current_store(repository)
    original_session_id = resolve_session_id(repository, original_session_id)  # a unique 6+ prefix too
    steps = attempt_steps(repository, attempt) if attempt is not None else session_steps(
        repository, original_session_id)
    check_sequence_exists(steps, fork_at_sequence, original_session_id)
    if attempt is not None:
        check_step_of_run(repository, repository.get_run(attempt), fork_at_sequence, steps, "fork")  # type: ignore[arg-type]
    check_continuation_point(steps, fork_at_sequence, "fork")
    origin = repository.get_session(original_session_id)
    session = AgentSession(title=origin.title if origin else None, forked_from=original_session_id,
                           forked_at=fork_at_sequence,  # the same conversation: the same owner (agent.py)
                           metadata={OWNER: origin.metadata[OWNER]} if origin and OWNER in origin.metadata else {})
    kept = [s for s in steps if s.sequence <= fork_at_sequence]
    new_ids = {s.id: new_id() for s in kept}  # the trace graph's parent ids point at the copies
    copies = [replace(s, id=new_ids[s.id], session_id=session.session_id, run_id=None, superseded=False,
                      tool_calls=list(s.tool_calls), extra={**s.extra, "copied_from": s.id},
                      metrics=replace(s.metrics), parent_ids=[new_ids.get(p, p) for p in s.parent_ids])
              for s in kept]
    repository.commit(session=session, steps=copies)
    return session.session_id


def fork_recording(repository: Repository, session_id: str, steps: list[Step], *,
                   reuse: bool = False) -> Recording | None:
    """The record a fork's first run re-enters: every step of the session(s) it was copied from.

    ``steps`` are the fork's current steps. Only a fork none of whose steps a run wrote yet (nothing but
    copies) gets one, so ``fork_session`` followed by ``resume`` or a new query treats recorded calls of
    side-effect tools as ``runner.fork`` does (their ``on_replay``); later runs in the fork are its own.
    """
    if not steps or any(s.run_id is not None for s in steps):
        return None
    session = repository.get_session(session_id)
    seen: set[str] = {session_id}
    recorded: list[Step] = []
    while session is not None and session.forked_from and session.forked_from not in seen:
        seen.add(session.forked_from)
        recorded += repository.get_steps(session.forked_from, include_superseded=True)
        session = repository.get_session(session.forked_from)
    return Recording.from_steps(recorded, reuse=reuse) if recorded else None


def attempts_recording(repository: Repository, session_id: str) -> Recording | None:
    """The earlier attempts of a session (its superseded steps): what resuming a retry re-enters, as the
    retry itself did. Current steps are not in it: calls the conversation made stay its own."""
    earlier = [s for s in repository.get_steps(session_id, include_superseded=True) if s.superseded]
    return Recording.from_steps(earlier) if earlier else None
