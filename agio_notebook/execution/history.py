"""Chat messages given by a caller (a seeded conversation) checked and turned into steps.

The stored step *is* the chat message, so a conversation that began elsewhere becomes steps of the
session before its first run: retry, fork, frames and transcripts then see it like any other.
Shapes are checked (by :mod:`agio_notebook.core.messages`, the one home of those rules) before anything
is stored; a wrong one is one line naming the message.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..core import Step, StepRole, ToolCall
from ..core.messages import check_messages

_ROLES = {"user": StepRole.USER, "assistant": StepRole.ASSISTANT, "tool": StepRole.TOOL}


def split_system(messages: Sequence[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """The leading system message's text (the run's system prompt) and the rest, all checked."""
    messages = check_messages(messages)
    if messages and messages[0]["role"] == "system":
        return messages[0].get("content"), messages[1:]
    return None, messages


def history_steps(messages: Sequence[dict[str, Any]], session_id: str) -> list[Step]:
    """Checked (non-system) messages as a session's opening steps, 1, 2, …, each following the last."""
    steps: list[Step] = []
    for sequence, msg in enumerate(messages, 1):
        steps.append(Step(session_id=session_id, run_id=None, sequence=sequence, role=_ROLES[msg["role"]],
                          content=msg.get("content"),
                          tool_calls=[ToolCall(c["id"], c["function"]["name"], c["function"]["arguments"])
                                      for c in msg.get("tool_calls") or ()],
                          tool_call_id=msg.get("tool_call_id"), name=msg.get("name"),
                          parent_ids=[steps[-1].id] if steps else []))
    return steps
