"""Feedback (ratings and comments) on runs and steps: checked against the store, then appended to memory."""

from __future__ import annotations

from typing import Any

from ..core import AgioError, NotFoundError
from ..storage.base import Repository
from ..storage.ids import resolve_run_id
from .records import Feedback
from .store import MemoryStore

_RATINGS = {"+1": 1, "1": 1, "up": 1, "good": 1, "-1": -1, "down": -1, "bad": -1}


def parse_rating(value: Any) -> int:
    """+1/-1 (also "up"/"down"); anything else is one clear error."""
    if isinstance(value, bool):
        raise AgioError(f"a rating is +1 or -1, got {value!r}")
    if isinstance(value, int) and value in (1, -1):
        return value
    if isinstance(value, str) and value.strip().lower() in _RATINGS:
        return _RATINGS[value.strip().lower()]
    raise AgioError(f"a rating is +1 or -1 (or up/down), got {value!r}")


def add_feedback(store: MemoryStore, repository: Repository, run_id: str, rating: Any, comment: str = "",
                 step: int | str | None = None, correction: str | None = None) -> Feedback:
    """Store a rating and comment on run ``run_id`` (or on its step: a sequence number or a step id);
    ``correction`` is the right answer (the rating must then be -1)."""
    score = parse_rating(rating)
    if correction is not None:
        if not isinstance(correction, str) or not correction.strip():
            raise AgioError(f"a correction is the right answer as text, got {correction!r}")
        if score > 0:
            raise AgioError("a correction says the answer was wrong: rate it -1")
    run_id = resolve_run_id(repository, run_id)  # a unique prefix of 6+ characters works too
    run = repository.get_run(run_id)
    if run is None:
        raise NotFoundError(f"no run {run_id!r} in the store; feedback needs a run id from %agio runs")
    step_id = sequence = None
    if step is not None:
        steps = [s for s in repository.get_steps(run.session_id, include_superseded=True) if s.run_id == run_id]
        found = next((s for s in steps if s.id == step or (isinstance(step, int) and s.sequence == step
                                                             and not s.superseded)), None)
        if found is None:
            raise NotFoundError(f"run {run_id[:8]} has no step {step!r}")
        step_id, sequence = found.id, found.sequence
    item = Feedback(run_id=run_id, rating=score, comment=str(comment or ""), session_id=run.session_id,
                    step_id=step_id, sequence=sequence, correction=correction.strip() if correction else None)
    store.put("feedback", [item])
    return item
