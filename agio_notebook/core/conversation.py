"""Which stored steps a model sees, and in what form: the one home of that rule.

A stored step *is* a chat message, with one exception: a ``memory_read`` step (what retrieval put into the
prompt) is recorded where it happened but reaches the model inside the system prompt, never as a message.
The engine's context, a retry's, a replay's, a rebuilt request's and the served transcripts all ask here.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from .step import Step

MEMORY_READ = "memory_read"  # ``Step.extra["kind"]`` of a memory_read step


def is_memory_step(step: Step | Mapping[str, Any]) -> bool:
    """A memory_read step (a :class:`Step` or its stored dict): shown, but sent inside the system prompt."""
    extra = step.extra if isinstance(step, Step) else (step.get("extra") or {})
    return extra.get("kind") == MEMORY_READ


def to_messages(steps: Iterable[Step]) -> list[dict[str, Any]]:
    """The chat messages ``steps`` are to a model, in order (memory_read steps left out)."""
    return [s.to_message() for s in steps if not is_memory_step(s)]


def current_at(steps: Iterable[Step], step: Step) -> list[Step]:
    """For each sequence before ``step``, the attempt that was current when ``step`` was made: the latest one
    created no later than it (a retry's attempts are created after the ones they supersede)."""
    chosen: dict[int, Step] = {}
    for s in steps:
        if s.sequence >= step.sequence or s.created_at > step.created_at or s.id == step.id:
            continue
        best = chosen.get(s.sequence)
        if best is None or (s.created_at, s.attempt) >= (best.created_at, best.attempt):
            chosen[s.sequence] = s
    return [chosen[q] for q in sorted(chosen)]
