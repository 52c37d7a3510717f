"""Build the model's context (chat messages) from stored steps.

A stored step is the chat message, so this is a filter and a map: drop
superseded attempts, order by sequence, prepend the system prompt.  The
runner builds it once per run and then appends each new step, so a turn
never rescans the history.
"""

from __future__ import annotations

from typing import Any, Iterable

from ..core import Step, StepRole
from ..core.conversation import is_memory_step, to_messages
from ..storage.base import Repository
from ..storage.ids import resolve_session_id
from ..tools.output import ACCEPTED, FINAL_RESULT


def steps_to_messages(steps: Iterable[Step], system_prompt: str | None = None) -> list[dict[str, Any]]:
    """Chat messages; a ``memory_read`` step after the last user step extends the system prompt instead
    (so a retry or resume sees the memory its run recorded)."""
    current = [s for s in steps if not s.superseded]
    block = inherited_memory(current)
    if block:
        system_prompt = f"{system_prompt}\n\n{block}" if system_prompt else block
    messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return messages + to_messages(current)


def inherited_memory(steps: list[Step]) -> str | None:
    """The memory block recorded after the last user step, if any."""
    for step in reversed(steps):
        if is_memory_step(step):
            return step.content
        if step.role is StepRole.USER:
            return None
    return None


def trailing_ids(steps: list[Step]) -> list[str]:
    """What the next step follows in the trace graph: the last tool batch, or the last step."""
    current = [s for s in steps if not s.superseded]
    if not current:
        return []
    if current[-1].role is not StepRole.TOOL:
        return [current[-1].id]
    batch = []
    for step in reversed(current):
        if step.role is not StepRole.TOOL:
            break
        batch.append(step.id)
    return batch[::-1]


def build_context_from_steps(session_id: str, repository: Repository,
                             system_prompt: str | None = None) -> list[dict[str, Any]]:
    """All current (non-superseded) steps of a session as chat messages."""
    return steps_to_messages(repository.get_steps(session_id), system_prompt)


def build_context_from_sequence_range(session_id: str, repository: Repository, start_seq: int, end_seq: int,
                                      system_prompt: str | None = None) -> list[dict[str, Any]]:
    """Steps ``start_seq..end_seq`` (inclusive) as chat messages, e.g. to window a long session."""
    session_id = resolve_session_id(repository, session_id)  # a unique prefix of 6+ characters works too
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


def answered_by(steps: list[Step]) -> Step | None:
    """The reply the steps end with as their answer, or None (they end in a question or an open call):
    a last reply without calls, or a typed agent's last reply whose ``final_result`` call was accepted
    (every call of it answered, nothing asked since). The one rule for "this conversation has its answer"."""
    if not steps or pending_tool_calls(steps)[0] is not None:
        return None
    last = steps[-1]
    if last.role is StepRole.ASSISTANT:
        return last
    answers: set[str] = set()
    for step in reversed(steps):
        if step.role is StepRole.TOOL:
            if step.name == FINAL_RESULT and step.status == "ok" and step.content == ACCEPTED and step.tool_call_id:
                answers.add(step.tool_call_id)
            continue
        if step.role is StepRole.ASSISTANT and any(c.id in answers for c in step.tool_calls):
            return step
        return None
    return None
