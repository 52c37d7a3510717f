"""Build the model's context (chat messages) from stored steps.

A stored step is the chat message, so this is a filter and a map: drop
superseded attempts, order by sequence, prepend the system prompt.  The
runner builds it once per run and then appends each new step, so a turn
never rescans the history.
"""

from __future__ import annotations

from typing import Any, Iterable

from ..core import Step, StepRole
from ..storage.base import Repository


def steps_to_messages(steps: Iterable[Step], system_prompt: str | None = None) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt}] if system_prompt else []
    messages.extend(s.to_message() for s in steps if not s.superseded)
    return messages


def build_context_from_steps(session_id: str, repository: Repository,
                             system_prompt: str | None = None) -> list[dict[str, Any]]:
    """All current (non-superseded) steps of a session as chat messages."""
    return steps_to_messages(repository.get_steps(session_id), system_prompt)


def build_context_from_sequence_range(session_id: str, repository: Repository, start_seq: int, end_seq: int,
                                      system_prompt: str | None = None) -> list[dict[str, Any]]:
    """Steps ``start_seq..end_seq`` (inclusive) as chat messages, e.g. to window a long session."""
    return steps_to_messages(repository.get_steps(session_id, start_seq, end_seq), system_prompt)


def pending_tool_calls(steps: list[Step]) -> tuple[Step | None, list[str]]:
    """The last assistant step with tool calls still lacking results, and the ids lacking them.

    Used so a session is never sent to a model with dangling tool calls.
    """
    answered: set[str] = set()
    for step in reversed(steps):
        if step.role is StepRole.TOOL and step.tool_call_id:
            answered.add(step.tool_call_id)
        elif step.role is StepRole.ASSISTANT:
            missing = [c.id for c in step.tool_calls if c.id not in answered]
            return (step, missing) if missing else (None, [])
        else:
            return None, []
    return None, []
